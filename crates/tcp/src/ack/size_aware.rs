//! The bridge study's modified delayed ACK (bridge spec §3.4): when a
//! segment arrives and the data this host is about to send is larger than
//! that segment, send a bare ACK at once instead of delaying it to
//! piggy-back on the larger answer, so the peer's size-based RTO sees an
//! ACK of the size it expects. Otherwise behave as [`super::delayed`].
//!
//! The answer may already be queued when the segment arrives (Nagle held
//! it) or be written in response to it; the second case is decided when
//! the data is about to leave ([`AckPolicy::ack_before_data`]).

use rtolab_time::SimTime;
use serde::{Deserialize, Serialize};

use super::delayed::{DelayedAck, DelayedAckConfig};
use super::{AckDecision, AckFactory, AckPolicy, AckReason, SegmentArrival};

/// The size-aware policy wraps a delayed-ACK configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SizeAwareAckConfig {
    /// The delayed-ACK behaviour when the answer is not larger.
    pub delayed: DelayedAckConfig,
}

impl AckFactory for SizeAwareAckConfig {
    fn name(&self) -> &'static str {
        "size_aware"
    }
    fn build(&self) -> Box<dyn AckPolicy> {
        Box::new(SizeAwareAck {
            delayed: DelayedAck::new(self.delayed),
        })
    }
}

/// Per-connection size-aware ACK state.
#[derive(Clone, Debug)]
pub struct SizeAwareAck {
    delayed: DelayedAck,
}

impl AckPolicy for SizeAwareAck {
    fn name(&self) -> &'static str {
        "size_aware"
    }
    fn on_segment(&mut self, now: SimTime, s: &SegmentArrival) -> (AckDecision, Option<AckReason>) {
        let decision = self.delayed.on_segment(now, s);
        if decision.0 != AckDecision::Now && s.pending_send > s.len {
            return (AckDecision::Now, Some(AckReason::LargerAnswer));
        }
        decision
    }
    fn on_ack_sent(&mut self, now: SimTime) {
        self.delayed.on_ack_sent(now);
    }
    fn ack_before_data(&mut self, _now: SimTime, received: usize, sending: usize) -> bool {
        sending > received
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::test_util::data;

    #[test]
    fn larger_answer_forces_a_bare_ack() {
        let mut p = SizeAwareAckConfig::default().build();
        let mut small_in_large_out = data(100);
        small_in_large_out.pending_send = 1000;
        assert_eq!(
            p.on_segment(SimTime::ZERO, &small_in_large_out),
            (AckDecision::Now, Some(AckReason::LargerAnswer))
        );
        p.on_ack_sent(SimTime::ZERO);
        // An answer no larger than the segment may piggy-back.
        let mut similar = data(100);
        similar.pending_send = 100;
        assert!(matches!(
            p.on_segment(SimTime::ZERO, &similar).0,
            AckDecision::Delay { .. }
        ));
        // An answer written after the segment arrived: a held ACK goes on
        // its own before data larger than what it acknowledges.
        assert!(p.ack_before_data(SimTime::ZERO, 100, 1000));
        assert!(!p.ack_before_data(SimTime::ZERO, 1000, 1000));
        assert!(!crate::ack::DelayedAckConfig::default()
            .build()
            .ack_before_data(SimTime::ZERO, 1, 1000));
    }
}
