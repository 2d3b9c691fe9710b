//! The future event list, ordered by (time, insertion sequence).
//!
//! Events scheduled for the same instant pop in the order they were pushed,
//! so a run never depends on queue internals. Cancellation is lazy: a
//! cancelled event stays queued and is skipped when it reaches the front.
//!
//! Simulated time never runs backwards, so the queue is a radix heap (Ahuja,
//! Mehlhorn, Orlin and Tarjan, 1990) on the 128-bit key (time, sequence):
//! an event sits in the bucket numbered by the highest bit in which its key
//! differs from the last key popped. Pushing is O(1); popping empties the
//! lowest non-empty bucket into lower ones, and since an event only ever
//! moves to a lower bucket, each is moved a few times at most. Pushing a key
//! below the last one popped (which the simulator never does) is still
//! handled, by re-sorting all pending events into buckets.

use std::collections::HashSet;

use rtolab_time::SimTime;

/// Identifies one scheduled event, for [`EventQueue::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(u64);

struct Entry<E> {
    time: SimTime,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    fn key(&self) -> u128 {
        u128::from(self.time.as_nanos()) << 64 | u128::from(self.seq)
    }
}

/// One bucket per bit of the key, plus bucket 0 for the key equal to the
/// last one popped.
const BUCKETS: usize = 129;

/// A priority queue of events of type `E` ordered by time, FIFO among ties.
pub struct EventQueue<E> {
    /// `buckets[b]` holds the entries whose key first differs from `last`
    /// at bit `b - 1` (counting from the least significant).
    buckets: Vec<Vec<Entry<E>>>,
    /// Bit `b` of word `b / 64` is set when `buckets[b]` is not empty.
    occupied: [u64; 3],
    /// Key of the entry popped last (or a lower bound of every key).
    last: u128,
    len: usize,
    next_seq: u64,
    cancelled: HashSet<u64>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(key: u128, last: u128) -> usize {
    (u128::BITS - (key ^ last).leading_zeros()) as usize
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty queue with room for about `capacity` events before it
    /// reallocates.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buckets: Vec<Vec<Entry<E>>> = (0..BUCKETS).map(|_| Vec::new()).collect();
        // Most events land in the buckets of the low bits of time.
        for bucket in &mut buckets[64..96] {
            bucket.reserve(capacity / 16);
        }
        EventQueue {
            buckets,
            occupied: [0; 3],
            last: 0,
            len: 0,
            next_seq: 0,
            cancelled: HashSet::new(),
        }
    }

    fn put(&mut self, entry: Entry<E>) {
        let b = bucket_of(entry.key(), self.last);
        self.buckets[b].push(entry);
        self.occupied[b / 64] |= 1 << (b % 64);
    }

    fn lowest_occupied(&self) -> Option<usize> {
        self.occupied
            .iter()
            .enumerate()
            .find(|(_, &w)| w != 0)
            .map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }

    /// Makes bucket 0 hold the earliest entry; false if the queue is empty.
    fn settle_front(&mut self) -> bool {
        let Some(b) = self.lowest_occupied() else {
            return false;
        };
        if b == 0 {
            return true;
        }
        let mut moving = std::mem::take(&mut self.buckets[b]);
        self.occupied[b / 64] &= !(1 << (b % 64));
        self.last = moving.iter().map(Entry::key).min().unwrap_or(self.last);
        // Every entry of the bucket shares the bits above `b - 1` with the
        // new `last`, so each lands in a lower bucket.
        for entry in moving.drain(..) {
            self.put(entry);
        }
        // Keep the emptied allocation.
        self.buckets[b] = moving;
        true
    }

