//! Our engine behind the host-stack seam: one engine [`Stack`] per local
//! address and TCP configuration a host's connections use (usually exactly
//! one), with the host's listeners and the 4-tuples that say which stack
//! serves a segment.

use std::any::Any;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use rand::RngCore;
use rtolab_tcp::trace::{Trace, TraceEvent as EngineTrace, TraceLevel};
use rtolab_tcp::{
    parse_tcp, Bytes, ConnError, ConnId, ConnectError, Connection, ConnectionStats, Event,
    IpHeader, IpRepr, ParsedIp, Stack, State, TupleKey, Tuples,
};
use rtolab_time::SimTime;
use rtolab_wire::ipv4::protocol;
use rtolab_wire::tcp::{TcpFlags, TcpRepr};

use crate::node::AppId;
use crate::rng::component_stream;

use super::flows::{Flow, FlowId, TcpConfigId, TcpCounts, TcpError, TcpEvent, TcpRun};
use super::seam::{BadSegment, HostStack, Route, StackCx, StackOutput};

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

/// Our engine as a host's stack: one engine [`Stack`] per local address and
/// configuration the host's connections use.
#[derive(Default)]
pub struct EngineHost {
    default_config: Option<TcpConfigId>,
    stacks: Vec<StackSlot>,
    /// (local, remote) → stack; the engine's stacks each know only their
    /// own connections, and a host may have several.
    tuples: Tuples<Tuple>,
    listeners: BTreeMap<u16, Listener>,
    /// Where the collection in progress is: the stack, and whether its
    /// transmissions are done (its events come next).
    drain_stack: usize,
    drain_events: bool,
}

impl EngineHost {
    /// The configuration an app uses: its own, else the host's, else the
    /// Linux-like profile.
    fn config_for(&self, run: &mut TcpRun, app: Option<TcpConfigId>) -> TcpConfigId {
        match app.or(self.default_config) {
            Some(id) => id,
            None => run.fallback(),
        }
    }

    /// The stack for `addr` and `config`, created on first use.
    fn stack_index(&mut self, cx: &StackCx<'_>, addr: IpAddr, config: TcpConfigId) -> u32 {
        if let Some(i) = self
            .stacks
            .iter()
            .position(|s| s.addr == addr && s.config == config)
        {
            return i as u32;
        }
        // Named by host, address and configuration so that adding other
        // components never changes a stack's initial sequence numbers.
        let seed = component_stream(
            cx.run.seed,
            &format!("tcp/{}/{addr}/{}", cx.node_name, config.0),
        )
        .next_u64();
        let mut stack = Stack::new(cx.run.configs[config.0 as usize].clone(), addr, seed);
        stack.set_trace_level(cx.run.trace_level);
        self.stacks.push(StackSlot {
            addr,
            config,
            stack,
            flows: ConnFlows::default(),
        });
        (self.stacks.len() - 1) as u32
    }

    /// The stack and connection of `app`'s open flow `flow`.
    fn owned(cx: &StackCx<'_>, app: AppId, flow: FlowId) -> Result<(usize, ConnId), TcpError> {
        let f = cx.run.owned(cx.node, app, flow)?;
        Ok((f.stack as usize, f.conn))
    }

    /// Queues `data` on `flow`'s send buffer with `queue_on` (the engine's
    /// `send` or `send_shared`).
    fn queue(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        queue_on: impl FnOnce(&mut Stack, ConnId) -> Option<Result<usize, ConnError>>,
    ) -> Result<usize, TcpError> {
        let (s, conn) = Self::owned(cx, app, flow)?;
        let queued =
            queue_on(&mut self.stacks[s].stack, conn).ok_or(TcpError::UnknownFlow(flow))??;
        if queued > 0 {
            cx.wake();
        }
        Ok(queued)
    }

