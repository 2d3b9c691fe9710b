//! Retransmission-timeout policies.
//!
//! An [`RtoPolicy`] owns everything that decides when a segment is declared
//! lost: RTT estimation, the initial value, the minimum and maximum, and the
//! backoff after expiries. Keeping them together (rather than an estimator
//! plus an RTO formula and a backoff rule spread through the connection)
//! lets a published scheme be one module that can be read beside its paper.
//!
//! The engine tells the policy about every transmission, every RTT sample,
//! every advance of the cumulative ACK and every expiry, and asks it for the
//! timeout to arm whenever the retransmission timer is (re)started. A
//! [`RtoFactory`] holds a policy's configuration and builds one fresh
//! [`RtoPolicy`] per connection.
//!
//! Sequence positions are given as stream offsets (bytes of sequence space
//! since the initial sequence number, SYN included) so policies never deal
//! with wrapping arithmetic.
//!
//! Implementations: [`rfc6298`], [`lwip`], [`uip`], [`lim2020`], [`lim2024`],
//! [`link_aware`], [`bridge`], [`per_byte`], [`fixed`]. Each is registered by one line in
//! [`crate::policies`].

use core::fmt::Debug;

use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use crate::clock::Granularity;

pub mod bridge;
pub mod fixed;
pub mod lim2020;
pub mod lim2024;
pub mod link_aware;
pub mod lwip;
pub mod per_byte;
pub mod planned;
pub mod rfc6298;
pub mod uip;

pub use bridge::{BridgeRtoConfig, NfcChannelModel};
pub use fixed::FixedRtoConfig;
pub use lim2020::{Lim2020Config, LimRtoConfig};
pub use lim2024::Lim2024Config;
pub use link_aware::LinkAwareConfig;
pub use lwip::LwipRtoConfig;
pub use per_byte::PerByteRtoConfig;
pub use rfc6298::{Rfc6298Config, RttTiming};
pub use uip::UipRtoConfig;

/// What a policy learns about the connection it serves when it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionContext {
    /// Time the connection was created.
    pub now: SimTime,
    /// Maximum segment size in use (may still change during the handshake).
    pub mss: usize,
    /// Whether this end opened the connection (sent the first SYN).
    pub active_open: bool,
    /// The retransmission timer's granularity; tick-based policies count
    /// ticks on it.
    pub granularity: Granularity,
    /// A per-connection seed for policies that randomise (dithering); the
    /// same seed always gives the same run.
    pub seed: u64,
    /// What the host's link layer knows of the path's timing when the
    /// connection is opened, if anything (see [`PathHint`]). Policies that
    /// do not use it ignore it; without it they all behave alike.
    pub path: Option<PathHint>,
}

/// What a host's link layer knows about the timing of a connection's path
/// across a duty-cycled multi-hop network, handed to the RTO policy when
/// the connection is opened ([`ConnectionContext::path`]).
///
/// It describes the constrained part of the path: from the host to the
/// network's border router (for a low-power mesh, the RPL root), where the
/// round trip is dominated by radios that sleep between channel checks.
/// Its two numbers are link facts, not a timeout: a policy turns them into
/// one (see [`link_aware`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathHint {
    /// Link-layer hops from the host to the border router, as the routing
    /// protocol lets the host estimate them. For RPL it is the DAGRank
    /// difference `⌊rank / MinHopRankIncrease⌋ − ⌊root rank /
    /// MinHopRankIncrease⌋` (RFC 6550 §3.5.1): with MRHOF each hop adds
    /// `MinHopRankIncrease × ETX` to the rank, so over links that deliver at
    /// the first try this is the hop count, and each further expected
    /// transmission of a lossier link counts as one more hop. At least 1.
    pub hops: u32,
    /// The longest one hop takes to deliver a full-sized frame with one
    /// link-layer transmission, acknowledgment included, when the receiver
    /// is asleep: for ContikiMAC the sender's channel checks, a strobe
    /// train as long as the MAC sends one (a whole channel check interval
    /// plus two wake-up checks), then the frame's airtime, the turnaround
    /// and the ACK. CSMA's retransmissions are not included; a policy
    /// allows for them.
    pub hop_time: SimDuration,
}

/// One segment handed to the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmission {
    /// Stream offset of the segment's first sequence number.
    pub offset: u64,
    /// Sequence space the segment occupies (payload + SYN + FIN).
    pub len: usize,
    /// Whether this sequence space was sent before.
    pub retransmission: bool,
    /// How many times this segment had been retransmitted before this send.
    pub retransmit_count: u32,
    /// Whether the segment carries a SYN.
    pub syn: bool,
}

/// How an RTT sample was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleSource {
    /// From the send time the engine remembers for the acknowledged segment.
    SegmentTiming,
    /// From the echoed timestamp (RFC 7323 RTTM).
    Timestamp,
}

