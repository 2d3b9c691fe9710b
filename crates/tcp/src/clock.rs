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
        /// Time of the first tick; the offset of the host's clock.
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
}
