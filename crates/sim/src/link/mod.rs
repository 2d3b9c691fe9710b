//! Link models.
//!
//! Each link is a sans-IO state machine: it is told the time and handed
//! frames, answers with [`LinkOutput`]s pushed into a caller-owned buffer,
//! and says when it next needs attention through `poll_timeout`. It never
//! reads a clock, so the simulator drives it in virtual time and the emulator
//! can drive the same code on the wall clock.
//!
//! Calling convention, common to every model:
//! * `transmit(now, ..)` hands over a frame from the interface at a port;
//! * `handle_timeout(now, ..)` processes everything due at or before `now`
//!   (spurious calls do nothing);
//! * `poll_timeout()` returns the next instant at which `handle_timeout`
//!   must be called, `None` when idle.
//!
//! Models are generic over the packet handle `P`, which they only carry: the
//! frame's length is all they need to know about it.

//!
//! # Adding a link model
//!
//! A model is one file in this folder: the model itself (a type that
//! implements [`LinkModel`]) and its scenario side (a type that implements
//! [`ScenarioLink`]: the `kind` name, the fields of its `[[link]]` table,
//! their validation, the interfaces it attaches and how to build the
//! model). Then one line in the `link_registry!` call below registers it
//! for scenario files, the simulator, the emulator and reports.

mod broadcast;
mod ends;
mod fading;
mod gilbert_elliott;
mod half_duplex;
pub mod header_compression;
mod ieee802154;
mod jitter;
mod mesh_member;
mod nfc;
pub mod nfc_buffers;
mod p2p;
mod signal;
mod slip;
mod wifi;
#[macro_use]
mod registry;

pub use broadcast::{
    BroadcastConfig, BroadcastMedium, BroadcastSpec, BroadcastStats, MemberSpec, MemberStats,
};
pub use ends::{EndSpec, RawEnd};
pub use fading::{
    FadingConfig, FadingLink, FadingSpec, FadingStats, Outage, OutageSource, Prediction,
};
pub use gilbert_elliott::{
    GilbertElliott, GilbertElliottLink, GilbertElliottSpec, GilbertElliottStats,
};
pub use half_duplex::{
    HalfDuplexConfig, HalfDuplexLink, HalfDuplexSpec, HalfDuplexStats, MediumTiming, Occupancy,
    RateDelay,
};
pub use ieee802154::{
    Boot, Ieee802154Config, Ieee802154Link, Ieee802154MemberStats, Ieee802154Spec, Ieee802154Stats,
    MemberSetup, ParentChange, RawIeee802154, Routing,
};
pub use jitter::Jitter;
pub use nfc::{
    HeaderCompression, NfcConfig, NfcDirectionStats, NfcLink, NfcSlots, NfcSpec, NfcStats,
    PowerControl,
};
pub use p2p::{P2pConfig, P2pLink, P2pSpec, P2pStats, WiredSpec};
pub use registry::{LinkCheck, LinkModel, ScenarioLink};
pub use signal::{FadeRecord, FalseAlarm, PredictorConfig, SignalConfig};
pub use slip::{SlipConfig, SlipLink, SlipSpec, SlipStats};
pub use wifi::{WifiLink, WifiMember, WifiMemberStats, WifiSpec, WifiStats};

pub use crate::position::Position;

use rtolab_tcp::ParsedIp;
use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use crate::config::ScenarioError;
use crate::pool::PacketId;
use crate::trace::DropReason;

/// Default queue capacity in packets, where a kind has a queue.
pub const DEFAULT_QUEUE: usize = 100;

/// Index of an attachment point on a link (an interface).
pub type Port = u32;

/// A frame on a link: the packet handle and its length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<P> {
    /// The packet it carries.
    pub packet: P,
    /// Length in bytes, which sets the transmission time.
    pub len: u32,
}

