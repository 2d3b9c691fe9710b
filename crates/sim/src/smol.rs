//! smoltcp hosts: a host with `stack = "smoltcp"` runs smoltcp's TCP
//! instead of our engine, under the same app calls.
//!
//! The kernel hands it every TCP datagram addressed to the host (as it
//! would to the engine), polls it when it is marked dirty (an arrival, an
//! app call, its timer) and schedules its timer at smoltcp's own
//! `poll_at` deadline on simulated time, so runs stay deterministic.
//! smoltcp reports no events, so after each poll the host compares each
//! socket with what it saw last and turns the differences into the
//! [`TcpEvent`]s the apps expect.
//!
//! Its flows are numbered from [`SMOLTCP_FLOW_BASE`] so they never collide
//! with the engine's flow table: they appear in app trace events, but not
//! in the report's `flows` table (smoltcp keeps no counters to fill it).

use std::any::Any;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use rtolab_smoltcp::{Host, RecvError, Settings, SettingsError, State};
use rtolab_tcp::trace::TraceEvent as EngineTrace;
use rtolab_tcp::State as EngineState;
use rtolab_time::{SimDuration, SimTime};
use smoltcp::iface::SocketHandle;

use crate::node::AppId;
use crate::tcp_layer::{BadSegment, HostStack, Route, StackCx, StackOutput};
use crate::tcp_layer::{FlowId, TcpAppMetrics, TcpConfigId, TcpError, TcpEvent, TcpRun};

/// The first flow number of smoltcp connections.
pub const SMOLTCP_FLOW_BASE: u32 = 1 << 31;

/// One connection of a smoltcp host, as its app sees it.
struct SmolFlow {
    handle: SocketHandle,
    app: AppId,
    /// Accepted on a listening port rather than opened by the app.
    passive: bool,
    connected: bool,
    peer_closed: bool,
    /// The app closed its half (or aborted).
    closed_here: bool,
    /// Its last event was delivered; the socket stays until smoltcp is
    /// done with it (TIME-WAIT).
    over: bool,
    /// Its socket was freed once smoltcp closed it for good.
    freed: bool,
    last: State,
    /// Bytes the app queued, and those acknowledged as of the last poll.
    queued: u64,
    acked: u64,
}

/// A port an app listens on: smoltcp has no backlog, so one socket listens
/// at a time and a fresh one replaces it once it has a connection.
struct Listener {
    port: u16,
    app: AppId,
    socket: SocketHandle,
}

/// A smoltcp host of the simulation.
pub struct SmolHost {
    host: Host,
    flows: Vec<SmolFlow>,
    listeners: Vec<Listener>,
    /// Connections made, per app, for the report.
    connections: Vec<(AppId, u64)>,
    /// State changes seen since the last [`SmolHost::take_state_changes`]:
    /// (app, flow, from, to), in the engine's names.
    changes: VecDeque<(AppId, FlowId, EngineState, EngineState)>,
    /// What the collection in progress has left to hand over.
    sent: VecDeque<Vec<u8>>,
    collecting: bool,
}

/// smoltcp's name of a TCP state in the engine's (both are RFC 9293's).
pub fn engine_state(state: State) -> EngineState {
    match state {
        State::Closed => EngineState::Closed,
        State::Listen => EngineState::Listen,
        State::SynSent => EngineState::SynSent,
        State::SynReceived => EngineState::SynReceived,
        State::Established => EngineState::Established,
        State::FinWait1 => EngineState::FinWait1,
        State::FinWait2 => EngineState::FinWait2,
        State::CloseWait => EngineState::CloseWait,
        State::Closing => EngineState::Closing,
        State::LastAck => EngineState::LastAck,
        State::TimeWait => EngineState::TimeWait,
    }
}

impl SmolHost {
    /// A host with one IPv4 address (smoltcp runs on the host's first
    /// interface) and its routes' default gateway, if any.
    pub fn new(
        address: Ipv4Addr,
        prefix_len: u8,
        gateway: Option<Ipv4Addr>,
        settings: Settings,
        seed: u64,
    ) -> Result<SmolHost, SettingsError> {
        Ok(SmolHost {
            host: Host::new(address, prefix_len, gateway, settings, seed, SimTime::ZERO)?,
            flows: Vec::new(),
            listeners: Vec::new(),
            connections: Vec::new(),
            changes: VecDeque::new(),
            sent: VecDeque::new(),
            collecting: false,
        })
    }

    /// What smoltcp's interface carried.
    pub fn stats(&self) -> rtolab_smoltcp::HostStats {
        self.host.stats()
    }

