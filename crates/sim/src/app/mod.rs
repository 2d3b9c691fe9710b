//! Applications: what runs on hosts above IP.
//!
//! An app is told four things: that the run started, that a datagram
//! addressed to one of its bindings arrived, that one of its timers fired,
//! and what happened on its TCP connections. Each hook receives a context,
//! an [`AppCx`], through which it sends IPv4 datagrams, sets and cancels
//! timers, binds protocol/port pairs, opens and uses TCP connections and
//! draws from its own random stream. The simulator's context is
//! [`AppContext`]; the emulator runs the same apps over an rtolab host's
//! engine stack with its own.
//!
//! TCP runs in the kernel, one stack per host behind the seam of
//! [`crate::tcp_layer::HostStack`] (our engine or smoltcp, the app cannot
//! tell): apps call [`AppCx::tcp_connect`], [`AppCx::tcp_listen`],
//! `tcp_send`, `tcp_recv` and `tcp_close`, and hear back through
//! [`App::on_tcp`]. A
//! custom transport can instead bind raw datagrams and drive its own
//! sans-IO engine from `on_packet` and `on_timer`.
//!
//! The built-in apps are [`AnyApp`] variants dispatched by `match` and
//! built from scenario entries by [`AppKindSpec::build`]; anything else is
//! an [`AnyApp::Custom`] trait object. The TCP apps write and check the
//! stream content given by [`pattern`], so receivers verify every byte
//! without knowing the sender.
//!
//! # Adding an app
//!
//! One file in this folder: the app (a type implementing [`App`] for every
//! [`AppCx`], so it runs in the simulator and the emulator alike) and its
//! scenario side (a type implementing [`ScenarioApp`]: the `kind` name, the
//! fields of its `[[app]]` table, their validation, its stats type and how
//! to build it). Then one line in the `app_registry!` call below, whose
//! variant name is the one the app's `stats()` reports under.

mod cbr;
mod cooking_session;
mod exchange;
mod message_series;
pub mod pattern;
#[macro_use]
mod registry;
mod sink;
mod tcp_bulk;
mod tcp_on_off;

