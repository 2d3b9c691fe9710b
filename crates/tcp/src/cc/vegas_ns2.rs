//! TCP Vegas as ns-2.35's `Agent/TCP/Vegas` decides: on the mean of the
//! round's RTT samples, with its thresholds (`v_alpha_` 1, `v_beta_` 3,
//! `v_gamma_` 1).
//!
//! The timelost study ran this Vegas (timelost spec §3). What it takes from
//! ns-2's `tcp/tcp-vegas.cc`:
//!
//! * one RTT sample per new cumulative ACK, from the segment it
//!   acknowledges, none from a segment sent more than once (the engine's
//!   samples, [`crate::rto::RttSample::unambiguous`]);
//! * once per round trip (when the ACK passes the highest segment sent at
//!   the previous decision) the mean of the samples since then, the
//!   deciding ACK's own sample counting in the next round, or, when there
//!   were none, the time since then; `BaseRTT` the smallest sample or
//!   round mean seen, or the round's mean when at most one segment was
//!   sent in the round (`rttLen <= 1`); no handshake sample (ns-2's
//!   agents have none);
//! * the queue estimate as ns-2 computes it: from the segments sent in
//!   the round rather than the window, rounded to a whole segment
//!   ([`super::vegas::QueueEstimate::Ns2`]);
//! * thresholds α 1, β 3, γ 1 segments; in congestion avoidance one segment
//!   more per round below α, one fewer above β;
//! * slow start grows every other round trip and ends, once the queue
//!   estimate passes γ at a decision that would begin a growing round
//!   trip (ns-2 does not look at the others), with an eighth off the
//!   window (`cwnd -= cwnd/8`);
//! * an initial window of 2 segments (`windowInit_`) and a cap of 20
//!   packets (`window_`) of 960 bytes: ns-2's Vegas agent sends its own
//!   packets (`VegasTcpAgent::output` in `tcp-vegas.cc`) without adding the
//!   40 header bytes the other agents add to `packetSize_`, so its packets
//!   are 1000 bytes where Reno's are 1040; a host running this policy as
//!   ns-2 does sets `mss = 960` (the `ns2` profile's is 1000).
//!
//! With `fine_retransmit` (on by default, see
//! [`VegasNs2Config::fine_retransmit`] for why) it also recovers from loss
//! as `tcp-vegas.cc` does ([`Ns2LossRecovery`]); this needs the send time
//! of the first unacknowledged segment, which the engine passes in
//! [`super::AckEvent::first_unacked`]:
//!
//! * a fine-grained timer `v_timeout_` ([`FineTimer`]) from the same RTT
//!   samples, corrected when timelost is on: `srtt + 2 rttvar` (gains 1/8
//!   and 1/4) and a sixteenth more, started at 1.5 times the first sample;
//! * on a duplicate ACK, the first unacknowledged segment is resent when
//!   it has waited `v_timeout_` since it was last sent, or at the third
//!   duplicate whatever its age; the window is cut, unless it was already
//!   cut after that segment was sent, by a quarter (a half when the
//!   segment had been sent more than once, to 2 segments from 3 or
//!   fewer) and inflated by a segment per duplicate, and `v_timeout_`
//!   backs off (an eighth more, or doubled for a segment sent again);
//! * on each of the first two new ACKs after such a retransmission the
//!   next unacknowledged segment is resent at once when it too has waited
//!   `v_timeout_`, the window left as it is;
//! * the inflation goes on the first new ACK after more than three
//!   duplicates, back to the cut window, and slow start ends there;
//!   after a timeout no duplicate ACK resends until the cumulative ACK
//!   passes what had been sent (ns-2's `bug_fix_`), and the window
//!   restarts at 2 segments (`v_slowstart_`).
//!
//! What it leaves: ns-2 adds the segment a round grants one ACK at a
//! time (`1/cwnd` each), here all at once at the decision; ns-2 also backs
//! off its coarse retransmission timer at each of these retransmissions
//! (`reset_rtx_timer(1)`), which is the engine's RTO policy's and is left
//! alone here; ns-2 deflates the window to 0 segments on the first new
//! ACK after a timeout followed by more than three duplicates, here to the
//! 2-segment floor. Without `fine_retransmit` loss handling is NewReno's
//! fast recovery. ns-2's coarse timer is its own (`tcpTick_` 10 ms), which
//! the `ns2` profile sets.

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::ns2_loss_recovery::{FineTimer, Ns2LossRecovery};
use super::reno::RenoConfig;
use super::vegas::{QueueEstimate, RoundRtt, SlowStartExit, Vegas, VegasConfig};
use super::{CcContext, CcFactory, CongestionControl, InitialWindow};

