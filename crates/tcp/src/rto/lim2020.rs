//! Lim's 2020 retransmission timer for uIP (Sensors 20(17):4774;
//! uip-rto spec §2.2): weak RTT estimation, exponential backoff with variable
//! limits, and dithering.
//!
//! Event table (times in seconds, every constant a field of
//! [`LimRtoConfig`]):
//!
//! * **RTT sample.** Every acknowledged segment gives one, retransmitted
//!   ones included (CoCoA's weak estimator), measured from the segment's
//!   *first* transmission ([`RttSample::since_first_transmission`]; the
//!   engine hands over samples of retransmitted segments too and leaves
//!   Karn's rule to the policy). `Err = RTT − SRTT`, `SRTT += Err / 8`,
//!   `MDEV += (|Err| − MDEV) / 4`, `RTO = SRTT + 4·MDEV`. The timer of a
//!   fresh segment is `RTO` plus a uniform whole number of milliseconds in
//!   `[0, RTO·0.5)` when `RTO > 4`, else in `[0, RTO)`.
//! * **Expiry.** With `nrtx` the retransmissions of the segment so far,
//!   `n = min(nrtx, L)` where `L` is 4, 3, 2 or 1 for `RTO ≤ 3`, `≤ 6`,
//!   `≤ 12` and above; `timer = min(RTO·2^n, 48)`, then `timer += d` with
//!   `d` uniform in `[0, timer·0.25)` when `timer > 12`, `[0, timer·0.5)`
//!   when `timer > 4`, else `[0, timer]`.
//!
//! Readings of the published table. Where the paper allows more than one,
//! each is a field of [`LimRtoConfig`] and the default is the one its own
//! evidence supports best (docs/uip-rto.md, "Readings", says why):
//!
//! * The table bounds the doublings and the 48 s cap with `max`; its text
//!   describes bounds, which only `min` gives (uip-rto spec §2.2), so this is `min`.
//! * `MDEV = 16` is read as uIP's own `sv = 16`: 16 pulses of 500 ms
//!   holding four deviations, so `MDEV = 2 s`
//!   ([`LimRtoConfig::initial_mdev`]; `"16s"` reads it as seconds, and
//!   CoCoA's reading is `initial = "2s"` with
//!   [`LimRtoConfig::half_rtt_first_mdev`]). `SRTT` starts at 0 as uIP's
//!   `sa` does, so the first sample goes through the update
//!   ([`LimRtoConfig::srtt_start`]).
//! * `MDEV` follows `|Err|` as in uIP and CoCoA; the table prints `Err`
//!   ([`LimRtoConfig::mdev_error`]).
//! * Weak samples come from segments retransmitted at most twice,
//!   CoCoA's rule ([`LimRtoConfig::weak_samples`]); the timer armed
//!   after a sample is not held to the 48 s ceiling
//!   ([`LimRtoConfig::cap_sampled_timer`]).
//! * The 2024 condition compares the backed-off timer with 15 s and counts
//!   the retransmissions sent before this one
//!   ([`LimRtoConfig::subtract_compares`],
//!   [`LimRtoConfig::subtract_counts_this_retransmission`]).
//! * Before any sample the timer is [`LimRtoConfig::initial`], 3 s: the
//!   study's `UIP_RTO`, the fixed RTO its stock uIP runs with. It is not
//!   dithered (the table dithers on a sample).
//! * `nrtx` counts as uIP counts it (uip-rto spec §2.1): retransmissions sent before
//!   the one the expiry triggers, so the first retransmission is timed by
//!   `RTO·2^0`. The SYN counts like any segment.
//! * Dithering draws whole milliseconds (the expiry bands too), with the
//!   upper ends as printed ([`LimRtoConfig::dither_ends`]), from a
//!   ChaCha8 stream seeded by the connection's seed: the same seed gives
//!   the same timers.
//! * No timer is ever below 1 ms ([`crate::clock::MIN_TIMER`]), so a zero
//!   round trip cannot make the timer fire at one instant forever.
//!
//! With the engine's `uip` profile, timers fire on uIP's 500 ms pulse and
//! are rounded up to whole pulses; `rto_timer = "fine"` keeps the
//! millisecond dithering. Lim's 2024 scheme ([`super::lim2024`]) is this
//! policy with [`LimRtoConfig::modified_dithering`] on.
//!
//! [`RttSample::since_first_transmission`]: super::RttSample::since_first_transmission

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

use super::{
    ConnectionContext, Expiry, RtoEstimate, RtoFactory, RtoPolicy, RttSample, Transmission,
};
use crate::clock::MIN_TIMER;
use crate::serde_duration;

/// ChaCha stream of the dithering draws, apart from any other use of the
/// connection's seed.
const STREAM: u64 = u64::from_be_bytes(*b"lim-rto\0");

