//! lwIP 2.1's retransmission timer (`tcp_in.c` `tcp_receive`, `tcp.c`
//! `tcp_slowtmr`, `tcp_out.c` `tcp_output_segment`).
//!
//! Everything is counted in slow-timer ticks (500 ms by default):
//!
//! * One segment is timed at a time: a transmission starts timing when no
//!   measurement is running, a retransmission restarts timing on itself
//!   (lwIP clears the measurement before retransmitting and the resent
//!   segment is timed again when it goes out).
//! * A sample is the number of ticks between the timed transmission and the
//!   first ACK beyond its first sequence number; Van Jacobson's integer
//!   update follows with `sa` scaled by 8 and `sv` by 4, in 16-bit signed
//!   arithmetic. The first sample is not special-cased (`sa` starts at 0).
//! * The RTO is `(sa >> 3) + sv` ticks, reset on every ACK of new data.
//! * On expiry the RTO becomes `((sa >> 3) + sv) << tcp_backoff[nrtx]`, except
//!   in SYN-SENT where it stays; then `nrtx` counts the retransmission.
//! * The initial RTO and `sv` are both the configured initial value.
//!
//! Two lwIP 2.1 quirks are kept on purpose: after an active open the SYN's
//! measurement is left running (SYN-SENT does not call `tcp_receive`), so the
//! first data ACK yields a sample measured from the SYN; and `nrtx` is not
//! cleared by the SYN-ACK when nothing else is outstanding.

use rtolab_time::{SimDuration, SimTime};
use serde::Deserialize;

use super::{
    AckProgress, ConnectionContext, Expiry, RtoEstimate, RtoFactory, RtoPolicy, Transmission,
};
use crate::clock::Granularity;
use crate::serde_duration;

/// lwIP's `tcp_backoff[]`: the shift applied after the n-th expiry.
pub const BACKOFF: [u8; 13] = [1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7, 7, 7];
/// lwIP's `TCP_SLOW_INTERVAL`.
pub const SLOW_INTERVAL: SimDuration = SimDuration::from_millis(500);
/// lwIP's default initial RTO (`3000 / TCP_SLOW_INTERVAL` ticks).
pub const DEFAULT_INITIAL_RTO: SimDuration = SimDuration::from_secs(3);

/// Parameters of the lwIP policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LwipRtoConfig {
    /// Initial RTO and `sv`, rounded down to whole ticks as lwIP's integer
    /// division does (1 s in the bridge study, 3 s lwIP's default).
    #[serde(with = "serde_duration")]
    pub initial: SimDuration,
    /// Slow-timer period, used when the engine's retransmission timer is not
    /// tick-based (it normally is, with this period).
    #[serde(with = "serde_duration")]
    pub slow_interval: SimDuration,
}

impl Default for LwipRtoConfig {
    fn default() -> Self {
        LwipRtoConfig {
            initial: DEFAULT_INITIAL_RTO,
            slow_interval: SLOW_INTERVAL,
        }
    }
}

impl RtoFactory for LwipRtoConfig {
    fn name(&self) -> &'static str {
        "lwip"
    }
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy> {
        Box::new(LwipRto::new(*self, ctx))
    }
}

/// Per-connection lwIP timer state, in ticks.
#[derive(Clone, Debug)]
pub struct LwipRto {
    grid: Granularity,
    tick: SimDuration,
    sa: i16,
    sv: i16,
    rto: i16,
    nrtx: u8,
    /// (`tcp_ticks` when sent, stream offset of `rtseq`).
    rttest: Option<(u64, u64)>,
    syn_sent: bool,
}

impl LwipRto {
    /// Fresh state for a connection.
    pub fn new(config: LwipRtoConfig, ctx: &ConnectionContext) -> Self {
        let grid = match ctx.granularity.period() {
            Some(_) => ctx.granularity,
            None => Granularity::ticks(config.slow_interval, SimDuration::ZERO),
        };
        let tick = grid.period().unwrap_or(SLOW_INTERVAL);
        let initial = (config.initial.as_nanos() / tick.as_nanos()).min(i16::MAX as u64) as i16;
        LwipRto {
            grid,
            tick,
            sa: 0,
            sv: initial,
            rto: initial,
            nrtx: 0,
            rttest: None,
            syn_sent: ctx.active_open,
        }
    }

    /// Current `(sa, sv, rto)` in lwIP's units, for tests and traces.
    pub fn raw(&self) -> (i16, i16, i16) {
        (self.sa, self.sv, self.rto)
    }

    fn estimate_ticks(&self) -> i16 {
        (self.sa >> 3).wrapping_add(self.sv)
    }

