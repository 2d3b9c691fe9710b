//! NewReno congestion control, RFC 6582: Reno (RFC 5681) whose fast
//! recovery survives partial ACKs, retransmitting one hole per partial ACK
//! and ending only when everything sent before recovery (`recover`) is
//! acknowledged.

use serde::{Deserialize, Serialize};

use super::reno::{RenoConfig, RenoCore};
use super::{CcContext, CcFactory, CongestionControl};

/// NewReno takes Reno's parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct NewRenoConfig(pub RenoConfig);

impl CcFactory for NewRenoConfig {
    fn name(&self) -> &'static str {
        "newreno"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(RenoCore::new(self.0, ctx.mss, true))
    }
}

#[cfg(test)]
mod tests {
    use rtolab_time::SimTime;

    use super::*;
    use crate::cc::test_util::{ack, dup, MSS};
    use crate::cc::{InitialWindow, RecoveryAction};

    const T: SimTime = SimTime::ZERO;

    fn newreno() -> RenoCore {
        RenoCore::new(
            RenoConfig {
                initial_window: InitialWindow::Segments(10),
                ..RenoConfig::default()
            },
            MSS,
            true,
        )
    }

    #[test]
    fn partial_acks_keep_recovery_and_full_ack_ends_it() {
        let mut cc = newreno();
        for n in 1..3 {
            cc.on_duplicate_ack(T, &dup(n, 10_000, 1, 10_001));
        }
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(3, 10_000, 1, 10_001)),
            RecoveryAction::FastRetransmit
        );
        assert_eq!(cc.cwnd, 8000);
        // Partial ACK of 2 segments: cwnd = 8000 - 2000 + 1000.
        assert_eq!(
            cc.on_ack(T, &ack(2000, 8000, 2001, 10_001)),
            RecoveryAction::RetransmitFirstUnacked
        );
        assert_eq!(cc.cwnd, 7000);
        // Partial ACK of less than one segment: no add-back.
        cc.on_ack(T, &ack(500, 7500, 2501, 10_001));
        assert_eq!(cc.cwnd, 6500);
        // Full ACK: min(ssthresh 5000, max(flight 0, MSS) + MSS) = 2000.
        assert_eq!(
            cc.on_ack(T, &ack(7500, 0, 10_001, 10_001)),
            RecoveryAction::None
        );
        assert_eq!(cc.cwnd, 2000);
        assert!(!cc.metrics().in_recovery);
    }

    #[test]
    fn no_second_recovery_for_losses_before_recover() {
        let mut cc = newreno();
        cc.on_timeout(T, &ack(0, 10_000, 1, 10_001));
        // Duplicate ACKs for data sent before the timeout do not start a
        // new recovery (RFC 6582 (2)).
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(3, 5000, 5001, 10_001)),
            RecoveryAction::None
        );
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(3, 5000, 10_002, 15_001)),
            RecoveryAction::FastRetransmit
        );
    }
}
