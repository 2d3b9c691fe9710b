//! Delayed ACKs (RFC 5681 §4.2; RFC 9293 §3.8.6.3): acknowledge every
//! `segments`-th segment at once and the others by a timer, but out-of-order
//! data, filled holes and FINs at once.
//!
//! The timer is either a fixed delay on a granularity (lwIP: the ACK goes
//! out on the next 250 ms fast-timer tick) or Linux-like adaptive: the delay
//! (`ato`) follows half the inter-arrival time of data within
//! `[min, max]` (40-200 ms in Linux).

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::{AckDecision, AckFactory, AckPolicy, AckReason, SegmentArrival};
use crate::clock::{Granularity, TimerEpoch};
use crate::serde_duration;

/// How the delayed-ACK deadline is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum DelayedAckTimer {
    /// A fixed delay placed on a timer granularity.
    Fixed {
        /// Longest delay (RFC 5681: less than 500 ms).
        #[serde(with = "serde_duration")]
        delay: SimDuration,
        /// Granularity of the timer (lwIP: ticks of 250 ms).
        #[serde(default)]
        granularity: Granularity,
    },
    /// Adaptive delay between `min` and `max`, as Linux's `ato`.
    Adaptive {
        /// Smallest delay (Linux: 40 ms).
        #[serde(with = "serde_duration")]
        min: SimDuration,
        /// Largest delay (Linux: 200 ms).
        #[serde(with = "serde_duration")]
        max: SimDuration,
    },
}

/// Parameters of the delayed-ACK policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DelayedAckConfig {
    /// Acknowledge at once when this many segments are unacknowledged.
    pub segments: u32,
    /// Count only full-sized segments towards `segments` (RFC 5681 says
    /// "every second full-sized segment"; lwIP counts every segment).
    pub full_sized_only: bool,
    /// The timer.
    pub timer: DelayedAckTimer,
}

impl Default for DelayedAckConfig {
    fn default() -> Self {
        DelayedAckConfig {
            segments: 2,
            full_sized_only: true,
            timer: DelayedAckTimer::Fixed {
                delay: SimDuration::from_millis(200),
                granularity: Granularity::Fine,
            },
        }
    }
}

impl AckFactory for DelayedAckConfig {
    fn name(&self) -> &'static str {
        "delayed"
    }
    fn build(&self) -> Box<dyn AckPolicy> {
        Box::new(DelayedAck::new(*self))
    }
}

/// Per-connection delayed-ACK state.
#[derive(Clone, Debug)]
pub struct DelayedAck {
    config: DelayedAckConfig,
    unacked: u32,
    deadline: Option<SimTime>,
    ato: SimDuration,
    last_arrival: Option<SimTime>,
}

impl DelayedAck {
    /// Fresh state.
    pub fn new(config: DelayedAckConfig) -> Self {
        let ato = match config.timer {
            DelayedAckTimer::Fixed { delay, .. } => delay,
            DelayedAckTimer::Adaptive { min, .. } => min,
        };
        DelayedAck {
            config,
            unacked: 0,
            deadline: None,
            ato,
            last_arrival: None,
        }
    }

    /// The current adaptive delay.
    pub fn ato(&self) -> SimDuration {
        self.ato
    }

    fn adapt(&mut self, now: SimTime) {
        let DelayedAckTimer::Adaptive { min, max } = self.config.timer else {
            return;
        };
        if let Some(last) = self.last_arrival {
            let gap = now - last;
            let half_min = SimDuration::from_nanos(min.as_nanos() / 2);
            let half_ato = SimDuration::from_nanos(self.ato.as_nanos() / 2);
            if gap <= half_min {
                // Back-to-back data: move towards the minimum.
                self.ato = half_ato + half_min;
            } else if gap < self.ato {
                self.ato = half_ato + gap;
            }
            self.ato = self.ato.max(min).min(max);
        }
        self.last_arrival = Some(now);
    }

    fn deadline(&self, now: SimTime) -> SimTime {
        match self.config.timer {
            DelayedAckTimer::Fixed { delay, granularity } => granularity.deadline(now, delay),
            DelayedAckTimer::Adaptive { .. } => now + self.ato,
        }
    }
}

