//! `kind = "csma-ca"`: the unslotted CSMA-CA of IEEE 802.15.4 (2006 edition,
//! §7.5.1.4): before each attempt, back off a random number of unit
//! periods drawn from `0..2^BE`, then sense the channel (CCA); send if it is
//! clear, otherwise widen the window (`BE + 1`, up to `max_be`) and try
//! again, giving up after `max_backoffs` busy channels.
//!
//! The defaults are the standard's for the 2.4 GHz O-QPSK PHY (16 µs
//! symbols): macMinBE 3, macMaxBE 5, macMaxCSMABackoffs 4 (the MAC PIB
//! defaults), a unit backoff period of 20 symbols (aUnitBackoffPeriod,
//! 320 µs), a CCA over 8 symbols (128 µs) and a receive-to-transmit
//! turnaround of 12 symbols (aTurnaroundTime, 192 µs). The channel is
//! sensed at the end of the CCA period.
//!
//! ```toml
//! [[link]]
//! kind = "broadcast"
//! # ...
//! mac = { kind = "csma-ca", min_be = 3, max_be = 5, max_backoffs = 4 }
//! ```

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::Deserialize;

use super::{Mac, MacStep, ScenarioMac};
use crate::config::{Duration, ScenarioError};
use crate::rng::SimRng;

/// The fields of a CSMA-CA `mac` table; all optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCsmaCa {
    /// Backoff exponent of the first attempt (macMinBE). Default: 3.
    min_be: Option<u8>,
    /// Largest backoff exponent (macMaxBE), 3 to 8 and at least `min_be`. Default: 5.
    max_be: Option<u8>,
    /// Busy channels tolerated before the frame is dropped (macMaxCSMABackoffs). Default: 4.
    max_backoffs: Option<u8>,
    /// One backoff period (aUnitBackoffPeriod). Default: `"320us"`.
    unit_backoff: Option<Duration>,
    /// Length of a clear channel assessment; the channel is sensed at its end. Default:
    /// `"128us"`.
    cca: Option<Duration>,
    /// From a clear channel to the first bit on air (aTurnaroundTime). Default: `"192us"`.
    turnaround: Option<Duration>,
}

/// Validated CSMA-CA parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsmaCaSpec {
    /// Backoff exponent of the first attempt (macMinBE).
    pub min_be: u8,
    /// Largest backoff exponent (macMaxBE).
    pub max_be: u8,
    /// Busy channels tolerated before giving up (macMaxCSMABackoffs).
    pub max_backoffs: u8,
    /// One backoff period (aUnitBackoffPeriod).
    pub unit_backoff: SimDuration,
    /// Length of a clear channel assessment.
    pub cca: SimDuration,
    /// From a clear channel to the first bit on air (aTurnaroundTime).
    pub turnaround: SimDuration,
}

impl Default for CsmaCaSpec {
    fn default() -> Self {
        CsmaCaSpec {
            min_be: 3,
            max_be: 5,
            max_backoffs: 4,
            unit_backoff: SimDuration::from_micros(320),
            cca: SimDuration::from_micros(128),
            turnaround: SimDuration::from_micros(192),
        }
    }
}

impl ScenarioMac for CsmaCaSpec {
    const KIND: &'static str = "csma-ca";
    type Raw = RawCsmaCa;
    type Model = CsmaCa;

    fn validate(raw: RawCsmaCa, path: &str) -> Result<Self, ScenarioError> {
        let d = CsmaCaSpec::default();
        let spec = CsmaCaSpec {
            min_be: raw.min_be.unwrap_or(d.min_be),
            max_be: raw.max_be.unwrap_or(d.max_be),
            max_backoffs: raw.max_backoffs.unwrap_or(d.max_backoffs),
            unit_backoff: raw.unit_backoff.map_or(d.unit_backoff, |v| v.0),
            cca: raw.cca.map_or(d.cca, |v| v.0),
            turnaround: raw.turnaround.map_or(d.turnaround, |v| v.0),
        };
        // The standard's ranges (2006, Table 86).
        if !(3..=8).contains(&spec.max_be) {
            return Err(ScenarioError::new(
                format!("{path}.max_be"),
                format!("must be between 3 and 8, got {}", spec.max_be),
            ));
        }
        if spec.min_be > spec.max_be {
            return Err(ScenarioError::new(
                format!("{path}.min_be"),
                format!(
                    "must be at most max_be ({}), got {}",
                    spec.max_be, spec.min_be
                ),
            ));
        }
        if spec.max_backoffs > 5 {
            return Err(ScenarioError::new(
                format!("{path}.max_backoffs"),
                format!("must be between 0 and 5, got {}", spec.max_backoffs),
            ));
        }
        // A zero backoff period would retry busy channels without time
        // passing.
        if spec.unit_backoff == SimDuration::ZERO {
            return Err(ScenarioError::new(
                format!("{path}.unit_backoff"),
                "must be positive",
            ));
        }
        Ok(spec)
    }

