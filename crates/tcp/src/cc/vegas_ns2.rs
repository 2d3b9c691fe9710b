//! TCP Vegas as ns-2.35's `Agent/TCP/Vegas` decides: on the mean of the
//! round's RTT samples, with its thresholds (`v_alpha_` 1, `v_beta_` 3,
//! `v_gamma_` 1).
//!
//! The timelost study ran this Vegas (timelost spec §3). What it takes from
//! ns-2's `tcp/tcp-vegas.cc`:
//!
//! * one RTT sample per new cumulative ACK, from the segment it
//!   acknowledges, none from a segment sent more than once (the engine's
//!   samples, [`crate::rto::RttSample::unambiguous`]);
//! * once per round trip (when the ACK passes the highest segment sent at
//!   the previous decision) the mean of the samples since then, or, when
//!   there were none, the time since then; `BaseRTT` the smallest sample or
//!   round mean seen;
//! * the queue estimate as ns-2 computes it: from the segments sent in
//!   the round rather than the window, rounded to a whole segment
//!   ([`super::vegas::QueueEstimate::Ns2`]);
//! * thresholds α 1, β 3, γ 1 segments; in congestion avoidance one segment
//!   more per round below α, one fewer above β;
//! * slow start grows every other round trip and ends, once the queue
//!   estimate passes γ at a decision that would begin a growing round
//!   trip (ns-2 does not look at the others), with an eighth off the
//!   window (`cwnd -= cwnd/8`);
//! * an initial window of 2 segments (`windowInit_`) and a cap of 20
//!   packets (`window_`) of the `ns2` profile's 960-byte MSS.
//!
//! What it leaves: ns-2 adds the segment a round grants one ACK at a
//! time (`1/cwnd` each), here all at once at the decision; its
//! fine-grained retransmission timer (`v_timeout_`, a retransmission on
//! the first or second duplicate ACK after a timeout-worthy delay) and its
//! window cut on a duplicate ACK (by a quarter, or a half after a
//! retransmission) are NewReno's fast recovery here; ns-2's timer is its
//! own coarse one (`tcpTick_` 10 ms),
//! which the `ns2` profile sets.

use serde::{Deserialize, Serialize};

use super::reno::RenoConfig;
use super::vegas::{QueueEstimate, RoundRtt, SlowStartExit, Vegas, VegasConfig};
use super::{CcContext, CcFactory, CongestionControl, InitialWindow};

/// ns-2's `window_`, 20 packets, in bytes of the `ns2` profile's MSS (960
/// bytes, 1000-byte packets).
pub const NS2_WINDOW: usize = 20 * 960;

/// Parameters of ns-2's Vegas; thresholds are in segments.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct VegasNs2Config {
    /// `v_alpha_`: grow when fewer segments are queued.
    pub alpha: f64,
    /// `v_beta_`: shrink when more segments are queued.
    pub beta: f64,
    /// `v_gamma_`: leave slow start when more segments are queued.
    pub gamma: f64,
    /// Window parameters shared with Reno (initial window, cap, ...).
    pub window: RenoConfig,
}

impl Default for VegasNs2Config {
    fn default() -> Self {
        VegasNs2Config {
            alpha: 1.0,
            beta: 3.0,
            gamma: 1.0,
            window: RenoConfig {
                initial_window: InitialWindow::Segments(2),
                max_window: Some(NS2_WINDOW),
                ..RenoConfig::default()
            },
        }
    }
}

impl VegasNs2Config {
    /// The [`VegasConfig`] that behaves as ns-2's Vegas.
    pub fn vegas(&self) -> VegasConfig {
        VegasConfig {
            alpha: self.alpha,
            beta: self.beta,
            gamma: self.gamma,
            round_rtt: RoundRtt::Mean,
            slow_start_exit: SlowStartExit::Eighth,
            queue_estimate: QueueEstimate::Ns2,
            window: self.window,
        }
    }
}

impl CcFactory for VegasNs2Config {
    fn name(&self) -> &'static str {
        "vegas_ns2"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(Vegas::new(self.vegas(), ctx.mss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_ns2s() {
        let v = VegasNs2Config::default().vegas();
        assert_eq!((v.alpha, v.beta, v.gamma), (1.0, 3.0, 1.0));
        assert_eq!(v.round_rtt, RoundRtt::Mean);
        assert_eq!(v.slow_start_exit, SlowStartExit::Eighth);
        assert_eq!(v.queue_estimate, QueueEstimate::Ns2);
        assert_eq!(v.window.initial_window, InitialWindow::Segments(2));
    }
}