    /// Connections `app` made or accepted.
    pub fn connections_of(&self, app: AppId) -> u64 {
        self.connections
            .iter()
            .find(|(a, _)| *a == app)
            .map_or(0, |(_, n)| *n)
    }

    fn count_connection(&mut self, app: AppId) {
        match self.connections.iter_mut().find(|(a, _)| *a == app) {
            Some((_, n)) => *n += 1,
            None => self.connections.push((app, 1)),
        }
    }

    fn flow(&mut self, app: AppId, flow: FlowId) -> Result<&mut SmolFlow, TcpError> {
        let index = flow.0.checked_sub(SMOLTCP_FLOW_BASE);
        match index.and_then(|i| self.flows.get_mut(i as usize)) {
            Some(f) if f.app == app && !f.over => Ok(f),
            _ => Err(TcpError::UnknownFlow(flow)),
        }
    }

    fn new_flow(&mut self, handle: SocketHandle, app: AppId, last: State) -> FlowId {
        self.flows.push(SmolFlow {
            handle,
            app,
            passive: last == State::SynReceived,
            connected: false,
            peer_closed: false,
            closed_here: false,
            over: false,
            freed: false,
            last,
            queued: 0,
            acked: 0,
        });
        self.count_connection(app);
        FlowId(SMOLTCP_FLOW_BASE + (self.flows.len() - 1) as u32)
    }

