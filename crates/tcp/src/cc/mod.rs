//! Congestion-control policies.
//!
//! A [`CongestionControl`] owns the congestion window, the slow-start
//! threshold and the window side of loss recovery: when a run of duplicate
//! ACKs triggers a fast retransmit, how the window inflates and deflates
//! during recovery, and when recovery ends. The engine owns the sequence
//! space, counts duplicate ACKs and performs the retransmissions the policy
//! asks for. A [`CcFactory`] holds configuration and builds per-connection
//! state.
//!
//! Positions are stream offsets (sequence space since the ISN, SYN
//! included), as in [`crate::rto`].
//!
//! Implementations: [`reno`] (RFC 5681), [`newreno`] (RFC 6582), [`vegas`]
//! (Brakmo and Peterson), [`vegas_ns2`] (ns-2's Vegas), [`westwood`]
//! (Westwood+), [`tibet`] (TIBET), [`single_segment`] (uIP).

use core::fmt::Debug;

use rtolab_time::SimTime;
use serde::{Deserialize, Serialize};

use crate::rto::RttSample;

pub mod newreno;
pub mod ns2_loss_recovery;
pub mod reno;
pub mod single_segment;
pub mod tibet;
pub mod vegas;
pub mod vegas_ns2;
pub mod westwood;

pub use newreno::NewRenoConfig;
pub use reno::{CaIncrease, RenoConfig};
pub use single_segment::SingleSegmentConfig;
pub use tibet::TibetConfig;
pub use vegas::VegasConfig;
pub use vegas_ns2::VegasNs2Config;
pub use westwood::WestwoodConfig;

/// Initial congestion window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum InitialWindow {
    /// A number of maximum-size segments (Linux: 10, RFC 6928).
    Segments(u32),
    /// A number of bytes (lwIP in the bridge study: 4096).
    Bytes(usize),
    /// RFC 5681 §3.1: 2, 3 or 4 segments depending on the MSS.
    Rfc5681,
}

impl InitialWindow {
    /// The window in bytes for a given MSS.
    pub fn bytes(self, mss: usize) -> usize {
        match self {
            InitialWindow::Segments(n) => n as usize * mss,
            InitialWindow::Bytes(b) => b,
            InitialWindow::Rfc5681 => {
                // RFC 5681 (3.1): IW by SMSS ranges.
                if mss > 2190 {
                    2 * mss
                } else if mss > 1095 {
                    3 * mss
                } else {
                    4 * mss
                }
            }
        }
    }
}

/// What a policy learns about the connection it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcContext {
    /// Time the connection was established.
    pub now: SimTime,
    /// Sender maximum segment size after negotiation.
    pub mss: usize,
}

/// An acknowledgment as seen by congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckEvent {
    /// Bytes of sequence space newly acknowledged (0 for a duplicate ACK).
    pub bytes_acked: usize,
    /// Bytes outstanding before this ACK was processed.
    pub in_flight_before: usize,
    /// Bytes outstanding after it (RFC 6675 `pipe` when SACK is in use).
    pub in_flight: usize,
    /// New cumulative ACK as a stream offset.
    pub acked_to: u64,
    /// Highest stream offset sent so far (`SND.MAX`).
    pub highest_sent: u64,
    /// Sender maximum segment size.
    pub mss: usize,
    /// Consecutive duplicate ACKs so far, this one included (0 otherwise).
    pub duplicates: u32,
    /// SACK information says the first unacknowledged segment is lost
    /// (RFC 6675 `IsLost(HighACK + 1)`), so recovery may start before the
    /// duplicate threshold.
    pub sack_lost: bool,
    /// The first unacknowledged segment after this ACK, when there is one:
    /// ns-2's Vegas times it against its own fine-grained timer
    /// ([`vegas_ns2`]), which the engine's sequence space holds and a
    /// policy cannot see otherwise.
    pub first_unacked: Option<SentSegment>,
}

/// When a segment was last sent and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentSegment {
    /// Its latest transmission.
    pub last_sent: SimTime,
    /// Transmissions so far, the first included.
    pub transmissions: u32,
}

