//! A TCP `Stack` fed forged segments.
//!
//! The input chooses a profile, a listening or connecting socket, then a
//! sequence of operations: segments from the peer (flags, sequence and
//! acknowledgment numbers relative to what the stack sent, window,
//! options, payload), raw TCP headers, time steps, and application calls.
//! The harness plays the peer and the application and checks, besides
//! "never panics":
//!
//! * every datagram the stack sends parses, checksums included, and comes
//!   from its address;
//! * data the stack sends is the application's bytes at the right stream
//!   offset (the application writes byte `offset as u8`);
//! * data the stack delivers is in order: the peer writes byte `seq as u8`
//!   at sequence number `seq` (a SYN's data starts after the SYN), so
//!   delivered bytes count up by one, and no connection delivers more
//!   bytes than the peer sent it;
//! * after `handle_timeout(now)`, no deadline is in the past, and timers do
//!   not keep firing at one instant.

#![no_main]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rtolab_tcp::profile::KeepAlive;
use rtolab_tcp::{Config, ConnId, Event, Profile, Stack};
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{self, SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamps};

const STACK: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const LISTEN_PORT: u16 = 80;
const PEER_PORTS: [u16; 2] = [40000, 40001];
/// Timer firings allowed at one instant before the harness calls it a
/// loop (a healthy stack fires each timer once, then re-arms it later).
const MAX_FIRINGS_AT_ONE_INSTANT: u32 = 64;
/// Longest input the harness plays, so one input stays fast.
const MAX_OPS: usize = 400;

#[derive(Arbitrary, Debug)]
struct Input {
    setup: Setup,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
struct Setup {
    profile: u8,
    active_open: bool,
    sack: bool,
    timestamps: bool,
    timelost: bool,
    window_scale: Option<u8>,
    nagle: bool,
    keepalive: bool,
    /// Small buffers reach zero windows and the persist timer quickly.
    small_buffers: bool,
    /// Read data as soon as it is readable; otherwise only `Recv` reads,
    /// and the receive window can close.
    auto_read: bool,
    mss: Option<u16>,
    peer_isn: u32,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Segment(Forged),
    /// A TCP header and options as bytes (the checksum is filled in), for
    /// option layouts `Forged` cannot express.
    RawHeader {
        target: u8,
        bytes: Vec<u8>,
    },
    /// Time passes by this many microseconds (times 1000 if `long`).
    Advance {
        micros: u16,
        long: bool,
    },
    Send {
        conn: u8,
        len: u16,
    },
    Recv {
        conn: u8,
        len: u16,
    },
    Close {
        conn: u8,
    },
    Abort {
        conn: u8,
    },
    Connect {
        peer_port: u8,
    },
}

#[derive(Arbitrary, Debug)]
struct Forged {
    /// Which known connection (by index), or a fresh 4-tuple.
    target: u8,
    flags: Flags,
    seq: Rel,
    ack: Rel,
    window: u16,
    urgent: u16,
    mss: Option<u16>,
    window_scale: Option<u8>,
    sack_permitted: bool,
    sack_blocks: Vec<(Rel, Rel)>,
    timestamps: Option<(Ts, Ts)>,
    timelost: Option<u32>,
    payload_len: u16,
}

/// The usual flag combinations as choices of their own, so that the
/// fuzzer finds a handshake and data transfer quickly, and any other.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Flags {
    Syn,
    SynAck,
    Ack,
    PshAck,
    FinAck,
    Rst,
    RstAck,
    Any(u8),
}

impl Flags {
    fn bits(self) -> TcpFlags {
        use TcpFlags as F;
        let set = |flags: &[TcpFlags]| TcpFlags(flags.iter().fold(0, |a, f| a | f.0));
        match self {
            Flags::Syn => F::SYN,
            Flags::SynAck => set(&[F::SYN, F::ACK]),
            Flags::Ack => F::ACK,
            Flags::PshAck => set(&[F::PSH, F::ACK]),
            Flags::FinAck => set(&[F::FIN, F::ACK]),
            Flags::Rst => F::RST,
            Flags::RstAck => set(&[F::RST, F::ACK]),
            Flags::Any(bits) => TcpFlags(bits),
        }
    }
}

/// A sequence number relative to a reference the harness knows.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Rel {
    At,
    Plus(u16),
    Minus(u16),
    Abs(u32),
}

/// A timestamp value: the peer's clock, an echo of the stack's, or any.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Ts {
    Clock,
    Echo,
    Abs(u32),
}

