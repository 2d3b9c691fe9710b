//! A link-aware initial RTO for duty-cycled meshes: the first timer is
//! derived from what the host's link layer knows of the path (hops to the
//! border router, the worst-case time of one hop), then Lim's 2024 scheme
//! adapts it.
//!
//! This is rtolab's own scheme, not a published one. It carries the idea
//! of the bridge study's optimum initial RTO (bridge spec §3.2: compute the
//! theoretical round trip of the biggest packet from the link's known
//! timing, round it up to whole timer periods and add a period) over to a
//! ContikiMAC mesh, where the constant 3 s of uIP (uip-rto spec §2.1) is
//! too short for a node six hops out and several times too long for a
//! neighbour of the border router.
//!
//! # The first timer
//!
//! With the connection's [`PathHint`] (`h` hops, each delivering a frame in
//! at most `T_hop`), the factor `f = factor_percent / 100` and the timer's
//! period `P` (uIP's 500 ms pulse; none for fine timers):
//!
//! ```text
//! RTT_w = 2 · h · T_hop                        worst round trip without link-layer retries
//! R     = f · RTT_w                            room for retries and queueing
//! RTO_0 = ⌈R / P⌉ · P + margin_periods · P     on timers of period P
//! RTO_0 = R                                    on fine timers
//! ```
//!
//! never below 1 ms ([`crate::clock::MIN_TIMER`]). Without a hint (a
//! passive open, a host whose link knows nothing, a mesh member not yet in
//! the tree) the first timer is [`LimRtoConfig::initial`], 3 s as in the
//! 2024 scheme.
//!
//! Rationale, term by term:
//!
//! * **`T_hop`, the worst case of one hop.** A ContikiMAC sender that does
//!   not know its receiver's phase repeats the frame for up to
//!   `STROBE_TIME` (one channel check interval plus two wake-up checks)
//!   after its own channel checks; the receiver wakes somewhere in that
//!   train, takes one copy and acknowledges it. A phase-locked sender
//!   starts a guard time before the receiver's wake-up and strobes for at
//!   most 16.7 ms, which is never longer. The link computes `T_hop` with
//!   its own constants and a full-sized (127-byte) frame, so a segment of
//!   any size that fits one frame is covered: at 8 Hz, 131.1 ms of checks
//!   and strobes, 4.256 ms of frame and 0.544 ms of turnaround and ACK,
//!   135.9 ms in all. A segment and its ACK are each one frame per hop for
//!   uIP's small segments (48-byte MSS).
//! * **`2 · h`.** The segment travels `h` hops to the border router and
//!   the ACK `h` hops back; the wired part beyond the border router (a
//!   serial line) is milliseconds and is left to the factor. Each hop waits
//!   for its receiver independently, so the sum of worst cases is itself
//!   rarely reached: the mean wait is half a channel check interval.
//! * **`f` = 2.** CSMA retransmits a frame that was not acknowledged (up to
//!   3 transmissions) after a backoff of at least one channel check
//!   interval, so a retry costs about `2 · T_hop`; doubling the no-retry
//!   worst case leaves room for one retry on half the hops, or for frames
//!   queued ahead of ours. A larger factor trades a slower reaction to
//!   real losses for fewer spurious ones. Expected retransmissions of
//!   lossy links are already in `h`, which the rank counts in ETX.
//! * **Rounding and the margin.** A timer of `k` periods fires between
//!   `k − 1` and `k` periods after it is armed (uIP counts pulses), so, as
//!   the bridge study recommends, `R` is rounded up to whole periods and
//!   one period is added: the timer never fires before `R`.
//!
//! At 8 Hz on uIP's pulse: one hop gives `R` = 0.54 s, so 1.5 s; three hops
//! 1.63 s, so 2.5 s; six hops (the far corner of the study's grid) 3.26 s,
//! so 4 s.
//!
//! # Afterwards
//!
//! Everything else is Lim's 2024 scheme ([`super::lim2024`]): the policy
//! *is* a [`LimRto`] whose [`LimRtoConfig::initial`] is the first timer
//! above, so from the first RTT sample on it draws the same timers as
//! `lim2024` with that initial value and the same seed. One default
//! differs: [`LimRtoConfig::half_rtt_first_mdev`] is on, so the first
//! sample gives `RTO = 3 · RTT` (RFC 6298, as CoCoA does) rather than
//! `RTT + 64 s`. The published `MDEV` of 16 s encodes that nothing is
//! known about the path; here the first timer already came from the path,
//! and a first sample followed by a minute-long timer would throw that
//! knowledge away.

