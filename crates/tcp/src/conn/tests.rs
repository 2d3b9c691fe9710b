//! Engine unit tests in the smoltcp style: constant segment templates
//! changed with struct-update syntax, explicit time on every call, and
//! `send!` (a segment reaches the connection), `recv!` (the connection must
//! emit exactly this segment) and `recv_nothing!`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamps};

use super::{Connection, Event, State};
use crate::ack::ImmediateAckConfig;
use crate::ip::DEFAULT_MSS;
use crate::profile::{AckChoice, Config, KeepAlive, Profile};
use crate::trace::{RetransmitCause, SpuriousDetection, TraceEvent};

const LOCAL_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const REMOTE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const LOCAL_PORT: u16 = 49152;
const REMOTE_PORT: u16 = 80;
const LOCAL_SEQ: SeqNumber = SeqNumber(10_000);
/// Close to the wrap so the data path crosses sequence number 0.
const REMOTE_SEQ: SeqNumber = SeqNumber(u32::MAX - 1_500);

const MSS: usize = 1000;
const RECV_BUFFER: usize = 10_000;
const PEER_WINDOW: u16 = 32_000;

const SYN: TcpFlags = TcpFlags::SYN;
const ACK: TcpFlags = TcpFlags::ACK;
const FIN_ACK: TcpFlags = TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0);
const SYN_ACK: TcpFlags = TcpFlags(TcpFlags::SYN.0 | TcpFlags::ACK.0);
const PSH_ACK: TcpFlags = TcpFlags(TcpFlags::PSH.0 | TcpFlags::ACK.0);
const PSH_FIN_ACK: TcpFlags = TcpFlags(TcpFlags::PSH.0 | FIN_ACK.0);
const RST: TcpFlags = TcpFlags::RST;
const RST_ACK: TcpFlags = TcpFlags(TcpFlags::RST.0 | TcpFlags::ACK.0);

const NO_OPTIONS: TcpOptions = TcpOptions {
    mss: None,
    window_scale: None,
    sack_permitted: false,
    sack_blocks: [None; 4],
    timestamps: None,
    timelost: None,
};

/// What the peer sends to the connection under test.
const SEND_TEMPL: TcpRepr<'static> = TcpRepr {
    src_port: REMOTE_PORT,
    dst_port: LOCAL_PORT,
    seq: SeqNumber(0),
    ack: SeqNumber(0),
    flags: ACK,
    window: PEER_WINDOW,
    urgent: 0,
    options: NO_OPTIONS,
    payload: &[],
};

/// What the connection under test sends.
const RECV_TEMPL: TcpRepr<'static> = TcpRepr {
    src_port: LOCAL_PORT,
    dst_port: REMOTE_PORT,
    seq: SeqNumber(0),
    ack: SeqNumber(0),
    flags: ACK,
    window: RECV_BUFFER as u16,
    urgent: 0,
    options: NO_OPTIONS,
    payload: &[],
};

/// Sixty distinct bytes to cut payloads from.
const DATA: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX";

fn at(ms: u64) -> SimTime {
    SimTime::from_millis(ms)
}

fn ms(v: u64) -> SimDuration {
    SimDuration::from_millis(v)
}

/// The RFC profile with round numbers, immediate ACKs and Nagle off, so
/// each test turns on only what it examines.
fn profile() -> Profile {
    Profile {
        name: "test".into(),
        mss: MSS as u16,
        send_buffer: 64_000,
        recv_buffer: RECV_BUFFER,
        ack: AckChoice::Immediate(ImmediateAckConfig {}),
        nagle: false,
        ..Profile::rfc()
    }
}

fn config(p: Profile) -> Arc<Config> {
    Arc::new(Config::from_profile(p))
}

fn ip_from_peer(tcp: &TcpRepr) -> Ipv4Repr {
    Ipv4Repr {
        src: REMOTE_IP,
        dst: LOCAL_IP,
        protocol: protocol::TCP,
        ttl: 64,
        ident: 0,
        dont_fragment: true,
        tos: 0,
        payload_len: tcp.buffer_len(),
    }
}

#[track_caller]
fn send_at(c: &mut Connection, time: u64, seg: &TcpRepr) {
    c.handle_segment(at(time), &ip_from_peer(seg), seg);
}

/// Fires due timers, then polls one segment and hands it to `check`.
#[track_caller]
fn recv_with(c: &mut Connection, time: u64, check: impl FnOnce(&TcpRepr)) {
    c.handle_timeout(at(time));
    let mut buf = Vec::new();
    let Some(len) = c.poll_transmit(at(time), &mut buf) else {
        panic!("expected a segment at {time} ms, got none");
    };
    let parsed = packet::parse(&buf[..len]).expect("the engine emits valid datagrams");
    assert_eq!(parsed.ip.src, LOCAL_IP);
    assert_eq!(parsed.ip.dst, REMOTE_IP);
    let Transport::Tcp(tcp) = parsed.transport else {
        panic!("not TCP");
    };
    check(&tcp);
}

#[track_caller]
fn recv_at(c: &mut Connection, time: u64, expected: &TcpRepr) {
    recv_with(c, time, |got| assert_eq!(got, expected, "at {time} ms"));
}

#[track_caller]
fn recv_nothing_at(c: &mut Connection, time: u64) {
    c.handle_timeout(at(time));
    let mut buf = Vec::new();
    if let Some(len) = c.poll_transmit(at(time), &mut buf) {
        let parsed = packet::parse(&buf[..len]).expect("valid datagram");
        panic!("expected nothing at {time} ms, got {:?}", parsed.transport);
    }
}

macro_rules! send {
    ($c:expr, time $t:expr, $seg:expr) => {
        send_at(&mut $c, $t, &$seg)
    };
}

macro_rules! recv {
    ($c:expr, time $t:expr, $seg:expr) => {
        recv_at(&mut $c, $t, &$seg)
    };
}

macro_rules! recv_nothing {
    ($c:expr, time $t:expr) => {
        recv_nothing_at(&mut $c, $t)
    };
}

fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn traces(c: &mut Connection) -> Vec<TraceEvent> {
    events(c)
        .into_iter()
        .filter_map(|e| match e {
            Event::Trace(t) => Some(t.event),
            _ => None,
        })
        .collect()
}

fn app_events(c: &mut Connection) -> Vec<Event> {
    events(c)
        .into_iter()
        .filter(|e| !matches!(e, Event::Trace(_)))
        .collect()
}

fn retransmissions(traces: &[TraceEvent]) -> Vec<(u32, RetransmitCause)> {
    traces
        .iter()
        .filter_map(|t| match *t {
            TraceEvent::Retransmission { seq, cause, .. } => Some((seq, cause)),
            _ => None,
        })
        .collect()
}

// ----- fixtures ----------------------------------------------------------

/// Our SYN as the RFC test profile sends it.
const OUR_SYN: TcpRepr<'static> = TcpRepr {
    seq: LOCAL_SEQ,
    flags: SYN,
    options: TcpOptions {
        mss: Some(MSS as u16),
        ..NO_OPTIONS
    },
    ..RECV_TEMPL
};

/// The peer's SYN-ACK answering [`OUR_SYN`].
const PEER_SYN_ACK: TcpRepr<'static> = TcpRepr {
    seq: REMOTE_SEQ,
    ack: SeqNumber(LOCAL_SEQ.0 + 1),
    flags: SYN_ACK,
    options: TcpOptions {
        mss: Some(MSS as u16),
        ..NO_OPTIONS
    },
    ..SEND_TEMPL
};

fn local() -> SocketAddrV4 {
    SocketAddrV4::new(LOCAL_IP, LOCAL_PORT)
}

fn remote() -> SocketAddrV4 {
    SocketAddrV4::new(REMOTE_IP, REMOTE_PORT)
}

/// An active open whose SYN went out at time 0.
fn conn_syn_sent_with(p: Profile) -> Connection {
    let mut c = Connection::connect(config(p), at(0), local(), remote(), LOCAL_SEQ, 1);
    recv_with(&mut c, 0, |syn| {
        assert_eq!(syn.flags, SYN);
        assert_eq!(syn.seq, LOCAL_SEQ);
    });
    events(&mut c);
    c
}

fn conn_syn_sent() -> Connection {
    conn_syn_sent_with(profile())
}

/// An active open completed at time 10 with a SYN-ACK carrying `options`;
/// the handshake ACK is consumed.
fn conn_established_with(p: Profile, options: TcpOptions) -> Connection {
    let mut c = conn_syn_sent_with(p);
    send!(c, time 10, TcpRepr { options, ..PEER_SYN_ACK });
    recv_with(&mut c, 10, |ack| {
        assert_eq!(ack.flags, ACK);
        assert_eq!(ack.ack, REMOTE_SEQ + 1u32);
    });
    assert_eq!(c.state(), State::Established);
    events(&mut c);
    c
}

