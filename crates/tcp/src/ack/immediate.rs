//! Acknowledge every segment at once (RFC 9293 without delayed ACKs; uIP).

use rtolab_time::SimTime;
use serde::{Deserialize, Serialize};

use super::{AckDecision, AckFactory, AckPolicy, AckReason, SegmentArrival};

/// The immediate policy has no parameters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImmediateAckConfig {}

impl AckFactory for ImmediateAckConfig {
    fn name(&self) -> &'static str {
        "immediate"
    }
    fn build(&self) -> Box<dyn AckPolicy> {
        Box::new(ImmediateAck)
    }
}

/// Always [`AckDecision::Now`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ImmediateAck;

impl AckPolicy for ImmediateAck {
    fn name(&self) -> &'static str {
        "immediate"
    }
    fn on_segment(
        &mut self,
        _now: SimTime,
        _s: &SegmentArrival,
    ) -> (AckDecision, Option<AckReason>) {
        (AckDecision::Now, Some(AckReason::Immediate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::test_util::data;

    #[test]
    fn acks_everything_now() {
        let mut p = ImmediateAckConfig {}.build();
        for len in [1, 500, 1000] {
            assert_eq!(p.on_segment(SimTime::ZERO, &data(len)).0, AckDecision::Now);
        }
    }
}