impl AckPolicy for DelayedAck {
    fn name(&self) -> &'static str {
        "delayed"
    }

    fn on_segment(&mut self, now: SimTime, s: &SegmentArrival) -> (AckDecision, Option<AckReason>) {
        self.adapt(now);
        if s.out_of_order || s.fills_gap {
            // RFC 5681 §4.2: out-of-order data and filled holes SHOULD be
            // acknowledged immediately (they drive fast retransmit).
            return (AckDecision::Now, Some(AckReason::Reordering));
        }
        if s.fin {
            return (AckDecision::Now, Some(AckReason::Fin));
        }
        if !self.config.full_sized_only || s.len >= s.mss {
            self.unacked += 1;
        }
        if self.unacked >= self.config.segments.max(1) {
            return (AckDecision::Now, Some(AckReason::SegmentCount));
        }
        let until = match self.deadline {
            Some(until) => until,
            None => {
                let until = self.deadline(now);
                self.deadline = Some(until);
                until
            }
        };
        (AckDecision::Delay { until }, None)
    }

    fn on_ack_sent(&mut self, _now: SimTime) {
        self.unacked = 0;
        self.deadline = None;
    }

    fn place_ticks(&mut self, epoch: &TimerEpoch) {
        if let DelayedAckTimer::Fixed { granularity, .. } = &mut self.config.timer {
            *granularity = epoch.place(*granularity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::test_util::data;

    fn at(ms: u64) -> SimTime {
        SimTime::from_millis(ms)
    }

    #[test]
    fn every_second_full_segment_or_timer() {
        let mut p = DelayedAck::new(DelayedAckConfig::default());
        assert_eq!(
            p.on_segment(at(10), &data(1000)).0,
            AckDecision::Delay { until: at(210) }
        );
        assert_eq!(p.on_segment(at(20), &data(1000)).0, AckDecision::Now);
        p.on_ack_sent(at(20));
        // Small segments do not count but share the first deadline.
        assert_eq!(
            p.on_segment(at(30), &data(10)).0,
            AckDecision::Delay { until: at(230) }
        );
        assert_eq!(
            p.on_segment(at(40), &data(10)).0,
            AckDecision::Delay { until: at(230) }
        );
        let mut ooo = data(1000);
        ooo.out_of_order = true;
        assert_eq!(
            p.on_segment(at(50), &ooo),
            (AckDecision::Now, Some(AckReason::Reordering))
        );
    }

    #[test]
    fn lwip_fast_timer_flushes_on_next_tick() {
        let tick = SimDuration::from_millis(250);
        let mut p = DelayedAck::new(DelayedAckConfig {
            segments: 2,
            full_sized_only: false,
            timer: DelayedAckTimer::Fixed {
                delay: tick,
                granularity: Granularity::ticks(tick, SimDuration::from_millis(100)),
            },
        });
        // Ticks at 100, 350, 600: data at 120 is ACKed at 350.
        assert_eq!(
            p.on_segment(at(120), &data(10)).0,
            AckDecision::Delay { until: at(350) }
        );
        // lwIP counts every segment, small ones too.
        assert_eq!(p.on_segment(at(130), &data(10)).0, AckDecision::Now);
    }

    #[test]
    fn lwip_fast_timer_ticks_from_the_host_timer_start() {
        let tick = SimDuration::from_millis(250);
        let mut p = DelayedAck::new(DelayedAckConfig {
            segments: 2,
            full_sized_only: false,
            timer: DelayedAckTimer::Fixed {
                delay: tick,
                granularity: Granularity::ticks(tick, SimDuration::ZERO),
            },
        });
        // The host's timer started at 300 ms: fast ticks at 550, 800, ...
        p.place_ticks(&TimerEpoch {
            start: at(300),
            elapsed: SimDuration::ZERO,
        });
        assert_eq!(
            p.on_segment(at(560), &data(10)).0,
            AckDecision::Delay { until: at(800) }
        );
    }

    #[test]
    fn adaptive_delay_follows_arrivals_within_bounds() {
        let mut p = DelayedAck::new(DelayedAckConfig {
            segments: 100,
            full_sized_only: true,
            timer: DelayedAckTimer::Adaptive {
                min: SimDuration::from_millis(40),
                max: SimDuration::from_millis(200),
            },
        });
        let _ = p.on_segment(at(0), &data(1000));
        assert_eq!(p.ato(), SimDuration::from_millis(40));
        // Gap 30 ms < ato 40: ato = 20 + 30 = 50.
        let _ = p.on_segment(at(30), &data(1000));
        assert_eq!(p.ato(), SimDuration::from_millis(50));
        // Gap 10 ms <= 20: ato = 25 + 20 = 45.
        let _ = p.on_segment(at(40), &data(1000));
        assert_eq!(p.ato(), SimDuration::from_millis(45));
        // Repeated back-to-back arrivals never go below the minimum.
        for t in 41..100 {
            let _ = p.on_segment(at(t), &data(1000));
        }
        assert_eq!(p.ato(), SimDuration::from_millis(40));
    }
}