fn conn_established() -> Connection {
    conn_established_with(profile(), PEER_SYN_ACK.options)
}

/// Our next sequence number in an established fixture.
const LOCAL_NXT: SeqNumber = SeqNumber(LOCAL_SEQ.0 + 1);
/// The peer's next sequence number in an established fixture.
const REMOTE_NXT: SeqNumber = SeqNumber(REMOTE_SEQ.0.wrapping_add(1));

/// Established, then closed by us at time 20: our FIN is out.
fn conn_fin_wait_1() -> Connection {
    let mut c = conn_established();
    c.close(at(20));
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: FIN_ACK, ..RECV_TEMPL });
    assert_eq!(c.state(), State::FinWait1);
    events(&mut c);
    c
}

/// Our FIN acknowledged at time 30.
fn conn_fin_wait_2() -> Connection {
    let mut c = conn_fin_wait_1();
    send!(c, time 30, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 1u32, ..SEND_TEMPL });
    recv_nothing!(c, time 30);
    assert_eq!(c.state(), State::FinWait2);
    events(&mut c);
    c
}

/// The peer's FIN arrived at time 40 after ours was acknowledged.
fn conn_time_wait() -> Connection {
    let mut c = conn_fin_wait_2();
    send!(c, time 40, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 1u32, flags: FIN_ACK, ..SEND_TEMPL });
    recv!(c, time 40, TcpRepr { seq: LOCAL_NXT + 1u32, ack: REMOTE_NXT + 1u32, ..RECV_TEMPL });
    assert_eq!(c.state(), State::TimeWait);
    events(&mut c);
    c
}

/// The peer closed first, at time 20.
fn conn_close_wait() -> Connection {
    let mut c = conn_established();
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, flags: FIN_ACK, ..SEND_TEMPL });
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 1u32, ..RECV_TEMPL });
    assert_eq!(c.state(), State::CloseWait);
    events(&mut c);
    c
}

/// Then we closed at time 30.
fn conn_last_ack() -> Connection {
    let mut c = conn_close_wait();
    c.close(at(30));
    recv!(c, time 30, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 1u32, flags: FIN_ACK, ..RECV_TEMPL });
    assert_eq!(c.state(), State::LastAck);
    events(&mut c);
    c
}

// ----- handshake and state transitions ----------------------------------

#[test]
fn active_open_sends_syn_and_completes_on_syn_ack() {
    let mut c = Connection::connect(config(profile()), at(0), local(), remote(), LOCAL_SEQ, 1);
    assert_eq!(c.state(), State::SynSent);
    recv!(c, time 0, OUR_SYN);
    recv_nothing!(c, time 0);
    send!(c, time 10, PEER_SYN_ACK);
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, ..RECV_TEMPL });
    assert_eq!(c.state(), State::Established);
    assert_eq!(app_events(&mut c), [Event::Connected]);
}

#[test]
fn a_syn_ack_carrying_data_delivers_it_after_the_syn() {
    // RFC 9293 §3.10.7.3: the SYN takes the segment's first sequence
    // number; its text starts one on, and the ACK covers both.
    let mut c = conn_syn_sent();
    let window = (RECV_BUFFER - 10) as u16;
    send!(c, time 10, TcpRepr { payload: &DATA[..10], ..PEER_SYN_ACK });
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 10u32, window, ..RECV_TEMPL });
    assert_eq!(c.state(), State::Established);
    let mut buf = [0u8; 32];
    assert_eq!(c.recv(&mut buf), 10);
    assert_eq!(&buf[..10], &DATA[..10]);
}

#[test]
fn a_syn_ack_carrying_a_fin_closes_the_peers_half() {
    let mut c = conn_syn_sent();
    send!(c, time 10, TcpRepr { flags: TcpFlags(SYN_ACK.0 | FIN_ACK.0), ..PEER_SYN_ACK });
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 1u32, ..RECV_TEMPL });
    assert_eq!(c.state(), State::CloseWait);
}

fn peer_syn() -> TcpRepr<'static> {
    TcpRepr {
        seq: REMOTE_SEQ,
        flags: SYN,
        options: TcpOptions {
            mss: Some(MSS as u16),
            ..NO_OPTIONS
        },
        ..SEND_TEMPL
    }
}

fn conn_syn_received_with(p: Profile) -> Connection {
    let syn = peer_syn();
    let mut c = Connection::accept(config(p), at(0), &ip_from_peer(&syn), &syn, LOCAL_SEQ, 1)
        .expect("a plain SYN is accepted");
    assert_eq!(c.state(), State::SynReceived);
    recv!(c, time 0, TcpRepr { seq: LOCAL_SEQ, ack: REMOTE_NXT, flags: SYN_ACK, options: OUR_SYN.options, ..RECV_TEMPL });
    events(&mut c);
    c
}

#[test]
fn passive_open_answers_syn_and_completes_on_ack() {
    let mut c = conn_syn_received_with(profile());
    send!(c, time 10, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, ..SEND_TEMPL });
    recv_nothing!(c, time 10);
    assert_eq!(c.state(), State::Established);
    assert_eq!(app_events(&mut c), [Event::Connected]);
}

#[test]
fn accept_refuses_anything_but_a_plain_syn() {
    for flags in [SYN_ACK, ACK, TcpFlags(SYN.0 | RST.0)] {
        let seg = TcpRepr {
            flags,
            ..peer_syn()
        };
        let c = Connection::accept(
            config(profile()),
            at(0),
            &ip_from_peer(&seg),
            &seg,
            LOCAL_SEQ,
            1,
        );
        assert!(c.is_none(), "{flags}");
    }
}

#[test]
fn syn_received_resends_syn_ack_when_the_syn_is_repeated() {
    let mut c = conn_syn_received_with(profile());
    send!(c, time 5, peer_syn());
    recv!(c, time 5, TcpRepr { seq: LOCAL_SEQ, ack: REMOTE_NXT, flags: SYN_ACK, options: OUR_SYN.options, ..RECV_TEMPL });
}

#[test]
fn simultaneous_open_goes_through_syn_received() {
    let mut c = conn_syn_sent();
    // The peer's SYN crosses ours.
    send!(c, time 5, peer_syn());
    assert_eq!(c.state(), State::SynReceived);
    recv!(c, time 5, TcpRepr { seq: LOCAL_SEQ, ack: REMOTE_NXT, flags: SYN_ACK, options: OUR_SYN.options, ..RECV_TEMPL });
    // The peer's SYN-ACK (its answer to our SYN) completes the handshake;
    // its SYN is old and trimmed, its ACK is new.
    send!(c, time 10, PEER_SYN_ACK);
    assert_eq!(c.state(), State::Established);
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, ..RECV_TEMPL });
    recv_nothing!(c, time 10);
    let t = traces(&mut c);
    let states: Vec<State> = t
        .iter()
        .filter_map(|e| match e {
            TraceEvent::State { to, .. } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(states, [State::SynReceived, State::Established]);
}

#[test]
fn simultaneous_open_also_completes_on_a_bare_ack() {
    let mut c = conn_syn_sent();
    send!(c, time 5, peer_syn());
    recv!(c, time 5, TcpRepr { seq: LOCAL_SEQ, ack: REMOTE_NXT, flags: SYN_ACK, options: OUR_SYN.options, ..RECV_TEMPL });
    send!(c, time 10, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Established);
    recv_nothing!(c, time 10);
}

#[test]
fn active_close_walks_fin_wait_1_fin_wait_2_time_wait_closed() {
    let mut c = conn_time_wait();
    // 2 MSL after entering TIME-WAIT the connection is gone.
    let tw = profile().time_wait;
    assert_eq!(c.poll_timeout(), Some(at(40) + tw));
    recv_nothing!(c, time 40 + tw.as_millis() - 1);
    assert_eq!(c.state(), State::TimeWait);
    c.handle_timeout(at(40) + tw);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::Closed]);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn fin_acknowledging_our_fin_in_fin_wait_1_goes_straight_to_time_wait() {
    let mut c = conn_fin_wait_1();
    send!(c, time 30, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 1u32, flags: FIN_ACK, ..SEND_TEMPL });
    assert_eq!(c.state(), State::TimeWait);
    recv!(c, time 30, TcpRepr { seq: LOCAL_NXT + 1u32, ack: REMOTE_NXT + 1u32, ..RECV_TEMPL });
    assert_eq!(app_events(&mut c), [Event::PeerClosed]);
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut c = conn_fin_wait_1();
    // The peer's FIN crosses ours: it does not acknowledge our FIN.
    send!(c, time 25, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, flags: FIN_ACK, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Closing);
    recv!(c, time 25, TcpRepr { seq: LOCAL_NXT + 1u32, ack: REMOTE_NXT + 1u32, ..RECV_TEMPL });
    send!(c, time 30, TcpRepr { seq: REMOTE_NXT + 1u32, ack: LOCAL_NXT + 1u32, ..SEND_TEMPL });
    assert_eq!(c.state(), State::TimeWait);
    recv_nothing!(c, time 30);
}