    /// Re-sorts every entry into buckets relative to a lower `last`.
    fn rebase(&mut self, last: u128) {
        self.last = last;
        self.occupied = [0; 3];
        let mut all = Vec::with_capacity(self.len);
        for bucket in &mut self.buckets {
            all.append(bucket);
        }
        for entry in all {
            self.put(entry);
        }
    }

    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: SimTime, event: E) -> EventId {
        let seq = self.next_seq;
        self.next_seq += 1;
        let entry = Entry { time, seq, event };
        if entry.key() < self.last {
            self.rebase(entry.key());
        }
        self.put(entry);
        self.len += 1;
        EventId(seq)
    }

    /// Removes and returns the earliest event that was not cancelled.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        self.pop_until(SimTime::MAX)
    }

    /// Removes and returns the earliest event that was not cancelled, if it
    /// is due at or before `end`: one call per event where peeking and then
    /// popping would settle the front twice.
    pub fn pop_until(&mut self, end: SimTime) -> Option<(SimTime, E)> {
        loop {
            if !self.settle_front() {
                return None;
            }
            // Keys are unique, so bucket 0 holds exactly one entry.
            let entry = self.buckets[0].last()?;
            let cancelled = !self.cancelled.is_empty() && self.cancelled.contains(&entry.seq);
            if !cancelled && entry.time > end {
                return None;
            }
            let entry = self.buckets[0].pop()?;
            self.occupied[0] &= !1;
            self.len -= 1;
            if cancelled {
                self.cancelled.remove(&entry.seq);
                continue;
            }
            return Some((entry.time, entry.event));
        }
    }

    /// The time of the earliest event that was not cancelled.
    pub fn peek_time(&mut self) -> Option<SimTime> {
        loop {
            if !self.settle_front() {
                return None;
            }
            let entry = self.buckets[0].last()?;
            if !self.cancelled.is_empty() && self.cancelled.contains(&entry.seq) {
                let seq = entry.seq;
                self.buckets[0].pop();
                self.occupied[0] &= !1;
                self.len -= 1;
                self.cancelled.remove(&seq);
                continue;
            }
            return Some(entry.time);
        }
    }

    /// Cancels a scheduled event. Cancelling one that already fired or was
    /// already cancelled does nothing.
    pub fn cancel(&mut self, id: EventId) {
        if id.0 >= self.next_seq {
            return;
        }
        self.cancelled.insert(id.0);
        // Ids of events that already fired would otherwise pile up forever;
        // sweeping only when the set outgrows the queue keeps this amortised O(1).
        if self.cancelled.len() > 2 * self.len + 16 {
            let pending: HashSet<u64> = self.buckets.iter().flatten().map(|e| e.seq).collect();
            self.cancelled.retain(|seq| pending.contains(seq));
        }
    }

    /// Number of scheduled events, counting cancelled ones not yet skipped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is scheduled (cancelled events not yet skipped count
    /// as scheduled).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_ties_pop_in_insertion_order() {
        let mut q = EventQueue::new();
        let t = SimTime::from_millis(5);
        q.push(SimTime::from_millis(9), "late");
        for name in ["a", "b", "c", "d", "e"] {
            q.push(t, name);
        }
        q.push(SimTime::from_millis(1), "early");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(order, ["early", "a", "b", "c", "d", "e", "late"]);
    }

    #[test]
    fn many_ties_stay_fifo() {
        let mut q = EventQueue::new();
        // Interleave two timestamps so the heap has to reorder.
        for i in 0..1000u32 {
            q.push(SimTime::from_nanos(u64::from(i % 2)), i);
        }
        let popped: Vec<u32> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        let expected: Vec<u32> = (0..1000).step_by(2).chain((1..1000).step_by(2)).collect();
        assert_eq!(popped, expected);
    }

    #[test]
    fn cancelled_events_are_skipped() {
        let mut q = EventQueue::new();
        let a = q.push(SimTime::from_nanos(1), 'a');
        q.push(SimTime::from_nanos(2), 'b');
        let c = q.push(SimTime::from_nanos(3), 'c');
        q.cancel(a);
        q.cancel(c);
        assert_eq!(q.peek_time(), Some(SimTime::from_nanos(2)));
        assert_eq!(q.pop(), Some((SimTime::from_nanos(2), 'b')));
        assert_eq!(q.pop(), None);
        assert!(q.cancelled.is_empty());
    }

    #[test]
    fn cancelling_fired_events_does_not_accumulate() {
        let mut q = EventQueue::new();
        for i in 0..10_000u64 {
            let id = q.push(SimTime::from_nanos(i), i);
            q.pop();
            q.cancel(id);
        }
        assert!(q.cancelled.len() <= 16);
        q.cancel(EventId(u64::MAX));
        assert!(q.cancelled.len() <= 16);
    }

    proptest::proptest! {
        /// Any mix of pushes (including times before the last pop), pops
        /// and cancellations pops exactly what a sorted reference does.
        #[test]
        fn pops_in_time_then_insertion_order(
            ops in proptest::collection::vec((0u8..5, 0u64..2_000_000_000), 1..400),
        ) {
            let mut q = EventQueue::new();
            let mut model = std::collections::BTreeMap::new();
            let mut ids = Vec::new();
            let mut now = 0u64;
            for (i, (op, value)) in ops.into_iter().enumerate() {
                match op {
                    // Mostly later than the last pop, as in a simulation.
                    0 | 1 => {
                        let t = if op == 0 { now + value % 1000 } else { value };
                        let id = q.push(SimTime::from_nanos(t), i);
                        model.insert((t, id.0), i);
                        ids.push(id);
                    }
                    2 => {
                        let expected = model.pop_first().map(|((t, _), e)| (SimTime::from_nanos(t), e));
                        proptest::prop_assert_eq!(q.peek_time(), expected.map(|(t, _)| t));
                        proptest::prop_assert_eq!(q.pop(), expected);
                        if let Some((t, _)) = expected {
                            now = t.as_nanos();
                        }
                    }
                    // Pop only what is due by a horizon, as a run does.
                    3 => {
                        let end = now + value % 2000;
                        let due = model.first_key_value().is_some_and(|(&(t, _), _)| t <= end);
                        let expected = if due {
                            model.pop_first().map(|((t, _), e)| (SimTime::from_nanos(t), e))
                        } else {
                            None
                        };
                        proptest::prop_assert_eq!(q.pop_until(SimTime::from_nanos(end)), expected);
                        if let Some((t, _)) = expected {
                            now = t.as_nanos();
                        }
                    }
                    _ => {
                        if let Some(&id) = ids.get(value as usize % ids.len().max(1)) {
                            q.cancel(id);
                            model.retain(|&(_, seq), _| seq != id.0);
                        }
                    }
                }
            }
            while let Some(expected) = model.pop_first() {
                let ((t, _), e) = expected;
                proptest::prop_assert_eq!(q.pop(), Some((SimTime::from_nanos(t), e)));
            }
            proptest::prop_assert_eq!(q.pop(), None);
        }
    }
}
