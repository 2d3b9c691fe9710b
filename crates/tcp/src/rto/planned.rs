//! Bookkeeping shared by the size-aware RTO policies (bridge, per-byte):
//! each segment gets its RTO before it is first sent, and a retransmission
//! backs off from the lost segment's own estimate (bridge spec §3.3), not
//! from whatever was sent last.

use std::collections::BTreeMap;

use rtolab_time::SimDuration;

use super::{AckProgress, Expiry, Transmission};

/// Outstanding segments remembered at most; older plans are forgotten and
/// recomputed if ever needed, so a stalled connection cannot grow this.
const MAX_PLANNED: usize = 4096;

/// The RTO planned for each outstanding segment, by stream offset, and the
/// count of consecutive expiries.
#[derive(Clone, Debug, Default)]
pub struct PlannedRtos {
    planned: BTreeMap<u64, SimDuration>,
    backoff: u32,
}

impl PlannedRtos {
    /// Whether `tx` needs a plan: a retransmission keeps its first one.
    pub fn needs_plan(&self, tx: &Transmission) -> bool {
        !(tx.retransmission && self.planned.contains_key(&tx.offset))
    }

    /// Remembers the RTO planned for the segment at `offset`.
    pub fn record(&mut self, offset: u64, rto: SimDuration) {
        if self.planned.len() >= MAX_PLANNED {
            self.planned.pop_first();
        }
        self.planned.insert(offset, rto);
    }

    /// The plan of the segment at `offset`, if still remembered.
    pub fn get(&self, offset: u64) -> Option<SimDuration> {
        self.planned.get(&offset).copied()
    }

    /// Forgets acknowledged segments; progress ends the backoff.
    pub fn on_ack(&mut self, ack: &AckProgress) {
        self.planned = self.planned.split_off(&ack.acked_to);
        self.backoff = 0;
    }

    /// Counts an expiry.
    pub fn on_expiry(&mut self, expiry: &Expiry) {
        self.backoff = expiry.consecutive;
    }

    /// The timeout for the oldest outstanding segment: its own plan (or
    /// `plan()` if it was forgotten), backed off by its retransmissions and
    /// capped at `max`.
    pub fn timeout_for(
        &self,
        oldest: &Transmission,
        max: SimDuration,
        plan: impl FnOnce() -> SimDuration,
    ) -> SimDuration {
        let base = self.get(oldest.offset).unwrap_or_else(plan);
        back_off(base, oldest, max)
    }

    /// Consecutive expiries without progress.
    pub fn backoff(&self) -> u32 {
        self.backoff
    }
}

/// Binary exponential backoff of a segment's own estimate `base`, capped at
/// `max` (or at `base` itself when that is larger).
pub fn back_off(base: SimDuration, oldest: &Transmission, max: SimDuration) -> SimDuration {
    let backed_off = base.saturating_mul(1u64 << oldest.retransmit_count.min(32));
    backed_off.min(max.max(base))
}