#[test]
fn passive_close_walks_close_wait_last_ack_closed() {
    let mut c = conn_last_ack();
    send!(c, time 40, TcpRepr { seq: REMOTE_NXT + 1u32, ack: LOCAL_NXT + 1u32, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::Closed]);
    recv_nothing!(c, time 40);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn close_in_syn_sent_abandons_the_attempt() {
    let mut c = conn_syn_sent();
    c.close(at(5));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::Closed]);
    recv_nothing!(c, time 5);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn close_in_syn_sent_with_data_queued_sends_data_and_fin_after_the_handshake() {
    // RFC 9293 §3.10.4: the close is queued behind the data.
    let mut c = conn_syn_sent();
    c.send(&DATA[..10]).unwrap();
    c.close(at(5));
    assert_eq!(c.state(), State::SynSent);
    send!(c, time 10, PEER_SYN_ACK);
    assert_eq!(c.state(), State::FinWait1);
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: PSH_FIN_ACK, payload: &DATA[..10], ..RECV_TEMPL });
    recv_nothing!(c, time 10);
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 11u32, ..SEND_TEMPL });
    assert_eq!(c.state(), State::FinWait2);
}

#[test]
fn close_in_syn_received_sends_fin_after_the_handshake() {
    let mut c = conn_syn_received_with(profile());
    c.close(at(5));
    recv_nothing!(c, time 5);
    send!(c, time 10, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, ..SEND_TEMPL });
    assert_eq!(c.state(), State::FinWait1);
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: FIN_ACK, ..RECV_TEMPL });
}

// ----- TIME-WAIT -----------------------------------------------------------

#[test]
fn time_wait_reacknowledges_a_repeated_fin_and_restarts_2msl() {
    let mut c = conn_time_wait();
    let tw = profile().time_wait;
    // Our last ACK was lost; the peer resends its FIN.
    send!(c, time 1_000, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 1u32, flags: FIN_ACK, ..SEND_TEMPL });
    recv!(c, time 1_000, TcpRepr { seq: LOCAL_NXT + 1u32, ack: REMOTE_NXT + 1u32, ..RECV_TEMPL });
    assert_eq!(c.state(), State::TimeWait);
    assert_eq!(c.poll_timeout(), Some(at(1_000) + tw));
    c.handle_timeout(at(40) + tw);
    assert_eq!(c.state(), State::TimeWait);
    c.handle_timeout(at(1_000) + tw);
    assert_eq!(c.state(), State::Closed);
}

// ----- RST acceptance -----------------------------------------------------

#[test]
fn rst_at_rcv_nxt_resets_an_established_connection() {
    let mut c = conn_established();
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT, flags: RST, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::Reset]);
    recv_nothing!(c, time 20);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn in_window_rst_not_at_rcv_nxt_draws_a_challenge_ack() {
    // RFC 5961 §3.2.
    let mut c = conn_established();
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT + 100u32, flags: RST, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Established);
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, ..RECV_TEMPL });
    assert!(app_events(&mut c).is_empty());
}

#[test]
fn out_of_window_rst_is_dropped_silently() {
    let mut c = conn_established();
    for seq in [
        REMOTE_NXT - 1u32,
        REMOTE_NXT + RECV_BUFFER,
        REMOTE_NXT + 1_000_000u32,
    ] {
        send!(c, time 20, TcpRepr { seq, flags: RST, ..SEND_TEMPL });
        assert_eq!(c.state(), State::Established);
        recv_nothing!(c, time 20);
    }
}

#[test]
fn syn_in_a_synchronized_state_draws_a_challenge_ack() {
    // RFC 5961 §4.
    let mut c = conn_established();
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT + 10u32, flags: SYN, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Established);
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, ..RECV_TEMPL });
}

#[test]
fn syn_sent_accepts_rst_only_with_an_acceptable_ack() {
    // RFC 9293 §3.10.7.3: without ACK, or with a bad ACK, a RST is ignored.
    let mut c = conn_syn_sent();
    send!(c, time 5, TcpRepr { seq: REMOTE_SEQ, flags: RST, ..SEND_TEMPL });
    send!(c, time 5, TcpRepr { seq: REMOTE_SEQ, ack: LOCAL_SEQ + 7u32, flags: RST_ACK, ..SEND_TEMPL });
    assert_eq!(c.state(), State::SynSent);
    recv_nothing!(c, time 5);
    send!(c, time 6, TcpRepr { seq: REMOTE_SEQ, ack: LOCAL_NXT, flags: RST_ACK, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::Reset]);
}

#[test]
fn syn_received_is_reset_by_an_in_window_rst() {
    let mut c = conn_syn_received_with(profile());
    send!(c, time 5, TcpRepr { seq: REMOTE_NXT, flags: RST, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::Reset]);
}

#[test]
fn rst_in_time_wait_closes() {
    let mut c = conn_time_wait();
    send!(c, time 50, TcpRepr { seq: REMOTE_NXT + 1u32, flags: RST, ..SEND_TEMPL });
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.poll_timeout(), None);
}

// ----- RST generation -----------------------------------------------------

#[test]
fn syn_sent_answers_an_unacceptable_ack_with_rst() {
    let mut c = conn_syn_sent();
    send!(c, time 5, TcpRepr { seq: REMOTE_SEQ, ack: LOCAL_SEQ + 100u32, flags: SYN_ACK, ..SEND_TEMPL });
    recv!(c, time 5, TcpRepr { seq: LOCAL_SEQ + 100u32, flags: RST, window: 0, ..RECV_TEMPL });
    assert_eq!(c.state(), State::SynSent);
}

#[test]
fn syn_received_answers_an_unacceptable_ack_with_rst() {
    let mut c = conn_syn_received_with(profile());
    send!(c, time 5, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_SEQ + 100u32, ..SEND_TEMPL });
    recv!(c, time 5, TcpRepr { seq: LOCAL_SEQ + 100u32, flags: RST, window: 0, ..RECV_TEMPL });
    assert_eq!(c.state(), State::SynReceived);
}

#[test]
fn abort_sends_rst_and_closes() {
    let mut c = conn_established();
    c.abort(at(20));
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, flags: RST, window: 0, ..RECV_TEMPL });
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::Closed]);
}

mod stack {
    //! RST generation by the host when no connection wants a segment.

    use super::*;
    use crate::Stack;

    fn stack() -> Stack {
        Stack::new(config(profile()), LOCAL_IP, 1)
    }

    /// Hands `seg` to the stack and returns what it answers, if anything.
    fn answer(stack: &mut Stack, seg: &TcpRepr) -> Option<Vec<u8>> {
        let seg = TcpRepr {
            dst_port: REMOTE_PORT,
            ..*seg
        };
        stack.handle_segment(at(0), &ip_from_peer(&seg), &seg);
        let mut buf = Vec::new();
        let len = stack.poll_transmit(at(0), &mut buf)?;
        buf.truncate(len);
        Some(buf)
    }

    #[track_caller]
    fn assert_answer(stack: &mut Stack, seg: &TcpRepr, expected: &TcpRepr) {
        let buf = answer(stack, seg).expect("an answer");
        let parsed = packet::parse(&buf).expect("valid");
        let Transport::Tcp(tcp) = parsed.transport else {
            panic!("not TCP")
        };
        assert_eq!(
            tcp,
            TcpRepr {
                src_port: REMOTE_PORT,
                dst_port: REMOTE_PORT,
                window: 0,
                ..*expected
            }
        );
    }

    #[test]
    fn segment_without_ack_to_a_closed_port_gets_rst_ack() {
        // RFC 9293 §3.10.7.1: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
        let mut s = stack();
        let syn = TcpRepr {
            seq: REMOTE_SEQ,
            flags: SYN,
            ..SEND_TEMPL
        };
        assert_answer(
            &mut s,
            &syn,
            &TcpRepr {
                seq: SeqNumber(0),
                ack: REMOTE_SEQ + 1u32,
                flags: RST_ACK,
                ..RECV_TEMPL
            },
        );
        let data = TcpRepr {
            seq: REMOTE_SEQ,
            flags: TcpFlags::PSH,
            payload: &DATA[..10],
            ..SEND_TEMPL
        };
        assert_answer(
            &mut s,
            &data,
            &TcpRepr {
                seq: SeqNumber(0),
                ack: REMOTE_SEQ + 10u32,
                flags: RST_ACK,
                ..RECV_TEMPL
            },
        );
    }

