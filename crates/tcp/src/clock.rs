//! Timer granularity: how a requested delay becomes a deadline.
//!
//! Stacks such as lwIP and uIP do not run one timer per event; they count
//! periodic ticks of a free-running clock. A timer of `k` ticks set at an
//! arbitrary moment fires on the `k`-th tick after it was set, that is between
//! `k - 1` and `k` tick periods later. Coarse timers therefore fire up to one
//! period early, which matters on slow links (bridge spec §1.3), so the engine
//! models it instead of rounding delays.

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use crate::serde_duration;

/// How deadlines are placed on the time axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Granularity {
    /// Deadlines are exact: a delay `d` set at `t` fires at `t + d`.
    #[default]
    Fine,
    /// A periodic tick at `phase + n * period` (n = 0, 1, 2, ...); a delay is
    /// rounded up to whole ticks and fires on a tick boundary.
    Ticks {
        /// Tick period (lwIP slow timer: 500 ms, fast timer: 250 ms).
        #[serde(with = "serde_duration")]
        period: SimDuration,
        /// Time of the first tick; the offset of the host's clock. Counted
        /// from the start of the host's timer instead of time zero under
        /// [`TimerStart::FirstConnection`].
        #[serde(with = "serde_duration", default)]
        phase: SimDuration,
    },
}

impl Granularity {
    /// Coarse ticks of `period` starting at `phase`.
    pub const fn ticks(period: SimDuration, phase: SimDuration) -> Self {
        Granularity::Ticks { period, phase }
    }

    /// The tick period, or `None` for fine-grained timers.
    pub fn period(&self) -> Option<SimDuration> {
        match *self {
            Granularity::Fine => None,
            Granularity::Ticks { period, .. } if !period.is_zero() => Some(period),
            Granularity::Ticks { .. } => None,
        }
    }

    /// Number of ticks that have happened at or before `now` (a free-running
    /// tick counter such as lwIP's `tcp_ticks`); always 0 for fine timers.
    pub fn ticks_at(&self, now: SimTime) -> u64 {
        match (*self, self.period()) {
            (Granularity::Ticks { phase, .. }, Some(period)) => {
                let since = now.since_start();
                if since < phase {
                    0
                } else {
                    (since - phase).as_nanos() / period.as_nanos() + 1
                }
            }
            _ => 0,
        }
    }

    /// Time of the `n`-th tick (n counted as in [`Granularity::ticks_at`]).
    fn tick_time(&self, n: u64) -> SimTime {
        match (*self, self.period()) {
            (Granularity::Ticks { phase, .. }, Some(period)) if n > 0 => {
                SimTime::ZERO + phase + period.saturating_mul(n - 1)
            }
            _ => SimTime::ZERO,
        }
    }

    /// Deadline of a timer of `delay` set at `now`.
    ///
    /// With ticks, the delay is rounded up to `k` whole periods (at least one)
    /// and the timer fires on the `k`-th tick strictly after `now`.
    pub fn deadline(&self, now: SimTime, delay: SimDuration) -> SimTime {
        match self.period() {
            None => now + delay,
            Some(period) => {
                let k = delay.as_nanos().div_ceil(period.as_nanos()).max(1);
                self.tick_time(self.ticks_at(now).saturating_add(k))
            }
        }
    }

    /// Converts a delay to whole ticks, rounding up; `None` for fine timers.
    pub fn to_ticks(&self, delay: SimDuration) -> Option<u64> {
        self.period()
            .map(|p| delay.as_nanos().div_ceil(p.as_nanos()))
    }
}

/// When a host's tick timers start (a profile's `timer_start`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TimerStart {
    /// The grids run from time zero, for ever, as their phases say.
    #[default]
    Zero,
    /// The grids run on a host clock that starts when the host's first
    /// connection opens (its SYN is sent, or a listener receives a SYN) and
    /// stops at the first tick after the host has no connection left (none
    /// open, none in TIME-WAIT); the next connection starts it again where
    /// it stopped. The grids' phases count on that clock. This is lwIP
    /// 2.1's TCP timer: `tcp_timer_needed` (src/core/timeouts.c), called
    /// by `TCP_REG` when a control block joins the active or TIME-WAIT
    /// list, arms `tcpip_tcp_timer` 250 ms ahead; that handler calls
    /// `tcp_tmr` (src/core/tcp.c) and re-arms only while either list is
    /// non-empty; `tcp_tmr` runs the slow timer on odd values of a counter
    /// (`++tcp_timer & 1`) that no restart resets.
    FirstConnection,
}