/// A timeout found spurious, with what RFC 4015 restores the window from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpuriousTimeout {
    /// RFC 4015 `pipe_prev`: max(FlightSize, ssthresh) just before the
    /// timeout; the slow-start threshold to restore.
    pub pipe_prev: usize,
    /// Bytes outstanding now, after transmission resumed with new data.
    pub in_flight: usize,
    /// Bytes acknowledged by the ACK that revealed the timeout as spurious.
    pub bytes_acked: usize,
    /// Sender maximum segment size.
    pub mss: usize,
}

/// What the engine must do after the policy processed an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// Nothing beyond normal sending.
    None,
    /// Enter fast recovery: retransmit the first unacknowledged segment now.
    FastRetransmit,
    /// A partial ACK during recovery (RFC 6582): retransmit the first
    /// unacknowledged segment now.
    RetransmitFirstUnacked,
}

/// Numbers a policy exposes for traces and statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct CcMetrics {
    /// Congestion window in bytes.
    pub cwnd: usize,
    /// Slow-start threshold in bytes.
    pub ssthresh: usize,
    /// Whether fast recovery is in progress.
    pub in_recovery: bool,
    /// Vegas: estimated segments queued in the network at the last
    /// adjustment (`diff`).
    pub queue_estimate: Option<f64>,
}

/// Per-connection congestion-control state.
pub trait CongestionControl: Debug + Send {
    /// Short name used in traces.
    fn name(&self) -> &'static str;

    /// Congestion window in bytes: how much may be outstanding.
    fn window(&self) -> usize;

    /// Current numbers for traces.
    fn metrics(&self) -> CcMetrics;

    /// Upper bound on segments outstanding regardless of the window
    /// (uIP's single segment).
    fn max_segments_in_flight(&self) -> Option<usize> {
        None
    }

    /// The cumulative ACK advanced.
    fn on_ack(&mut self, now: SimTime, ack: &AckEvent) -> RecoveryAction;

    /// A duplicate ACK arrived (RFC 5681 §2 definition).
    fn on_duplicate_ack(&mut self, now: SimTime, ack: &AckEvent) -> RecoveryAction;

    /// The retransmission timer expired.
    fn on_timeout(&mut self, now: SimTime, ack: &AckEvent);

    /// The engine measured a round trip; policies that pace on delay should
    /// use [`RttSample::corrected`].
    fn on_rtt_sample(&mut self, _now: SimTime, _sample: &RttSample) {}

    /// A retransmission was found to be spurious (Eifel or DSACK). This is
    /// a notification; the profile decides whether the window is restored
    /// (see [`CongestionControl::on_spurious_timeout`]).
    fn on_spurious_retransmission(&mut self, _now: SimTime) {}

    /// The Eifel response (RFC 4015 §3 step 6), called when the profile
    /// enables it and timestamps showed the last timeout was spurious:
    /// restore the state the timeout reduced. The default keeps the
    /// reduction.
    fn on_spurious_timeout(&mut self, _now: SimTime, _undo: &SpuriousTimeout) {}

    /// The sender MSS changed (after the handshake).
    fn on_mss(&mut self, _mss: usize) {}
}

/// Configuration of a congestion-control policy.
pub trait CcFactory: Debug + Send + Sync {
    /// Short name used in traces.
    fn name(&self) -> &'static str;
    /// A fresh policy for a new connection.
    fn build(&self, ctx: &CcContext) -> Box<dyn CongestionControl>;
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    pub const MSS: usize = 1000;

    pub fn ack(bytes: usize, in_flight: usize, acked_to: u64, highest: u64) -> AckEvent {
        AckEvent {
            bytes_acked: bytes,
            in_flight_before: in_flight + bytes,
            in_flight,
            acked_to,
            highest_sent: highest,
            mss: MSS,
            duplicates: 0,
            sack_lost: false,
            first_unacked: None,
        }
    }

    pub fn dup(n: u32, in_flight: usize, acked_to: u64, highest: u64) -> AckEvent {
        AckEvent {
            duplicates: n,
            ..ack(0, in_flight, acked_to, highest)
        }
    }
}
