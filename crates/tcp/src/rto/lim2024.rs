//! Lim's 2024 retransmission timer for uIP (IJIBC 16(1):29–35;
//! uip-rto spec §2.3): the 2020 scheme with a fairer dithering after an expiry.
//!
//! Everything is [`super::lim2020`]'s, the same code with
//! [`LimRtoConfig::modified_dithering`] on: when a segment has been
//! retransmitted more than twice (`subtract_after`) and its backed-off
//! timer exceeds 15 s (`subtract_above`), the expiry dithering `d` is
//! subtracted instead of added with probability 0.5 (`subtract_percent`).
//! Nodes that lose one segment again and again wait less, so the network
//! is shared more fairly. With the published values `d` is below a quarter
//! of such a timer, so it never drops below three quarters of it.

use serde::{de, Deserialize, Deserializer, Serialize};

use super::lim2020::{LimRto, LimRtoConfig};
use super::{ConnectionContext, RtoFactory, RtoPolicy};

/// Lim's 2024 scheme: [`LimRtoConfig::default`] with
/// [`LimRtoConfig::modified_dithering`] on, also when a profile's table
/// leaves it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Lim2024Config(pub LimRtoConfig);

impl<'de> Deserialize<'de> for Lim2024Config {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The shared configuration's defaults are the 2020 scheme's; fill
        // in this scheme's switch before reading the table as one.
        let mut table = serde_json::Value::deserialize(d)?;
        if let Some(fields) = table.as_object_mut() {
            fields
                .entry("modified_dithering")
                .or_insert(serde_json::Value::Bool(true));
        }
        LimRtoConfig::deserialize(table)
            .map(Lim2024Config)
            .map_err(de::Error::custom)
    }
}

impl Default for Lim2024Config {
    fn default() -> Self {
        Lim2024Config(LimRtoConfig {
            modified_dithering: true,
            ..LimRtoConfig::default()
        })
    }
}

impl RtoFactory for Lim2024Config {
    fn name(&self) -> &'static str {
        "lim2024"
    }
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(LimRto::new(self.0, ctx, "lim2024"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rto::lim2020::tests::{expire, feed, policy, rto_is_first_sample};

    fn both(seed: u64) -> (LimRto, LimRto) {
        let modified = LimRtoConfig {
            modified_dithering: true,
            ..rto_is_first_sample()
        };
        (policy(rto_is_first_sample(), seed), policy(modified, seed))
    }

    #[test]
    fn the_default_is_the_2020_scheme_with_modified_dithering() {
        let d = Lim2024Config::default().0;
        assert!(d.modified_dithering);
        assert_eq!(
            LimRtoConfig {
                modified_dithering: false,
                ..d
            },
            LimRtoConfig::default()
        );
        assert_eq!((d.subtract_after, d.subtract_percent), (2, 50));
        assert_eq!(d.subtract_above, rtolab_time::SimDuration::from_secs(15));
    }

    #[test]
    fn long_waits_after_more_than_two_retransmissions_lose_d_half_the_time() {
        // RTO 20 s, one doubling allowed: 40 s, dithered by [0, 10 s).
        let mut subtracted = 0;
        let mut added = 0;
        for seed in 0..2000 {
            let (_, mut p) = both(seed);
            feed(&mut p, 0, 20_000);
            let t = expire(&mut p, 3);
            assert!((30_000..50_000).contains(&t), "{t}");
            // Never below three quarters of the backed-off timer.
            assert!(t > 30_000, "{t}");
            match t {
                t if t < 40_000 => subtracted += 1,
                t if t > 40_000 => added += 1,
                _ => {}
            }
        }
        assert!((800..1200).contains(&subtracted), "{subtracted} of 2000");
        assert!((800..1200).contains(&added), "{added} of 2000");
    }

    #[test]
    fn below_the_thresholds_it_is_the_2020_scheme_draw_for_draw() {
        for seed in 0..200 {
            // At most two retransmissions so far, with long timers.
            let (mut old, mut new) = both(seed);
            for p in [&mut old, &mut new] {
                feed(p, 0, 20_000);
            }
            for nrtx in 0..=2 {
                assert_eq!(expire(&mut old, nrtx), expire(&mut new, nrtx), "{seed}");
            }
            // Many retransmissions, timers of at most 15 s: 0.9 s doubled
            // at most four times is 14.4 s.
            let (mut old, mut new) = both(seed);
            for p in [&mut old, &mut new] {
                feed(p, 0, 900);
            }
            for nrtx in 0..8 {
                assert_eq!(expire(&mut old, nrtx), expire(&mut new, nrtx), "{seed}");
            }
            // The stream stays in step for the fresh timers that follow.
            feed(&mut old, 1000, 700);
            feed(&mut new, 1000, 700);
            assert_eq!(old.estimate(), new.estimate());
        }
        // At exactly 15 s nothing is subtracted: 1.875 s doubled three times.
        for seed in 0..200 {
            let (mut old, mut new) = both(seed);
            for p in [&mut old, &mut new] {
                feed(p, 0, 1875);
            }
            assert_eq!(expire(&mut old, 3), expire(&mut new, 3));
        }
    }

    #[test]
    fn a_table_without_the_switch_reads_as_the_2024_scheme() {
        let read = |text: &str| toml::from_str::<Lim2024Config>(text);
        assert_eq!(read(""), Ok(Lim2024Config::default()));
        let c = read("subtract_percent = 30\nmax = \"60s\"").expect("reads");
        assert!(c.0.modified_dithering);
        assert_eq!(c.0.subtract_percent, 30);
        assert!(
            !read("modified_dithering = false")
                .expect("reads")
                .0
                .modified_dithering
        );
        let err = read("subtract = 1").unwrap_err().to_string();
        assert!(err.contains("unknown field `subtract`"), "{err}");
        let err = read("max = \"48\"").unwrap_err().to_string();
        assert!(err.contains("missing unit"), "{err}");
        let text = toml::to_string(&Lim2024Config::default()).expect("writes");
        assert_eq!(read(&text), Ok(Lim2024Config::default()));
    }

    #[test]
    fn the_factory_builds_the_2024_policy() {
        let ctx = crate::rto::test_util::ctx(crate::clock::Granularity::Fine);
        let p = Lim2024Config::default().build(&ctx);
        assert_eq!(p.name(), "lim2024");
    }
}
