//! TCP Vegas (L. Brakmo and L. Peterson, "TCP Vegas: End to End Congestion
//! Avoidance on a Global Internet", IEEE JSAC 13(8), 1995).
//!
//! Once per round trip Vegas compares the expected rate `cwnd / BaseRTT`
//! with the actual rate `cwnd / RTT` and turns the difference into an
//! estimate of its own segments queued in the network:
//! `diff = cwnd/MSS * (RTT - BaseRTT) / RTT`. In congestion avoidance it adds
//! one segment when `diff < alpha` and removes one when `diff > beta`. Slow
//! start doubles the window every other round trip and ends when
//! `diff > gamma`. `BaseRTT` is the smallest RTT seen; `RTT` is the smallest
//! sample of the last round trip. Every sample is used, after its
//! correction (timelost) is removed. Loss handling is NewReno's.

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::reno::{RenoConfig, RenoCore};
use super::{
    AckEvent, CcContext, CcFactory, CcMetrics, CongestionControl, RecoveryAction, SpuriousTimeout,
};
use crate::rto::RttSample;

/// Parameters of Vegas; thresholds are in segments.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct VegasConfig {
    /// Grow when fewer than `alpha` segments are queued.
    pub alpha: f64,
    /// Shrink when more than `beta` segments are queued.
    pub beta: f64,
    /// Leave slow start when more than `gamma` segments are queued.
    pub gamma: f64,
    /// Window parameters shared with Reno (initial window, cap, ...).
    pub window: RenoConfig,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig {
            alpha: 2.0,
            beta: 4.0,
            gamma: 1.0,
            window: RenoConfig::default(),
        }
    }
}

impl CcFactory for VegasConfig {
    fn name(&self) -> &'static str {
        "vegas"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(Vegas::new(*self, ctx.mss))
    }
}

/// Per-connection Vegas state.
#[derive(Clone, Debug)]
pub struct Vegas {
    config: VegasConfig,
    core: RenoCore,
    base_rtt: Option<SimDuration>,
    round_min_rtt: Option<SimDuration>,
    /// The round trip ends when the ACK reaches this offset.
    round_end: u64,
    slow_start: bool,
    /// `slow_start` before the last timeout, for the Eifel response.
    slow_start_before_timeout: bool,
    /// Slow start grows only in every other round trip.
    grow_this_round: bool,
    diff: Option<f64>,
}

impl Vegas {
    /// Fresh state.
    pub fn new(config: VegasConfig, mss: usize) -> Self {
        Vegas {
            config,
            core: RenoCore::new(config.window, mss, true),
            base_rtt: None,
            round_min_rtt: None,
            round_end: 0,
            slow_start: true,
            slow_start_before_timeout: true,
            grow_this_round: true,
            diff: None,
        }
    }

    /// Estimated segments queued at the last adjustment.
    pub fn queue_estimate(&self) -> Option<f64> {
        self.diff
    }

    fn end_of_round(&mut self, ack: &AckEvent) {
        self.round_end = ack.highest_sent;
        let (Some(base), Some(rtt)) = (self.base_rtt, self.round_min_rtt.take()) else {
            return;
        };
        if rtt.is_zero() {
            return;
        }
        let mss = self.core.mss as f64;
        let segments = self.core.cwnd as f64 / mss;
        let base = base.as_nanos() as f64;
        let rtt = rtt.as_nanos() as f64;
        let diff = segments * (rtt - base) / rtt;
        self.diff = Some(diff);
        if self.slow_start {
            if diff > self.config.gamma {
                // Leave slow start at the window the path sustains plus one.
                let target = segments * base / rtt;
                self.slow_start = false;
                self.core.cwnd = self.core.cwnd.min(((target + 1.0) * mss) as usize);
                self.core.ssthresh = self.core.cwnd;
            } else {
                self.grow_this_round = !self.grow_this_round;
            }
        } else if diff > self.config.beta {
            self.core.cwnd = self.core.cwnd.saturating_sub(self.core.mss);
        } else if diff < self.config.alpha {
            self.core.cwnd += self.core.mss;
        }
        self.cap();
    }

