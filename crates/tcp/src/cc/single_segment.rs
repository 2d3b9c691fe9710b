//! uIP's congestion control: at most one unacknowledged segment, no window
//! growth and no fast retransmit; the retransmission timer is the only
//! reaction to loss (uip-rto spec §1).

use rtolab_time::SimTime;
use serde::{Deserialize, Serialize};

use super::{AckEvent, CcContext, CcFactory, CcMetrics, CongestionControl, RecoveryAction};

/// Single-segment policy; it has no parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SingleSegmentConfig {}

impl CcFactory for SingleSegmentConfig {
    fn name(&self) -> &'static str {
        "single_segment"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(SingleSegment { mss: ctx.mss })
    }
}

/// One segment in flight, always.
#[derive(Clone, Debug)]
pub struct SingleSegment {
    mss: usize,
}

impl CongestionControl for SingleSegment {
    fn name(&self) -> &'static str {
        "single_segment"
    }
    fn window(&self) -> usize {
        self.mss
    }
    fn metrics(&self) -> CcMetrics {
        CcMetrics {
            cwnd: self.mss,
            ssthresh: self.mss,
            in_recovery: false,
            queue_estimate: None,
        }
    }
    fn max_segments_in_flight(&self) -> Option<usize> {
        Some(1)
    }
    fn on_ack(&mut self, _now: SimTime, _ack: &AckEvent) -> RecoveryAction {
        RecoveryAction::None
    }
    fn on_duplicate_ack(&mut self, _now: SimTime, _ack: &AckEvent) -> RecoveryAction {
        RecoveryAction::None
    }
    fn on_timeout(&mut self, _now: SimTime, _ack: &AckEvent) {}
    fn on_mss(&mut self, mss: usize) {
        self.mss = mss;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_util::{dup, MSS};

    #[test]
    fn never_fast_retransmits_and_never_grows() {
        let mut cc = SingleSegmentConfig {}.build(&CcContext {
            now: SimTime::ZERO,
            mss: MSS,
        });
        for n in 1..6 {
            let action = cc.on_duplicate_ack(SimTime::ZERO, &dup(n, MSS, 1, 1001));
            assert_eq!(action, RecoveryAction::None);
        }
        assert_eq!(cc.window(), MSS);
        assert_eq!(cc.max_segments_in_flight(), Some(1));
    }
}
