//! RFC 6298, "Computing TCP's Retransmission Timer", with Karn's rule.
//!
//! Clause numbers in comments refer to RFC 6298 §2 (estimation) and §5
//! (timer management). The minimum, initial and maximum RTO and the clock
//! granularity G are configurable so the same module serves the RFC profile
//! (1 s minimum) and the Linux-like one (200 ms minimum).

use rtolab_time::{SimDuration, SimTime};
use serde::Deserialize;

use super::{
    AckProgress, ConnectionContext, Expiry, RtoEstimate, RtoFactory, RtoPolicy, RttSample,
    Transmission,
};
use crate::serde_duration;

/// RFC 6298 (2.1): "Until a round-trip time (RTT) measurement has been made
/// ... the sender SHOULD set RTO <- 1 second".
pub const INITIAL_RTO: SimDuration = SimDuration::from_secs(1);
/// RFC 6298 (2.4): "if it is less than 1 second, then the RTO SHOULD be
/// rounded up to 1 second".
pub const MIN_RTO: SimDuration = SimDuration::from_secs(1);
/// RFC 6298 (2.5): "A maximum value MAY be placed on RTO provided it is at
/// least 60 seconds."
pub const MAX_RTO: SimDuration = SimDuration::from_secs(60);
/// RFC 6298 §2: K = 4.
pub const K: u64 = 4;
/// RFC 6298 (5.7): the RTO after a timed-out SYN when data transmission
/// begins.
pub const SYN_TIMEOUT_RTO: SimDuration = SimDuration::from_secs(3);
/// Largest backoff exponent applied; the maximum RTO caps the timer long
/// before this, it only keeps the shift defined.
const MAX_BACKOFF_EXPONENT: u32 = 16;

/// Parameters of the RFC 6298 policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Rfc6298Config {
    /// RTO before the first sample (2.1).
    #[serde(with = "serde_duration")]
    pub initial: SimDuration,
    /// Lower bound on the computed RTO (2.4).
    #[serde(with = "serde_duration")]
    pub min: SimDuration,
    /// Upper bound, also on backed-off values (2.5).
    #[serde(with = "serde_duration")]
    pub max: SimDuration,
    /// Clock granularity G in `RTO = SRTT + max(G, K*RTTVAR)`.
    #[serde(with = "serde_duration")]
    pub granularity: SimDuration,
    /// Apply (5.7): 3 s after a SYN timed out, until the first sample.
    pub syn_timeout_rule: bool,
    /// Which round trips feed the estimator: `"every_ack"` (a sample
    /// from each ACK of new data, as Linux takes them) or `"one_segment"`
    /// (one segment timed at a time, as BSD and ns-2's `Agent/TCP` do).
    pub timing: RttTiming,
}

/// Which round trips the RFC 6298 estimator takes (RFC 6298 §3 asks for
/// at least one per round trip and allows more).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RttTiming {
    /// A sample from every ACK of new data that Karn's rule allows: up to
    /// a window's worth per round trip, so the smoothing gains act that
    /// many times faster.
    #[default]
    EveryAck,
    /// One segment timed at a time: timing starts when new data goes out
    /// and none is timed, a retransmission or timeout abandons it, and the
    /// first ACK covering the timed segment is the sample (BSD's `t_rtt`,
    /// ns-2.35's `rtt_active_` in `tcp.cc`): about one sample per round
    /// trip, never of a retransmitted segment.
    OneSegment,
}

impl Default for Rfc6298Config {
    fn default() -> Self {
        Rfc6298Config {
            initial: INITIAL_RTO,
            min: MIN_RTO,
            max: MAX_RTO,
            granularity: SimDuration::from_millis(1),
            syn_timeout_rule: true,
            timing: RttTiming::EveryAck,
        }
    }
}

impl RtoFactory for Rfc6298Config {
    fn name(&self) -> &'static str {
        "rfc6298"
    }
    fn build(&self, _ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(Rfc6298::new(*self))
    }
}

/// Per-connection RFC 6298 state.
#[derive(Clone, Debug)]
pub struct Rfc6298 {
    config: Rfc6298Config,
    srtt: Option<SimDuration>,
    rttvar: SimDuration,
    /// RTO computed by (2.2)/(2.3), before backoff.
    base: SimDuration,
    backoff: u32,
    syn_timed_out: bool,
    /// Our SYN was acknowledged: data transmission has begun.
    established: bool,
    /// With [`RttTiming::OneSegment`]: the timed segment's stream offset
    /// and send time.
    timed: Option<(u64, SimTime)>,
}

