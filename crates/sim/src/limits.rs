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

/// Wall time one event may take before [`Watchdog`] gives up on it: no
/// handler comes near it (the slowest take milliseconds in debug builds),
/// and a loaded machine stretches that far less than this.
#[cfg(debug_assertions)]
pub const WATCHDOG_AFTER: Duration = Duration::from_secs(60);

/// Debug builds only: a thread that reports an event whose handler has not
/// returned after [`WATCHDOG_AFTER`] of wall time. The budgets and the stop
/// flag are checked between events, so a handler that loops for ever (as
/// the port search did once a host had used all its ports) ignores every
/// limit and signal; with the watchdog every debug test run hunts for such
/// paths, and one found aborts the test naming the event instead of
/// hanging it.
#[cfg(debug_assertions)]
pub(crate) struct Watchdog {
    state: Arc<WatchState>,
    // Dropping it wakes the thread, which then ends.
    _alive: std::sync::mpsc::Sender<()>,
}

#[cfg(debug_assertions)]
#[derive(Default)]
struct WatchState {
    /// Events begun; the thread sees progress as this number changing.
    begun: AtomicU64,
    /// Whether an event is in hand.
    busy: AtomicBool,
    /// Which it is, for the report (copied, not described: describing
    /// every event would cost a string each).
    event: std::sync::Mutex<Option<crate::event::Event>>,
}

#[cfg(debug_assertions)]
impl Watchdog {
    /// Watches events, calling `stuck` with a description of the first one
    /// still in hand `after` it began (polled at a tenth of `after`).
    pub(crate) fn start(after: Duration, stuck: impl Fn(String) + Send + 'static) -> Watchdog {
        let state = Arc::new(WatchState::default());
        let (alive, gone) = std::sync::mpsc::channel::<()>();
        let watched = Arc::clone(&state);
        std::thread::spawn(move || {
            let poll = after / 10;
            let mut last = (u64::MAX, 0u32);
            // Ends when the sender is dropped (Disconnected), never on a message.
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = gone.recv_timeout(poll) {
                let begun = watched.begun.load(Ordering::Acquire);
                if !watched.busy.load(Ordering::Acquire) || begun != last.0 {
                    last = (begun, 0);
                    continue;
                }
                last.1 += 1;
                if last.1 >= 10 {
                    let event = watched.event.lock().ok().and_then(|e| *e);
                    let event = event.map_or("an event".to_string(), |e| format!("{e:?}"));
                    stuck(format!(
                        "{event} has been handled for {:.1}s of wall time without returning",
                        after.as_secs_f64()
                    ));
                    return;
                }
            }
        });
        Watchdog {
            state,
            _alive: alive,
        }
    }

    /// The default: print the report and abort, so a test run fails loudly.
    /// `RTOLAB_WATCHDOG_AFTER_MS` shortens the wait, for the test that
    /// checks the watchdog is wired into the event loop.
    pub(crate) fn aborting() -> Watchdog {
        let after = std::env::var("RTOLAB_WATCHDOG_AFTER_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .map_or(WATCHDOG_AFTER, Duration::from_millis);
        Watchdog::start(after, |report| {
            eprintln!("watchdog: {report}");
            std::process::abort();
        })
    }

    /// `event` begins.
    pub(crate) fn begin(&self, event: crate::event::Event) {
        if let Ok(mut e) = self.state.event.lock() {
            *e = Some(event);
        }
        self.state.begun.fetch_add(1, Ordering::Release);
        self.state.busy.store(true, Ordering::Release);
    }

    /// The event in hand is done.
    pub(crate) fn end(&self) {
        self.state.busy.store(false, Ordering::Release);
    }
}

#[cfg(all(test, debug_assertions))]
mod watchdog_tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn an_event_that_never_returns_is_reported_by_name() {
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(Duration::from_millis(200), move |r| {
            let _ = tx.send(r);
        });
        dog.begin(crate::event::Event::TcpTimer {
            node: 3,
            generation: 7,
        });
        let report = rx.recv_timeout(Duration::from_secs(10)).expect("reported");
        assert_eq!(
            report,
            "TcpTimer { node: 3, generation: 7 } has been handled for 0.2s \
             of wall time without returning"
        );
    }

    #[test]
    fn events_that_return_are_never_reported() {
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(Duration::from_millis(100), move |r| {
            let _ = tx.send(r);
        });
        // Many short events over several periods, then idle between events.
        for _ in 0..80 {
            dog.begin(crate::event::Event::AppStart { app: 0 });
            std::thread::sleep(Duration::from_millis(5));
            dog.end();
        }
        std::thread::sleep(Duration::from_millis(300));
        assert!(rx.try_recv().is_err(), "a returning event was reported");
    }
}
