//! Full-duplex point-to-point link: a rate, a propagation delay (with an
//! optional random part, [`super::jitter`]), a drop-tail queue at each end
//! and optional Bernoulli loss.

use std::collections::VecDeque;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::ends::two_ends;
use super::jitter::{Jitter, RawJitter};
use super::{
    admit, DirectionStats, EndSpec, Frame, LinkCheck, LinkModel, LinkOut, LinkOutput, Port, RawEnd,
    ScenarioLink, DEFAULT_QUEUE,
};
use crate::config::{required, Attachment, Duration, Rate, ScenarioError};
use crate::pool::PacketId;
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

/// A frame handed to the link, with its timing: a direction sends one
/// frame at a time at a fixed rate, so when each frame starts, ends and
/// arrives is known the moment it is queued.
#[derive(Debug)]
struct Scheduled<P> {
    /// When its first bit leaves.
    start: SimTime,
    /// Its serialisation time.
    tx: SimDuration,
    /// When it has fully arrived at the other end.
    arrival: SimTime,
    /// Bytes it occupies on the wire, when its framing adds to the frame
    /// (a SLIP line's escapes); otherwise its length.
    wire_len: u32,
    frame: Frame<P>,
}

#[derive(Debug)]
struct Direction<P> {
    /// Frames queued or on the wire, in sending order (which is also
    /// arrival order, the delay being constant).
    frames: VecDeque<Scheduled<P>>,
    /// How many of `frames`, from the front, have started: the others
    /// wait in the drop-tail queue.
    started: usize,
    /// End of the last scheduled transmission; the sender is idle once it
    /// passed.
    busy_until: SimTime,
    /// The last frame length sent and its serialisation time: a direction
    /// mostly carries one size, and the time takes a 128-bit division.
    last_tx: (u32, SimDuration),
    stats: DirectionStats,
    /// Wire bytes of the frames that started crossing, and of those that
    /// arrived.
    wire_sent: u64,
    wire_delivered: u64,
}

impl<P> Direction<P> {
    fn new() -> Self {
        Direction {
            frames: VecDeque::new(),
            started: 0,
            busy_until: SimTime::ZERO,
            last_tx: (u32::MAX, SimDuration::ZERO),
            stats: DirectionStats::default(),
            wire_sent: 0,
            wire_delivered: 0,
        }
    }

    /// Frames waiting behind the one being sent.
    fn waiting(&self) -> usize {
        self.frames.len() - self.started
    }

    /// The next start not yet accounted for, if any.
    fn next_start(&self) -> Option<SimTime> {
        self.frames.get(self.started).map(|f| f.start)
    }

    /// The front frame's arrival (after its start, if that is still to be
    /// accounted for).
    fn next_arrival(&self) -> Option<SimTime> {
        self.frames.front().map(|f| f.arrival)
    }