/// ns-2's `window_`: 20 packets.
pub const NS2_WINDOW_PACKETS: usize = 20;

/// The MSS that gives ns-2's Vegas packets their size, 1000 bytes (960
/// bytes of data behind rtolab's 40 bytes of headers).
pub const NS2_VEGAS_MSS: usize = 960;

/// ns-2's `window_` in bytes of its Vegas's segments.
pub const NS2_WINDOW: usize = NS2_WINDOW_PACKETS * NS2_VEGAS_MSS;

/// Parameters of ns-2's Vegas; thresholds are in segments.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct VegasNs2Config {
    /// `v_alpha_`: grow when fewer segments are queued.
    pub alpha: f64,
    /// `v_beta_`: shrink when more segments are queued.
    pub beta: f64,
    /// `v_gamma_`: leave slow start when more segments are queued.
    pub gamma: f64,
    /// ns-2's loss handling ([`Ns2LossRecovery`]): its fine-grained
    /// retransmission timer `v_timeout_` and its window cut on duplicate
    /// ACKs, instead of NewReno's fast recovery. On by default because it
    /// is what ns-2's Vegas, the study's sender, does; on the study's
    /// moving sink it replaces about a third of the timeouts with early
    /// retransmissions, adds 0.005 ± 0.003 Mbit/s after 150 s and leaves
    /// the timelost gain as it was (10 paired seeds, docs/timelost.md,
    /// "ns-2's fine-grained retransmission").
    pub fine_retransmit: bool,
    /// Window parameters shared with Reno (initial window, cap, ...).
    pub window: RenoConfig,
}

impl Default for VegasNs2Config {
    fn default() -> Self {
        VegasNs2Config {
            alpha: 1.0,
            beta: 3.0,
            gamma: 1.0,
            fine_retransmit: true,
            window: RenoConfig {
                initial_window: InitialWindow::Segments(2),
                max_window: Some(NS2_WINDOW),
                ..RenoConfig::default()
            },
        }
    }
}

impl VegasNs2Config {
    /// The [`VegasConfig`] that behaves as ns-2's Vegas.
    pub fn vegas(&self) -> VegasConfig {
        VegasConfig {
            alpha: self.alpha,
            beta: self.beta,
            gamma: self.gamma,
            round_rtt: RoundRtt::Mean,
            slow_start_exit: SlowStartExit::Eighth,
            queue_estimate: QueueEstimate::Ns2,
            fine_retransmit: self.fine_retransmit,
            window: self.window,
        }
    }
}

impl CcFactory for VegasNs2Config {
    fn name(&self) -> &'static str {
        "vegas_ns2"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(Vegas::new(self.vegas(), ctx.mss))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::ns2_loss_recovery::FineTimer;
    use crate::cc::test_util::{ack, dup, MSS};
    use crate::cc::SentSegment;
    use crate::cc::{AckEvent, RecoveryAction};
    use crate::rto::test_util::sample;
    use rtolab_time::{SimDuration, SimTime};

    fn ms(n: u64) -> SimTime {
        SimTime::from_millis(n)
    }

    fn close(a: SimDuration, secs: f64) {
        assert!((a.as_secs_f64() - secs).abs() < 1e-9, "{a:?} != {secs}");
    }

