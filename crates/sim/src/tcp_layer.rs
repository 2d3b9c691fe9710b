//! TCP on simulated hosts: the engine's [`Stack`]s driven by the kernel.
//!
//! A host that runs TCP gets one [`Stack`] per local address and TCP
//! configuration it uses (usually exactly one). The kernel hands the stack
//! every TCP datagram addressed to the host that no raw app has bound, and
//! the time; drains its transmissions into pooled packet buffers; turns its
//! events into [`crate::app::App::on_tcp`] calls and trace records; and
//! keeps a single timer event per host at the earliest deadline of its
//! connections, replaced whenever that deadline moves.
//!
//! Every connection is a *flow* ([`FlowId`]), numbered in the order flows
//! appear in the run: the report's `flows` table and the `flow` field of
//! TCP trace events use that number. Per-flow counters ([`TcpCounts`]) are
//! computed from the engine's typed trace events, whether or not a trace
//! sink is installed, so reports and trace files always agree.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use rand::RngCore;
use rtolab_tcp::rto::PathHint;
use rtolab_tcp::trace::{RetransmitCause, TimerKind, Trace, TraceEvent as EngineTrace, TraceLevel};
use rtolab_tcp::{
    Config, ConnError, ConnId, ConnectError, Connection, ConnectionStats, Event, IpHeader, Stack,
    State, TupleKey, Tuples,
};
use rtolab_time::SimTime;
use rtolab_wire::tcp::{TcpFlags, TcpRepr};
use serde::Serialize;

use crate::node::AppId;
use crate::node::NodeId;
use crate::rng::component_stream;

/// A TCP connection of a run: its index in the report's `flows` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub u32);

/// A TCP configuration registered with
/// [`crate::Simulator::add_tcp_config`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TcpConfigId(pub u32);

/// What a connection tells the app that owns it (the engine's
/// [`rtolab_tcp::Event`]s other than traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpEvent {
    /// The handshake completed. For a listening app this is the first event
    /// of a new flow.
    Connected,
    /// In-order data can be read with [`crate::app::AppCx::tcp_recv`].
    Readable,
    /// Send-buffer space was freed (data was acknowledged).
    Writable,
    /// The peer sent FIN: no more data will arrive.
    PeerClosed,
    /// The connection finished normally. Its last event.
    Closed,
    /// The peer reset the connection. Its last event.
    Reset,
    /// Retransmissions went unanswered and the connection was dropped. Its
    /// last event.
    TimedOut,
}

impl TcpEvent {
    /// Whether the flow is over after this event.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut
        )
    }

    fn from_engine(event: Event) -> Option<TcpEvent> {
        Some(match event {
            Event::Connected => TcpEvent::Connected,
            Event::Readable => TcpEvent::Readable,
            Event::Writable => TcpEvent::Writable,
            Event::PeerClosed => TcpEvent::PeerClosed,
            Event::Closed => TcpEvent::Closed,
            Event::Reset => TcpEvent::Reset,
            Event::TimedOut => TcpEvent::TimedOut,
            Event::Trace(_) => return None,
        })
    }
}

/// A TCP call of an app that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TcpError {
    /// The flow does not exist, is over, or belongs to another app.
    #[error("flow {} is not an open connection of this app", .0 .0)]
    UnknownFlow(FlowId),
    /// Another app already listens on the port.
    #[error("TCP port {port} is already listened on by app {}", .owner.0)]
    PortInUse {
        /// The port.
        port: u16,
        /// The app listening on it.
        owner: AppId,
    },
    /// The host has no route to the peer.
    #[error("no route to {0}")]
    NoRoute(IpAddr),
    /// Every local port towards the peer is taken.
    #[error("no free local port towards {0}")]
    NoFreePort(SocketAddr),
    /// The engine refused the call.
    #[error(transparent)]
    Conn(#[from] ConnError),
}

