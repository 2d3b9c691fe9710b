//! Reno congestion control, RFC 5681 (slow start, congestion avoidance,
//! fast retransmit and fast recovery), with the byte counting of RFC 3465.
//!
//! The window logic here is shared with [`super::newreno`], which differs
//! only in how recovery ends (RFC 6582) and with [`super::vegas`], which
//! replaces the growth rule.

use rtolab_time::SimTime;
use serde::{Deserialize, Serialize};

use super::{
    AckEvent, CcContext, CcFactory, CcMetrics, CongestionControl, InitialWindow, RecoveryAction,
    SpuriousTimeout,
};

/// RFC 5681 §3.2: fast retransmit after the third duplicate ACK.
pub const DUP_THRESHOLD: u32 = 3;

/// Parameters shared by Reno and NewReno.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RenoConfig {
    /// Initial window (RFC 5681 §3.1 by default).
    pub initial_window: InitialWindow,
    /// Initial slow-start threshold in bytes; `None` is "arbitrarily high"
    /// (RFC 5681 §3.1).
    pub initial_ssthresh: Option<usize>,
    /// Cap on the congestion window in bytes (lwIP's window limit).
    pub max_window: Option<usize>,
    /// Duplicate ACKs that trigger a fast retransmit.
    pub dup_threshold: u32,
    /// RFC 3465 limit L: slow start grows by at most `L * MSS` per ACK.
    pub abc_limit: u32,
    /// Reno only (NewReno always is): no new fast retransmit until the
    /// cumulative ACK covers what was sent when the last one or the last
    /// timeout happened (RFC 6582 §4.1's careful variant, ns-2's
    /// `bugFix_`), so duplicates of a go-back-N resend do not halve the
    /// window again.
    #[serde(default)]
    pub careful: bool,
    /// How congestion avoidance grows the window. Left out of the
    /// serialized form when it is the default, which keeps the forms of
    /// profiles and run records from before it unchanged.
    #[serde(skip_serializing_if = "CaIncrease::is_byte_counting")]
    pub ca_increase: CaIncrease,
}

/// Congestion avoidance's growth rule (RFC 5681 §3.1 allows both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaIncrease {
    /// One SMSS per window of bytes acknowledged (byte counting, RFC 3465).
    #[default]
    ByteCounting,
    /// `cwnd += SMSS * SMSS / cwnd` on every ACK of new data, however much
    /// it acknowledges (RFC 5681 (3)); ns-2.35's `Agent/TCP` grows its
    /// window so (`opencwnd`, `wnd_option_ 1`).
    PerAck,
}

impl CaIncrease {
    fn is_byte_counting(&self) -> bool {
        *self == CaIncrease::ByteCounting
    }
}

impl Default for RenoConfig {
    fn default() -> Self {
        RenoConfig {
            initial_window: InitialWindow::Rfc5681,
            initial_ssthresh: None,
            max_window: None,
            dup_threshold: DUP_THRESHOLD,
            abc_limit: 2,
            ca_increase: CaIncrease::ByteCounting,
            careful: false,
        }
    }
}

impl CcFactory for RenoConfig {
    fn name(&self) -> &'static str {
        "reno"
    }
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl> {
        Box::new(RenoCore::new(*self, ctx.mss, false))
    }
}

/// Window state of Reno and NewReno.
#[derive(Clone, Debug)]
pub struct RenoCore {
    pub(crate) config: RenoConfig,
    pub(crate) mss: usize,
    pub(crate) cwnd: usize,
    pub(crate) ssthresh: usize,
    /// Bytes acknowledged in congestion avoidance since the last increase.
    bytes_acked: usize,
    /// `Some(highest offset sent when recovery began)` while in fast
    /// recovery.
    pub(crate) recovery: Option<u64>,
    /// RFC 6582 `recover`, kept after recovery ends; `None` for plain
    /// Reno unless [`RenoConfig::careful`].
    recover: Option<u64>,
    newreno: bool,
}

impl RenoCore {
    /// Fresh state; `newreno` selects RFC 6582 recovery.
    pub fn new(config: RenoConfig, mss: usize, newreno: bool) -> Self {
        RenoCore {
            config,
            mss,
            cwnd: config.initial_window.bytes(mss),
            ssthresh: config.initial_ssthresh.unwrap_or(usize::MAX),
            bytes_acked: 0,
            recovery: None,
            recover: (newreno || config.careful).then_some(0),
            newreno,
        }
    }