    /// Listens on `port` for `app`.
    pub fn listen(&mut self, app: AppId, port: u16) -> Result<(), TcpError> {
        if let Some(l) = self.listeners.iter().find(|l| l.port == port) {
            return if l.app == app {
                Ok(())
            } else {
                Err(TcpError::PortInUse { port, owner: l.app })
            };
        }
        let socket = self.host.listen(port).map_err(|_| {
            TcpError::NoFreePort(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port))
        })?;
        self.listeners.push(Listener { port, app, socket });
        Ok(())
    }

    /// Opens a connection of `app` to `remote`, from `local_port` if given.
    pub fn connect(
        &mut self,
        app: AppId,
        remote: SocketAddr,
        local_port: Option<u16>,
    ) -> Result<FlowId, TcpError> {
        let SocketAddr::V4(remote4) = remote else {
            // smoltcp runs IPv4 only here.
            return Err(TcpError::NoRoute(remote.ip()));
        };
        let handle = self
            .host
            .connect(remote4, local_port)
            .map_err(|_| TcpError::NoFreePort(remote))?;
        Ok(self.new_flow(handle, app, State::SynSent))
    }

    /// Queues what fits of `data` on `flow`.
    pub fn send(&mut self, app: AppId, flow: FlowId, data: &[u8]) -> Result<usize, TcpError> {
        let handle = self.flow(app, flow)?.handle;
        let socket = self.host.socket(handle);
        if !socket.may_send() {
            // Not connected yet (or closing): nothing can be queued.
            return Ok(0);
        }
        let queued = socket.send_slice(data).unwrap_or(0);
        self.flow(app, flow)?.queued += queued as u64;
        Ok(queued)
    }

    /// Reads `flow`'s in-order bytes into `buf`; 0 at the end of the stream.
    pub fn recv(&mut self, app: AppId, flow: FlowId, buf: &mut [u8]) -> Result<usize, TcpError> {
        let handle = self.flow(app, flow)?.handle;
        match self.host.socket(handle).recv_slice(buf) {
            Ok(n) => Ok(n),
            Err(RecvError::Finished | RecvError::InvalidState) => Ok(0),
        }
    }

    /// Closes `flow`'s sending half.
    pub fn close(&mut self, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        let f = self.flow(app, flow)?;
        f.closed_here = true;
        let handle = f.handle;
        self.host.socket(handle).close();
        Ok(())
    }

    /// Resets `flow`.
    pub fn abort(&mut self, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        let f = self.flow(app, flow)?;
        f.closed_here = true;
        let handle = f.handle;
        self.host.socket(handle).abort();
        Ok(())
    }

    /// Bytes the app may queue now.
    pub fn send_capacity(&mut self, app: AppId, flow: FlowId) -> Result<usize, TcpError> {
        let handle = self.flow(app, flow)?.handle;
        let socket = self.host.socket(handle);
        Ok(if socket.may_send() {
            socket.send_capacity() - socket.send_queue()
        } else {
            0
        })
    }

    /// Bytes of the flow the peer acknowledged (as of the last poll).
    pub fn bytes_acked(&mut self, app: AppId, flow: FlowId) -> Result<u64, TcpError> {
        Ok(self.flow(app, flow)?.acked)
    }

    /// A datagram for the host.
    pub fn input(&mut self, datagram: &[u8]) {
        self.host.receive(datagram);
    }

    /// Polls smoltcp at `now`: returns the datagrams it sent and appends
    /// the app events its sockets' changes make to `notes`.
    pub fn poll(
        &mut self,
        now: SimTime,
        notes: &mut impl Extend<(AppId, FlowId, TcpEvent)>,
    ) -> Vec<Vec<u8>> {
        self.host.poll(now);
        self.accept_connections();
        for index in 0..self.flows.len() {
            let flow = FlowId(SMOLTCP_FLOW_BASE + index as u32);
            let events = self.observe(index);
            notes.extend(events.into_iter().map(|e| (self.flows[index].app, flow, e)));
        }
        std::iter::from_fn(|| self.host.transmit()).collect()
    }

    /// Listening sockets that got a connection become flows; a fresh
    /// socket listens in their place.
    fn accept_connections(&mut self) {
        for i in 0..self.listeners.len() {
            let socket = self.listeners[i].socket;
            let state = self.host.socket(socket).state();
            // SYN-RECEIVED may still fall back to LISTEN on a reset.
            if matches!(state, State::Listen | State::SynReceived) {
                continue;
            }
            let (port, app) = (self.listeners[i].port, self.listeners[i].app);
            if let Ok(fresh) = self.host.listen(port) {
                self.listeners[i].socket = fresh;
            }
            self.new_flow(socket, app, State::SynReceived);
        }
    }

    /// The events of flow `index` since it was last observed.
    fn observe(&mut self, index: usize) -> Vec<TcpEvent> {
        let mut events = Vec::new();
        let f = &self.flows[index];
        if f.over {
            // Free the socket (and its buffers) once TIME-WAIT is over, so
            // reconnecting apps do not accumulate them.
            if !f.freed && self.host.socket(f.handle).state() == State::Closed {
                self.host.remove(f.handle);
                self.flows[index].freed = true;
            }
            return events;
        }
        let handle = f.handle;
        let socket = self.host.socket(handle);
        let state = socket.state();
        let (recv_queue, send_queue) = (socket.recv_queue(), socket.send_queue());
        let may_recv = socket.may_recv();
        let f = &mut self.flows[index];
        if state != f.last {
            let flow = FlowId(SMOLTCP_FLOW_BASE + index as u32);
            self.changes
                .push_back((f.app, flow, engine_state(f.last), engine_state(state)));
        }
        let acked = f.queued - send_queue as u64;
        if !f.connected {
            let before = f.last;
            f.last = state;
            if matches!(state, State::Listen | State::SynSent | State::SynReceived) {
                return events;
            }
            if state == State::Closed {
                // Refused or reset before the handshake completed.
                f.over = true;
                events.push(TcpEvent::Reset);
                return events;
            }
            f.last = before;
            f.connected = true;
            events.push(TcpEvent::Connected);
        }
        if acked > f.acked {
            f.acked = acked;
            events.push(TcpEvent::Writable);
        }
        if recv_queue > 0 {
            events.push(TcpEvent::Readable);
        }
        let fin_seen = !may_recv
            && matches!(
                state,
                State::CloseWait
                    | State::LastAck
                    | State::Closing
                    | State::TimeWait
                    | State::Closed
            );
        if fin_seen && recv_queue == 0 && !f.peer_closed {
            f.peer_closed = true;
            events.push(TcpEvent::PeerClosed);
        }
        let finished = match state {
            State::TimeWait => true,
            // Closed after our own FIN was acknowledged (LAST-ACK) or by
            // the app's abort; from any other state a reset closed it.
            State::Closed => {
                let normal = f.closed_here
                    && matches!(
                        f.last,
                        State::LastAck | State::TimeWait | State::Closing | State::FinWait2
                    );
                events.push(if normal || f.closed_here && f.peer_closed {
                    TcpEvent::Closed
                } else {
                    TcpEvent::Reset
                });
                f.over = true;
                f.last = state;
                return events;
            }
            _ => false,
        };
        if finished && recv_queue == 0 {
            f.over = true;
            events.push(TcpEvent::Closed);
        }
        f.last = state;
        events
    }

    /// The state changes of its connections since the last call, as far
    /// as polling shows them (a change and its reversal between two polls
    /// go unseen): (app, flow, from, to).
    pub fn take_state_changes(&mut self) -> Vec<(AppId, FlowId, EngineState, EngineState)> {
        self.changes.drain(..).collect()
    }

    /// The state of the most recent connection of `app`, as last polled.
    pub fn final_state_of(&self, app: AppId) -> Option<EngineState> {
        self.flows
            .iter()
            .rev()
            .find(|f| f.app == app)
            .map(|f| engine_state(f.last))
    }

    /// Whether `flow` was accepted on a listening port.
    pub fn is_passive(&self, flow: FlowId) -> bool {
        let index = flow.0.wrapping_sub(SMOLTCP_FLOW_BASE) as usize;
        self.flows.get(index).is_some_and(|f| f.passive)
    }

    /// Whether every connection of `app` has had its last event.
    pub fn all_over(&self, app: AppId) -> bool {
        self.flows.iter().filter(|f| f.app == app).all(|f| f.over)
    }

    /// When smoltcp next needs a poll.
    pub fn poll_at(&mut self, now: SimTime) -> Option<SimTime> {
        self.host.poll_at(now)
    }
}

