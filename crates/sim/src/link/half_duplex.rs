//! Half-duplex point-to-point link: one frame crosses at a time, in either
//! direction, and both attached interfaces are told when the medium turns
//! busy and free.
//!
//! How long a frame occupies the medium is a [`MediumTiming`] plug-in. The
//! default, [`RateDelay`], is serialisation plus propagation; a slotted
//! medium (NFC) supplies its own timing without touching the queueing and
//! notification logic here.

use std::collections::VecDeque;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use super::p2p::{RawWired, WiredSpec};
use super::{
    admit, DirectionStats, Frame, LinkCheck, LinkModel, LinkOut, LinkOutput, Port, ScenarioLink,
};
use crate::config::{Attachment, ScenarioError};
use crate::pool::PacketId;
use crate::rng::SimRng;
use crate::trace::DropReason;

/// When a frame that starts crossing reaches the other end and when the
/// medium is free again (`free_at >= deliver_at`; the difference is a
/// turnaround or guard time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// The frame's last bit arrives.
    pub deliver_at: SimTime,
    /// The next frame may start.
    pub free_at: SimTime,
}

/// How long frames hold a half-duplex medium.
pub trait MediumTiming {
    /// The earliest instant at or after `now` at which a frame may start
    /// (a slotted medium answers its next slot boundary).
    fn earliest_start(&self, now: SimTime) -> SimTime {
        now
    }

    /// The occupancy of a frame of `len` bytes sent from `from` at `start`.
    fn occupy(&mut self, start: SimTime, from: Port, len: u32) -> Occupancy;
}

/// Serialisation at a fixed rate plus a propagation delay; the medium is
/// free once the last bit has arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateDelay {
    /// Bits per second.
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: SimDuration,
}

impl MediumTiming for RateDelay {
    fn occupy(&mut self, start: SimTime, _from: Port, len: u32) -> Occupancy {
        let end = start + SimDuration::transmission(u64::from(len), self.rate_bps) + self.delay;
        Occupancy {
            deliver_at: end,
            free_at: end,
        }
    }
}

/// Queueing and loss parameters of a [`HalfDuplexLink`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HalfDuplexConfig {
    /// Frames that may wait at each end, excluding the one crossing.
    pub queue_capacity: usize,
    /// Probability in [0, 1] that a frame is lost in transit.
    pub loss: f64,
}

/// Counters of a [`HalfDuplexLink`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HalfDuplexStats {
    /// `directions[p]` counts frames sent from port `p`.
    pub directions: [DirectionStats; 2],
    /// Number of busy periods (one per frame).
    pub busy_periods: u64,
    /// Total time the medium was busy, in ns.
    pub busy_ns: u64,
}

#[derive(Debug)]
struct Crossing<P> {
    from: Port,
    frame: Frame<P>,
    deliver_at: SimTime,
}

/// A half-duplex link between ports 0 and 1.
///
/// When both ends have frames waiting, they take turns, so neither direction
/// can starve the other.
#[derive(Debug)]
pub struct HalfDuplexLink<P, T = RateDelay> {
    timing: T,
    config: HalfDuplexConfig,
    queues: [VecDeque<Frame<P>>; 2],
    crossing: Option<Crossing<P>>,
    /// `(start, free_at)` of the current busy period.
    busy: Option<(SimTime, SimTime)>,
    /// A start deferred to the medium's next allowed instant.
    pending_start: Option<SimTime>,
    next_turn: Port,
    rng: SimRng,
    stats: HalfDuplexStats,
}

impl<P: Copy, T: MediumTiming> HalfDuplexLink<P, T> {
    /// A new idle link; `rng` decides random losses.
    pub fn new(timing: T, config: HalfDuplexConfig, rng: SimRng) -> Self {
        HalfDuplexLink {
            timing,
            config,
            queues: [VecDeque::new(), VecDeque::new()],
            crossing: None,
            busy: None,
            pending_start: None,
            next_turn: 0,
            rng,
            stats: HalfDuplexStats {
                directions: [DirectionStats::default(); 2],
                busy_periods: 0,
                busy_ns: 0,
            },
        }
    }

    /// The medium timing plug-in.
    pub fn timing(&self) -> &T {
        &self.timing
    }

    /// Whether a frame holds the medium at `now`.
    pub fn is_busy(&self, now: SimTime) -> bool {
        self.busy
            .is_some_and(|(start, free_at)| start <= now && now < free_at)
    }

