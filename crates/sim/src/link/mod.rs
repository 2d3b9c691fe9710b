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

mod broadcast;
mod half_duplex;
mod nfc;
mod p2p;

pub use broadcast::{BroadcastConfig, BroadcastMedium, BroadcastStats, MemberStats, Position};
pub use half_duplex::{
    HalfDuplexConfig, HalfDuplexLink, HalfDuplexStats, MediumTiming, Occupancy, RateDelay,
};
pub use nfc::{NfcConfig, NfcDirectionStats, NfcLink, NfcSlots, NfcStats};
pub use p2p::{P2pConfig, P2pLink, P2pStats};

use rtolab_time::SimTime;
use serde::Serialize;

use crate::pool::PacketId;
use crate::trace::DropReason;

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

/// What a link tells the attached interfaces. Everything happens at the
/// `now` of the call that produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkOutput<P> {
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
    out: &mut Vec<LinkOutput<P>>,
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
    out.push(LinkOutput::Enqueued {
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
            LinkOutput::Enqueued { port, .. }
            | LinkOutput::TxStart { port, .. }
            | LinkOutput::Delivered { port, .. }
            | LinkOutput::Dropped { port, .. }
            | LinkOutput::MediumBusy { port, .. }
            | LinkOutput::MediumFree { port } => *port,
        }
    }
}

/// Which model a link is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkKind {
    /// Full-duplex point-to-point.
    PointToPoint,
    /// Half-duplex point-to-point: one frame at a time in either direction.
    HalfDuplex,
    /// Shared broadcast medium with a unit-disk radio model.
    Broadcast,
    /// Time-slotted NFC link with UART and MCU at each end.
    Nfc,
}

/// Counters of a link, by model.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LinkStats {
    /// See [`P2pStats`].
    PointToPoint(P2pStats),
    /// See [`HalfDuplexStats`].
    HalfDuplex(HalfDuplexStats),
    /// See [`BroadcastStats`].
    Broadcast(BroadcastStats),
    /// See [`NfcStats`].
    Nfc(NfcStats),
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

/// The link models the simulator knows, dispatched by `match` rather than
/// through a trait object so the inner loop stays monomorphic.
pub enum Link {
    /// See [`P2pLink`].
    PointToPoint(P2pLink<PacketId>),
    /// See [`HalfDuplexLink`].
    HalfDuplex(HalfDuplexLink<PacketId>),
    /// See [`BroadcastMedium`].
    Broadcast(BroadcastMedium<PacketId>),
    /// See [`NfcLink`].
    Nfc(Box<NfcLink<PacketId>>),
}

impl Link {
    /// Which model this is.
    pub fn kind(&self) -> LinkKind {
        match self {
            Link::PointToPoint(_) => LinkKind::PointToPoint,
            Link::HalfDuplex(_) => LinkKind::HalfDuplex,
            Link::Broadcast(_) => LinkKind::Broadcast,
            Link::Nfc(_) => LinkKind::Nfc,
        }
    }

    /// Hands a frame from `from` to the link, addressed to `to` (only the
    /// broadcast medium needs the address; wired links have one peer).
    pub fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        to: Port,
        frame: Frame<PacketId>,
        out: &mut Vec<LinkOutput<PacketId>>,
    ) {
        match self {
            Link::PointToPoint(l) => l.transmit(now, from, frame, out),
            Link::HalfDuplex(l) => l.transmit(now, from, frame, out),
            Link::Broadcast(l) => l.transmit(now, from, to, frame, out),
            Link::Nfc(l) => l.transmit(now, from, frame, out),
        }
    }

    /// Processes everything due at or before `now`.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut Vec<LinkOutput<PacketId>>) {
        match self {
            Link::PointToPoint(l) => l.handle_timeout(now, out),
            Link::HalfDuplex(l) => l.handle_timeout(now, out),
            Link::Broadcast(l) => l.handle_timeout(now, out),
            Link::Nfc(l) => l.handle_timeout(now, out),
        }
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        match self {
            Link::PointToPoint(l) => l.poll_timeout(),
            Link::HalfDuplex(l) => l.poll_timeout(),
            Link::Broadcast(l) => l.poll_timeout(),
            Link::Nfc(l) => l.poll_timeout(),
        }
    }

    /// Whether the link produces [`LinkOutput::TxStart`] notices (on by
    /// default). Only the point-to-point link can do without them, and it
    /// is then woken half as often; the other models always produce them.
    pub fn set_start_notices(&mut self, on: bool) {
        if let Link::PointToPoint(l) = self {
            l.set_start_notices(on);
        }
    }

    /// A snapshot of the link's counters as of `now`.
    pub fn stats(&self, now: SimTime) -> LinkStats {
        match self {
            Link::PointToPoint(l) => LinkStats::PointToPoint(l.stats(now)),
            Link::HalfDuplex(l) => LinkStats::HalfDuplex(l.stats()),
            Link::Broadcast(l) => LinkStats::Broadcast(l.stats()),
            Link::Nfc(l) => LinkStats::Nfc(l.stats()),
        }
    }

    /// How many interfaces may attach (`None`: any number).
    pub fn max_ports(&self) -> Option<usize> {
        match self {
            Link::PointToPoint(_) | Link::HalfDuplex(_) | Link::Nfc(_) => Some(2),
            Link::Broadcast(_) => None,
        }
    }
}