/// A datagram handed to a link that reads it ([`Medium::Ip`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// The IP datagram.
    pub bytes: &'a [u8],
    /// Its trace uid, which the link gives back with every copy of it that
    /// arrives ([`LinkOutput::Arrived`]), so a trace follows one packet
    /// across the link.
    pub uid: u64,
    /// Its IP header as the sending node parsed it (hop limit or TTL as
    /// sent), so the link need not parse it again; `None` when the node
    /// did not.
    pub ip: Option<&'a ParsedIp>,
}

/// The uid of a datagram that arrived without one ([`LinkOutput::Arrived`]).
pub const UNKNOWN_UID: u64 = u64::MAX;

impl<P> LinkOutput<P> {
    /// [`LinkOutput::Arrived`] of `datagram` at `port`, with trace uid `uid`.
    pub fn arrived(port: Port, datagram: Vec<u8>, uid: Option<u64>) -> Self {
        LinkOutput::Arrived {
            port,
            datagram: datagram.into_boxed_slice(),
            uid: uid.unwrap_or(UNKNOWN_UID),
        }
    }
}

/// What a link carries, which decides how the simulator hands it a
/// datagram (as smoltcp's `Medium` decides how an interface frames one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Medium {
    /// Frames between two ends: whatever one port sends goes to the other
    /// ([`LinkModel::transmit`] to the peer's port).
    PointToPoint,
    /// Frames on a shared medium: the sender names the receiving port,
    /// found by the next hop's address ([`LinkModel::transmit`]).
    Broadcast,
    /// IP datagrams, whose bytes the link reads to encode, compress or
    /// route them, picking the receiver itself
    /// ([`LinkModel::transmit_datagram`]).
    Ip,
}

/// What a link reports only for traces: it changes nothing in the
/// simulator, so a link builds it only while a trace listens
/// ([`LinkOut::trace`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkTrace<P> {
    /// The frame was accepted into `port`'s transmit queue, behind
    /// `queue_len` others.
    Enqueued {
        /// Sending port.
        port: Port,
        /// The frame.
        frame: Frame<P>,
        /// Frames waiting ahead of it.
        queue_len: u32,
    },
    /// The MAC at `port` put a frame carrying `frame` on air, attempt
    /// `attempt` (1 for the first; more are link-layer retransmissions).
    MacAttempt {
        /// Sending port.
        port: Port,
        /// The datagram the frame carries.
        frame: Frame<P>,
        /// Attempt number.
        attempt: u32,
    },
    /// The mesh node at `port` chose a new preferred parent (a routing
    /// tree's edge changed; the tree over time is a trace).
    ParentChanged {
        /// The member whose parent changed.
        port: Port,
        /// Its new parent's port (`None`: it has none).
        parent: Option<Port>,
        /// Its routing rank after the change.
        rank: u16,
    },
}

impl<P> LinkTrace<P> {
    /// The port the record concerns.
    pub fn port(&self) -> Port {
        match self {
            LinkTrace::Enqueued { port, .. }
            | LinkTrace::MacAttempt { port, .. }
            | LinkTrace::ParentChanged { port, .. } => *port,
        }
    }
}

/// One item a link call produced, in the order it produced them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Emitted<P> {
    /// Something for the interfaces to act on.
    Output(LinkOutput<P>),
    /// A record for traces.
    Trace(LinkTrace<P>),
}

/// Where a link call puts what it produces: the [`LinkOutput`]s, read as a
/// `Vec` (it dereferences to one), and, only while traces are on, the
/// [`LinkTrace`] records, each placed after the outputs that came before
/// it. With traces off a record is never built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkOut<P> {
    outputs: Vec<LinkOutput<P>>,
    /// Each record with the number of outputs produced before it.
    traces: Vec<(usize, LinkTrace<P>)>,
    tracing: bool,
}

impl<P> Default for LinkOut<P> {
    fn default() -> Self {
        LinkOut::new()
    }
}

