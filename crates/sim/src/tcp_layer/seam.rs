//! The host-stack seam: what a host's TCP stack does for its apps and for
//! the kernel, whichever stack it is.
//!
//! Every node holds one [`HostStack`] (as an ns-3 node holds its L4
//! protocol): our engine ([`super::EngineHost`], the default) or
//! smoltcp ([`crate::smol::SmolHost`]). Apps reach it through their
//! context's `tcp_*` calls and the kernel through [`HostStack::input_parsed`],
//! [`HostStack::poll_output`], [`HostStack::timeout`] and
//! [`HostStack::next_deadline`]; neither asks which stack is behind it. A
//! stack's quirks (smoltcp's polling, its lack of per-flow counters, the
//! engine's several stacks per host) stay inside its implementation.
//!
//! Every call gets a [`StackCx`]: the time, the node, and the run's TCP
//! state shared by all hosts (configurations, the report's flow table and
//! the queue of app events). A stack asks the kernel to collect its output
//! with [`StackCx::wake`] and reports what happened to a connection with
//! [`StackCx::notify`].

use std::any::Any;
use std::net::{IpAddr, SocketAddr};

use rtolab_tcp::rto::PathHint;
use rtolab_tcp::trace::TraceEvent as EngineTrace;
use rtolab_tcp::{Bytes, Connection, ParsedIp};
use rtolab_time::SimTime;
use rtolab_wire::WireError;

use crate::node::{AppId, NodeId};

use super::flows::{FlowId, TcpAppMetrics, TcpConfigId, TcpCounts, TcpError, TcpEvent, TcpRun};

/// A datagram handed to [`HostStack::input`] whose IP or TCP header does
/// not parse (the wire error, when there is one), or that is not TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadSegment {
    /// A header does not parse.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The datagram carries another protocol.
    #[error("not a TCP segment")]
    NotTcp,
}

/// What the host's routing says of a connection's peer, for
/// [`HostStack::connect`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Route {
    /// The host's address of the peer's family that routes there, `None`
    /// when none does.
    pub local: Option<IpAddr>,
    /// What the outgoing link knows of the path's timing.
    pub path: Option<PathHint>,
}

/// The context of one call into a host's stack.
pub struct StackCx<'a> {
    pub(crate) now: SimTime,
    pub(crate) node: NodeId,
    pub(crate) node_name: &'a str,
    pub(crate) run: &'a mut TcpRun,
    pub(crate) wake: bool,
}

impl<'a> StackCx<'a> {
    /// A context for a call into `node`'s stack at `now`, reporting into
    /// `run`.
    pub fn new(now: SimTime, node: NodeId, node_name: &'a str, run: &'a mut TcpRun) -> Self {
        StackCx {
            now,
            node,
            node_name,
            run,
            wake: false,
        }
    }

    /// The current time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The host.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The host's name.
    pub fn node_name(&self) -> &str {
        self.node_name
    }

    /// Asks the kernel to collect the stack's output and events once the
    /// current call is over ([`HostStack::poll_output`]).
    pub fn wake(&mut self) {
        self.wake = true;
    }

    /// Tells `app` that `event` happened on `flow`; delivered in order,
    /// after the output collected with it.
    pub fn notify(&mut self, app: AppId, flow: FlowId, event: TcpEvent) {
        self.run.notes.push_back((app, flow, event));
    }
}

/// One item a stack hands the kernel while it is collected.
#[derive(Clone, Debug)]
pub enum StackOutput {
    /// A datagram to send, written into the buffer the kernel passed.
    Datagram,
    /// A trace record of one of its connections.
    Trace {
        /// When it happened.
        time: SimTime,
        /// The app owning the connection, if any.
        app: Option<AppId>,
        /// The connection.
        flow: FlowId,
        /// What happened, in the engine's terms.
        event: EngineTrace,
    },
}

/// A host's TCP stack, as its apps and the kernel use it.
///
/// App calls are made on behalf of `app` and must fail with
/// [`TcpError::UnknownFlow`] for a flow that is not an open connection of
/// that app. Flow numbers are the stack's to choose but must not collide
/// with the run's flow table (our engine's flows); a stack that fills no
/// table row numbers its flows from a base of its own, as smoltcp does.
pub trait HostStack: Send {
    /// Whether the host takes TCP datagrams no raw app bound (otherwise
    /// they are dropped as for any other protocol).
    fn takes_tcp(&self) -> bool;

    /// Accepts connections on `port` for `app`, with `config` (the app's
    /// own TCP configuration, if it has one).
    fn listen(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        config: Option<TcpConfigId>,
        port: u16,
    ) -> Result<(), TcpError>;

    /// Opens a connection of `app` to `remote` from local port `port` (an
    /// ephemeral one if `None`).
    fn connect(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        config: Option<TcpConfigId>,
        remote: SocketAddr,
        port: Option<u16>,
        route: Route,
    ) -> Result<FlowId, TcpError>;

