//! ns-2.35's Vegas loss handling (`tcp/tcp-vegas.cc`): its fine-grained
//! retransmission timer `v_timeout_` and the retransmissions and window
//! cuts it drives on duplicate and new ACKs, as
//! [`super::vegas_ns2`]'s `fine_retransmit` describes. Kept apart from
//! both Vegas modules, which use it, so neither imports the other's
//! internals both ways.

use rtolab_time::{SimDuration, SimTime};

use super::reno::RenoCore;
use super::{AckEvent, RecoveryAction};

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
/// state [`super::vegas::Vegas`] keeps when
/// [`super::vegas::VegasConfig::fine_retransmit`] is on.
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
