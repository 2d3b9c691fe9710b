//! uIP's retransmission timer (Contiki `uip.c`; uip-rto spec §2.1).
//!
//! uIP keeps one unacknowledged segment and a Van Jacobson estimate in
//! periodic-timer pulses (`sa` scaled by 8, `sv` by 4, 8-bit arithmetic),
//! sampled only from segments that were never retransmitted. The estimate
//! (`rto`) arms the timer of a fresh transmission, but a retransmission
//! ignores it: the timer becomes `UIP_RTO << min(nrtx, 4)` and `nrtx` counts
//! up. `sv` starts at 16 pulses on an active open and 4 on a passive one.
//!
//! uIP sends its first SYN from the retransmission path, so the SYN already
//! counts as retransmission 1 and its timer is `UIP_RTO << 0`. Its timer
//! check is a post-decrement (`timer-- == 0`), so a timer of `T` pulses fires
//! on the `T + 1`-th pulse; [`UipRtoConfig::post_decrement`] keeps that.

use rtolab_time::{SimDuration, SimTime};
use serde::Deserialize;

use super::{
    AckProgress, ConnectionContext, Expiry, RtoEstimate, RtoFactory, RtoPolicy, Transmission,
};
use crate::clock::Granularity;
use crate::serde_duration;

/// Contiki's periodic TCP timer.
pub const PULSE: SimDuration = SimDuration::from_millis(500);
/// Largest shift applied to `UIP_RTO`.
pub const MAX_SHIFT: u8 = 4;

/// Parameters of the uIP policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct UipRtoConfig {
    /// `UIP_RTO`: 3 pulses (1.5 s) in uIP's source, 3 s in the study's runs.
    /// Rounded down to whole pulses.
    #[serde(with = "serde_duration")]
    pub uip_rto: SimDuration,
    /// Period of the periodic timer, when the engine's timer is not tick-based.
    #[serde(with = "serde_duration")]
    pub pulse: SimDuration,
    /// Initial `sv` in pulses after an active open.
    pub initial_sv_active: u8,
    /// Initial `sv` in pulses after a passive open.
    pub initial_sv_passive: u8,
    /// Fire a timer of `T` pulses on pulse `T + 1`, as uIP's
    /// `timer-- == 0` check does.
    pub post_decrement: bool,
}

impl Default for UipRtoConfig {
    fn default() -> Self {
        UipRtoConfig {
            uip_rto: SimDuration::from_millis(1500),
            pulse: PULSE,
            initial_sv_active: 16,
            initial_sv_passive: 4,
            post_decrement: true,
        }
    }
}

impl RtoFactory for UipRtoConfig {
    fn name(&self) -> &'static str {
        "uip"
    }
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(UipRto::new(*self, ctx))
    }
}

/// Per-connection uIP timer state, in pulses.
#[derive(Clone, Debug)]
pub struct UipRto {
    config: UipRtoConfig,
    grid: Granularity,
    pulse: SimDuration,
    uip_rto: u8,
    sa: u8,
    sv: u8,
    rto: u8,
    nrtx: u8,
    /// Pulse count when the outstanding segment was first sent.
    sent_at: Option<u64>,
}

impl UipRto {
    /// Fresh state for a connection.
    pub fn new(config: UipRtoConfig, ctx: &ConnectionContext) -> Self {
        let grid = match ctx.granularity.period() {
            Some(_) => ctx.granularity,
            None => Granularity::ticks(config.pulse, SimDuration::ZERO),
        };
        let pulse = grid.period().unwrap_or(PULSE);
        let uip_rto = (config.uip_rto.as_nanos() / pulse.as_nanos()).min(u8::MAX as u64) as u8;
        UipRto {
            config,
            grid,
            pulse,
            uip_rto,
            sa: 0,
            sv: if ctx.active_open {
                config.initial_sv_active
            } else {
                config.initial_sv_passive
            },
            rto: uip_rto,
            nrtx: 0,
            sent_at: None,
        }
    }

    /// Current `(sa, sv, rto, nrtx)` in uIP's units.
    pub fn raw(&self) -> (u8, u8, u8, u8) {
        (self.sa, self.sv, self.rto, self.nrtx)
    }

    fn timer_pulses(&self) -> u64 {
        let t = if self.nrtx == 0 {
            self.rto
        } else {
            // The retransmission that set nrtx used the count before it.
            self.uip_rto << (self.nrtx - 1).min(MAX_SHIFT)
        };
        t as u64 + u64::from(self.config.post_decrement)
    }
}