    /// When the frame holding the medium frees it, if one does.
    pub fn busy_until(&self) -> Option<SimTime> {
        self.busy.map(|(_, free_at)| free_at)
    }

    /// Hands a frame from port `from` (0 or 1) to the link.
    pub fn transmit(&mut self, now: SimTime, from: Port, frame: Frame<P>, out: &mut LinkOut<P>) {
        self.handle_timeout(now, out);
        let idle = self.busy.is_none()
            && self.pending_start.is_none()
            && self.queues.iter().all(VecDeque::is_empty);
        let queue = &mut self.queues[from as usize];
        let stats = &mut self.stats.directions[from as usize];
        let full = !idle && queue.len() >= self.config.queue_capacity;
        let counters = (&mut stats.enqueued, &mut stats.dropped_queue_full);
        if !admit(from, frame, queue.len(), full, counters, out) {
            return;
        }
        queue.push_back(frame);
        if idle {
            self.schedule_start(now, now, out);
        }
        let waiting = self.queues[from as usize].len() as u64;
        let stats = &mut self.stats.directions[from as usize];
        stats.max_queue_len = stats.max_queue_len.max(waiting);
    }

    /// Processes deliveries, the medium turning free, and deferred starts
    /// due at or before `now`.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        loop {
            if let Some(c) = &self.crossing {
                if c.deliver_at <= now {
                    self.deliver(out);
                    continue;
                }
            }
            if let (None, Some((start, free_at))) = (&self.crossing, self.busy) {
                if free_at <= now {
                    self.busy = None;
                    self.stats.busy_ns += (free_at - start).as_nanos();
                    out.push(LinkOutput::MediumFree { port: 0 });
                    out.push(LinkOutput::MediumFree { port: 1 });
                    self.schedule_start(free_at, now, out);
                    continue;
                }
            }
            if let (None, Some(at)) = (self.busy, self.pending_start) {
                if at <= now {
                    self.pending_start = None;
                    self.start(at, out);
                    continue;
                }
            }
            break;
        }
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        [
            self.crossing.as_ref().map(|c| c.deliver_at),
            self.busy.map(|(_, free_at)| free_at),
            self.pending_start,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> HalfDuplexStats {
        self.stats.clone()
    }

    /// With the medium free since `free_since`, starts the next waiting
    /// frame now or defers it to the medium's next allowed instant.
    fn schedule_start(&mut self, free_since: SimTime, now: SimTime, out: &mut LinkOut<P>) {
        if self.queues.iter().all(VecDeque::is_empty) {
            return;
        }
        let at = self.timing.earliest_start(free_since);
        if at <= now {
            self.start(at, out);
        } else {
            self.pending_start = Some(at);
        }
    }

    fn start(&mut self, at: SimTime, out: &mut LinkOut<P>) {
        let from = if self.queues[self.next_turn as usize].is_empty() {
            1 - self.next_turn
        } else {
            self.next_turn
        };
        let Some(frame) = self.queues[from as usize].pop_front() else {
            return;
        };
        let occupancy = self.timing.occupy(at, from, frame.len);
        let free_at = occupancy.free_at.max(occupancy.deliver_at);
        self.crossing = Some(Crossing {
            from,
            frame,
            deliver_at: occupancy.deliver_at,
        });
        self.busy = Some((at, free_at));
        self.next_turn = 1 - from;
        let stats = &mut self.stats.directions[from as usize];
        stats.sent_packets += 1;
        stats.sent_bytes += u64::from(frame.len);
        stats.busy_ns += (free_at - at).as_nanos();
        self.stats.busy_periods += 1;
        out.push(LinkOutput::MediumBusy {
            port: 0,
            until: free_at,
        });
        out.push(LinkOutput::MediumBusy {
            port: 1,
            until: free_at,
        });
        out.push(LinkOutput::TxStart { port: from, frame });
    }

    fn deliver(&mut self, out: &mut LinkOut<P>) {
        let Some(Crossing { from, frame, .. }) = self.crossing.take() else {
            return;
        };
        let to = 1 - from;
        let stats = &mut self.stats.directions[from as usize];
        let loss = self.config.loss;
        if loss > 0.0 && self.rng.gen_bool(loss) {
            stats.dropped_random_loss += 1;
            out.push(LinkOutput::Dropped {
                port: to,
                frame,
                reason: DropReason::RandomLoss,
            });
        } else {
            stats.delivered_packets += 1;
            stats.delivered_bytes += u64::from(frame.len);
            out.push(LinkOutput::Delivered { port: to, frame });
        }
    }
}