    fn next_deadline(&self, start_notices: bool) -> Option<SimTime> {
        let start = self.next_start().filter(|_| start_notices);
        match (start, self.next_arrival()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A full-duplex point-to-point link between ports 0 and 1.
///
/// Each frame's timing is fixed when it is queued, so the link needs to be
/// woken only for arrivals. The start of each transmission is accounted
/// for (counters, and a [`LinkOutput::TxStart`] notice) at the first call
/// at or after it; with start notices on (the default), the link also asks
/// to be woken at every start, so notices come at their exact time.
#[derive(Debug)]
pub struct P2pLink<P> {
    config: P2pConfig,
    dirs: [Direction<P>; 2],
    rng: SimRng,
    start_notices: bool,
    jitter: Jitter,
}

impl<P: Copy> P2pLink<P> {
    /// A new idle link; `rng` decides random losses.
    pub fn new(config: P2pConfig, rng: SimRng) -> Self {
        P2pLink {
            config,
            dirs: [Direction::new(), Direction::new()],
            rng,
            start_notices: true,
            jitter: Jitter::None,
        }
    }

    /// The link with a random part of the delay drawn for each frame from
    /// its random stream (frames of a direction still arrive in order).
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The link's parameters.
    pub fn config(&self) -> &P2pConfig {
        &self.config
    }

    /// Whether [`LinkOutput::TxStart`] notices are produced. Without them
    /// (when nothing captures or traces the link) the link is woken once
    /// per frame instead of twice; what it delivers, drops and counts is
    /// the same.
    pub fn set_start_notices(&mut self, on: bool) {
        self.start_notices = on;
    }

    /// Hands a frame from port `from` (0 or 1) to the link.
    pub fn transmit(&mut self, now: SimTime, from: Port, frame: Frame<P>, out: &mut LinkOut<P>) {
        let dir = &mut self.dirs[from as usize];
        let tx = match dir.last_tx {
            (len, tx) if len == frame.len => tx,
            _ => {
                let tx = SimDuration::transmission(u64::from(frame.len), self.config.rate_bps);
                dir.last_tx = (frame.len, tx);
                tx
            }
        };
        self.transmit_timed(now, from, frame, frame.len, tx, out);
    }

    /// Hands a frame from port `from` to the link that occupies `wire_len`
    /// bytes and `tx` of time on the wire, whatever the link's rate says: a
    /// serial line whose framing and timing follow each frame's bytes
    /// (`SlipLink`) queues its frames here.
    pub(crate) fn transmit_timed(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        wire_len: u32,
        tx: SimDuration,
        out: &mut LinkOut<P>,
    ) {
        self.handle_timeout(now, out);
        let capacity = self.config.queue_capacity;
        let dir = &mut self.dirs[from as usize];
        let idle = dir.busy_until <= now;
        let waiting = dir.waiting();
        let counters = (&mut dir.stats.enqueued, &mut dir.stats.dropped_queue_full);
        if !admit(
            from,
            frame,
            waiting,
            !idle && waiting >= capacity,
            counters,
            out,
        ) {
            return;
        }
        let start = dir.busy_until.max(now);
        dir.busy_until = start + tx;
        let mut arrival = dir.busy_until + self.config.delay;
        if self.jitter != Jitter::None {
            // Behind one MAC queue a frame cannot overtake the one before.
            let after = dir.frames.back().map_or(arrival, |f| f.arrival);
            arrival = (arrival + self.jitter.draw(&mut self.rng)).max(after);
        }
        dir.frames.push_back(Scheduled {
            start,
            tx,
            arrival,
            wire_len,
            frame,
        });
        if idle {
            self.account_start(from, out);
        }
        let dir = &mut self.dirs[from as usize];
        dir.stats.max_queue_len = dir.stats.max_queue_len.max(dir.waiting() as u64);
    }

    /// Delivers arrivals and accounts for starts due at or before `now`.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        for from in 0..2u32 {
            loop {
                let dir = &self.dirs[from as usize];
                // A frame arrives only after it started.
                let arrival = dir.next_arrival().filter(|_| dir.started > 0);
                let start = dir.next_start();
                // Handle whichever is earlier, arrivals first on ties, so a
                // late call replays the same history as a punctual one.
                match (arrival, start) {
                    (Some(a), Some(s)) if a <= now && a <= s => self.arrive(from, out),
                    (Some(a), None) if a <= now => self.arrive(from, out),
                    (_, Some(s)) if s <= now => self.account_start(from, out),
                    _ => break,
                }
            }
        }
    }

    /// When `handle_timeout` must next be called.
    #[inline]
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let notices = self.start_notices;
        match (
            self.dirs[0].next_deadline(notices),
            self.dirs[1].next_deadline(notices),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A snapshot of the counters as of `now`: transmissions that started
    /// by then count as sent even if no call has accounted for them yet.
    pub fn stats(&self, now: SimTime) -> P2pStats {
        let as_of = |dir: &Direction<P>| {
            let mut stats = dir.stats;
            for f in dir.frames.range(dir.started..) {
                if f.start > now {
                    break;
                }
                stats.sent_packets += 1;
                stats.sent_bytes += u64::from(f.frame.len);
                stats.busy_ns += f.tx.as_nanos();
            }
            stats
        };
        P2pStats {
            directions: [as_of(&self.dirs[0]), as_of(&self.dirs[1])],
        }
    }

    /// Wire bytes (see [`P2pLink::transmit_timed`]) per sending port as of
    /// `now`: those of frames that started crossing, and of frames that
    /// arrived.
    pub(crate) fn wire_bytes(&self, now: SimTime) -> ([u64; 2], [u64; 2]) {
        let sent = |dir: &Direction<P>| {
            let pending = dir.frames.range(dir.started..);
            let started = pending.take_while(|f| f.start <= now);
            dir.wire_sent + started.map(|f| u64::from(f.wire_len)).sum::<u64>()
        };
        let [a, b] = &self.dirs;
        ([sent(a), sent(b)], [a.wire_delivered, b.wire_delivered])
    }

    /// Counts the next frame's transmission as started (and announces it).
    fn account_start(&mut self, from: Port, out: &mut LinkOut<P>) {
        let dir = &mut self.dirs[from as usize];
        let Some(f) = dir.frames.get(dir.started) else {
            return;
        };
        let frame = f.frame;
        dir.stats.sent_packets += 1;
        dir.stats.sent_bytes += u64::from(frame.len);
        dir.stats.busy_ns += f.tx.as_nanos();
        dir.wire_sent += u64::from(f.wire_len);
        dir.started += 1;
        if self.start_notices {
            out.push(LinkOutput::TxStart { port: from, frame });
        }
    }

    fn arrive(&mut self, from: Port, out: &mut LinkOut<P>) {
        let dir = &mut self.dirs[from as usize];
        let Some(Scheduled {
            frame, wire_len, ..
        }) = dir.frames.pop_front()
        else {
            return;
        };
        dir.started -= 1;
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
            dir.wire_delivered += u64::from(wire_len);
            out.push(LinkOutput::Delivered { port: to, frame });
        }
    }
}

impl<P: Copy> LinkModel<P> for P2pLink<P> {
    type Stats = P2pStats;