impl<P> LinkOut<P> {
    /// An empty buffer with traces off.
    pub fn new() -> Self {
        LinkOut {
            outputs: Vec::with_capacity(16),
            traces: Vec::new(),
            tracing: false,
        }
    }

    /// An empty buffer that keeps trace records.
    pub fn traced() -> Self {
        let mut out = LinkOut::new();
        out.tracing = true;
        out
    }

    /// Turns the keeping of trace records on or off.
    pub fn set_tracing(&mut self, on: bool) {
        self.tracing = on;
    }

    /// Whether trace records are kept.
    #[inline]
    pub fn tracing(&self) -> bool {
        self.tracing
    }

    /// Keeps the record `make` builds, if traces are on (it is not called
    /// otherwise).
    #[inline]
    pub fn trace(&mut self, make: impl FnOnce() -> LinkTrace<P>) {
        if self.tracing {
            self.traces.push((self.outputs.len(), make()));
        }
    }

    /// The trace records kept so far.
    pub fn traces(&self) -> impl Iterator<Item = &LinkTrace<P>> {
        self.traces.iter().map(|(_, t)| t)
    }

    /// Hands every output and record to `each` in the order they were
    /// produced, leaving the buffer empty.
    #[inline]
    pub fn drain_in_order(&mut self, mut each: impl FnMut(Emitted<P>)) {
        if self.traces.is_empty() {
            for output in self.outputs.drain(..) {
                each(Emitted::Output(output));
            }
            return;
        }
        let mut traces = self.traces.drain(..).peekable();
        for (i, output) in self.outputs.drain(..).enumerate() {
            while let Some((_, trace)) = traces.next_if(|(at, _)| *at <= i) {
                each(Emitted::Trace(trace));
            }
            each(Emitted::Output(output));
        }
        for (_, trace) in traces {
            each(Emitted::Trace(trace));
        }
    }

    /// The outputs, without the trace records.
    pub fn into_outputs(self) -> Vec<LinkOutput<P>> {
        self.outputs
    }

    /// Everything produced, in order, leaving the buffer empty (for tests
    /// and tools that read both).
    pub fn take_all(&mut self) -> Vec<Emitted<P>> {
        let mut all = Vec::new();
        self.drain_in_order(|e| all.push(e));
        all
    }
}

impl<P> std::ops::Deref for LinkOut<P> {
    type Target = Vec<LinkOutput<P>>;
    fn deref(&self) -> &Vec<LinkOutput<P>> {
        &self.outputs
    }
}

impl<P> std::ops::DerefMut for LinkOut<P> {
    fn deref_mut(&mut self) -> &mut Vec<LinkOutput<P>> {
        &mut self.outputs
    }
}

