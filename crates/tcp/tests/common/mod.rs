//! An in-memory pair of stacks joined by a point-to-point link with
//! latency, MTU, bandwidth and fault knobs, driven in explicit time.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rtolab_tcp::{Bytes, Config, ConnId, Event, Profile, Stack, State};
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv6::{self, Transport6};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

pub const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const PORT: u16 = 80;
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0x212, 0x4b00, 0, 2);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

/// The TCP segment of an IPv4 or IPv6 datagram, told apart by its version.
pub fn tcp_of(datagram: &[u8]) -> Option<TcpRepr<'_>> {
    if datagram.first().is_some_and(|b| b >> 4 == 6) {
        match ipv6::parse(datagram).ok()?.transport {
            Transport6::Tcp(tcp) => Some(tcp),
            _ => None,
        }
    } else {
        match packet::parse(datagram).ok()?.transport {
            Transport::Tcp(tcp) => Some(tcp),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Client,
    Server,
}

/// A datagram on the wire: (arrival, tie-breaker, destination, bytes).
type InFlight = (SimTime, u64, Side, Vec<u8>);

/// Faults applied to every datagram independently.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    pub loss: f64,
    pub duplicate: f64,
    /// Probability that a datagram gets an extra random delay (reordering).
    pub reorder: f64,
    /// Largest extra delay of a reordered datagram.
    pub reorder_delay: SimDuration,
}

impl Faults {
    /// When the copies of a datagram leaving at `depart` arrive after
    /// `latency`: none if it is lost, two if duplicated, each maybe delayed
    /// further (reordered). Draws from `rng` in that order, so a seed gives
    /// the same faults to every harness.
    pub fn arrivals(
        &self,
        rng: &mut impl Rng,
        depart: SimTime,
        latency: SimDuration,
    ) -> Vec<SimTime> {
        if rng.gen_bool(self.loss.clamp(0.0, 1.0)) {
            return Vec::new();
        }
        let copies = if rng.gen_bool(self.duplicate.clamp(0.0, 1.0)) {
            2
        } else {
            1
        };
        (0..copies)
            .map(|_| {
                let mut arrive = depart + latency;
                if rng.gen_bool(self.reorder.clamp(0.0, 1.0)) {
                    let extra = rng.gen_range(0..=self.reorder_delay.as_nanos());
                    arrive += SimDuration::from_nanos(extra);
                }
                arrive
            })
            .collect()
    }
}

pub struct Pair {
    pub client: Stack,
    pub server: Stack,
    pub time: SimTime,
    pub latency: SimDuration,
    pub mtu: usize,
    /// Link rate in bits per second; `None` is infinitely fast.
    pub bandwidth: Option<u64>,
    pub faults: Faults,
    pub rng: ChaCha8Rng,
    queue: BinaryHeap<Reverse<InFlight>>,
    link_free: [SimTime; 2],
    counter: u64,
    pub events: Vec<(Side, ConnId, Event)>,
    pub delivered: u64,
    /// Per side: the window scale it offered in its SYN, and the right
    /// edge of the window its peer last advertised to it, as delivered.
    offered_scale: [Option<u8>; 2],
    right_edge: [Option<SeqNumber>; 2],
    /// Data segments sent past the right edge of the peer's window.
    pub beyond_window: u64,
    /// Where the server listens.
    pub server_end: SocketAddr,
    /// Every datagram either side emitted, lost ones included, when set.
    pub wire_log: Option<Vec<Vec<u8>>>,
}

impl Pair {
    pub fn new(client: Config, server: Config, seed: u64) -> Pair {
        Pair::between(client, server, CLIENT.into(), SERVER.into(), seed)
    }

    /// A pair whose stacks have the addresses `client_addr` and
    /// `server_addr` (both IPv4 or both IPv6).
    pub fn between(
        client: Config,
        server: Config,
        client_addr: IpAddr,
        server_addr: IpAddr,
        seed: u64,
    ) -> Pair {
        Pair {
            client: Stack::new(Arc::new(client), client_addr, seed),
            server: Stack::new(Arc::new(server), server_addr, seed ^ 0xabcdef),
            time: SimTime::ZERO,
            latency: SimDuration::from_millis(10),
            mtu: 1500,
            bandwidth: None,
            faults: Faults::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: BinaryHeap::new(),
            link_free: [SimTime::ZERO; 2],
            counter: 0,
            events: Vec::new(),
            delivered: 0,
            offered_scale: [None; 2],
            right_edge: [None; 2],
            beyond_window: 0,
            server_end: SocketAddr::new(server_addr, PORT),
            wire_log: None,
        }
    }

    /// Both stacks on IPv6 ([`CLIENT_V6`], [`SERVER_V6`]).
    pub fn with_profile_v6(profile: Profile, seed: u64) -> Pair {
        Pair::between(
            Config::from_profile(profile.clone()),
            Config::from_profile(profile),
            CLIENT_V6.into(),
            SERVER_V6.into(),
            seed,
        )
    }

