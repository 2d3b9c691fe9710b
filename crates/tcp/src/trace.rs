//! Typed trace events: everything a user would plot or count, with
//! familiar names. Times and durations serialise as integer nanoseconds.

use rtolab_time::{SimDuration, SimTime};
use serde::{Serialize, Serializer};

use crate::ack::AckReason;
use crate::rto::SampleSource;
use crate::state::State;

/// Serialises a [`SimTime`] as integer nanoseconds.
pub fn ser_time<S: Serializer>(t: &SimTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(t.as_nanos())
}

/// Serialises a [`SimDuration`] as integer nanoseconds.
pub fn ser_duration<S: Serializer>(d: &SimDuration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_nanos())
}

/// Serialises an optional [`SimDuration`] as integer nanoseconds.
pub fn ser_opt_duration<S: Serializer>(d: &Option<SimDuration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_nanos()),
        None => s.serialize_none(),
    }
}

/// Why a segment was sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetransmitCause {
    /// The retransmission timer expired.
    Timeout,
    /// Duplicate ACKs or SACK information (fast retransmit / recovery).
    FastRetransmit,
    /// A zero-window probe.
    Probe,
    /// A keep-alive probe.
    KeepAlive,
}

/// How a spurious retransmission was detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpuriousDetection {
    /// The echoed timestamp predates the retransmission (Eifel, RFC 3522).
    Timestamps,
    /// The receiver reported a duplicate segment (DSACK, RFC 2883).
    Dsack,
}

/// A timer of the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerKind {
    /// Retransmission (also SYN and FIN retransmission).
    Retransmit,
    /// Delayed ACK.
    DelayedAck,
    /// Zero-window probe (persist).
    Persist,
    /// Keep-alive.
    KeepAlive,
    /// TIME-WAIT (2 MSL).
    TimeWait,
}

/// One typed trace record of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum TraceEvent {
    /// The connection changed state.
    State {
        /// Previous state.
        from: State,
        /// New state.
        to: State,
    },
    /// The retransmission timer was armed.
    RtoArmed {
        /// The timeout the policy chose.
        #[serde(serialize_with = "ser_duration")]
        rto: SimDuration,
        /// When the (possibly tick-aligned) timer fires.
        #[serde(serialize_with = "ser_time")]
        deadline: SimTime,
        /// First sequence number of the segment it guards.
        seq: u32,
        /// Policy name.
        policy: &'static str,
        /// Policy's smoothed RTT, if any.
        #[serde(serialize_with = "ser_opt_duration")]
        srtt: Option<SimDuration>,
        /// Policy's RTT variation, if any.
        #[serde(serialize_with = "ser_opt_duration")]
        rttvar: Option<SimDuration>,
        /// Policy's backoff count.
        backoff: u32,
    },
    /// An RTT sample was taken.
    RttSample {
        /// Raw sample.
        #[serde(serialize_with = "ser_duration")]
        raw: SimDuration,
        /// Sample after its correction (equal to `raw` without one).
        #[serde(serialize_with = "ser_duration")]
        corrected: SimDuration,
        /// MAC retransmission time the ACK echoed in a timelost option
        /// (timelost spec §2), when the option was agreed; `raw` minus it is
        /// `corrected` only if the host corrects its samples. Left out
        /// without the option.
        #[serde(
            serialize_with = "ser_opt_duration",
            skip_serializing_if = "Option::is_none"
        )]
        timelost: Option<SimDuration>,
        /// Sequence space of the acknowledged segment.
        segment_len: usize,
        /// Whether that segment was retransmitted.
        retransmitted: bool,
        /// How it was measured.
        source: SampleSource,
    },
    /// The congestion window changed.
    Cwnd {
        /// Old value in bytes.
        old: usize,
        /// New value in bytes.
        new: usize,
    },
    /// The slow-start threshold changed.
    Ssthresh {
        /// Old value in bytes.
        old: usize,
        /// New value in bytes.
        new: usize,
    },
    /// A segment was sent again (or a probe was sent).
    Retransmission {
        /// First sequence number.
        seq: u32,
        /// Sequence space.
        len: usize,
        /// Why.
        cause: RetransmitCause,
    },
    /// A retransmission turned out to be unnecessary.
    SpuriousRetransmission {
        /// First sequence number of the retransmitted segment.
        seq: u32,
        /// How it was detected.
        detection: SpuriousDetection,
    },
    /// A duplicate ACK arrived (RFC 5681 definition).
    DupAckReceived {
        /// The acknowledgment number.
        ack: u32,
        /// Consecutive duplicates so far.
        count: u32,
    },
    /// This host sent a duplicate ACK (same ACK number, no data, after
    /// out-of-order or duplicate data).
    DupAckSent {
        /// The acknowledgment number.
        ack: u32,
        /// Consecutive duplicates so far.
        count: u32,
    },
    /// An ACK was held back by the ACK policy.
    AckDelayed {
        /// When it will be sent at the latest.
        #[serde(serialize_with = "ser_time")]
        until: SimTime,
    },
    /// The ACK policy asked for an immediate ACK.
    AckNow {
        /// Why.
        reason: Option<AckReason>,
    },
    /// A delayed ACK was sent because its timer fired.
    DelayedAckFired,
    /// A timer fired.
    TimerFired {
        /// Which.
        timer: TimerKind,
    },
}

impl TraceEvent {
    /// Whether a connection tracing at `level` records this event.
    pub fn recorded_at(&self, level: TraceLevel) -> bool {
        match level {
            TraceLevel::All => true,
            TraceLevel::Counters => matches!(
                self,
                TraceEvent::State { .. }
                    | TraceEvent::RttSample { .. }
                    | TraceEvent::Retransmission { .. }
                    | TraceEvent::SpuriousRetransmission { .. }
                    | TraceEvent::DupAckReceived { .. }
                    | TraceEvent::DupAckSent { .. }
                    | TraceEvent::TimerFired { .. }
            ),
        }
    }
}

/// Which trace events a connection records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceLevel {
    /// Every event.
    #[default]
    All,
    /// Only the discrete happenings that counters are kept from: state
    /// changes, RTT samples, retransmissions (and the spurious ones),
    /// duplicate ACKs and timer expiries. Not the bookkeeping that comes
    /// with nearly every segment (`RtoArmed`, `Cwnd`, `Ssthresh`,
    /// `AckDelayed`, `AckNow`, `DelayedAckFired`), for drivers that keep
    /// counters but write no trace.
    Counters,
}

/// A trace record with its time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Trace {
    /// When it happened.
    #[serde(serialize_with = "ser_time")]
    pub time: SimTime,
    /// What happened.
    #[serde(flatten)]
    pub event: TraceEvent,
}