use serde::{de, Deserialize, Deserializer, Serialize};

use super::lim2020::{LimRto, LimRtoConfig};
use super::{ConnectionContext, PathHint, RtoFactory, RtoPolicy};
use crate::clock::Granularity;
use crate::clock::MIN_TIMER;
use rtolab_time::SimDuration;

/// The link-aware scheme's settings: the first timer's formula and Lim's
/// estimator, written as one flat table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LinkAwareConfig {
    /// `R = factor_percent / 100 × RTT_w` (200: twice the worst round trip
    /// without link-layer retries). At least 1.
    pub factor_percent: u32,
    /// Timer periods added after rounding `R` up to whole periods (1); no
    /// effect on fine timers.
    pub margin_periods: u32,
    /// Lim's timers; `initial` is the first timer when there is no hint.
    /// Defaults: the 2024 scheme with `half_rtt_first_mdev` on.
    #[serde(flatten)]
    pub lim: LimRtoConfig,
}

impl Default for LinkAwareConfig {
    fn default() -> Self {
        LinkAwareConfig {
            factor_percent: 200,
            margin_periods: 1,
            lim: LimRtoConfig {
                modified_dithering: true,
                half_rtt_first_mdev: true,
                ..LimRtoConfig::default()
            },
        }
    }
}

impl<'de> Deserialize<'de> for LinkAwareConfig {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut table = serde_json::Value::deserialize(d)?;
        let mut config = LinkAwareConfig::default();
        if let Some(fields) = table.as_object_mut() {
            for (key, slot) in [
                ("factor_percent", &mut config.factor_percent),
                ("margin_periods", &mut config.margin_periods),
            ] {
                if let Some(v) = fields.remove(key) {
                    *slot = u32::deserialize(v)
                        .map_err(|e| de::Error::custom(format!("{key}: {e}")))?;
                }
            }
            // The shared estimator's defaults are the 2020 scheme's; fill in
            // this scheme's before reading the rest as one.
            for key in ["modified_dithering", "half_rtt_first_mdev"] {
                fields.entry(key).or_insert(serde_json::Value::Bool(true));
            }
        }
        config.lim = LimRtoConfig::deserialize(table).map_err(de::Error::custom)?;
        Ok(config)
    }
}

impl LinkAwareConfig {
    /// The first timer for a path described by `hint`, on timers of
    /// `granularity` (the formula of the [module documentation](self)).
    pub fn initial_for(&self, hint: &PathHint, granularity: Granularity) -> SimDuration {
        let round_trip = u128::from(hint.hop_time.as_nanos()) * 2 * u128::from(hint.hops);
        let allowed = round_trip * u128::from(self.factor_percent) / 100;
        let rto = match granularity.period() {
            Some(period) => {
                let p = u128::from(period.as_nanos());
                (allowed.div_ceil(p) + u128::from(self.margin_periods)) * p
            }
            None => allowed,
        };
        SimDuration::from_nanos(rto.min(u128::from(u64::MAX)) as u64).max(MIN_TIMER)
    }

    /// Lim's settings for a connection: [`LinkAwareConfig::lim`] with its
    /// `initial` replaced by [`LinkAwareConfig::initial_for`] when the
    /// connection has a hint.
    pub fn estimator_for(&self, ctx: &ConnectionContext) -> LimRtoConfig {
        LimRtoConfig {
            initial: match &ctx.path {
                Some(hint) => self.initial_for(hint, ctx.granularity),
                None => self.lim.initial,
            },
            ..self.lim
        }
    }

    /// Settings the timer cannot run with: the field (relative to the RTO
    /// table) and what is wrong. The durations' floors are checked with the
    /// other policies' in [`crate::Profile::validate`].
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.factor_percent == 0 {
            return Err((
                "factor_percent",
                "must be at least 1 (a zero factor leaves no time for the round trip)".into(),
            ));
        }
        self.lim.check()
    }
}