    fn ticks_to_duration(&self, ticks: i16) -> SimDuration {
        self.tick.saturating_mul(ticks.max(0) as u64)
    }
}

impl RtoPolicy for LwipRto {
    fn name(&self) -> &'static str {
        "lwip"
    }

    fn on_transmit(&mut self, now: SimTime, tx: &Transmission) {
        if tx.retransmission {
            // tcp_rexmit / tcp_rexmit_rto: "Don't take any RTT measurements
            // after retransmitting"; the resent segment is then timed afresh.
            self.rttest = None;
        }
        if self.rttest.is_none() {
            self.rttest = Some((self.grid.ticks_at(now), tx.offset));
        }
    }

    fn on_ack(&mut self, now: SimTime, ack: &AckProgress) {
        if self.syn_sent && ack.syn_acked {
            // SYN-SENT handles the SYN-ACK itself, without tcp_receive.
            self.syn_sent = false;
            return;
        }
        self.syn_sent = false;
        self.nrtx = 0;
        self.rto = self.estimate_ticks();
        if let Some((sent_tick, rtseq)) = self.rttest {
            if rtseq < ack.acked_to {
                // Time lost to MAC retransmissions (timelost) is not path
                // delay: the measurement ends that much earlier.
                let measured_at = now.saturating_sub(ack.correction);
                let elapsed = self.grid.ticks_at(measured_at).saturating_sub(sent_tick);
                // 16-bit arithmetic as in lwIP (m is s16_t).
                let mut m = elapsed.min(i16::MAX as u64) as i16;
                m = m.wrapping_sub(self.sa >> 3);
                self.sa = self.sa.wrapping_add(m);
                if m < 0 {
                    m = m.wrapping_neg();
                }
                m = m.wrapping_sub(self.sv >> 2);
                self.sv = self.sv.wrapping_add(m);
                self.rto = self.estimate_ticks();
                self.rttest = None;
            }
        }
    }

    fn on_expiry(&mut self, _now: SimTime, _expiry: &Expiry) {
        if !self.syn_sent {
            let index = (self.nrtx as usize).min(BACKOFF.len() - 1);
            let backed_off = (self.estimate_ticks() as i32) << BACKOFF[index];
            self.rto = backed_off.min(0x7FFF) as i16;
        }
        self.nrtx = self.nrtx.saturating_add(1);
        self.rttest = None;
    }

    fn timeout_for(&mut self, _now: SimTime, _oldest: &Transmission) -> SimDuration {
        self.ticks_to_duration(self.rto)
    }

    fn estimate(&self) -> RtoEstimate {
        RtoEstimate {
            srtt: Some(self.tick.saturating_mul((self.sa.max(0) as u64) >> 3)),
            rttvar: Some(self.ticks_to_duration(self.sv)),
            rto: self.ticks_to_duration(self.rto),
            backoff: self.nrtx as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rto::test_util::{ctx, tx};

    const TICK: SimDuration = SimDuration::from_millis(500);

    fn at(ms: u64) -> SimTime {
        SimTime::from_millis(ms)
    }

    fn policy(initial_ms: u64, active: bool) -> LwipRto {
        let mut c = ctx(Granularity::ticks(TICK, SimDuration::ZERO));
        c.active_open = active;
        LwipRto::new(
            LwipRtoConfig {
                initial: SimDuration::from_millis(initial_ms),
                ..LwipRtoConfig::default()
            },
            &c,
        )
    }

    fn ack(p: &mut LwipRto, now: SimTime, acked_to: u64, syn: bool) {
        p.on_ack(
            now,
            &AckProgress {
                acked_to,
                newly_acked: 1,
                syn_acked: syn,
                outstanding: false,
                correction: SimDuration::ZERO,
            },
        );
    }

    fn expire(p: &mut LwipRto, seg: Transmission) -> u64 {
        p.on_expiry(
            SimTime::ZERO,
            &Expiry {
                segment: seg,
                consecutive: 1,
            },
        );
        p.timeout_for(SimTime::ZERO, &seg).as_millis()
    }

    #[test]
    fn initial_rto_is_configured_in_whole_ticks() {
        assert_eq!(policy(3000, false).raw(), (0, 6, 6));
        assert_eq!(policy(1000, false).raw(), (0, 2, 2));
        // 1.2 s is 2 ticks after lwIP's integer division.
        assert_eq!(policy(1200, false).raw(), (0, 2, 2));
    }

    #[test]
    fn tick_samples_follow_the_integer_update() {
        let mut p = policy(1000, false);
        // Sent at 100 ms (tick count 1: the tick at 0 has happened), ACKed at
        // 1100 ms (tick count 3): m = 2 ticks although only 1 s passed.
        p.on_transmit(at(100), &tx(1, 1000, 0));
        ack(&mut p, at(1100), 1001, false);
        // m = 2 - (0>>3) = 2, sa = 2; m = 2 - (2>>2) = 2, sv = 4; rto = 0 + 4.
        assert_eq!(p.raw(), (2, 4, 4));
        // A second segment timed from 1100 ms (count 3), ACKed at 1400 ms
        // (count 3): m = 0. m = 0 - (2>>3) = 0, sa = 2; |0| - (4>>2) = -1,
        // sv = 3; rto = 0 + 3.
        p.on_transmit(at(1100), &tx(1001, 1000, 0));
        ack(&mut p, at(1400), 2001, false);
        assert_eq!(p.raw(), (2, 3, 3));
        assert_eq!(p.timeout_for(at(1400), &tx(2001, 1, 0)), TICK * 3);
    }

    #[test]
    fn time_lost_to_mac_retransmissions_is_not_counted() {
        // Sent at 100 ms (tick count 1), ACKed at 1100 ms (count 3), of
        // which 600 ms were MAC retransmissions: measured to 500 ms
        // (count 2), m = 1 tick instead of 2.
        let mut p = policy(1000, false);
        p.on_transmit(at(100), &tx(1, 1000, 0));
        p.on_ack(
            at(1100),
            &AckProgress {
                acked_to: 1001,
                newly_acked: 1000,
                syn_acked: false,
                outstanding: false,
                correction: SimDuration::from_millis(600),
            },
        );
        // m = 1, sa = 1; m = 1 - (2>>2) = 1, sv = 3; rto = 0 + 3.
        assert_eq!(p.raw(), (1, 3, 3));
    }

    #[test]
    fn only_one_segment_is_timed_and_a_retransmission_restarts_timing() {
        let mut p = policy(1000, false);
        p.on_transmit(at(0), &tx(1, 1000, 0));
        p.on_transmit(at(600), &tx(1001, 1000, 0));
        // The ACK of the second segment samples the first one's timing.
        ack(&mut p, at(1600), 2001, false);
        // ticks_at(0) = 1, ticks_at(1600) = 4: m = 3; sa = 3, sv = 2 + 3 = 5.
        assert_eq!(p.raw(), (3, 5, 5));
        p.on_transmit(at(1600), &tx(2001, 1000, 0));
        p.on_transmit(at(3000), &tx(2001, 1000, 1));
        // Measured from the retransmission at 3000 (count 7) to 3200 (count 7).
        ack(&mut p, at(3200), 3001, false);
        // m = 0 - 0 = 0, sa = 3; 0 - (5>>2) = -1, sv = 4; rto = 4.
        assert_eq!(p.raw(), (3, 4, 4));
    }

    #[test]
    fn backoff_table_multiplies_the_estimate() {
        let mut p = policy(1000, false);
        let seg = tx(1, 1000, 0);
        // estimate = 0 + 2 ticks; shifts 1,2,3,4,5,6,7,7: ticks 4, 8, ..., 256.
        let seen: Vec<u64> = (0..9).map(|_| expire(&mut p, seg)).collect();
        assert_eq!(
            seen,
            [2000, 4000, 8000, 16000, 32000, 64000, 128000, 128000, 128000]
        );
        // An ACK of new data resets to the plain estimate.
        ack(&mut p, at(0), 1001, false);
        assert_eq!(p.raw().2, 2);
        assert_eq!(p.estimate().backoff, 0);
    }

    #[test]
    fn syn_sent_does_not_back_off_and_keeps_timing_the_syn() {
        let mut p = policy(3000, true);
        let syn = tx(0, 1, 0);
        p.on_transmit(at(0), &syn);
        assert_eq!(expire(&mut p, syn), 3000);
        p.on_transmit(at(3000), &tx(0, 1, 1));
        assert_eq!(expire(&mut p, syn), 3000);
        p.on_transmit(at(6000), &tx(0, 1, 2));
        // SYN-ACK at 6200: no sample, nrtx stays 2.
        ack(&mut p, at(6200), 1, true);
        assert_eq!(p.raw(), (0, 6, 6));
        assert_eq!(p.estimate().backoff, 2);
        // Data sent at 6200 is not timed (the SYN still is); its ACK at 7300
        // samples from the SYN retransmission at 6000: count 13 -> 15, m = 2.
        p.on_transmit(at(6200), &tx(1, 100, 0));
        ack(&mut p, at(7300), 101, false);
        // m = 2, sa = 2; 2 - (6>>2) = 1, sv = 7; rto = 0 + 7.
        assert_eq!(p.raw(), (2, 7, 7));
    }
}
