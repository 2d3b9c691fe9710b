//! TCP Westwood+ (S. Mascolo, L. A. Grieco, R. Ferorelli, P. Camarda and
//! G. Piscitelli, "Performance evaluation of Westwood+ TCP congestion
//! control", Performance Evaluation 55, 2004).
//!
//! The sender estimates the bandwidth its connection gets from the rate of
//! acknowledged bytes: once per round trip (the last RTT sample, at least
//! 50 ms) it takes the bytes acknowledged over the interval as a sample and
//! low-pass filters the samples (`bwe ← gain · bwe + (1 - gain) · sample`).
//! After a loss it sets the slow-start threshold to the window the path
//! sustains, `bwe · RTTmin` (at least two segments), instead of halving:
//! the window after three duplicate ACKs, one segment after a timeout as in
//! Reno. `RTTmin` is the smallest RTT sample seen, after its correction
//! (timelost), which is where the MAC's retransmission time enters.
//! Growth and recovery are NewReno's.
//!
//! The same loss response with another estimator is TIBET ([`super::tibet`]).

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::reno::{RenoConfig, RenoCore};
use super::{
    AckEvent, CcContext, CcFactory, CcMetrics, CongestionControl, RecoveryAction, SpuriousTimeout,
};
use crate::rto::RttSample;

/// Parameters of Westwood+.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WestwoodConfig {
    /// Weight of the previous estimate in the filter (the paper's 0.9).
    pub gain: f64,
    /// Window parameters shared with Reno (initial window, cap, ...).
    pub window: RenoConfig,
}

impl Default for WestwoodConfig {
    fn default() -> Self {
        WestwoodConfig {
            gain: 0.9,
            window: RenoConfig::default(),
        }
    }
}

impl CcFactory for WestwoodConfig {
    fn name(&self) -> &'static str {
        "westwood"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(BandwidthReno::new(
            "westwood",
            self.window,
            ctx.mss,
            Estimator::Westwood(RoundEstimate::new(self.gain)),
        ))
    }
}

/// The shortest interval a Westwood+ sample spans (Linux's
/// `TCP_WESTWOOD_RTT_MIN`, 50 ms), so that ACK compression in a very short
/// round trip does not read as bandwidth.
pub const MIN_INTERVAL: SimDuration = SimDuration::from_millis(50);

/// Westwood+'s estimate: bytes acknowledged per round trip, filtered.
#[derive(Clone, Debug)]
pub struct RoundEstimate {
    gain: f64,
    /// Bytes per second.
    estimate: Option<f64>,
    acked: usize,
    since: Option<SimTime>,
}

impl RoundEstimate {
    /// No estimate yet.
    pub fn new(gain: f64) -> Self {
        RoundEstimate {
            gain,
            estimate: None,
            acked: 0,
            since: None,
        }
    }

    /// `bytes` newly acknowledged at `now`; `rtt` the last sample.
    pub fn on_ack(&mut self, now: SimTime, bytes: usize, rtt: Option<SimDuration>) {
        let since = *self.since.get_or_insert(now);
        self.acked += bytes;
        let interval = now.saturating_since(since);
        let round = rtt.unwrap_or(MIN_INTERVAL).max(MIN_INTERVAL);
        if interval < round {
            return;
        }
        let sample = self.acked as f64 / interval.as_secs_f64();
        self.estimate = Some(match self.estimate {
            None => sample,
            Some(e) => self.gain * e + (1.0 - self.gain) * sample,
        });
        self.acked = 0;
        self.since = Some(now);
    }
}

/// TIBET's estimate: the mean length and the mean interval of
/// acknowledgements, each low-pass filtered, and their ratio.
#[derive(Clone, Debug)]
pub struct IntervalEstimate {
    gain: f64,
    length: Option<f64>,
    interval: Option<f64>,
    last: Option<SimTime>,
}

impl IntervalEstimate {
    /// No estimate yet.
    pub fn new(gain: f64) -> Self {
        IntervalEstimate {
            gain,
            length: None,
            interval: None,
            last: None,
        }
    }