    /// Queues what fits of `data` on `flow`; returns how many bytes.
    fn send(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        data: &[u8],
    ) -> Result<usize, TcpError>;

    /// Queues a shared chunk; a stack that copies into its own buffer
    /// anyway sends its bytes as [`HostStack::send`] does.
    fn send_shared(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        data: Bytes,
    ) -> Result<usize, TcpError> {
        self.send(cx, app, flow, &data)
    }

    /// Moves `flow`'s in-order bytes into `buf`; returns how many.
    fn recv(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
        buf: &mut [u8],
    ) -> Result<usize, TcpError>;

    /// Closes `flow`'s sending direction.
    fn close(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError>;

    /// Resets `flow`.
    fn abort(&mut self, cx: &mut StackCx<'_>, app: AppId, flow: FlowId) -> Result<(), TcpError>;

    /// Our engine's connection behind `flow` while it is open (with
    /// `Some(app)`, only if it is that app's); other stacks have none.
    fn connection(&self, run: &TcpRun, app: Option<AppId>, flow: FlowId) -> Option<&Connection> {
        let _ = (run, app, flow);
        None
    }

    /// Whether `flow` was accepted on a listening port (rather than opened
    /// by its app).
    fn accepted(&self, run: &TcpRun, flow: FlowId) -> bool;

    /// Bytes `app` may queue on `flow` now.
    fn send_capacity(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<usize, TcpError>;

    /// Bytes of `flow` the peer has acknowledged.
    fn bytes_acked(
        &mut self,
        cx: &mut StackCx<'_>,
        app: AppId,
        flow: FlowId,
    ) -> Result<u64, TcpError>;

    /// A TCP datagram (IPv4 or IPv6, header included) for the host that no
    /// raw app bound. Returns the app it is for, when known.
    fn input(&mut self, cx: &mut StackCx<'_>, datagram: &[u8])
        -> Result<Option<AppId>, BadSegment>;

    /// [`HostStack::input`] for a datagram whose IP header the host's IP
    /// layer has parsed (and, for IPv4, verified) already, as `ip`: a
    /// stack that can take it parses only its transport header. The
    /// default hands the raw bytes to [`HostStack::input`], for a stack
    /// whose API takes only those (smoltcp's device receives frames).
    fn input_parsed(
        &mut self,
        cx: &mut StackCx<'_>,
        ip: &ParsedIp,
        datagram: &[u8],
    ) -> Result<Option<AppId>, BadSegment> {
        let _ = ip;
        self.input(cx, datagram)
    }

    /// The stack's timer, set at [`HostStack::next_deadline`], fired.
    fn timeout(&mut self, cx: &mut StackCx<'_>);

    /// The host's link warned of an outage (`going_down`) or said it is
    /// back. Stacks that do not react ignore it.
    fn link_warning(&mut self, cx: &mut StackCx<'_>, going_down: bool) {
        let _ = (cx, going_down);
    }

    /// The next item of output after a [`StackCx::wake`]: a datagram
    /// (written into `buf`) or a trace record; app events go to
    /// [`StackCx::notify`] meanwhile. `None` once everything is collected;
    /// the next call starts a new collection.
    fn poll_output(&mut self, cx: &mut StackCx<'_>, buf: &mut Vec<u8>) -> Option<StackOutput>;

    /// When the stack's timer must next fire, asked after every collection.
    fn next_deadline(&mut self, now: SimTime) -> Option<SimTime>;

    /// `app` saw the last event of `flow`.
    fn finished(&mut self, cx: &mut StackCx<'_>, flow: FlowId) {
        let _ = (cx, flow);
    }

    /// Sets what the stack's connections record (everything once a trace
    /// sink listens).
    fn set_trace_level(&mut self, level: rtolab_tcp::trace::TraceLevel) {
        let _ = level;
    }

    /// Sets the TCP configuration of connections whose app has none.
    /// Stacks that take no engine configuration ignore it.
    fn set_default_config(&mut self, config: TcpConfigId) {
        let _ = config;
    }

    /// Adds what the stack knows of `app`'s connections beyond the run's
    /// flow table to its report row.
    fn app_metrics(&self, app: AppId, metrics: &mut TcpAppMetrics) {
        let _ = (app, metrics);
    }

    /// Whether every connection of `app` is over: closed down or in
    /// TIME-WAIT, or (for a stack that sees only what polling shows) had
    /// its last event.
    fn connections_over(&self, run: &TcpRun, app: AppId) -> bool;

    /// Counters of all the host's connections, for a stack that keeps
    /// them itself rather than in the run's flow table; `None` for a stack
    /// that keeps none (smoltcp) or fills the table.
    fn counts(&self) -> Option<TcpCounts> {
        None
    }

    /// The stack as [`Any`], for callers that need its own type.
    fn as_any(&self) -> &dyn Any;
}