/// Counters of one or more connections, computed from the engine's trace
/// events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TcpCounts {
    /// Retransmitted segments (data, SYN or FIN), whatever the cause, not
    /// counting window probes and keep-alives: `retx_timeout + retx_fast`.
    pub retransmissions: u64,
    /// Segments resent because the retransmission timer expired (including
    /// the go-back resends that follow the first one).
    pub retx_timeout: u64,
    /// Segments resent by fast retransmit or SACK-based loss recovery.
    pub retx_fast: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Keep-alive probes sent.
    pub keepalive_probes: u64,
    /// Expiries of the retransmission timer.
    pub timeouts: u64,
    /// Duplicate ACKs this end sent.
    pub dup_acks_sent: u64,
    /// Duplicate ACKs this end received.
    pub dup_acks_received: u64,
    /// Retransmissions found to have been unnecessary (Eifel or DSACK).
    pub spurious_retransmissions: u64,
    /// RTT samples taken.
    pub rtt_samples: u64,
}

impl TcpCounts {
    /// Counts one engine trace event.
    pub fn record(&mut self, event: &EngineTrace) {
        match event {
            EngineTrace::Retransmission { cause, .. } => match cause {
                RetransmitCause::Timeout => {
                    self.retx_timeout += 1;
                    self.retransmissions += 1;
                }
                RetransmitCause::FastRetransmit => {
                    self.retx_fast += 1;
                    self.retransmissions += 1;
                }
                RetransmitCause::Probe => self.window_probes += 1,
                RetransmitCause::KeepAlive => self.keepalive_probes += 1,
            },
            EngineTrace::TimerFired {
                timer: TimerKind::Retransmit,
            } => self.timeouts += 1,
            EngineTrace::DupAckSent { .. } => self.dup_acks_sent += 1,
            EngineTrace::DupAckReceived { .. } => self.dup_acks_received += 1,
            EngineTrace::SpuriousRetransmission { .. } => self.spurious_retransmissions += 1,
            EngineTrace::RttSample { .. } => self.rtt_samples += 1,
            _ => {}
        }
    }

    /// Adds another set of counters to this one.
    pub fn add(&mut self, other: &TcpCounts) {
        self.retransmissions += other.retransmissions;
        self.retx_timeout += other.retx_timeout;
        self.retx_fast += other.retx_fast;
        self.window_probes += other.window_probes;
        self.keepalive_probes += other.keepalive_probes;
        self.timeouts += other.timeouts;
        self.dup_acks_sent += other.dup_acks_sent;
        self.dup_acks_received += other.dup_acks_received;
        self.spurious_retransmissions += other.spurious_retransmissions;
        self.rtt_samples += other.rtt_samples;
    }
}

/// The TCP side of an app's report row: its connections' counters summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TcpAppMetrics {
    /// Connections the app opened or accepted.
    pub connections: u64,
    /// Connections the app asked for that its host could not open: no
    /// free local port towards the peer (a real stack's `EADDRNOTAVAIL`)
    /// or no route to it.
    pub connect_errors: u64,
    /// Their counters, summed.
    #[serde(flatten)]
    pub counts: TcpCounts,
    /// State of its most recent connection when the run ended.
    pub final_state: Option<State>,
}

/// One TCP connection of a run, as reported.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowInfo {
    /// The host.
    pub node: NodeId,
    /// The app that owns it (`None` for a connection nobody accepted).
    pub app: Option<AppId>,
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// Name of the TCP profile it ran with.
    pub profile: String,
    /// Whether this end opened it.
    pub active_open: bool,
    /// State at the end of the run (or when it finished).
    pub state: State,
    /// When it was created.
    pub opened: SimTime,
    /// When it finished, if it did.
    pub closed: Option<SimTime>,
    /// Counters from the trace events.
    pub counts: TcpCounts,
    /// The engine's own counters (segments and bytes).
    pub stats: ConnectionStats,
}

/// A flow's bookkeeping.
struct Flow {
    node: NodeId,
    stack: u32,
    conn: ConnId,
    app: Option<AppId>,
    local: SocketAddr,
    remote: SocketAddr,
    config: TcpConfigId,
    active_open: bool,
    state: State,
    opened: SimTime,
    closed: Option<SimTime>,
    counts: TcpCounts,
    /// Snapshot of the engine's counters, taken when the flow is retired.
    stats: ConnectionStats,
    live: bool,
}

/// The key of a flow's 4-tuple. A stack is of one family and its
/// connections' ends are of that family, so a key always exists.
fn key_of(local: SocketAddr, remote: SocketAddr) -> TupleKey {
    TupleKey::of(local, remote).expect("a connection's ends share a family")
}

struct StackSlot {
    addr: IpAddr,
    config: TcpConfigId,
    stack: Stack,
    flows: ConnFlows,
}

