//! A constant retransmission timeout with exponential backoff and a cap,
//! and no RTT estimation: the baseline an adaptive scheme has to beat.
//!
//! A fresh segment is guarded by `rto`. After the n-th consecutive expiry
//! without progress the timer is `rto * backoff^n`, capped at `max`; the
//! backoff is kept until the cumulative ACK advances. With `backoff = 2`
//! this is RFC 6298's timer management, (5.5) "double the timer" and (2.5)
//! the cap, with its estimation (2.2)-(2.3) left out; `backoff = 1` gives a
//! timer that never changes. The factor is an integer so every timeout is
//! an exact number of nanoseconds.

use rtolab_time::{SimDuration, SimTime};
use serde::{de, Deserialize, Deserializer, Serialize};

use super::{
    AckProgress, ConnectionContext, Expiry, RtoEstimate, RtoFactory, RtoPolicy, Transmission,
};
use crate::serde_duration;

/// Parameters of the fixed policy. The defaults are RFC 6298's initial
/// RTO (2.1), doubling (5.5) and a 60 s cap (2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FixedRtoConfig {
    /// Timeout of a segment that has not timed out yet. Must be positive.
    #[serde(
        serialize_with = "serde_duration::serialize",
        deserialize_with = "positive_duration"
    )]
    pub rto: SimDuration,
    /// Factor applied per consecutive expiry; 1 keeps the timer constant.
    /// Must be at least 1.
    #[serde(deserialize_with = "positive_factor")]
    pub backoff: u32,
    /// Largest timeout, also when `rto` alone exceeds it.
    #[serde(with = "serde_duration")]
    pub max: SimDuration,
}

impl Default for FixedRtoConfig {
    fn default() -> Self {
        FixedRtoConfig {
            rto: SimDuration::from_secs(1),
            backoff: 2,
            max: SimDuration::from_secs(60),
        }
    }
}

// A zero timeout or factor would re-arm the timer at once, forever.
fn positive_duration<'de, D: Deserializer<'de>>(d: D) -> Result<SimDuration, D::Error> {
    let rto = serde_duration::deserialize(d)?;
    if rto.is_zero() {
        return Err(de::Error::custom("rto must be positive"));
    }
    Ok(rto)
}

fn positive_factor<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let factor = u32::deserialize(d)?;
    if factor == 0 {
        return Err(de::Error::custom("backoff must be at least 1"));
    }
    Ok(factor)
}

impl RtoFactory for FixedRtoConfig {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn build(&self, _ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(FixedRto {
            config: *self,
            backoff: 0,
        })
    }
}

/// Per-connection state: only the backoff exponent.
#[derive(Clone, Debug)]
pub struct FixedRto {
    config: FixedRtoConfig,
    backoff: u32,
}

impl FixedRto {
    fn current(&self) -> SimDuration {
        // An overflowing factor is beyond any cap.
        let timeout = u64::from(self.config.backoff)
            .checked_pow(self.backoff)
            .map_or(SimDuration::MAX, |f| self.config.rto.saturating_mul(f));
        timeout.min(self.config.max)
    }
}

impl RtoPolicy for FixedRto {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn on_ack(&mut self, _now: SimTime, ack: &AckProgress) {
        if ack.newly_acked > 0 {
            self.backoff = 0;
        }
    }

    fn on_expiry(&mut self, _now: SimTime, expiry: &Expiry) {
        self.backoff = expiry.consecutive;
    }

    fn timeout_for(&mut self, _now: SimTime, _oldest: &Transmission) -> SimDuration {
        self.current()
    }