/// smoltcp behind the seam: it parses datagrams itself, reports its
/// sockets' changes as events after each poll, and keeps no per-flow
/// counters (its flows fill no row of the run's flow table).
impl HostStack for SmolHost {
    fn takes_tcp(&self) -> bool {
        true
    }

    fn listen(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        _config: Option<TcpConfigId>,
        port: u16,
    ) -> Result<(), TcpError> {
        SmolHost::listen(self, app, port)?;
        cx.wake();
        Ok(())
    }

    fn connect(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        _config: Option<TcpConfigId>,
        remote: SocketAddr,
        port: Option<u16>,
        _route: Route,
    ) -> Result<FlowId, TcpError> {
        let flow = SmolHost::connect(self, app, remote, port)?;
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
        let queued = SmolHost::send(self, app, flow, data)?;
        cx.wake();
        Ok(queued)
    }

    fn recv(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        buf: &mut [u8],
    ) -> Result<usize, TcpError> {
        let read = SmolHost::recv(self, app, flow, buf)?;
        if read > 0 {
            // The read may open the window: smoltcp decides on the poll.
            cx.wake();
        }
        Ok(read)
    }

    fn close(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        SmolHost::close(self, app, flow)?;
        cx.wake();
        Ok(())
    }

    fn abort(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError> {
        SmolHost::abort(self, app, flow)?;
        cx.wake();
        Ok(())
    }

    fn send_capacity(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<usize, TcpError> {
        SmolHost::send_capacity(self, app, flow)
    }

    fn bytes_acked(
        &mut self,
        _cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<u64, TcpError> {
        SmolHost::bytes_acked(self, app, flow)
    }

    /// smoltcp parses (and checks) the datagram itself, on the next poll.
    fn input(
        &mut self,
        cx: &mut StackCx<'_>,
        datagram: &[u8],
    ) -> Result<Option<AppId>, BadSegment> {
        SmolHost::input(self, datagram);
        cx.wake();
        Ok(None)
    }

    fn timeout(&mut self, cx: &mut StackCx<'_>) {
        cx.wake();
    }

    fn accepted(&self, _run: &TcpRun, flow: FlowId) -> bool {
        self.is_passive(flow)
    }

    fn connections_over(&self, _run: &TcpRun, app: AppId) -> bool {
        self.all_over(app)
    }

    /// One poll per collection: first the state changes it showed (all
    /// smoltcp lets us see of its connections), then the datagrams it sent.
    fn poll_output(&mut self, cx: &mut StackCx<'_>, buf: &mut Vec<u8>) -> Option<StackOutput> {
        if !self.collecting {
            self.collecting = true;
            let sent = self.poll(cx.now, &mut cx.run.notes);
            self.sent.extend(sent);
        }
        if let Some((app, flow, from, to)) = self.changes.pop_front() {
            return Some(StackOutput::Trace {
                time: cx.now,
                app: Some(app),
                flow,
                event: EngineTrace::State { from, to },
            });
        }
        if let Some(datagram) = self.sent.pop_front() {
            *buf = datagram;
            return Some(StackOutput::Datagram);
        }
        self.collecting = false;
        None
    }

    /// A deadline at `now` right after a poll is smoltcp's microsecond
    /// rounding: look again a microsecond later.
    fn next_deadline(&mut self, now: SimTime) -> Option<SimTime> {
        self.poll_at(now)
            .map(|at| at.max(now + SimDuration::from_micros(1)))
    }

    fn app_metrics(&self, app: AppId, metrics: &mut TcpAppMetrics) {
        metrics.connections += self.connections_of(app);
        metrics.final_state = metrics.final_state.or(self.final_state_of(app));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