impl<P: Copy, T: MediumTiming> LinkModel<P> for HalfDuplexLink<P, T> {
    type Stats = HalfDuplexStats;

    #[inline]
    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        _to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        HalfDuplexLink::transmit(self, now, from, frame, out);
    }

    #[inline]
    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        HalfDuplexLink::handle_timeout(self, now, out);
    }

    #[inline]
    fn poll_timeout(&self) -> Option<SimTime> {
        HalfDuplexLink::poll_timeout(self)
    }

    fn stats(&self, _now: SimTime) -> HalfDuplexStats {
        HalfDuplexLink::stats(self)
    }

    fn carrier_sense(&self, _port: Port, now: SimTime) -> bool {
        self.is_busy(now)
    }
}

/// `kind = "half-duplex"`: a [`HalfDuplexLink`] with rate-and-delay
/// timing; the same fields as `point-to-point`.
#[derive(Clone, Debug, PartialEq)]
pub struct HalfDuplexSpec(pub WiredSpec);

impl ScenarioLink for HalfDuplexSpec {
    const KIND: &'static str = "half-duplex";
    type Raw = RawWired;
    type Model = HalfDuplexLink<PacketId>;

    fn validate(raw: RawWired, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        let spec = WiredSpec::validate(raw, cx)?;
        if spec.jitter != super::Jitter::None {
            return Err(ScenarioError::new(
                cx.at("jitter"),
                "only a point-to-point link takes jitter".to_string(),
            ));
        }
        Ok(HalfDuplexSpec(spec))
    }

    fn rate_bps(&self) -> u64 {
        self.0.rate_bps
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.0.attachments()
    }