    fn estimate(&self) -> RtoEstimate {
        RtoEstimate {
            srtt: None,
            rttvar: None,
            rto: self.current(),
            backoff: self.backoff,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Granularity;
    use crate::rto::test_util::{ctx, sample, tx};

    fn expiry(consecutive: u32) -> Expiry {
        Expiry {
            segment: tx(1, 1000, consecutive - 1),
            consecutive,
        }
    }

    fn progress(newly_acked: usize) -> AckProgress {
        AckProgress {
            acked_to: 1 + newly_acked as u64,
            newly_acked,
            syn_acked: false,
            outstanding: true,
            correction: SimDuration::ZERO,
        }
    }

    fn policy(config: FixedRtoConfig) -> Box<dyn RtoPolicy> {
        config.build(&ctx(Granularity::Fine))
    }

    #[test]
    fn samples_do_not_move_the_timer() {
        let mut p = policy(FixedRtoConfig::default());
        let t = SimTime::from_millis(10);
        assert_eq!(p.timeout_for(t, &tx(1, 1000, 0)), SimDuration::from_secs(1));
        p.on_rtt_sample(SimTime::from_millis(60), &sample(50));
        p.on_ack(SimTime::from_millis(60), &progress(1000));
        let t = SimTime::from_millis(60);
        assert_eq!(
            p.timeout_for(t, &tx(1001, 1000, 0)),
            SimDuration::from_secs(1)
        );
        assert_eq!(p.estimate().srtt, None);
    }

    #[test]
    fn expiries_back_off_by_the_factor_up_to_the_cap() {
        let mut p = policy(FixedRtoConfig {
            rto: SimDuration::from_millis(300),
            backoff: 3,
            max: SimDuration::from_secs(5),
        });
        let mut now = SimTime::from_millis(300);
        let mut timeouts = Vec::new();
        for n in 1..=4 {
            p.on_expiry(now, &expiry(n));
            let timeout = p.timeout_for(now, &tx(1, 1000, n));
            timeouts.push(timeout.as_millis());
            now += timeout;
        }
        // 300 ms * 3, * 9, * 27 = 8.1 s capped at 5 s, then still the cap.
        assert_eq!(timeouts, [900, 2700, 5000, 5000]);
        assert_eq!(p.estimate().backoff, 4);
    }

    #[test]
    fn progress_resets_the_backoff_and_a_duplicate_ack_does_not() {
        let mut p = policy(FixedRtoConfig::default());
        p.on_expiry(SimTime::from_secs(1), &expiry(1));
        p.on_expiry(SimTime::from_secs(3), &expiry(2));
        p.on_ack(SimTime::from_millis(3100), &progress(0));
        let t = SimTime::from_millis(3100);
        assert_eq!(p.timeout_for(t, &tx(1, 1000, 2)), SimDuration::from_secs(4));
        p.on_ack(SimTime::from_millis(3200), &progress(1000));
        let t = SimTime::from_millis(3200);
        assert_eq!(
            p.timeout_for(t, &tx(1001, 1000, 0)),
            SimDuration::from_secs(1)
        );
    }

    #[test]
    fn factor_one_is_constant_and_huge_exponents_saturate_at_the_cap() {
        let mut constant = policy(FixedRtoConfig {
            backoff: 1,
            ..FixedRtoConfig::default()
        });
        constant.on_expiry(SimTime::from_secs(1), &expiry(10));
        let t = SimTime::from_secs(1);
        assert_eq!(
            constant.timeout_for(t, &tx(1, 1000, 10)),
            SimDuration::from_secs(1)
        );

        let mut doubling = policy(FixedRtoConfig::default());
        doubling.on_expiry(SimTime::from_secs(1), &expiry(100));
        let t = SimTime::from_secs(1);
        assert_eq!(
            doubling.timeout_for(t, &tx(1, 1000, 100)),
            SimDuration::from_secs(60)
        );
    }

    #[test]
    fn zero_timeouts_and_factors_are_rejected_by_name() {
        let err = toml::from_str::<FixedRtoConfig>("rto = \"0s\"").unwrap_err();
        assert!(err.to_string().contains("rto must be positive"), "{err}");
        let err = toml::from_str::<FixedRtoConfig>("backoff = 0").unwrap_err();
        assert!(
            err.to_string().contains("backoff must be at least 1"),
            "{err}"
        );
        let partial: FixedRtoConfig = toml::from_str("rto = \"250ms\"").expect("valid");
        assert_eq!(
            partial,
            FixedRtoConfig {
                rto: SimDuration::from_millis(250),
                ..FixedRtoConfig::default()
            }
        );
    }
}