impl Rel {
    fn from(self, base: SeqNumber) -> SeqNumber {
        match self {
            Rel::At => base,
            Rel::Plus(d) => base + u32::from(d),
            Rel::Minus(d) => SeqNumber(base.0.wrapping_sub(u32::from(d))),
            Rel::Abs(v) => SeqNumber(v),
        }
    }
}

/// What the harness knows of one 4-tuple from the stack's side of it.
#[derive(Debug, Default)]
struct Tuple {
    /// Initial sequence number of the stack's latest SYN.
    iss: Option<SeqNumber>,
    /// End of the highest segment the stack sent (its SND.NXT).
    snd_end: Option<SeqNumber>,
    /// Latest acknowledgment number the stack sent (its RCV.NXT).
    rcv_nxt: Option<SeqNumber>,
    /// Latest TSval the stack sent.
    tsval: u32,
    /// Payload bytes the peer sent on this tuple, any sequence number.
    peer_bytes: u64,
}

struct Harness {
    stack: Stack,
    now: SimTime,
    setup_isn: u32,
    auto_read: bool,
    /// Keyed by (local port, peer port).
    tuples: BTreeMap<(u16, u16), Tuple>,
    /// Connections the application holds, in the order it got them.
    conns: Vec<ConnId>,
    /// Per connection: bytes the application queued.
    queued: BTreeMap<ConnId, u64>,
    /// Per connection: the last byte it read and how many it read.
    read: BTreeMap<ConnId, (Option<u8>, u64)>,
    /// Raw headers break the payload pattern: skip the content checks then.
    raw_sent: bool,
    out: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let mut h = Harness::new(&input.setup);
    for op in input.ops.into_iter().take(MAX_OPS) {
        h.play(op);
        h.drain();
    }
});

fn profile(setup: &Setup) -> Profile {
    let name = Profile::NAMES[usize::from(setup.profile) % Profile::NAMES.len()];
    let mut p = Profile::named(name).expect("listed profile");
    p.sack = setup.sack;
    p.timestamps = setup.timestamps;
    p.timelost = setup.timelost;
    p.window_scale = setup.window_scale.map(|s| s % 15);
    p.nagle = setup.nagle;
    if let Some(mss) = setup.mss {
        // A tiny MSS reaches nothing new, only makes inputs slow (a
        // segment per byte); a forged MSS option still goes down to 0.
        p.mss = mss.max(64);
    }
    if setup.keepalive {
        // Realistic, positive intervals: degenerate ones are a validation
        // matter, not the engine's.
        p.keepalive = Some(KeepAlive {
            idle: SimDuration::from_secs(1),
            interval: SimDuration::from_millis(500),
            probes: 3,
        });
    }
    if setup.small_buffers {
        p.send_buffer = 2048;
        p.recv_buffer = 1024;
    }
    p
}

impl Harness {
    fn new(setup: &Setup) -> Harness {
        let config = Arc::new(Config::from_profile(profile(setup)));
        let mut h = Harness {
            stack: Stack::new(config, STACK, u64::from(setup.peer_isn)),
            now: SimTime::ZERO,
            setup_isn: setup.peer_isn,
            auto_read: setup.auto_read,
            tuples: BTreeMap::new(),
            conns: Vec::new(),
            queued: BTreeMap::new(),
            read: BTreeMap::new(),
            raw_sent: false,
            out: Vec::new(),
        };
        if setup.active_open {
            let id = h
                .stack
                .connect(h.now, SocketAddrV4::new(PEER, PEER_PORTS[0]));
            h.conns.push(id);
        } else {
            h.stack.listen(LISTEN_PORT);
        }
        h.drain();
        h
    }

    fn conn(&self, index: u8) -> Option<ConnId> {
        if self.conns.is_empty() {
            return None;
        }
        Some(self.conns[usize::from(index) % self.conns.len()])
    }

    /// The 4-tuple a forged segment goes to: a known one, or the listening
    /// port, or a closed port.
    fn target(&self, index: u8) -> (u16, u16) {
        let known: Vec<(u16, u16)> = self.tuples.keys().copied().collect();
        let i = usize::from(index);
        if i < known.len() {
            return known[i];
        }
        let peer_port = PEER_PORTS[i % 2];
        if i % 3 == 2 {
            (LISTEN_PORT + 1, peer_port)
        } else {
            (LISTEN_PORT, peer_port)
        }
    }