/// Parameters of Lim's timers (both schemes; the 2024 change is
/// [`LimRtoConfig::modified_dithering`]). The defaults are the published
/// values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimRtoConfig {
    /// Timer before the first RTT sample: 3 s, the study's `UIP_RTO`.
    #[serde(with = "serde_duration")]
    pub initial: SimDuration,
    /// `MDEV` before the first sample: 2 s, the published `MDEV = 16` read
    /// as uIP's `sv = 16` (500 ms pulses, four deviations); `"16s"` reads it
    /// as seconds (docs/uip-rto.md, "Readings").
    #[serde(with = "serde_duration")]
    pub initial_mdev: SimDuration,
    /// Let the first sample set `SRTT` to it and `MDEV` to half of it (RFC
    /// 6298 (2.2), as CoCoA does), whatever `srtt_start` and `initial_mdev`
    /// say.
    pub half_rtt_first_mdev: bool,
    /// Where `SRTT` starts: `"zero"` (uIP's `sa = 0`: the first sample goes
    /// through the update) or `"first_sample"` (the first sample sets it).
    pub srtt_start: SrttStart,
    /// The error `MDEV` follows: `"absolute"` (`|Err|`, as uIP and CoCoA)
    /// or `"signed"` (`Err`, as the table prints it; `MDEV` stays at least 0).
    pub mdev_error: MdevError,
    /// Which retransmitted segments give weak samples: `"at_most_two"`
    /// (CoCoA's rule for its weak estimator) or `"any"`.
    pub weak_samples: WeakSamples,
    /// Hold the timer armed after a sample to `max` (before its dithering)
    /// as well; the table caps only backed-off timers.
    pub cap_sampled_timer: bool,
    /// The newest sample moves `SRTT` by `1/srtt_gain` of the error (8).
    pub srtt_gain: u32,
    /// The newest sample moves `MDEV` by `1/mdev_gain` (4).
    pub mdev_gain: u32,
    /// `RTO = SRTT + k·MDEV` (4).
    pub k: u32,
    /// Dithering of a fresh timer: up to `dither_percents[0]` % of the RTO
    /// when `RTO ≤ dither_threshold`, else `dither_percents[1]` %.
    #[serde(with = "serde_duration")]
    pub dither_threshold: SimDuration,
    /// Percentages of the RTO a fresh timer's dithering stays below (100, 50).
    pub dither_percents: [u32; 2],
    /// RTO thresholds of the backoff bands, ascending (3 s, 6 s, 12 s).
    #[serde(with = "duration_array")]
    pub backoff_thresholds: [SimDuration; 3],
    /// Most doublings for an RTO up to each threshold and above the last
    /// (4, 3, 2, 1).
    pub backoff_limits: [u32; 4],
    /// Ceiling of the backed-off timer before its dithering (48 s).
    #[serde(with = "serde_duration")]
    pub max: SimDuration,
    /// Thresholds of the expiry dithering bands, on the backed-off timer,
    /// ascending (4 s, 12 s).
    #[serde(with = "duration_array")]
    pub expiry_dither_thresholds: [SimDuration; 2],
    /// Percentages of the backed-off timer the expiry dithering draws up to
    /// in each band (100, 50, 25).
    pub expiry_dither_percents: [u32; 3],
    /// Upper ends of the dithering ranges: `"as_printed"` (the lowest expiry
    /// band includes its end, every other range excludes it),
    /// `"inclusive"` or `"exclusive"` (all ranges alike).
    pub dither_ends: DitherEnds,
    /// Lim 2024: after more than `subtract_after` retransmissions, with a
    /// backed-off timer above `subtract_above`, subtract the expiry
    /// dithering instead of adding it with probability `subtract_percent` %.
    pub modified_dithering: bool,
    /// Retransmissions the segment must have had, strictly more (2).
    pub subtract_after: u32,
    /// Backed-off timer the subtraction needs, strictly more (15 s).
    #[serde(with = "serde_duration")]
    pub subtract_above: SimDuration,
    /// Chance of subtracting, in percent (50).
    pub subtract_percent: u32,
    /// What `subtract_above` is compared with: `"backed_off_timer"` (the
    /// timer after the backoff and the 48 s ceiling) or `"rto"` (the `RTO`
    /// variable before the backoff, as printed).
    pub subtract_compares: SubtractCompares,
    /// Count the retransmission the expiry is about to send among the
    /// segment's retransmissions for `subtract_after` (false: uIP's
    /// `nrtx`, the ones sent before).
    pub subtract_counts_this_retransmission: bool,
}

/// Where `SRTT` starts ([`LimRtoConfig::srtt_start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SrttStart {
    /// `SRTT = 0` until the first sample, which goes through the update
    /// (uIP's `sa = 0`): the first sample gives `SRTT = RTT/8`.
    Zero,
    /// The first sample sets `SRTT` to itself.
    FirstSample,
}

/// Which retransmitted segments give weak samples
/// ([`LimRtoConfig::weak_samples`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WeakSamples {
    /// Those retransmitted at most twice (CoCoA); later ones are discarded.
    AtMostTwo,
    /// Any, however many times it was retransmitted.
    Any,
}

impl WeakSamples {
    /// Whether a segment retransmitted `retransmissions` times gives one.
    pub fn accepts(self, retransmissions: u32) -> bool {
        match self {
            WeakSamples::AtMostTwo => retransmissions <= 2,
            WeakSamples::Any => true,
        }
    }
}

/// The error `MDEV` follows ([`LimRtoConfig::mdev_error`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MdevError {
    /// `MDEV += (|Err| − MDEV)/4`.
    Absolute,
    /// `MDEV += (Err − MDEV)/4`, never below zero.
    Signed,
}

/// Upper ends of the dithering ranges ([`LimRtoConfig::dither_ends`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DitherEnds {
    /// `[0, x)` everywhere but the lowest expiry band, `[0, timer]`.
    AsPrinted,
    /// `[0, x]` everywhere.
    Inclusive,
    /// `[0, x)` everywhere.
    Exclusive,
}

/// What the 2024 threshold is compared with
/// ([`LimRtoConfig::subtract_compares`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SubtractCompares {
    /// The backed-off timer, after the ceiling, before its dithering.
    BackedOffTimer,
    /// The `RTO` variable, before the backoff.
    Rto,
}

impl Default for LimRtoConfig {
    fn default() -> Self {
        LimRtoConfig {
            initial: SimDuration::from_secs(3),
            initial_mdev: SimDuration::from_secs(2),
            half_rtt_first_mdev: false,
            srtt_start: SrttStart::Zero,
            mdev_error: MdevError::Absolute,
            weak_samples: WeakSamples::AtMostTwo,
            cap_sampled_timer: false,
            srtt_gain: 8,
            mdev_gain: 4,
            k: 4,
            dither_threshold: SimDuration::from_secs(4),
            dither_percents: [100, 50],
            backoff_thresholds: [
                SimDuration::from_secs(3),
                SimDuration::from_secs(6),
                SimDuration::from_secs(12),
            ],
            backoff_limits: [4, 3, 2, 1],
            max: SimDuration::from_secs(48),
            expiry_dither_thresholds: [SimDuration::from_secs(4), SimDuration::from_secs(12)],
            expiry_dither_percents: [100, 50, 25],
            dither_ends: DitherEnds::AsPrinted,
            modified_dithering: false,
            subtract_after: 2,
            subtract_above: SimDuration::from_secs(15),
            subtract_percent: 50,
            subtract_compares: SubtractCompares::BackedOffTimer,
            subtract_counts_this_retransmission: false,
        }
    }
}

