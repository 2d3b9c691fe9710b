//! Applications: what runs on hosts above IP.
//!
//! An app is told three things: that the run started, that a datagram
//! addressed to one of its bindings arrived, and that one of its timers
//! fired. Each hook receives an [`AppContext`] through which it sends IPv4
//! datagrams, sets and cancels timers, binds protocol/port pairs and draws
//! from its own random stream. This is the surface a sans-IO transport
//! engine plugs into: feed `on_packet` to its `handle_segment(now, ..)`,
//! `on_timer` to `handle_timeout(now)`, then drain `poll_transmit` into
//! [`AppContext::send_with`] and re-arm one timer at `poll_timeout()`.
//!
//! The built-in apps are [`AnyApp`] variants dispatched by `match`; anything
//! else is an [`AnyApp::Custom`] trait object.

mod cbr;
mod sink;

pub use cbr::{CbrApp, CbrConfig, CbrStats, PAYLOAD_HEADER_LEN};
pub use sink::{SinkApp, SinkConfig, SinkStats};

use std::net::Ipv4Addr;

use rtolab_time::SimTime;
use serde::Serialize;

use crate::node::{Node, NodeId};
use crate::pool::{PacketId, PacketPool};
use crate::queue::{EventId, EventQueue};
use crate::rng::SimRng;
use crate::sim::Event;
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

    /// A snapshot of the app's counters.
    fn stats(&self) -> AppStats;
}

/// Counters of an app, by kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AppStats {
    /// See [`CbrStats`].
    Cbr(CbrStats),
    /// See [`SinkStats`].
    Sink(SinkStats),
    /// Whatever a custom app reports.
    Custom(serde_json::Value),
}

/// The apps the simulator knows, plus custom ones.
pub enum AnyApp {
    /// Constant-bit-rate UDP source.
    Cbr(CbrApp),
    /// UDP sink with loss and delay statistics.
    Sink(SinkApp),
    /// Any other app.
    Custom(Box<dyn App>),
}

impl AnyApp {
    /// Short name of the kind, as in scenario files.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyApp::Cbr(_) => "cbr",
            AnyApp::Sink(_) => "sink",
            AnyApp::Custom(_) => "custom",
        }
    }
}

impl App for AnyApp {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        match self {
            AnyApp::Cbr(a) => a.on_start(cx),
            AnyApp::Sink(a) => a.on_start(cx),
            AnyApp::Custom(a) => a.on_start(cx),
        }
    }

    fn on_packet(&mut self, cx: &mut AppContext<'_>, datagram: &[u8]) {
        match self {
            AnyApp::Cbr(a) => a.on_packet(cx, datagram),
            AnyApp::Sink(a) => a.on_packet(cx, datagram),
            AnyApp::Custom(a) => a.on_packet(cx, datagram),
        }
    }

    fn on_timer(&mut self, cx: &mut AppContext<'_>, token: u64) {
        match self {
            AnyApp::Cbr(a) => a.on_timer(cx, token),
            AnyApp::Sink(a) => a.on_timer(cx, token),
            AnyApp::Custom(a) => a.on_timer(cx, token),
        }
    }

    fn stats(&self) -> AppStats {
        match self {
            AnyApp::Cbr(a) => a.stats(),
            AnyApp::Sink(a) => a.stats(),
            AnyApp::Custom(a) => a.stats(),
        }
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
