//! Limits on a run: budgets of events, wall time and output bytes, a stop
//! flag another thread (a signal handler) can raise, and the guard against
//! events that keep firing while simulated time stands still.
//!
//! [`Simulator::run_until`](crate::sim::Simulator::run_until) checks the
//! budgets and the flag every [`CHECK_EVERY`] events, so they cost nothing
//! measurable; the guard is a counter compared only when an event pops at
//! the instant of the one before.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Events between two checks of the budgets and the stop flag: a few
/// milliseconds of wall time at most, so a stop request is honoured well
/// within 100 ms.
pub const CHECK_EVERY: u64 = 1024;

/// Default of [`RunLimits::stall_events`]: no scenario does a million
/// things at one instant, and a loop that does costs about a second.
pub const DEFAULT_STALL_EVENTS: u64 = 1_000_000;

/// What stops a run before its end; all off by default except the guard.
#[derive(Clone, Debug)]
pub struct RunLimits {
    /// Stop once this many events were handled.
    pub max_events: Option<u64>,
    /// Stop after this much wall time in `run_until`.
    pub max_wall: Option<Duration>,
    /// Stop once this many bytes reached the output files (counted as the
    /// writers' buffers are emptied, so a run may write up to one buffer
    /// more per file).
    pub max_output: Option<u64>,
    /// Stop with an error when this many events in a row fire at one
    /// instant.
    pub stall_events: u64,
    /// Stop as soon as this is set (from another thread or a signal
    /// handler).
    pub stop: Option<StopFlag>,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            max_events: None,
            max_wall: None,
            max_output: None,
            stall_events: DEFAULT_STALL_EVENTS,
            stop: None,
        }
    }
}

/// Why a run stopped before its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// [`RunLimits::max_events`] events were handled.
    MaxEvents(u64),
    /// [`RunLimits::max_wall`] passed.
    MaxWall(Duration),
    /// [`RunLimits::max_output`] bytes were written.
    MaxOutput(u64),
    /// The stop flag was raised.
    Interrupted,
    /// `what` fired `count` times in a row without time advancing.
    Stalled {
        /// The component and its event: `tcp timer of host "a"`.
        what: String,
        /// Events at that instant.
        count: u64,
    },
}

/// A flag that asks a run to stop, shared with whoever may raise it.
/// Two flags are equal when they are the same flag.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag not raised yet.
    pub fn new() -> Self {
        StopFlag::default()
    }

    /// Asks the run to stop.
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether it was raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl PartialEq for StopFlag {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for StopFlag {}

impl Stop {
    /// What happened, at simulated time `at`, on one line.
    pub fn message_at(&self, at: rtolab_time::SimTime) -> String {
        match self {
            Stop::Stalled { what, count } => {
                format!("{what} fired {count} times at t={at} without time advancing")
            }
            other => format!("{other} at t={at}"),
        }
    }

    /// The name `metrics.json` gives it in `stopped_by`: the option that
    /// set the limit, `interrupted` or `stalled`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Stop::MaxEvents(_) => "max_events",
            Stop::MaxWall(_) => "max_wall",
            Stop::MaxOutput(_) => "max_output",
            Stop::Interrupted => "interrupted",
            Stop::Stalled { .. } => "stalled",
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::MaxEvents(n) => write!(f, "stopped by max_events ({n} events)"),
            Stop::MaxWall(d) => write!(f, "stopped by max_wall ({:.3}s)", d.as_secs_f64()),
            Stop::MaxOutput(n) => write!(f, "stopped by max_output ({n} bytes)"),
            Stop::Interrupted => write!(f, "interrupted"),
            Stop::Stalled { what, count } => {
                write!(f, "{what} fired {count} times without time advancing")
            }
        }
    }
}

/// A writer that adds the bytes it passes on to a shared counter; wraps the
/// file under a buffer, so the counter moves once per buffer.
pub struct CountingWriter<W> {
    inner: W,
    count: Arc<AtomicU64>,
}

impl<W: Write> CountingWriter<W> {
    /// Counts what goes to `inner` into `count`.
    pub fn new(inner: W, count: Arc<AtomicU64>) -> Self {
        CountingWriter { inner, count }
    }
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