    #[test]
    fn segment_with_ack_to_a_closed_port_gets_rst_at_its_ack() {
        // <SEQ=SEG.ACK><CTL=RST>.
        let mut s = stack();
        let seg = TcpRepr {
            seq: REMOTE_SEQ,
            ack: SeqNumber(777),
            payload: &DATA[..5],
            ..SEND_TEMPL
        };
        assert_answer(
            &mut s,
            &seg,
            &TcpRepr {
                seq: SeqNumber(777),
                flags: RST,
                ..RECV_TEMPL
            },
        );
    }

    #[test]
    fn ack_to_a_listener_gets_rst() {
        let mut s = stack();
        s.listen(REMOTE_PORT);
        let seg = TcpRepr {
            seq: REMOTE_SEQ,
            ack: SeqNumber(4242),
            ..SEND_TEMPL
        };
        assert_answer(
            &mut s,
            &seg,
            &TcpRepr {
                seq: SeqNumber(4242),
                flags: RST,
                ..RECV_TEMPL
            },
        );
    }

    #[test]
    fn rst_is_never_answered() {
        let mut s = stack();
        s.listen(REMOTE_PORT);
        for flags in [RST, RST_ACK] {
            let seg = TcpRepr {
                seq: REMOTE_SEQ,
                ack: SeqNumber(1),
                flags,
                ..SEND_TEMPL
            };
            assert!(answer(&mut s, &seg).is_none());
        }
    }

    #[test]
    fn syn_to_a_listener_is_answered_with_syn_ack() {
        let mut s = stack();
        s.listen(REMOTE_PORT);
        let buf = answer(&mut s, &peer_syn()).expect("SYN-ACK");
        let parsed = packet::parse(&buf).expect("valid");
        let Transport::Tcp(tcp) = parsed.transport else {
            panic!("not TCP")
        };
        assert_eq!(tcp.flags, SYN_ACK);
        assert_eq!(tcp.ack, REMOTE_NXT);
    }
}

// ----- SYN and FIN retransmission -------------------------------------------

#[test]
fn syn_is_retransmitted_with_the_policy_rto_and_backoff() {
    let mut p = profile();
    p.max_syn_retransmissions = 2;
    let mut c = conn_syn_sent_with(p);
    // RFC 6298: 1 s initial RTO, doubled per expiry.
    assert_eq!(c.poll_timeout(), Some(at(1_000)));
    recv_nothing!(c, time 999);
    recv!(c, time 1_000, OUR_SYN);
    assert_eq!(c.poll_timeout(), Some(at(3_000)));
    recv!(c, time 3_000, OUR_SYN);
    assert_eq!(c.poll_timeout(), Some(at(7_000)));
    let t = traces(&mut c);
    assert_eq!(
        retransmissions(&t),
        [
            (LOCAL_SEQ.0, RetransmitCause::Timeout),
            (LOCAL_SEQ.0, RetransmitCause::Timeout)
        ]
    );
    // The third expiry exceeds max_syn_retransmissions.
    recv_nothing!(c, time 7_000);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::TimedOut]);
}

#[test]
fn data_after_a_retransmitted_syn_uses_three_seconds() {
    // RFC 6298 (5.7).
    let mut c = conn_syn_sent();
    recv!(c, time 1_000, OUR_SYN);
    send!(c, time 1_010, PEER_SYN_ACK);
    recv!(c, time 1_010, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, ..RECV_TEMPL });
    c.send(&DATA[..10]).unwrap();
    recv!(c, time 1_020, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[..10], ..RECV_TEMPL });
    assert_eq!(c.poll_timeout(), Some(at(4_020)));
}

#[test]
fn fin_is_retransmitted_with_the_policy_rto_and_backoff() {
    let mut c = conn_fin_wait_1();
    // The handshake's 10 ms sample puts the RTO at the 1 s minimum.
    let fin = TcpRepr {
        seq: LOCAL_NXT,
        ack: REMOTE_NXT,
        flags: FIN_ACK,
        ..RECV_TEMPL
    };
    assert_eq!(c.poll_timeout(), Some(at(1_020)));
    recv!(c, time 1_020, fin);
    assert_eq!(c.poll_timeout(), Some(at(3_020)));
    recv!(c, time 3_020, fin);
    assert_eq!(c.poll_timeout(), Some(at(7_020)));
    let t = traces(&mut c);
    assert_eq!(retransmissions(&t).len(), 2);
    send!(c, time 7_010, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 1u32, ..SEND_TEMPL });
    assert_eq!(c.state(), State::FinWait2);
    assert_eq!(c.poll_timeout(), None);
}

// ----- MSS -------------------------------------------------------------------

#[test]
fn send_mss_is_the_smaller_of_both_and_536_without_option() {
    for (peer, expected) in [(Some(500), 500), (Some(9000), MSS), (None, DEFAULT_MSS)] {
        let options = TcpOptions {
            mss: peer,
            ..NO_OPTIONS
        };
        let mut c = conn_established_with(profile(), options);
        assert_eq!(c.send_mss(), expected, "peer MSS {peer:?}");
        c.send(&[7u8; 3000]).unwrap();
        recv_with(&mut c, 20, |seg| assert_eq!(seg.payload.len(), expected));
    }
}

#[test]
fn passive_side_takes_536_when_the_syn_has_no_mss() {
    let syn = TcpRepr {
        options: NO_OPTIONS,
        ..peer_syn()
    };
    let mut c = Connection::accept(
        config(profile()),
        at(0),
        &ip_from_peer(&syn),
        &syn,
        LOCAL_SEQ,
        1,
    )
    .expect("accepted");
    // Our SYN-ACK still announces our own MSS.
    recv!(c, time 0, TcpRepr { seq: LOCAL_SEQ, ack: REMOTE_NXT, flags: SYN_ACK, options: OUR_SYN.options, ..RECV_TEMPL });
    assert_eq!(c.send_mss(), DEFAULT_MSS);
}

// ----- timestamps: PAWS --------------------------------------------------------

fn ts(tsval: u32, tsecr: u32) -> TcpOptions {
    TcpOptions {
        timestamps: Some(Timestamps { tsval, tsecr }),
        ..NO_OPTIONS
    }
}

fn ts_profile() -> Profile {
    Profile {
        timestamps: true,
        ..profile()
    }
}

#[test]
fn paws_drops_a_segment_with_an_old_timestamp() {
    let mut c = conn_established_with(ts_profile(), ts(500, 0));
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, payload: &DATA[..10], options: ts(600, 10), ..SEND_TEMPL });
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 10u32, window: 9_990, options: ts(20, 600), ..RECV_TEMPL });
    // An old duplicate from before: its timestamp is older than TS.Recent.
    send!(c, time 30, TcpRepr { seq: REMOTE_NXT + 10u32, ack: LOCAL_NXT, payload: &DATA[10..20], options: ts(550, 10), ..SEND_TEMPL });
    recv!(c, time 30, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 10u32, window: 9_990, options: ts(30, 600), ..RECV_TEMPL });
    assert_eq!(c.recv_queue_len(), 10);
    // A fresh one is taken.
    send!(c, time 40, TcpRepr { seq: REMOTE_NXT + 10u32, ack: LOCAL_NXT, payload: &DATA[10..20], options: ts(610, 10), ..SEND_TEMPL });
    assert_eq!(c.recv_queue_len(), 20);
}

// ----- keep-alive ----------------------------------------------------------------

fn keepalive_profile() -> Profile {
    Profile {
        keepalive: Some(KeepAlive {
            idle: SimDuration::from_secs(10),
            interval: SimDuration::from_secs(1),
            probes: 3,
        }),
        ..profile()
    }
}

const KEEPALIVE_PROBE: TcpRepr<'static> = TcpRepr {
    seq: SeqNumber(LOCAL_SEQ.0),
    ack: REMOTE_NXT,
    ..RECV_TEMPL
};

#[test]
fn keepalive_probes_after_idle_and_aborts_after_the_probe_count() {
    let mut c = conn_established_with(keepalive_profile(), PEER_SYN_ACK.options);
    assert_eq!(c.poll_timeout(), Some(at(10_010)));
    recv_nothing!(c, time 10_009);
    recv!(c, time 10_010, KEEPALIVE_PROBE);
    recv!(c, time 11_010, KEEPALIVE_PROBE);
    recv!(c, time 12_010, KEEPALIVE_PROBE);
    let t = traces(&mut c);
    assert_eq!(
        retransmissions(&t),
        [(LOCAL_SEQ.0, RetransmitCause::KeepAlive); 3]
    );
    assert_eq!(
        c.stats().retransmissions,
        0,
        "probes are not retransmissions"
    );
    recv_nothing!(c, time 13_010);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(app_events(&mut c), [Event::TimedOut]);
}

