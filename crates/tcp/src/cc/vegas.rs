//! TCP Vegas (L. Brakmo and L. Peterson, "TCP Vegas: End to End Congestion
//! Avoidance on a Global Internet", IEEE JSAC 13(8), 1995).
//!
//! Once per round trip Vegas compares the expected rate `cwnd / BaseRTT`
//! with the actual rate `cwnd / RTT` and turns the difference into an
//! estimate of its own segments queued in the network:
//! `diff = cwnd/MSS * (RTT - BaseRTT) / RTT`. In congestion avoidance it adds
//! one segment when `diff < alpha` and removes one when `diff > beta`. Slow
//! start doubles the window every other round trip and ends when
//! `diff > gamma`. `BaseRTT` is the smallest RTT seen; `RTT` is the smallest
//! sample of the last round trip (`round_rtt = "min"`, as Linux does) or
//! their mean (`"mean"`, as ns-2 does, [`super::vegas_ns2`]). Every sample of
//! a data segment is used, after its correction (timelost) is removed; the
//! handshake's is not (Linux starts Vegas once the connection is
//! established, ns-2's agents have no handshake), since a SYN's round trip
//! on a slow link is shorter than any data segment's and would stand as
//! `BaseRTT` for the whole connection. A round trip ends at the first ACK
//! that covers data sent after the previous decision (Linux's
//! `after(ack, beg_snd_nxt)`, ns-2's `seqno >= v_begseq_`). Loss handling is
//! NewReno's, or ns-2's with `fine_retransmit` ([`super::vegas_ns2`]).

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::ns2_loss_recovery::Ns2LossRecovery;
use super::reno::{RenoConfig, RenoCore};
use super::{
    AckEvent, CcContext, CcFactory, CcMetrics, CongestionControl, RecoveryAction, SpuriousTimeout,
};
use crate::rto::RttSample;

/// Which RTT of the last round trip Vegas compares with `BaseRTT`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundRtt {
    /// The smallest sample (Linux's `tcp_vegas`).
    #[default]
    Min,
    /// The mean of the samples (ns-2's `Agent/TCP/Vegas`); a round without
    /// samples counts the time since it began, as ns-2 does.
    Mean,
}

/// How Vegas leaves slow start once `diff > gamma`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlowStartExit {
    /// To the window the path sustains plus one segment
    /// (`cwnd * BaseRTT / RTT + 1`).
    #[default]
    Target,
    /// ns-2's: considered only at the decisions that begin a growing
    /// round trip (every other one), then one eighth off the window
    /// (`cwnd -= cwnd / 8`).
    Eighth,
}

/// How Vegas turns the round's RTT into segments queued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueEstimate {
    /// `cwnd/MSS * (RTT - BaseRTT) / RTT`, a real number (Brakmo and
    /// Peterson; Linux's `tcp_vegas`).
    #[default]
    Window,
    /// ns-2.35's `tcp-vegas.cc`: the segments sent in the round, less
    /// them scaled by `BaseRTT / RTT`, rounded to a whole segment
    /// (`int(x + 0.5)`): what the window was, not what it is. As there,
    /// `BaseRTT` also takes the round's RTT when that is smaller or when
    /// at most one segment was sent in the round, and the sample of the
    /// ACK that ends a round counts in the next one (ns-2 takes it after
    /// deciding).
    Ns2,
}

impl QueueEstimate {
    fn is_window(&self) -> bool {
        *self == QueueEstimate::Window
    }
}

/// Parameters of Vegas; thresholds are in segments.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct VegasConfig {
    /// Grow when fewer than `alpha` segments are queued.
    pub alpha: f64,
    /// Shrink when more than `beta` segments are queued.
    pub beta: f64,
    /// Leave slow start when more than `gamma` segments are queued.
    pub gamma: f64,
    /// The round's RTT: its smallest sample or their mean.
    pub round_rtt: RoundRtt,
    /// What leaving slow start does to the window.
    pub slow_start_exit: SlowStartExit,
    /// How the queue is estimated; written out only when not the default,
    /// so run records that predate it read the same.
    #[serde(skip_serializing_if = "QueueEstimate::is_window")]
    pub queue_estimate: QueueEstimate,
    /// ns-2's loss handling (its fine-grained retransmission timer and
    /// window cut on duplicate ACKs, [`super::ns2_loss_recovery::Ns2LossRecovery`])
    /// instead of NewReno's; written out only when on, as above.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fine_retransmit: bool,
    /// Window parameters shared with Reno (initial window, cap, ...).
    pub window: RenoConfig,
}