impl LimRtoConfig {
    /// Settings the timer cannot run with: the field (relative to the RTO
    /// table) and what is wrong. The durations' floors are checked with the
    /// other policies' in [`crate::Profile::validate`].
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.srtt_gain == 0 {
            return Err(("srtt_gain", "must be at least 1 (a gain of 1/0)".into()));
        }
        if self.mdev_gain == 0 {
            return Err(("mdev_gain", "must be at least 1 (a gain of 1/0)".into()));
        }
        if !ascending(&self.backoff_thresholds) {
            return Err(("backoff_thresholds", "must be ascending".into()));
        }
        if !ascending(&self.expiry_dither_thresholds) {
            return Err(("expiry_dither_thresholds", "must be ascending".into()));
        }
        if self.subtract_percent > 100 {
            let got = self.subtract_percent;
            return Err((
                "subtract_percent",
                format!("must be at most 100, got {got}"),
            ));
        }
        Ok(())
    }
}

fn ascending(thresholds: &[SimDuration]) -> bool {
    thresholds.windows(2).all(|w| w[0] <= w[1])
}

/// `[SimDuration; N]` as a list of durations with units.
mod duration_array {
    use super::*;

    pub fn serialize<S: Serializer, const N: usize>(
        v: &[SimDuration; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|d| serde_duration::format(*d)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<[SimDuration; N], D::Error> {
        let texts = Vec::<String>::deserialize(d)?;
        let parsed = texts
            .iter()
            .map(|t| serde_duration::parse(t).map_err(de::Error::custom))
            .collect::<Result<Vec<_>, _>>()?;
        let got = parsed.len();
        parsed
            .try_into()
            .map_err(|_| de::Error::custom(format!("expected {N} durations, got {got}")))
    }
}

/// Lim's 2020 scheme; its defaults are [`LimRtoConfig::default`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Lim2020Config(pub LimRtoConfig);

impl RtoFactory for Lim2020Config {
    fn name(&self) -> &'static str {
        "lim2020"
    }
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(LimRto::new(self.0, ctx, "lim2020"))
    }
}

/// Per-connection state of Lim's timers.
#[derive(Clone, Debug)]
pub struct LimRto {
    name: &'static str,
    config: LimRtoConfig,
    rng: ChaCha8Rng,
    srtt: Option<SimDuration>,
    mdev: SimDuration,
    /// `SRTT + k·MDEV`, or the initial timer before any sample.
    rto: SimDuration,
    /// The dithered timer of a fresh segment.
    fresh: SimDuration,
    /// The timer of the latest retransmission.
    backed_off: SimDuration,
    /// Doublings of the latest expiry.
    doublings: u32,
}

impl LimRto {
    /// Fresh state, no samples; `name` is the scheme's, for traces.
    pub fn new(config: LimRtoConfig, ctx: &ConnectionContext, name: &'static str) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        rng.set_stream(STREAM);
        let initial = config.initial.max(MIN_TIMER);
        LimRto {
            name,
            config,
            rng,
            srtt: None,
            mdev: config.initial_mdev,
            rto: initial,
            fresh: initial,
            backed_off: initial,
            doublings: 0,
        }
    }

    /// `RTO = SRTT + k·MDEV` as the table defines it, before dithering.
    pub fn rto(&self) -> SimDuration {
        self.rto
    }

    /// A uniform whole number of milliseconds in `[0, timer·percent/100)`,
    /// or in `[0, timer·percent/100]` when `inclusive`.
    fn draw(&mut self, timer: SimDuration, percent: u32, inclusive: bool) -> SimDuration {
        const MS: u128 = 1_000_000;
        let span = timer.as_nanos() as u128 * u128::from(percent) / 100;
        let ms = if inclusive {
            let top = (span / MS).min(u64::MAX as u128) as u64;
            self.rng.gen_range(0..=top)
        } else {
            // Whole milliseconds strictly below the span.
            let bound = span.div_ceil(MS).min(u64::MAX as u128) as u64;
            if bound == 0 {
                0
            } else {
                self.rng.gen_range(0..bound)
            }
        };
        SimDuration::from_millis(ms)
    }

    /// The band of `value` among ascending `thresholds` (`value ≤ t[i]`
    /// gives `i`; above all of them, `thresholds.len()`).
    fn band(value: SimDuration, thresholds: &[SimDuration]) -> usize {
        thresholds
            .iter()
            .position(|t| value <= *t)
            .unwrap_or(thresholds.len())
    }
}

/// `base + (value − base) / gain`, `value` in signed nanoseconds, never
/// below zero.
fn smooth(base: SimDuration, value: i128, gain: u32) -> SimDuration {
    let b = base.as_nanos() as i128;
    let next = b + (value - b) / i128::from(gain.max(1));
    SimDuration::from_nanos(next.clamp(0, u64::MAX as i128) as u64)
}

