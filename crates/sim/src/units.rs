//! Quantities written with units in scenario files: rates (`"10Mbps"`,
//! `"1.5 Mbit/s"`) and durations (`"5ms"`, `"250µs"`).
//!
//! The parser lives in [`rtolab_time::units`] so that scenario fields and
//! the TCP settings of a profile read the same text as the same value; it
//! is re-exported here for the simulator's existing users.

pub use rtolab_time::units::*;
