//! The DIO timer: Trickle (RFC 6206) as Contiki 3.0's `rpl-timers.c` runs
//! it. Intervals are 2^k ms for k from `imin` to `imin + doublings`; in each
//! the DIO goes out at a random instant in the interval's second half
//! unless `redundancy` consistent DIOs were heard first; an inconsistency
//! resets the interval to the smallest.

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};

use crate::rng::SimRng;

/// Largest interval exponent (log2 ms) kept.
const MAX_EXP: u8 = 32;

/// Trickle state of one RPL instance.
#[derive(Clone, Debug)]
pub struct Trickle {
    imin: u8,
    doublings: u8,
    redundancy: u8,
    /// log2 of the current interval in ms (`dio_intcurrent`).
    current: u8,
    /// Consistent DIOs heard in this interval (`dio_counter`).
    counter: u8,
    /// The next firing is the transmission instant, not the interval's end.
    send_pending: bool,
    /// From the transmission instant to the interval's end.
    rest: SimDuration,
    deadline: Option<SimTime>,
}

impl Trickle {
    /// A stopped timer. Like Contiki, the current interval starts at the
    /// largest, so that the first [`Trickle::reset`] starts it. Intervals
    /// beyond 2^32 ms (49 days), which a DIO could ask for, are cut there.
    pub fn new(imin: u8, doublings: u8, redundancy: u8) -> Self {
        let imin = imin.min(MAX_EXP);
        let doublings = doublings.min(MAX_EXP - imin);
        Trickle {
            imin,
            doublings,
            redundancy,
            current: imin + doublings,
            counter: 0,
            send_pending: false,
            rest: SimDuration::ZERO,
            deadline: None,
        }
    }

    /// The current interval.
    pub fn interval(&self) -> SimDuration {
        SimDuration::from_millis(1u64 << self.current)
    }

    /// When [`Trickle::fire`] is due.
    pub fn deadline(&self) -> Option<SimTime> {
        self.deadline
    }

    /// Consistent DIOs counted in this interval.
    pub fn counter(&self) -> u8 {
        self.counter
    }

    /// Goes back to the smallest interval (`rpl_reset_dio_timer`), unless
    /// already there. A timer never started is started even when it has no
    /// doublings (Contiki would never start it then).
    pub fn reset(&mut self, now: SimTime, rng: &mut SimRng) {
        if self.current > self.imin || self.deadline.is_none() {
            self.current = self.imin;
            self.new_interval(now, rng);
        }
    }

    /// A consistent DIO was heard.
    pub fn heard_consistent(&mut self) {
        self.counter = self.counter.saturating_add(1);
    }

    /// The deadline passed: true when a DIO is to be sent now.
    pub fn fire(&mut self, now: SimTime, rng: &mut SimRng) -> bool {
        if self.send_pending {
            self.send_pending = false;
            self.deadline = Some(now + self.rest);
            self.redundancy != 0 && self.counter < self.redundancy
        } else {
            if self.current < self.imin + self.doublings {
                self.current += 1;
            }
            self.new_interval(now, rng);
            false
        }
    }

    /// `new_dio_interval`: the transmission instant is uniform in [I/2, I].
    fn new_interval(&mut self, now: SimTime, rng: &mut SimRng) {
        let interval = self.interval().as_nanos();
        let half = interval / 2;
        let at = half + rng.gen_range(0..=half);
        self.rest = SimDuration::from_nanos(interval - at);
        self.send_pending = true;
        self.counter = 0;
        self.deadline = Some(now + SimDuration::from_nanos(at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::component_stream;

    /// Runs the timer alone until `until`, returning (interval start,
    /// interval length, transmission instant or None) per interval.
    fn run(t: &mut Trickle, rng: &mut SimRng, until: SimTime) -> Vec<(SimTime, u64, bool)> {
        let mut sends = Vec::new();
        while let Some(at) = t.deadline() {
            if at > until {
                break;
            }
            let interval = t.interval().as_nanos();
            if t.fire(at, rng) {
                sends.push((at, interval, true));
            }
        }
        sends
    }

    #[test]
    fn intervals_double_up_to_the_limit_and_dios_fall_in_their_second_half() {
        let mut rng = component_stream(1, "trickle");
        let mut t = Trickle::new(12, 8, 10);
        assert_eq!(t.deadline(), None);
        t.reset(SimTime::ZERO, &mut rng);
        assert_eq!(t.interval(), SimDuration::from_millis(4096));
        let sends = run(&mut t, &mut rng, SimTime::from_secs(3 * 3600));
        // Intervals start back to back: 4.096 s, 8.192 s, ... then stay at
        // 2^20 ms.
        let mut start = 0u64;
        for (k, &(at, interval, _)) in sends.iter().enumerate() {
            let expected = 1u64 << (12 + k.min(8));
            assert_eq!(interval, expected * 1_000_000, "interval {k}");
            let offset = at.as_nanos() - start;
            assert!(offset >= interval / 2 && offset <= interval, "interval {k}");
            start += interval;
        }
        assert!(sends.len() > 12);
    }

    #[test]
    fn reset_returns_to_the_smallest_interval_and_redundancy_suppresses() {
        let mut rng = component_stream(2, "trickle");
        let mut t = Trickle::new(12, 8, 2);
        t.reset(SimTime::ZERO, &mut rng);
        run(&mut t, &mut rng, SimTime::from_secs(100));
        assert!(t.interval() > SimDuration::from_millis(4096));
        let now = SimTime::from_secs(100);
        t.reset(now, &mut rng);
        assert_eq!(t.interval(), SimDuration::from_millis(4096));
        let at = t.deadline().unwrap();
        assert!(at >= now + SimDuration::from_millis(2048));
        assert!(at <= now + SimDuration::from_millis(4096));
        // Already at the smallest interval: a reset changes nothing.
        t.reset(now + SimDuration::from_millis(1), &mut rng);
        assert_eq!(t.deadline(), Some(at));
        // Two consistent DIOs heard: this interval's DIO is suppressed.
        t.heard_consistent();
        t.heard_consistent();
        assert!(!t.fire(at, &mut rng));
        let end = t.deadline().unwrap();
        assert!(!t.fire(end, &mut rng));
        assert_eq!(t.interval(), SimDuration::from_millis(8192));
        assert_eq!(t.counter(), 0);
        assert!(t.fire(t.deadline().unwrap(), &mut rng));
    }
}
