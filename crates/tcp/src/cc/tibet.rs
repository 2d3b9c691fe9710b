//! TIBET, Time Intervals based Bandwidth Estimation Technique (A. Capone,
//! L. Fratta and F. Martignon, "Bandwidth estimation schemes for TCP over
//! wireless networks", IEEE Transactions on Mobile Computing 3(2), 2004).
//!
//! Westwood's loss response ([`super::westwood`]) with another estimate:
//! the mean length of what each ACK acknowledges and the mean time between
//! ACKs, each low-pass filtered on its own
//! (`x ← gain · x + (1 - gain) · sample`), their ratio the bandwidth. Unlike
//! a per-round sample it does not overestimate when ACKs arrive in
//! bursts. After a loss the slow-start threshold becomes `bandwidth ·
//! RTTmin` (at least two segments), `RTTmin` the smallest RTT sample after
//! its correction (timelost). The filter's gain is a parameter (0.99 by
//! default, a time constant of about a hundred ACKs: our choice, to be
//! compared with the paper's).

use serde::{Deserialize, Serialize};

use super::reno::RenoConfig;
use super::westwood::{BandwidthReno, Estimator, IntervalEstimate};
use super::{CcContext, CcFactory, CongestionControl};

/// Parameters of TIBET.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TibetConfig {
    /// Weight of the previous value in both filters.
    pub gain: f64,
    /// Window parameters shared with Reno (initial window, cap, ...).
    pub window: RenoConfig,
}

impl Default for TibetConfig {
    fn default() -> Self {
        TibetConfig {
            gain: 0.99,
            window: RenoConfig::default(),
        }
    }
}

impl CcFactory for TibetConfig {
    fn name(&self) -> &'static str {
        "tibet"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(BandwidthReno::new(
            "tibet",
            self.window,
            ctx.mss,
            Estimator::Tibet(IntervalEstimate::new(self.gain)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use rtolab_time::SimTime;

    use super::*;

    #[test]
    fn lengths_and_intervals_are_filtered_apart() {
        let mut e = IntervalEstimate::new(0.5);
        e.on_ack(SimTime::from_millis(0), 1000);
        assert_eq!(e.estimate(), None);
        // 1000 bytes after 10 ms: 100 kB/s.
        e.on_ack(SimTime::from_millis(10), 1000);
        assert_eq!(e.estimate(), Some(100_000.0));
        // 3000 bytes after 30 ms: length 2000, interval 20 ms.
        e.on_ack(SimTime::from_millis(40), 3000);
        assert!((e.estimate().unwrap() - 100_000.0).abs() < 1e-6);
        // 2000 bytes after 10 ms: length 2000, interval 15 ms.
        e.on_ack(SimTime::from_millis(50), 2000);
        assert!((e.estimate().unwrap() - 2000.0 / 0.015).abs() < 1e-6);
    }
}
