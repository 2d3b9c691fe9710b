//! Clocks: how the emulator tells the sans-IO models what time it is.
//!
//! Models count time as [`SimTime`] nanoseconds since the start of a run.
//! The simulator advances that count from event to event; the emulator
//! reads it from the wall clock. [`WallClock`] is the one place in the
//! workspace that reads `std::time::Instant`; [`ManualClock`] lets tests
//! drive the same engine through virtual time.

// Reading the wall clock is this module's purpose: the core crates are
// banned from it (see .clippy.toml) so that only the emulator's driver
// decides what "now" is.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtolab_time::{SimDuration, SimTime};

/// A source of the current time, in nanoseconds since the start of a run.
pub trait Clock {
    /// The current time.
    fn now(&self) -> SimTime;
}

/// The wall clock, counted from the moment the clock was created.
///
/// Copies share the same origin, so threads of one run (the engine loop,
/// the apps of Linux hosts) agree on what `SimTime` a moment is.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    origin: Instant,
}

impl WallClock {
    /// A clock whose time zero is now.
    pub fn start() -> Self {
        WallClock {
            origin: Instant::now(),
        }
    }

    /// The `Instant` at which this clock reads `t`.
    pub fn instant_at(&self, t: SimTime) -> Instant {
        self.origin + Duration::from_nanos(t.as_nanos())
    }

    /// Time left until the clock reads `t` (zero if it already has).
    pub fn until(&self, t: SimTime) -> Duration {
        self.instant_at(t).saturating_duration_since(Instant::now())
    }

    /// Sleeps until the clock reads `t` (returns at once if it has).
    pub fn sleep_until(&self, t: SimTime) {
        let left = self.until(t);
        if !left.is_zero() {
            std::thread::sleep(left);
        }
    }
}

impl Clock for WallClock {
    fn now(&self) -> SimTime {
        let elapsed = self.origin.elapsed();
        // u64 nanoseconds cover 584 years: saturation is only theoretical.
        SimTime::from_nanos(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A clock that only moves when told to, shared by clones; for tests of
/// the engine in virtual time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now_ns: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock to `t` (never backwards).
    pub fn set(&self, t: SimTime) {
        self.now_ns.fetch_max(t.as_nanos(), Ordering::SeqCst);
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: SimDuration) {
        self.now_ns.fetch_add(d.as_nanos(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SimTime {
        SimTime::from_nanos(self.now_ns.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_is_monotonic_and_starts_near_zero() {
        let clock = WallClock::start();
        let a = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        let b = clock.now();
        assert!(a < SimTime::from_millis(1000), "{a:?}");
        assert!(b >= a + SimDuration::from_millis(2), "{a:?} {b:?}");
    }

    #[test]
    fn sleep_until_reaches_the_deadline() {
        let clock = WallClock::start();
        let target = SimTime::from_millis(3);
        clock.sleep_until(target);
        assert!(clock.now() >= target);
        assert_eq!(clock.until(target), Duration::ZERO);
    }

    #[test]
    fn manual_clock_never_goes_back() {
        let clock = ManualClock::new();
        let other = clock.clone();
        clock.set(SimTime::from_millis(5));
        other.set(SimTime::from_millis(3));
        assert_eq!(clock.now(), SimTime::from_millis(5));
        other.advance(SimDuration::from_millis(1));
        assert_eq!(clock.now(), SimTime::from_millis(6));
    }
}
