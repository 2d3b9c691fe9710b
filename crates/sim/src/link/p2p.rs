//! Full-duplex point-to-point link: a rate, a propagation delay, a drop-tail
//! queue at each end and optional Bernoulli loss.

use std::collections::VecDeque;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use super::{DirectionStats, Frame, LinkOutput, Port};
use crate::rng::SimRng;
use crate::trace::DropReason;

/// Parameters of a [`P2pLink`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct P2pConfig {
    /// Serialisation rate in bits per second, the same in both directions.
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: SimDuration,
    /// Frames that may wait at each end, excluding the one being sent.
    pub queue_capacity: usize,
    /// Probability in [0, 1] that a frame is lost in transit.
    pub loss: f64,
}

/// Counters of a [`P2pLink`], indexed by sending port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct P2pStats {
    /// `directions[p]` counts frames sent from port `p`.
    pub directions: [DirectionStats; 2],
}

#[derive(Debug)]
struct Direction<P> {
    queue: VecDeque<Frame<P>>,
    /// End of the current transmission; the sender is idle once it passed.
    busy_until: SimTime,
    /// Frames on the wire, in arrival order (the delay is constant).
    in_flight: VecDeque<(SimTime, Frame<P>)>,
    /// The last frame length sent and its serialisation time: a direction
    /// mostly carries one size, and the time takes a 128-bit division.
    last_tx: (u32, SimDuration),
    stats: DirectionStats,
}

impl<P> Direction<P> {
    fn new() -> Self {
        Direction {
            queue: VecDeque::new(),
            busy_until: SimTime::ZERO,
            in_flight: VecDeque::new(),
            last_tx: (u32::MAX, SimDuration::ZERO),
            stats: DirectionStats::default(),
        }
    }