impl Rfc6298 {
    /// A policy that has not seen a sample yet.
    pub fn new(config: Rfc6298Config) -> Self {
        Rfc6298 {
            config,
            srtt: None,
            rttvar: SimDuration::ZERO,
            base: config.initial,
            backoff: 0,
            syn_timed_out: false,
            established: false,
            timed: None,
        }
    }

    fn clamp(&self, rto: SimDuration) -> SimDuration {
        // (2.4) round up to the minimum; (2.5) cap at the maximum.
        rto.max(self.config.min).min(self.config.max)
    }

    fn current(&self) -> SimDuration {
        let mut base = self.base;
        if self.config.syn_timeout_rule
            && self.syn_timed_out
            && self.established
            && self.srtt.is_none()
        {
            // (5.7) a timed-out SYN with an RTO below 3 s: 3 s "when data
            // transmission begins"; the SYN's own retransmissions back off
            // from the initial value.
            base = base.max(SYN_TIMEOUT_RTO);
        }
        // (2.4) the minimum applies to the computed RTO, which (5.5) then
        // doubles per expiry; (2.5) caps the result. Doubling an estimate
        // below the minimum first would leave the timer at the minimum for
        // several expiries, i.e. no backoff at all on short paths.
        let shift = self.backoff.min(MAX_BACKOFF_EXPONENT);
        self.clamp(self.clamp(base).saturating_mul(1u64 << shift))
    }
}

impl RtoPolicy for Rfc6298 {
    fn name(&self) -> &'static str {
        "rfc6298"
    }

    fn on_rtt_sample(&mut self, _now: SimTime, sample: &RttSample) {
        // Karn: "RTT samples MUST NOT be made using segments that were
        // retransmitted" (§3) unless timestamps disambiguate them.
        if !sample.unambiguous() || self.config.timing == RttTiming::OneSegment {
            return;
        }
        self.update(sample.corrected());
    }

    fn on_transmit(&mut self, now: SimTime, tx: &Transmission) {
        if self.config.timing != RttTiming::OneSegment {
            return;
        }
        if tx.retransmission {
            // ns-2's reset_rtx_timer, on a timeout or fast retransmit.
            self.timed = None;
        } else if self.timed.is_none() {
            self.timed = Some((tx.offset, now));
        }
    }

    fn on_ack(&mut self, now: SimTime, ack: &AckProgress) {
        // The handshake completed: data transmission begins with the
        // unbacked-off value ((5.7) makes it 3 s after a SYN timeout).
        if ack.syn_acked {
            self.backoff = 0;
            self.established = true;
        }
        if let Some((offset, sent)) = self.timed {
            if ack.acked_to > offset {
                self.timed = None;
                // Time lost to MAC retransmissions is not path delay.
                self.update(now.saturating_sub(ack.correction) - sent);
            }
        }
    }

    fn on_expiry(&mut self, _now: SimTime, expiry: &Expiry) {
        if expiry.segment.syn {
            self.syn_timed_out = true;
        }
        self.timed = None;
        // (5.5) RTO <- RTO * 2, kept until a valid sample arrives.
        self.backoff = self.backoff.saturating_add(1);
    }

    fn timeout_for(&mut self, _now: SimTime, _oldest: &Transmission) -> SimDuration {
        self.current()
    }

    fn estimate(&self) -> RtoEstimate {
        RtoEstimate {
            srtt: self.srtt,
            rttvar: self.srtt.map(|_| self.rttvar),
            rto: self.current(),
            backoff: self.backoff,
        }
    }
}

