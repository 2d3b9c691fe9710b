//! The future event list: a binary heap keyed by (time, insertion sequence).
//!
//! Events scheduled for the same instant pop in the order they were pushed,
//! so a run never depends on heap internals. Cancellation is lazy: a
//! cancelled event stays in the heap and is skipped when it reaches the top,
//! which keeps `push`/`pop` at O(log n) with no searching.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

use rtolab_time::SimTime;

/// Identifies one scheduled event, for [`EventQueue::cancel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(u64);

struct Entry<E> {
    time: SimTime,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed, because `BinaryHeap` pops the greatest element and we want
    /// the earliest time, then the lowest sequence number.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// A priority queue of events of type `E` ordered by time, FIFO among ties.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
    cancelled: HashSet<u64>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty queue with room for `capacity` events before it reallocates.
    pub fn with_capacity(capacity: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(capacity),
            next_seq: 0,
            cancelled: HashSet::new(),
        }
    }

    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: SimTime, event: E) -> EventId {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { time, seq, event });
        EventId(seq)
    }

    /// Removes and returns the earliest event that was not cancelled.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        loop {
            let entry = self.heap.pop()?;
            if !self.cancelled.is_empty() && self.cancelled.remove(&entry.seq) {
                continue;
            }
            return Some((entry.time, entry.event));
        }
    }

    /// The time of the earliest event that was not cancelled.
    pub fn peek_time(&mut self) -> Option<SimTime> {
        loop {
            let entry = self.heap.peek()?;
            if !self.cancelled.is_empty() && self.cancelled.contains(&entry.seq) {
                let seq = entry.seq;
                self.heap.pop();
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
        // sweeping only when the set outgrows the heap keeps this amortised O(1).
        if self.cancelled.len() > 2 * self.heap.len() + 16 {
            let pending: HashSet<u64> = self.heap.iter().map(|e| e.seq).collect();
            self.cancelled.retain(|seq| pending.contains(seq));
        }
    }

    /// Number of scheduled events, counting cancelled ones not yet skipped.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is scheduled (cancelled events not yet skipped count
    /// as scheduled).
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
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
}