impl RtoPolicy for LimRto {
    fn name(&self) -> &'static str {
        self.name
    }

    fn on_rtt_sample(&mut self, _now: SimTime, sample: &RttSample) {
        let c = self.config;
        // Weak estimation: samples of retransmitted segments count too
        // (up to the configured number of retransmissions), timed from the
        // segment's first transmission.
        if !c.weak_samples.accepts(sample.retransmissions) {
            return;
        }
        let rtt = sample.corrected_since_first();
        match self.srtt {
            None if c.half_rtt_first_mdev => {
                self.srtt = Some(rtt);
                self.mdev = SimDuration::from_nanos(rtt.as_nanos() / 2);
            }
            None if c.srtt_start == SrttStart::FirstSample => {
                // The first sample sets SRTT; MDEV keeps its initial value.
                self.srtt = Some(rtt);
            }
            srtt => {
                let srtt = srtt.unwrap_or(SimDuration::ZERO);
                let err = rtt.as_nanos() as i128 - srtt.as_nanos() as i128;
                let err = match c.mdev_error {
                    MdevError::Absolute => err.abs(),
                    MdevError::Signed => err,
                };
                self.srtt = Some(smooth(srtt, rtt.as_nanos() as i128, c.srtt_gain));
                self.mdev = smooth(self.mdev, err, c.mdev_gain);
            }
        }
        let srtt = self.srtt.unwrap_or(rtt);
        self.rto = (srtt + self.mdev.saturating_mul(u64::from(c.k))).max(MIN_TIMER);
        let timer = if c.cap_sampled_timer {
            self.rto.min(c.max)
        } else {
            self.rto
        };
        let percent = c.dither_percents[usize::from(timer > c.dither_threshold)];
        let inclusive = c.dither_ends == DitherEnds::Inclusive;
        self.fresh = (timer + self.draw(timer, percent, inclusive)).max(MIN_TIMER);
        self.backed_off = self.fresh;
        self.doublings = 0;
    }

    fn on_expiry(&mut self, _now: SimTime, expiry: &Expiry) {
        let c = self.config;
        // Retransmissions before the one this expiry sends (uIP's nrtx).
        let nrtx = expiry.segment.retransmit_count;
        // The published table writes `max` in the next two steps; the text
        // describes bounds, which are `min` (uip-rto spec §2.2).
        let limit = c.backoff_limits[Self::band(self.rto, &c.backoff_thresholds)];
        let n = nrtx.min(limit);
        let factor = 1u64.checked_shl(n).unwrap_or(u64::MAX);
        let timer = self.rto.saturating_mul(factor).min(c.max);
        let band = Self::band(timer, &c.expiry_dither_thresholds);
        let inclusive = match c.dither_ends {
            DitherEnds::AsPrinted => band == 0,
            DitherEnds::Inclusive => true,
            DitherEnds::Exclusive => false,
        };
        let d = self.draw(timer, c.expiry_dither_percents[band], inclusive);
        // Lim 2024: trim the long waits of a segment lost again and again.
        let count = nrtx + u32::from(c.subtract_counts_this_retransmission);
        let compared = match c.subtract_compares {
            SubtractCompares::BackedOffTimer => timer,
            SubtractCompares::Rto => self.rto,
        };
        let subtract = c.modified_dithering
            && count > c.subtract_after
            && compared > c.subtract_above
            && self.rng.gen_range(0..100u32) < c.subtract_percent;
        self.backed_off = if subtract {
            // With the published values d < timer/4 here (timer > 15 s is in
            // the top band), so the timer stays above 3/4 of itself; the 1 ms
            // floor only matters for settings that let d reach the timer.
            timer.saturating_sub(d)
        } else {
            timer + d
        }
        .max(MIN_TIMER);
        self.doublings = n;
    }

    fn timeout_for(&mut self, _now: SimTime, oldest: &Transmission) -> SimDuration {
        if oldest.retransmit_count > 0 {
            self.backed_off
        } else {
            self.fresh
        }
    }

    fn estimate(&self) -> RtoEstimate {
        RtoEstimate {
            srtt: self.srtt,
            rttvar: Some(self.mdev),
            rto: self.fresh,
            backoff: self.doublings,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::clock::Granularity;
    use crate::rto::test_util::{ctx, sample, tx};
    use crate::rto::SampleSource;

    pub(crate) fn policy(config: LimRtoConfig, seed: u64) -> LimRto {
        let ctx = ConnectionContext {
            seed,
            ..ctx(Granularity::Fine)
        };
        LimRto::new(config, &ctx, "lim")
    }

    /// The published values with `MDEV` starting at zero, so that the
    /// first sample sets the RTO to itself.
    pub(crate) fn rto_is_first_sample() -> LimRtoConfig {
        LimRtoConfig {
            initial_mdev: SimDuration::ZERO,
            srtt_start: SrttStart::FirstSample,
            ..LimRtoConfig::default()
        }
    }

    pub(crate) fn feed(p: &mut LimRto, at_ms: u64, rtt_ms: u64) {
        p.on_rtt_sample(SimTime::from_millis(at_ms), &sample(rtt_ms));
    }

    /// Fresh timer, in milliseconds.
    pub(crate) fn fresh(p: &mut LimRto) -> u64 {
        p.timeout_for(SimTime::ZERO, &tx(1, 100, 0)).as_millis()
    }

    /// The timer of the retransmission after `nrtx` earlier ones, in ms.
    pub(crate) fn expire(p: &mut LimRto, nrtx: u32) -> u64 {
        let segment = tx(1, 100, nrtx);
        p.on_expiry(
            SimTime::from_secs(100),
            &Expiry {
                segment,
                consecutive: nrtx + 1,
            },
        );
        p.timeout_for(SimTime::from_secs(100), &tx(1, 100, nrtx + 1))
            .as_millis()
    }

    fn ns(ms: u64) -> SimDuration {
        SimDuration::from_millis(ms)
    }

    const SEEDS: u64 = 2000;

    #[test]
    fn before_any_sample_the_timer_is_the_studys_uip_rto_undithered() {
        let mut p = policy(LimRtoConfig::default(), 1);
        assert_eq!(fresh(&mut p), 3000);
        assert_eq!(p.estimate().srtt, None);
        assert_eq!(p.estimate().rttvar, Some(ns(2000)));
        let mut q = policy(
            LimRtoConfig {
                initial: ns(1500),
                ..LimRtoConfig::default()
            },
            1,
        );
        assert_eq!(fresh(&mut q), 1500);
    }

    /// `MDEV = 16` read as seconds, the first sample setting `SRTT`.
    fn printed_seconds() -> LimRtoConfig {
        LimRtoConfig {
            initial_mdev: ns(16_000),
            srtt_start: SrttStart::FirstSample,
            ..LimRtoConfig::default()
        }
    }

    #[test]
    fn first_sample_sets_srtt_and_keeps_the_published_mdev() {
        let mut p = policy(printed_seconds(), 1);
        feed(&mut p, 1000, 1000);
        assert_eq!(p.estimate().srtt, Some(ns(1000)));
        assert_eq!(p.estimate().rttvar, Some(ns(16_000)));
        // RTO = 1 + 4 · 16 s; above 4 s it is dithered by [0, 50 %).
        assert_eq!(p.rto(), ns(65_000));
        let t = fresh(&mut p);
        assert!((65_000..97_500).contains(&t), "{t}");
        // RFC 6298's first MDEV instead: RTT/2, so RTO = 3 · RTT.
        let mut q = policy(
            LimRtoConfig {
                half_rtt_first_mdev: true,
                ..printed_seconds()
            },
            1,
        );
        feed(&mut q, 1000, 1000);
        assert_eq!(q.estimate().rttvar, Some(ns(500)));
        assert_eq!(q.rto(), ns(3000));
    }

    #[test]
    fn later_samples_update_srtt_by_an_eighth_and_mdev_by_a_quarter() {
        let mut p = policy(printed_seconds(), 1);
        feed(&mut p, 1000, 1000);
        // Err = 1 s: SRTT = 1 + 1/8, MDEV = 16 + (1 − 16)/4 = 12.25.
        feed(&mut p, 4000, 2000);
        assert_eq!(p.estimate().srtt, Some(ns(1125)));
        assert_eq!(p.estimate().rttvar, Some(ns(12_250)));
        assert_eq!(p.rto(), ns(1125 + 4 * 12_250));
        // Err = −1 s: SRTT = 1.125 − 1/8 = 1, MDEV = 12.25 + (1 − 12.25)/4.
        feed(&mut p, 5000, 125);
        assert_eq!(p.estimate().srtt, Some(ns(1000)));
        assert_eq!(
            p.estimate().rttvar,
            Some(SimDuration::from_micros(9_437_500))
        );
        assert_eq!(p.rto(), ns(1000 + 37_750));
        assert_eq!(p.estimate().backoff, 0);
    }

    #[test]
    fn a_retransmitted_segment_is_sampled_from_its_first_transmission() {
        let mut p = policy(rto_is_first_sample(), 1);
        // Sent at 0, retransmitted at 3 s, ACKed at 3.5 s.
        let weak = RttSample {
            rtt: ns(500),
            since_first_transmission: ns(3500),
            retransmitted: true,
            ..sample(500)
        };
        assert!(!weak.unambiguous());
        p.on_rtt_sample(SimTime::from_millis(3500), &weak);
        assert_eq!(p.estimate().srtt, Some(ns(3500)));
        // The next one, sent once, updates from there.
        feed(&mut p, 5000, 1100);
        assert_eq!(p.estimate().srtt, Some(ns(3200)));
        // A timestamp sample of a retransmission is timed from the first
        // transmission too.
        let echoed = RttSample {
            rtt: ns(100),
            since_first_transmission: ns(5600),
            retransmitted: true,
            source: SampleSource::Timestamp,
            ..sample(100)
        };
        p.on_rtt_sample(SimTime::from_millis(9000), &echoed);
        assert_eq!(p.estimate().srtt, Some(ns(3500)));
    }

    /// Fresh timers drawn after a first sample of `rto_ms`, one per seed.
    fn fresh_draws(rto_ms: u64) -> Vec<u64> {
        (0..SEEDS)
            .map(|seed| {
                let mut p = policy(rto_is_first_sample(), seed);
                feed(&mut p, 0, rto_ms);
                assert_eq!(p.rto(), ns(rto_ms));
                fresh(&mut p)
            })
            .collect()
    }

    #[test]
    fn fresh_timers_are_dithered_by_half_above_4s_and_by_up_to_the_rto_below() {
        // RTO > 4 s: [RTO, 1.5 RTO).
        let above = fresh_draws(6000);
        assert!(above.iter().all(|t| (6000..9000).contains(t)), "{above:?}");
        assert!(above.iter().any(|&t| t < 6300) && above.iter().any(|&t| t > 8700));
        // RTO ≤ 4 s (4 s included): [RTO, 2 RTO).
        let at = fresh_draws(4000);
        assert!(at.iter().all(|t| (4000..8000).contains(t)), "{at:?}");
        assert!(at.iter().any(|&t| t > 7600));
        let below = fresh_draws(1000);
        assert!(below.iter().all(|t| (1000..2000).contains(t)), "{below:?}");
        assert!(below.iter().any(|&t| t < 1050) && below.iter().any(|&t| t > 1950));
        // Two seeds differ; one seed gives the same timer every time.
        assert_ne!(above[1], above[2]);
        assert_eq!(fresh_draws(6000), above);
        // A 2 ms RTO draws 0 or 1 ms, never 2.
        let tiny = fresh_draws(2);
        assert!(tiny.iter().all(|t| (2..4).contains(t)), "{tiny:?}");
        assert!(tiny.contains(&2) && tiny.contains(&3));
    }

    /// The published values without any dithering after an expiry and
    /// with the ceiling out of the way: the backoff alone.
    fn undithered_expiries(max: SimDuration) -> LimRtoConfig {
        LimRtoConfig {
            expiry_dither_percents: [0, 0, 0],
            max,
            ..rto_is_first_sample()
        }
    }

    fn series(config: LimRtoConfig, rto_ms: u64) -> Vec<u64> {
        let mut p = policy(config, 3);
        feed(&mut p, 0, rto_ms);
        (0..8).map(|nrtx| expire(&mut p, nrtx)).collect()
    }

    #[test]
    fn each_backoff_band_caps_the_doublings_at_4_3_2_1() {
        let open = undithered_expiries(SimDuration::from_secs(10_000));
        // The first retransmission is timed by RTO · 2^0 (uIP's nrtx).
        let d = |rto: u64, n: [u64; 8]| n.map(|k| rto << k).to_vec();
        assert_eq!(series(open, 3000), d(3000, [0, 1, 2, 3, 4, 4, 4, 4]));
        assert_eq!(series(open, 1000), d(1000, [0, 1, 2, 3, 4, 4, 4, 4]));
        assert_eq!(series(open, 3001), d(3001, [0, 1, 2, 3, 3, 3, 3, 3]));
        assert_eq!(series(open, 6000), d(6000, [0, 1, 2, 3, 3, 3, 3, 3]));
        assert_eq!(series(open, 6001), d(6001, [0, 1, 2, 2, 2, 2, 2, 2]));
        assert_eq!(series(open, 12_000), d(12_000, [0, 1, 2, 2, 2, 2, 2, 2]));
        assert_eq!(series(open, 12_001), d(12_001, [0, 1, 1, 1, 1, 1, 1, 1]));
        let mut p = policy(open, 3);
        feed(&mut p, 0, 5000);
        expire(&mut p, 6);
        assert_eq!(p.estimate().backoff, 3);
    }

    #[test]
    fn backed_off_timers_stop_at_48s() {
        let capped = undithered_expiries(SimDuration::from_secs(48));
        let s = |v: [u64; 8]| v.to_vec();
        let big = 48_000;
        assert_eq!(
            series(capped, 3000),
            s([3000, 6000, 12_000, 24_000, big, big, big, big])
        );
        assert_eq!(
            series(capped, 25_000),
            s([25_000, big, big, big, big, big, big, big])
        );
        assert_eq!(
            series(capped, 12_000),
            s([12_000, 24_000, big, big, big, big, big, big])
        );
        assert_eq!(
            series(capped, 40_000),
            s([40_000, big, big, big, big, big, big, big])
        );
        // The first estimate after MDEV = 16 s exceeds the ceiling; its
        // retransmission is timed by 48 s plus up to a quarter.
        let mut p = policy(printed_seconds(), 3);
        feed(&mut p, 0, 1000);
        let t = expire(&mut p, 0);
        assert!((48_000..60_000).contains(&t), "{t}");
    }

    /// First-retransmission timers after a sample of `rto_ms`, one per seed.
    fn expiry_draws(config: LimRtoConfig, rto_ms: u64, nrtx: u32) -> Vec<u64> {
        (0..SEEDS)
            .map(|seed| {
                let mut p = policy(config, seed);
                feed(&mut p, 0, rto_ms);
                expire(&mut p, nrtx)
            })
            .collect()
    }

    #[test]
    fn expiry_dithering_is_a_quarter_above_12s_a_half_above_4s_else_up_to_the_timer() {
        let c = rto_is_first_sample();
        // 20 s: [20, 25).
        let high = expiry_draws(c, 20_000, 0);
        assert!(
            high.iter().all(|t| (20_000..25_000).contains(t)),
            "{high:?}"
        );
        assert!(high.iter().any(|&t| t > 24_700) && high.iter().any(|&t| t < 20_300));
        // 12 s is in the middle band: [12, 18).
        let edge = expiry_draws(c, 12_000, 0);
        assert!(
            edge.iter().all(|t| (12_000..18_000).contains(t)),
            "{edge:?}"
        );
        assert!(edge.iter().any(|&t| t > 17_500));
        // 8 s: [8, 12).
        let mid = expiry_draws(c, 8000, 0);
        assert!(mid.iter().all(|t| (8000..12_000).contains(t)), "{mid:?}");
        assert!(mid.iter().any(|&t| t > 11_700) && mid.iter().any(|&t| t < 8300));
        // 3 s: [3, 6], closed.
        let low = expiry_draws(c, 3000, 0);
        assert!(low.iter().all(|t| (3000..=6000).contains(t)), "{low:?}");
        assert!(low.iter().any(|&t| t > 5800) && low.iter().any(|&t| t < 3200));
        // The closed end is reached: a 5 ms timer draws 0..=5 ms.
        let tiny = expiry_draws(c, 5, 0);
        assert!(tiny.iter().all(|t| (5..=10).contains(t)), "{tiny:?}");
        assert!(tiny.contains(&10) && tiny.contains(&5));
        // The band follows the backed-off timer: 3 s doubled twice is 12 s.
        let doubled = expiry_draws(c, 3000, 2);
        assert!(doubled.iter().all(|t| (12_000..18_000).contains(t)));
        assert_ne!(high[0], high[1]);
        assert_eq!(expiry_draws(c, 20_000, 0), high);
    }

    #[test]
    fn a_fresh_segment_after_an_acked_retransmission_gets_a_fresh_timer() {
        let mut p = policy(rto_is_first_sample(), 9);
        feed(&mut p, 0, 2000);
        let first = fresh(&mut p);
        let backed = expire(&mut p, 3);
        assert!(backed >= 16_000, "{backed}");
        // While the retransmission is out, a fresh segment still sees the
        // estimate's timer.
        assert_eq!(fresh(&mut p), first);
        feed(&mut p, 20_000, 2000);
        assert_eq!(p.estimate().backoff, 0);
        let t = p.timeout_for(SimTime::ZERO, &tx(1, 100, 4)).as_millis();
        assert_eq!(t, fresh(&mut p));
    }

    #[test]
    fn no_timer_goes_below_1ms() {
        let mut p = policy(rto_is_first_sample(), 1);
        feed(&mut p, 0, 0);
        assert_eq!(p.rto(), MIN_TIMER);
        assert!(fresh(&mut p) >= 1);
        assert!(expire(&mut p, 0) >= 1);
    }

    #[test]
    fn settings_that_would_break_the_timer_are_named() {
        assert_eq!(LimRtoConfig::default().check(), Ok(()));
        let bad = |c: LimRtoConfig| c.check().unwrap_err().0;
        let d = LimRtoConfig::default();
        assert_eq!(bad(LimRtoConfig { srtt_gain: 0, ..d }), "srtt_gain");
        assert_eq!(bad(LimRtoConfig { mdev_gain: 0, ..d }), "mdev_gain");
        let mut c = d;
        c.backoff_thresholds.swap(0, 2);
        assert_eq!(bad(c), "backoff_thresholds");
        let mut c = d;
        c.expiry_dither_thresholds.swap(0, 1);
        assert_eq!(bad(c), "expiry_dither_thresholds");
        let c = LimRtoConfig {
            subtract_percent: 101,
            ..d
        };
        assert_eq!(bad(c), "subtract_percent");
    }

    #[test]
    fn settings_read_from_toml_with_units_and_reject_unknown_fields() {
        let c: LimRtoConfig = toml::from_str(
            "initial = \"1.5s\"\nbackoff_thresholds = [\"1s\", \"2s\", \"5s\"]\nmax = \"60s\"",
        )
        .expect("reads");
        assert_eq!(c.initial, ns(1500));
        assert_eq!(c.backoff_thresholds, [ns(1000), ns(2000), ns(5000)]);
        assert_eq!(c.max, ns(60_000));
        assert_eq!(c.k, 4);
        let text = toml::to_string(&c).expect("writes");
        assert_eq!(toml::from_str::<LimRtoConfig>(&text), Ok(c));
        let err = toml::from_str::<LimRtoConfig>("backoff_thresholds = [\"1s\"]").unwrap_err();
        assert!(err.to_string().contains("expected 3 durations"), "{err}");
        assert!(toml::from_str::<LimRtoConfig>("mdev = \"1s\"").is_err());
    }

    // ----- the readings (docs/uip-rto.md, "Readings") -----

    #[test]
    fn the_default_reads_mdev_16_as_uips_sv_and_matches_uips_first_update() {
        // uIP, 500 ms pulses: sa = 0, sv = 16; a 2-pulse (1 s) sample gives
        // sa = 2 (SRTT = 2/8 pulse), sv = 14 (four deviations: 7 s), the
        // values the uip policy's own test computes.
        let mut p = policy(LimRtoConfig::default(), 1);
        feed(&mut p, 1000, 1000);
        assert_eq!(p.estimate().srtt, Some(ns(125)));
        assert_eq!(p.estimate().rttvar, Some(ns(1750)));
        assert_eq!(p.rto(), ns(125 + 4 * 1750));
        let mut uip = crate::rto::uip::UipRto::new(
            crate::rto::UipRtoConfig::default(),
            &ctx(Granularity::ticks(
                crate::rto::uip::PULSE,
                SimDuration::ZERO,
            )),
        );
        let seg = tx(1, 100, 0);
        uip.on_transmit(SimTime::from_millis(100), &seg);
        uip.on_ack(
            SimTime::from_millis(1100),
            &crate::rto::AckProgress {
                acked_to: 101,
                newly_acked: 100,
                syn_acked: false,
                outstanding: false,
                correction: SimDuration::ZERO,
            },
        );
        let (sa, sv, _, _) = uip.raw();
        assert_eq!(ns(u64::from(sa) * 500 / 8), p.estimate().srtt.unwrap());
        assert_eq!(ns(u64::from(sv) * 500 / 4), p.estimate().rttvar.unwrap());
    }

    #[test]
    fn srtt_from_zero_or_from_the_first_sample() {
        let zero = LimRtoConfig {
            initial_mdev: ns(16_000),
            ..LimRtoConfig::default()
        };
        let mut p = policy(zero, 1);
        // Err = 2 s: SRTT = 2/8, MDEV = 16 + (2 − 16)/4 = 12.5.
        feed(&mut p, 0, 2000);
        assert_eq!(p.estimate().srtt, Some(ns(250)));
        assert_eq!(p.estimate().rttvar, Some(ns(12_500)));
        assert_eq!(p.rto(), ns(250 + 50_000));
        let mut q = policy(printed_seconds(), 1);
        feed(&mut q, 0, 2000);
        assert_eq!(q.estimate().srtt, Some(ns(2000)));
        assert_eq!(q.estimate().rttvar, Some(ns(16_000)));
    }

    #[test]
    fn cocoas_reading_starts_at_2s_and_sets_mdev_to_half_the_first_sample() {
        let cocoa = LimRtoConfig {
            initial: ns(2000),
            half_rtt_first_mdev: true,
            ..LimRtoConfig::default()
        };
        let mut p = policy(cocoa, 1);
        assert_eq!(fresh(&mut p), 2000);
        // Whatever srtt_start says, RFC 6298's first sample: SRTT = R.
        feed(&mut p, 0, 1000);
        assert_eq!(p.estimate().srtt, Some(ns(1000)));
        assert_eq!(p.estimate().rttvar, Some(ns(500)));
        assert_eq!(p.rto(), ns(3000));
    }

    #[test]
    fn mdev_follows_the_absolute_or_the_signed_error() {
        let run = |mdev_error| {
            let mut p = policy(
                LimRtoConfig {
                    mdev_error,
                    ..printed_seconds()
                },
                1,
            );
            feed(&mut p, 0, 2000);
            // Err = −1.6 s.
            feed(&mut p, 5000, 400);
            p.estimate()
        };
        let abs = run(MdevError::Absolute);
        let signed = run(MdevError::Signed);
        assert_eq!(abs.srtt, Some(ns(1800)));
        assert_eq!(signed.srtt, Some(ns(1800)));
        // 16 + (1.6 − 16)/4 = 12.4; 16 + (−1.6 − 16)/4 = 11.6.
        assert_eq!(abs.rttvar, Some(ns(12_400)));
        assert_eq!(signed.rttvar, Some(ns(11_600)));
        // A signed MDEV stops at zero.
        let mut p = policy(
            LimRtoConfig {
                mdev_error: MdevError::Signed,
                ..rto_is_first_sample()
            },
            1,
        );
        feed(&mut p, 0, 2000);
        feed(&mut p, 1000, 100);
        assert_eq!(p.estimate().rttvar, Some(SimDuration::ZERO));
        // RTO = SRTT = 2 − 1.9/8 s.
        assert_eq!(p.rto(), SimDuration::from_micros(1_762_500));
    }

    fn retransmitted(rtt_ms: u64, retransmissions: u32) -> RttSample {
        RttSample {
            retransmitted: retransmissions > 0,
            retransmissions,
            ..sample(rtt_ms)
        }
    }

    #[test]
    fn weak_samples_after_at_most_two_retransmissions_or_after_any() {
        let cocoa_rule = rto_is_first_sample();
        assert_eq!(cocoa_rule.weak_samples, WeakSamples::AtMostTwo);
        let mut p = policy(cocoa_rule, 1);
        p.on_rtt_sample(SimTime::ZERO, &retransmitted(9000, 3));
        assert_eq!(p.estimate().srtt, None);
        assert_eq!(fresh(&mut p), 3000);
        p.on_rtt_sample(SimTime::ZERO, &retransmitted(4000, 2));
        assert_eq!(p.estimate().srtt, Some(ns(4000)));
        // A discarded sample leaves the timers and the backoff alone.
        let before = fresh(&mut p);
        let backed = expire(&mut p, 0);
        p.on_rtt_sample(SimTime::ZERO, &retransmitted(60_000, 5));
        assert_eq!(fresh(&mut p), before);
        assert_eq!(
            p.timeout_for(SimTime::ZERO, &tx(1, 100, 1)).as_millis(),
            backed
        );
        let mut any = policy(
            LimRtoConfig {
                weak_samples: WeakSamples::Any,
                ..rto_is_first_sample()
            },
            1,
        );
        any.on_rtt_sample(SimTime::ZERO, &retransmitted(9000, 7));
        assert_eq!(any.estimate().srtt, Some(ns(9000)));
    }

    #[test]
    fn the_timer_armed_after_a_sample_may_be_held_to_48s() {
        let draws = |cap_sampled_timer| {
            (0..SEEDS)
                .map(|seed| {
                    let mut p = policy(
                        LimRtoConfig {
                            cap_sampled_timer,
                            ..printed_seconds()
                        },
                        seed,
                    );
                    // RTO = 1 + 64 s.
                    feed(&mut p, 0, 1000);
                    fresh(&mut p)
                })
                .collect::<Vec<_>>()
        };
        let open = draws(false);
        assert!(
            open.iter().all(|t| (65_000..97_500).contains(t)),
            "{open:?}"
        );
        // 48 s, then dithered by up to half of it.
        let capped = draws(true);
        assert!(
            capped.iter().all(|t| (48_000..72_000).contains(t)),
            "{capped:?}"
        );
        assert!(capped.iter().any(|&t| t < 49_000) && capped.iter().any(|&t| t > 71_000));
    }

    /// How often out of `SEEDS` the 2024 dithering shortens the timer of
    /// the retransmission after `nrtx` earlier ones, with an RTO of `rto_ms`.
    fn shortened(config: LimRtoConfig, rto_ms: u64, nrtx: u32, floor_ms: u64) -> usize {
        let config = LimRtoConfig {
            modified_dithering: true,
            ..config
        };
        (0..SEEDS)
            .filter(|&seed| {
                let mut p = policy(config, seed);
                feed(&mut p, 0, rto_ms);
                expire(&mut p, nrtx) < floor_ms
            })
            .count()
    }

    #[test]
    fn the_2024_condition_on_the_backed_off_timer_or_on_the_rto() {
        let timer = rto_is_first_sample();
        let rto = LimRtoConfig {
            subtract_compares: SubtractCompares::Rto,
            ..timer
        };
        // RTO 5 s, three earlier retransmissions: 5 · 2^3 = 40 s > 15 s, but
        // the RTO itself is below 15 s.
        let by_timer = shortened(timer, 5000, 3, 40_000);
        assert!((800..1200).contains(&by_timer), "{by_timer}");
        assert_eq!(shortened(rto, 5000, 3, 40_000), 0);
        // RTO 20 s: both readings subtract half the time.
        let both = shortened(rto, 20_000, 3, 40_000);
        assert!((800..1200).contains(&both), "{both}");
    }

    #[test]
    fn the_2024_count_may_include_the_retransmission_about_to_be_sent() {
        let before = rto_is_first_sample();
        let including = LimRtoConfig {
            subtract_counts_this_retransmission: true,
            ..before
        };
        // Two earlier retransmissions: 2 > 2 is false, 2 + 1 > 2 is true.
        // RTO 20 s, one doubling: 40 s.
        assert_eq!(shortened(before, 20_000, 2, 40_000), 0);
        let n = shortened(including, 20_000, 2, 40_000);
        assert!((800..1200).contains(&n), "{n}");
        // One earlier retransmission: neither.
        assert_eq!(shortened(including, 20_000, 1, 40_000), 0);
    }

    #[test]
    fn dither_ends_as_printed_inclusive_or_exclusive() {
        let ends = |dither_ends, rto_ms: u64, expiry: bool| {
            let mut seen = std::collections::BTreeSet::new();
            for seed in 0..200 {
                let mut p = policy(
                    LimRtoConfig {
                        dither_ends,
                        ..rto_is_first_sample()
                    },
                    seed,
                );
                feed(&mut p, 0, rto_ms);
                seen.insert(if expiry {
                    expire(&mut p, 0)
                } else {
                    fresh(&mut p)
                });
            }
            seen.into_iter().collect::<Vec<_>>()
        };
        // Fresh 2 ms timer: [0, 2) as printed and exclusive, [0, 2] inclusive.
        assert_eq!(ends(DitherEnds::AsPrinted, 2, false), [2, 3]);
        assert_eq!(ends(DitherEnds::Exclusive, 2, false), [2, 3]);
        assert_eq!(ends(DitherEnds::Inclusive, 2, false), [2, 3, 4]);
        // Expiry, lowest band, 2 ms: [0, 2] as printed and inclusive.
        assert_eq!(ends(DitherEnds::AsPrinted, 2, true), [2, 3, 4]);
        assert_eq!(ends(DitherEnds::Inclusive, 2, true), [2, 3, 4]);
        assert_eq!(ends(DitherEnds::Exclusive, 2, true), [2, 3]);
    }

    #[test]
    fn readings_read_from_toml_by_name() {
        let c: LimRtoConfig = toml::from_str(
            "srtt_start = \"first_sample\"\nmdev_error = \"signed\"\n\
             cap_sampled_timer = true\nsubtract_compares = \"rto\"\n\
             subtract_counts_this_retransmission = true\ndither_ends = \"inclusive\"\n\
             weak_samples = \"any\"",
        )
        .expect("reads");
        assert_eq!(c.srtt_start, SrttStart::FirstSample);
        assert_eq!(c.mdev_error, MdevError::Signed);
        assert_eq!(c.weak_samples, WeakSamples::Any);
        assert!(c.cap_sampled_timer && c.subtract_counts_this_retransmission);
        assert_eq!(c.subtract_compares, SubtractCompares::Rto);
        assert_eq!(c.dither_ends, DitherEnds::Inclusive);
        let text = toml::to_string(&c).expect("writes");
        assert_eq!(toml::from_str::<LimRtoConfig>(&text), Ok(c));
        let err = toml::from_str::<LimRtoConfig>("srtt_start = \"one\"").unwrap_err();
        assert!(err.to_string().contains("first_sample"), "{err}");
    }
}