/// One round-trip measurement and what is known about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttSample {
    /// Raw round trip: from the most recent transmission of the segment to
    /// the ACK (or from the echoed timestamp's send time).
    pub rtt: SimDuration,
    /// Round trip from the segment's first transmission, for policies that
    /// take samples from retransmitted segments (CoCoA's weak estimator).
    pub since_first_transmission: SimDuration,
    /// Time to remove from the sample, such as the MAC retransmission time
    /// reported in a timelost option.
    pub correction: Option<SimDuration>,
    /// Sequence space of the acknowledged segment the sample belongs to.
    pub segment_len: usize,
    /// Whether that segment was retransmitted (the sample is ambiguous under
    /// Karn's rule unless it came from a timestamp).
    pub retransmitted: bool,
    /// How many times that segment was retransmitted (0 when it was not),
    /// for policies that take weak samples only after a few (CoCoA).
    pub retransmissions: u32,
    /// How the sample was measured.
    pub source: SampleSource,
}

impl RttSample {
    /// The sample with its correction removed (never below zero).
    pub fn corrected(&self) -> SimDuration {
        self.rtt - self.correction.unwrap_or(SimDuration::ZERO)
    }

    /// [`RttSample::since_first_transmission`] with the correction removed
    /// (never below zero), for policies that time from the first send.
    pub fn corrected_since_first(&self) -> SimDuration {
        self.since_first_transmission - self.correction.unwrap_or(SimDuration::ZERO)
    }

    /// Whether Karn's rule allows this sample to update an estimator: either
    /// the segment was sent once, or the timestamp identifies which send the
    /// ACK answers.
    pub fn unambiguous(&self) -> bool {
        !self.retransmitted || self.source == SampleSource::Timestamp
    }
}

/// The cumulative acknowledgment moved forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckProgress {
    /// New cumulative ACK as a stream offset (first unacknowledged offset).
    pub acked_to: u64,
    /// Bytes of sequence space newly acknowledged.
    pub newly_acked: usize,
    /// Whether the ACK covers our SYN (the handshake completed).
    pub syn_acked: bool,
    /// Whether data remains outstanding after this ACK.
    pub outstanding: bool,
    /// MAC retransmission time the ACK reports (timelost spec §2), to be
    /// removed from a round trip the policy times itself (lwIP, uIP); zero
    /// without the option or when the host does not correct its samples.
    pub correction: SimDuration,
}

/// The retransmission timer fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The oldest unacknowledged segment, about to be retransmitted.
    pub segment: Transmission,
    /// Consecutive expiries without progress, this one included.
    pub consecutive: u32,
}

/// A policy's view of the path, for traces and statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtoEstimate {
    /// Smoothed RTT, if the policy keeps one and has a sample.
    pub srtt: Option<SimDuration>,
    /// RTT variation, if the policy keeps one.
    pub rttvar: Option<SimDuration>,
    /// The timeout the policy would arm now for a fresh segment.
    pub rto: SimDuration,
    /// Current backoff exponent or retransmission count the policy applies.
    pub backoff: u32,
}

/// Owns RTT estimation, initial/minimum/maximum RTO and backoff for one
/// connection. Every hook has a no-op default so a policy implements only
/// what it uses.
pub trait RtoPolicy: Debug + Send {
    /// Short name used in traces (`"rfc6298"`, `"lwip"`, ...).
    fn name(&self) -> &'static str;

    /// A segment was handed to the network.
    fn on_transmit(&mut self, _now: SimTime, _tx: &Transmission) {}

    /// The engine measured a round trip.
    fn on_rtt_sample(&mut self, _now: SimTime, _sample: &RttSample) {}

    /// The cumulative ACK advanced (called after any sample of the same ACK).
    fn on_ack(&mut self, _now: SimTime, _ack: &AckProgress) {}

    /// The retransmission timer expired (called before the retransmission is
    /// sent and before [`RtoPolicy::timeout_for`] is asked again).
    fn on_expiry(&mut self, _now: SimTime, _expiry: &Expiry) {}

    /// The timeout to arm now for the timer that guards `oldest`, the
    /// oldest unacknowledged segment.
    fn timeout_for(&mut self, now: SimTime, oldest: &Transmission) -> SimDuration;

    /// The current estimate, for traces and statistics.
    fn estimate(&self) -> RtoEstimate;
}

/// Configuration of an RTO policy; builds per-connection state.
pub trait RtoFactory: Debug + Send + Sync {
    /// Short name used in traces.
    fn name(&self) -> &'static str;
    /// A fresh policy for a new connection.
    fn build(&self, ctx: &ConnectionContext) -> Box<dyn RtoPolicy>;
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    pub fn ctx(granularity: Granularity) -> ConnectionContext {
        ConnectionContext {
            now: SimTime::ZERO,
            mss: 1000,
            active_open: true,
            granularity,
            seed: 1,
            path: None,
        }
    }

    pub fn tx(offset: u64, len: usize, retransmit_count: u32) -> Transmission {
        Transmission {
            offset,
            len,
            retransmission: retransmit_count > 0,
            retransmit_count,
            syn: offset == 0,
        }
    }

    pub fn sample(rtt_ms: u64) -> RttSample {
        RttSample {
            rtt: SimDuration::from_millis(rtt_ms),
            since_first_transmission: SimDuration::from_millis(rtt_ms),
            correction: None,
            segment_len: 1000,
            retransmitted: false,
            retransmissions: 0,
            source: SampleSource::SegmentTiming,
        }
    }
}