    #[inline]
    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        _to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        P2pLink::transmit(self, now, from, frame, out);
    }

    #[inline]
    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        P2pLink::handle_timeout(self, now, out);
    }

    #[inline]
    fn poll_timeout(&self) -> Option<SimTime> {
        P2pLink::poll_timeout(self)
    }

    fn stats(&self, now: SimTime) -> P2pStats {
        P2pLink::stats(self, now)
    }

    fn set_start_notices(&mut self, on: bool) {
        P2pLink::set_start_notices(self, on);
    }
}

/// The `[[link]]` fields of the wired kinds (`point-to-point` and
/// `half-duplex`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWired {
    /// The two ends: `{ host, address }` tables (`address` an IPv4 address with its prefix, or
    /// `ipv6` instead or besides). Required.
    pub(super) ends: Option<Vec<RawEnd>>,
    /// Bit rate each way, like `"10Mbps"`. Required.
    pub(super) rate: Option<Rate>,
    /// One-way propagation delay, like `"5ms"`. Required.
    pub(super) delay: Option<Duration>,
    /// Frames that may wait at each end; a frame arriving at a full queue is dropped. Unit:
    /// packets. Default: 100.
    pub(super) queue: Option<usize>,
    /// Probability that a frame is lost, drawn per frame from the link's own random stream, 0
    /// to 1. Default: 0.
    pub(super) loss: Option<f64>,
    /// A random extra delay per frame, point-to-point links only: `{ distribution =
    /// "exponential", mean }` or `{ distribution = "uniform", max }` (between 0 and `max`); a
    /// direction's frames still arrive in order. Default: none.
    pub(super) jitter: Option<RawJitter>,
}

/// A validated wired link: two ends, a rate, a delay, a queue per end and
/// a loss probability.
#[derive(Clone, Debug, PartialEq)]
pub struct WiredSpec {
    /// The two ends.
    pub ends: [EndSpec; 2],
    /// Bits per second.
    pub rate_bps: u64,
    /// Propagation delay.
    pub delay: SimDuration,
    /// Packets that may wait at each end.
    pub queue: usize,
    /// Loss probability.
    pub loss: f64,
    /// Random part of the delay (`point-to-point` only).
    pub jitter: Jitter,
}

