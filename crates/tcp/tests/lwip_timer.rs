//! The `lwip` profile's host timer: its grids start at the host's first
//! connection, stop once the host has none left and restart where the
//! slow-timer parity left off, one grid for all of a host's connections
//! (lwIP 2.1: `tcp_timer_needed` and `tcpip_tcp_timer` in
//! src/core/timeouts.c, `tcp_tmr` in src/core/tcp.c).
//!
//! One stack is driven by hand in explicit time; the peer's segments are
//! built here, so every time below is exact.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use rtolab_tcp::clock::TimerStart;
use rtolab_tcp::{Config, ConnId, Profile, Stack, State};
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::{self, emit_tcp, Transport};
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

const HOST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_PORT: u16 = 7891;
const LISTEN_PORT: u16 = 80;
const PEER_ISS: u32 = 5000;

fn ms(v: u64) -> SimTime {
    SimTime::from_millis(v)
}

/// A segment the stack sent: when, to which port of the peer, flags and
/// sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent {
    at: SimTime,
    to_port: u16,
    flags: TcpFlags,
    seq: u32,
}

struct Host {
    stack: Stack,
    sent: Vec<Sent>,
    now: SimTime,
}

impl Host {
    fn new(profile: Profile) -> Host {
        Host {
            stack: Stack::new(Arc::new(Config::from_profile(profile)), HOST, 1),
            sent: Vec::new(),
            now: SimTime::ZERO,
        }
    }

    fn transmit(&mut self) {
        let mut buf = Vec::new();
        while let Some(len) = self.stack.poll_transmit(self.now, &mut buf) {
            let parsed = packet::parse(&buf[..len]).expect("valid datagram");
            let Transport::Tcp(tcp) = parsed.transport else {
                panic!("not TCP");
            };
            self.sent.push(Sent {
                at: self.now,
                to_port: tcp.dst_port,
                flags: tcp.flags,
                seq: tcp.seq.0,
            });
        }
        while self.stack.poll_event().is_some() {}
    }

    /// Runs the stack's timers up to and including `until`.
    fn run_until(&mut self, until: SimTime) {
        while let Some(next) = self.stack.poll_timeout() {
            if next > until {
                break;
            }
            self.now = next.max(self.now);
            self.stack.handle_timeout(self.now);
            self.transmit();
        }
        self.now = until;
    }

    fn connect(&mut self, at: SimTime, port: u16) -> ConnId {
        self.run_until(at);
        let id = self.stack.connect(at, SocketAddrV4::new(PEER, port));
        self.transmit();
        id
    }

    /// The peer's segment arrives at `at`.
    fn deliver(&mut self, at: SimTime, seg: TcpRepr) {
        self.run_until(at);
        let ip = Ipv4Repr {
            src: PEER,
            dst: HOST,
            protocol: protocol::TCP,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let mut buf = Vec::new();
        emit_tcp(&mut buf, &ip, &seg).expect("emits");
        self.stack.handle_datagram(at, &buf).expect("parses");
        self.transmit();
    }

    fn times_of(&self, flags: TcpFlags) -> Vec<SimTime> {
        self.sent
            .iter()
            .filter(|s| s.flags == flags)
            .map(|s| s.at)
            .collect()
    }

    fn local_port(&self, id: ConnId) -> u16 {
        self.stack.conn(id).expect("connection").local().port()
    }

    fn state(&self, id: ConnId) -> State {
        self.stack.conn(id).expect("connection").state()
    }
}

fn segment(src_port: u16, dst_port: u16, seq: u32, ack: u32, flags: TcpFlags) -> TcpRepr<'static> {
    TcpRepr {
        src_port,
        dst_port,
        seq: SeqNumber(seq),
        ack: SeqNumber(ack),
        flags,
        window: 8096,
        urgent: 0,
        options: TcpOptions {
            mss: (flags.contains(TcpFlags::SYN)).then_some(1024),
            ..TcpOptions::default()
        },
        payload: &[],
    }
}

const SYN: TcpFlags = TcpFlags::SYN;
const ACK: TcpFlags = TcpFlags::ACK;
const SYN_ACK: TcpFlags = TcpFlags(TcpFlags::SYN.0 | TcpFlags::ACK.0);
const FIN_ACK: TcpFlags = TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0);
const PSH_ACK: TcpFlags = TcpFlags(TcpFlags::PSH.0 | TcpFlags::ACK.0);

fn lwip_from_zero() -> Profile {
    Profile {
        timer_start: TimerStart::Zero,
        ..Profile::lwip()
    }
}

/// The SYN and its retransmissions, from a host whose first connection
/// opens at 300 ms and whose SYN is never answered.
fn unanswered_syn(profile: Profile) -> Vec<SimTime> {
    let mut h = Host::new(profile);
    h.connect(ms(300), PEER_PORT);
    h.run_until(ms(2500));
    h.times_of(SYN)
}

#[test]
fn a_client_s_slow_ticks_start_250_ms_after_its_first_syn() {
    // Timer started with the SYN at 300 ms: slow ticks at 550, 1050, 1550,
    // 2050 ms. The 1 s initial RTO is 2 ticks, counted from the SYN
    // (tcp_slowtmr: rtime 1 at 550, 2 at 1050); SYN-SENT does not back off.
    assert_eq!(
        unanswered_syn(Profile::lwip()),
        [ms(300), ms(1050), ms(2050)]
    );
    // With the grid at time zero the slow ticks are at 250, 750, 1250 ms.
    assert_eq!(
        unanswered_syn(lwip_from_zero()),
        [ms(300), ms(1250), ms(2250)]
    );
}

