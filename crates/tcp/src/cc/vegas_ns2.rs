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
//!   the previous decision) the mean of the samples since then, or, when
//!   there were none, the time since then; `BaseRTT` the smallest sample or
//!   round mean seen;
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
//!   packets (`window_`) of the `ns2` profile's 960-byte MSS.
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

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::reno::{RenoConfig, RenoCore};
use super::vegas::{QueueEstimate, RoundRtt, SlowStartExit, Vegas, VegasConfig};
use super::{AckEvent, CcContext, CcFactory, CongestionControl, InitialWindow, RecoveryAction};

/// ns-2's `window_`, 20 packets, in bytes of the `ns2` profile's MSS (960
/// bytes, 1000-byte packets).
pub const NS2_WINDOW: usize = 20 * 960;

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

/// ns-2's fine-grained retransmission timeout `v_timeout_`, in seconds as
/// ns-2 keeps it: `sa` is eight times the smoothed RTT and `sd` four times
/// its mean deviation (Jacobson's scaled estimators).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FineTimer {
    sa: f64,
    sd: f64,
    timeout: f64,
}

impl FineTimer {
    /// Started from the first RTT (ns-2: at the first ACK, the time since
    /// the first segment was sent): smoothed RTT that sample, deviation a
    /// quarter of it, timeout 1.5 times it. ns-2 then also feeds that
    /// ACK's sample to [`FineTimer::sample`].
    pub fn first(rtt: SimDuration) -> Self {
        let rtt = rtt.as_secs_f64();
        let (sa, sd) = (rtt * 8.0, rtt);
        FineTimer {
            sa,
            sd,
            timeout: (sa / 4.0 + sd) / 2.0,
        }
    }

    /// One RTT sample (none of zero, as ns-2): `srtt + 2 rttvar`, then a
    /// sixteenth more.
    pub fn sample(&mut self, rtt: SimDuration) {
        let rtt = rtt.as_secs_f64();
        if rtt <= 0.0 {
            return;
        }
        let n = rtt - self.sa / 8.0;
        self.sa += n;
        self.sd += n.abs() - self.sd / 4.0;
        self.timeout = (self.sa / 4.0 + self.sd) / 2.0;
        self.timeout += self.timeout / 16.0;
    }

    /// After a retransmission on a duplicate ACK: doubled when the segment
    /// had been sent more than once, else an eighth more.
    pub fn back_off(&mut self, sent_again: bool) {
        if sent_again {
            self.timeout *= 2.0;
        } else {
            self.timeout += self.timeout / 8.0;
        }
    }

    /// `v_timeout_`.
    pub fn timeout(&self) -> SimDuration {
        SimDuration::from_secs_f64(self.timeout)
    }

    /// Whether a segment last sent at `sent` has waited `v_timeout_` by
    /// `now` (ns-2's `vegas_expire`).
    pub fn expired(&self, sent: SimTime, now: SimTime) -> bool {
        now.saturating_since(sent).as_secs_f64() >= self.timeout
    }
}

/// ns-2's Vegas loss handling (`VegasTcpAgent::recv` and `timeout`), the
/// state [`Vegas`] keeps when [`VegasConfig::fine_retransmit`] is on.
#[derive(Clone, Debug, Default)]
pub struct Ns2LossRecovery {
    /// `v_timeout_`, from the first RTT sample on.
    timer: Option<FineTimer>,
    /// ns-2's `dupacks_`, which its rules set as well as count.
    dupacks: u32,
    /// New ACKs still to check for another expired segment (`v_worried_`).
    worried: u32,
    /// When the window was last cut (`t_cwnd_changed_`).
    cut_at: SimTime,
    /// The cut window, the inflation's floor (`v_newcwnd_`), in bytes.
    cut_window: usize,
    /// `recover_` and whether the last action was a timeout (`bug_fix_`).
    recover: u64,
    after_timeout: bool,
}

impl Ns2LossRecovery {
    /// An RTT sample Karn's rule allows, corrected.
    pub(super) fn sample(&mut self, rtt: SimDuration) {
        self.timer
            .get_or_insert_with(|| FineTimer::first(rtt))
            .sample(rtt);
    }

    fn expired(&self, ack: &AckEvent, now: SimTime) -> bool {
        match (self.timer, ack.first_unacked) {
            (Some(t), Some(first)) => t.expired(first.last_sent, now),
            _ => false,
        }
    }

    /// A duplicate ACK.
    pub(super) fn duplicate(
        &mut self,
        core: &mut RenoCore,
        now: SimTime,
        ack: &AckEvent,
    ) -> RecoveryAction {
        let threshold = core.config.dup_threshold;
        self.dupacks += 1;
        let Some(first) = ack.first_unacked else {
            return RecoveryAction::None;
        };
        if !self.expired(ack, now) && self.dupacks != threshold {
            if self.dupacks > threshold {
                core.cwnd += core.mss;
            }
            return RecoveryAction::None;
        }
        if self.after_timeout && ack.acked_to <= self.recover {
            return RecoveryAction::None;
        }
        self.after_timeout = false;
        self.recover = ack.highest_sent;
        // ns-2: min(2, t_seqno_ - last_ack_), which is 2 whenever a
        // duplicate ACK finds a segment outstanding.
        self.worried = 2;
        let sent_again = first.transmissions > 1;
        if let Some(timer) = self.timer.as_mut() {
            timer.back_off(sent_again);
        }
        if self.cut_at < first.last_sent {
            let mss = core.mss;
            let win = core.cwnd / mss;
            let win = if win <= 3 {
                2
            } else if sent_again {
                win / 2
            } else {
                win - win / 4
            };
            self.cut_window = win * mss;
            core.cwnd = self.cut_window + self.dupacks as usize * mss;
            self.cut_at = now;
        }
        if !sent_again {
            self.dupacks = threshold;
        }
        RecoveryAction::RetransmitFirstUnacked
    }

    /// A new cumulative ACK, before Vegas's own adjustment: the inflation
    /// goes.
    pub(super) fn deflate(&mut self, core: &mut RenoCore) {
        if self.dupacks > core.config.dup_threshold && core.cwnd > self.cut_window {
            core.cwnd = self.cut_window;
            // ns-2's Vegas uses ssthresh only to tell slow start.
            core.ssthresh = 2 * core.mss;
        }
        self.dupacks = 0;
    }

    /// A new cumulative ACK, after Vegas's adjustment: the next segment
    /// is resent at once if it has waited too, on the first two after a
    /// retransmission.
    pub(super) fn after_new_ack(
        &mut self,
        core: &RenoCore,
        now: SimTime,
        ack: &AckEvent,
    ) -> RecoveryAction {
        if self.worried == 0 {
            return RecoveryAction::None;
        }
        self.worried -= 1;
        if self.expired(ack, now) {
            self.dupacks = core.config.dup_threshold;
            return RecoveryAction::RetransmitFirstUnacked;
        }
        self.worried = 0;
        RecoveryAction::None
    }

    /// The coarse timer expired: the window restarts at 2 segments.
    pub(super) fn timeout(&mut self, core: &mut RenoCore, now: SimTime, ack: &AckEvent) {
        self.dupacks = 0;
        self.recover = ack.highest_sent;
        self.after_timeout = true;
        self.cut_window = 0;
        self.cut_at = now;
        core.cwnd = 2 * core.mss;
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
    use crate::cc::test_util::{ack, dup, MSS};
    use crate::cc::SentSegment;
    use crate::rto::test_util::sample;

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