impl Default for VegasConfig {
    fn default() -> Self {
        VegasConfig {
            alpha: 2.0,
            beta: 4.0,
            gamma: 1.0,
            round_rtt: RoundRtt::Min,
            slow_start_exit: SlowStartExit::Target,
            queue_estimate: QueueEstimate::Window,
            fine_retransmit: false,
            window: RenoConfig::default(),
        }
    }
}

impl CcFactory for VegasConfig {
    fn name(&self) -> &'static str {
        "vegas"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(Vegas::new(*self, ctx.mss))
    }
}

/// Per-connection Vegas state.
#[derive(Clone, Debug)]
pub struct Vegas {
    config: VegasConfig,
    core: RenoCore,
    base_rtt: Option<SimDuration>,
    round_min_rtt: Option<SimDuration>,
    /// Sum and count of the round's samples (`RoundRtt::Mean`).
    round_sum: SimDuration,
    round_count: u32,
    /// When the round began (`RoundRtt::Mean` without samples).
    round_start: SimTime,
    /// The round trip ends when an ACK passes this offset.
    round_end: u64,
    /// This ACK's sample, taken in at [`CongestionControl::on_ack`]: a
    /// sample that no ACK of data follows (the handshake's) is dropped, and
    /// ns-2's estimate takes it after deciding.
    pending_sample: Option<SimDuration>,
    slow_start: bool,
    /// `slow_start` before the last timeout, for the Eifel response.
    slow_start_before_timeout: bool,
    /// Slow start grows only in every other round trip.
    grow_this_round: bool,
    diff: Option<f64>,
    /// ns-2's loss handling, when `fine_retransmit` is on.
    ns2_loss: Option<Ns2LossRecovery>,
}

impl Vegas {
    /// Fresh state.
    pub fn new(config: VegasConfig, mss: usize) -> Self {
        Vegas {
            config,
            core: RenoCore::new(config.window, mss, true),
            base_rtt: None,
            round_min_rtt: None,
            round_sum: SimDuration::ZERO,
            round_count: 0,
            round_start: SimTime::ZERO,
            round_end: 0,
            pending_sample: None,
            slow_start: true,
            slow_start_before_timeout: true,
            grow_this_round: true,
            diff: None,
            ns2_loss: config.fine_retransmit.then(Ns2LossRecovery::default),
        }
    }

    /// Estimated segments queued at the last adjustment.
    pub fn queue_estimate(&self) -> Option<f64> {
        self.diff
    }

    /// Its configuration.
    pub fn config(&self) -> VegasConfig {
        self.config
    }

    /// A window in congestion avoidance, and no round ending, so that
    /// loss handling is seen alone.
    #[cfg(test)]
    pub(super) fn set_window_for_test(&mut self, bytes: usize) {
        self.core.cwnd = bytes;
        self.slow_start = false;
        self.round_end = u64::MAX;
    }

    /// The round's RTT by [`VegasConfig::round_rtt`], and the next
    /// round's state started.
    fn take_round_rtt(&mut self, now: SimTime) -> Option<SimDuration> {
        let min = self.round_min_rtt.take();
        let (sum, count) = (self.round_sum, self.round_count);
        let started = self.round_start;
        self.round_sum = SimDuration::ZERO;
        self.round_count = 0;
        self.round_start = now;
        match self.config.round_rtt {
            RoundRtt::Min => min,
            RoundRtt::Mean if count > 0 => {
                Some(SimDuration::from_nanos(sum.as_nanos() / u64::from(count)))
            }
            // ns-2: without samples, the round's length stands in.
            RoundRtt::Mean => Some(now.saturating_since(started)),
        }
    }

