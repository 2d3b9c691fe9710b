//! `kind = "drop-list"`: drops chosen packets, by their position among the
//! packets that match a filter — "the 3rd and 7th data segment from the
//! client" — so a run shows exactly what one loss does to a sender's timers,
//! the same in every seed.
//!
//! ```toml
//! [[middlebox]]
//! kind = "drop-list"
//! host = "router"
//! drop = [3, 7]                  # 1-based positions among matching packets
//! match = { protocol = "tcp", source = "10.0.0.1", payload = true }
//! ```

use serde::{Deserialize, Serialize};

use super::{Held, Middlebox, MiddleboxCheck, MiddleboxCx, PacketFilter, ScenarioMiddlebox};
use crate::config::{required, ScenarioError};

/// The `[[middlebox]]` fields of a drop list.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDropList {
    /// Positions (1-based) among the packets that match of those to drop. Required.
    drop: Option<Vec<u64>>,
    /// Which packets count: `{ protocol, source, destination, payload }`, each optional
    /// (`protocol` "tcp" or "udp"; `payload` true for segments or datagrams that carry data,
    /// false for those that carry none). Default: every packet.
    #[serde(rename = "match", default)]
    filter: PacketFilter,
}

/// A validated drop list.
#[derive(Clone, Debug, PartialEq)]
pub struct DropListSpec {
    /// Positions (1-based, ascending, distinct) among matching packets.
    pub drop: Vec<u64>,
    /// Which packets count.
    pub filter: PacketFilter,
}

impl ScenarioMiddlebox for DropListSpec {
    const KIND: &'static str = "drop-list";
    type Raw = RawDropList;
    type Model = DropList;

    fn validate(raw: RawDropList, cx: &mut MiddleboxCheck<'_>) -> Result<Self, ScenarioError> {
        let mut drop = required(&raw.drop, cx.at("drop"), &cx.what)?;
        if drop.is_empty() {
            return Err(ScenarioError::new(cx.at("drop"), "must not be empty"));
        }
        if let Some(k) = drop.iter().position(|&n| n == 0) {
            return Err(ScenarioError::new(
                format!("{}[{k}]", cx.at("drop")),
                "positions start at 1",
            ));
        }
        drop.sort_unstable();
        drop.dedup();
        Ok(DropListSpec {
            drop,
            filter: raw.filter,
        })
    }

    fn build(&self) -> DropList {
        DropList {
            spec: self.clone(),
            next: 0,
            stats: DropListStats::default(),
        }
    }
}

/// Counters of a [`DropList`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DropListStats {
    /// Packets it saw.
    pub seen: u64,
    /// Packets that matched its filter.
    pub matched: u64,
    /// Packets it dropped.
    pub dropped: u64,
}

/// Drops the listed matching packets, passes everything else.
#[derive(Debug)]
pub struct DropList {
    spec: DropListSpec,
    /// Index in `spec.drop` of the next position to drop.
    next: usize,
    stats: DropListStats,
}

impl Middlebox for DropList {
    type Stats = DropListStats;

    fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held> {
        self.stats.seen += 1;
        if !self.spec.filter.matches(cx.datagram(&packet)) {
            return Some(packet);
        }
        self.stats.matched += 1;
        if self.spec.drop.get(self.next) != Some(&self.stats.matched) {
            return Some(packet);
        }
        self.next += 1;
        self.stats.dropped += 1;
        cx.drop(packet);
        None
    }

    fn stats(&self) -> DropListStats {
        self.stats
    }
}
