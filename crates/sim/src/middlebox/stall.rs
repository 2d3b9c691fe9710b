//! `kind = "stall"`: the node stops forwarding for a while and then sends
//! on everything it buffered, in order — a handover or a fade with
//! link-layer buffering, seen from TCP as a burst of delay.
//!
//! ```toml
//! [[middlebox]]
//! kind = "stall"
//! host = "base-station"
//! start = "2s"
//! end = "3.5s"
//! match = { destination = "10.0.1.2" }    # optional; default: every packet
//! ```

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::{Held, Middlebox, MiddleboxCheck, MiddleboxCx, PacketFilter, ScenarioMiddlebox};
use crate::config::{required, Duration, ScenarioError};

/// The `[[middlebox]]` fields of a stall.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStall {
    /// When the stall starts: matching packets are held from then on. Required.
    start: Option<Duration>,
    /// When it ends, after `start`: held packets are sent on in order. Required.
    end: Option<Duration>,
    /// Which packets are held: `{ protocol, source, destination, payload }`, each optional, as
    /// for `drop-list`. Default: every packet.
    #[serde(rename = "match", default)]
    filter: PacketFilter,
}

/// A validated stall.
#[derive(Clone, Debug, PartialEq)]
pub struct StallSpec {
    /// When holding starts.
    pub start: SimDuration,
    /// When the held packets are released and holding stops.
    pub end: SimDuration,
    /// Which packets are held.
    pub filter: PacketFilter,
}

impl ScenarioMiddlebox for StallSpec {
    const KIND: &'static str = "stall";
    type Raw = RawStall;
    type Model = Stall;

    fn validate(raw: RawStall, cx: &mut MiddleboxCheck<'_>) -> Result<Self, ScenarioError> {
        let start = required(&raw.start, cx.at("start"), &cx.what)?.0;
        let end = required(&raw.end, cx.at("end"), &cx.what)?.0;
        if end <= start {
            return Err(ScenarioError::new(cx.at("end"), "must be after start"));
        }
        Ok(StallSpec {
            start,
            end,
            filter: raw.filter,
        })
    }

    fn build(&self) -> Stall {
        Stall {
            start: SimTime::ZERO + self.start,
            end: SimTime::ZERO + self.end,
            filter: self.filter,
            held: Vec::new(),
            stats: StallStats::default(),
        }
    }
}

/// Counters of a [`Stall`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StallStats {
    /// Packets it held.
    pub held: u64,
    /// Packets it released.
    pub released: u64,
    /// Longest time a packet was held, ns.
    pub longest_hold_ns: u64,
}

/// Holds matching packets that arrive in `[start, end)` and releases them
/// in arrival order at `end`.
#[derive(Debug)]
pub struct Stall {
    start: SimTime,
    end: SimTime,
    filter: PacketFilter,
    held: Vec<Held>,
    stats: StallStats,
}

impl Middlebox for Stall {
    type Stats = StallStats;

    fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held> {
        let now = cx.now();
        if now < self.start || now >= self.end || !self.filter.matches(cx.datagram(&packet)) {
            return Some(packet);
        }
        self.stats.held += 1;
        self.held.push(packet);
        None
    }

    fn handle_timeout(&mut self, cx: &mut MiddleboxCx<'_>) {
        if cx.now() < self.end {
            return;
        }
        for packet in self.held.drain(..) {
            let waited = cx.now().saturating_since(packet.since());
            self.stats.longest_hold_ns = self.stats.longest_hold_ns.max(waited.as_nanos());
            self.stats.released += 1;
            cx.release(packet);
        }
    }

    fn poll_timeout(&self) -> Option<SimTime> {
        (!self.held.is_empty()).then_some(self.end)
    }

    fn stats(&self) -> StallStats {
        self.stats
    }
}