    fn play(&mut self, op: Op) {
        match op {
            Op::Segment(f) => self.forge(f),
            Op::RawHeader { target, bytes } => self.raw_header(target, bytes),
            Op::Advance { micros, long } => {
                let step = u64::from(micros) * if long { 1_000_000 } else { 1_000 };
                self.advance(self.now + SimDuration::from_nanos(step));
            }
            Op::Send { conn, len } => {
                let Some(id) = self.conn(conn) else { return };
                let offset = self.queued.get(&id).copied().unwrap_or(0);
                let data: Vec<u8> = (0..u64::from(len) % 5000)
                    .map(|i| (offset + i) as u8)
                    .collect();
                if let Some(Ok(n)) = self.stack.send(id, &data) {
                    assert!(n <= data.len());
                    *self.queued.entry(id).or_default() += n as u64;
                }
            }
            Op::Recv { conn, len } => {
                if let Some(id) = self.conn(conn) {
                    self.recv(id, usize::from(len));
                }
            }
            Op::Close { conn } => {
                let now = self.now;
                if let Some(c) = self.conn(conn).and_then(|id| self.stack.conn_mut(id)) {
                    c.close(now);
                }
            }
            Op::Abort { conn } => {
                let now = self.now;
                if let Some(c) = self.conn(conn).and_then(|id| self.stack.conn_mut(id)) {
                    c.abort(now);
                }
            }
            Op::Connect { peer_port } => {
                if self.conns.len() < 4 {
                    let port = PEER_PORTS[usize::from(peer_port) % 2];
                    let id = self.stack.connect(self.now, SocketAddrV4::new(PEER, port));
                    self.conns.push(id);
                }
            }
        }
    }

    fn forge(&mut self, f: Forged) {
        let (local, remote) = self.target(f.target);
        let tuple = self.tuples.entry((local, remote)).or_default();
        let isn = SeqNumber(self.setup_isn);
        let seq = f.seq.from(tuple.rcv_nxt.unwrap_or(isn));
        let ack = f
            .ack
            .from(tuple.snd_end.or(tuple.iss).unwrap_or(SeqNumber(0)));
        let mut sack_blocks = [None; 4];
        let sack_base = tuple.snd_end.unwrap_or(SeqNumber(0));
        for (slot, (l, r)) in sack_blocks.iter_mut().zip(f.sack_blocks.iter()) {
            *slot = Some(SackBlock {
                left: l.from(sack_base),
                right: r.from(sack_base),
            });
        }
        let clock = (self.now.as_nanos() / 1_000_000) as u32;
        let ts = |t: Ts| match t {
            Ts::Clock => clock.wrapping_add(self.setup_isn),
            Ts::Echo => tuple.tsval,
            Ts::Abs(v) => v,
        };
        let mut options = TcpOptions {
            mss: f.mss,
            window_scale: f.window_scale,
            sack_permitted: f.sack_permitted,
            sack_blocks,
            timestamps: f.timestamps.map(|(v, e)| Timestamps {
                tsval: ts(v),
                tsecr: ts(e),
            }),
            timelost: f.timelost,
        };
        // Drop SACK blocks until the options fit, as a sender would.
        while options.buffer_len() > tcp::MAX_OPTIONS_LEN {
            let n = options.sack_block_count();
            if n == 0 {
                options.timelost = None;
                continue;
            }
            options.sack_blocks[n - 1] = None;
        }
        // A SYN takes the first sequence number, so its data starts one on.
        let first = seq
            .0
            .wrapping_add(u32::from(f.flags.bits().contains(TcpFlags::SYN)));
        let payload: Vec<u8> = (0..u32::from(f.payload_len) % 3000)
            .map(|i| first.wrapping_add(i) as u8)
            .collect();
        tuple.peer_bytes += payload.len() as u64;
        let segment = TcpRepr {
            src_port: remote,
            dst_port: local,
            seq,
            ack,
            flags: f.flags.bits(),
            window: f.window,
            urgent: f.urgent,
            options,
            payload: &payload,
        };
        let ip = ip_header();
        let mut datagram = Vec::new();
        packet::emit_tcp(&mut datagram, &ip, &segment).expect("forged segment fits");
        self.stack
            .handle_datagram(self.now, &datagram)
            .expect("a well-formed datagram is accepted");
    }

    fn raw_header(&mut self, target: u8, mut bytes: Vec<u8>) {
        let (local, remote) = self.target(target);
        bytes.truncate(tcp::MAX_HEADER_LEN + 100);
        if bytes.len() < tcp::HEADER_LEN {
            return;
        }
        let mut view = tcp::Packet::new_unchecked(&mut bytes[..]);
        view.set_src_port(remote);
        view.set_dst_port(local);
        // The data offset may point past the end; such segments are
        // rejected by the parser and never reach the engine.
        view.fill_checksum(PEER, STACK);
        self.raw_sent = true;
        let ip = Ipv4Repr {
            payload_len: bytes.len(),
            ..ip_header()
        };
        let mut datagram = vec![0u8; 20];
        ip.emit(&mut rtolab_wire::ipv4::Packet::new_unchecked(
            &mut datagram[..],
        ));
        datagram.extend_from_slice(&bytes);
        let _ = self.stack.handle_datagram(self.now, &datagram);
    }