impl RtoFactory for LinkAwareConfig {
    fn name(&self) -> &'static str {
        "link_aware"
    }
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(LimRto::new(self.estimator_for(ctx), ctx, "link_aware"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rto::lim2020::tests::{expire, feed, fresh};
    use crate::rto::test_util::ctx;
    use crate::rto::Lim2024Config;

    fn ms(v: u64) -> SimDuration {
        SimDuration::from_millis(v)
    }

    /// uIP's timer: a 500 ms pulse.
    fn pulse() -> Granularity {
        Granularity::ticks(ms(500), SimDuration::ZERO)
    }

    /// The hop time a ContikiMAC mesh at 8 Hz reports: 6 channel checks
    /// and a strobe train, 120 + 4176 rtimer ticks of 1/32 768 s
    /// (131 103 515.625 ns, to the nearest ns), a 127-byte frame (133 bytes
    /// with the PHY header, 32 µs each: 4.256 ms), the turnaround (192 µs)
    /// and a 5-byte ACK (11 bytes: 352 µs).
    fn contikimac_8hz() -> SimDuration {
        SimDuration::from_nanos(131_103_516 + 4_256_000 + 192_000 + 352_000)
    }

    fn hint(hops: u32, hop_time: SimDuration) -> PathHint {
        PathHint { hops, hop_time }
    }

    fn with_path(path: Option<PathHint>, granularity: Granularity, seed: u64) -> ConnectionContext {
        ConnectionContext {
            path,
            seed,
            ..ctx(granularity)
        }
    }

    #[test]
    fn three_hops_at_8hz_give_2_5s_on_uips_pulse() {
        let c = LinkAwareConfig::default();
        assert_eq!(contikimac_8hz(), SimDuration::from_nanos(135_903_516));
        let h = hint(3, contikimac_8hz());
        // RTT_w = 2 · 3 · 135.903516 ms = 815.421096 ms; R = 2 · RTT_w =
        // 1630.842192 ms; 4 pulses of 500 ms (2 s) hold it, plus one: 2.5 s.
        assert_eq!(c.initial_for(&h, pulse()), ms(2500));
        // On fine timers, R itself.
        assert_eq!(
            c.initial_for(&h, Granularity::Fine),
            SimDuration::from_nanos(1_630_842_192)
        );
        // One hop: R = 543.614064 ms, 2 pulses, plus one: 1.5 s. Six hops:
        // R = 3261.684384 ms, 7 pulses, plus one: 4 s.
        assert_eq!(c.initial_for(&hint(1, contikimac_8hz()), pulse()), ms(1500));
        assert_eq!(c.initial_for(&hint(6, contikimac_8hz()), pulse()), ms(4000));
    }

    #[test]
    fn every_term_of_the_formula_is_a_setting() {
        let h = hint(2, ms(100));
        // RTT_w = 400 ms.
        let c = |factor_percent, margin_periods| LinkAwareConfig {
            factor_percent,
            margin_periods,
            ..LinkAwareConfig::default()
        };
        assert_eq!(c(100, 0).initial_for(&h, Granularity::Fine), ms(400));
        assert_eq!(c(350, 0).initial_for(&h, Granularity::Fine), ms(1400));
        // The margin counts only on timers with a period.
        assert_eq!(c(350, 3).initial_for(&h, Granularity::Fine), ms(1400));
        assert_eq!(c(100, 0).initial_for(&h, pulse()), ms(500));
        assert_eq!(c(100, 2).initial_for(&h, pulse()), ms(1500));
        // Exactly whole periods are not rounded further: 1000 ms + 1 pulse.
        assert_eq!(c(250, 1).initial_for(&h, pulse()), ms(1500));
        // A zero round trip or factor never makes a zero timer.
        assert_eq!(
            c(1, 0).initial_for(&hint(0, ms(100)), Granularity::Fine),
            MIN_TIMER
        );
        assert_eq!(c(0, 0).initial_for(&h, Granularity::Fine), MIN_TIMER);
        assert_eq!(c(0, 0).initial_for(&h, pulse()), MIN_TIMER);
        assert_eq!(c(0, 1).initial_for(&h, pulse()), ms(500));
    }

    #[test]
    fn without_a_hint_the_first_timer_is_the_fallback() {
        let c = LinkAwareConfig::default();
        let mut p = c.build(&with_path(None, pulse(), 1));
        assert_eq!(p.name(), "link_aware");
        assert_eq!(p.estimate().rto, ms(3000));
        let t = p.timeout_for(
            rtolab_time::SimTime::ZERO,
            &crate::rto::test_util::tx(0, 1, 0),
        );
        assert_eq!(t, ms(3000));
        let other = LinkAwareConfig {
            lim: LimRtoConfig {
                initial: ms(1200),
                ..c.lim
            },
            ..c
        };
        assert_eq!(
            other.build(&with_path(None, pulse(), 1)).estimate().rto,
            ms(1200)
        );
    }

    #[test]
    fn with_a_hint_it_starts_from_the_formula_then_adapts_as_lim2024() {
        let c = LinkAwareConfig::default();
        let h = hint(3, contikimac_8hz());
        for seed in 0..200 {
            let ctx = with_path(Some(h), pulse(), seed);
            let mut ours = LimRto::new(c.estimator_for(&ctx), &ctx, "link_aware");
            // lim2024 with the same first timer and first MDEV rule.
            let theirs_config = LimRtoConfig {
                initial: ms(2500),
                half_rtt_first_mdev: true,
                ..Lim2024Config::default().0
            };
            let mut theirs = LimRto::new(theirs_config, &ctx, "lim2024");
            assert_eq!(fresh(&mut ours), 2500);
            assert_eq!(ours.estimate(), theirs.estimate());
            // An expiry before any sample, then samples, more expiries and
            // fresh timers: draw for draw the same.
            assert_eq!(expire(&mut ours, 0), expire(&mut theirs, 0));
            for (at, rtt) in [(3000, 1900), (5000, 1200), (7000, 2600), (9000, 900)] {
                feed(&mut ours, at, rtt);
                feed(&mut theirs, at, rtt);
                assert_eq!(ours.estimate(), theirs.estimate(), "{seed}");
                assert_eq!(fresh(&mut ours), fresh(&mut theirs));
            }
            for nrtx in 0..6 {
                assert_eq!(expire(&mut ours, nrtx), expire(&mut theirs, nrtx), "{seed}");
            }
        }
        // The first sample gives RTO = 3 · RTT (MDEV = RTT/2).
        let ctx = with_path(Some(h), pulse(), 1);
        let mut p = LimRto::new(c.estimator_for(&ctx), &ctx, "link_aware");
        feed(&mut p, 2000, 1000);
        assert_eq!(p.rto(), ms(3000));
    }

    #[test]
    fn the_factory_builds_from_the_hint() {
        let c = LinkAwareConfig::default();
        let p = c.build(&with_path(Some(hint(3, contikimac_8hz())), pulse(), 1));
        assert_eq!(p.name(), "link_aware");
        assert_eq!(p.estimate().rto, ms(2500));
        assert_eq!(p.estimate().srtt, None);
    }

    #[test]
    fn settings_read_from_one_flat_table() {
        let read = |text: &str| toml::from_str::<LinkAwareConfig>(text);
        assert_eq!(read(""), Ok(LinkAwareConfig::default()));
        let d = LinkAwareConfig::default();
        assert!(d.lim.modified_dithering && d.lim.half_rtt_first_mdev);
        assert_eq!(d.lim.initial, ms(3000));
        let c = read("factor_percent = 300\nmargin_periods = 0\ninitial = \"2s\"\nk = 3")
            .expect("reads");
        assert_eq!((c.factor_percent, c.margin_periods), (300, 0));
        assert_eq!(c.lim.initial, ms(2000));
        assert_eq!(c.lim.k, 3);
        assert!(c.lim.modified_dithering && c.lim.half_rtt_first_mdev);
        let c = read("half_rtt_first_mdev = false").expect("reads");
        assert!(!c.lim.half_rtt_first_mdev);
        let err = read("factor = 2").unwrap_err().to_string();
        assert!(err.contains("unknown field `factor`"), "{err}");
        let err = read("factor_percent = -1").unwrap_err().to_string();
        assert!(err.contains("factor_percent"), "{err}");
        let text = toml::to_string(&d).expect("writes");
        assert!(text.contains("factor_percent = 200"), "{text}");
        assert_eq!(read(&text), Ok(d));
    }

    #[test]
    fn a_zero_factor_is_refused() {
        assert_eq!(LinkAwareConfig::default().check(), Ok(()));
        let c = LinkAwareConfig {
            factor_percent: 0,
            ..LinkAwareConfig::default()
        };
        assert_eq!(c.check().unwrap_err().0, "factor_percent");
        let mut c = LinkAwareConfig::default();
        c.lim.srtt_gain = 0;
        assert_eq!(c.check().unwrap_err().0, "srtt_gain");
    }
}