    fn cap(&mut self) {
        if let Some(max) = self.config.max_window {
            self.cwnd = self.cwnd.min(max);
        }
        self.cwnd = self.cwnd.max(self.mss);
    }

    /// RFC 5681 (4): `ssthresh = max(FlightSize / 2, 2 * SMSS)`.
    fn halve(&mut self, in_flight: usize) {
        self.ssthresh = (in_flight / 2).max(2 * self.mss);
    }

    /// Slow start and congestion avoidance for an ACK outside recovery.
    pub(crate) fn grow(&mut self, bytes_acked: usize) {
        if self.cwnd < self.ssthresh {
            // RFC 5681 (2) with RFC 3465's limit L.
            let limit = self.config.abc_limit.max(1) as usize * self.mss;
            self.cwnd = self.cwnd.saturating_add(bytes_acked.min(limit));
        } else if self.config.ca_increase == CaIncrease::PerAck {
            // RFC 5681 (3), at least one byte per ACK.
            let increase = (self.mss * self.mss / self.cwnd.max(1)).max(1);
            self.cwnd = self.cwnd.saturating_add(increase);
        } else {
            // RFC 5681 (3), byte counting: one SMSS per window of ACKed bytes.
            self.bytes_acked += bytes_acked;
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.mss);
            }
        }
        self.cap();
    }

    /// ACK of new data; `grow` is false when a subclass handles growth.
    pub(crate) fn ack(&mut self, ack: &AckEvent, grow: bool) -> RecoveryAction {
        let Some(recover) = self.recovery else {
            if grow {
                self.grow(ack.bytes_acked);
            }
            return RecoveryAction::None;
        };
        if self.newreno && ack.acked_to < recover {
            // RFC 6582 (3) partial ACK: deflate by the amount ACKed, add back
            // one SMSS if at least that much was ACKed, retransmit the next
            // hole.
            self.cwnd = self.cwnd.saturating_sub(ack.bytes_acked);
            if ack.bytes_acked >= self.mss {
                self.cwnd += self.mss;
            }
            self.cap();
            return RecoveryAction::RetransmitFirstUnacked;
        }
        self.recovery = None;
        self.bytes_acked = 0;
        self.cwnd = if self.newreno {
            // RFC 6582 (3) full ACK, option 1:
            // min(ssthresh, max(FlightSize, SMSS) + SMSS).
            self.ssthresh.min(ack.in_flight.max(self.mss) + self.mss)
        } else {
            // RFC 5681 §3.2 (6): deflate the window to ssthresh.
            self.ssthresh
        };
        self.cap();
        RecoveryAction::None
    }

    pub(crate) fn duplicate(&mut self, ack: &AckEvent) -> RecoveryAction {
        if self.recovery.is_some() {
            // RFC 5681 §3.2 (4): inflate by one SMSS per duplicate.
            self.cwnd = self.cwnd.saturating_add(self.mss);
            return RecoveryAction::None;
        }
        if ack.duplicates != self.config.dup_threshold && !ack.sack_lost {
            return RecoveryAction::None;
        }
        if let Some(recover) = self.recover {
            // RFC 6582 (2): no new recovery unless the cumulative ACK
            // covers more than `recover`.
            if ack.acked_to < recover {
                return RecoveryAction::None;
            }
        }
        // RFC 5681 §3.2 (2)-(3).
        self.halve(ack.in_flight);
        self.cwnd = self.ssthresh + 3 * self.mss;
        self.recovery = Some(ack.highest_sent);
        if self.recover.is_some() {
            self.recover = Some(ack.highest_sent);
        }
        self.cap();
        RecoveryAction::FastRetransmit
    }

    pub(crate) fn timeout(&mut self, ack: &AckEvent) {
        // RFC 5681 (4) and §3.1: loss window of one segment.
        self.halve(ack.in_flight);
        self.cwnd = self.mss;
        self.bytes_acked = 0;
        self.recovery = None;
        if self.recover.is_some() {
            // RFC 6582 §3.2 (4): after a timeout, recover = highest sent.
            self.recover = Some(ack.highest_sent);
        }
    }

    /// RFC 4015 §3 step 6: `cwnd = FlightSize + min(bytes_acked, IW)`,
    /// which restores sending without a burst, and `ssthresh = pipe_prev`.
    pub(crate) fn undo_timeout(&mut self, undo: &SpuriousTimeout) {
        let iw = self.config.initial_window.bytes(self.mss);
        self.cwnd = undo.in_flight + undo.bytes_acked.min(iw);
        self.ssthresh = undo.pipe_prev.max(2 * self.mss);
        self.bytes_acked = 0;
        self.recovery = None;
        self.cap();
    }

    pub(crate) fn base_metrics(&self) -> CcMetrics {
        CcMetrics {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            in_recovery: self.recovery.is_some(),
            queue_estimate: None,
        }
    }
}