impl Rfc6298 {
    /// (2.2)/(2.3) with the round trip `r`, which also ends a backed-off
    /// period (Karn).
    fn update(&mut self, r: SimDuration) {
        match self.srtt {
            None => {
                // (2.2) SRTT <- R, RTTVAR <- R/2.
                self.srtt = Some(r);
                self.rttvar = SimDuration::from_nanos(r.as_nanos() / 2);
            }
            Some(srtt) => {
                // (2.3) RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|
                // with beta = 1/4, then SRTT <- (1 - alpha) * SRTT + alpha * R'
                // with alpha = 1/8 (RTTVAR first, using the old SRTT).
                let err = srtt.as_nanos().abs_diff(r.as_nanos());
                let rttvar = (3 * self.rttvar.as_nanos() + err) / 4;
                let srtt = (7 * srtt.as_nanos() + r.as_nanos()) / 8;
                self.rttvar = SimDuration::from_nanos(rttvar);
                self.srtt = Some(SimDuration::from_nanos(srtt));
            }
        }
        // (2.2)/(2.3) RTO <- SRTT + max(G, K*RTTVAR).
        let var = self.rttvar.saturating_mul(K).max(self.config.granularity);
        self.base = self.srtt.unwrap_or(self.config.initial) + var;
        // Karn: a valid sample ends the backed-off period.
        self.backoff = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rto::test_util::{sample, tx};

    fn ms(v: u64) -> SimDuration {
        SimDuration::from_millis(v)
    }

    fn policy(min_ms: u64) -> Rfc6298 {
        Rfc6298::new(Rfc6298Config {
            min: ms(min_ms),
            ..Rfc6298Config::default()
        })
    }

    fn ack(acked_to: u64) -> AckProgress {
        AckProgress {
            acked_to,
            newly_acked: 1000,
            syn_acked: false,
            outstanding: true,
            correction: SimDuration::ZERO,
        }
    }

    #[test]
    fn one_segment_timing_takes_one_sample_per_timed_segment() {
        let mut p = Rfc6298::new(Rfc6298Config {
            min: ms(1),
            timing: RttTiming::OneSegment,
            ..Rfc6298Config::default()
        });
        let at = SimTime::from_millis;
        // Segments at offsets 1000 and 2000 sent at 0 and 10 ms: only the
        // first is timed.
        p.on_transmit(at(0), &tx(1000, 1000, 0));
        p.on_transmit(at(10), &tx(2000, 1000, 0));
        // Per-ACK samples are ignored in this mode.
        p.on_rtt_sample(at(50), &sample(50));
        assert_eq!(p.estimate().srtt, None);
        // The ACK of the first: a 100 ms sample.
        p.on_ack(at(100), &ack(2000));
        assert_eq!(p.estimate().srtt, Some(ms(100)));
        // The ACK of the second takes none (it was not timed).
        p.on_ack(at(110), &ack(3000));
        assert_eq!(p.estimate().srtt, Some(ms(100)));
        // The next new segment is timed; a retransmission abandons it, and
        // the ACK then takes no sample.
        p.on_transmit(at(120), &tx(3000, 1000, 0));
        p.on_transmit(at(300), &tx(3000, 1000, 1));
        p.on_ack(at(400), &ack(4000));
        assert_eq!(p.estimate().srtt, Some(ms(100)));
        // A timeout also abandons it and keeps the backoff until a sample.
        p.on_transmit(at(500), &tx(4000, 1000, 0));
        p.on_expiry(
            at(900),
            &Expiry {
                segment: tx(4000, 1000, 0),
                consecutive: 1,
            },
        );
        p.on_ack(at(950), &ack(5000));
        assert_eq!(p.estimate().backoff, 1);
        p.on_transmit(at(1000), &tx(5000, 1000, 0));
        p.on_ack(at(1200), &ack(6000));
        let e = p.estimate();
        assert_eq!(e.backoff, 0);
        // (2.3) with 200 ms: SRTT 100 + 100/8 = 112.5 ms.
        assert_eq!(e.srtt, Some(SimDuration::from_micros(112_500)));
    }

    #[test]
    fn every_ack_timing_takes_the_engines_samples() {
        let mut p = policy(1);
        p.on_transmit(SimTime::ZERO, &tx(1000, 1000, 0));
        p.on_rtt_sample(SimTime::from_millis(50), &sample(50));
        assert_eq!(p.estimate().srtt, Some(ms(50)));
        // on_ack takes none of its own.
        p.on_ack(SimTime::from_millis(80), &ack(2000));
        assert_eq!(p.estimate().srtt, Some(ms(50)));
    }

    #[test]
    fn sample_sequence_matches_hand_computation() {
        // min 200 ms so the formula is visible. Each row: sample, SRTT,
        // RTTVAR, RTO (hand-computed with alpha 1/8, beta 1/4, K 4).
        let table: &[(u64, u64, u64, u64)] = &[
            // (2.2): SRTT = 100, RTTVAR = 50, RTO = 100 + 200.
            (100, 100, 50, 300),
            // (2.3): RTTVAR = 3/4*50 + 1/4*|100-300| = 87.5,
            // SRTT = 7/8*100 + 1/8*300 = 125, RTO = 125 + 350 = 475.
            (300, 125, 87_500, 475),
            // RTTVAR = 3/4*87.5 + 1/4*25 = 71.875, SRTT = 121.875,
            // RTO = 121.875 + 287.5 = 409.375.
            (100, 121_875, 71_875, 409_375),
        ];
        let mut p = policy(200);
        assert_eq!(p.timeout_for(SimTime::ZERO, &tx(1, 1000, 0)), ms(1000));
        for &(r, srtt, var, rto) in table {
            p.on_rtt_sample(SimTime::ZERO, &sample(r));
            let e = p.estimate();
            let micros = |v: u64| {
                if v >= 1000 {
                    SimDuration::from_micros(v)
                } else {
                    ms(v)
                }
            };
            assert_eq!(e.srtt, Some(micros(srtt)), "srtt after {r}");
            assert_eq!(e.rttvar, Some(micros(var)), "rttvar after {r}");
            assert_eq!(e.rto, micros(rto), "rto after {r}");
        }
    }

    #[test]
    fn minimum_and_granularity_apply() {
        // (2.4): 10 + 4*5 = 30 ms rounds up to the 1 s minimum.
        let mut p = policy(1000);
        p.on_rtt_sample(SimTime::ZERO, &sample(10));
        assert_eq!(p.estimate().rto, ms(1000));
        // G dominates a zero variance: 0 ms samples give RTO = G.
        let mut p = Rfc6298::new(Rfc6298Config {
            min: SimDuration::ZERO,
            granularity: ms(10),
            ..Rfc6298Config::default()
        });
        p.on_rtt_sample(SimTime::ZERO, &sample(0));
        assert_eq!(p.estimate().rto, ms(10));
    }

    #[test]
    fn backoff_doubles_until_cap_and_karn_ignores_retransmitted_samples() {
        let mut p = policy(200);
        p.on_rtt_sample(SimTime::ZERO, &sample(100));
        let seg = tx(1, 1000, 0);
        let expiry = Expiry {
            segment: seg,
            consecutive: 1,
        };
        let mut seen = vec![];
        for _ in 0..9 {
            p.on_expiry(SimTime::ZERO, &expiry);
            seen.push(p.timeout_for(SimTime::ZERO, &seg).as_millis());
        }
        assert_eq!(
            seen,
            [600, 1200, 2400, 4800, 9600, 19200, 38400, 60000, 60000]
        );
        // (Karn) a sample of a retransmitted segment keeps the backoff.
        let mut ambiguous = sample(100);
        ambiguous.retransmitted = true;
        p.on_rtt_sample(SimTime::ZERO, &ambiguous);
        assert_eq!(p.estimate().rto, ms(60000));
        // A clean sample collapses it.
        p.on_rtt_sample(SimTime::ZERO, &sample(100));
        assert_eq!(p.estimate().backoff, 0);
        assert!(p.estimate().rto < ms(1000));
    }

    #[test]
    fn backoff_doubles_the_rto_after_rounding_up_to_the_minimum() {
        // A 2 ms path: (2.2) gives 2 + 4*1 = 6 ms, (2.4) rounds it up to
        // 1 s, and (5.5) doubles that second, not the 6 ms.
        let mut p = policy(1000);
        p.on_rtt_sample(SimTime::ZERO, &sample(2));
        let seg = tx(1, 1, 0);
        let expiry = Expiry {
            segment: seg,
            consecutive: 1,
        };
        let mut seen = vec![p.timeout_for(SimTime::ZERO, &seg).as_millis()];
        for _ in 0..7 {
            p.on_expiry(SimTime::ZERO, &expiry);
            seen.push(p.timeout_for(SimTime::ZERO, &seg).as_millis());
        }
        assert_eq!(seen, [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]);
    }

    #[test]
    fn syn_timeout_sets_three_seconds_until_first_sample() {
        let mut p = policy(200);
        let syn = tx(0, 1, 0);
        p.on_expiry(
            SimTime::ZERO,
            &Expiry {
                segment: syn,
                consecutive: 1,
            },
        );
        // The SYN itself backs off from the initial 1 s.
        assert_eq!(p.timeout_for(SimTime::ZERO, &syn), ms(2000));
        p.on_ack(
            SimTime::ZERO,
            &AckProgress {
                acked_to: 1,
                newly_acked: 1,
                syn_acked: true,
                outstanding: false,
                correction: SimDuration::ZERO,
            },
        );
        assert_eq!(p.estimate().rto, ms(3000));
        p.on_rtt_sample(SimTime::ZERO, &sample(100));
        assert_eq!(p.estimate().rto, ms(300));
    }

    #[test]
    fn correction_is_removed_from_samples() {
        let mut p = policy(0);
        let mut s = sample(300);
        s.correction = Some(ms(200));
        p.on_rtt_sample(SimTime::ZERO, &s);
        assert_eq!(p.estimate().srtt, Some(ms(100)));
    }
}