    fn cap(&mut self) {
        if let Some(max) = self.config.window.max_window {
            self.core.cwnd = self.core.cwnd.min(max);
        }
        self.core.cwnd = self.core.cwnd.max(2 * self.core.mss);
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }
    fn window(&self) -> usize {
        self.core.cwnd
    }
    fn metrics(&self) -> CcMetrics {
        CcMetrics {
            queue_estimate: self.diff,
            ..self.core.base_metrics()
        }
    }
    fn on_ack(&mut self, _now: SimTime, ack: &AckEvent) -> RecoveryAction {
        if self.core.recovery.is_some() {
            return self.core.ack(ack, false);
        }
        if self.slow_start && self.core.cwnd >= self.core.ssthresh {
            self.slow_start = false;
        }
        if self.slow_start && self.grow_this_round {
            self.core.grow(ack.bytes_acked);
        }
        if ack.acked_to >= self.round_end {
            self.end_of_round(ack);
        }
        RecoveryAction::None
    }
    fn on_duplicate_ack(&mut self, _now: SimTime, ack: &AckEvent) -> RecoveryAction {
        self.core.duplicate(ack)
    }
    fn on_timeout(&mut self, _now: SimTime, ack: &AckEvent) {
        self.core.timeout(ack);
        self.slow_start_before_timeout = self.slow_start;
        self.slow_start = true;
        self.grow_this_round = true;
        self.round_end = ack.highest_sent;
        self.round_min_rtt = None;
    }
    fn on_rtt_sample(&mut self, _now: SimTime, sample: &RttSample) {
        if !sample.unambiguous() {
            return;
        }
        let rtt = sample.corrected();
        self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt)));
        self.round_min_rtt = Some(self.round_min_rtt.map_or(rtt, |b| b.min(rtt)));
    }
    fn on_spurious_timeout(&mut self, _now: SimTime, undo: &SpuriousTimeout) {
        // Loss handling is NewReno's, and so is undoing it; the phase
        // returns to what it was before the timeout.
        self.core.undo_timeout(undo);
        self.slow_start = self.slow_start_before_timeout;
    }
    fn on_mss(&mut self, mss: usize) {
        self.core.on_mss(mss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_util::{ack, MSS};
    use crate::cc::InitialWindow;
    use crate::rto::test_util::sample;

    const T: SimTime = SimTime::ZERO;

    fn vegas() -> Vegas {
        Vegas::new(
            VegasConfig {
                window: RenoConfig {
                    initial_window: InitialWindow::Segments(10),
                    ..RenoConfig::default()
                },
                ..VegasConfig::default()
            },
            MSS,
        )
    }

    /// One round trip: a sample of `rtt_ms` then an ACK ending the round.
    fn round(v: &mut Vegas, rtt_ms: u64, acked_to: &mut u64) {
        v.on_rtt_sample(T, &sample(rtt_ms));
        *acked_to += 1000;
        v.on_ack(T, &ack(1000, 0, *acked_to, *acked_to + 1000));
    }

    #[test]
    fn leaves_slow_start_when_queue_exceeds_gamma() {
        let mut v = vegas();
        let mut to = 0;
        round(&mut v, 100, &mut to);
        assert!(v.slow_start);
        // One growth ACK made cwnd 11 segments (none this round); 11 segments
        // at 125 ms vs 100 ms base: diff = 11 * 25/125 = 2.2 > gamma.
        round(&mut v, 125, &mut to);
        assert!(!v.slow_start);
        // target = 11 * 100/125 = 8.8 segments, +1 = 9.8 -> 9800 bytes.
        assert_eq!(v.window(), 9800);
        assert_eq!(v.metrics().queue_estimate, Some(2.2));
    }

    #[test]
    fn congestion_avoidance_moves_one_segment_per_round() {
        let mut v = vegas();
        v.slow_start = false;
        v.base_rtt = Some(SimDuration::from_millis(100));
        let mut to = 0;
        // 10 segments, RTT 100 ms: diff 0 < alpha -> +1.
        round(&mut v, 100, &mut to);
        assert_eq!(v.window(), 11_000);
        // 11 segments, RTT 200 ms: diff 5.5 > beta -> -1.
        round(&mut v, 200, &mut to);
        assert_eq!(v.window(), 10_000);
        // 10 segments, RTT 125 ms: diff 2 within [alpha, beta] -> unchanged.
        round(&mut v, 125, &mut to);
        assert_eq!(v.window(), 10_000);
    }

    #[test]
    fn uses_corrected_samples() {
        let mut v = vegas();
        let mut s = sample(300);
        s.correction = Some(SimDuration::from_millis(200));
        v.on_rtt_sample(T, &s);
        assert_eq!(v.base_rtt, Some(SimDuration::from_millis(100)));
    }
}
