//! Integer-nanosecond time shared by every rtolab crate.
//!
//! Time is a count of nanoseconds since the start of a run, never a float:
//! floating-point clocks need epsilon comparisons and lose determinism across
//! machines. The simulator hands out virtual time; the emulator maps the wall
//! clock onto the same type, so engine and models never know which one drives
//! them.
//!
//! Arithmetic saturates instead of wrapping or panicking: a deadline past the
//! end of time is simply "never".
//!
//! [`units`] reads and writes durations and rates written with a unit.

pub mod units;

use core::fmt;
use core::ops::{Add, AddAssign, Mul, Sub, SubAssign};

/// A point in time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct SimTime(u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Debug)]
pub struct SimDuration(u64);

const NANOS_PER_MICRO: u64 = 1_000;
const NANOS_PER_MILLI: u64 = 1_000_000;
const NANOS_PER_SEC: u64 = 1_000_000_000;

impl SimTime {
    /// The start of a run.
    pub const ZERO: SimTime = SimTime(0);
    /// The latest representable time, used as "never".
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_nanos(nanos: u64) -> Self {
        SimTime(nanos)
    }
    pub const fn from_micros(micros: u64) -> Self {
        SimTime(micros.saturating_mul(NANOS_PER_MICRO))
    }
    pub const fn from_millis(millis: u64) -> Self {
        SimTime(millis.saturating_mul(NANOS_PER_MILLI))
    }
    pub const fn from_secs(secs: u64) -> Self {
        SimTime(secs.saturating_mul(NANOS_PER_SEC))
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later than `self`.
    pub const fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
    /// `self - d`, clamped at the start of the run.
    pub const fn saturating_sub(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_sub(d.0))
    }
    /// Elapsed time since the start of the run.
    pub const fn since_start(self) -> SimDuration {
        SimDuration(self.0)
    }
}

impl SimDuration {
    pub const ZERO: SimDuration = SimDuration(0);
    pub const MAX: SimDuration = SimDuration(u64::MAX);

    pub const fn from_nanos(nanos: u64) -> Self {
        SimDuration(nanos)
    }
    pub const fn from_micros(micros: u64) -> Self {
        SimDuration(micros.saturating_mul(NANOS_PER_MICRO))
    }
    pub const fn from_millis(millis: u64) -> Self {
        SimDuration(millis.saturating_mul(NANOS_PER_MILLI))
    }
    pub const fn from_secs(secs: u64) -> Self {
        SimDuration(secs.saturating_mul(NANOS_PER_SEC))
    }
    /// Rounds to the nearest nanosecond; negative and NaN inputs give zero,
    /// values beyond the range give [`SimDuration::MAX`].
    pub fn from_secs_f64(secs: f64) -> Self {
        let nanos = (secs * NANOS_PER_SEC as f64).round();
        if nanos.is_nan() || nanos <= 0.0 {
            SimDuration::ZERO
        } else if nanos >= u64::MAX as f64 {
            SimDuration::MAX
        } else {
            SimDuration(nanos as u64)
        }
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub const fn as_micros(self) -> u64 {
        self.0 / NANOS_PER_MICRO
    }
    pub const fn as_millis(self) -> u64 {
        self.0 / NANOS_PER_MILLI
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_MILLI as f64
    }
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }
    pub const fn saturating_sub(self, other: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_sub(other.0))
    }
    pub const fn saturating_mul(self, factor: u64) -> SimDuration {
        SimDuration(self.0.saturating_mul(factor))
    }
    /// The time `bytes` take to serialise at `bits_per_second`, rounded up
    /// to the next nanosecond so a busy link is never released early.
    pub const fn transmission(bytes: u64, bits_per_second: u64) -> SimDuration {
        if bits_per_second == 0 {
            return SimDuration::MAX;
        }
        let bits = (bytes as u128) * 8 * NANOS_PER_SEC as u128;
        let rate = bits_per_second as u128;
        let nanos = bits.div_ceil(rate);
        if nanos > u64::MAX as u128 {
            SimDuration::MAX
        } else {
            SimDuration(nanos as u64)
        }
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        *self = *self + d;
    }
}

/// Saturating: a later minus an earlier time; zero if reversed.
impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    fn sub(self, earlier: SimTime) -> SimDuration {
        self.saturating_since(earlier)
    }
}

impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, other: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(other.0))
    }
}

impl AddAssign for SimDuration {
    fn add_assign(&mut self, other: SimDuration) {
        *self = *self + other;
    }
}

impl Sub for SimDuration {
    type Output = SimDuration;
    fn sub(self, other: SimDuration) -> SimDuration {
        self.saturating_sub(other)
    }
}

impl SubAssign for SimDuration {
    fn sub_assign(&mut self, other: SimDuration) {
        *self = *self - other;
    }
}

impl Mul<u64> for SimDuration {
    type Output = SimDuration;
    fn mul(self, factor: u64) -> SimDuration {
        self.saturating_mul(factor)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}s",
            self.0 / NANOS_PER_SEC,
            self.0 % NANOS_PER_SEC
        )
    }
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= NANOS_PER_SEC {
            write!(f, "{:.3}s", self.as_secs_f64())
        } else if self.0 >= NANOS_PER_MILLI {
            write!(f, "{:.3}ms", self.as_millis_f64())
        } else if self.0 >= NANOS_PER_MICRO {
            write!(f, "{:.3}us", self.0 as f64 / NANOS_PER_MICRO as f64)
        } else {
            write!(f, "{}ns", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(SimTime::MAX + SimDuration::from_secs(1), SimTime::MAX);
        assert_eq!(SimTime::ZERO - SimTime::from_secs(1), SimDuration::ZERO);
        assert_eq!(
            SimDuration::from_millis(5) - SimDuration::from_millis(7),
            SimDuration::ZERO
        );
    }

    #[test]
    fn transmission_time_rounds_up() {
        // 1500 bytes at 10 Mbit/s = 1.2 ms exactly.
        assert_eq!(
            SimDuration::transmission(1500, 10_000_000),
            SimDuration::from_micros(1200)
        );
        // 1 byte at 3 bit/s = 2.666.. s, rounded up to the next nanosecond.
        assert_eq!(SimDuration::transmission(1, 3).as_nanos(), 2_666_666_667);
        assert_eq!(SimDuration::transmission(1, 0), SimDuration::MAX);
    }

    #[test]
    fn float_seconds_convert_and_clamp() {
        assert_eq!(
            SimDuration::from_secs_f64(0.0015),
            SimDuration::from_micros(1500)
        );
        assert_eq!(SimDuration::from_secs_f64(-1.0), SimDuration::ZERO);
        assert_eq!(SimDuration::from_secs_f64(f64::NAN), SimDuration::ZERO);
        assert_eq!(SimDuration::from_secs_f64(1e30), SimDuration::MAX);
    }

    #[test]
    fn display_is_readable() {
        assert_eq!(SimTime::from_millis(1500).to_string(), "1.500000000s");
        assert_eq!(SimDuration::from_millis(200).to_string(), "200.000ms");
    }
}
