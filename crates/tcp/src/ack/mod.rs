//! ACK policies: when a received segment is acknowledged.
//!
//! The engine asks an [`AckPolicy`] after every segment that carried data
//! (or a FIN) whether to acknowledge it now or by a deadline; an ACK sent
//! for any reason (piggy-backed on data, window update, timer) is reported
//! back so the policy can reset. An [`AckFactory`] holds configuration and
//! builds per-connection state.
//!
//! Implementations: [`immediate`], [`delayed`] (RFC 5681 §4.2, lwIP's fast
//! timer, Linux-like adaptive delay), [`size_aware`] (bridge spec §3.4).

use core::fmt::Debug;

use rtolab_time::SimTime;

use crate::clock::TimerEpoch;
use serde::Serialize;

pub mod delayed;
pub mod immediate;
pub mod size_aware;

pub use delayed::{DelayedAckConfig, DelayedAckTimer};
pub use immediate::ImmediateAckConfig;
pub use size_aware::SizeAwareAckConfig;

/// A segment with data or FIN that was accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentArrival {
    /// Payload bytes in the segment.
    pub len: usize,
    /// Receiver MSS (what a full-sized segment is).
    pub mss: usize,
    /// The segment lies beyond a hole (it was queued out of order).
    pub out_of_order: bool,
    /// The segment filled (part of) a hole in the reassembly queue.
    pub fills_gap: bool,
    /// The segment carried a FIN.
    pub fin: bool,
    /// Bytes this host would put in its next segment if it sent now.
    pub pending_send: usize,
}

/// When to acknowledge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AckDecision {
    /// Send an ACK now.
    Now,
    /// Send an ACK at `until` unless one goes out earlier.
    Delay {
        /// Deadline of the delayed ACK.
        #[serde(serialize_with = "crate::trace::ser_time")]
        until: SimTime,
    },
}

/// Why an ACK was sent at once; reported in delayed-ACK traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AckReason {
    /// The policy acknowledges everything at once.
    Immediate,
    /// Every n-th segment.
    SegmentCount,
    /// Out-of-order data or a filled hole (RFC 5681 §4.2).
    Reordering,
    /// A FIN arrived.
    Fin,
    /// The answer about to be sent is larger than the received segment.
    LargerAnswer,
    /// Freeze-TCP: the link layer warned of an outage; the ACK advertises
    /// a zero window.
    Freeze,
    /// Freeze-TCP: the link is back; the ACKs reopen the window.
    Thaw,
}

/// Per-connection ACK policy.
pub trait AckPolicy: Debug + Send {
    /// Short name used in traces.
    fn name(&self) -> &'static str;
    /// A data-bearing segment was accepted; decide when to acknowledge.
    fn on_segment(
        &mut self,
        now: SimTime,
        segment: &SegmentArrival,
    ) -> (AckDecision, Option<AckReason>);
    /// An ACK covering everything received went out.
    fn on_ack_sent(&mut self, _now: SimTime) {}
    /// Data of `sending` bytes is about to leave while an ACK is held back:
    /// whether to send that ACK on its own first instead of piggy-backing
    /// it. `received` is the payload of the last data segment that
    /// arrived. This covers answers written after the segment arrived,
    /// which [`AckPolicy::on_segment`] cannot see. Default: piggy-back.
    fn ack_before_data(&mut self, _now: SimTime, _received: usize, _sending: usize) -> bool {
        false
    }
    /// The host's tick timers run from `epoch` rather than from time zero
    /// ([`crate::clock::TimerStart::FirstConnection`]); told once, before
    /// any segment. A policy whose timer counts ticks moves them there.
    /// Default: nothing to move.
    fn place_ticks(&mut self, _epoch: &TimerEpoch) {}
}

/// Configuration of an ACK policy.
pub trait AckFactory: Debug + Send + Sync {
    /// Short name used in traces.
    fn name(&self) -> &'static str;
    /// A fresh policy for a new connection.
    fn build(&self) -> Box<dyn AckPolicy>;
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    pub fn data(len: usize) -> SegmentArrival {
        SegmentArrival {
            len,
            mss: 1000,
            out_of_order: false,
            fills_gap: false,
            fin: false,
            pending_send: 0,
        }
    }
}
