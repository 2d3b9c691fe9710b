//! The events of the simulator's future event list. They live below every
//! component that schedules them (apps set timers, links and hosts ask to
//! be woken) so none of those needs the simulator itself.

use rtolab_time::SimTime;

/// The earlier of two deadlines, either possibly unset. Models poll their
/// parts' deadlines after every input, so this is written out rather than
/// built from iterator adapters (`[..].into_iter().flatten().min()`), which
/// cost several times as much there.
#[inline]
pub(crate) fn earliest(a: Option<SimTime>, b: Option<SimTime>) -> Option<SimTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// A scheduled event. Small and `Copy`: the heap moves these around.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    /// A link's deadline; stale unless `generation` is the link's current one.
    LinkWakeup { link: u32, generation: u32 },
    /// Call an app's `on_start`.
    AppStart { app: u32 },
    /// Call an app's `on_timer`.
    AppTimer { app: u32, token: u64 },
    /// A host's TCP deadline; stale unless `generation` is the host's
    /// current one.
    TcpTimer { node: u32, generation: u32 },
    /// A middlebox's deadline; stale unless `generation` is its current one.
    MiddleboxWakeup { middlebox: u32, generation: u32 },
}
