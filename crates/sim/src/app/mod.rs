//! Applications: what runs on hosts above IP.
//!
//! An app is told four things: that the run started, that a datagram
//! addressed to one of its bindings arrived, that one of its timers fired,
//! and what happened on its TCP connections. Each hook receives an
//! [`AppContext`] through which it sends IPv4 datagrams, sets and cancels
//! timers, binds protocol/port pairs, opens and uses TCP connections and
//! draws from its own random stream.
//!
//! TCP runs in the kernel, one engine stack per host (see [`crate::tcp`]):
//! apps call [`AppContext::tcp_connect`], [`AppContext::tcp_listen`],
//! `tcp_send`, `tcp_recv` and `tcp_close`, and hear back through
//! [`App::on_tcp`]. A custom transport can instead bind raw datagrams and
//! drive its own sans-IO engine from `on_packet` and `on_timer`.
//!
//! The built-in apps are [`AnyApp`] variants dispatched by `match`; anything
//! else is an [`AnyApp::Custom`] trait object. The TCP apps write and check
//! the stream content given by [`pattern`], so receivers verify every byte
//! without knowing the sender.

mod cbr;
mod exchange;
mod message_series;
pub mod pattern;
#[macro_use]
mod registry;
mod sink;
mod tcp_bulk;

pub use cbr::{
    CbrApp, CbrConfig, CbrSpec, CbrStats, DEFAULT_SOURCE_PORT_BASE, MAX_UDP_PAYLOAD,
    PAYLOAD_HEADER_LEN,
};
pub use exchange::{
    ExchangeApp, ExchangeConfig, ExchangeServerApp, ExchangeServerConfig, ExchangeServerSpec,
    ExchangeServerStats, ExchangeSpec, ExchangeStats, REQUEST_HEADER_LEN,
};
pub use message_series::{
    MessageSeriesApp, MessageSeriesConfig, MessageSeriesSpec, MessageSeriesStats,
};
pub use registry::{AppCheck, ScenarioApp};
pub use sink::{SinkApp, SinkConfig, SinkSpec, SinkStats};
pub use tcp_bulk::{
    TcpBulkApp, TcpBulkConfig, TcpBulkSpec, TcpBulkStats, TcpSinkApp, TcpSinkConfig, TcpSinkSpec,
    TcpSinkStats,
};

use crate::config::ScenarioError;

app_registry! {
    /// Constant-bit-rate UDP source.
    Cbr => CbrSpec,
    /// UDP sink.
    Sink => SinkSpec,
    /// TCP bulk sender.
    TcpBulk => TcpBulkSpec,
    /// TCP receiver that counts and checks bytes.
    TcpSink => TcpSinkSpec,
    /// TCP request/response client.
    Exchange => ExchangeSpec,
    /// TCP request/response server.
    ExchangeServer => ExchangeServerSpec,
    /// TCP sender of a message series.
    MessageSeries => MessageSeriesSpec,
}

use std::net::{Ipv4Addr, SocketAddrV4};

use rtolab_tcp::{Bytes, Connection};
use rtolab_time::SimTime;
use serde::{Serialize, Serializer};

use crate::node::{Node, NodeId};
use crate::pool::{PacketId, PacketPool};
use crate::queue::{EventId, EventQueue};
use crate::rng::SimRng;
use crate::sim::Event;
use crate::tcp::{FlowId, TcpConfigId, TcpError, TcpEvent, TcpLayer};
use crate::trace::{AppEvent, TraceEvent, Tracer};

/// Index of an app in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(pub u32);

/// A timer set through [`AppContext::set_timer`], for cancelling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId(EventId);

/// What datagrams an app receives: a protocol and a destination port, or
/// every port of the protocol (`port: None`). Exact ports win over
/// wildcards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// IP protocol number (`rtolab_wire::ipv4::protocol::UDP`, `TCP`, ...).
    pub protocol: u8,
    /// Destination port, or `None` for all ports.
    pub port: Option<u16>,
}

/// Binding failed because another app already holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("protocol {} port {} is already bound by app {}", .binding.protocol, .binding.port.map_or("*".to_string(), |p| p.to_string()), .owner.0)]
pub struct BindError {
    /// The binding asked for.
    pub binding: Binding,
    /// The app holding it.
    pub owner: AppId,
}

/// Per-node table from (protocol, port) to app.
#[derive(Clone, Debug, Default)]
pub(crate) struct Demux {
    bindings: Vec<(Binding, AppId)>,
}