    /// `bytes` newly acknowledged at `now`.
    pub fn on_ack(&mut self, now: SimTime, bytes: usize) {
        let Some(last) = self.last.replace(now) else {
            return;
        };
        let gap = now.saturating_since(last).as_secs_f64();
        let filter = |old: Option<f64>, new: f64| match old {
            None => new,
            Some(o) => self.gain * o + (1.0 - self.gain) * new,
        };
        self.length = Some(filter(self.length, bytes as f64));
        self.interval = Some(filter(self.interval, gap));
    }

    /// Bytes per second.
    pub fn estimate(&self) -> Option<f64> {
        match (self.length, self.interval) {
            (Some(l), Some(i)) if i > 0.0 => Some(l / i),
            _ => None,
        }
    }
}

/// Which bandwidth estimate sets the threshold after a loss.
#[derive(Clone, Debug)]
pub enum Estimator {
    /// Westwood+'s per-round samples.
    Westwood(RoundEstimate),
    /// TIBET's filtered lengths and intervals.
    Tibet(IntervalEstimate),
}

impl Estimator {
    fn on_ack(&mut self, now: SimTime, bytes: usize, rtt: Option<SimDuration>) {
        match self {
            Estimator::Westwood(e) => e.on_ack(now, bytes, rtt),
            Estimator::Tibet(e) => e.on_ack(now, bytes),
        }
    }

    fn estimate(&self) -> Option<f64> {
        match self {
            Estimator::Westwood(e) => e.estimate,
            Estimator::Tibet(e) => e.estimate(),
        }
    }
}

/// NewReno whose loss response sets the threshold from a bandwidth
/// estimate and the smallest RTT (Westwood+, TIBET).
#[derive(Clone, Debug)]
pub struct BandwidthReno {
    name: &'static str,
    core: RenoCore,
    estimator: Estimator,
    min_rtt: Option<SimDuration>,
    last_rtt: Option<SimDuration>,
}

impl BandwidthReno {
    /// Fresh state.
    pub fn new(name: &'static str, window: RenoConfig, mss: usize, estimator: Estimator) -> Self {
        BandwidthReno {
            name,
            core: RenoCore::new(window, mss, true),
            estimator,
            min_rtt: None,
            last_rtt: None,
        }
    }

    /// The estimate in bytes per second.
    pub fn bandwidth(&self) -> Option<f64> {
        self.estimator.estimate()
    }

    /// `bwe · RTTmin`, at least two segments; `None` before both exist.
    fn threshold(&self) -> Option<usize> {
        let (bw, rtt) = (self.estimator.estimate()?, self.min_rtt?);
        let bytes = (bw * rtt.as_secs_f64()) as usize;
        Some(bytes.max(2 * self.core.mss))
    }
}