    /// A sample into `BaseRTT` and the round's.
    fn take_sample(&mut self, rtt: SimDuration) {
        self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt)));
        self.round_min_rtt = Some(self.round_min_rtt.map_or(rtt, |b| b.min(rtt)));
        self.round_sum += rtt;
        self.round_count += 1;
    }

    fn end_of_round(&mut self, now: SimTime, ack: &AckEvent) {
        let round_began_at = std::mem::replace(&mut self.round_end, ack.highest_sent);
        let rtt = self.take_round_rtt(now);
        let Some(rtt) = rtt.filter(|r| !r.is_zero()) else {
            return;
        };
        let mss = self.core.mss as f64;
        if self.config.queue_estimate == QueueEstimate::Ns2 {
            // ns-2: `if (rtt < v_baseRTT_ || rttLen <= 1) v_baseRTT_ = rtt`,
            // with rttLen the segments sent in the round.
            let sent_in_round = ack.highest_sent.saturating_sub(round_began_at);
            if self.base_rtt.map_or(true, |b| rtt < b) || sent_in_round <= self.core.mss as u64 {
                self.base_rtt = Some(rtt);
            }
        }
        let Some(base) = self.base_rtt else {
            return;
        };
        let segments = self.core.cwnd as f64 / mss;
        let base = base.as_nanos() as f64;
        let rtt = rtt.as_nanos() as f64;
        let diff = match self.config.queue_estimate {
            QueueEstimate::Window => segments * (rtt - base) / rtt,
            QueueEstimate::Ns2 => {
                // ns-2's `t_seqno_ - last_ack_` at the decision: the
                // segments sent since the previous one.
                let sent_in_round = ack.highest_sent.saturating_sub(round_began_at) as f64 / mss;
                // ns-2's `int()` truncates toward zero.
                (sent_in_round - sent_in_round * base / rtt + 0.5).trunc()
            }
        };
        self.diff = Some(diff);
        if self.slow_start {
            // ns-2 turns the growth on and off at each decision and
            // considers leaving only where a growing round trip would
            // begin; the other form considers it at every decision.
            let considered = match self.config.slow_start_exit {
                SlowStartExit::Target => true,
                SlowStartExit::Eighth => {
                    self.grow_this_round = !self.grow_this_round;
                    self.grow_this_round
                }
            };
            if considered && diff > self.config.gamma {
                self.slow_start = false;
                self.core.cwnd = match self.config.slow_start_exit {
                    // The window the path sustains plus one.
                    SlowStartExit::Target => {
                        let target = segments * base / rtt;
                        self.core.cwnd.min(((target + 1.0) * mss) as usize)
                    }
                    SlowStartExit::Eighth => self.core.cwnd - self.core.cwnd / 8,
                };
                self.core.ssthresh = self.core.cwnd;
            } else if self.config.slow_start_exit == SlowStartExit::Target {
                self.grow_this_round = !self.grow_this_round;
            }
        } else if diff > self.config.beta {
            self.core.cwnd = self.core.cwnd.saturating_sub(self.core.mss);
        } else if diff < self.config.alpha {
            self.core.cwnd += self.core.mss;
        }
        self.cap();
    }

    fn cap(&mut self) {
        if let Some(max) = self.config.window.max_window {
            self.core.cwnd = self.core.cwnd.min(max);
        }
        self.core.cwnd = self.core.cwnd.max(2 * self.core.mss);
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }
    fn window(&self) -> usize {
        self.core.cwnd
    }
    fn metrics(&self) -> CcMetrics {
        CcMetrics {
            queue_estimate: self.diff,
            ..self.core.base_metrics()
        }
    }
    fn on_ack(&mut self, now: SimTime, ack: &AckEvent) -> RecoveryAction {
        let sample = self.pending_sample.take();
        let sample_after_decision = self.config.queue_estimate == QueueEstimate::Ns2;
        if let Some(rtt) = sample.filter(|_| !sample_after_decision) {
            self.take_sample(rtt);
        }
        if self.core.recovery.is_some() {
            if let Some(rtt) = sample.filter(|_| sample_after_decision) {
                self.take_sample(rtt);
            }
            return self.core.ack(ack, false);
        }
        if let Some(loss) = self.ns2_loss.as_mut() {
            loss.deflate(&mut self.core);
            self.cap();
        }
        if self.slow_start && self.core.cwnd >= self.core.ssthresh {
            self.slow_start = false;
        }
        if self.slow_start && self.grow_this_round {
            self.core.grow(ack.bytes_acked);
        }
        if ack.acked_to > self.round_end {
            self.end_of_round(now, ack);
        }
        if let Some(rtt) = sample.filter(|_| sample_after_decision) {
            self.take_sample(rtt);
        }
        match self.ns2_loss.as_mut() {
            Some(loss) => loss.after_new_ack(&self.core, now, ack),
            None => RecoveryAction::None,
        }
    }
    fn on_duplicate_ack(&mut self, now: SimTime, ack: &AckEvent) -> RecoveryAction {
        let Some(loss) = self.ns2_loss.as_mut() else {
            return self.core.duplicate(ack);
        };
        let action = loss.duplicate(&mut self.core, now, ack);
        self.cap();
        action
    }
    fn on_timeout(&mut self, now: SimTime, ack: &AckEvent) {
        self.core.timeout(ack);
        if let Some(loss) = self.ns2_loss.as_mut() {
            loss.timeout(&mut self.core, now, ack);
        }
        self.slow_start_before_timeout = self.slow_start;
        self.slow_start = true;
        self.grow_this_round = true;
        self.round_end = ack.highest_sent;
        self.round_min_rtt = None;
        self.round_sum = SimDuration::ZERO;
        self.round_count = 0;
        self.round_start = now;
        self.pending_sample = None;
    }
    fn on_rtt_sample(&mut self, _now: SimTime, sample: &RttSample) {
        if !sample.unambiguous() {
            return;
        }
        let rtt = sample.corrected();
        if let Some(loss) = self.ns2_loss.as_mut() {
            loss.sample(rtt);
        }
        self.pending_sample = Some(rtt);
    }
    fn on_spurious_timeout(&mut self, _now: SimTime, undo: &SpuriousTimeout) {
        // Loss handling is NewReno's, and so is undoing it; the phase
        // returns to what it was before the timeout.
        self.core.undo_timeout(undo);
        self.slow_start = self.slow_start_before_timeout;
    }
    fn on_mss(&mut self, mss: usize) {
        self.core.on_mss(mss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_util::{ack, MSS};
    use crate::cc::InitialWindow;
    use crate::rto::test_util::sample;

    const T: SimTime = SimTime::ZERO;

    fn vegas() -> Vegas {
        Vegas::new(
            VegasConfig {
                window: RenoConfig {
                    initial_window: InitialWindow::Segments(10),
                    ..RenoConfig::default()
                },
                ..VegasConfig::default()
            },
            MSS,
        )
    }

    /// One round trip: a sample of `rtt_ms` then an ACK ending the round,
    /// with nothing sent beyond it (so the next ACK ends the next round).
    fn round(v: &mut Vegas, rtt_ms: u64, acked_to: &mut u64) {
        v.on_rtt_sample(T, &sample(rtt_ms));
        *acked_to += 1000;
        v.on_ack(T, &ack(1000, 0, *acked_to, *acked_to));
    }

    #[test]
    fn ns2_estimate_counts_the_round_and_rounds_to_a_segment() {
        let mut v = Vegas::new(
            VegasConfig {
                queue_estimate: QueueEstimate::Ns2,
                ..VegasConfig::default()
            },
            MSS,
        );
        v.base_rtt = Some(SimDuration::from_millis(100));
        v.slow_start = false;
        let window = v.core.cwnd;
        // 10 segments sent in the round, at 125 ms: 10 - 10 * 100/125 = 2,
        // plus 0.5, truncated: 2.
        v.round_end = 10_000;
        // Each round: a sample on an ACK within it, then the ACK that
        // passes what was sent at the previous decision.
        v.on_rtt_sample(T, &sample(125));
        v.on_ack(T, &ack(1000, 5_000, 5_000, 10_000));
        v.on_ack(T, &ack(1000, 10_000, 11_000, 20_000));
        assert_eq!(v.metrics().queue_estimate, Some(2.0));
        assert_eq!(v.core.cwnd, window, "2 is within [alpha, beta]");
        // 150 ms: 10 - 10 * 100/150 = 3.33, plus 0.5: 3, not above beta 4;
        // the window estimate would say 10 * 50/150 = 3.3 too.
        v.on_rtt_sample(T, &sample(150));
        v.on_ack(T, &ack(1000, 5_000, 15_000, 20_000));
        v.on_ack(T, &ack(1000, 19_000, 21_000, 30_000));
        assert_eq!(v.metrics().queue_estimate, Some(3.0));
        // What was sent in the round counts, not the window: 2 sent at
        // 200 ms: 2 - 2 * 100/200 + 0.5 = 1.5 -> 1, below alpha 2, where
        // the window form would say 10 * 100/200 = 5, above beta.
        v.on_rtt_sample(T, &sample(200));
        v.on_ack(T, &ack(1000, 5_000, 25_000, 30_000));
        v.on_ack(T, &ack(1000, 2_000, 31_000, 32_000));
        assert_eq!(v.metrics().queue_estimate, Some(1.0));
        assert_eq!(v.core.cwnd, window + MSS);
    }

    #[test]
    fn leaves_slow_start_when_queue_exceeds_gamma() {
        let mut v = vegas();
        let mut to = 0;
        round(&mut v, 100, &mut to);
        assert!(v.slow_start);
        // One growth ACK made cwnd 11 segments (none this round); 11 segments
        // at 125 ms vs 100 ms base: diff = 11 * 25/125 = 2.2 > gamma.
        round(&mut v, 125, &mut to);
        assert!(!v.slow_start);
        // target = 11 * 100/125 = 8.8 segments, +1 = 9.8 -> 9800 bytes.
        assert_eq!(v.window(), 9800);
        assert_eq!(v.metrics().queue_estimate, Some(2.2));
    }

    #[test]
    fn congestion_avoidance_moves_one_segment_per_round() {
        let mut v = vegas();
        v.slow_start = false;
        v.base_rtt = Some(SimDuration::from_millis(100));
        let mut to = 0;
        // 10 segments, RTT 100 ms: diff 0 < alpha -> +1.
        round(&mut v, 100, &mut to);
        assert_eq!(v.window(), 11_000);
        // 11 segments, RTT 200 ms: diff 5.5 > beta -> -1.
        round(&mut v, 200, &mut to);
        assert_eq!(v.window(), 10_000);
        // 10 segments, RTT 125 ms: diff 2 within [alpha, beta] -> unchanged.
        round(&mut v, 125, &mut to);
        assert_eq!(v.window(), 10_000);
    }

    #[test]
    fn mean_round_rtt_averages_the_samples_of_the_round() {
        let mut v = Vegas::new(
            VegasConfig {
                round_rtt: RoundRtt::Mean,
                ..vegas().config
            },
            MSS,
        );
        v.slow_start = false;
        v.base_rtt = Some(SimDuration::from_millis(100));
        // Samples of 100 and 300 ms: the smallest says no queue, the mean
        // (200 ms) says 10 * 100 / 200 = 5 segments queued > beta.
        v.round_end = 2000;
        v.on_rtt_sample(T, &sample(100));
        v.on_ack(T, &ack(1000, 0, 1000, 2000));
        v.on_rtt_sample(T, &sample(300));
        v.on_ack(T, &ack(1000, 0, 3000, 4000));
        assert_eq!(v.metrics().queue_estimate, Some(5.0));
        assert_eq!(v.window(), 9_000);
        // The minimum would have grown the window instead.
        let mut m = vegas();
        m.slow_start = false;
        m.base_rtt = Some(SimDuration::from_millis(100));
        m.round_end = 2000;
        m.on_rtt_sample(T, &sample(100));
        m.on_ack(T, &ack(1000, 0, 1000, 2000));
        m.on_rtt_sample(T, &sample(300));
        m.on_ack(T, &ack(1000, 0, 3000, 4000));
        assert_eq!(m.metrics().queue_estimate, Some(0.0));
        assert_eq!(m.window(), 11_000);
    }

    #[test]
    fn mean_round_without_samples_counts_the_round_length() {
        let mut v = Vegas::new(
            VegasConfig {
                round_rtt: RoundRtt::Mean,
                ..vegas().config
            },
            MSS,
        );
        v.slow_start = false;
        v.base_rtt = Some(SimDuration::from_millis(100));
        // The round began at 0 and ends at 400 ms without a sample:
        // 10 * 300 / 400 = 7.5 segments queued.
        v.on_ack(SimTime::from_millis(400), &ack(1000, 0, 1000, 2000));
        assert_eq!(v.metrics().queue_estimate, Some(7.5));
    }

    fn eighth_exit_vegas() -> Vegas {
        Vegas::new(
            VegasConfig {
                slow_start_exit: SlowStartExit::Eighth,
                ..vegas().config
            },
            MSS,
        )
    }

    #[test]
    fn eighth_exit_takes_an_eighth_off_the_window() {
        let mut v = eighth_exit_vegas();
        let mut to = 0;
        round(&mut v, 100, &mut to);
        // 11 segments, 125 ms against 100: diff 2.2 > gamma; 11000 - 1375.
        round(&mut v, 125, &mut to);
        assert!(!v.slow_start);
        assert_eq!(v.window(), 9625);
    }

    #[test]
    fn eighth_exit_is_considered_only_where_growth_would_begin() {
        let mut v = eighth_exit_vegas();
        let mut to = 0;
        // Decisions turn growth off, on, off, on: only the second and the
        // fourth consider leaving.
        round(&mut v, 100, &mut to);
        round(&mut v, 100, &mut to);
        // Off: not considered, however large the queue.
        round(&mut v, 200, &mut to);
        assert!(v.slow_start);
        // On: considered, and about 5 segments are queued, above gamma.
        round(&mut v, 200, &mut to);
        assert!(!v.slow_start);
    }

    #[test]
    fn uses_corrected_samples() {
        let mut v = vegas();
        let mut s = sample(300);
        s.correction = Some(SimDuration::from_millis(200));
        v.on_rtt_sample(T, &s);
        v.on_ack(T, &ack(1000, 0, 1000, 1000));
        assert_eq!(v.base_rtt, Some(SimDuration::from_millis(100)));
    }

    #[test]
    fn the_handshake_sample_is_not_base_rtt() {
        let mut v = vegas();
        // The SYN's round trip: no ACK of data follows its sample.
        v.on_rtt_sample(T, &sample(10));
        let mut to = 0;
        round(&mut v, 100, &mut to);
        assert_eq!(v.base_rtt, Some(SimDuration::from_millis(100)));
        // So the first round sees no queue and slow start goes on.
        assert_eq!(v.metrics().queue_estimate, Some(0.0));
        assert!(v.slow_start);
    }

    #[test]
    fn a_round_ends_only_when_an_ack_passes_what_was_sent() {
        let mut v = vegas();
        v.slow_start = false;
        v.base_rtt = Some(SimDuration::from_millis(100));
        v.round_end = 10_000;
        // The ACK of exactly what was sent at the last decision is still
        // in the round (Linux: `after(ack, beg_snd_nxt)`).
        v.on_rtt_sample(T, &sample(200));
        v.on_ack(T, &ack(1000, 0, 10_000, 12_000));
        assert_eq!(v.metrics().queue_estimate, None);
        assert_eq!(v.window(), 10_000);
        // The next one passes it: 10 segments at 200 ms, 5 queued > beta.
        v.on_ack(T, &ack(1000, 0, 11_000, 12_000));
        assert_eq!(v.metrics().queue_estimate, Some(5.0));
        assert_eq!(v.window(), 9_000);
    }

    fn ns2_estimate_vegas() -> Vegas {
        let mut v = Vegas::new(
            VegasConfig {
                round_rtt: RoundRtt::Mean,
                queue_estimate: QueueEstimate::Ns2,
                ..vegas().config
            },
            MSS,
        );
        v.slow_start = false;
        v.base_rtt = Some(SimDuration::from_millis(100));
        v
    }

    #[test]
    fn ns2_estimate_counts_the_round_ending_sample_in_the_next_round() {
        let mut v = ns2_estimate_vegas();
        v.round_end = 10_000;
        v.on_rtt_sample(T, &sample(100));
        v.on_ack(T, &ack(1000, 0, 5_000, 10_000));
        // The ending ACK's 300 ms sample is not in this round's mean:
        // 10 - 10 * 100/100 + 0.5 -> 0.
        v.on_rtt_sample(T, &sample(300));
        v.on_ack(T, &ack(1000, 0, 11_000, 20_000));
        assert_eq!(v.metrics().queue_estimate, Some(0.0));
        // It is the next round's: 10 - 10 * 100/300 + 0.5 = 7.17 -> 7.
        v.on_ack(T, &ack(1000, 0, 21_000, 30_000));
        assert_eq!(v.metrics().queue_estimate, Some(7.0));
    }

    #[test]
    fn ns2_estimate_takes_base_rtt_from_a_round_of_one_segment() {
        let mut v = ns2_estimate_vegas();
        v.round_end = 10_000;
        v.on_rtt_sample(T, &sample(150));
        v.on_ack(T, &ack(1000, 0, 10_000, 10_000));
        // One segment sent in the round: its mean becomes BaseRTT even
        // though it is larger (ns-2's `rttLen <= 1`).
        v.on_ack(T, &ack(1000, 0, 11_000, 11_000));
        assert_eq!(v.base_rtt, Some(SimDuration::from_millis(150)));
        assert_eq!(v.metrics().queue_estimate, Some(0.0));
    }
}