impl Demux {
    pub(crate) fn bind(&mut self, binding: Binding, app: AppId) -> Result<(), BindError> {
        if let Some((_, owner)) = self.bindings.iter().find(|(b, _)| *b == binding) {
            return Err(BindError {
                binding,
                owner: *owner,
            });
        }
        self.bindings.push((binding, app));
        Ok(())
    }

    /// The app for a datagram of `protocol` to `port` (ports are read from
    /// the transport header, so `None` for protocols without ports).
    pub(crate) fn lookup(&self, protocol: u8, port: Option<u16>) -> Option<AppId> {
        let exact = self
            .bindings
            .iter()
            .find(|(b, _)| b.protocol == protocol && b.port.is_some() && b.port == port);
        exact
            .or_else(|| {
                self.bindings
                    .iter()
                    .find(|(b, _)| b.protocol == protocol && b.port.is_none())
            })
            .map(|(_, app)| *app)
    }
}

/// An application's hooks. Every hook gets the context of its call; the
/// current time is `cx.now()`.
pub trait App: Send {
    /// The run started (time zero, or when the app was added).
    fn on_start(&mut self, cx: &mut AppContext<'_>);

    /// A datagram matching one of the app's bindings arrived: the whole IPv4
    /// datagram, header included.
    fn on_packet(&mut self, cx: &mut AppContext<'_>, datagram: &[u8]);

    /// A timer set with `token` fired.
    fn on_timer(&mut self, cx: &mut AppContext<'_>, token: u64);

    /// Something happened on one of the app's TCP connections (opened with
    /// [`AppContext::tcp_connect`] or accepted on a port it listens on).
    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, event: TcpEvent) {
        let _ = (cx, flow, event);
    }

    /// A snapshot of the app's counters.
    fn stats(&self) -> AppStats;
}

/// Counters of an app, by kind. Reports write them as flat columns of the
/// app's row, so every kind keeps to scalar fields.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AppStats {
    /// See [`CbrStats`].
    Cbr(CbrStats),
    /// See [`SinkStats`].
    Sink(SinkStats),
    /// See [`TcpBulkStats`].
    TcpBulk(TcpBulkStats),
    /// See [`TcpSinkStats`].
    TcpSink(TcpSinkStats),
    /// See [`ExchangeStats`].
    Exchange(ExchangeStats),
    /// See [`ExchangeServerStats`].
    ExchangeServer(ExchangeServerStats),
    /// See [`MessageSeriesStats`].
    MessageSeries(MessageSeriesStats),
    /// Whatever a custom app reports: an object's fields become columns,
    /// any other value a column named `value`.
    Custom(#[serde(serialize_with = "custom_as_object")] serde_json::Value),
}

fn custom_as_object<S: Serializer>(value: &serde_json::Value, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    match value {
        serde_json::Value::Object(_) => value.serialize(s),
        other => {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry("value", other)?;
            map.end()
        }
    }
}

/// The apps the simulator knows, plus custom ones.
pub enum AnyApp {
    /// Constant-bit-rate UDP source.
    Cbr(CbrApp),
    /// UDP sink with loss and delay statistics.
    Sink(SinkApp),
    /// TCP bulk sender.
    TcpBulk(TcpBulkApp),
    /// TCP receiver that counts and checks bytes.
    TcpSink(TcpSinkApp),
    /// TCP request/response client.
    Exchange(ExchangeApp),
    /// TCP request/response server.
    ExchangeServer(ExchangeServerApp),
    /// TCP sender of a series of messages.
    MessageSeries(MessageSeriesApp),
    /// Any other app.
    Custom(Box<dyn App>),
}

macro_rules! each_app {
    ($self:expr, $a:ident => $body:expr) => {
        match $self {
            AnyApp::Cbr($a) => $body,
            AnyApp::Sink($a) => $body,
            AnyApp::TcpBulk($a) => $body,
            AnyApp::TcpSink($a) => $body,
            AnyApp::Exchange($a) => $body,
            AnyApp::ExchangeServer($a) => $body,
            AnyApp::MessageSeries($a) => $body,
            AnyApp::Custom($a) => $body,
        }
    };
}

impl AnyApp {
    /// Short name of the kind, as in scenario files.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyApp::Cbr(_) => "cbr",
            AnyApp::Sink(_) => "sink",
            AnyApp::TcpBulk(_) => "tcp-bulk",
            AnyApp::TcpSink(_) => "tcp-sink",
            AnyApp::Exchange(_) => "exchange",
            AnyApp::ExchangeServer(_) => "exchange-server",
            AnyApp::MessageSeries(_) => "message-series",
            AnyApp::Custom(_) => "custom",
        }
    }