    fn build(&self) -> CsmaCa {
        CsmaCa {
            spec: *self,
            backoffs: 0,
            exponent: self.min_be,
        }
    }
}

/// The CSMA-CA state of one interface for the frame at the head of its
/// queue.
#[derive(Clone, Copy, Debug)]
pub struct CsmaCa {
    spec: CsmaCaSpec,
    /// NB: busy channels met so far.
    backoffs: u8,
    /// BE: the current backoff exponent.
    exponent: u8,
}

impl CsmaCa {
    /// Waits a random number of backoff periods, then senses.
    fn back_off(&self, now: SimTime, rng: &mut SimRng) -> MacStep {
        let periods = rng.gen_range(0..1u64 << self.exponent);
        MacStep::Sense(now + self.spec.unit_backoff.saturating_mul(periods) + self.spec.cca)
    }
}

impl Mac for CsmaCa {
    fn ready(&mut self, now: SimTime, rng: &mut SimRng) -> MacStep {
        self.backoffs = 0;
        self.exponent = self.spec.min_be;
        self.back_off(now, rng)
    }

    fn sensed(&mut self, now: SimTime, busy: bool, rng: &mut SimRng) -> MacStep {
        if !busy {
            return MacStep::Transmit(now + self.spec.turnaround);
        }
        self.backoffs += 1;
        self.exponent = (self.exponent + 1).min(self.spec.max_be);
        if self.backoffs > self.spec.max_backoffs {
            return MacStep::Fail;
        }
        self.back_off(now, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::component_stream;

    fn mac() -> (CsmaCa, SimRng) {
        (CsmaCaSpec::default().build(), component_stream(1, "mac"))
    }

    fn sense_at(step: MacStep) -> SimTime {
        match step {
            MacStep::Sense(t) => t,
            other => panic!("expected a sense, got {other:?}"),
        }
    }

    #[test]
    fn a_clear_channel_is_used_after_the_backoff_cca_and_turnaround() {
        let (mut m, mut rng) = mac();
        let t0 = SimTime::from_millis(10);
        let at = sense_at(m.ready(t0, &mut rng));
        let waited = at.saturating_since(t0);
        // 0..=7 periods of 320 µs, then the 128 µs CCA.
        let backoff = waited.as_nanos() - 128_000;
        assert_eq!(backoff % 320_000, 0);
        assert!(backoff / 320_000 < 8);
        assert_eq!(
            m.sensed(at, false, &mut rng),
            MacStep::Transmit(at + SimDuration::from_micros(192))
        );
    }

    #[test]
    fn busy_channels_widen_the_window_up_to_max_be_then_fail() {
        let (mut m, mut rng) = mac();
        let mut at = sense_at(m.ready(SimTime::ZERO, &mut rng));
        let mut windows = Vec::new();
        for _ in 0..4 {
            let next = sense_at(m.sensed(at, true, &mut rng));
            windows.push(m.exponent);
            at = next;
        }
        assert_eq!(windows, [4, 5, 5, 5]);
        // The fifth busy channel exceeds macMaxCSMABackoffs = 4.
        assert_eq!(m.sensed(at, true, &mut rng), MacStep::Fail);
        // A new frame starts from macMinBE again.
        m.ready(at, &mut rng);
        assert_eq!((m.backoffs, m.exponent), (0, 3));
    }

    #[test]
    fn backoffs_spread_over_the_whole_window() {
        let (mut m, mut rng) = mac();
        let mut seen = [0u32; 8];
        for _ in 0..4000 {
            let at = sense_at(m.ready(SimTime::ZERO, &mut rng));
            let periods = (at.as_nanos() - 128_000) / 320_000;
            seen[periods as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (400..600).contains(&n)), "{seen:?}");
    }

    #[test]
    fn parameters_outside_the_standard_s_ranges_name_the_field() {
        let raw = |text: &str| -> RawCsmaCa { toml::from_str(text).unwrap() };
        let e = CsmaCaSpec::validate(raw("max_be = 9"), "link[0].mac").unwrap_err();
        assert_eq!(
            e.to_string(),
            "link[0].mac.max_be: must be between 3 and 8, got 9"
        );
        let e = CsmaCaSpec::validate(raw("min_be = 6"), "link[0].mac").unwrap_err();
        assert_eq!(e.path, "link[0].mac.min_be");
        let e = CsmaCaSpec::validate(raw("unit_backoff = \"0s\""), "link[0].mac").unwrap_err();
        assert_eq!(e.path, "link[0].mac.unit_backoff");
        assert_eq!(
            CsmaCaSpec::validate(raw(""), "m").unwrap(),
            CsmaCaSpec::default()
        );
    }
}
