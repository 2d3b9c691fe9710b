//! Contiki's two clocks on the Tmote Sky, the platform the study's Cooja
//! runs emulated, and their conversion to simulated time.
//!
//! Contiki times the MAC with two clocks: the `rtimer` (fine, for the radio
//! duty cycle) and the `clock` (coarse, for `ctimer`s such as CSMA's
//! retransmission timer). Every constant of the MACs is written in their
//! ticks as Contiki writes it and converted here.

use rtolab_time::SimDuration;

/// Rtimer ticks per second: `RTIMER_ARCH_SECOND` = 4096 × 8
/// (cpu/msp430/rtimer-arch.h).
pub const RTIMER_SECOND: u64 = 32_768;

/// Clock ticks per second: `CLOCK_CONF_SECOND` (platform/sky/platform-conf.h).
pub const CLOCK_SECOND: u64 = 128;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// `ticks` rtimer ticks as a duration. One tick is 30 517.578125 ns, so a
/// count that is not a multiple of 64 ticks has no whole number of
/// nanoseconds: it is rounded to the nearest one (an error under 0.5 ns per
/// constant, never accumulated: each constant is converted once).
pub const fn rtimer(ticks: u64) -> SimDuration {
    SimDuration::from_nanos((ticks * NANOS_PER_SEC + RTIMER_SECOND / 2) / RTIMER_SECOND)
}

/// `ticks` clock ticks as a duration; exact (one tick is 7.8125 ms).
pub const fn clock(ticks: u64) -> SimDuration {
    SimDuration::from_nanos(ticks * (NANOS_PER_SEC / CLOCK_SECOND))
}

/// Whole clock ticks in `d`, truncated as Contiki's integer conversions
/// from rtimer to clock ticks truncate.
pub const fn whole_clock_ticks(d: SimDuration) -> u64 {
    d.as_nanos() / (NANOS_PER_SEC / CLOCK_SECOND)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        // A 8 Hz cycle is 4096 ticks: exactly 125 ms.
        assert_eq!(rtimer(RTIMER_SECOND / 8), SimDuration::from_millis(125));
        // 4 ticks = 122 070.3125 ns, rounded down; 13 ticks = 396 728.515625 ns,
        // rounded up.
        assert_eq!(rtimer(4).as_nanos(), 122_070);
        assert_eq!(rtimer(13).as_nanos(), 396_729);
        assert_eq!(clock(16), SimDuration::from_millis(125));
        assert_eq!(whole_clock_ticks(SimDuration::from_micros(15_624)), 1);
        assert_eq!(whole_clock_ticks(SimDuration::from_micros(15_625)), 2);
    }
}