    /// Whether the app is one of the built-in TCP apps.
    pub fn uses_tcp(&self) -> bool {
        matches!(
            self,
            AnyApp::TcpBulk(_)
                | AnyApp::TcpSink(_)
                | AnyApp::Exchange(_)
                | AnyApp::ExchangeServer(_)
                | AnyApp::MessageSeries(_)
        )
    }
}

impl App for AnyApp {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        each_app!(self, a => a.on_start(cx))
    }

    fn on_packet(&mut self, cx: &mut AppContext<'_>, datagram: &[u8]) {
        each_app!(self, a => a.on_packet(cx, datagram))
    }

    fn on_timer(&mut self, cx: &mut AppContext<'_>, token: u64) {
        each_app!(self, a => a.on_timer(cx, token))
    }

    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, event: TcpEvent) {
        each_app!(self, a => a.on_tcp(cx, flow, event))
    }

    fn stats(&self) -> AppStats {
        each_app!(self, a => a.stats())
    }
}

/// What an app can do during one of its hooks.
pub struct AppContext<'a> {
    pub(crate) now: SimTime,
    pub(crate) app: AppId,
    pub(crate) node_id: NodeId,
    pub(crate) node: &'a Node,
    pub(crate) pool: &'a mut PacketPool,
    pub(crate) queue: &'a mut EventQueue<Event>,
    pub(crate) outbox: &'a mut Vec<PacketId>,
    pub(crate) demux: &'a mut Demux,
    pub(crate) tracer: &'a mut Tracer,
    pub(crate) rng: &'a mut SimRng,
    pub(crate) tcp: &'a mut TcpLayer,
    pub(crate) tcp_config: Option<TcpConfigId>,
}

impl AppContext<'_> {
    /// The current simulated time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// This app's id.
    pub fn app_id(&self) -> AppId {
        self.app
    }

    /// The node the app runs on.
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The node's interface addresses.
    pub fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.node.interfaces.iter().map(|i| i.cidr.addr)
    }

    /// The source address for a datagram to `dst` (that of the outgoing
    /// interface), `None` when there is no route.
    pub fn source_address_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        self.node.source_address_for(dst)
    }

    /// Sends one IPv4 datagram: `build` gets an empty pooled buffer, writes
    /// the whole datagram (header with checksum included) and returns its
    /// length. The node routes it once the hook returns. On error the
    /// buffer goes back to the pool and nothing is sent.
    pub fn send_with<E>(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<usize, E>,
    ) -> Result<(), E> {
        let id = self.pool.alloc();
        let buf = self.pool.buf_mut(id);
        match build(buf) {
            Ok(len) => {
                buf.truncate(len);
                self.outbox.push(id);
                Ok(())
            }
            Err(e) => {
                self.pool.free(id);
                Err(e)
            }
        }
    }

    /// Calls `on_timer(token)` at `at` (now, if `at` is in the past).
    pub fn set_timer(&mut self, at: SimTime, token: u64) -> TimerId {
        let at = at.max(self.now);
        TimerId(self.queue.push(
            at,
            Event::AppTimer {
                app: self.app.0,
                token,
            },
        ))
    }

    /// Cancels a timer; cancelling one that fired already does nothing.
    pub fn cancel_timer(&mut self, timer: TimerId) {
        self.queue.cancel(timer.0);
    }

    /// Receives datagrams matching `binding` from now on.
    pub fn bind(&mut self, binding: Binding) -> Result<(), BindError> {
        self.demux.bind(binding, self.app)
    }

    /// The app's own random stream.
    pub fn rng(&mut self) -> &mut SimRng {
        self.rng
    }

    /// Whether trace events are being recorded (skip building costly ones
    /// when not).
    pub fn tracing(&self) -> bool {
        self.tracer.enabled()
    }

    /// Accepts TCP connections on `port` (of every address of the host),
    /// with the app's TCP configuration. Each new connection shows up as a
    /// [`TcpEvent::Connected`] of a new flow.
    pub fn tcp_listen(&mut self, port: u16) -> Result<(), TcpError> {
        let config = self.tcp.config_for(self.node_id, self.tcp_config);
        self.tcp.listen(self.node_id, self.app, config, port)
    }

    /// Opens a TCP connection to `remote` from an ephemeral port of the
    /// address that routes there. The SYN leaves once the hook returns;
    /// data sent before [`TcpEvent::Connected`] follows the handshake.
    pub fn tcp_connect(&mut self, remote: SocketAddrV4) -> Result<FlowId, TcpError> {
        self.tcp_connect_from(remote, None)
    }

    /// Opens a connection to `remote` from local port `port` (an
    /// ephemeral port if `None`); fails with [`TcpError::NoFreePort`] if
    /// that port is taken towards `remote`.
    pub fn tcp_connect_from(
        &mut self,
        remote: SocketAddrV4,
        port: Option<u16>,
    ) -> Result<FlowId, TcpError> {
        let local = self
            .node
            .source_address_for(*remote.ip())
            .ok_or(TcpError::NoRoute(*remote.ip()))?;
        let config = self.tcp.config_for(self.node_id, self.tcp_config);
        self.tcp.connect(
            self.now,
            self.node_id,
            &self.node.name,
            self.app,
            config,
            local,
            remote,
            port,
        )
    }

    /// Queues bytes on a connection; returns how many fit in its send
    /// buffer.
    pub fn tcp_send(&mut self, flow: FlowId, data: &[u8]) -> Result<usize, TcpError> {
        self.tcp.send(self.node_id, self.app, flow, |stack, conn| {
            stack.send(conn, data)
        })
    }

    /// Queues a shared chunk without copying it (the engine's
    /// [`Connection::send_shared`]); returns how many of its bytes were
    /// taken.
    pub fn tcp_send_shared(&mut self, flow: FlowId, data: Bytes) -> Result<usize, TcpError> {
        self.tcp.send(self.node_id, self.app, flow, |stack, conn| {
            stack.send_shared(conn, data)
        })
    }

    /// Moves received in-order bytes into `buf`; returns how many.
    pub fn tcp_recv(&mut self, flow: FlowId, buf: &mut [u8]) -> Result<usize, TcpError> {
        self.tcp.recv(self.node_id, self.app, flow, buf)
    }

    /// Closes the sending direction: a FIN follows the queued data.
    pub fn tcp_close(&mut self, flow: FlowId) -> Result<(), TcpError> {
        let now = self.now;
        self.tcp.conn_mut(self.node_id, self.app, flow)?.close(now);
        Ok(())
    }

    /// Aborts a connection with a reset.
    pub fn tcp_abort(&mut self, flow: FlowId) -> Result<(), TcpError> {
        let now = self.now;
        self.tcp.conn_mut(self.node_id, self.app, flow)?.abort(now);
        Ok(())
    }

    /// One of the app's open connections, to read its state, counters and
    /// buffer levels.
    pub fn tcp_connection(&self, flow: FlowId) -> Result<&Connection, TcpError> {
        self.tcp.conn(self.node_id, self.app, flow)
    }

    /// Records an app trace event.
    pub fn trace(&mut self, detail: AppEvent) {
        if self.tracer.enabled() {
            self.tracer.record(
                self.now,
                TraceEvent::App {
                    node: self.node_id.0,
                    app: self.app.0,
                    detail,
                },
            );
        }
    }
}

