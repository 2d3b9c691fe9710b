//! Middleboxes: code at a node's forwarding path that sees every packet the
//! node receives from a link, before it is routed, delivered or bridged, and
//! may pass it on (rewritten or not), drop it, hold it and release it
//! later, or inject packets of its own.
//!
//! A middlebox is a sans-IO state machine like the link models: it is
//! handed packets and told the time through a [`MiddleboxCx`], and says
//! when it next needs to be woken through [`Middlebox::poll_timeout`].
//! Several middleboxes on one node see a packet in the order they were
//! added; a packet one of them holds reaches the next ones when it is
//! released.
//!
//! # Adding a middlebox
//!
//! One file in this folder: the middlebox (a type implementing
//! [`Middlebox`]) and its scenario side (a type implementing
//! [`ScenarioMiddlebox`]), then one line in the `middlebox_registry!`
//! call below. `docs/extending.md` walks through [`drop_list`].

pub mod ack_holding;
pub mod ack_schedule;
pub mod chain;
pub mod drop_list;
pub mod ptx_filter;
#[macro_use]
mod registry;
pub mod snoop;
pub mod stall;

use rtolab_time::SimTime;
use rtolab_wire::packet::{self, ParsedPacket, Transport};
use serde::Serialize;

pub use ack_holding::AckHoldingSpec;
pub use chain::{ChainEvent, ChainHost, MiddleboxChain};
pub use drop_list::DropListSpec;
pub use ptx_filter::PtxFilterSpec;
pub use registry::{MiddleboxCheck, ScenarioMiddlebox};
pub use snoop::SnoopSpec;
pub use stall::StallSpec;

use crate::config::ScenarioError;
use crate::link::LinkIndication;
use crate::node::IfaceId;
use crate::pool::{PacketId, PacketPool};
use crate::rng::SimRng;

/// A packet a middlebox was handed. It is not `Clone`: whoever holds it
/// decides its fate exactly once, by returning it from
/// [`Middlebox::on_packet`] (pass it on), or later through
/// [`MiddleboxCx::release`] or [`MiddleboxCx::drop`].
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    pub(crate) packet: PacketId,
    /// Where it arrived.
    pub(crate) iface: IfaceId,
    /// Index of the node's next middlebox to see it once passed on.
    pub(crate) next: u32,
    /// When it reached this middlebox.
    pub(crate) since: SimTime,
}

impl Held {
    /// When the packet reached the middlebox.
    pub fn since(&self) -> SimTime {
        self.since
    }
}

/// What a middlebox asked for during a call, carried out by the simulator
/// once the call returns, in order.
#[derive(Debug)]
pub(crate) enum Action {
    /// Continue a held packet's way through the node.
    Release(Held),
    /// Discard a held packet.
    Drop(Held),
    /// Send a new datagram from the node, routed like a local one.
    Inject(PacketId),
}

/// Calls `hook` on `middlebox` with the context `cx` and leaves what it
/// asked for in `cx.actions`, for the caller (the simulator or a
/// [`MiddleboxChain`]) to carry out. Returns the packet it passed on and,
/// of the packet it was `handed`, the one it kept: neither passed on nor
/// dropped during the call.
#[inline]
pub(crate) fn call_hook(
    middlebox: &mut AnyMiddlebox,
    mut cx: MiddleboxCx<'_>,
    handed: Option<PacketId>,
    hook: impl FnOnce(&mut AnyMiddlebox, &mut MiddleboxCx<'_>) -> Option<Held>,
) -> (Option<Held>, Option<PacketId>) {
    let passed = hook(middlebox, &mut cx);
    let kept = handed.filter(|&p| {
        passed.is_none()
            && !cx
                .actions
                .iter()
                .any(|a| matches!(a, Action::Drop(h) if h.packet == p))
    });
    (passed, kept)
}

/// What a middlebox can do during one of its calls.
pub struct MiddleboxCx<'a> {
    pub(crate) now: SimTime,
    pub(crate) pool: &'a mut PacketPool,
    pub(crate) actions: &'a mut Vec<Action>,
    pub(crate) rng: &'a mut SimRng,
}