/// A link's `loss` field: a probability, 0 when absent.
pub(super) fn loss_probability(
    loss: Option<f64>,
    cx: &LinkCheck<'_>,
) -> Result<f64, ScenarioError> {
    let loss = loss.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&loss) {
        return Err(ScenarioError::new(
            cx.at("loss"),
            format!("must be between 0 and 1, got {loss}"),
        ));
    }
    Ok(loss)
}

impl WiredSpec {
    /// Validates the fields shared by the wired kinds.
    pub fn validate(raw: RawWired, cx: &mut LinkCheck<'_>) -> Result<WiredSpec, ScenarioError> {
        let rate = required(&raw.rate, cx.at("rate"), &cx.what)?.0;
        let (ends, _) = two_ends(&raw.ends, cx, false)?;
        let delay = required(&raw.delay, cx.at("delay"), &cx.what)?.0;
        let loss = loss_probability(raw.loss, cx)?;
        let jitter = match raw.jitter {
            None => Jitter::None,
            Some(j) => j.validate(cx)?,
        };
        Ok(WiredSpec {
            ends,
            rate_bps: rate,
            delay,
            queue: raw.queue.unwrap_or(DEFAULT_QUEUE),
            loss,
            jitter,
        })
    }

    /// Validates the wired fields of a kind that wraps a point-to-point
    /// link and decides each frame's fate itself, so has no `loss` field.
    pub fn validate_lossless(
        ends: Option<Vec<RawEnd>>,
        rate: Option<Rate>,
        delay: Option<Duration>,
        queue: Option<usize>,
        cx: &mut LinkCheck<'_>,
    ) -> Result<WiredSpec, ScenarioError> {
        let raw = RawWired {
            ends,
            rate,
            delay,
            queue,
            loss: None,
            jitter: None,
        };
        WiredSpec::validate(raw, cx)
    }

    /// The two ends' interfaces.
    pub fn attachments(&self) -> Vec<Attachment> {
        self.ends.iter().map(EndSpec::attachment).collect()
    }

    /// Its timing and queues with no losses, for the kinds that wrap a
    /// point-to-point link and decide each frame's fate themselves.
    pub fn lossless(&self) -> P2pConfig {
        P2pConfig {
            rate_bps: self.rate_bps,
            delay: self.delay,
            queue_capacity: self.queue,
            loss: 0.0,
        }
    }
}

/// Moves the frames and bytes (per sending port) a wrapping kind turned
/// from deliveries into losses, in the wrapped link's counters.
pub(crate) fn count_as_lost(directions: &mut [DirectionStats; 2], lost: [(u64, u64); 2]) {
    for (d, (frames, bytes)) in directions.iter_mut().zip(lost) {
        d.delivered_packets -= frames;
        d.delivered_bytes -= bytes;
        d.dropped_random_loss += frames;
    }
}

/// `kind = "point-to-point"`: a [`P2pLink`].
#[derive(Clone, Debug, PartialEq)]
pub struct P2pSpec(pub WiredSpec);

impl ScenarioLink for P2pSpec {
    const KIND: &'static str = "point-to-point";
    type Raw = RawWired;
    type Model = P2pLink<PacketId>;

    fn validate(raw: RawWired, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        WiredSpec::validate(raw, cx).map(P2pSpec)
    }

    fn rate_bps(&self) -> u64 {
        self.0.rate_bps
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.0.attachments()
    }