/// Where a host's timer clock stands at a restart: the grids of a profile
/// with [`TimerStart::FirstConnection`] count time on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerEpoch {
    /// When the host's timer (re)started.
    pub start: SimTime,
    /// How long the host's timer had run before `start`, in whole ticks of
    /// the host's timer.
    pub elapsed: SimDuration,
}

impl TimerEpoch {
    /// `grid`, whose ticks count on the host's timer clock, as ticks on the
    /// time axis from this epoch on: the first tick is the grid's first one
    /// strictly after the clock reading `elapsed` (a tick at `elapsed`
    /// itself happened before the timer stopped, or at the very start,
    /// when nothing is timed yet). Fine grids are left as they are.
    pub fn place(&self, grid: Granularity) -> Granularity {
        let (Granularity::Ticks { phase, .. }, Some(period)) = (grid, grid.period()) else {
            return grid;
        };
        let first = if self.elapsed < phase {
            phase
        } else {
            let passed = (self.elapsed - phase).as_nanos() / period.as_nanos();
            phase + period.saturating_mul(passed + 1)
        };
        Granularity::ticks(period, self.start.since_start() + (first - self.elapsed))
    }
}

/// A host's tick timer under [`TimerStart::FirstConnection`]: which epoch
/// a connection opening now runs in. The host's timer ticks every `base`
/// from each start; the stack says whether any connection is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostTimer {
    base: SimDuration,
    /// The running epoch, or the last one.
    epoch: Option<TimerEpoch>,
}

impl HostTimer {
    /// A stopped timer that has never run, ticking every `base` once it
    /// runs (lwIP: `TCP_TMR_INTERVAL`, 250 ms). `None` if `base` is zero.
    pub fn new(base: SimDuration) -> Option<HostTimer> {
        (!base.is_zero()).then_some(HostTimer { base, epoch: None })
    }

    /// The tick of the host's timer that runs the grids of a profile: the
    /// greatest common divisor of their periods (lwIP: 250 ms for the
    /// 500 ms slow and 250 ms fast timers), `None` without tick grids.
    pub fn base_of(grids: &[Granularity]) -> Option<SimDuration> {
        let gcd = grids
            .iter()
            .filter_map(Granularity::period)
            .map(|p| p.as_nanos())
            .reduce(|mut a, mut b| {
                while b != 0 {
                    (a, b) = (b, a % b);
                }
                a
            })?;
        Some(SimDuration::from_nanos(gcd))
    }

    /// A connection opens at `now`: the epoch it runs in. `idle_since` is
    /// `None` while the host still has a connection (open or in
    /// TIME-WAIT), else when its last one went. The timer keeps running
    /// until its first tick at or after that moment (the handler checks
    /// the lists after each tick), so a connection opening before that
    /// tick joins the running epoch; otherwise the timer restarts at `now`
    /// with the ticks it had run.
    pub fn open(&mut self, now: SimTime, idle_since: Option<SimTime>) -> TimerEpoch {
        let epoch = match (self.epoch, idle_since) {
            (None, _) => TimerEpoch {
                start: now,
                elapsed: SimDuration::ZERO,
            },
            (Some(running), None) => running,
            (Some(last), Some(gone)) => {
                let ran = gone.saturating_since(last.start);
                let ticks = ran.as_nanos().div_ceil(self.base.as_nanos()).max(1);
                let ran = self.base.saturating_mul(ticks);
                if last.start + ran > now {
                    last
                } else {
                    TimerEpoch {
                        start: now,
                        elapsed: last.elapsed + ran,
                    }
                }
            }
        };
        self.epoch = Some(epoch);
        epoch
    }
}

