//! Size-aware RTO for any channel: the general form of the bridge study's
//! recommendation (bridge spec §3.3, last point). Instead of a formula for
//! one link, the policy learns how the round trip grows with a segment's
//! size from its own RTT samples, and gives each segment an RTO for its
//! size.
//!
//! The model is `RTT(size) = base + per_byte · size`, fitted by
//! exponentially weighted least squares (weight `1/gain` for the newest
//! sample, as RFC 6298's smoothing). Its spread is the weighted mean
//! absolute error of the predictions, and a segment's RTO is
//! `base + per_byte · size + k · spread`, clamped to `[min, max]`. Until the
//! samples have covered different sizes the slope is zero and the policy
//! behaves like a plain smoothed estimator. As in Algorithm 1, each segment's
//! estimate is made before it is first sent and a retransmission backs off
//! from that segment's own estimate.

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::bridge::round_up;
use super::planned::PlannedRtos;
use super::{
    AckProgress, ConnectionContext, Expiry, RtoEstimate, RtoFactory, RtoPolicy, RttSample,
    Transmission,
};
use crate::serde_duration;

/// Parameters of the learned per-byte policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PerByteRtoConfig {
    /// RTO before the first sample (RFC 6298 (2.1): 1 s).
    #[serde(with = "serde_duration")]
    pub initial: SimDuration,
    /// Smallest RTO (RFC 6298 (2.4): 1 s).
    #[serde(with = "serde_duration")]
    pub min: SimDuration,
    /// Largest RTO, also after backoff.
    #[serde(with = "serde_duration")]
    pub max: SimDuration,
    /// The newest sample weighs `1/gain` (8, as RFC 6298's alpha).
    pub gain: u32,
    /// Multiplier of the spread (4, as RFC 6298's K).
    pub k: u32,
    /// Bytes added to a segment's payload to get the size the channel
    /// carries (IPv4 + TCP headers: 40; add link framing where known).
    pub overhead: u32,
    /// Grid the RTO is rounded up to (zero: no rounding).
    #[serde(with = "serde_duration")]
    pub timer: SimDuration,
}

impl Default for PerByteRtoConfig {
    fn default() -> Self {
        PerByteRtoConfig {
            initial: SimDuration::from_secs(1),
            min: SimDuration::from_secs(1),
            max: SimDuration::from_secs(60),
            gain: 8,
            k: 4,
            overhead: 40,
            timer: SimDuration::ZERO,
        }
    }
}

impl RtoFactory for PerByteRtoConfig {
    fn name(&self) -> &'static str {
        "per_byte"
    }
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(PerByteRto::new(*self, ctx))
    }
}

/// The weighted fit of RTT (seconds) against size (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Fit {
    samples: u64,
    mean_size: f64,
    mean_rtt: f64,
    /// Weighted variance of sizes and covariance of size and RTT.
    var_size: f64,
    cov: f64,
    /// Weighted mean absolute prediction error.
    spread: f64,
}

impl Fit {
    /// Sizes closer than this (in bytes², as variance) carry no slope.
    const MIN_VARIANCE: f64 = 1.0;

    fn per_byte(&self) -> f64 {
        if self.var_size < Self::MIN_VARIANCE {
            return 0.0;
        }
        (self.cov / self.var_size).max(0.0)
    }

    fn predict(&self, size: f64) -> f64 {
        let slope = self.per_byte();
        let base = (self.mean_rtt - slope * self.mean_size).max(0.0);
        base + slope * size
    }

    fn add(&mut self, size: f64, rtt: f64, weight: f64) {
        if self.samples == 0 {
            *self = Fit {
                samples: 1,
                mean_size: size,
                mean_rtt: rtt,
                var_size: 0.0,
                cov: 0.0,
                // RFC 6298 (2.2): the first deviation is half the sample.
                spread: rtt / 2.0,
            };
            return;
        }
        let error = (rtt - self.predict(size)).abs();
        self.spread += weight * (error - self.spread);
        let dx = size - self.mean_size;
        let dy = rtt - self.mean_rtt;
        self.mean_size += weight * dx;
        self.mean_rtt += weight * dy;
        self.var_size = (1.0 - weight) * (self.var_size + weight * dx * dx);
        self.cov = (1.0 - weight) * (self.cov + weight * dx * dy);
        self.samples += 1;
    }
}

/// Per-connection state of the learned per-byte policy.
#[derive(Clone, Debug)]
pub struct PerByteRto {
    config: PerByteRtoConfig,
    mss: usize,
    fit: Fit,
    /// The estimate each outstanding segment got before it was first sent.
    planned: PlannedRtos,
}

impl PerByteRto {
    /// Fresh state, no samples.
    pub fn new(config: PerByteRtoConfig, ctx: &ConnectionContext) -> Self {
        PerByteRto {
            config,
            mss: ctx.mss,
            fit: Fit::default(),
            planned: PlannedRtos::default(),
        }
    }

    /// The learned delay per byte, in seconds (0 until sizes have varied).
    pub fn per_byte(&self) -> f64 {
        self.fit.per_byte()
    }