    #[test]
    fn fine_timer_is_srtt_plus_two_deviations_and_a_sixteenth() {
        // First RTT 100 ms: sa = 0.8, sd = 0.1, timeout (0.2 + 0.1) / 2.
        let mut t = FineTimer::first(SimDuration::from_millis(100));
        close(t.timeout(), 0.15);
        // The same sample again (ns-2 feeds the first ACK's to both):
        // n = 0, sd = 0.1 - 0.1/4 = 0.075, (0.2 + 0.075) / 2 * 17/16.
        t.sample(SimDuration::from_millis(100));
        close(t.timeout(), 0.1375 * 17.0 / 16.0);
        // 200 ms: n = 0.1, sa = 0.9, sd = 0.075 + 0.1 - 0.075/4 = 0.15625,
        // timeout (0.225 + 0.15625) / 2 * 17/16.
        t.sample(SimDuration::from_millis(200));
        let expected = (0.225 + 0.15625) / 2.0 * 17.0 / 16.0;
        close(t.timeout(), expected);
        // A zero sample (all of it retry time) is ignored.
        t.sample(SimDuration::ZERO);
        close(t.timeout(), expected);
        // Back-off: an eighth more for a segment sent once, doubled after.
        t.back_off(false);
        close(t.timeout(), expected * 9.0 / 8.0);
        t.back_off(true);
        close(t.timeout(), expected * 9.0 / 4.0);
        assert!(t.expired(ms(0), ms(1000)));
        assert!(!t.expired(ms(900), ms(1000)));
    }

    fn fine(on: bool) -> Vegas {
        let config = VegasNs2Config {
            fine_retransmit: on,
            ..VegasNs2Config::default()
        };
        let mut v = Vegas::new(config.vegas(), MSS);
        // 100 ms first sample: v_timeout_ 146 ms.
        v.on_rtt_sample(ms(0), &sample(100));
        v.on_ack(ms(100), &ack(8000, 0, 8000, 8000));
        v
    }

    /// The `n`th duplicate ACK with the first unacknowledged segment last
    /// sent at `sent_ms`, `transmissions` times so far.
    fn dup_at(n: u32, sent_ms: u64, transmissions: u32) -> AckEvent {
        AckEvent {
            first_unacked: Some(SentSegment {
                last_sent: ms(sent_ms),
                transmissions,
            }),
            ..dup(n, 8000, 10_000, 18_000)
        }
    }

    fn set_window(v: &mut Vegas, segments: usize) {
        let mut w = VegasNs2Config::default().window;
        w.max_window = None;
        *v = Vegas::new(
            VegasConfig {
                window: w,
                ..v.config()
            },
            MSS,
        );
        v.on_rtt_sample(ms(0), &sample(100));
        v.set_window_for_test(segments * MSS);
    }

    #[test]
    fn an_old_segment_is_resent_on_the_first_duplicate_and_the_window_cut_by_a_quarter() {
        let mut v = fine(true);
        set_window(&mut v, 8);
        // Sent 100 ms ago, within v_timeout_ (146 ms): wait.
        let a = v.on_duplicate_ack(ms(1000), &dup_at(1, 900, 1));
        assert_eq!(a, RecoveryAction::None);
        assert_eq!(v.window(), 8 * MSS);
        // 200 ms ago: resent now, the window cut to 8 - 8/4 = 6 and
        // inflated by the 2 duplicates so far.
        let a = v.on_duplicate_ack(ms(1100), &dup_at(2, 900, 1));
        assert_eq!(a, RecoveryAction::RetransmitFirstUnacked);
        assert_eq!(v.window(), 8 * MSS);
        // Counted as the third duplicate since: the next inflates, the
        // resent segment being fresh.
        let a = v.on_duplicate_ack(ms(1150), &dup_at(3, 1100, 2));
        assert_eq!(a, RecoveryAction::None);
        assert_eq!(v.window(), 9 * MSS);
        // The next new ACK deflates to the cut window and ends slow start;
        // the segment after it has waited too, so it goes at once.
        let next = AckEvent {
            first_unacked: Some(SentSegment {
                last_sent: ms(950),
                transmissions: 1,
            }),
            ..ack(1000, 7000, 11_000, 18_000)
        };
        let a = v.on_ack(ms(1200), &next);
        assert_eq!(a, RecoveryAction::RetransmitFirstUnacked);
        assert_eq!(v.window(), 6 * MSS);
        assert_eq!(v.metrics().ssthresh, 2 * MSS);
    }