/// Floor of every timer that re-arms itself (retransmission, persist, and
/// the ticks the lwIP and uIP timers count): 1 ms, the finest timer of any
/// stack modelled (a Linux jiffy at HZ=1000). A shorter one only makes
/// simulated time crawl: at zero it fires forever at one instant.
pub const MIN_TIMER: SimDuration = SimDuration::from_millis(1);

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> SimDuration {
        SimDuration::from_millis(v)
    }
    fn at(v: u64) -> SimTime {
        SimTime::from_millis(v)
    }

    #[test]
    fn fine_deadline_is_exact() {
        assert_eq!(Granularity::Fine.deadline(at(7), ms(300)), at(307));
        assert_eq!(Granularity::Fine.ticks_at(at(7)), 0);
    }

    #[test]
    fn tick_counter_counts_boundaries() {
        let g = Granularity::ticks(ms(500), ms(100));
        assert_eq!(g.ticks_at(at(0)), 0);
        assert_eq!(g.ticks_at(at(99)), 0);
        assert_eq!(g.ticks_at(at(100)), 1);
        assert_eq!(g.ticks_at(at(599)), 1);
        assert_eq!(g.ticks_at(at(600)), 2);
    }

    #[test]
    fn coarse_timer_fires_between_k_minus_one_and_k_periods() {
        // Ticks at 0, 500, 1000, ... A 2-tick (1 s) timer set just before a
        // tick fires only just over half a period later; set just after a
        // tick it fires almost a full 2 periods later.
        let g = Granularity::ticks(ms(500), ms(0));
        assert_eq!(g.deadline(at(499), ms(1000)), at(1000));
        assert_eq!(g.deadline(at(500), ms(1000)), at(1500));
        assert_eq!(g.deadline(at(501), ms(1000)), at(1500));
        // Delays round up to whole ticks, and never to zero ticks.
        assert_eq!(g.deadline(at(10), ms(600)), at(1000));
        assert_eq!(g.deadline(at(10), ms(0)), at(500));
        assert_eq!(g.to_ticks(ms(1001)), Some(3));
    }

    /// lwIP's grids: slow timer on the first of every two 250 ms ticks,
    /// delayed ACKs on every tick.
    fn slow() -> Granularity {
        Granularity::ticks(ms(500), ms(250))
    }
    fn fast() -> Granularity {
        Granularity::ticks(ms(250), ms(0))
    }
    fn epoch(start: u64, elapsed: u64) -> TimerEpoch {
        TimerEpoch {
            start: at(start),
            elapsed: ms(elapsed),
        }
    }

    #[test]
    fn a_first_epoch_moves_the_grids_to_its_start() {
        // Timer started at 300 ms: ticks at 550, 800, 1050, ...; the
        // counter is 1 at 550 (slow), 2 at 800, 3 at 1050 (slow).
        let e = epoch(300, 0);
        assert_eq!(e.place(slow()), Granularity::ticks(ms(500), ms(550)));
        assert_eq!(e.place(fast()), Granularity::ticks(ms(250), ms(550)));
        assert_eq!(e.place(Granularity::Fine), Granularity::Fine);
        // A 1 s timer set at 560 ms fires on the second slow tick after it.
        assert_eq!(e.place(slow()).deadline(at(560), ms(1000)), at(1550));
    }

    #[test]
    fn a_restart_continues_the_slow_timer_parity() {
        // After an odd number of ticks the next tick is fast only: the slow
        // timer runs on the restart's second tick.
        assert_eq!(
            epoch(10_000, 250).place(slow()),
            Granularity::ticks(ms(500), ms(10_500))
        );
        assert_eq!(
            epoch(10_000, 750).place(slow()),
            Granularity::ticks(ms(500), ms(10_500))
        );
        // After an even number, on its first.
        assert_eq!(
            epoch(10_000, 1000).place(slow()),
            Granularity::ticks(ms(500), ms(10_250))
        );
        assert_eq!(
            epoch(10_000, 250).place(fast()),
            Granularity::ticks(ms(250), ms(10_250))
        );
    }

    #[test]
    fn the_host_timer_ticks_at_the_gcd_of_the_grids() {
        assert_eq!(HostTimer::base_of(&[slow(), fast()]), Some(ms(250)));
        assert_eq!(
            HostTimer::base_of(&[Granularity::ticks(ms(300), ms(0)), slow()]),
            Some(ms(100))
        );
        assert_eq!(
            HostTimer::base_of(&[slow(), Granularity::Fine]),
            Some(ms(500))
        );
        assert_eq!(HostTimer::base_of(&[Granularity::Fine]), None);
        assert_eq!(HostTimer::new(SimDuration::ZERO), None);
    }

    #[test]
    fn the_host_timer_stops_at_the_first_tick_after_the_last_connection() {
        let mut t = HostTimer::new(ms(250)).unwrap();
        assert_eq!(t.open(at(300), None), epoch(300, 0));
        // Still running: a second connection joins the same epoch.
        assert_eq!(t.open(at(900), None), epoch(300, 0));
        // The last connection went at 1000 ms; the tick at 1050 ms (the
        // third) stops the timer. A connection opening before it joins.
        assert_eq!(t.open(at(1049), Some(at(1000))), epoch(300, 0));
        // At the tick or later, the timer restarts with 750 ms run.
        assert_eq!(t.open(at(1050), Some(at(1000))), epoch(1050, 750));
        assert_eq!(t.open(at(5000), None), epoch(1050, 750));
        let mut t = HostTimer::new(ms(250)).unwrap();
        t.open(at(0), None);
        // Gone on a tick: that tick stops it; gone at the start: the first.
        assert_eq!(t.open(at(700), Some(at(500))), epoch(700, 500));
        assert_eq!(t.open(at(800), Some(at(700))), epoch(700, 500));
        assert_eq!(t.open(at(950), Some(at(700))), epoch(950, 750));
    }
}