#[test]
fn answered_keepalive_restarts_the_idle_time() {
    let mut c = conn_established_with(keepalive_profile(), PEER_SYN_ACK.options);
    let mut t = 10_010;
    for _ in 0..5 {
        recv!(c, time t, KEEPALIVE_PROBE);
        send!(c, time t + 5, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, ..SEND_TEMPL });
        assert_eq!(c.poll_timeout(), Some(at(t + 5 + 10_000)));
        t += 5 + 10_000;
    }
    assert_eq!(c.state(), State::Established);
}

#[test]
fn data_from_the_peer_restarts_the_idle_time() {
    let mut c = conn_established_with(keepalive_profile(), PEER_SYN_ACK.options);
    send!(c, time 5_000, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, payload: &DATA[..5], ..SEND_TEMPL });
    recv!(c, time 5_000, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 5u32, window: (RECV_BUFFER - 5) as u16, ..RECV_TEMPL });
    assert_eq!(c.poll_timeout(), Some(at(15_000)));
}

// ----- persist ---------------------------------------------------------------------

#[test]
fn zero_window_is_probed_with_exponential_backoff() {
    let mut c = conn_established();
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, window: 0, ..SEND_TEMPL });
    c.send(&DATA[..10]).unwrap();
    recv_nothing!(c, time 30);
    let probe = TcpRepr {
        seq: LOCAL_SEQ,
        ack: REMOTE_NXT,
        ..RECV_TEMPL
    };
    // Persist interval: the RTO (1 s), doubling per unanswered probe, up to
    // persist_max (60 s).
    let mut expected = vec![];
    let mut when = 30;
    let mut delay = 1_000;
    for _ in 0..8 {
        when += delay;
        expected.push(when);
        delay = (delay * 2).min(60_000);
    }
    for &t in &expected {
        assert_eq!(c.poll_timeout(), Some(at(t)));
        recv!(c, time t, probe);
        // The peer answers with the same zero window.
        send!(c, time t + 5, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, window: 0, ..SEND_TEMPL });
        recv_nothing!(c, time t + 5);
    }
    let t = traces(&mut c);
    assert_eq!(
        retransmissions(&t),
        vec![(LOCAL_SEQ.0, RetransmitCause::Probe); 8]
    );
    // The window opens: the data goes and probing stops.
    let last = *expected.last().unwrap();
    send!(c, time last + 100, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, ..SEND_TEMPL });
    recv!(c, time last + 100, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[..10], ..RECV_TEMPL });
    assert_eq!(
        c.poll_timeout(),
        Some(at(last + 1_100)),
        "only the retransmission timer"
    );
}

// ----- Nagle -------------------------------------------------------------------------

#[test]
fn nagle_holds_a_small_segment_while_data_is_unacknowledged() {
    let mut c = conn_established_with(
        Profile {
            nagle: true,
            ..profile()
        },
        PEER_SYN_ACK.options,
    );
    c.send(&DATA[..10]).unwrap();
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[..10], ..RECV_TEMPL });
    c.send(&DATA[10..20]).unwrap();
    recv_nothing!(c, time 25);
    send!(c, time 30, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 10u32, ..SEND_TEMPL });
    recv!(c, time 30, TcpRepr { seq: LOCAL_NXT + 10u32, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[10..20], ..RECV_TEMPL });
}

#[test]
fn without_nagle_small_segments_leave_at_once() {
    let mut c = conn_established();
    c.send(&DATA[..10]).unwrap();
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[..10], ..RECV_TEMPL });
    c.send(&DATA[10..20]).unwrap();
    recv!(c, time 25, TcpRepr { seq: LOCAL_NXT + 10u32, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[10..20], ..RECV_TEMPL });
}

// ----- window scale ------------------------------------------------------------------

fn wscale_profile() -> Profile {
    Profile {
        window_scale: Some(3),
        recv_buffer: 100_000,
        ..profile()
    }
}

#[test]
fn window_scale_applies_to_both_directions_of_the_data_path() {
    let mut c = conn_syn_sent_with(wscale_profile());
    // The SYN-ACK's own window is never scaled.
    send!(c, time 10, TcpRepr { window: 500, options: TcpOptions { window_scale: Some(2), ..PEER_SYN_ACK.options }, ..PEER_SYN_ACK });
    // Our windows are scaled by our shift: 100 000 >> 3.
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, window: 12_500, ..RECV_TEMPL });
    assert!(c.agreed_options().0);
    // 500 << 2 = 2000 bytes of peer window: two segments of the 4 the
    // congestion window allows.
    send!(c, time 15, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, window: 500, ..SEND_TEMPL });
    c.send(&[1u8; 5000]).unwrap();
    recv_with(&mut c, 20, |s| {
        assert_eq!((s.seq, s.payload.len()), (LOCAL_NXT, 1000))
    });
    recv_with(&mut c, 20, |s| {
        assert_eq!(
            (s.seq, s.payload.len(), s.window),
            (LOCAL_NXT + 1000u32, 1000, 12_500)
        )
    });
    recv_nothing!(c, time 20);
}

#[test]
fn window_scale_is_off_unless_both_syns_carry_it() {
    let mut c = conn_syn_sent_with(wscale_profile());
    send!(c, time 10, TcpRepr { window: 500, ..PEER_SYN_ACK });
    // Unscaled and clamped to 16 bits.
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, window: u16::MAX, ..RECV_TEMPL });
    assert!(!c.agreed_options().0);
    send!(c, time 15, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, window: 1500, ..SEND_TEMPL });
    c.send(&[1u8; 5000]).unwrap();
    recv_with(&mut c, 20, |s| assert_eq!(s.payload.len(), 1000));
    // Only 500 more bytes fit in the unscaled 1500-byte window; sender SWS
    // avoidance holds them while the first segment is unacknowledged.
    recv_nothing!(c, time 20);
}

// ----- timelost ------------------------------------------------------------------------

fn timelost_profile() -> Profile {
    Profile {
        timelost: true,
        ..profile()
    }
}

fn timelost(rets: u32) -> TcpOptions {
    TcpOptions {
        timelost: Some(rets),
        ..NO_OPTIONS
    }
}

#[test]
fn timelost_is_offered_and_agreed_only_when_both_syns_carry_it() {
    let mut c = Connection::connect(
        config(timelost_profile()),
        at(0),
        local(),
        remote(),
        LOCAL_SEQ,
        1,
    );
    recv!(c, time 0, TcpRepr { options: TcpOptions { timelost: Some(0), ..OUR_SYN.options }, ..OUR_SYN });
    // The peer does not know the option: it is never sent.
    send!(c, time 10, PEER_SYN_ACK);
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, ..RECV_TEMPL });
    assert!(!c.agreed_options().3);
    c.send(&DATA[..10]).unwrap();
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[..10], ..RECV_TEMPL });
    // A passive end answers a SYN without it without it.
    let mut s = conn_syn_received_with(timelost_profile());
    send!(s, time 10, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, ..SEND_TEMPL });
    assert!(!s.agreed_options().3);
    // And with it when the SYN has it.
    let syn = TcpRepr {
        options: TcpOptions {
            timelost: Some(0),
            ..peer_syn().options
        },
        ..peer_syn()
    };
    let mut s = Connection::accept(
        config(timelost_profile()),
        at(0),
        &ip_from_peer(&syn),
        &syn,
        LOCAL_SEQ,
        1,
    )
    .expect("accepted");
    recv_with(&mut s, 0, |synack| {
        assert_eq!(synack.options.timelost, Some(0))
    });
    assert!(s.agreed_options().3);
}

#[test]
fn receiver_echoes_the_data_segments_rets() {
    let mut c = conn_established_with(timelost_profile(), timelost(0));
    send!(c, time 20, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT, payload: &DATA[..10], options: timelost(7), ..SEND_TEMPL });
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 10u32, window: 9_990, options: timelost(7), ..RECV_TEMPL });
    // Data we send carries 0, as every source does.
    c.send(&DATA[..5]).unwrap();
    recv_with(&mut c, 25, |s| assert_eq!(s.options.timelost, Some(0)));
}

/// A congestion-control factory that records the RTT samples Vegas gets.
#[derive(Debug)]
struct RecordingVegas(Arc<std::sync::Mutex<Vec<crate::rto::RttSample>>>);