    fn build(&self, rng: SimRng) -> HalfDuplexLink<PacketId> {
        let w = &self.0;
        HalfDuplexLink::new(
            RateDelay {
                rate_bps: w.rate_bps,
                delay: w.delay,
            },
            HalfDuplexConfig {
                queue_capacity: w.queue,
                loss: w.loss,
            },
            rng,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Emitted, LinkTrace};
    use crate::rng::component_stream;
    use LinkOutput::*;

    fn frame(id: u32) -> Frame<u32> {
        Frame {
            packet: id,
            len: 100,
        }
    }

    fn us(n: u64) -> SimTime {
        SimTime::from_micros(n)
    }

    fn run<T: MediumTiming>(l: &mut HalfDuplexLink<u32, T>) -> Vec<(SimTime, LinkOutput<u32>)> {
        let mut out = LinkOut::new();
        let mut log = Vec::new();
        while let Some(t) = l.poll_timeout() {
            l.handle_timeout(t, &mut out);
            log.extend(out.drain(..).map(|o| (t, o)));
        }
        log
    }

    /// A slotted medium: frames start on 1 ms boundaries and hold the
    /// medium for exactly one slot.
    struct Slotted;
    impl MediumTiming for Slotted {
        fn earliest_start(&self, now: SimTime) -> SimTime {
            SimTime::from_millis(now.as_nanos().div_ceil(1_000_000))
        }
        fn occupy(&mut self, start: SimTime, _: Port, _: u32) -> Occupancy {
            Occupancy {
                deliver_at: start + SimDuration::from_micros(800),
                free_at: start + SimDuration::from_millis(1),
            }
        }
    }

    #[test]
    fn pluggable_timing_defers_starts_to_slot_boundaries() {
        let config = HalfDuplexConfig {
            queue_capacity: 4,
            loss: 0.0,
        };
        let mut l = HalfDuplexLink::new(Slotted, config, component_stream(1, "t"));
        let mut out = LinkOut::traced();
        l.transmit(us(300), 0, frame(1), &mut out);
        assert_eq!(
            out.take_all(),
            [Emitted::Trace(LinkTrace::Enqueued {
                port: 0,
                frame: frame(1),
                queue_len: 0
            })]
        );
        assert_eq!(l.poll_timeout(), Some(us(1000)));
        let log = run(&mut l);
        assert_eq!(
            log[2],
            (
                us(1000),
                TxStart {
                    port: 0,
                    frame: frame(1)
                }
            )
        );
        assert_eq!(
            log[3],
            (
                us(1800),
                Delivered {
                    port: 1,
                    frame: frame(1)
                }
            )
        );
        assert_eq!(log[4], (us(2000), MediumFree { port: 0 }));
    }

    #[test]
    fn busy_medium_queues_and_full_queue_drops() {
        let rate = RateDelay {
            rate_bps: 8_000_000,
            delay: SimDuration::ZERO,
        };
        let config = HalfDuplexConfig {
            queue_capacity: 1,
            loss: 0.0,
        };
        let mut l = HalfDuplexLink::new(rate, config, component_stream(1, "t"));
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1), &mut out);
        l.transmit(SimTime::ZERO, 0, frame(2), &mut out);
        l.transmit(SimTime::ZERO, 0, frame(3), &mut out);
        assert_eq!(
            out.last(),
            Some(&Dropped {
                port: 0,
                frame: frame(3),
                reason: DropReason::QueueFull
            })
        );
        assert!(l.is_busy(us(50)));
        run(&mut l);
        assert!(!l.is_busy(us(250)));
        let s = l.stats();
        assert_eq!((s.busy_periods, s.busy_ns), (2, 200_000));
    }

    /// Busy/free notifications reach both ends in order, at exact times, and
    /// frames from the two ends take turns: one crosses at a time.
    #[test]
    fn busy_free_notifications_one_frame_at_a_time() {
        let rate = RateDelay {
            rate_bps: 8_000_000,
            delay: SimDuration::from_micros(50),
        };
        let config = HalfDuplexConfig {
            queue_capacity: 8,
            loss: 0.0,
        };
        let mut l = HalfDuplexLink::new(rate, config, component_stream(1, "t"));
        let mut out = LinkOut::traced();
        l.transmit(SimTime::ZERO, 0, frame(1), &mut out);
        l.transmit(SimTime::ZERO, 1, frame(2), &mut out);
        l.transmit(SimTime::ZERO, 0, frame(3), &mut out);
        // Trace records in their place among the outputs.
        let mut log: Vec<_> = out
            .take_all()
            .into_iter()
            .map(|o| (SimTime::ZERO, o))
            .collect();
        log.extend(
            run(&mut l)
                .into_iter()
                .map(|(t, o)| (t, Emitted::Output(o))),
        );
        let expected = [
            (
                us(0),
                Emitted::Trace(LinkTrace::Enqueued {
                    port: 0,
                    frame: frame(1),
                    queue_len: 0,
                }),
            ),
            (
                us(0),
                Emitted::Output(MediumBusy {
                    port: 0,
                    until: us(150),
                }),
            ),
            (
                us(0),
                Emitted::Output(MediumBusy {
                    port: 1,
                    until: us(150),
                }),
            ),
            (
                us(0),
                Emitted::Output(TxStart {
                    port: 0,
                    frame: frame(1),
                }),
            ),
            (
                us(0),
                Emitted::Trace(LinkTrace::Enqueued {
                    port: 1,
                    frame: frame(2),
                    queue_len: 0,
                }),
            ),
            (
                us(0),
                Emitted::Trace(LinkTrace::Enqueued {
                    port: 0,
                    frame: frame(3),
                    queue_len: 0,
                }),
            ),
            (
                us(150),
                Emitted::Output(Delivered {
                    port: 1,
                    frame: frame(1),
                }),
            ),
            (us(150), Emitted::Output(MediumFree { port: 0 })),
            (us(150), Emitted::Output(MediumFree { port: 1 })),
            (
                us(150),
                Emitted::Output(MediumBusy {
                    port: 0,
                    until: us(300),
                }),
            ),
            (
                us(150),
                Emitted::Output(MediumBusy {
                    port: 1,
                    until: us(300),
                }),
            ),
            (
                us(150),
                Emitted::Output(TxStart {
                    port: 1,
                    frame: frame(2),
                }),
            ),
            (
                us(300),
                Emitted::Output(Delivered {
                    port: 0,
                    frame: frame(2),
                }),
            ),
            (us(300), Emitted::Output(MediumFree { port: 0 })),
            (us(300), Emitted::Output(MediumFree { port: 1 })),
            (
                us(300),
                Emitted::Output(MediumBusy {
                    port: 0,
                    until: us(450),
                }),
            ),
            (
                us(300),
                Emitted::Output(MediumBusy {
                    port: 1,
                    until: us(450),
                }),
            ),
            (
                us(300),
                Emitted::Output(TxStart {
                    port: 0,
                    frame: frame(3),
                }),
            ),
            (
                us(450),
                Emitted::Output(Delivered {
                    port: 1,
                    frame: frame(3),
                }),
            ),
            (us(450), Emitted::Output(MediumFree { port: 0 })),
            (us(450), Emitted::Output(MediumFree { port: 1 })),
        ];
        assert_eq!(log, expected);
        assert_eq!(l.poll_timeout(), None);
    }
}