/// The flow of each of a stack's connections. The engine numbers a stack's
/// connections in sequence, so a vector indexed by connection is a dense
/// map, looked up once per engine event.
#[derive(Default)]
struct ConnFlows(Vec<Option<FlowId>>);

impl ConnFlows {
    fn get(&self, conn: &ConnId) -> Option<&FlowId> {
        self.0.get(conn.0 as usize)?.as_ref()
    }

    fn insert(&mut self, conn: ConnId, flow: FlowId) {
        let i = conn.0 as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(flow);
    }

    fn remove(&mut self, conn: &ConnId) {
        if let Some(slot) = self.0.get_mut(conn.0 as usize) {
            *slot = None;
        }
    }
}

/// Which stack serves a 4-tuple, and its flow once known.
#[derive(Clone, Copy)]
struct Tuple {
    stack: u32,
    flow: Option<FlowId>,
}

#[derive(Clone, Copy)]
struct Listener {
    app: AppId,
    config: TcpConfigId,
}

/// The TCP state of one host.
#[derive(Default)]
pub(crate) struct HostTcp {
    default_config: Option<TcpConfigId>,
    stacks: Vec<StackSlot>,
    /// (local, remote) → stack; the engine's stacks each know only their
    /// own connections, and a host may have several.
    tuples: Tuples<Tuple>,
    listeners: BTreeMap<u16, Listener>,
    /// The instant of the pending timer event, if any.
    pub(crate) timer_at: Option<SimTime>,
    /// Identifies the pending timer event; older ones are stale.
    pub(crate) generation: u32,
    /// Timer events handled (stale ones excluded).
    pub(crate) wakeups: u64,
    /// The stacks may have output or events to collect.
    dirty: bool,
    /// On the kernel's list of hosts to flush (or being flushed).
    listed: bool,
    /// The host runs smoltcp (kept by the simulator) rather than our
    /// engine; this layer only schedules its flushes and timer.
    smoltcp: bool,
}

impl HostTcp {
    /// Whether the host takes part in TCP (otherwise TCP datagrams nobody
    /// bound are dropped as for any other protocol).
    pub(crate) fn active(&self) -> bool {
        self.smoltcp
            || self.default_config.is_some()
            || !self.stacks.is_empty()
            || !self.listeners.is_empty()
    }

    /// The earliest deadline of any connection.
    pub(crate) fn next_deadline(&self) -> Option<SimTime> {
        self.stacks
            .iter()
            .filter_map(|s| s.stack.poll_timeout())
            .min()
    }

    pub(crate) fn stack_count(&self) -> usize {
        self.stacks.len()
    }
}

/// What collecting one engine event produced.
pub(crate) enum Drained {
    /// A trace record of `flow`, owned by `app`.
    Trace {
        flow: FlowId,
        app: Option<AppId>,
        trace: Trace,
    },
    /// An app event (queued in `notes`) or nothing to report.
    Other,
}

/// Every host's TCP state, the configurations and the flow table.
#[derive(Default)]
pub(crate) struct TcpLayer {
    seed: u64,
    configs: Vec<Arc<Config>>,
    /// The Linux-like profile, registered on first use by a host or app
    /// that was given no configuration.
    fallback: Option<TcpConfigId>,
    pub(crate) hosts: Vec<HostTcp>,
    flows: Vec<Flow>,
    /// App events waiting to be delivered, in the order they happened.
    pub(crate) notes: VecDeque<(AppId, FlowId, TcpEvent)>,
    dirty: Vec<u32>,
    /// Transmit buffer, swapped with pooled packet buffers so no datagram
    /// is copied or allocated.
    pub(crate) buf: Vec<u8>,
    /// What the engine records: only what [`TcpCounts`] and flow states
    /// need, unless a trace sink wants everything.
    trace_level: TraceLevel,
    /// [`TcpAppMetrics::connect_errors`] of the apps that had any.
    connect_errors: BTreeMap<AppId, u64>,
}

impl TcpLayer {
    pub(crate) fn new(seed: u64) -> Self {
        TcpLayer {
            seed,
            buf: Vec::with_capacity(1536),
            trace_level: TraceLevel::Counters,
            ..TcpLayer::default()
        }
    }