#[derive(Debug)]
struct Recorder {
    inner: Box<dyn crate::cc::CongestionControl>,
    samples: Arc<std::sync::Mutex<Vec<crate::rto::RttSample>>>,
}

impl crate::cc::CcFactory for RecordingVegas {
    fn name(&self) -> &'static str {
        "vegas"
    }
    fn build(&self, ctx: &crate::cc::CcContext) -> Box<dyn crate::cc::CongestionControl> {
        Box::new(Recorder {
            inner: crate::cc::VegasConfig::default().build(ctx),
            samples: self.0.clone(),
        })
    }
}

impl crate::cc::CongestionControl for Recorder {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn window(&self) -> usize {
        self.inner.window()
    }
    fn metrics(&self) -> crate::cc::CcMetrics {
        self.inner.metrics()
    }
    fn on_ack(&mut self, now: SimTime, ack: &crate::cc::AckEvent) -> crate::cc::RecoveryAction {
        self.inner.on_ack(now, ack)
    }
    fn on_duplicate_ack(
        &mut self,
        now: SimTime,
        ack: &crate::cc::AckEvent,
    ) -> crate::cc::RecoveryAction {
        self.inner.on_duplicate_ack(now, ack)
    }
    fn on_timeout(&mut self, now: SimTime, ack: &crate::cc::AckEvent) {
        self.inner.on_timeout(now, ack)
    }
    fn on_rtt_sample(&mut self, now: SimTime, sample: &crate::rto::RttSample) {
        self.samples.lock().expect("not poisoned").push(*sample);
        self.inner.on_rtt_sample(now, sample)
    }
}

#[test]
fn sender_removes_the_echoed_rets_from_its_rtt_sample() {
    let samples = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut cfg = Config::from_profile(timelost_profile());
    cfg.cc = Arc::new(RecordingVegas(samples.clone()));
    let mut c = Connection::connect(Arc::new(cfg), at(0), local(), remote(), LOCAL_SEQ, 1);
    recv_with(&mut c, 0, |syn| assert_eq!(syn.options.timelost, Some(0)));
    send!(c, time 10, TcpRepr { options: TcpOptions { timelost: Some(0), ..PEER_SYN_ACK.options }, ..PEER_SYN_ACK });
    recv!(c, time 10, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, options: timelost(0), ..RECV_TEMPL });
    assert!(c.agreed_options().3);
    c.send(&DATA[..10]).unwrap();
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT, flags: PSH_ACK, payload: &DATA[..10], options: timelost(0), ..RECV_TEMPL });
    events(&mut c);
    // 100 ms round trip of which 1000 slots (20 ms) were MAC retries.
    send!(c, time 120, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 10u32, options: timelost(1000), ..SEND_TEMPL });
    let sample = traces(&mut c).into_iter().find_map(|t| match t {
        TraceEvent::RttSample { raw, corrected, .. } => Some((raw, corrected)),
        _ => None,
    });
    assert_eq!(sample, Some((ms(100), ms(80))));
    // RFC 6298 saw 80 ms after the handshake's 10 ms:
    // SRTT = 7/8 * 10 + 1/8 * 80 = 18.75 ms.
    assert_eq!(
        c.rto_estimate().srtt,
        Some(SimDuration::from_micros(18_750))
    );
    // Vegas got the same sample with its correction.
    let seen = samples.lock().expect("not poisoned");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].rtt, ms(100));
    assert_eq!(seen[1].corrected(), ms(80));
}

// ----- spurious retransmissions --------------------------------------------------------

#[test]
fn eifel_detects_a_spurious_timeout_from_the_echoed_timestamp() {
    let mut c = conn_established_with(ts_profile(), ts(500, 0));
    c.send(&DATA[..10]).unwrap();
    let data = TcpRepr {
        seq: LOCAL_NXT,
        ack: REMOTE_NXT,
        flags: PSH_ACK,
        payload: &DATA[..10],
        options: ts(20, 500),
        ..RECV_TEMPL
    };
    recv!(c, time 20, data);
    recv!(c, time 1_020, TcpRepr { options: ts(1_020, 500), ..data });
    events(&mut c);
    // The ACK echoes the first transmission's TSval: the original arrived.
    send!(c, time 1_030, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 10u32, options: ts(600, 20), ..SEND_TEMPL });
    let t = traces(&mut c);
    assert!(t.contains(&TraceEvent::SpuriousRetransmission {
        seq: LOCAL_NXT.0,
        detection: SpuriousDetection::Timestamps,
    }));
    assert_eq!(c.stats().spurious_retransmissions, 1);
}

#[test]
fn eifel_stays_quiet_when_the_retransmission_was_needed() {
    let mut c = conn_established_with(ts_profile(), ts(500, 0));
    c.send(&DATA[..10]).unwrap();
    recv_with(&mut c, 20, |_| {});
    recv_with(&mut c, 1_020, |_| {});
    send!(c, time 1_030, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 10u32, options: ts(600, 1_020), ..SEND_TEMPL });
    assert!(!traces(&mut c)
        .iter()
        .any(|t| matches!(t, TraceEvent::SpuriousRetransmission { .. })));
    assert_eq!(c.stats().spurious_retransmissions, 0);
}

fn sack_profile() -> Profile {
    Profile {
        sack: true,
        cc: crate::profile::CcChoice::Newreno(crate::cc::RenoConfig {
            initial_window: crate::cc::InitialWindow::Segments(10),
            ..crate::cc::RenoConfig::default()
        }),
        ..profile()
    }
}

const SACK_OK: TcpOptions = TcpOptions {
    mss: Some(MSS as u16),
    sack_permitted: true,
    ..NO_OPTIONS
};

fn sack(blocks: &[(SeqNumber, SeqNumber)]) -> TcpOptions {
    let mut o = NO_OPTIONS;
    for (slot, &(left, right)) in o.sack_blocks.iter_mut().zip(blocks) {
        *slot = Some(SackBlock { left, right });
    }
    o
}

#[test]
fn dsack_reports_a_spurious_retransmission() {
    let mut c = conn_established_with(sack_profile(), SACK_OK);
    c.send(&DATA[..10]).unwrap();
    recv_with(&mut c, 20, |_| {});
    recv_with(&mut c, 1_020, |s| assert_eq!(s.seq, LOCAL_NXT));
    events(&mut c);
    // RFC 2883: the first block lies below the cumulative ACK.
    let dsack = sack(&[(LOCAL_NXT, LOCAL_NXT + 10u32)]);
    send!(c, time 1_030, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + 10u32, options: dsack, ..SEND_TEMPL });
    assert!(
        traces(&mut c).contains(&TraceEvent::SpuriousRetransmission {
            seq: LOCAL_NXT.0,
            detection: SpuriousDetection::Dsack,
        })
    );
}

#[test]
fn receiver_reports_a_duplicate_segment_as_dsack() {
    let mut c = conn_established_with(sack_profile(), SACK_OK);
    let seg = TcpRepr {
        seq: REMOTE_NXT,
        ack: LOCAL_NXT,
        payload: &DATA[..10],
        ..SEND_TEMPL
    };
    send!(c, time 20, seg);
    recv!(c, time 20, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 10u32, window: 9_990, ..RECV_TEMPL });
    send!(c, time 30, seg);
    recv!(c, time 30, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + 10u32, window: 9_990, options: sack(&[(REMOTE_NXT, REMOTE_NXT + 10u32)]), ..RECV_TEMPL });
}

// ----- SACK ----------------------------------------------------------------------------

#[test]
fn receiver_lists_sack_blocks_most_recent_first() {
    let mut c = conn_established_with(sack_profile(), SACK_OK);
    let r = |off: u32| REMOTE_NXT + off;
    let seg = |off: u32, data: &'static [u8]| TcpRepr {
        seq: r(off),
        ack: LOCAL_NXT,
        payload: data,
        ..SEND_TEMPL
    };
    let ack = |blocks: &[(SeqNumber, SeqNumber)], window: usize| TcpRepr {
        seq: LOCAL_NXT,
        ack: REMOTE_NXT,
        window: window as u16,
        options: sack(blocks),
        ..RECV_TEMPL
    };
    // Bytes 0..10 are missing throughout. RFC 2018 §4: the first block
    // holds the segment that triggered the ACK, the rest follow in the
    // order they were last reported.
    send!(c, time 20, seg(30, &DATA[30..40]));
    recv!(c, time 20, ack(&[(r(30), r(40))], RECV_BUFFER));
    send!(c, time 21, seg(10, &DATA[10..20]));
    recv!(c, time 21, ack(&[(r(10), r(20)), (r(30), r(40))], RECV_BUFFER));
    send!(c, time 22, seg(50, &DATA[50..60]));
    recv!(c, time 22, ack(&[(r(50), r(60)), (r(10), r(20)), (r(30), r(40))], RECV_BUFFER));
    // Filling 20..30 joins two blocks into one, reported first.
    send!(c, time 23, seg(20, &DATA[20..30]));
    recv!(c, time 23, ack(&[(r(10), r(40)), (r(50), r(60))], RECV_BUFFER));
    // The hole at 0..10 fills: everything up to 40 is delivered.
    send!(c, time 24, seg(0, &DATA[..10]));
    recv!(c, time 24, TcpRepr { ack: r(40), ..ack(&[(r(50), r(60))], RECV_BUFFER - 40) });
}