    fn build(&self, rng: SimRng) -> P2pLink<PacketId> {
        let w = &self.0;
        P2pLink::new(
            P2pConfig {
                rate_bps: w.rate_bps,
                delay: w.delay,
                queue_capacity: w.queue,
                loss: w.loss,
            },
            rng,
        )
        .with_jitter(w.jitter)
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

    use crate::link::drain_link as drain;
    use crate::link::{Emitted, LinkTrace};

    #[test]
    fn frames_serialise_back_to_back_then_propagate() {
        let mut l = link(0.0, 10);
        let mut out = LinkOut::traced();
        l.transmit(SimTime::ZERO, 0, frame(1), &mut out);
        l.transmit(SimTime::ZERO, 0, frame(2), &mut out);
        assert_eq!(
            out.take_all(),
            [
                Emitted::Trace(LinkTrace::Enqueued {
                    port: 0,
                    frame: frame(1),
                    queue_len: 0
                }),
                Emitted::Output(LinkOutput::TxStart {
                    port: 0,
                    frame: frame(1)
                }),
                Emitted::Trace(LinkTrace::Enqueued {
                    port: 0,
                    frame: frame(2),
                    queue_len: 0
                }),
            ]
        );
        // Without a listener nothing but the start is produced.
        let mut l = link(0.0, 10);
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1), &mut out);
        l.transmit(SimTime::ZERO, 0, frame(2), &mut out);
        assert_eq!(
            out.take_all(),
            [Emitted::Output(LinkOutput::TxStart {
                port: 0,
                frame: frame(1)
            })]
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
        let mut out = LinkOut::new();
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
        let mut out = LinkOut::new();
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
        let s = l.stats(SimTime::MAX).directions[0];
        assert_eq!(
            (s.enqueued, s.dropped_queue_full, s.max_queue_len),
            (2, 1, 1)
        );
    }

    #[test]
    fn random_loss_follows_its_probability() {
        let mut l = link(0.25, 100_000);
        let mut out = LinkOut::new();
        for id in 0..4000 {
            l.transmit(SimTime::from_millis(u64::from(id)), 0, frame(id), &mut out);
        }
        drain(&mut l, &mut out);
        let s = l.stats(SimTime::MAX).directions[0];
        assert_eq!(s.delivered_packets + s.dropped_random_loss, 4000);
        assert!((900..1100).contains(&s.dropped_random_loss), "{s:?}");
    }

    /// Without start notices the link is woken only for arrivals, and
    /// delivers, drops and counts exactly what it does with them.
    #[test]
    fn quiet_link_delivers_the_same_frames_at_the_same_times() {
        let run = |notices: bool| {
            let mut l = link(0.0, 2);
            l.set_start_notices(notices);
            let mut out = LinkOut::new();
            let mut log = Vec::new();
            // Bursts that overflow the two-frame queue, then idle gaps.
            for burst in 0..3u32 {
                let at = SimTime::from_millis(u64::from(burst) * 10);
                while let Some(t) = l.poll_timeout().filter(|&t| t <= at) {
                    l.handle_timeout(t, &mut out);
                    log.extend(out.drain(..).map(|o| (t, o)));
                }
                for id in 0..5 {
                    l.transmit(at, 0, frame(burst * 10 + id), &mut out);
                    log.extend(out.drain(..).map(|o| (at, o)));
                }
            }
            let mut wakeups = 0;
            while let Some(t) = l.poll_timeout() {
                wakeups += 1;
                l.handle_timeout(t, &mut out);
                log.extend(out.drain(..).map(|o| (t, o)));
            }
            (log, wakeups, l.stats(SimTime::MAX))
        };
        let (loud, loud_wakeups, loud_stats) = run(true);
        let (quiet, quiet_wakeups, quiet_stats) = run(false);
        let without_starts: Vec<_> = loud
            .iter()
            .filter(|(_, o)| !matches!(o, LinkOutput::TxStart { .. }))
            .cloned()
            .collect();
        assert_eq!(quiet, without_starts);
        assert!(quiet
            .iter()
            .any(|(_, o)| matches!(o, LinkOutput::Dropped { .. })));
        assert_eq!(quiet_stats, loud_stats);
        assert_eq!(quiet_stats.directions[0].sent_packets, 9);
        // The third burst's frames: one woken start each is saved.
        assert!(
            quiet_wakeups < loud_wakeups,
            "{quiet_wakeups} vs {loud_wakeups}"
        );
    }