    /// Sets what every stack's connections record, now and later.
    pub(crate) fn set_trace_level(&mut self, level: TraceLevel) {
        self.trace_level = level;
        for host in &mut self.hosts {
            for slot in &mut host.stacks {
                slot.stack.set_trace_level(level);
            }
        }
    }

    pub(crate) fn add_node(&mut self) {
        self.hosts.push(HostTcp::default());
    }

    pub(crate) fn add_config(&mut self, config: Config) -> TcpConfigId {
        self.configs.push(Arc::new(config));
        TcpConfigId((self.configs.len() - 1) as u32)
    }

    pub(crate) fn config(&self, id: TcpConfigId) -> &Arc<Config> {
        &self.configs[id.0 as usize]
    }

    pub(crate) fn set_host_smoltcp(&mut self, node: NodeId) {
        self.hosts[node.0 as usize].smoltcp = true;
    }

    pub(crate) fn set_host_config(&mut self, node: NodeId, config: TcpConfigId) {
        self.hosts[node.0 as usize].default_config = Some(config);
    }

    /// The configuration an app on `node` uses: its own, else the host's,
    /// else the Linux-like profile.
    pub(crate) fn config_for(&mut self, node: NodeId, app: Option<TcpConfigId>) -> TcpConfigId {
        if let Some(id) = app.or(self.hosts[node.0 as usize].default_config) {
            return id;
        }
        match self.fallback {
            Some(id) => id,
            None => {
                let id = self.add_config(Config::from_profile(rtolab_tcp::Profile::linux()));
                self.fallback = Some(id);
                id
            }
        }
    }

    /// The stack of `node` for `addr` and `config`, created on first use.
    fn stack_index(
        &mut self,
        node: NodeId,
        node_name: &str,
        addr: IpAddr,
        config: TcpConfigId,
    ) -> u32 {
        let host = &mut self.hosts[node.0 as usize];
        if let Some(i) = host
            .stacks
            .iter()
            .position(|s| s.addr == addr && s.config == config)
        {
            return i as u32;
        }
        // Named by host, address and configuration so that adding other
        // components never changes a stack's initial sequence numbers.
        let seed =
            component_stream(self.seed, &format!("tcp/{node_name}/{addr}/{}", config.0)).next_u64();
        let mut stack = Stack::new(self.configs[config.0 as usize].clone(), addr, seed);
        stack.set_trace_level(self.trace_level);
        host.stacks.push(StackSlot {
            addr,
            config,
            stack,
            flows: ConnFlows::default(),
        });
        (host.stacks.len() - 1) as u32
    }

    /// The node's link layer warned of an outage (`going_down`) or said
    /// the link is back: hosts running Freeze-TCP freeze or thaw.
    pub(crate) fn link_warning(&mut self, now: SimTime, node: NodeId, going_down: bool) {
        let host = &mut self.hosts[node.0 as usize];
        if host.stacks.is_empty() {
            return;
        }
        for slot in &mut host.stacks {
            slot.stack.link_warning(now, going_down);
        }
        self.mark(node);
    }

    /// Notes that `node`'s stacks need collecting.
    pub(crate) fn mark(&mut self, node: NodeId) {
        let host = &mut self.hosts[node.0 as usize];
        host.dirty = true;
        if !host.listed {
            host.listed = true;
            self.dirty.push(node.0);
        }
    }

    /// A host waiting to be flushed; it stays listed until
    /// [`TcpLayer::end_flush`].
    pub(crate) fn next_dirty(&mut self) -> Option<NodeId> {
        self.dirty.pop().map(NodeId)
    }

    /// Takes the host's dirty flag.
    pub(crate) fn take_dirty(&mut self, node: NodeId) -> bool {
        std::mem::take(&mut self.hosts[node.0 as usize].dirty)
    }

    pub(crate) fn end_flush(&mut self, node: NodeId) {
        self.hosts[node.0 as usize].listed = false;
    }

    pub(crate) fn listen(
        &mut self,
        node: NodeId,
        app: AppId,
        config: TcpConfigId,
        port: u16,
    ) -> Result<(), TcpError> {
        let host = &mut self.hosts[node.0 as usize];
        match host.listeners.get(&port) {
            Some(l) if l.app != app => Err(TcpError::PortInUse { port, owner: l.app }),
            _ => {
                host.listeners.insert(port, Listener { app, config });
                Ok(())
            }
        }
    }