#[test]
fn rfc6675_recovery_retransmits_exactly_the_holes() {
    let mut c = conn_established_with(sack_profile(), SACK_OK);
    c.send(&[5u8; 10_000]).unwrap();
    let seg = |k: u32| LOCAL_NXT + k * 1000;
    for k in 0..10 {
        recv_with(&mut c, 20, |s| {
            assert_eq!((s.seq, s.payload.len()), (seg(k), 1000))
        });
    }
    recv_nothing!(c, time 20);
    events(&mut c);
    // Segments 1 and 4 are lost. The peer ACKs 0, then reports 2, 3, 5..9.
    let ack = |blocks: &[(SeqNumber, SeqNumber)]| TcpRepr {
        seq: REMOTE_NXT,
        ack: seg(1),
        options: sack(blocks),
        ..SEND_TEMPL
    };
    send!(c, time 30, TcpRepr { seq: REMOTE_NXT, ack: seg(1), ..SEND_TEMPL });
    let mut sent = vec![];
    let mut drain = |c: &mut Connection, t: u64| {
        let mut buf = Vec::new();
        while let Some(len) = c.poll_transmit(at(t), &mut buf) {
            let p = packet::parse(&buf[..len]).expect("valid");
            if let Transport::Tcp(s) = p.transport {
                sent.push(s.seq);
            }
        }
    };
    drain(&mut c, 30);
    let reports: [&[(SeqNumber, SeqNumber)]; 7] = [
        &[(seg(2), seg(3))],
        &[(seg(2), seg(4))],
        &[(seg(5), seg(6)), (seg(2), seg(4))],
        &[(seg(5), seg(7)), (seg(2), seg(4))],
        &[(seg(5), seg(8)), (seg(2), seg(4))],
        &[(seg(5), seg(9)), (seg(2), seg(4))],
        &[(seg(5), seg(10)), (seg(2), seg(4))],
    ];
    for (i, blocks) in reports.iter().enumerate() {
        send!(c, time 31 + i as u64, ack(blocks));
        drain(&mut c, 31 + i as u64);
    }
    assert_eq!(sent, [seg(1), seg(4)], "retransmitted exactly the holes");
    let t = traces(&mut c);
    assert_eq!(
        retransmissions(&t),
        [
            (seg(1).0, RetransmitCause::FastRetransmit),
            (seg(4).0, RetransmitCause::FastRetransmit)
        ]
    );
    // The holes are acknowledged: recovery ends with everything acked.
    send!(c, time 50, TcpRepr { seq: REMOTE_NXT, ack: seg(4), options: sack(&[(seg(5), seg(10))]), ..SEND_TEMPL });
    send!(c, time 51, TcpRepr { seq: REMOTE_NXT, ack: seg(10), ..SEND_TEMPL });
    assert!(!c.cc_metrics().in_recovery);
    assert_eq!(c.poll_timeout(), None);
}

// ----- limited transmit ------------------------------------------------------------------

fn four_segments_in_flight(limited_transmit: bool) -> Connection {
    let p = Profile {
        limited_transmit,
        ..profile()
    };
    let mut c = conn_established_with(p, PEER_SYN_ACK.options);
    c.send(&[3u8; 8000]).unwrap();
    // RFC 5681 initial window for a 1000-byte MSS: 4 segments.
    for k in 0..4u32 {
        recv_with(&mut c, 20, |s| assert_eq!(s.seq, LOCAL_NXT + k * 1000));
    }
    recv_nothing!(c, time 20);
    c
}

#[test]
fn limited_transmit_sends_new_data_on_the_first_two_duplicates() {
    let mut c = four_segments_in_flight(true);
    let dup = TcpRepr {
        seq: REMOTE_NXT,
        ack: LOCAL_NXT,
        ..SEND_TEMPL
    };
    send!(c, time 30, dup);
    recv_with(&mut c, 30, |s| assert_eq!(s.seq, LOCAL_NXT + 4000u32));
    recv_nothing!(c, time 30);
    send!(c, time 31, dup);
    recv_with(&mut c, 31, |s| assert_eq!(s.seq, LOCAL_NXT + 5000u32));
    recv_nothing!(c, time 31);
    // The third starts fast retransmit as usual.
    send!(c, time 32, dup);
    recv_with(&mut c, 32, |s| assert_eq!(s.seq, LOCAL_NXT));
    let t = traces(&mut c);
    assert_eq!(
        retransmissions(&t),
        [(LOCAL_NXT.0, RetransmitCause::FastRetransmit)]
    );
}

#[test]
fn without_limited_transmit_duplicates_send_nothing_new() {
    let mut c = four_segments_in_flight(false);
    let dup = TcpRepr {
        seq: REMOTE_NXT,
        ack: LOCAL_NXT,
        ..SEND_TEMPL
    };
    send!(c, time 30, dup);
    recv_nothing!(c, time 30);
    send!(c, time 31, dup);
    recv_nothing!(c, time 31);
}

#[test]
fn a_fast_retransmit_restarts_the_timer_only_when_the_profile_says_so() {
    let mut deadlines = Vec::new();
    for restarts in [false, true] {
        let p = Profile {
            fast_retransmit_restarts_timer: restarts,
            ..profile()
        };
        let mut c = conn_established_with(p, PEER_SYN_ACK.options);
        c.send(&[3u8; 8000]).unwrap();
        for k in 0..4u32 {
            recv_with(&mut c, 20, |s| assert_eq!(s.seq, LOCAL_NXT + k * 1000));
        }
        let armed = c.poll_timeout().expect("the timer runs");
        let dup = TcpRepr {
            seq: REMOTE_NXT,
            ack: LOCAL_NXT,
            ..SEND_TEMPL
        };
        for t in 30..33 {
            send!(c, time t, dup);
        }
        recv_with(&mut c, 32, |s| assert_eq!(s.seq, LOCAL_NXT));
        deadlines.push((armed, c.poll_timeout().expect("the timer runs")));
    }
    // RFC 6298 alone: the deadline armed with the first segment stands.
    assert_eq!(deadlines[0].1, deadlines[0].0);
    // Restarted when the fast retransmit went out, 12 ms later.
    assert_eq!(
        deadlines[1].1,
        deadlines[1].0 + SimDuration::from_millis(12)
    );
}

/// Sends 10 full segments with SACK agreed; returns the connection and
/// the start of segment `k`.
fn ten_segments_with_sack() -> Connection {
    let mut c = conn_established_with(sack_profile(), SACK_OK);
    c.send(&[5u8; 10_000]).unwrap();
    for k in 0..10u32 {
        recv_with(&mut c, 20, |s| assert_eq!(s.seq, LOCAL_NXT + k * 1000));
    }
    recv_nothing!(c, time 20);
    events(&mut c);
    c
}

/// Every segment the connection sends at `time`, by sequence number.
fn drain_seqs(c: &mut Connection, time: u64) -> Vec<SeqNumber> {
    let mut out = vec![];
    let mut buf = Vec::new();
    c.handle_timeout(at(time));
    while let Some(len) = c.poll_transmit(at(time), &mut buf) {
        if let Transport::Tcp(s) = packet::parse(&buf[..len]).expect("valid").transport {
            out.push(s.seq);
        }
    }
    out
}