    /// The RTO, before backoff, for a segment with `payload` bytes.
    pub fn rto_for(&self, payload: usize) -> SimDuration {
        let c = &self.config;
        if self.fit.samples == 0 {
            return round_up(c.initial.max(c.min).min(c.max), c.timer);
        }
        let size = payload as f64 + f64::from(c.overhead);
        let seconds = self.fit.predict(size) + f64::from(c.k) * self.fit.spread;
        let rto = SimDuration::from_secs_f64(seconds.max(0.0));
        round_up(rto.max(c.min).min(c.max), c.timer)
    }
}

impl RtoPolicy for PerByteRto {
    fn name(&self) -> &'static str {
        "per_byte"
    }

    fn on_transmit(&mut self, _now: SimTime, tx: &Transmission) {
        if self.planned.needs_plan(tx) {
            let rto = self.rto_for(tx.len.saturating_sub(usize::from(tx.syn)));
            self.planned.record(tx.offset, rto);
        }
    }

    fn on_rtt_sample(&mut self, _now: SimTime, sample: &RttSample) {
        // Karn's rule.
        if !sample.unambiguous() {
            return;
        }
        let size = sample.segment_len as f64 + f64::from(self.config.overhead);
        let weight = 1.0 / f64::from(self.config.gain.max(1));
        self.fit.add(size, sample.corrected().as_secs_f64(), weight);
    }

    fn on_ack(&mut self, _now: SimTime, ack: &AckProgress) {
        self.planned.on_ack(ack);
    }

    fn on_expiry(&mut self, _now: SimTime, expiry: &Expiry) {
        self.planned.on_expiry(expiry);
    }

    fn timeout_for(&mut self, _now: SimTime, oldest: &Transmission) -> SimDuration {
        self.planned.timeout_for(oldest, self.config.max, || {
            self.rto_for(oldest.len.saturating_sub(usize::from(oldest.syn)))
        })
    }

    fn estimate(&self) -> RtoEstimate {
        RtoEstimate {
            srtt: (self.fit.samples > 0)
                .then(|| SimDuration::from_secs_f64(self.fit.mean_rtt.max(0.0))),
            rttvar: (self.fit.samples > 0)
                .then(|| SimDuration::from_secs_f64(self.fit.spread.max(0.0))),
            rto: self.rto_for(self.mss),
            backoff: self.planned.backoff(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Granularity;
    use crate::rto::test_util::{ctx, sample, tx};

    fn policy(config: PerByteRtoConfig) -> PerByteRto {
        PerByteRto::new(config, &ctx(Granularity::Fine))
    }

    /// A channel whose RTT is 100 ms plus 1 ms per byte (headers included).
    fn feed(p: &mut PerByteRto, payload: usize) {
        let mut s = sample(0);
        s.segment_len = payload;
        s.rtt = SimDuration::from_millis(100 + payload as u64 + 40);
        p.on_rtt_sample(SimTime::ZERO, &s);
    }

    #[test]
    fn learns_the_delay_per_byte_and_sizes_each_rto() {
        let mut p = policy(PerByteRtoConfig {
            min: SimDuration::ZERO,
            ..PerByteRtoConfig::default()
        });
        assert_eq!(p.rto_for(500), SimDuration::from_secs(1), "initial");
        for i in 0..200 {
            feed(&mut p, if i % 2 == 0 { 60 } else { 960 });
        }
        assert!((p.per_byte() - 0.001).abs() < 1e-5, "{}", p.per_byte());
        // A perfect fit leaves no spread: the RTO is the prediction.
        let mid = p.rto_for(460).as_secs_f64();
        assert!((mid - 0.6).abs() < 0.01, "{mid}");
        assert!(p.rto_for(960) > p.rto_for(60));
    }

    #[test]
    fn one_size_only_behaves_like_a_smoothed_estimator() {
        let mut p = policy(PerByteRtoConfig::default());
        for _ in 0..50 {
            feed(&mut p, 500);
        }
        assert_eq!(p.per_byte(), 0.0);
        // 640 ms for every size, lifted to the 1 s minimum.
        assert_eq!(p.rto_for(10), p.rto_for(1000));
        assert_eq!(p.rto_for(10), SimDuration::from_secs(1));
    }

    #[test]
    fn ambiguous_samples_are_ignored_and_backoff_uses_the_own_estimate() {
        let mut p = policy(PerByteRtoConfig {
            timer: SimDuration::from_millis(500),
            ..PerByteRtoConfig::default()
        });
        let mut s = sample(5000);
        s.retransmitted = true;
        p.on_rtt_sample(SimTime::ZERO, &s);
        assert_eq!(p.estimate().srtt, None);
        let seg = tx(1, 1000, 0);
        p.on_transmit(SimTime::ZERO, &seg);
        assert_eq!(
            p.timeout_for(SimTime::ZERO, &tx(1, 1000, 2)),
            SimDuration::from_secs(4)
        );
    }
}