impl RtoPolicy for UipRto {
    fn name(&self) -> &'static str {
        "uip"
    }

    fn on_transmit(&mut self, now: SimTime, tx: &Transmission) {
        if tx.syn && !tx.retransmission && self.nrtx == 0 {
            // The first SYN goes out from uIP's retransmission path.
            self.nrtx = 1;
        } else if !tx.retransmission {
            // New data: uIP clears nrtx before sending it.
            self.nrtx = 0;
        }
        if !tx.retransmission {
            self.sent_at = Some(self.grid.ticks_at(now));
        }
    }

    fn on_ack(&mut self, now: SimTime, ack: &AckProgress) {
        if self.nrtx == 0 {
            if let Some(sent) = self.sent_at {
                // m = rto - timer: pulses elapsed since the timer started,
                // less the time lost to MAC retransmissions (timelost).
                let measured_at = now.saturating_sub(ack.correction);
                let elapsed = self.grid.ticks_at(measured_at).saturating_sub(sent);
                let mut m = elapsed.min(i8::MAX as u64) as i8;
                m = m.wrapping_sub((self.sa >> 3) as i8);
                self.sa = self.sa.wrapping_add(m as u8);
                if m < 0 {
                    m = m.wrapping_neg();
                }
                m = m.wrapping_sub((self.sv >> 2) as i8);
                self.sv = self.sv.wrapping_add(m as u8);
                self.rto = (self.sa >> 3).wrapping_add(self.sv);
            }
        }
        self.sent_at = None;
    }

    fn on_expiry(&mut self, _now: SimTime, _expiry: &Expiry) {
        self.nrtx = self.nrtx.saturating_add(1);
    }

    fn timeout_for(&mut self, _now: SimTime, _oldest: &Transmission) -> SimDuration {
        self.pulse.saturating_mul(self.timer_pulses())
    }

    fn estimate(&self) -> RtoEstimate {
        RtoEstimate {
            srtt: Some(self.pulse.saturating_mul((self.sa >> 3) as u64)),
            rttvar: Some(self.pulse.saturating_mul(self.sv as u64)),
            rto: self.pulse.saturating_mul(self.rto as u64),
            backoff: self.nrtx as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rto::test_util::{ctx, tx};

    fn policy(uip_rto_ms: u64, post_decrement: bool) -> UipRto {
        UipRto::new(
            UipRtoConfig {
                uip_rto: SimDuration::from_millis(uip_rto_ms),
                post_decrement,
                ..UipRtoConfig::default()
            },
            &ctx(Granularity::ticks(PULSE, SimDuration::ZERO)),
        )
    }

    fn expire(p: &mut UipRto, seg: Transmission) -> u64 {
        p.on_expiry(
            SimTime::ZERO,
            &Expiry {
                segment: seg,
                consecutive: 1,
            },
        );
        p.timeout_for(SimTime::ZERO, &seg).as_millis()
    }

    fn ack(p: &mut UipRto, at_ms: u64) {
        p.on_ack(
            SimTime::from_millis(at_ms),
            &AckProgress {
                acked_to: 1,
                newly_acked: 1,
                syn_acked: false,
                outstanding: false,
                correction: SimDuration::ZERO,
            },
        );
    }

    #[test]
    fn retransmission_series_is_uip_rto_shifted_and_capped() {
        // The study's fixed 3 s (6 pulses), without the extra pulse.
        let mut p = policy(3000, false);
        let seg = tx(1, 100, 0);
        p.on_transmit(SimTime::ZERO, &seg);
        assert_eq!(p.timeout_for(SimTime::ZERO, &seg).as_millis(), 3000);
        let series: Vec<u64> = (0..8).map(|_| expire(&mut p, seg)).collect();
        assert_eq!(
            series,
            [3000, 6000, 12000, 24000, 48000, 48000, 48000, 48000]
        );
    }

    #[test]
    fn post_decrement_adds_one_pulse() {
        // uIP's own UIP_RTO = 3 pulses; a timer of 3 fires on pulse 4.
        let mut p = policy(1500, true);
        let seg = tx(1, 100, 0);
        p.on_transmit(SimTime::ZERO, &seg);
        assert_eq!(p.timeout_for(SimTime::ZERO, &seg).as_millis(), 2000);
        assert_eq!(expire(&mut p, seg), 2000);
        assert_eq!(expire(&mut p, seg), 3500);
    }

    #[test]
    fn first_syn_counts_as_a_retransmission_and_is_not_sampled() {
        let mut p = policy(3000, false);
        let syn = tx(0, 1, 0);
        p.on_transmit(SimTime::ZERO, &syn);
        assert_eq!(p.raw(), (0, 16, 6, 1));
        assert_eq!(expire(&mut p, syn), 6000);
        ack(&mut p, 700);
        assert_eq!(p.raw(), (0, 16, 6, 2));
    }

    #[test]
    fn estimate_arms_fresh_transmissions_only() {
        let mut p = policy(3000, false);
        let seg = tx(1, 100, 0);
        // Sent at 100 ms (pulse count 1), ACKed at 1100 ms (count 3): m = 2.
        p.on_transmit(SimTime::from_millis(100), &seg);
        ack(&mut p, 1100);
        // m = 2 - 0 = 2, sa = 2; m = 2 - (16>>2) = -2, sv = 14; rto = 0 + 14.
        assert_eq!(p.raw(), (2, 14, 14, 0));
        let next = tx(101, 100, 0);
        p.on_transmit(SimTime::from_millis(1100), &next);
        assert_eq!(p.timeout_for(SimTime::ZERO, &next).as_millis(), 7000);
        // The retransmission ignores the 7 s estimate.
        assert_eq!(expire(&mut p, next), 3000);
        // Its ACK gives no sample (nrtx != 0).
        ack(&mut p, 5000);
        assert_eq!(p.raw(), (2, 14, 14, 1));
    }
}