/// What a link tells the attached interfaces, for them to act on (records
/// that only feed traces are [`LinkTrace`]s). Everything happens at the
/// `now` of the call that produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkOutput<P> {
    /// The frame's first bit left `port`.
    TxStart {
        /// Sending port.
        port: Port,
        /// The frame.
        frame: Frame<P>,
    },
    /// The frame arrived intact at `port`; ownership passes to the receiver.
    Delivered {
        /// Receiving port.
        port: Port,
        /// The frame.
        frame: Frame<P>,
    },
    /// The frame was lost at `port` (the sender's for queue overflow and
    /// range errors, the receiver's for losses in transit).
    Dropped {
        /// Where it was lost.
        port: Port,
        /// The frame.
        frame: Frame<P>,
        /// Why.
        reason: DropReason,
    },
    /// The medium as seen from `port` became busy until `until`.
    MediumBusy {
        /// The notified port.
        port: Port,
        /// When it is expected to be free.
        until: SimTime,
    },
    /// The medium as seen from `port` became free.
    MediumFree {
        /// The notified port.
        port: Port,
    },
    /// The link layer tells the node at `port` about the link's state.
    Indication {
        /// The notified port.
        port: Port,
        /// What it says.
        indication: LinkIndication,
    },
    /// A model that carries datagrams ([`Medium::Ip`]) has taken
    /// what it needs from the handle `port` sent: the datagram left the
    /// node (the handle is the simulator's again, to free).
    Consumed {
        /// Sending port.
        port: Port,
        /// The frame handed over.
        frame: Frame<P>,
    },
    /// A datagram for the node at `port`, rebuilt by the link (a mesh that
    /// reassembles and decompresses what crossed it): the simulator makes
    /// a packet of it and treats it as [`LinkOutput::Delivered`].
    Arrived {
        /// Receiving port.
        port: Port,
        /// The IP datagram (a boxed slice: with a `Vec` and the uid every
        /// output would be a half larger).
        datagram: Box<[u8]>,
        /// The trace uid it was handed over with ([`Datagram::uid`]), or
        /// [`UNKNOWN_UID`] for one the link cannot tell (it gets a new uid).
        uid: u64,
    },
    /// A frame as the radio at `port` sent or received it, for captures
    /// (produced only while [`LinkModel::set_frame_captures`] is on).
    Captured {
        /// The port whose radio sent or received it.
        port: Port,
        /// Sent or received.
        direction: crate::direction::CaptureDirection,
        /// The frame as the link type of its captures has it (an IEEE
        /// 802.15.4 PSDU with its FCS).
        psdu: Vec<u8>,
    },
}

/// What a link layer that can foresee its outages tells its node (the
/// cross-layer messages of a base station that watches the signal fade).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkIndication {
    /// The link will go out soon.
    GoingDown {
        /// The link's current round trip.
        rtt: SimDuration,
        /// How long the outage is expected to last.
        expected_outage: SimDuration,
    },
    /// The link is out: nothing crosses it until `Up`.
    Gone,
    /// The link is back.
    Up,
}

impl LinkIndication {
    /// The name used in traces: `going_down`, `gone`, `up`.
    pub fn name(&self) -> &'static str {
        match self {
            LinkIndication::GoingDown { .. } => "going_down",
            LinkIndication::Gone => "gone",
            LinkIndication::Up => "up",
        }
    }
}

/// Drop-tail admission, the same in every model: a frame that finds the
/// queue `full` is counted and reported as dropped; otherwise it is counted
/// and reported as queued behind `waiting` others. Returns whether it was
/// admitted; the caller then queues it. `counters` are the sending side's
/// (enqueued, dropped because the queue was full).
pub(crate) fn admit<P: Copy>(
    port: Port,
    frame: Frame<P>,
    waiting: usize,
    full: bool,
    counters: (&mut u64, &mut u64),
    out: &mut LinkOut<P>,
) -> bool {
    let (enqueued, dropped_queue_full) = counters;
    if full {
        *dropped_queue_full += 1;
        out.push(LinkOutput::Dropped {
            port,
            frame,
            reason: DropReason::QueueFull,
        });
        return false;
    }
    *enqueued += 1;
    out.trace(|| LinkTrace::Enqueued {
        port,
        frame,
        queue_len: waiting as u32,
    });
    true
}

impl<P> LinkOutput<P> {
    /// The port the output concerns.
    pub fn port(&self) -> Port {
        match self {
            LinkOutput::TxStart { port, .. }
            | LinkOutput::Delivered { port, .. }
            | LinkOutput::Dropped { port, .. }
            | LinkOutput::MediumBusy { port, .. }
            | LinkOutput::MediumFree { port }
            | LinkOutput::Indication { port, .. }
            | LinkOutput::Consumed { port, .. }
            | LinkOutput::Arrived { port, .. }
            | LinkOutput::Captured { port, .. } => *port,
        }
    }
}