    fn next_deadline(&self) -> Option<SimTime> {
        let start = (!self.queue.is_empty()).then_some(self.busy_until);
        let arrival = self.in_flight.front().map(|(t, _)| *t);
        match (start, arrival) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A full-duplex point-to-point link between ports 0 and 1.
#[derive(Debug)]
pub struct P2pLink<P> {
    config: P2pConfig,
    dirs: [Direction<P>; 2],
    rng: SimRng,
}

impl<P: Copy> P2pLink<P> {
    /// A new idle link; `rng` decides random losses.
    pub fn new(config: P2pConfig, rng: SimRng) -> Self {
        P2pLink {
            config,
            dirs: [Direction::new(), Direction::new()],
            rng,
        }
    }

    /// The link's parameters.
    pub fn config(&self) -> &P2pConfig {
        &self.config
    }

    /// Hands a frame from port `from` (0 or 1) to the link.
    pub fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        out: &mut Vec<LinkOutput<P>>,
    ) {
        self.handle_timeout(now, out);
        let capacity = self.config.queue_capacity;
        let dir = &mut self.dirs[from as usize];
        let idle = dir.busy_until <= now && dir.queue.is_empty();
        if !idle && dir.queue.len() >= capacity {
            dir.stats.dropped_queue_full += 1;
            out.push(LinkOutput::Dropped {
                port: from,
                frame,
                reason: DropReason::QueueFull,
            });
            return;
        }
        dir.stats.enqueued += 1;
        out.push(LinkOutput::Enqueued {
            port: from,
            frame,
            queue_len: dir.queue.len() as u32,
        });
        dir.queue.push_back(frame);
        if idle {
            self.start_next(now, from, out);
        }
        let dir = &mut self.dirs[from as usize];
        dir.stats.max_queue_len = dir.stats.max_queue_len.max(dir.queue.len() as u64);
    }

    /// Delivers arrivals and starts queued frames due at or before `now`.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut Vec<LinkOutput<P>>) {
        for from in 0..2u32 {
            loop {
                let dir = &self.dirs[from as usize];
                let arrival = dir.in_flight.front().map(|(t, _)| *t);
                let start = (!dir.queue.is_empty()).then_some(dir.busy_until);
                // Handle whichever is earlier, arrivals first on ties, so a
                // late call replays the same history as a punctual one.
                match (arrival, start) {
                    (Some(a), Some(s)) if a <= now && a <= s => self.arrive(from, out),
                    (Some(a), None) if a <= now => self.arrive(from, out),
                    (_, Some(s)) if s <= now => self.start_next(s, from, out),
                    _ => break,
                }
            }
        }
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        match (self.dirs[0].next_deadline(), self.dirs[1].next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> P2pStats {
        P2pStats {
            directions: [self.dirs[0].stats, self.dirs[1].stats],
        }
    }

    fn start_next(&mut self, at: SimTime, from: Port, out: &mut Vec<LinkOutput<P>>) {
        let dir = &mut self.dirs[from as usize];
        let Some(frame) = dir.queue.pop_front() else {
            return;
        };
        let tx = match dir.last_tx {
            (len, tx) if len == frame.len => tx,
            _ => {
                let tx = SimDuration::transmission(u64::from(frame.len), self.config.rate_bps);
                dir.last_tx = (frame.len, tx);
                tx
            }
        };
        dir.busy_until = at + tx;
        dir.in_flight
            .push_back((dir.busy_until + self.config.delay, frame));
        dir.stats.sent_packets += 1;
        dir.stats.sent_bytes += u64::from(frame.len);
        dir.stats.busy_ns += tx.as_nanos();
        out.push(LinkOutput::TxStart { port: from, frame });
    }

    fn arrive(&mut self, from: Port, out: &mut Vec<LinkOutput<P>>) {
        let dir = &mut self.dirs[from as usize];
        let Some((_, frame)) = dir.in_flight.pop_front() else {
            return;
        };
        let to = 1 - from;
        let loss = self.config.loss;
        if loss > 0.0 && self.rng.gen_bool(loss) {
            dir.stats.dropped_random_loss += 1;
            out.push(LinkOutput::Dropped {
                port: to,
                frame,
                reason: DropReason::RandomLoss,
            });
        } else {
            dir.stats.delivered_packets += 1;
            dir.stats.delivered_bytes += u64::from(frame.len);
            out.push(LinkOutput::Delivered { port: to, frame });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::component_stream;

    fn link(loss: f64, queue: usize) -> P2pLink<u32> {
        P2pLink::new(
            P2pConfig {
                rate_bps: 8_000_000, // 1 byte per µs
                delay: SimDuration::from_micros(100),
                queue_capacity: queue,
                loss,
            },
            component_stream(1, "test"),
        )
    }

    fn frame(id: u32) -> Frame<u32> {
        Frame {
            packet: id,
            len: 1000,
        }
    }

    /// Drives the link until idle, returning (time, output) pairs.
    fn drain(
        l: &mut P2pLink<u32>,
        out: &mut Vec<LinkOutput<u32>>,
    ) -> Vec<(SimTime, LinkOutput<u32>)> {
        let mut log = Vec::new();
        while let Some(t) = l.poll_timeout() {
            l.handle_timeout(t, out);
            log.extend(out.drain(..).map(|o| (t, o)));
        }
        log
    }

    #[test]
    fn frames_serialise_back_to_back_then_propagate() {
        let mut l = link(0.0, 10);
        let mut out = Vec::new();
        l.transmit(SimTime::ZERO, 0, frame(1), &mut out);
        l.transmit(SimTime::ZERO, 0, frame(2), &mut out);
        assert_eq!(
            out,
            [
                LinkOutput::Enqueued {
                    port: 0,
                    frame: frame(1),
                    queue_len: 0
                },
                LinkOutput::TxStart {
                    port: 0,
                    frame: frame(1)
                },
                LinkOutput::Enqueued {
                    port: 0,
                    frame: frame(2),
                    queue_len: 0
                },
            ]
        );
        out.clear();
        let log = drain(&mut l, &mut out);
        assert_eq!(
            log,
            [
                (
                    SimTime::from_micros(1000),
                    LinkOutput::TxStart {
                        port: 0,
                        frame: frame(2)
                    }
                ),
                (
                    SimTime::from_micros(1100),
                    LinkOutput::Delivered {
                        port: 1,
                        frame: frame(1)
                    }
                ),
                (
                    SimTime::from_micros(2100),
                    LinkOutput::Delivered {
                        port: 1,
                        frame: frame(2)
                    }
                ),
            ]
        );
    }

    #[test]
    fn directions_are_independent() {
        let mut l = link(0.0, 10);
        let mut out = Vec::new();
        l.transmit(SimTime::ZERO, 0, frame(1), &mut out);
        l.transmit(SimTime::ZERO, 1, frame(2), &mut out);
        out.clear();
        let log = drain(&mut l, &mut out);
        assert_eq!(
            log,
            [
                (
                    SimTime::from_micros(1100),
                    LinkOutput::Delivered {
                        port: 1,
                        frame: frame(1)
                    }
                ),
                (
                    SimTime::from_micros(1100),
                    LinkOutput::Delivered {
                        port: 0,
                        frame: frame(2)
                    }
                ),
            ]
        );
    }

    #[test]
    fn full_queue_drops_tail() {
        let mut l = link(0.0, 1);
        let mut out = Vec::new();
        for id in 1..=3 {
            l.transmit(SimTime::ZERO, 0, frame(id), &mut out);
        }
        assert_eq!(
            out.last(),
            Some(&LinkOutput::Dropped {
                port: 0,
                frame: frame(3),
                reason: DropReason::QueueFull
            })
        );
        let s = l.stats().directions[0];
        assert_eq!(
            (s.enqueued, s.dropped_queue_full, s.max_queue_len),
            (2, 1, 1)
        );
    }

    #[test]
    fn random_loss_follows_its_probability() {
        let mut l = link(0.25, 100_000);
        let mut out = Vec::new();
        for id in 0..4000 {
            l.transmit(SimTime::from_millis(u64::from(id)), 0, frame(id), &mut out);
        }
        drain(&mut l, &mut out);
        let s = l.stats().directions[0];
        assert_eq!(s.delivered_packets + s.dropped_random_loss, 4000);
        assert!((900..1100).contains(&s.dropped_random_loss), "{s:?}");
    }

    #[test]
    fn late_calls_replay_the_same_history() {
        let mut punctual = link(0.0, 10);
        let mut late = link(0.0, 10);
        let mut out = Vec::new();
        for id in 0..3 {
            punctual.transmit(SimTime::ZERO, 0, frame(id), &mut out);
            late.transmit(SimTime::ZERO, 0, frame(id), &mut out);
        }
        out.clear();
        let a: Vec<_> = drain(&mut punctual, &mut out)
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        late.handle_timeout(SimTime::from_secs(1), &mut out);
        assert_eq!(a, out);
        assert_eq!(late.poll_timeout(), None);
    }
}