impl MiddleboxCx<'_> {
    /// The current time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The packet's bytes: a whole IPv4 datagram.
    pub fn datagram(&self, packet: &Held) -> &[u8] {
        self.pool.bytes(packet.packet)
    }

    /// The packet's bytes, to rewrite in place (checksums are the
    /// middlebox's to fix: the next node verifies the IPv4 header's).
    pub fn datagram_mut(&mut self, packet: &Held) -> &mut Vec<u8> {
        self.pool.buf_mut(packet.packet)
    }

    /// Lets a held packet continue through the node.
    pub fn release(&mut self, packet: Held) {
        self.actions.push(Action::Release(packet));
    }

    /// Discards a held packet (counted and traced as dropped by a
    /// middlebox).
    pub fn drop(&mut self, packet: Held) {
        self.actions.push(Action::Drop(packet));
    }

    /// Sends a new datagram from the node: `build` writes the whole
    /// datagram into an empty buffer and returns its length. It is routed
    /// like one a local app sent. On error nothing is sent.
    pub fn inject<E>(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<usize, E>,
    ) -> Result<(), E> {
        let id = self.pool.alloc();
        let buf = self.pool.buf_mut(id);
        match build(buf) {
            Ok(len) => {
                buf.truncate(len);
                self.actions.push(Action::Inject(id));
                Ok(())
            }
            Err(e) => {
                self.pool.free(id);
                Err(e)
            }
        }
    }

    /// The middlebox's own random stream (`middlebox/<name>`).
    pub fn rng(&mut self) -> &mut SimRng {
        self.rng
    }
}

/// A middlebox's behaviour.
pub trait Middlebox {
    /// Counters reported for it; serialized as the columns of its row.
    type Stats: Serialize;

    /// A packet arrived at the node. Return it to pass it on (possibly
    /// rewritten), or keep it: hold it to release later, or drop it through
    /// the context.
    fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held>;

    /// Processes everything due at or before `cx.now()`.
    fn handle_timeout(&mut self, cx: &mut MiddleboxCx<'_>) {
        let _ = cx;
    }

    /// The link layer of the node's interface `iface` said something about
    /// its link (only links that foresee their outages do).
    fn on_link_indication(
        &mut self,
        cx: &mut MiddleboxCx<'_>,
        iface: u32,
        indication: LinkIndication,
    ) {
        let _ = (cx, iface, indication);
    }

    /// When `handle_timeout` must next be called.
    fn poll_timeout(&self) -> Option<SimTime> {
        None
    }

    /// A snapshot of the counters.
    fn stats(&self) -> Self::Stats;
}

/// Which packets a middlebox acts on: any of its fields left out matches
/// everything. Shared by the built-in middleboxes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketFilter {
    /// IP protocol: `"tcp"` or `"udp"`. Default: any.
    pub protocol: Option<Protocol>,
    /// Source address. Default: any.
    pub source: Option<std::net::Ipv4Addr>,
    /// Destination address. Default: any.
    pub destination: Option<std::net::Ipv4Addr>,
    /// `true`: only TCP segments or UDP datagrams that carry payload;
    /// `false`: only those that carry none (pure ACKs, SYNs, FINs).
    /// Default: either.
    pub payload: Option<bool>,
}

/// A transport protocol in a [`PacketFilter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl PacketFilter {
    /// Whether `datagram` matches. Datagrams that do not parse match only
    /// a filter that asks nothing.
    pub fn matches(&self, datagram: &[u8]) -> bool {
        if *self == PacketFilter::default() {
            return true;
        }
        let Ok(ParsedPacket { ip, transport }) = packet::parse(datagram) else {
            return false;
        };
        let (protocol, payload_len) = match &transport {
            Transport::Tcp(t) => (Some(Protocol::Tcp), t.payload.len()),
            Transport::Udp(u) => (Some(Protocol::Udp), u.payload.len()),
            _ => (None, 0),
        };
        // `map_or(true, ..)`: the crate's oldest supported toolchain has
        // no `Option::is_none_or`.
        self.protocol.map_or(true, |p| Some(p) == protocol)
            && self.source.map_or(true, |a| a == ip.src)
            && self.destination.map_or(true, |a| a == ip.dst)
            && self.payload.map_or(true, |p| p == (payload_len > 0))
    }
}

middlebox_registry! {
    /// Drops chosen packets by their index among those matching a filter.
    DropList => drop_list::DropListSpec,
    /// Holds every matching packet during a stall and releases them after.
    Stall => stall::StallSpec,
    /// Holds a mobile's ACKs through a predicted outage and paces them to
    /// the fixed host.
    AckHolding => ack_holding::AckHoldingSpec,
    /// Caches data to a mobile and retransmits it locally on the wireless
    /// hop, hiding its losses from the sender (Snoop).
    Snoop => snoop::SnoopSpec,
    /// Drops segments to the appliance that would cross the NFC link for
    /// nothing (bridge spec §5).
    PtxFilter => ptx_filter::PtxFilterSpec,
}
