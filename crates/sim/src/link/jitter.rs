//! A random part of a link's delay (`jitter` on a `point-to-point` link):
//! each frame's propagation delay is the link's `delay` plus a draw from a
//! distribution, as on a Wi-Fi hop whose MAC retries and queues vary from
//! frame to frame.
//!
//! ```toml
//! jitter = { distribution = "exponential", mean = "50ms" }
//! jitter = { distribution = "uniform", max = "20ms" }   # between 0 and max
//! ```
//!
//! Frames of one direction still arrive in the order they were sent (a
//! frame drawn shorter than the one before it waits for it), as behind one
//! MAC queue. Without `jitter` nothing is drawn, so a link without it
//! consumes no random numbers for it.

use rand::Rng;
use rtolab_time::SimDuration;
use serde::Deserialize;

use super::LinkCheck;
use crate::config::{Duration, ScenarioError};
use crate::rng::{exponential, SimRng};

/// The distribution of the extra delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Jitter {
    /// No extra delay (the default).
    #[default]
    None,
    /// Uniform between zero and `max`.
    Uniform {
        /// Largest extra delay.
        max: SimDuration,
    },
    /// Exponential of mean `mean` (memoryless waits, mostly short with a
    /// long tail).
    Exponential {
        /// Mean extra delay.
        mean: SimDuration,
    },
}

impl Jitter {
    /// One frame's extra delay; draws nothing for [`Jitter::None`].
    pub fn draw(&self, rng: &mut SimRng) -> SimDuration {
        match *self {
            Jitter::None => SimDuration::ZERO,
            Jitter::Uniform { max } => SimDuration::from_nanos(rng.gen_range(0..=max.as_nanos())),
            Jitter::Exponential { mean } => exponential(rng, mean),
        }
    }

    /// The mean extra delay.
    pub fn mean(&self) -> SimDuration {
        match *self {
            Jitter::None => SimDuration::ZERO,
            Jitter::Uniform { max } => SimDuration::from_nanos(max.as_nanos() / 2),
            Jitter::Exponential { mean } => mean,
        }
    }
}

/// The `jitter` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJitter {
    /// `"exponential"` (takes `mean`) or `"uniform"` (takes `max`). Required.
    distribution: Option<String>,
    /// Largest extra delay of a uniform jitter, at most 3600 s. Default: none (required for
    /// `"uniform"`).
    max: Option<Duration>,
    /// Mean extra delay of an exponential jitter, at most 3600 s. Default: none (required for
    /// `"exponential"`).
    mean: Option<Duration>,
}

/// Longest extra delay or mean a scenario may ask for: beyond it a frame
/// would outlive any run.
const LONGEST: SimDuration = SimDuration::from_secs(3600);

impl RawJitter {
    /// Validates the table at `link[i].jitter`: a distribution with the one
    /// parameter it takes.
    pub fn validate(self, cx: &LinkCheck<'_>) -> Result<Jitter, ScenarioError> {
        let field = |name: &str| cx.at(&format!("jitter.{name}"));
        let bounded = |name: &str, d: Option<Duration>| match d {
            None => Err(ScenarioError::new(
                field(name),
                format!(
                    "required for distribution {:?}",
                    self.distribution.as_deref().unwrap_or("")
                ),
            )),
            Some(Duration(d)) if d > LONGEST => Err(ScenarioError::new(
                field(name),
                "must be at most 3600s".to_string(),
            )),
            Some(Duration(d)) => Ok(d),
        };
        let unused = |name: &str, d: Option<Duration>, kind: &str| match d {
            Some(_) => Err(ScenarioError::new(
                field(name),
                format!("a {kind} jitter takes no {name}"),
            )),
            None => Ok(()),
        };
        match self.distribution.as_deref() {
            Some("uniform") => {
                unused("mean", self.mean, "uniform")?;
                Ok(Jitter::Uniform {
                    max: bounded("max", self.max)?,
                })
            }
            Some("exponential") => {
                unused("max", self.max, "exponential")?;
                Ok(Jitter::Exponential {
                    mean: bounded("mean", self.mean)?,
                })
            }
            Some(other) => Err(ScenarioError::new(
                field("distribution"),
                format!("must be \"uniform\" or \"exponential\", got {other:?}"),
            )),
            None => Err(ScenarioError::new(
                field("distribution"),
                "required: \"uniform\" or \"exponential\"".to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::component_stream;

    fn mean_of(jitter: Jitter, n: u32) -> (f64, SimDuration, SimDuration) {
        let mut rng = component_stream(7, "jitter");
        let draws: Vec<SimDuration> = (0..n).map(|_| jitter.draw(&mut rng)).collect();
        let sum: f64 = draws.iter().map(|d| d.as_nanos() as f64).sum();
        let min = draws.iter().copied().min().unwrap_or_default();
        let max = draws.iter().copied().max().unwrap_or_default();
        (sum / f64::from(n) / 1e6, min, max)
    }

    #[test]
    fn draws_follow_their_distribution() {
        let ms = SimDuration::from_millis;
        // Uniform on [0, 20 ms]: mean 10 ms, never above 20.
        let (mean, _, max) = mean_of(Jitter::Uniform { max: ms(20) }, 20_000);
        assert!((mean - 10.0).abs() < 0.2, "{mean}");
        assert!(max <= ms(20));
        // Exponential of mean 50 ms: mean 50, P(X > 3 * mean) = e^-3.
        let jitter = Jitter::Exponential { mean: ms(50) };
        let (mean, min, _) = mean_of(jitter, 20_000);
        assert!((mean - 50.0).abs() < 1.5, "{mean}");
        assert!(min > SimDuration::ZERO);
        let mut rng = component_stream(7, "jitter");
        let tail = (0..20_000)
            .filter(|_| jitter.draw(&mut rng) > ms(150))
            .count();
        let expected = 20_000.0 * (-3.0f64).exp();
        assert!(
            (tail as f64 - expected).abs() < 4.0 * expected.sqrt(),
            "{tail}"
        );
        assert_eq!(jitter.mean(), ms(50));
        assert_eq!(Jitter::None.draw(&mut rng), SimDuration::ZERO);
    }
}