    /// The connection of `flow`, for an app call that may produce output.
    fn conn_mut(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<&mut Connection, TcpError> {
        let (s, conn) = Self::owned(cx, app, flow)?;
        cx.wake();
        self.stacks[s]
            .stack
            .conn_mut(conn)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    /// Hands a received segment (of either family) to the right stack;
    /// returns the app it is for, when known.
    fn segment<H: IpHeader>(
        &mut self,
        cx: &mut StackCx<'_>,
        ip: &H,
        tcp: &TcpRepr,
    ) -> Option<AppId> {
        let key = ip.tuple_key(tcp);
        let plain_syn = tcp.flags.contains(TcpFlags::SYN)
            && !tcp.flags.contains(TcpFlags::ACK)
            && !tcp.flags.contains(TcpFlags::RST);
        let known = self.tuples.get(&key).copied();
        let listener = match known {
            Some(_) => None,
            None => self.listeners.get(&tcp.dst_port).copied(),
        };
        let (s, app) = match (known, listener) {
            (Some(t), _) => (t.stack, t.flow.and_then(|f| cx.run.flows[f.0 as usize].app)),
            (None, Some(l)) if plain_syn => {
                let s = self.stack_index(cx, ip.dst_addr(), l.config);
                self.stacks[s as usize].stack.listen(tcp.dst_port);
                self.tuples.insert(
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
                let config = self.config_for(cx.run, None);
                (self.stack_index(cx, ip.dst_addr(), config), None)
            }
        };
        self.stacks[s as usize]
            .stack
            .handle_segment(cx.now, ip, tcp);
        cx.wake();
        app
    }

    /// Collects the next event of stack `s`: traces are counted and
    /// returned, app events queued in the run's notes. `None` when there
    /// are no more.
    fn poll_event(&mut self, cx: &mut StackCx<'_>, s: usize) -> Option<Drained> {
        let (conn, event) = self.stacks[s].stack.poll_event()?;
        let flow = self.flow_of(cx, s, conn);
        let f = &mut cx.run.flows[flow.0 as usize];
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
            let _ = self.stacks[s].stack.accept(port);
        }
        match f.app {
            Some(app) => cx.notify(app, flow, event),
            None if event.is_final() => self.retire(cx, flow),
            None => {}
        }
        Some(Drained::Other)
    }

    /// The flow of connection `conn` of stack `s`, created for connections
    /// the stack accepted on its own.
    fn flow_of(&mut self, cx: &mut StackCx<'_>, s: usize, conn: ConnId) -> FlowId {
        let slot = &mut self.stacks[s];
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
            self.listeners.get(&local.port()).map(|l| l.app)
        };
        let flow = FlowId(cx.run.flows.len() as u32);
        cx.run.flows.push(Flow {
            node: cx.node,
            stack: s as u32,
            conn,
            app,
            local,
            remote,
            config: slot.config,
            active_open,
            state,
            opened: cx.now,
            closed: None,
            counts: TcpCounts::default(),
            stats: ConnectionStats::default(),
            live: true,
        });
        slot.flows.insert(conn, flow);
        self.tuples.insert(
            key_of(local, remote),
            Tuple {
                stack: s as u32,
                flow: Some(flow),
            },
        );
        flow
    }

    /// Forgets a finished flow's connection, keeping its counters.
    fn retire(&mut self, cx: &mut StackCx<'_>, flow: FlowId) {
        let f = &mut cx.run.flows[flow.0 as usize];
        if !f.live {
            return;
        }
        f.live = false;
        f.closed = Some(cx.now);
        let slot = &mut self.stacks[f.stack as usize];
        slot.flows.remove(&f.conn);
        if let Some(conn) = slot.stack.remove(f.conn) {
            f.stats = conn.stats();
            f.state = conn.state();
        }
        if self
            .tuples
            .get(&key_of(f.local, f.remote))
            .is_some_and(|t| t.flow == Some(flow))
        {
            self.tuples.remove(&key_of(f.local, f.remote));
        }
    }
}

impl HostStack for EngineHost {
    fn takes_tcp(&self) -> bool {
        self.default_config.is_some() || !self.stacks.is_empty() || !self.listeners.is_empty()
    }