pub use cbr::{
    CbrApp, CbrConfig, CbrSpec, CbrStats, DEFAULT_SOURCE_PORT_BASE, MAX_UDP_PAYLOAD,
    MIN_CBR_INTERVAL, PAYLOAD_HEADER_LEN,
};
pub use cooking_session::{
    CookingSessionApp, CookingSessionConfig, CookingSessionSpec, SessionShape, Span,
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
pub use tcp_on_off::{TcpOnOffApp, TcpOnOffConfig, TcpOnOffSpec, TcpOnOffStats};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use rtolab_tcp::rto::PathHint;
use rtolab_tcp::{Bytes, Connection};
use rtolab_time::SimTime;
use serde::{Serialize, Serializer};

use crate::config::ScenarioError;
use crate::event::Event;
use crate::link::LinkModel;
use crate::link_slot::LinkSlot;
use crate::node::{Node, NodeId};
use crate::pool::{PacketId, PacketPool};
use crate::queue::{EventId, EventQueue};
use crate::rng::{LazyStream, SimRng};
use crate::tcp_layer::{FlowId, TcpConfigId, TcpError, TcpEvent, TcpLayer};
use crate::tcp_layer::{HostStack, Route, StackCx};
use crate::trace::{AppEvent, TraceEvent, Tracer};

app_registry! {
    /// Constant-bit-rate UDP source.
    Cbr => cbr::CbrSpec,
    /// UDP receiver that counts datagrams.
    Sink => sink::SinkSpec,
    /// TCP bulk sender.
    TcpBulk => tcp_bulk::TcpBulkSpec,
    /// TCP receiver that counts and checks bytes.
    TcpSink => tcp_bulk::TcpSinkSpec,
    /// TCP request/response client.
    Exchange => exchange::ExchangeSpec,
    /// TCP request/response server.
    ExchangeServer => exchange::ExchangeServerSpec,
    /// TCP sender of a message series.
    MessageSeries => message_series::MessageSeriesSpec,
    /// TCP sender alternating bursts and idle periods.
    TcpOnOff => tcp_on_off::TcpOnOffSpec,
    /// The bridge study's long session: runs of small messages, then a large one.
    CookingSession => cooking_session::CookingSessionSpec,
}

pub use crate::node::AppId;

/// A timer set through the simulator's [`AppCx::set_timer`], for
/// cancelling it.
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

/// Per-host table from (protocol, port) to app, for [`AppCx::bind`].
#[derive(Clone, Debug, Default)]
pub struct Demux {
    bindings: Vec<(Binding, AppId)>,
}

impl Demux {
    /// Gives `binding` to `app`, unless another app holds it.
    pub fn bind(&mut self, binding: Binding, app: AppId) -> Result<(), BindError> {
        if let Some((_, owner)) = self.bindings.iter().find(|(b, _)| *b == binding) {
            return Err(BindError {
                binding,
                owner: *owner,
            });
        }
        self.bindings.push((binding, app));
        Ok(())
    }

    /// Whether no app bound anything.
    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    /// The app for a datagram of `protocol` to `port` (ports are read from
    /// the transport header, so `None` for protocols without ports).
    pub fn lookup(&self, protocol: u8, port: Option<u16>) -> Option<AppId> {
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

/// Everything an app may do from its hooks, whoever runs it.
///
/// The simulator's [`AppContext`] implements it, and so does the
/// emulator's context of an rtolab host (its engine stack on the wall
/// clock): the built-in apps are written once against this trait and run
/// unchanged in both. Apps are generic over it, so each runner calls them
/// through static dispatch.
pub trait AppCx {
    /// A timer set with [`AppCx::set_timer`], for cancelling it.
    type Timer: Copy + Eq + std::fmt::Debug;

    /// The current time.
    fn now(&self) -> SimTime;

    /// This app's id (its index among the runner's apps).
    fn app_id(&self) -> AppId;

    /// The host's interface addresses.
    fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_;

    /// The source address for a datagram to `dst` (that of the outgoing
    /// interface), `None` when there is no route.
    fn source_address_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr>;

    /// Sends one IPv4 datagram: `build` gets an empty buffer, writes the
    /// whole datagram (header with checksum included) and returns its
    /// length. The host routes it once the hook returns. On error nothing
    /// is sent.
    fn send_with<E>(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<usize, E>,
    ) -> Result<(), E>;

    /// Receives datagrams matching `binding` from now on.
    fn bind(&mut self, binding: Binding) -> Result<(), BindError>;

    /// Calls `on_timer(token)` at `at` (now, if `at` is in the past).
    fn set_timer(&mut self, at: SimTime, token: u64) -> Self::Timer;

    /// Cancels a timer; cancelling one that fired already does nothing.
    fn cancel_timer(&mut self, timer: Self::Timer);

    /// The app's own random stream (`app/<name>` of the run's seed).
    fn rng(&mut self) -> &mut SimRng;

    /// Whether trace events are being recorded (skip building costly ones
    /// when not).
    fn tracing(&self) -> bool;

    /// Records an app trace event.
    fn trace(&mut self, detail: AppEvent);

    /// Accepts TCP connections on `port` (of every address of the host),
    /// with the app's TCP configuration. Each new connection shows up as a
    /// [`TcpEvent::Connected`] of a new flow.
    fn tcp_listen(&mut self, port: u16) -> Result<(), TcpError>;

    /// Opens a TCP connection to `remote` (IPv4 or IPv6) from an
    /// ephemeral port of the host's address of that family that routes
    /// there. The SYN leaves once the hook returns; data sent before
    /// [`TcpEvent::Connected`] follows the handshake.
    fn tcp_connect(&mut self, remote: impl Into<SocketAddr>) -> Result<FlowId, TcpError> {
        self.tcp_connect_from(remote, None)
    }

    /// Opens a connection to `remote` from local port `port` (an
    /// ephemeral port if `None`); fails with [`TcpError::NoFreePort`] if
    /// that port is taken towards `remote`.
    fn tcp_connect_from(
        &mut self,
        remote: impl Into<SocketAddr>,
        port: Option<u16>,
    ) -> Result<FlowId, TcpError>;

    /// Queues bytes on a connection; returns how many fit in its send
    /// buffer.
    fn tcp_send(&mut self, flow: FlowId, data: &[u8]) -> Result<usize, TcpError>;

    /// Queues a shared chunk without copying it (the engine's
    /// [`Connection::send_shared`]); returns how many of its bytes were
    /// taken.
    fn tcp_send_shared(&mut self, flow: FlowId, data: Bytes) -> Result<usize, TcpError>;

    /// Moves received in-order bytes into `buf`; returns how many.
    fn tcp_recv(&mut self, flow: FlowId, buf: &mut [u8]) -> Result<usize, TcpError>;

    /// Closes the sending direction: a FIN follows the queued data.
    fn tcp_close(&mut self, flow: FlowId) -> Result<(), TcpError>;

    /// Aborts a connection with a reset.
    fn tcp_abort(&mut self, flow: FlowId) -> Result<(), TcpError>;

    /// One of the app's open connections, to read its state, counters and
    /// buffer levels. Only our engine's connections have one: on a host
    /// running another stack it answers [`TcpError::UnknownFlow`], and apps
    /// that should run there use the two calls below.
    fn tcp_connection(&self, flow: FlowId) -> Result<&Connection, TcpError>;

    /// Bytes the app may queue on the connection now.
    fn tcp_send_capacity(&mut self, flow: FlowId) -> Result<usize, TcpError> {
        self.tcp_connection(flow).map(Connection::send_capacity)
    }

    /// Bytes of the connection the peer has acknowledged.
    fn tcp_bytes_acked(&mut self, flow: FlowId) -> Result<u64, TcpError> {
        self.tcp_connection(flow).map(|c| c.stats().bytes_acked)
    }

    /// Runs a hook of an [`AnyApp::Custom`] app. Custom apps are written
    /// against the simulator's [`AppContext`], which runs them; other
    /// contexts never get one (the built-in apps are all they build) and
    /// ignore it.
    fn call_custom(&mut self, app: &mut CustomApp, hook: Hook<'_>) {
        let _ = (app, hook);
    }
}

/// An application's hooks, over the context `C` of whoever runs it (the
/// simulator's [`AppContext`], or any other [`AppCx`]). Every hook gets
/// the context of its call; the current time is `cx.now()`.
///
/// The built-in apps implement it for every context; a custom app for the
/// simulator implements `App<AppContext<'_>>`.
pub trait App<C: AppCx>: Send {
    /// The run started (time zero, or when the app was added).
    fn on_start(&mut self, cx: &mut C);

    /// A datagram matching one of the app's bindings arrived: the whole IPv4
    /// datagram, header included.
    fn on_packet(&mut self, cx: &mut C, datagram: &[u8]);

    /// A timer set with `token` fired.
    fn on_timer(&mut self, cx: &mut C, token: u64);

    /// Something happened on one of the app's TCP connections (opened with
    /// [`AppCx::tcp_connect`] or accepted on a port it listens on).
    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        let _ = (cx, flow, event);
    }

    /// The run reached its planned end (not stopped early by a limit or
    /// an interrupt): an app whose workload is bounded by time has done it.
    fn on_end(&mut self, cx: &mut C) {
        let _ = cx;
    }

    /// A snapshot of the app's counters.
    fn stats(&self) -> AppStats;
}

/// A custom app: one written for the simulator's context.
pub type CustomApp = dyn for<'a> App<AppContext<'a>>;

/// One hook call, for [`AppCx::call_custom`].
#[derive(Clone, Copy, Debug)]
pub enum Hook<'d> {
    /// [`App::on_start`].
    Start,
    /// [`App::on_packet`] with the datagram.
    Packet(&'d [u8]),
    /// [`App::on_timer`] with the token.
    Timer(u64),
    /// [`App::on_tcp`] with the flow and event.
    Tcp(FlowId, TcpEvent),
}

pub(crate) fn custom_as_object<S: Serializer>(
    value: &serde_json::Value,
    s: S,
) -> Result<S::Ok, S::Error> {
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

/// The simulator's context of one hook call.
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
    pub(crate) rng: &'a mut LazyStream,
    pub(crate) tcp: &'a mut TcpLayer,
    pub(crate) tcp_config: Option<TcpConfigId>,
    pub(crate) links: &'a [LinkSlot],
}

impl AppContext<'_> {
    /// The node the app runs on.
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// What the link of the interface a datagram to `dst` leaves by knows
    /// of the path's timing ([`LinkModel::path_hint`]).
    fn path_hint(&self, dst: IpAddr) -> Option<PathHint> {
        let iface = match dst {
            IpAddr::V4(d) => self.node.routes.lookup(d)?.0,
            IpAddr::V6(d) => self.node.routes6.lookup(d)?.0,
        };
        let interface = self.node.interfaces.get(iface as usize)?;
        let slot = self.links.get(interface.link.0 as usize)?;
        slot.link.path_hint(interface.port, dst, self.now)
    }

    /// Calls the host's stack on behalf of the app.
    fn stack<R>(
        &mut self,
        call: impl FnOnce(&mut dyn HostStack, &mut StackCx<'_>, AppId) -> R,
    ) -> R {
        let app = self.app;
        self.tcp
            .with_host(self.now, self.node_id, &self.node.name, |stack, cx| {
                call(stack, cx, app)
            })
    }

    /// [`AppCx::tcp_connect_from`] on the host's stack.
    fn open(&mut self, remote: SocketAddr, port: Option<u16>) -> Result<FlowId, TcpError> {
        let local = match remote.ip() {
            IpAddr::V4(dst) => self.node.source_address_for(dst).map(IpAddr::V4),
            IpAddr::V6(dst) => self.node.source_address6_for(dst).map(IpAddr::V6),
        };
        let route = Route {
            local,
            path: self.path_hint(remote.ip()),
        };
        let config = self.tcp_config;
        self.stack(|stack, cx, app| stack.connect(cx, app, config, remote, port, route))
    }
}

impl AppCx for AppContext<'_> {
    type Timer = TimerId;

    fn now(&self) -> SimTime {
        self.now
    }

    fn app_id(&self) -> AppId {
        self.app
    }

    fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.node.interfaces.iter().map(|i| i.cidr.addr)
    }

    fn source_address_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        self.node.source_address_for(dst)
    }

    /// The buffer comes from the packet pool and goes back to it on error.
    fn send_with<E>(
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

    fn bind(&mut self, binding: Binding) -> Result<(), BindError> {
        self.demux.bind(binding, self.app)
    }

    fn set_timer(&mut self, at: SimTime, token: u64) -> TimerId {
        let at = at.max(self.now);
        TimerId(self.queue.push(
            at,
            Event::AppTimer {
                app: self.app.0,
                token,
            },
        ))
    }

    fn cancel_timer(&mut self, timer: TimerId) {
        self.queue.cancel(timer.0);
    }

    fn rng(&mut self) -> &mut SimRng {
        self.rng.get()
    }

    fn tracing(&self) -> bool {
        self.tracer.enabled()
    }

    fn trace(&mut self, detail: AppEvent) {
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

    fn tcp_listen(&mut self, port: u16) -> Result<(), TcpError> {
        let config = self.tcp_config;
        self.stack(|stack, cx, app| stack.listen(cx, app, config, port))
    }

    fn tcp_connect_from(
        &mut self,
        remote: impl Into<SocketAddr>,
        port: Option<u16>,
    ) -> Result<FlowId, TcpError> {
        let opened = self.open(remote.into(), port);
        if opened.is_err() {
            // The app hears of it and goes on; the report counts it.
            self.tcp.run.connect_failed(self.app);
        }
        opened
    }

    fn tcp_send(&mut self, flow: FlowId, data: &[u8]) -> Result<usize, TcpError> {
        self.stack(|stack, cx, app| stack.send(cx, app, flow, data))
    }

    fn tcp_send_shared(&mut self, flow: FlowId, data: Bytes) -> Result<usize, TcpError> {
        self.stack(|stack, cx, app| stack.send_shared(cx, app, flow, data))
    }

    fn tcp_recv(&mut self, flow: FlowId, buf: &mut [u8]) -> Result<usize, TcpError> {
        self.stack(|stack, cx, app| stack.recv(cx, app, flow, buf))
    }

    fn tcp_close(&mut self, flow: FlowId) -> Result<(), TcpError> {
        self.stack(|stack, cx, app| stack.close(cx, app, flow))
    }

    fn tcp_abort(&mut self, flow: FlowId) -> Result<(), TcpError> {
        self.stack(|stack, cx, app| stack.abort(cx, app, flow))
    }

    fn tcp_connection(&self, flow: FlowId) -> Result<&Connection, TcpError> {
        self.tcp.conn(self.node_id, self.app, flow)
    }

    fn tcp_send_capacity(&mut self, flow: FlowId) -> Result<usize, TcpError> {
        self.stack(|stack, cx, app| stack.send_capacity(cx, app, flow))
    }

    fn tcp_bytes_acked(&mut self, flow: FlowId) -> Result<u64, TcpError> {
        self.stack(|stack, cx, app| stack.bytes_acked(cx, app, flow))
    }

    fn call_custom(&mut self, app: &mut CustomApp, hook: Hook<'_>) {
        match hook {
            Hook::Start => app.on_start(self),
            Hook::Packet(datagram) => app.on_packet(self, datagram),
            Hook::Timer(token) => app.on_timer(self, token),
            Hook::Tcp(flow, event) => app.on_tcp(self, flow, event),
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

/// A sender's connection ended before its transfer did: traces why and
/// returns the reason for the app's `failure` column.
pub(crate) fn transfer_failed<C: AppCx>(cx: &mut C, flow: FlowId, event: TcpEvent) -> &'static str {
    let reason = failure_name(event);
    cx.trace(AppEvent::TransferFailed {
        flow: flow.0,
        reason,
    });
    reason
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