impl CongestionControl for BandwidthReno {
    fn name(&self) -> &'static str {
        self.name
    }
    fn window(&self) -> usize {
        self.core.cwnd
    }
    fn metrics(&self) -> CcMetrics {
        self.core.base_metrics()
    }
    fn on_ack(&mut self, now: SimTime, ack: &AckEvent) -> RecoveryAction {
        self.estimator.on_ack(now, ack.bytes_acked, self.last_rtt);
        self.core.ack(ack, true)
    }
    fn on_duplicate_ack(&mut self, now: SimTime, ack: &AckEvent) -> RecoveryAction {
        // A duplicate ACK reports a segment that left the network.
        self.estimator.on_ack(now, ack.mss, self.last_rtt);
        let action = self.core.duplicate(ack);
        if action == RecoveryAction::FastRetransmit {
            if let Some(threshold) = self.threshold() {
                self.core.ssthresh = threshold;
                self.core.cwnd = threshold + 3 * self.core.mss;
            }
        }
        action
    }
    fn on_timeout(&mut self, _now: SimTime, ack: &AckEvent) {
        self.core.timeout(ack);
        if let Some(threshold) = self.threshold() {
            self.core.ssthresh = threshold;
        }
    }
    fn on_rtt_sample(&mut self, _now: SimTime, sample: &RttSample) {
        if !sample.unambiguous() {
            return;
        }
        let rtt = sample.corrected();
        self.last_rtt = Some(rtt);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }
    fn on_spurious_timeout(&mut self, _now: SimTime, undo: &SpuriousTimeout) {
        self.core.undo_timeout(undo);
    }
    fn on_mss(&mut self, mss: usize) {
        self.core.on_mss(mss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_util::{ack, dup, MSS};
    use crate::cc::InitialWindow;
    use crate::rto::test_util::sample;

    fn ms(n: u64) -> SimTime {
        SimTime::from_millis(n)
    }

    fn westwood() -> BandwidthReno {
        BandwidthReno::new(
            "westwood",
            RenoConfig {
                initial_window: InitialWindow::Segments(10),
                ..RenoConfig::default()
            },
            MSS,
            Estimator::Westwood(RoundEstimate::new(0.9)),
        )
    }

    #[test]
    fn round_samples_are_filtered_with_the_gain() {
        let mut e = RoundEstimate::new(0.9);
        // 100 ms rounds: 10 000 bytes then 20 000 bytes per round.
        e.on_ack(ms(0), 0, Some(SimDuration::from_millis(100)));
        e.on_ack(ms(100), 10_000, Some(SimDuration::from_millis(100)));
        assert_eq!(e.estimate, Some(100_000.0));
        e.on_ack(ms(200), 20_000, Some(SimDuration::from_millis(100)));
        // 0.9 * 100 000 + 0.1 * 200 000.
        assert!((e.estimate.unwrap() - 110_000.0).abs() < 1e-6);
        // An interval shorter than the round adds to the next sample.
        e.on_ack(ms(250), 5_000, Some(SimDuration::from_millis(100)));
        assert!((e.estimate.unwrap() - 110_000.0).abs() < 1e-6);
    }

    #[test]
    fn rounds_last_at_least_50_ms() {
        let mut e = RoundEstimate::new(0.9);
        e.on_ack(ms(0), 0, Some(SimDuration::from_millis(10)));
        e.on_ack(ms(20), 1000, Some(SimDuration::from_millis(10)));
        assert_eq!(e.estimate, None);
        e.on_ack(ms(50), 1000, Some(SimDuration::from_millis(10)));
        assert_eq!(e.estimate, Some(40_000.0));
    }

    #[test]
    fn a_loss_sets_the_threshold_to_bandwidth_times_the_smallest_rtt() {
        let mut w = westwood();
        // RTTmin 100 ms (a later 300 ms sample changes nothing); 100 kB/s.
        w.on_rtt_sample(ms(0), &sample(100));
        w.on_ack(ms(0), &ack(0, 9000, 1000, 10_000));
        w.on_ack(ms(100), &ack(10_000, 9000, 11_000, 20_000));
        w.on_rtt_sample(ms(100), &sample(300));
        assert_eq!(w.bandwidth(), Some(100_000.0));
        for n in 1..=3 {
            w.on_duplicate_ack(ms(110), &dup(n, 9000, 11_000, 20_000));
        }
        // 100 kB/s * 100 ms = 10 000 bytes (Reno would halve 9000).
        assert_eq!(w.metrics().ssthresh, 10_000);
        w.on_timeout(ms(500), &ack(0, 9000, 11_000, 20_000));
        assert_eq!((w.window(), w.metrics().ssthresh), (MSS, 10_000));
    }

    #[test]
    fn corrected_samples_set_the_smallest_rtt() {
        let mut w = westwood();
        let mut s = sample(150);
        s.correction = Some(SimDuration::from_millis(50));
        w.on_rtt_sample(ms(0), &s);
        assert_eq!(w.min_rtt, Some(SimDuration::from_millis(100)));
    }

    #[test]
    fn without_an_estimate_a_loss_halves_as_newreno() {
        let mut w = westwood();
        for n in 1..=3 {
            w.on_duplicate_ack(ms(10), &dup(n, 10_000, 0, 10_000));
        }
        assert_eq!(w.metrics().ssthresh, 5000);
    }
}