/// Running minimum, mean and maximum of durations in ns, for latency
/// columns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Latency {
    count: u64,
    sum_ns: u128,
    min_ns: Option<u64>,
    max_ns: Option<u64>,
}

impl Latency {
    pub(crate) fn add(&mut self, ns: u64) {
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.min_ns = Some(self.min_ns.map_or(ns, |m| m.min(ns)));
        self.max_ns = Some(self.max_ns.map_or(ns, |m| m.max(ns)));
    }

    pub(crate) fn min_ns(&self) -> Option<u64> {
        self.min_ns
    }

    pub(crate) fn max_ns(&self) -> Option<u64> {
        self.max_ns
    }

    pub(crate) fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }
}

/// Why a TCP app's transfer failed, as reported in its `failure` column.
pub(crate) fn failure_name(event: TcpEvent) -> &'static str {
    match event {
        TcpEvent::Reset => "reset",
        TcpEvent::TimedOut => "timed_out",
        _ => "closed_early",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_port_beats_wildcard_and_duplicates_are_refused() {
        let mut d = Demux::default();
        let udp_any = Binding {
            protocol: 17,
            port: None,
        };
        let udp_9 = Binding {
            protocol: 17,
            port: Some(9),
        };
        d.bind(udp_any, AppId(1)).unwrap();
        d.bind(udp_9, AppId(2)).unwrap();
        assert_eq!(d.lookup(17, Some(9)), Some(AppId(2)));
        assert_eq!(d.lookup(17, Some(10)), Some(AppId(1)));
        assert_eq!(d.lookup(6, Some(9)), None);
        let err = d.bind(udp_9, AppId(3)).unwrap_err();
        assert_eq!(err.owner, AppId(2));
        assert_eq!(
            err.to_string(),
            "protocol 17 port 9 is already bound by app 2"
        );
    }
}