    pub fn with_profile(profile: Profile, seed: u64) -> Pair {
        Pair::new(
            Config::from_profile(profile.clone()),
            Config::from_profile(profile),
            seed,
        )
    }

    pub fn server_addr() -> SocketAddrV4 {
        SocketAddrV4::new(SERVER, PORT)
    }

    fn stack(&mut self, side: Side) -> &mut Stack {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    fn transmit(&mut self, side: Side) {
        let mut buf = Vec::new();
        loop {
            let now = self.time;
            let Some(len) = self.stack(side).poll_transmit(now, &mut buf) else {
                break;
            };
            let datagram = buf[..len].to_vec();
            if let Some(log) = &mut self.wire_log {
                log.push(datagram.clone());
            }
            if datagram.len() > self.mtu {
                continue;
            }
            let index = side as usize;
            self.check_window(index, &datagram);
            let mut depart = self.time.max(self.link_free[index]);
            if let Some(bps) = self.bandwidth {
                depart += SimDuration::transmission(datagram.len() as u64, bps);
                self.link_free[index] = depart;
            }
            for arrive in self.faults.arrivals(&mut self.rng, depart, self.latency) {
                let to = match side {
                    Side::Client => Side::Server,
                    Side::Server => Side::Client,
                };
                self.counter += 1;
                self.queue
                    .push(Reverse((arrive, self.counter, to, datagram.clone())));
            }
        }
        let side_events: Vec<(ConnId, Event)> =
            std::iter::from_fn(|| self.stack(side).poll_event()).collect();
        self.events
            .extend(side_events.into_iter().map(|(id, e)| (side, id, e)));
    }

    /// Records the window a datagram arriving at side `to` advertises.
    fn note_window(&mut self, to: usize, datagram: &[u8]) {
        let Some(tcp) = tcp_of(datagram) else {
            return;
        };
        let from = 1 - to;
        if tcp.flags.contains(TcpFlags::SYN) {
            self.offered_scale[from] = tcp.options.window_scale;
            return;
        }
        if !tcp.flags.contains(TcpFlags::ACK) {
            return;
        }
        let shift = match (self.offered_scale[from], self.offered_scale[to]) {
            (Some(s), Some(_)) => s.min(14),
            _ => 0,
        };
        let edge = tcp.ack + ((u32::from(tcp.window)) << shift);
        if self.right_edge[to].map_or(true, |e| edge > e) {
            self.right_edge[to] = Some(edge);
        }
    }

    /// Counts a data segment from side `from` that ends past the right edge
    /// of the window its peer has advertised to it (RFC 9293 §3.8.6.2.1).
    fn check_window(&mut self, from: usize, datagram: &[u8]) {
        let Some(tcp) = tcp_of(datagram) else {
            return;
        };
        if tcp.payload.is_empty() {
            return;
        }
        if let Some(edge) = self.right_edge[from] {
            if tcp.seq + tcp.payload.len() > edge {
                self.beyond_window += 1;
            }
        }
    }

    /// Delivers due datagrams, fires due timers, collects output; then
    /// advances time to the next arrival or deadline. Returns false when
    /// nothing is left to happen.
    pub fn step(&mut self) -> bool {
        while let Some(Reverse((at, _, _, _))) = self.queue.peek() {
            if *at > self.time {
                break;
            }
            let Some(Reverse((_, _, to, datagram))) = self.queue.pop() else {
                break;
            };
            let now = self.time;
            self.delivered += 1;
            self.note_window(to as usize, &datagram);
            self.stack(to)
                .handle_datagram(now, &datagram)
                .expect("the engine emits well-formed datagrams");
        }
        let now = self.time;
        self.client.handle_timeout(now);
        self.server.handle_timeout(now);
        self.transmit(Side::Client);
        self.transmit(Side::Server);
        let next = [
            self.queue.peek().map(|Reverse((t, ..))| *t),
            self.client.poll_timeout(),
            self.server.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        match next {
            Some(t) => {
                self.time = self.time.max(t);
                true
            }
            None => false,
        }
    }

    /// Steps until idle or `max_steps`; returns whether it went idle.
    pub fn drive_bounded(&mut self, max_steps: usize) -> bool {
        for _ in 0..max_steps {
            if !self.step() {
                return true;
            }
        }
        false
    }

    /// Steps until `done` holds or `max_steps`; returns whether it held.
    pub fn drive_until(
        &mut self,
        max_steps: usize,
        mut done: impl FnMut(&mut Pair) -> bool,
    ) -> bool {
        for _ in 0..max_steps {
            if done(self) {
                return true;
            }
            if !self.step() {
                return done(self);
            }
        }
        false
    }

    pub fn state(&self, side: Side, id: ConnId) -> Option<State> {
        match side {
            Side::Client => self.client.conn(id).map(|c| c.state()),
            Side::Server => self.server.conn(id).map(|c| c.state()),
        }
    }
}

/// A transfer driven to completion: the client sends `data` and closes; the
/// server reads everything and closes when the client's FIN arrives.
/// How [`Transfer`] hands its bytes to the client connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// Copies (`Connection::send`).
    Copy,
    /// Shared chunks of the data (`Connection::send_shared`).
    Shared,
    /// Both in turn, in small pieces, so copied and shared runs interleave
    /// in the send buffer.
    Mixed,
}

pub struct Transfer {
    pub mode: SendMode,
    /// The data as one shared chunk, sliced for `send_shared`.
    pub shared: Bytes,
    pub client: ConnId,
    pub server: Option<ConnId>,
    pub data: Vec<u8>,
    pub sent: usize,
    pub received: Vec<u8>,
    pub client_closed: bool,
    pub server_closed: bool,
}

impl Transfer {
    pub fn start(pair: &mut Pair, data: Vec<u8>) -> Transfer {
        pair.server.listen(PORT);
        let now = pair.time;
        let client = pair.client.connect(now, pair.server_end);
        Transfer {
            mode: SendMode::Copy,
            shared: Bytes::copy_from_slice(&data),
            client,
            server: None,
            data,
            sent: 0,
            received: Vec::new(),
            client_closed: false,
            server_closed: false,
        }
    }