    #[test]
    fn counters_include_transmissions_started_since_the_last_call() {
        let mut l = link(0.0, 10);
        l.set_start_notices(false);
        let mut out = LinkOut::new();
        for id in 0..3 {
            l.transmit(SimTime::ZERO, 0, frame(id), &mut out);
        }
        // 1000 µs per frame: the second starts at 1 ms, the third at 2 ms.
        let sent = |now| l.stats(now).directions[0].sent_packets;
        assert_eq!(sent(SimTime::ZERO), 1);
        assert_eq!(sent(SimTime::from_micros(1000)), 2);
        assert_eq!(sent(SimTime::from_micros(1999)), 2);
        assert_eq!(sent(SimTime::from_micros(2000)), 3);
        assert_eq!(
            l.stats(SimTime::from_micros(2000)).directions[0].busy_ns,
            3_000_000
        );
    }

    #[test]
    fn late_calls_replay_the_same_history() {
        let mut punctual = link(0.0, 10);
        let mut late = link(0.0, 10);
        let mut out = LinkOut::new();
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
        assert_eq!(a, *out);
        assert_eq!(late.poll_timeout(), None);
    }

    /// The extra delay of each of 200 frames sent `gap` apart on a link
    /// with `jitter`, in arrival order.
    fn jittered(jitter: Jitter, gap: SimDuration) -> Vec<(u32, SimDuration)> {
        let mut l = link(0.0, 1000).with_jitter(jitter);
        let mut out = LinkOut::new();
        let mut log = Vec::new();
        for id in 0..200u32 {
            let now = SimTime::ZERO + gap.saturating_mul(u64::from(id));
            while let Some(t) = l.poll_timeout().filter(|&t| t <= now) {
                l.handle_timeout(t, &mut out);
                log.extend(out.drain(..).map(|o| (t, o)));
            }
            l.transmit(now, 0, frame(id), &mut out);
            log.extend(out.drain(..).map(|o| (now, o)));
        }
        log.extend(drain(&mut l, &mut out));
        log.into_iter()
            .filter_map(|(t, o)| match o {
                LinkOutput::Delivered { frame, .. } => {
                    // Without jitter: 1 ms on the wire and 100 us of delay.
                    let sent = SimTime::ZERO + gap.saturating_mul(u64::from(frame.packet));
                    let fixed = sent + SimDuration::from_micros(1100);
                    assert!(t >= fixed, "frame {} early", frame.packet);
                    Some((frame.packet, t - fixed))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn jitter_adds_a_drawn_delay_and_keeps_each_directions_order() {
        let max = SimDuration::from_millis(20);
        let jitter = Jitter::Uniform { max };
        // Frames 30 ms apart never wait for each other: the draws show.
        let extra: Vec<f64> = jittered(jitter, SimDuration::from_millis(30))
            .iter()
            .map(|e| e.1.as_nanos() as f64 / 1e6)
            .collect();
        let mean = extra.iter().sum::<f64>() / extra.len() as f64;
        assert!((mean - 10.0).abs() < 1.5, "{mean}");
        assert!(extra.iter().all(|&e| e <= 20.0));
        assert!(extra.iter().any(|&e| e > 18.0) && extra.iter().any(|&e| e < 2.0));
        // Frames 2 ms apart: a frame that drew less than its predecessor
        // waits for it, so the order holds and no frame is later than the
        // largest draw.
        let close = jittered(jitter, SimDuration::from_millis(2));
        let order: Vec<u32> = close.iter().map(|e| e.0).collect();
        assert_eq!(order, (0..200).collect::<Vec<_>>());
        assert!(close.iter().all(|e| e.1 <= max));
    }

    #[test]
    fn without_jitter_arrivals_keep_the_fixed_delay() {
        let mut l = link(0.0, 10);
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1), &mut out);
        let log = drain(&mut l, &mut out);
        assert!(log.contains(&(
            SimTime::from_micros(1100),
            LinkOutput::Delivered {
                port: 1,
                frame: frame(1)
            }
        )));
    }
}