#[test]
fn a_delayed_ack_leaves_on_the_first_fast_tick_of_the_client_s_grid() {
    let run = |profile: Profile| {
        let mut h = Host::new(profile);
        let id = h.connect(ms(300), PEER_PORT);
        let iss = h.sent[0].seq;
        let port = h.local_port(id);
        h.deliver(
            ms(400),
            segment(PEER_PORT, port, PEER_ISS, iss + 1, SYN_ACK),
        );
        assert_eq!(h.state(id), State::Established);
        let data = TcpRepr {
            payload: b"answer",
            ..segment(PEER_PORT, port, PEER_ISS + 1, iss + 1, PSH_ACK)
        };
        h.deliver(ms(610), data);
        h.run_until(ms(1000));
        // The handshake's ACK at once, the data's on a fast tick.
        h.times_of(ACK)
    };
    // Fast ticks at 550, 800, 1050 ms: data at 610 ms is acknowledged at
    // 800 ms (tcp_fasttmr), not at the zero grid's 750 ms.
    assert_eq!(run(Profile::lwip()), [ms(400), ms(800)]);
    assert_eq!(run(lwip_from_zero()), [ms(400), ms(750)]);
}

#[test]
fn a_server_s_grid_starts_with_the_syn_it_receives() {
    let run = |profile: Profile| {
        let mut h = Host::new(profile);
        h.stack.listen(LISTEN_PORT);
        h.deliver(ms(370), segment(PEER_PORT, LISTEN_PORT, PEER_ISS, 0, SYN));
        h.run_until(ms(2000));
        h.times_of(SYN_ACK)
    };
    // Slow ticks at 620, 1120, 1620 ms: the unanswered SYN-ACK (2 ticks)
    // is resent at 1120 ms; on the zero grid (ticks at 750, 1250 ms) at
    // 1250 ms.
    assert_eq!(run(Profile::lwip()), [ms(370), ms(1120)]);
    assert_eq!(run(lwip_from_zero()), [ms(370), ms(1250)]);
}

#[test]
fn two_connections_of_one_host_share_its_grid() {
    // The first connection started the timer at 300 ms (slow ticks at 550,
    // 1050, 1550 ms); the second, opened at 900 ms while the first is
    // still trying, counts on the same ticks: its SYN is resent at 1550,
    // not 1650 (a grid of its own) nor 1750 (the zero grid).
    let mut h = Host::new(Profile::lwip());
    h.connect(ms(300), PEER_PORT);
    h.connect(ms(900), PEER_PORT + 1);
    h.run_until(ms(1600));
    let second: Vec<SimTime> = h
        .sent
        .iter()
        .filter(|s| s.flags == SYN && s.to_port == PEER_PORT + 1)
        .map(|s| s.at)
        .collect();
    assert_eq!(second, [ms(900), ms(1550)]);
    assert_eq!(h.times_of(SYN), [ms(300), ms(900), ms(1050), ms(1550)]);
}

/// A client that opens at 300 ms, is answered at 400 ms and closes at
/// once; the peer's FIN-ACK at 500 ms puts it in TIME-WAIT until 2500 ms
/// (`time_wait` 2 s). Then a second connection opens at `second_at`.
/// Returns the second connection's SYN and its retransmission.
fn after_time_wait(second_at: SimTime) -> Vec<SimTime> {
    let mut h = Host::new(Profile {
        time_wait: SimDuration::from_secs(2),
        ..Profile::lwip()
    });
    let id = h.connect(ms(300), PEER_PORT);
    let iss = h.sent[0].seq;
    let port = h.local_port(id);
    h.deliver(
        ms(400),
        segment(PEER_PORT, port, PEER_ISS, iss + 1, SYN_ACK),
    );
    h.stack.conn_mut(id).expect("open").close(ms(400));
    h.transmit();
    assert_eq!(h.times_of(FIN_ACK), [ms(400)]);
    h.deliver(
        ms(500),
        segment(PEER_PORT, port, PEER_ISS + 1, iss + 2, FIN_ACK),
    );
    assert_eq!(h.state(id), State::TimeWait);
    h.run_until(ms(2500));
    assert_eq!(h.state(id), State::Closed);
    let before = h.sent.len();
    h.connect(second_at, PEER_PORT + 1);
    h.run_until(second_at + SimDuration::from_millis(1200));
    h.sent[before..]
        .iter()
        .filter(|s| s.flags == SYN)
        .map(|s| s.at)
        .collect()
}

#[test]
fn time_wait_keeps_the_grid_until_its_next_tick() {
    // TIME-WAIT ends at 2500 ms; the timer's ticks (every 250 ms from
    // 300 ms) go on to 2550 ms, the 9th, where lwIP finds no connection
    // and stops. A connection at 2520 ms finds the timer running: slow
    // ticks at 2550 and 3050 ms.
    assert_eq!(after_time_wait(ms(2520)), [ms(2520), ms(3050)]);
}

#[test]
fn a_restart_after_the_last_connection_gives_a_new_grid_with_the_parity_carried() {
    // Stopped at 2550 ms after 9 ticks (the slow timer ran on the 9th):
    // the restart at 2600 ms runs the fast timer alone on its first tick
    // (2850 ms) and the slow one on its second (3100 ms), then every
    // 500 ms: the SYN is resent at 3600 ms. A grid restarted with the
    // parity reset would resend it at 3350 ms, the zero grid at 3250 ms.
    assert_eq!(after_time_wait(ms(2600)), [ms(2600), ms(3600)]);
}