    /// Application work after a step; returns true when both ends closed.
    pub fn pump(&mut self, pair: &mut Pair) -> bool {
        let now = pair.time;
        if let Some(c) = pair.client.conn_mut(self.client) {
            while self.sent < self.data.len() {
                let rest = self.sent..self.data.len();
                let queued = match self.mode {
                    SendMode::Copy => c.send(&self.data[rest]),
                    SendMode::Shared => c.send_shared(self.shared.slice(rest)),
                    SendMode::Mixed => {
                        let piece = self.sent..self.data.len().min(self.sent + 700);
                        if self.sent / 700 % 2 == 0 {
                            c.send(&self.data[piece])
                        } else {
                            c.send_shared(self.shared.slice(piece))
                        }
                    }
                };
                match queued {
                    Ok(n) if n > 0 => self.sent += n,
                    _ => break,
                }
            }
            // Close once connected: a close in SYN-SENT with nothing queued
            // abandons the attempt (RFC 9293 §3.10.4).
            if self.sent == self.data.len() && !self.client_closed && c.state() != State::SynSent {
                c.close(now);
                self.client_closed = true;
            }
        }
        if self.server.is_none() {
            self.server = pair.server.accept(PORT);
        }
        if let Some(id) = self.server {
            if let Some(s) = pair.server.conn_mut(id) {
                let mut buf = [0u8; 4096];
                loop {
                    let n = s.recv(&mut buf);
                    if n == 0 {
                        break;
                    }
                    self.received.extend_from_slice(&buf[..n]);
                }
                if s.is_recv_finished() && !self.server_closed {
                    s.close(now);
                    self.server_closed = true;
                }
            }
        }
        let client_done = pair.client.conn(self.client).is_some_and(|c| c.is_closed());
        let server_done = self
            .server
            .and_then(|id| pair.server.conn(id))
            .is_some_and(|c| c.is_closed());
        client_done && server_done
    }

    /// Runs the transfer; returns whether both ends closed within the bound.
    pub fn run(&mut self, pair: &mut Pair, max_steps: usize) -> bool {
        self.run_until(pair, SimTime::MAX, max_steps) == Outcome::Finished
    }

    /// Runs the transfer until both ends closed, nothing is left to happen,
    /// simulated time passes `deadline` or `max_steps` steps were taken.
    pub fn run_until(&mut self, pair: &mut Pair, deadline: SimTime, max_steps: usize) -> Outcome {
        for _ in 0..max_steps {
            if self.pump(pair) {
                return Outcome::Finished;
            }
            // Let application calls produce output before time advances.
            if !pair.step() {
                if self.pump(pair) {
                    return Outcome::Finished;
                }
                // No datagram in flight and no timer armed: nothing will
                // ever happen again.
                if !pair.step() {
                    return Outcome::Stalled;
                }
            }
            if pair.time > deadline {
                return Outcome::TimeLimit;
            }
        }
        Outcome::StepLimit
    }
}

/// How [`Transfer::run_until`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Both ends closed.
    Finished,
    /// Both stacks went idle with the transfer unfinished (a deadlock).
    Stalled,
    /// Simulated time passed the deadline.
    TimeLimit,
    /// The step budget ran out (a livelock that does not advance time).
    StepLimit,
}

pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Proptest's settings for a property test of this crate: at least `cases`
/// cases (more with `PROPTEST_CASES`), generated from `seed` unless
/// `PROPTEST_RNG_SEED` is set, so CI runs the same cases every time; the
/// regressions are kept next to the test file (an integration test has no
/// lib.rs beside it).
pub fn proptest_config(cases: u32, seed: u64) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
    let base = Config::default();
    Config {
        cases: base.cases.max(cases),
        rng_seed: match base.rng_seed {
            RngSeed::Random => RngSeed::Fixed(seed),
            fixed => fixed,
        },
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..base
    }
}