    /// Moves the clock to `end`, firing every deadline on the way as a
    /// driver would.
    fn advance(&mut self, end: SimTime) {
        let mut last = None;
        let mut firings_here = 0;
        while let Some(at) = self.stack.poll_timeout() {
            if at > end {
                break;
            }
            assert!(
                at >= self.now,
                "deadline {at:?} is before now {:?}",
                self.now
            );
            self.now = at;
            if last == Some(at) {
                firings_here += 1;
                assert!(
                    firings_here < MAX_FIRINGS_AT_ONE_INSTANT,
                    "timers keep firing at {at:?}"
                );
            } else {
                last = Some(at);
                firings_here = 0;
            }
            self.stack.handle_timeout(at);
            self.drain();
        }
        self.now = end;
    }

    fn recv(&mut self, id: ConnId, max: usize) {
        let mut buf = vec![0u8; max.max(1)];
        let Some(n) = self.stack.recv(id, &mut buf) else {
            return;
        };
        let (last, count) = self.read.entry(id).or_default();
        for &b in &buf[..n] {
            if let (Some(prev), false) = (*last, self.raw_sent) {
                assert_eq!(b, prev.wrapping_add(1), "delivered data out of order");
            }
            *last = Some(b);
        }
        *count += n as u64;
        if let Some(c) = self.stack.conn(id) {
            let key = (c.local().port(), c.remote().port());
            let sent = self.tuples.get(&key).map_or(0, |t| t.peer_bytes);
            assert!(
                self.raw_sent || *count <= sent,
                "delivered {count} bytes, the peer sent {sent}"
            );
        }
    }

    /// Takes everything the stack has to say: datagrams, events, accepted
    /// connections; checks the invariants on the way.
    fn drain(&mut self) {
        let now = self.now;
        while let Some(len) = self.stack.poll_transmit(now, &mut self.out) {
            assert_eq!(len, self.out.len());
            let out = std::mem::take(&mut self.out);
            self.observe(&out);
            self.out = out;
        }
        while let Some((id, event)) = self.stack.poll_event() {
            if matches!(event, Event::Readable) && self.auto_read {
                self.recv(id, 1 << 16);
            }
        }
        while let Some(id) = self.stack.accept(LISTEN_PORT) {
            if self.conns.len() < 8 {
                self.conns.push(id);
            }
        }
        if let Some(at) = self.stack.poll_timeout() {
            // A deadline may be now (work due at once), never earlier.
            assert!(at >= now, "deadline {at:?} is before now {now:?}");
        }
    }

    /// Checks one datagram the stack sent and learns its numbers.
    fn observe(&mut self, datagram: &[u8]) {
        let parsed = packet::parse(datagram).expect("the stack sends valid datagrams");
        assert_eq!(parsed.ip.src, STACK);
        assert_eq!(parsed.ip.dst, PEER);
        let Transport::Tcp(seg) = parsed.transport else {
            panic!("the stack sent a non-TCP datagram");
        };
        let tuple = self.tuples.entry((seg.src_port, seg.dst_port)).or_default();
        if seg.flags.contains(TcpFlags::SYN) {
            tuple.iss = Some(seg.seq);
            assert!(seg.payload.is_empty(), "data on a SYN");
        }
        if seg.flags.contains(TcpFlags::ACK) {
            tuple.rcv_nxt = Some(seg.ack);
        }
        if let Some(ts) = seg.options.timestamps {
            tuple.tsval = ts.tsval;
        }
        let end = seg.seq + seg.segment_len() as u32;
        if seg.segment_len() > 0 && tuple.snd_end.is_none_or(|e| end > e) {
            tuple.snd_end = Some(end);
        }
        // A reset answers a segment and carries no data of ours.
        if seg.flags.contains(TcpFlags::RST) || seg.payload.is_empty() {
            return;
        }
        let iss = tuple.iss.expect("data before the SYN");
        let offset = seg.seq.0.wrapping_sub(iss.0).wrapping_sub(1);
        for (i, &b) in seg.payload.iter().enumerate() {
            assert_eq!(
                b,
                offset.wrapping_add(i as u32) as u8,
                "sent data is not the application's at its offset"
            );
        }
    }
}

fn ip_header() -> Ipv4Repr {
    Ipv4Repr {
        src: PEER,
        dst: STACK,
        protocol: protocol::TCP,
        ttl: 64,
        ident: 0,
        dont_fragment: true,
        tos: 0,
        payload_len: 0,
    }
}