#[test]
fn rfc6675_rescue_retransmits_a_lost_tail_without_a_timeout() {
    let mut c = ten_segments_with_sack();
    let seg = |k: u32| LOCAL_NXT + k * 1000;
    // Segments 1, 8 and 9 are lost; 2..=7 arrive and are SACKed.
    send!(c, time 30, TcpRepr { seq: REMOTE_NXT, ack: seg(1), ..SEND_TEMPL });
    let mut sent = drain_seqs(&mut c, 30);
    for k in 3..=8u32 {
        let t = 30 + u64::from(k);
        send!(c, time t, TcpRepr { seq: REMOTE_NXT, ack: seg(1), options: sack(&[(seg(2), seg(k))]), ..SEND_TEMPL });
        sent.extend(drain_seqs(&mut c, t));
    }
    assert_eq!(sent, [seg(1)], "only the hole while the window is full");
    // The hole is repaired: a partial ACK up to the lost tail. Nothing is
    // SACKed above 8 or 9, so rule 4 resends the highest unSACKed segment.
    send!(c, time 50, TcpRepr { seq: REMOTE_NXT, ack: seg(8), ..SEND_TEMPL });
    assert_eq!(drain_seqs(&mut c, 50), [seg(9)]);
    // Its SACK makes 8 the remaining hole below the highest SACKed byte
    // (rule 3); the rescue is not repeated.
    send!(c, time 60, TcpRepr { seq: REMOTE_NXT, ack: seg(8), options: sack(&[(seg(9), seg(10))]), ..SEND_TEMPL });
    assert_eq!(drain_seqs(&mut c, 60), [seg(8)]);
    send!(c, time 70, TcpRepr { seq: REMOTE_NXT, ack: seg(10), ..SEND_TEMPL });
    assert!(drain_seqs(&mut c, 70).is_empty());
    let t = traces(&mut c);
    assert!(retransmissions(&t)
        .iter()
        .all(|&(_, cause)| cause == RetransmitCause::FastRetransmit));
    assert_eq!(c.stats().timeouts, 0);
    assert_eq!(c.poll_timeout(), None);
}

// ----- Eifel response ------------------------------------------------------------------------

/// Payload of a full segment with the 12 bytes of the timestamp option.
const SEG: u32 = MSS as u32 - 12;

/// Four segments out at 20 ms, a spurious timeout at 1020 ms (only the
/// first is resent), and at 1030 ms the ACK of the original first segment,
/// echoing its timestamp. Returns what is sent next.
fn spurious_timeout(eifel_response: bool) -> (Connection, Vec<(SeqNumber, usize)>) {
    let p = Profile {
        eifel_response,
        ..ts_profile()
    };
    let options = TcpOptions {
        mss: Some(MSS as u16),
        ..ts(500, 0)
    };
    let mut c = conn_established_with(p, options);
    c.send(&[9u8; 8000]).unwrap();
    for k in 0..4u32 {
        recv_with(&mut c, 20, |s| assert_eq!(s.seq, LOCAL_NXT + k * SEG));
    }
    recv_nothing!(c, time 20);
    recv_with(&mut c, 1_020, |s| assert_eq!(s.seq, LOCAL_NXT));
    recv_nothing!(c, time 1_020);
    send!(c, time 1_030, TcpRepr { seq: REMOTE_NXT, ack: LOCAL_NXT + SEG, options: ts(600, 20), ..SEND_TEMPL });
    let mut sent = vec![];
    let mut buf = Vec::new();
    while let Some(len) = c.poll_transmit(at(1_030), &mut buf) {
        if let Transport::Tcp(s) = packet::parse(&buf[..len]).expect("valid").transport {
            sent.push((s.seq, s.payload.len()));
        }
    }
    (c, sent)
}

#[test]
fn eifel_response_resumes_with_new_data_and_restores_the_window() {
    let (mut c, sent) = spurious_timeout(true);
    // RFC 4015: 3 segments still in flight + min(1 segment acked, IW), so
    // one new segment and no resend of segments 1..3.
    assert_eq!(sent, [(LOCAL_NXT + 4 * SEG, SEG as usize)]);
    assert_eq!(c.cwnd(), 4 * SEG as usize);
    assert_eq!(c.cc_metrics().ssthresh, usize::MAX, "restored to pipe_prev");
    let t = traces(&mut c);
    assert!(t.contains(&TraceEvent::SpuriousRetransmission {
        seq: LOCAL_NXT.0,
        detection: SpuriousDetection::Timestamps,
    }));
}

#[test]
fn without_eifel_response_the_timeout_goes_back_and_slow_starts() {
    let (c, sent) = spurious_timeout(false);
    // cwnd 1 segment after the timeout, +1 for the ACK: segments 1 and 2
    // are sent again.
    assert_eq!(
        sent,
        [
            (LOCAL_NXT + SEG, SEG as usize),
            (LOCAL_NXT + 2 * SEG, SEG as usize)
        ]
    );
    // Slow start from one segment, by the bytes acknowledged.
    assert_eq!(c.cwnd(), MSS + SEG as usize);
}

#[test]
fn syn_received_resets_on_an_ack_that_is_not_for_its_syn_even_out_of_window() {
    // A half-open connection from an old duplicate SYN meets the ACK of the
    // peer's previous incarnation (e.g. from TIME-WAIT): RST, not an ACK
    // the peer would answer with another ACK.
    let mut c = conn_syn_received_with(profile());
    let stale = TcpRepr {
        seq: REMOTE_NXT + 50_000u32,
        ack: SeqNumber(123_456),
        ..SEND_TEMPL
    };
    send!(c, time 5, stale);
    recv!(c, time 5, TcpRepr { seq: SeqNumber(123_456), flags: RST, window: 0, ..RECV_TEMPL });
    recv_nothing!(c, time 5);
    assert_eq!(c.state(), State::SynReceived);
}

proptest::proptest! {
    /// Writing into the receive ring at any index, wrapped or not, leaves
    /// it equal to the same writes into a plain vector.
    #[test]
    fn ring_writes_land_where_a_vector_would_put_them(
        rotate in 0usize..64,
        writes in proptest::collection::vec(
            (0usize..200, proptest::collection::vec(proptest::num::u8::ANY, 0..80)),
            1..20,
        ),
    ) {
        let mut ring = std::collections::VecDeque::with_capacity(64);
        // Move the ring's head so that writes straddle its wrap point.
        for _ in 0..rotate {
            ring.push_back(0u8);
            ring.pop_front();
        }
        let mut model: Vec<u8> = Vec::new();
        for (at, data) in writes {
            super::write_at(&mut ring, at, &data);
            if model.len() < at + data.len() {
                model.resize(at + data.len(), 0);
            }
            model[at..at + data.len()].copy_from_slice(&data);
            let got: Vec<u8> = ring.iter().copied().collect();
            proptest::prop_assert_eq!(&got, &model);
        }
    }
}

/// An established receiver with `threshold` that takes four full segments
/// at 20-23 ms without reading them, then reads 1000 bytes at 100, 200,
/// 300 and 400 ms; the times at which it sends an ACK and their windows.
fn window_updates_of_a_slow_reader(threshold: Option<usize>) -> Vec<(u64, u16)> {
    const SEGMENT: &[u8] = &[b'x'; MSS];
    let mut c = conn_established_with(
        Profile {
            window_update_threshold: threshold,
            ..profile()
        },
        PEER_SYN_ACK.options,
    );
    for i in 0..4u32 {
        let time = 20 + u64::from(i);
        send!(c, time time, TcpRepr { seq: REMOTE_NXT + i * MSS as u32, ack: LOCAL_NXT, payload: SEGMENT, ..SEND_TEMPL });
        let window = (RECV_BUFFER - (i as usize + 1) * MSS) as u16;
        recv!(c, time time, TcpRepr { seq: LOCAL_NXT, ack: REMOTE_NXT + (i + 1) * MSS as u32, window, ..RECV_TEMPL });
    }
    let mut updates = Vec::new();
    let mut buf = [0u8; MSS];
    for time in [100, 200, 300, 400] {
        assert_eq!(c.recv(&mut buf), MSS);
        c.handle_timeout(at(time));
        let mut out = Vec::new();
        if let Some(len) = c.poll_transmit(at(time), &mut out) {
            let parsed = packet::parse(&out[..len]).expect("a valid datagram");
            let Transport::Tcp(tcp) = parsed.transport else {
                panic!("not TCP");
            };
            assert_eq!((tcp.flags, tcp.ack), (ACK, REMOTE_NXT + 4 * MSS as u32));
            updates.push((time, tcp.window));
        }
        recv_nothing!(c, time time);
    }
    updates
}

#[test]
fn window_update_follows_rfc_9293_without_a_threshold() {
    // min(buffer / 2, MSS) = 1000 bytes: every read of one segment.
    assert_eq!(
        window_updates_of_a_slow_reader(None),
        [(100, 7000), (200, 8000), (300, 9000), (400, 10_000)]
    );
}

#[test]
fn window_update_waits_for_the_right_edge_to_move_by_the_threshold() {
    // lwIP's rule with TCP_WND 10000 and MSS 1000: min(10000 / 4, 4000) =
    // 2500 bytes. The reads at 100 and 200 ms move the right edge by 1000
    // and 2000 bytes: no update; the third, 3000 bytes, announces 9000.
    // The fourth moves it 1000 past that announcement: no update.
    assert_eq!(window_updates_of_a_slow_reader(Some(2500)), [(300, 9000)]);
}