    fn listen(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        config: Option<TcpConfigId>,
        port: u16,
    ) -> Result<(), TcpError> {
        let config = self.config_for(cx.run, config);
        match self.listeners.get(&port) {
            Some(l) if l.app != app => Err(TcpError::PortInUse { port, owner: l.app }),
            _ => {
                self.listeners.insert(port, Listener { app, config });
                Ok(())
            }
        }
    }

    fn connect(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        config: Option<TcpConfigId>,
        remote: SocketAddr,
        local_port: Option<u16>,
        route: Route,
    ) -> Result<FlowId, TcpError> {
        let local_addr = route.local.ok_or(TcpError::NoRoute(remote.ip()))?;
        let config = self.config_for(cx.run, config);
        let s = self.stack_index(cx, local_addr, config);
        let slot = &mut self.stacks[s as usize];
        // Each engine stack avoids only its own ports; the host's other
        // stacks and listeners say which ports they leave free.
        let (listeners, tuples) = (&self.listeners, &self.tuples);
        let host_free = |p: u16| {
            !listeners.contains_key(&p)
                && !tuples.contains_key(&key_of(SocketAddr::new(local_addr, p), remote))
        };
        let id = slot
            .stack
            .try_connect_from(cx.now, remote, local_port, route.path, host_free)
            .map_err(|e| match e {
                // The source address was chosen for the remote's family, so
                // a mismatch means no address of that family routes there.
                ConnectError::FamilyMismatch { .. } => TcpError::NoRoute(remote.ip()),
                ConnectError::NoFreePort { .. } => TcpError::NoFreePort(remote),
            })?;
        let Some(local) = slot.stack.conn(id).map(Connection::local) else {
            return Err(TcpError::NoFreePort(remote));
        };
        let flow = FlowId(cx.run.flows.len() as u32);
        cx.run.flows.push(Flow {
            node: cx.node,
            stack: s,
            conn: id,
            app: Some(app),
            local,
            remote,
            config,
            active_open: true,
            state: State::SynSent,
            opened: cx.now,
            closed: None,
            counts: TcpCounts::default(),
            stats: ConnectionStats::default(),
            live: true,
        });
        slot.flows.insert(id, flow);
        self.tuples.insert(
            key_of(local, remote),
            Tuple {
                stack: s,
                flow: Some(flow),
            },
        );
        cx.wake();
        Ok(flow)
    }

    fn send(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        data: &[u8],
    ) -> Result<usize, TcpError> {
        self.queue(cx, app, flow, |stack, conn| stack.send(conn, data))
    }

    fn send_shared(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        data: Bytes,
    ) -> Result<usize, TcpError> {
        self.queue(cx, app, flow, |stack, conn| stack.send_shared(conn, data))
    }

    /// The host is collected afterwards only when the read made the
    /// connection want to send (a window update): a read changes nothing
    /// else.
    fn recv(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        buf: &mut [u8],
    ) -> Result<usize, TcpError> {
        let (s, conn) = Self::owned(cx, app, flow)?;
        let stack = &mut self.stacks[s].stack;
        let read = stack.recv(conn, buf).ok_or(TcpError::UnknownFlow(flow))?;
        if stack.conn(conn).is_some_and(Connection::ack_due) {
            cx.wake();
        }
        Ok(read)
    }

    fn close(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        let now = cx.now;
        self.conn_mut(cx, app, flow)?.close(now);
        Ok(())
    }

    fn abort(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        let now = cx.now;
        self.conn_mut(cx, app, flow)?.abort(now);
        Ok(())
    }

    fn connection(&self, run: &TcpRun, app: Option<AppId>, flow: FlowId) -> Option<&Connection> {
        let f = run.flows.get(flow.0 as usize)?;
        if app.is_some() && f.app != app {
            return None;
        }
        self.stacks.get(f.stack as usize)?.stack.conn(f.conn)
    }

    fn connections_over(&self, run: &TcpRun, app: AppId) -> bool {
        run.flows
            .iter()
            .enumerate()
            .filter(|(_, f)| f.live && f.app == Some(app))
            .all(|(i, _)| {
                self.connection(run, None, FlowId(i as u32))
                    .map_or(true, |c| {
                        matches!(c.state(), State::Closed | State::TimeWait)
                    })
            })
    }