/// Counters kept per sending port on wired links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DirectionStats {
    /// Frames accepted into the queue.
    pub enqueued: u64,
    /// Frames that started crossing.
    pub sent_packets: u64,
    /// Bytes of frames that started crossing.
    pub sent_bytes: u64,
    /// Frames delivered to the other end.
    pub delivered_packets: u64,
    /// Bytes delivered to the other end.
    pub delivered_bytes: u64,
    /// Frames dropped because the queue was full.
    pub dropped_queue_full: u64,
    /// Frames lost to the random loss process.
    pub dropped_random_loss: u64,
    /// Longest queue seen, in frames.
    pub max_queue_len: u64,
    /// Time spent transmitting, in ns.
    pub busy_ns: u64,
}

link_registry! {
    /// Full-duplex point-to-point ([`P2pLink`]).
    PointToPoint => p2p::P2pSpec,
    /// Half-duplex point-to-point: one frame at a time in either direction
    /// ([`HalfDuplexLink`]).
    HalfDuplex => half_duplex::HalfDuplexSpec,
    /// Shared broadcast medium with a unit-disk radio model
    /// ([`BroadcastMedium`]).
    Broadcast => broadcast::BroadcastSpec,
    /// Time-slotted NFC link with UART and MCU at each end ([`NfcLink`]).
    Nfc => nfc::NfcSpec,
    /// Point-to-point with bursty (Gilbert–Elliott) losses
    /// ([`GilbertElliottLink`]).
    GilbertElliott => gilbert_elliott::GilbertElliottSpec,
    /// Point-to-point with predicted outages and link-layer indications
    /// ([`FadingLink`]).
    Fading => fading::FadingSpec,
    /// A duty-cycled IEEE 802.15.4 mesh with 6LoWPAN and RPL inside
    /// ([`Ieee802154Link`]).
    Ieee802154 => ieee802154::Ieee802154Spec,
    /// A SLIP serial line, timed by each datagram's encoding ([`SlipLink`]).
    Slip => slip::SlipSpec,
    /// An IEEE 802.11 BSS: an access point and stations with the DCF on a
    /// shared radio medium ([`WifiLink`]).
    Wifi => wifi::WifiSpec,
}

/// Drives a link until it is idle, returning each output with the time it
/// came at (for the models' unit tests).
#[cfg(test)]
pub(crate) fn drain_link<L: LinkModel<u32>>(
    link: &mut L,
    out: &mut LinkOut<u32>,
) -> Vec<(SimTime, LinkOutput<u32>)> {
    let mut log = Vec::new();
    while let Some(t) = link.poll_timeout() {
        link.handle_timeout(t, out);
        log.extend(out.drain(..).map(|o| (t, o)));
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(packet: u32) -> Frame<u32> {
        Frame { packet, len: 100 }
    }

    fn enqueued(packet: u32) -> LinkTrace<u32> {
        LinkTrace::Enqueued {
            port: 0,
            frame: frame(packet),
            queue_len: 0,
        }
    }

    fn started(packet: u32) -> LinkOutput<u32> {
        LinkOutput::TxStart {
            port: 0,
            frame: frame(packet),
        }
    }

    #[test]
    fn records_come_back_in_their_place_among_the_outputs() {
        let mut out = LinkOut::traced();
        out.trace(|| enqueued(1));
        out.push(started(1));
        out.trace(|| enqueued(2));
        out.trace(|| enqueued(3));
        out.push(started(2));
        out.trace(|| enqueued(4));
        assert_eq!(
            out.take_all(),
            [
                Emitted::Trace(enqueued(1)),
                Emitted::Output(started(1)),
                Emitted::Trace(enqueued(2)),
                Emitted::Trace(enqueued(3)),
                Emitted::Output(started(2)),
                Emitted::Trace(enqueued(4)),
            ]
        );
        assert!(out.is_empty() && out.traces().next().is_none());
    }

    #[test]
    fn without_traces_a_record_is_never_built() {
        let mut out = LinkOut::<u32>::new();
        out.trace(|| unreachable!("built without a listener"));
        out.push(started(1));
        assert_eq!(out.take_all(), [Emitted::Output(started(1))]);
    }
}