    /// Opens a connection from `local_addr` to `remote` for `app`, from
    /// `local_port` if given (else an ephemeral port); `path` is what the
    /// outgoing link knows of the path, for the RTO policy.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn connect(
        &mut self,
        now: SimTime,
        node: NodeId,
        node_name: &str,
        app: AppId,
        config: TcpConfigId,
        local_addr: IpAddr,
        remote: SocketAddr,
        local_port: Option<u16>,
        path: Option<PathHint>,
    ) -> Result<FlowId, TcpError> {
        let s = self.stack_index(node, node_name, local_addr, config);
        let host = &mut self.hosts[node.0 as usize];
        let slot = &mut host.stacks[s as usize];
        // Each engine stack avoids only its own ports; the host's other
        // stacks and listeners say which ports they leave free.
        let (listeners, tuples) = (&host.listeners, &host.tuples);
        let host_free = |p: u16| {
            !listeners.contains_key(&p)
                && !tuples.contains_key(&key_of(SocketAddr::new(local_addr, p), remote))
        };
        let id = slot
            .stack
            .try_connect_from(now, remote, local_port, path, host_free)
            .map_err(|e| match e {
                // The source address was chosen for the remote's family, so
                // a mismatch means no address of that family routes there.
                ConnectError::FamilyMismatch { .. } => TcpError::NoRoute(remote.ip()),
                ConnectError::NoFreePort { .. } => TcpError::NoFreePort(remote),
            })?;
        let Some(local) = slot.stack.conn(id).map(Connection::local) else {
            return Err(TcpError::NoFreePort(remote));
        };
        let flow = FlowId(self.flows.len() as u32);
        self.flows.push(Flow {
            node,
            stack: s,
            conn: id,
            app: Some(app),
            local,
            remote,
            config,
            active_open: true,
            state: State::SynSent,
            opened: now,
            closed: None,
            counts: TcpCounts::default(),
            stats: ConnectionStats::default(),
            live: true,
        });
        slot.flows.insert(id, flow);
        host.tuples.insert(
            key_of(local, remote),
            Tuple {
                stack: s,
                flow: Some(flow),
            },
        );
        self.mark(node);
        Ok(flow)
    }

    /// The open flow `flow` of `app` on `node`.
    fn owned(&self, node: NodeId, app: AppId, flow: FlowId) -> Result<&Flow, TcpError> {
        match self.flows.get(flow.0 as usize) {
            Some(f) if f.live && f.node == node && f.app == Some(app) => Ok(f),
            _ => Err(TcpError::UnknownFlow(flow)),
        }
    }

    pub(crate) fn conn(
        &self,
        node: NodeId,
        app: AppId,
        flow: FlowId,
    ) -> Result<&Connection, TcpError> {
        let f = self.owned(node, app, flow)?;
        self.hosts[node.0 as usize].stacks[f.stack as usize]
            .stack
            .conn(f.conn)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    /// Queues `data` on `flow`'s send buffer with `queue_on` (the engine's
    /// `send` or `send_shared`).
    pub(crate) fn send(
        &mut self,
        node: NodeId,
        app: AppId,
        flow: FlowId,
        queue_on: impl FnOnce(&mut Stack, ConnId) -> Option<Result<usize, ConnError>>,
    ) -> Result<usize, TcpError> {
        let f = self.owned(node, app, flow)?;
        let (stack, conn) = (f.stack, f.conn);
        let stack = &mut self.hosts[node.0 as usize].stacks[stack as usize].stack;
        let queued = queue_on(stack, conn).ok_or(TcpError::UnknownFlow(flow))??;
        if queued > 0 {
            self.mark(node);
        }
        Ok(queued)
    }

    /// Reads `flow`'s in-order bytes into `buf` (the engine's `recv`). The
    /// host is flushed afterwards only when the read made the connection
    /// want to send (a window update): a read changes nothing else.
    pub(crate) fn recv(
        &mut self,
        node: NodeId,
        app: AppId,
        flow: FlowId,
        buf: &mut [u8],
    ) -> Result<usize, TcpError> {
        let f = self.owned(node, app, flow)?;
        let (stack, conn) = (f.stack, f.conn);
        let stack = &mut self.hosts[node.0 as usize].stacks[stack as usize].stack;
        let read = stack.recv(conn, buf).ok_or(TcpError::UnknownFlow(flow))?;
        if stack.conn(conn).is_some_and(Connection::ack_due) {
            self.mark(node);
        }
        Ok(read)
    }

    /// The connection of `flow`, for an app call that may produce output.
    pub(crate) fn conn_mut(
        &mut self,
        node: NodeId,
        app: AppId,
        flow: FlowId,
    ) -> Result<&mut Connection, TcpError> {
        let f = self.owned(node, app, flow)?;
        let (stack, conn) = (f.stack, f.conn);
        self.mark(node);
        self.hosts[node.0 as usize].stacks[stack as usize]
            .stack
            .conn_mut(conn)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    /// Hands a received segment (of either family) to the right stack;
    /// returns the app it is for, when known.
    pub(crate) fn input<H: IpHeader>(
        &mut self,
        now: SimTime,
        node: NodeId,
        node_name: &str,
        ip: &H,
        tcp: &TcpRepr,
    ) -> Option<AppId> {
        let key = ip.tuple_key(tcp);
        let plain_syn = tcp.flags.contains(TcpFlags::SYN)
            && !tcp.flags.contains(TcpFlags::ACK)
            && !tcp.flags.contains(TcpFlags::RST);
        let host = &self.hosts[node.0 as usize];
        let known = host.tuples.get(&key).copied();
        let listener = match known {
            Some(_) => None,
            None => host.listeners.get(&tcp.dst_port).copied(),
        };
        let (s, app) = match (known, listener) {
            (Some(t), _) => (t.stack, t.flow.and_then(|f| self.flows[f.0 as usize].app)),
            (None, Some(l)) if plain_syn => {
                let s = self.stack_index(node, node_name, ip.dst_addr(), l.config);
                let host = &mut self.hosts[node.0 as usize];
                host.stacks[s as usize].stack.listen(tcp.dst_port);
                host.tuples.insert(
                    key,
                    Tuple {
                        stack: s,
                        flow: None,
                    },
                );
                (s, Some(l.app))
            }
            // Nobody wants it: the host's own stack answers with a reset.
            _ => {
                let config = self.config_for(node, None);
                (
                    self.stack_index(node, node_name, ip.dst_addr(), config),
                    None,
                )
            }
        };
        self.hosts[node.0 as usize].stacks[s as usize]
            .stack
            .handle_segment(now, ip, tcp);
        self.mark(node);
        app
    }

    /// Fires the due timers of every stack of `node`.
    pub(crate) fn handle_timeout(&mut self, now: SimTime, node: NodeId) {
        for slot in &mut self.hosts[node.0 as usize].stacks {
            slot.stack.handle_timeout(now);
        }
        self.mark(node);
    }

    /// Writes the next datagram of stack `s` of `node` into `self.buf`.
    pub(crate) fn poll_transmit(&mut self, now: SimTime, node: NodeId, s: usize) -> Option<usize> {
        self.hosts[node.0 as usize].stacks[s]
            .stack
            .poll_transmit(now, &mut self.buf)
    }

    /// Collects the next event of stack `s` of `node`: traces are counted
    /// and returned, app events queued in `notes`. `None` when there are
    /// no more.
    pub(crate) fn poll_event(&mut self, now: SimTime, node: NodeId, s: usize) -> Option<Drained> {
        let (conn, event) = self.hosts[node.0 as usize].stacks[s].stack.poll_event()?;
        let flow = self.flow_of(now, node, s, conn);
        let f = &mut self.flows[flow.0 as usize];
        if let Event::Trace(trace) = event {
            f.counts.record(&trace.event);
            if let EngineTrace::State { to, .. } = trace.event {
                f.state = to;
            }
            return Some(Drained::Trace {
                flow,
                app: f.app,
                trace,
            });
        }
        let Some(event) = TcpEvent::from_engine(event) else {
            return Some(Drained::Other);
        };
        if event == TcpEvent::Connected && !f.active_open {
            // The engine also queues accepted connections per port; we
            // hand them to the listening app directly, so keep its queue
            // empty.
            let port = f.local.port();
            let _ = self.hosts[node.0 as usize].stacks[s].stack.accept(port);
        }
        match f.app {
            Some(app) => self.notes.push_back((app, flow, event)),
            None if event.is_final() => self.retire(now, flow),
            None => {}
        }
        Some(Drained::Other)
    }

    /// The flow of connection `conn` of stack `s`, created for connections
    /// the stack accepted on its own.
    fn flow_of(&mut self, now: SimTime, node: NodeId, s: usize, conn: ConnId) -> FlowId {
        let host = &mut self.hosts[node.0 as usize];
        let slot = &mut host.stacks[s];
        if let Some(flow) = slot.flows.get(&conn) {
            return *flow;
        }
        let (local, remote, active_open, state) = slot
            .stack
            .conn(conn)
            .map(|c| (c.local(), c.remote(), c.is_active_open(), c.state()))
            .unwrap_or_else(|| {
                let unspecified = match slot.addr {
                    IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                };
                (
                    SocketAddr::new(slot.addr, 0),
                    SocketAddr::new(unspecified, 0),
                    false,
                    State::Closed,
                )
            });
        let app = if active_open {
            None
        } else {
            host.listeners.get(&local.port()).map(|l| l.app)
        };
        let flow = FlowId(self.flows.len() as u32);
        self.flows.push(Flow {
            node,
            stack: s as u32,
            conn,
            app,
            local,
            remote,
            config: slot.config,
            active_open,
            state,
            opened: now,
            closed: None,
            counts: TcpCounts::default(),
            stats: ConnectionStats::default(),
            live: true,
        });
        slot.flows.insert(conn, flow);
        host.tuples.insert(
            key_of(local, remote),
            Tuple {
                stack: s as u32,
                flow: Some(flow),
            },
        );
        flow
    }

    /// Forgets a finished flow's connection, keeping its counters.
    pub(crate) fn retire(&mut self, now: SimTime, flow: FlowId) {
        let f = &mut self.flows[flow.0 as usize];
        if !f.live {
            return;
        }
        f.live = false;
        f.closed = Some(now);
        let host = &mut self.hosts[f.node.0 as usize];
        let slot = &mut host.stacks[f.stack as usize];
        slot.flows.remove(&f.conn);
        if let Some(conn) = slot.stack.remove(f.conn) {
            f.stats = conn.stats();
            f.state = conn.state();
        }
        if host
            .tuples
            .get(&key_of(f.local, f.remote))
            .is_some_and(|t| t.flow == Some(flow))
        {
            host.tuples.remove(&key_of(f.local, f.remote));
        }
    }

    pub(crate) fn timer_wakeups(&self) -> u64 {
        self.hosts.iter().map(|h| h.wakeups).sum()
    }

    pub(crate) fn flow_count(&self) -> usize {
        self.flows.len()
    }

    pub(crate) fn flow_info(&self, flow: FlowId) -> FlowInfo {
        let f = &self.flows[flow.0 as usize];
        let live = f
            .live
            .then(|| {
                self.hosts[f.node.0 as usize].stacks[f.stack as usize]
                    .stack
                    .conn(f.conn)
            })
            .flatten();
        FlowInfo {
            node: f.node,
            app: f.app,
            local: f.local,
            remote: f.remote,
            profile: self.configs[f.config.0 as usize].profile.name.clone(),
            active_open: f.active_open,
            state: live.map_or(f.state, Connection::state),
            opened: f.opened,
            closed: f.closed,
            counts: f.counts,
            stats: live.map_or(f.stats, Connection::stats),
        }
    }

    /// The connection behind a flow, while it is open.
    pub(crate) fn connection(&self, flow: FlowId) -> Option<&Connection> {
        let f = self.flows.get(flow.0 as usize)?;
        if !f.live {
            return None;
        }
        self.hosts[f.node.0 as usize].stacks[f.stack as usize]
            .stack
            .conn(f.conn)
    }

    /// The summed counters of `app`'s flows.
    /// Counts a connection `app` asked for that its host could not open.
    pub(crate) fn connect_failed(&mut self, app: AppId) {
        *self.connect_errors.entry(app).or_default() += 1;
    }

    pub(crate) fn app_metrics(&self, app: AppId) -> TcpAppMetrics {
        let mut m = TcpAppMetrics {
            connect_errors: self.connect_errors.get(&app).copied().unwrap_or(0),
            ..TcpAppMetrics::default()
        };
        for (i, f) in self.flows.iter().enumerate() {
            if f.app == Some(app) {
                m.connections += 1;
                m.counts.add(&f.counts);
                m.final_state = Some(self.flow_info(FlowId(i as u32)).state);
            }
        }
        m
    }
}