    fn accepted(&self, run: &TcpRun, flow: FlowId) -> bool {
        run.flows
            .get(flow.0 as usize)
            .is_some_and(|f| !f.active_open)
    }

    fn send_capacity(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<usize, TcpError> {
        let (s, conn) = Self::owned(cx, app, flow)?;
        self.stacks[s]
            .stack
            .conn(conn)
            .map(Connection::send_capacity)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    fn bytes_acked(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<u64, TcpError> {
        let (s, conn) = Self::owned(cx, app, flow)?;
        self.stacks[s]
            .stack
            .conn(conn)
            .map(|c| c.stats().bytes_acked)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    fn input(
        &mut self,
        cx: &mut StackCx<'_>,
        datagram: &[u8],
    ) -> Result<Option<AppId>, BadSegment> {
        let ip = ParsedIp::parse(datagram, true)?;
        self.input_parsed(cx, &ip, datagram)
    }

    fn input_parsed(
        &mut self,
        cx: &mut StackCx<'_>,
        ip: &ParsedIp,
        datagram: &[u8],
    ) -> Result<Option<AppId>, BadSegment> {
        if ip.protocol() != protocol::TCP {
            return Err(BadSegment::NotTcp);
        }
        let tcp = parse_tcp(ip, &datagram[ip.payload()])?;
        Ok(match &ip.header {
            IpRepr::V4(h) => self.segment(cx, h, &tcp),
            IpRepr::V6(h) => self.segment(cx, h, &tcp),
        })
    }

    /// Fires the due timers of every stack of the host.
    fn timeout(&mut self, cx: &mut StackCx<'_>) {
        for slot in &mut self.stacks {
            slot.stack.handle_timeout(cx.now);
        }
        cx.wake();
    }

    /// Hosts running Freeze-TCP freeze or thaw.
    fn link_warning(&mut self, cx: &mut StackCx<'_>, going_down: bool) {
        if self.stacks.is_empty() {
            return;
        }
        for slot in &mut self.stacks {
            slot.stack.link_warning(cx.now, going_down);
        }
        cx.wake();
    }

    /// Stack by stack, in the engine's documented order: its datagrams,
    /// then its events.
    fn poll_output(&mut self, cx: &mut StackCx<'_>, buf: &mut Vec<u8>) -> Option<StackOutput> {
        while self.drain_stack < self.stacks.len() {
            let s = self.drain_stack;
            if !self.drain_events {
                if let Some(len) = self.stacks[s].stack.poll_transmit(cx.now, buf) {
                    buf.truncate(len);
                    return Some(StackOutput::Datagram);
                }
                self.drain_events = true;
            }
            while let Some(drained) = self.poll_event(cx, s) {
                if let Drained::Trace { flow, app, trace } = drained {
                    return Some(StackOutput::Trace {
                        time: trace.time,
                        app,
                        flow,
                        event: trace.event,
                    });
                }
            }
            self.drain_stack += 1;
            self.drain_events = false;
        }
        self.drain_stack = 0;
        None
    }

    fn next_deadline(&mut self, _now: SimTime) -> Option<SimTime> {
        self.stacks
            .iter()
            .filter_map(|s| s.stack.poll_timeout())
            .min()
    }

    fn finished(&mut self, cx: &mut StackCx<'_>, flow: FlowId) {
        self.retire(cx, flow);
    }

    fn set_trace_level(&mut self, level: TraceLevel) {
        for slot in &mut self.stacks {
            slot.stack.set_trace_level(level);
        }
    }

    fn set_default_config(&mut self, config: TcpConfigId) {
        self.default_config = Some(config);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What collecting one engine event produced.
enum Drained {
    /// A trace record of `flow`, owned by `app`.
    Trace {
        flow: FlowId,
        app: Option<AppId>,
        trace: Trace,
    },
    /// An app event (queued in the run's notes) or nothing to report.
    Other,
}