    #[test]
    fn without_the_switch_the_first_duplicates_wait_for_the_third() {
        let mut v = fine(false);
        for n in 1..=2 {
            let a = v.on_duplicate_ack(ms(1100), &dup_at(n, 900, 1));
            assert_eq!(a, RecoveryAction::None);
        }
        let a = v.on_duplicate_ack(ms(1100), &dup_at(3, 900, 1));
        assert_eq!(a, RecoveryAction::FastRetransmit);
    }

    #[test]
    fn the_third_duplicate_resends_whatever_the_age_and_a_resent_segment_halves() {
        let mut v = fine(true);
        set_window(&mut v, 8);
        for n in 1..=2 {
            let a = v.on_duplicate_ack(ms(1000), &dup_at(n, 990, 1));
            assert_eq!(a, RecoveryAction::None);
        }
        let a = v.on_duplicate_ack(ms(1000), &dup_at(3, 990, 1));
        assert_eq!(a, RecoveryAction::RetransmitFirstUnacked);
        // 8 - 2, plus 3 duplicates.
        assert_eq!(v.window(), 9 * MSS);
        // A segment sent twice whose wait expires, sent after the last
        // cut: halved, from the inflated 9 (ns-2 cuts cwnd as it is).
        let a = v.on_duplicate_ack(ms(2000), &dup_at(4, 1500, 2));
        assert_eq!(a, RecoveryAction::RetransmitFirstUnacked);
        assert_eq!(v.window(), (9 / 2 + 4) * MSS);
        // Expired again but sent before that cut: resent, no new cut.
        let before = v.window();
        let a = v.on_duplicate_ack(ms(5000), &dup_at(5, 1900, 3));
        assert_eq!(a, RecoveryAction::RetransmitFirstUnacked);
        assert_eq!(v.window(), before);
    }

    #[test]
    fn after_a_timeout_duplicates_resend_only_past_what_was_sent() {
        let mut v = fine(true);
        set_window(&mut v, 8);
        v.on_timeout(ms(1000), &ack(0, 8000, 10_000, 18_000));
        assert_eq!(v.window(), 2 * MSS, "ns-2's v_slowstart_");
        for n in 1..=3 {
            let a = v.on_duplicate_ack(ms(3000), &dup_at(n, 1000, 2));
            assert_eq!(a, RecoveryAction::None);
        }
        // Past the 18 000 sent at the timeout: its rules apply again.
        let later = AckEvent {
            first_unacked: Some(SentSegment {
                last_sent: ms(2000),
                transmissions: 1,
            }),
            ..dup(1, 8000, 18_001, 26_000)
        };
        let a = v.on_duplicate_ack(ms(3000), &later);
        assert_eq!(a, RecoveryAction::RetransmitFirstUnacked);
    }

    #[test]
    fn defaults_are_ns2s() {
        let v = VegasNs2Config::default().vegas();
        assert_eq!((v.alpha, v.beta, v.gamma), (1.0, 3.0, 1.0));
        assert_eq!(v.round_rtt, RoundRtt::Mean);
        assert_eq!(v.slow_start_exit, SlowStartExit::Eighth);
        assert_eq!(v.queue_estimate, QueueEstimate::Ns2);
        assert_eq!(v.window.initial_window, InitialWindow::Segments(2));
        assert!(v.fine_retransmit);
    }
}