impl CongestionControl for RenoCore {
    fn name(&self) -> &'static str {
        if self.newreno {
            "newreno"
        } else {
            "reno"
        }
    }
    fn window(&self) -> usize {
        self.cwnd
    }
    fn metrics(&self) -> CcMetrics {
        self.base_metrics()
    }
    fn on_ack(&mut self, _now: SimTime, ack: &AckEvent) -> RecoveryAction {
        self.ack(ack, true)
    }
    fn on_duplicate_ack(&mut self, _now: SimTime, ack: &AckEvent) -> RecoveryAction {
        self.duplicate(ack)
    }
    fn on_timeout(&mut self, _now: SimTime, ack: &AckEvent) {
        self.timeout(ack)
    }
    fn on_spurious_timeout(&mut self, _now: SimTime, undo: &SpuriousTimeout) {
        self.undo_timeout(undo)
    }
    fn on_mss(&mut self, mss: usize) {
        if mss > 0 && mss != self.mss {
            // Keep the window's size in segments.
            self.cwnd = self.cwnd / self.mss.max(1) * mss;
            self.mss = mss;
            self.cap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::test_util::{ack, dup, MSS};

    const T: SimTime = SimTime::ZERO;

    fn reno(config: RenoConfig) -> RenoCore {
        RenoCore::new(config, MSS, false)
    }

    #[test]
    fn slow_start_then_congestion_avoidance() {
        let mut cc = reno(RenoConfig {
            initial_window: InitialWindow::Segments(2),
            initial_ssthresh: Some(4000),
            ..RenoConfig::default()
        });
        assert_eq!(cc.window(), 2000);
        // Slow start: +min(acked, 2*MSS) per ACK.
        cc.on_ack(T, &ack(1000, 1000, 1001, 2001));
        assert_eq!(cc.window(), 3000);
        cc.on_ack(T, &ack(3000, 0, 4001, 4001));
        assert_eq!(cc.window(), 5000);
        // Congestion avoidance: one MSS per cwnd of ACKed bytes.
        cc.on_ack(T, &ack(4000, 0, 8001, 8001));
        assert_eq!(cc.window(), 5000);
        cc.on_ack(T, &ack(1000, 0, 9001, 9001));
        assert_eq!(cc.window(), 6000);
    }

    #[test]
    fn per_ack_increase_adds_smss_squared_over_cwnd_on_every_ack() {
        // ns-2's recovery after a timeout (cwnd 1, ssthresh 2): the first
        // ACK covers three segments the receiver already held.
        let mut cc = reno(RenoConfig {
            initial_window: InitialWindow::Segments(1),
            initial_ssthresh: Some(2000),
            abc_limit: 1,
            ca_increase: CaIncrease::PerAck,
            ..RenoConfig::default()
        });
        cc.on_ack(T, &ack(3000, 0, 3001, 3001));
        assert_eq!(cc.window(), 2000, "slow start: one MSS, not three");
        // 2000 + 1e6/2000, + 1e6/2500, + 1e6/2900 (ns-2: 2.5, 2.9, 3.245).
        let mut windows = Vec::new();
        for i in 0..3 {
            cc.on_ack(T, &ack(1000, 0, 4001 + 1000 * i, 4001 + 1000 * i));
            windows.push(cc.window());
        }
        assert_eq!(windows, [2500, 2900, 3244]);
        // A cumulative ACK of many bytes still adds only one increment.
        cc.on_ack(T, &ack(5000, 0, 11_001, 11_001));
        assert_eq!(cc.window(), 3244 + 1_000_000 / 3244);
    }

    #[test]
    fn careful_reno_refuses_a_fast_retransmit_for_data_sent_before_a_timeout() {
        for careful in [false, true] {
            let mut cc = reno(RenoConfig {
                careful,
                ..RenoConfig::default()
            });
            cc.on_timeout(T, &ack(0, 10_000, 1, 10_001));
            // Three duplicates of a go-back-N resend: the segments they
            // ask for were all sent before the timeout.
            let before = cc.on_duplicate_ack(T, &dup(3, 5000, 5001, 10_001));
            let expected = if careful {
                RecoveryAction::None
            } else {
                RecoveryAction::FastRetransmit
            };
            assert_eq!(before, expected, "careful {careful}");
        }
        // Past what was sent at the timeout, a loss is recovered fast again;
        // the recovery then ends on the first new ACK, as Reno's does.
        let mut cc = reno(RenoConfig {
            careful: true,
            ..RenoConfig::default()
        });
        cc.on_timeout(T, &ack(0, 10_000, 1, 10_001));
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(3, 5000, 10_002, 15_001)),
            RecoveryAction::FastRetransmit
        );
        cc.on_ack(T, &ack(1000, 4000, 11_002, 15_001));
        assert!(!cc.metrics().in_recovery);
        // A second loss in that window waits for a timeout (ns-2's
        // `bugFix_`: one fast retransmit per window).
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(3, 4000, 11_002, 15_001)),
            RecoveryAction::None
        );
    }

    #[test]
    fn fast_recovery_inflates_and_deflates() {
        let mut cc = reno(RenoConfig {
            initial_window: InitialWindow::Segments(10),
            ..RenoConfig::default()
        });
        let flight = 10_000;
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(1, flight, 1, 10_001)),
            RecoveryAction::None
        );
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(2, flight, 1, 10_001)),
            RecoveryAction::None
        );
        assert_eq!(
            cc.on_duplicate_ack(T, &dup(3, flight, 1, 10_001)),
            RecoveryAction::FastRetransmit
        );
        // ssthresh = 10000/2, cwnd = ssthresh + 3 MSS.
        assert_eq!((cc.ssthresh, cc.cwnd), (5000, 8000));
        cc.on_duplicate_ack(T, &dup(4, flight, 1, 10_001));
        assert_eq!(cc.cwnd, 9000);
        // Reno leaves recovery on the first new ACK, even a partial one.
        assert_eq!(
            cc.on_ack(T, &ack(2000, 8000, 2001, 10_001)),
            RecoveryAction::None
        );
        assert_eq!(cc.cwnd, 5000);
        assert!(!cc.metrics().in_recovery);
    }

    #[test]
    fn timeout_collapses_to_one_segment_and_max_window_caps() {
        let mut cc = reno(RenoConfig {
            initial_window: InitialWindow::Bytes(4096),
            max_window: Some(8096),
            abc_limit: 1,
            ..RenoConfig::default()
        });
        for i in 0..10 {
            cc.on_ack(T, &ack(1000, 0, 1000 * (i + 1), 1000 * (i + 1)));
        }
        assert_eq!(cc.window(), 8096);
        cc.on_timeout(T, &ack(0, 3000, 1, 3001));
        assert_eq!((cc.cwnd, cc.ssthresh), (1000, 2000));
    }

    #[test]
    fn eifel_response_restores_the_window_without_a_burst() {
        let mut cc = reno(RenoConfig {
            initial_window: InitialWindow::Segments(4),
            initial_ssthresh: Some(20_000),
            ..RenoConfig::default()
        });
        cc.on_timeout(T, &ack(0, 10_000, 1, 10_001));
        assert_eq!((cc.cwnd, cc.ssthresh), (1000, 5000));
        // RFC 4015 step 6: cwnd = FlightSize + min(bytes_acked, IW) and
        // ssthresh = pipe_prev = max(10 000 in flight, 20 000).
        let undo = SpuriousTimeout {
            pipe_prev: 20_000,
            in_flight: 7000,
            bytes_acked: 3000,
            mss: MSS,
        };
        cc.on_spurious_timeout(T, &undo);
        assert_eq!((cc.cwnd, cc.ssthresh), (10_000, 20_000));
        // A large cumulative ACK is limited to one initial window.
        cc.on_spurious_timeout(
            T,
            &SpuriousTimeout {
                bytes_acked: 9000,
                ..undo
            },
        );
        assert_eq!(cc.cwnd, 11_000);
    }
}
