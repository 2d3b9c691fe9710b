//! One TCP connection as a sans-IO state machine (RFC 9293).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::ipv6::{self, Ipv6Repr};
use rtolab_wire::packet::emit_tcp;
use rtolab_wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use serde::Serialize;

use crate::ack::{AckDecision, AckPolicy, AckReason, SegmentArrival};
use crate::cc::{
    AckEvent, CcContext, CongestionControl, RecoveryAction, SentSegment, SpuriousTimeout,
};
use crate::clock::{Granularity, TimerEpoch};
use crate::ip::{default_mss, plain, IpHeader};
use crate::profile::Config;
use crate::rto::{
    AckProgress, ConnectionContext, Expiry, PathHint, RtoPolicy, RttSample, SampleSource,
    Transmission,
};
use crate::send_buffer::SendBuffer;
use crate::state::State;
use crate::trace::{RetransmitCause, SpuriousDetection, TimerKind, Trace, TraceEvent, TraceLevel};

/// Unit of the timelost option's `rets` field (802.11 slot time).
pub const TIMELOST_UNIT: SimDuration = SimDuration::from_micros(20);
/// Largest window-scale shift (RFC 7323 §2.3).
const MAX_WINDOW_SCALE: u8 = 14;

/// What a connection tells its application (and its trace consumer).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// New in-order data can be read with [`Connection::recv`].
    Readable,
    /// Send-buffer space was freed.
    Writable,
    /// The peer sent FIN: no more data will arrive.
    PeerClosed,
    /// The connection is fully closed (after TIME-WAIT or LAST-ACK).
    Closed,
    /// The peer reset the connection.
    Reset,
    /// Retransmissions or keep-alives went unanswered; the connection is
    /// dropped.
    TimedOut,
    /// A trace record.
    Trace(Trace),
}

/// Errors of the application-side calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    /// `send` after `close`, or in a state that cannot send.
    #[error("connection cannot send in state {0}")]
    CannotSend(State),
    /// The connection was reset or timed out.
    #[error("connection is closed")]
    Closed,
}

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Segments sent (all kinds).
    pub segments_sent: u64,
    /// Segments received.
    pub segments_received: u64,
    /// Retransmitted segments (all causes except probes and keep-alives).
    pub retransmissions: u64,
    /// Expiries of the retransmission timer.
    pub timeouts: u64,
    /// Fast retransmits (duplicate ACKs or SACK).
    pub fast_retransmits: u64,
    /// Duplicate ACKs received.
    pub dup_acks_received: u64,
    /// Duplicate ACKs sent.
    pub dup_acks_sent: u64,
    /// Spurious retransmissions detected.
    pub spurious_retransmissions: u64,
    /// Payload bytes acknowledged by the peer.
    pub bytes_acked: u64,
    /// Payload bytes delivered in order to the application buffer.
    pub bytes_received: u64,
}

/// A segment of our sequence space that was sent at least once.
#[derive(Clone, Copy, Debug)]
struct Sent {
    seq: SeqNumber,
    len: u32,
    syn: bool,
    fin: bool,
    first_sent: SimTime,
    last_sent: SimTime,
    retransmits: u32,
    sacked: bool,
    /// Retransmitted in the current SACK recovery episode.
    recovery_rexmit: bool,
    /// Stream offset of `seq`.
    offset: u64,
}

impl Sent {
    fn end(&self) -> SeqNumber {
        self.seq + self.len
    }
    fn data_len(&self) -> usize {
        self.len as usize - usize::from(self.syn) - usize::from(self.fin)
    }
}

const TIMER_COUNT: usize = 5;

/// Deadlines of the connection's timers; the next wake-up is their minimum.
#[derive(Clone, Copy, Debug, Default)]
struct TimerTable([Option<SimTime>; TIMER_COUNT]);

impl TimerTable {
    const KINDS: [TimerKind; TIMER_COUNT] = [
        TimerKind::Retransmit,
        TimerKind::DelayedAck,
        TimerKind::Persist,
        TimerKind::KeepAlive,
        TimerKind::TimeWait,
    ];
    fn index(kind: TimerKind) -> usize {
        match kind {
            TimerKind::Retransmit => 0,
            TimerKind::DelayedAck => 1,
            TimerKind::Persist => 2,
            TimerKind::KeepAlive => 3,
            TimerKind::TimeWait => 4,
        }
    }
    fn get(&self, kind: TimerKind) -> Option<SimTime> {
        self.0[Self::index(kind)]
    }
    fn set(&mut self, kind: TimerKind, at: SimTime) {
        self.0[Self::index(kind)] = Some(at);
    }
    fn stop(&mut self, kind: TimerKind) {
        self.0[Self::index(kind)] = None;
    }
    fn stop_all(&mut self) {
        self.0 = [None; TIMER_COUNT];
    }
    fn next(&self) -> Option<SimTime> {
        self.0.iter().flatten().min().copied()
    }
}

/// What the first retransmission after a timeout left for the Eifel
/// detection (RFC 3522) and response (RFC 4015).
#[derive(Clone, Copy, Debug)]
struct EifelProbe {
    /// TSval of the retransmission.
    tsval: u32,
    /// Its first sequence number.
    seq: SeqNumber,
    /// RFC 4015 `pipe_prev`: max(FlightSize, ssthresh) before the timeout.
    pipe_prev: usize,
}

/// A reply that is not part of the sequence space (RST).
#[derive(Clone, Copy, Debug)]
struct Reset {
    seq: SeqNumber,
    ack: Option<SeqNumber>,
}

/// One TCP connection.
///
/// The connection never reads a clock or performs I/O. Its methods come in
/// four kinds:
///
/// * getters ([`Connection::state`], [`Connection::stats`], ...);
/// * `handle_*`: hand it a received segment ([`Connection::handle_segment`])
///   or tell it that time passed ([`Connection::handle_timeout`]; extra
///   calls are harmless no-ops);
/// * application calls: [`Connection::send`], [`Connection::recv`],
///   [`Connection::close`], [`Connection::abort`];
/// * `poll_*`: collect output.
///
/// After any `handle_*` or application call, the driver should call
/// [`Connection::poll_transmit`] until it returns `None`, then drain
/// [`Connection::poll_event`], then ask [`Connection::poll_timeout`] for the
/// next deadline and call [`Connection::handle_timeout`] when it is reached.
#[derive(Debug)]
pub struct Connection {
    config: Arc<Config>,
    local: SocketAddr,
    remote: SocketAddr,
    state: State,
    active_open: bool,

    // Send side.
    iss: SeqNumber,
    snd_una: SeqNumber,
    snd_nxt: SeqNumber,
    snd_max: SeqNumber,
    snd_una_offset: u64,
    snd_wnd: usize,
    max_snd_wnd: usize,
    snd_wl1: SeqNumber,
    snd_wl2: SeqNumber,
    /// Unacknowledged and unsent application bytes; the first has
    /// sequence number `buf_seq`.
    send_buf: SendBuffer,
    buf_seq: SeqNumber,
    fin_queued: bool,
    sent: VecDeque<Sent>,
    /// Bytes of the `sent` entries not SACKed: the flight size whenever
    /// all of them lie below SND.NXT, kept so that need not be summed.
    unsacked_bytes: usize,
    send_mss: usize,
    peer_wscale: u8,
    dup_acks: u32,
    consecutive_timeouts: u32,
    fast_rexmit: bool,
    /// Bytes limited transmit (RFC 3042) lets out beyond the congestion
    /// window after the first or second duplicate ACK.
    limited_transmit: usize,
    /// RFC 6675 loss recovery in progress until the cumulative ACK reaches
    /// this RecoveryPoint.
    sack_recovery: Option<SeqNumber>,
    /// The RFC 6675 rescue retransmission of this recovery was sent.
    rescue_sent: bool,
    persist_backoff: u32,
    probe_pending: Option<RetransmitCause>,
    keepalive_probes: u32,
    /// TSval of the first retransmission after a timeout (Eifel).
    eifel: Option<EifelProbe>,
    recent_retransmits: VecDeque<(SeqNumber, SeqNumber)>,

    // Receive side.
    irs: SeqNumber,
    rcv_nxt: SeqNumber,
    rcv_offset: u64,
    /// Received bytes: the first `readable` are in order and ready for the
    /// application; after them, out-of-order data sits at its place in the
    /// stream, with zeros in the holes, so that filling a hole makes the
    /// data behind it readable without moving it.
    recv_buf: VecDeque<u8>,
    readable: usize,
    /// The out-of-order data held in `recv_buf`, as disjoint, non-adjacent
    /// ranges of stream offsets in order, each with the arrival count of
    /// the newest segment in it (SACK blocks are listed by recency).
    ooo: Vec<OooRange>,
    ooo_arrivals: u64,
    ooo_fin: Option<u64>,
    fin_received: bool,
    our_wscale: u8,
    rcv_mss: usize,
    last_adv_window: usize,
    /// Right edge of the window last announced (`rcv_nxt` + window).
    last_adv_right_edge: SeqNumber,
    ack_now: bool,
    /// Freeze-TCP: the link layer warned of an outage, so the window
    /// advertised is zero until it is back.
    frozen: bool,
    /// Freeze-TCP: ACKs still to send that reopen the window after an
    /// outage.
    reopen_acks: u8,
    /// Payload bytes of the last data segment accepted (for the ACK
    /// policy's piggy-back decision).
    last_segment_len: usize,
    ack_delayed_fired: bool,
    dsack: Option<SackBlock>,
    last_ack_sent: Option<(SeqNumber, SeqNumber, u16)>,
    dup_acks_sent: u32,

    // Options agreed in the handshake.
    ts_enabled: bool,
    ts_recent: u32,
    sack_enabled: bool,
    timelost_enabled: bool,
    timelost_echo: u32,

    rto: Box<dyn RtoPolicy>,
    /// The link layer's description of the path, as the policy got it.
    path: Option<PathHint>,
    cc: Box<dyn CongestionControl>,
    ack_policy: Box<dyn AckPolicy>,
    /// The profile's `rto_timer`, placed on the host timer's epoch when
    /// its grids start with the host's first connection.
    rto_timer: Granularity,
    /// When the connection reached CLOSED, for the host's timer.
    closed_at: Option<SimTime>,
    timers: TimerTable,
    rst_pending: Option<Reset>,
    events: VecDeque<Event>,
    stats: ConnectionStats,
    ip_ident: u16,
    scratch: Vec<u8>,
    traced_cwnd: (usize, usize),
    trace_level: TraceLevel,
}

fn seq_in(seq: SeqNumber, low: SeqNumber, high_exclusive: SeqNumber) -> bool {
    seq >= low && seq < high_exclusive
}

fn dist(later: SeqNumber, earlier: SeqNumber) -> usize {
    (later - earlier).max(0) as usize
}

/// Out-of-order data held in the receive buffer: stream offsets
/// `start..end`, and the arrival count of the newest segment in it.
#[derive(Clone, Copy, Debug)]
struct OooRange {
    start: u64,
    end: u64,
    arrival: u64,
}

/// Writes `data` into `ring` from index `at`, growing it (with zeros up to
/// `at`) where it is shorter.
fn write_at(ring: &mut VecDeque<u8>, at: usize, data: &[u8]) {
    if ring.len() < at {
        ring.resize(at, 0);
    }
    let inside = (ring.len() - at).min(data.len());
    if inside > 0 {
        let (front, back) = ring.as_mut_slices();
        let in_front = front.len().saturating_sub(at).min(inside);
        if in_front > 0 {
            front[at..at + in_front].copy_from_slice(&data[..in_front]);
        }
        let back_at = (at + in_front) - front.len().min(at + in_front);
        back[back_at..back_at + inside - in_front].copy_from_slice(&data[in_front..inside]);
    }
    ring.extend(&data[inside..]);
}

impl Connection {
    #[allow(clippy::too_many_arguments)]
    fn new(
        config: Arc<Config>,
        now: SimTime,
        local: SocketAddr,
        remote: SocketAddr,
        iss: SeqNumber,
        active_open: bool,
        seed: u64,
        path: Option<PathHint>,
        epoch: Option<TimerEpoch>,
    ) -> Connection {
        let p = &config.profile;
        let mss = usize::from(p.mss);
        let assumed_mss = default_mss(remote.ip());
        let rto_timer = epoch.map_or(p.rto_timer, |e| e.place(p.rto_timer));
        let rto = config.rto.build(&ConnectionContext {
            now,
            mss,
            active_open,
            granularity: rto_timer,
            seed,
            path,
        });
        let cc = config.cc.build(&CcContext { now, mss });
        let mut ack_policy = config.ack.build();
        if let Some(e) = &epoch {
            ack_policy.place_ticks(e);
        }
        let our_wscale = p.window_scale.unwrap_or(0).min(MAX_WINDOW_SCALE);
        let traced_cwnd = (cc.metrics().cwnd, cc.metrics().ssthresh);
        Connection {
            local,
            remote,
            state: State::Closed,
            active_open,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_una_offset: 0,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: iss,
            send_buf: SendBuffer::default(),
            buf_seq: iss + 1u32,
            fin_queued: false,
            sent: VecDeque::new(),
            unsacked_bytes: 0,
            send_mss: assumed_mss.min(mss),
            peer_wscale: 0,
            dup_acks: 0,
            consecutive_timeouts: 0,
            fast_rexmit: false,
            limited_transmit: 0,
            sack_recovery: None,
            rescue_sent: false,
            persist_backoff: 0,
            probe_pending: None,
            keepalive_probes: 0,
            eifel: None,
            recent_retransmits: VecDeque::new(),
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_offset: 0,
            recv_buf: VecDeque::new(),
            readable: 0,
            ooo: Vec::new(),
            ooo_arrivals: 0,
            ooo_fin: None,
            fin_received: false,
            our_wscale,
            rcv_mss: assumed_mss.min(mss),
            last_adv_window: 0,
            last_adv_right_edge: SeqNumber(0),
            ack_now: false,
            frozen: false,
            reopen_acks: 0,
            last_segment_len: 0,
            ack_delayed_fired: false,
            dsack: None,
            last_ack_sent: None,
            dup_acks_sent: 0,
            ts_enabled: false,
            ts_recent: 0,
            sack_enabled: false,
            timelost_enabled: false,
            timelost_echo: 0,
            rto,
            path,
            cc,
            ack_policy,
            rto_timer,
            closed_at: None,
            timers: TimerTable::default(),
            rst_pending: None,
            events: VecDeque::new(),
            stats: ConnectionStats::default(),
            ip_ident: (seed as u16) ^ 0x5a5a,
            scratch: Vec::new(),
            traced_cwnd,
            trace_level: TraceLevel::All,
            config,
        }
    }

    /// Opens a connection actively: the SYN goes out on the next
    /// [`Connection::poll_transmit`]. `iss` is the initial sequence number
    /// and `seed` seeds any randomised policy.
    ///
    /// `local` and `remote` are IPv4 or IPv6 socket addresses of the same
    /// family (a [`crate::Stack`] checks this); a connection between
    /// families has no datagram to go in and sends nothing.
    pub fn connect(
        config: Arc<Config>,
        now: SimTime,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        iss: SeqNumber,
        seed: u64,
    ) -> Connection {
        Connection::connect_on_path(config, now, local, remote, iss, seed, None)
    }

    /// [`Connection::connect`] over a path whose timing the host's link
    /// layer described: `path` reaches the RTO policy
    /// ([`ConnectionContext::path`]).
    pub fn connect_on_path(
        config: Arc<Config>,
        now: SimTime,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        iss: SeqNumber,
        seed: u64,
        path: Option<PathHint>,
    ) -> Connection {
        Connection::open_active(config, now, local, remote, iss, seed, path, None)
    }

    /// [`Connection::connect_on_path`] whose tick timers run from the host
    /// timer's `epoch` (`None`: as the profile places them).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open_active(
        config: Arc<Config>,
        now: SimTime,
        local: impl Into<SocketAddr>,
        remote: impl Into<SocketAddr>,
        iss: SeqNumber,
        seed: u64,
        path: Option<PathHint>,
        epoch: Option<TimerEpoch>,
    ) -> Connection {
        let (local, remote) = (plain(local.into()), plain(remote.into()));
        let mut c = Connection::new(config, now, local, remote, iss, true, seed, path, epoch);
        c.set_state(now, State::SynSent);
        c
    }

    /// Creates the passive side of a connection from a SYN that reached a
    /// listener; the SYN-ACK goes out on the next poll. Returns `None` if
    /// the segment is not a plain SYN. `ip` is the IPv4 or IPv6 header the
    /// SYN came in.
    pub fn accept<H: IpHeader>(
        config: Arc<Config>,
        now: SimTime,
        ip: &H,
        tcp: &TcpRepr,
        iss: SeqNumber,
        seed: u64,
    ) -> Option<Connection> {
        Connection::open_passive(config, now, ip, tcp, iss, seed, None)
    }

    /// [`Connection::accept`] whose tick timers run from the host timer's
    /// `epoch` (`None`: as the profile places them).
    pub(crate) fn open_passive<H: IpHeader>(
        config: Arc<Config>,
        now: SimTime,
        ip: &H,
        tcp: &TcpRepr,
        iss: SeqNumber,
        seed: u64,
        epoch: Option<TimerEpoch>,
    ) -> Option<Connection> {
        if !tcp.flags.contains(TcpFlags::SYN)
            || tcp.flags.contains(TcpFlags::ACK)
            || tcp.flags.contains(TcpFlags::RST)
        {
            return None;
        }
        let local = SocketAddr::new(ip.dst_addr(), tcp.dst_port);
        let remote = SocketAddr::new(ip.src_addr(), tcp.src_port);
        let mut c = Connection::new(config, now, local, remote, iss, false, seed, None, epoch);
        c.take_syn_options(tcp);
        c.irs = tcp.seq;
        c.rcv_nxt = tcp.seq + 1u32;
        c.snd_wnd = usize::from(tcp.window);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = tcp.seq;
        c.set_state(now, State::SynReceived);
        Some(c)
    }

    // ----- getters -------------------------------------------------------

    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Whether this end opened the connection.
    pub fn is_active_open(&self) -> bool {
        self.active_open
    }
    /// What the host's link layer told the RTO policy about the path when
    /// the connection was opened ([`ConnectionContext::path`]).
    pub fn path_hint(&self) -> Option<PathHint> {
        self.path
    }
    /// Local address and port.
    pub fn local(&self) -> SocketAddr {
        self.local
    }
    /// Remote address and port.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }
    /// Counters.
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }
    /// Which trace events the connection records ([`TraceLevel::All`]
    /// unless set).
    pub fn trace_level(&self) -> TraceLevel {
        self.trace_level
    }
    /// Chooses which trace events the connection records from now on.
    pub fn set_trace_level(&mut self, level: TraceLevel) {
        self.trace_level = level;
    }
    /// The MSS used for sending, after negotiation.
    pub fn send_mss(&self) -> usize {
        self.send_mss
    }
    /// Congestion window in bytes.
    pub fn cwnd(&self) -> usize {
        self.cc.metrics().cwnd
    }
    /// The congestion controller's numbers.
    pub fn cc_metrics(&self) -> crate::cc::CcMetrics {
        self.cc.metrics()
    }
    /// The RTO policy's current estimate.
    pub fn rto_estimate(&self) -> crate::rto::RtoEstimate {
        self.rto.estimate()
    }
    /// Whether the options were agreed: (window scale, timestamps, SACK,
    /// timelost).
    pub fn agreed_options(&self) -> (bool, bool, bool, bool) {
        (
            self.peer_wscale > 0 || self.our_wscale > 0,
            self.ts_enabled,
            self.sack_enabled,
            self.timelost_enabled,
        )
    }
    /// Bytes the application can still queue with [`Connection::send`].
    pub fn send_capacity(&self) -> usize {
        self.config
            .profile
            .send_buffer
            .saturating_sub(self.send_buf.len())
    }
    /// Bytes queued and not yet acknowledged.
    pub fn send_queue_len(&self) -> usize {
        self.send_buf.len()
    }
    /// Bytes ready for [`Connection::recv`].
    pub fn recv_queue_len(&self) -> usize {
        self.readable
    }
    /// Whether the peer's FIN arrived and all data before it was read.
    pub fn is_recv_finished(&self) -> bool {
        self.fin_received && self.readable == 0
    }
    /// Whether the connection is finished (closed, reset or timed out).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// When the connection reached CLOSED, if it has.
    pub fn closed_at(&self) -> Option<SimTime> {
        self.closed_at
    }

    // ----- application side ---------------------------------------------

    /// Queues a copy of up to [`Connection::send_capacity`] bytes; returns
    /// how many were taken. Data queued during the handshake leaves after
    /// it.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, ConnError> {
        let n = data.len().min(self.sendable()?);
        self.send_buf.push_copy(&data[..n]);
        Ok(n)
    }

    /// Like [`Connection::send`], but without copying: the connection keeps
    /// a reference to (the first [`Connection::send_capacity`] bytes of)
    /// `data` and reads each segment's payload from it, as `sendfile` lets
    /// a real socket do. For applications that send the same bytes again
    /// and again, or bytes they already hold in a shared buffer.
    pub fn send_shared(&mut self, data: Bytes) -> Result<usize, ConnError> {
        let n = data.len().min(self.sendable()?);
        self.send_buf.push_shared(data.slice(..n));
        Ok(n)
    }

    /// The room for new data, if the connection still takes some.
    fn sendable(&self) -> Result<usize, ConnError> {
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait
                if !self.fin_queued =>
            {
                Ok(self.send_capacity())
            }
            State::Closed => Err(ConnError::Closed),
            s => Err(ConnError::CannotSend(s)),
        }
    }

    /// Moves received in-order bytes into `buf`; returns how many.
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.readable);
        // Slice copies: the ring buffer is at most two contiguous runs.
        let (front, back) = self.recv_buf.as_slices();
        let first = n.min(front.len());
        buf[..first].copy_from_slice(&front[..first]);
        buf[first..n].copy_from_slice(&back[..n - first]);
        self.readable -= n;
        if n == self.recv_buf.len() {
            // Start the ring over: the next data lands in memory that was
            // just used, not wherever the ring's head had moved to.
            self.recv_buf.clear();
        } else {
            self.recv_buf.drain(..n);
        }
        if n > 0 && self.state.synchronized() {
            let window = self.recv_window();
            let profile = &self.config.profile;
            let due = match profile.window_update_threshold {
                // lwIP's tcp_recved: only once the right edge has moved by
                // the threshold since it was last announced.
                Some(threshold) => {
                    let right_edge = self.rcv_nxt + window;
                    right_edge - self.last_adv_right_edge >= threshold as i64
                }
                // RFC 9293 §3.8.6.2.2: once the window grew by
                // min(buffer/2, MSS), or at all after a zero window.
                None => {
                    let threshold = (profile.recv_buffer / 2).min(usize::from(profile.mss));
                    (self.last_adv_window == 0 && window > 0)
                        || window >= self.last_adv_window + threshold
                }
            };
            if due {
                self.ack_now = true;
            }
        }
        n
    }

    /// Closes the sending direction: a FIN follows the queued data.
    pub fn close(&mut self, now: SimTime) {
        match self.state {
            // RFC 9293 §3.10.4: with data queued, the close waits for the
            // handshake; otherwise the attempt is simply abandoned.
            State::SynSent if !self.send_buf.is_empty() => self.fin_queued = true,
            State::SynSent | State::Listen => {
                self.set_state(now, State::Closed);
                self.timers.stop_all();
                self.events.push_back(Event::Closed);
            }
            // The FIN follows once the handshake completes.
            State::SynReceived => self.fin_queued = true,
            State::Established => {
                self.fin_queued = true;
                self.set_state(now, State::FinWait1);
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.set_state(now, State::LastAck);
            }
            _ => {}
        }
    }

    /// Aborts the connection with a RST (RFC 9293 §3.10.5 ABORT).
    pub fn abort(&mut self, now: SimTime) {
        if self.state.synchronized() && self.state != State::TimeWait {
            self.rst_pending = Some(Reset {
                seq: self.snd_nxt,
                ack: None,
            });
        }
        self.drop_connection(now, Event::Closed);
    }

    // ----- handle --------------------------------------------------------

    /// Processes one received segment addressed to this connection; `ip`
    /// is the IPv4 or IPv6 header it came in.
    pub fn handle_segment<H: IpHeader>(&mut self, now: SimTime, ip: &H, tcp: &TcpRepr) {
        let _ = ip;
        self.stats.segments_received += 1;
        match self.state {
            State::Closed | State::Listen => {
                if !tcp.flags.contains(TcpFlags::RST) {
                    self.rst_pending = Some(reset_for(tcp, self.config.profile.reset_with_ack));
                }
            }
            State::SynSent => self.handle_syn_sent(now, tcp),
            _ => self.handle_synchronized(now, tcp),
        }
    }

    /// Fires every timer whose deadline is at or before `now`.
    pub fn handle_timeout(&mut self, now: SimTime) {
        for kind in TimerTable::KINDS {
            let Some(at) = self.timers.get(kind) else {
                continue;
            };
            if at > now {
                continue;
            }
            self.timers.stop(kind);
            self.trace(now, TraceEvent::TimerFired { timer: kind });
            match kind {
                TimerKind::Retransmit => self.on_retransmit_timeout(now),
                TimerKind::DelayedAck => {
                    self.ack_now = true;
                    self.ack_delayed_fired = true;
                }
                TimerKind::Persist => {
                    if self.snd_wnd == 0 && self.waiting_to_send() {
                        self.probe_pending = Some(RetransmitCause::Probe);
                        self.persist_backoff = self.persist_backoff.saturating_add(1);
                        self.arm_persist(now);
                    } else {
                        self.persist_backoff = 0;
                    }
                }
                TimerKind::KeepAlive => self.on_keepalive_timeout(now),
                TimerKind::TimeWait => {
                    self.set_state(now, State::Closed);
                    self.timers.stop_all();
                    self.events.push_back(Event::Closed);
                }
            }
        }
    }

    // ----- poll ----------------------------------------------------------

    /// Writes the next datagram to send into `buf` (cleared first) and
    /// returns its length, or `None` when there is nothing to send now.
    #[must_use]
    pub fn poll_transmit(&mut self, now: SimTime, buf: &mut Vec<u8>) -> Option<usize> {
        if let Some(reset) = self.rst_pending.take() {
            let mut flags = TcpFlags::RST;
            if reset.ack.is_some() {
                flags.insert(TcpFlags::ACK);
            }
            let repr = TcpRepr {
                src_port: self.local.port(),
                dst_port: self.remote.port(),
                seq: reset.seq,
                ack: reset.ack.unwrap_or_default(),
                flags,
                window: 0,
                urgent: 0,
                options: TcpOptions::default(),
                payload: &[],
            };
            return self.emit(buf, &repr);
        }
        if matches!(self.state, State::Closed | State::Listen) {
            return None;
        }
        if self.fast_rexmit {
            self.fast_rexmit = false;
            if let Some(index) = self.sent.iter().position(|s| s.seq == self.snd_una) {
                self.stats.fast_retransmits += 1;
                if self.config.profile.fast_retransmit_restarts_timer {
                    // Armed afresh when the segment goes out (5.1).
                    self.timers.stop(TimerKind::Retransmit);
                }
                return self.transmit_entry(now, buf, index, Some(RetransmitCause::FastRetransmit));
            }
        }
        if self.timers.get(TimerKind::DelayedAck).is_some() && self.state.synchronized() {
            // Data written after the segment arrived would carry the held
            // ACK; the policy may want the ACK to go on its own first.
            let sending = self.unsent_len().min(self.send_mss);
            if sending > 0
                && self
                    .ack_policy
                    .ack_before_data(now, self.last_segment_len, sending)
            {
                self.trace(
                    now,
                    TraceEvent::AckNow {
                        reason: Some(AckReason::LargerAnswer),
                    },
                );
                return self.emit_control(now, buf, self.snd_nxt, None);
            }
        }
        if self.sack_recovery.is_some() {
            if let Some(len) = self.sack_recovery_send(now, buf) {
                return Some(len);
            }
        } else if let Some(len) = self.send_at_snd_nxt(now, buf) {
            return Some(len);
        }
        if let Some(cause) = self.probe_pending.take() {
            // Zero-window and keep-alive probes carry an old sequence
            // number and no data, so the peer answers with an ACK.
            return self.emit_control(now, buf, self.snd_una - 1u32, Some(cause));
        }
        if self.ack_now && self.state.synchronized() {
            return self.emit_control(now, buf, self.snd_nxt, None);
        }
        if self.reopen_acks > 0 && self.state.synchronized() {
            self.reopen_acks -= 1;
            return self.emit_control(now, buf, self.snd_nxt, None);
        }
        None
    }

    /// Freeze-TCP (Goff et al., INFOCOM 2000): the link layer predicts an
    /// outage, so advertise a zero window at once. The sender stops and
    /// probes the window instead of timing out and collapsing its
    /// congestion window; data already in flight is still accepted.
    /// Nothing happens unless the profile's `freeze` is set.
    pub fn freeze(&mut self, now: SimTime) {
        if !self.config.profile.freeze || self.frozen || !self.state.synchronized() {
            return;
        }
        self.frozen = true;
        self.ack_now = true;
        self.trace(
            now,
            TraceEvent::AckNow {
                reason: Some(AckReason::Freeze),
            },
        );
    }

    /// Freeze-TCP: the link is back; three ACKs reopen the window (three,
    /// so one survives a loss and a sender that waits for duplicates sees
    /// them and retransmits what the outage lost at once).
    pub fn thaw(&mut self, now: SimTime) {
        if !self.frozen {
            return;
        }
        self.frozen = false;
        self.reopen_acks = 3;
        self.trace(
            now,
            TraceEvent::AckNow {
                reason: Some(AckReason::Thaw),
            },
        );
    }

    /// Whether the window is frozen (Freeze-TCP).
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// The earliest deadline at which [`Connection::handle_timeout`] must be
    /// called, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.timers.next()
    }

    /// The next application or trace event.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether an ACK is due at once (a window update after a read, say),
    /// so [`Connection::poll_transmit`] has something to send.
    pub fn ack_due(&self) -> bool {
        self.ack_now || self.reopen_acks > 0
    }

    /// The events [`Connection::poll_event`] will return, in order.
    pub(crate) fn queued_events(&self) -> &VecDeque<Event> {
        &self.events
    }

    // ----- internals: state and traces ----------------------------------

    fn trace(&mut self, now: SimTime, event: TraceEvent) {
        if event.recorded_at(self.trace_level) {
            self.events
                .push_back(Event::Trace(Trace { time: now, event }));
        }
    }

    fn set_state(&mut self, now: SimTime, to: State) {
        if self.state != to {
            let from = self.state;
            self.state = to;
            if to == State::Closed {
                self.closed_at = Some(now);
            }
            self.trace(now, TraceEvent::State { from, to });
        }
    }

    fn trace_cc(&mut self, now: SimTime) {
        let m = self.cc.metrics();
        let (cwnd, ssthresh) = self.traced_cwnd;
        if m.cwnd != cwnd {
            self.trace(
                now,
                TraceEvent::Cwnd {
                    old: cwnd,
                    new: m.cwnd,
                },
            );
        }
        if m.ssthresh != ssthresh {
            self.trace(
                now,
                TraceEvent::Ssthresh {
                    old: ssthresh,
                    new: m.ssthresh,
                },
            );
        }
        self.traced_cwnd = (m.cwnd, m.ssthresh);
    }

    fn drop_connection(&mut self, now: SimTime, event: Event) {
        self.set_state(now, State::Closed);
        self.timers.stop_all();
        self.send_buf.clear();
        self.sent.clear();
        self.unsacked_bytes = 0;
        self.events.push_back(event);
    }

    fn tsval(now: SimTime) -> u32 {
        // A 1 ms timestamp clock (RFC 7323 §5.4 allows 1 ms to 1 s).
        (now.as_nanos() / 1_000_000) as u32
    }

    // ----- internals: receive path --------------------------------------

    fn take_syn_options(&mut self, tcp: &TcpRepr) {
        let p = &self.config.profile;
        let peer_mss = tcp
            .options
            .mss
            .map_or_else(|| default_mss(self.remote.ip()), usize::from);
        self.send_mss = peer_mss.min(usize::from(p.mss)).max(1);
        match (p.window_scale, tcp.options.window_scale) {
            (Some(_), Some(shift)) => self.peer_wscale = shift.min(MAX_WINDOW_SCALE),
            _ => {
                self.peer_wscale = 0;
                self.our_wscale = 0;
            }
        }
        if let (true, Some(ts)) = (p.timestamps, tcp.options.timestamps) {
            self.ts_enabled = true;
            self.ts_recent = ts.tsval;
        }
        self.sack_enabled = p.sack && tcp.options.sack_permitted;
        self.timelost_enabled = p.timelost && tcp.options.timelost.is_some();
        self.cc.on_mss(self.send_mss);
    }

    fn handle_syn_sent(&mut self, now: SimTime, tcp: &TcpRepr) {
        let f = tcp.flags;
        if f.contains(TcpFlags::ACK) && (tcp.ack <= self.iss || tcp.ack > self.snd_max) {
            // RFC 9293 §3.10.7.3: unacceptable ACK.
            if !f.contains(TcpFlags::RST) {
                self.rst_pending = Some(Reset {
                    seq: tcp.ack,
                    ack: None,
                });
            }
            return;
        }
        if f.contains(TcpFlags::RST) {
            if f.contains(TcpFlags::ACK) {
                self.drop_connection(now, Event::Reset);
            }
            return;
        }
        if !f.contains(TcpFlags::SYN) {
            return;
        }
        self.take_syn_options(tcp);
        self.irs = tcp.seq;
        self.rcv_nxt = tcp.seq + 1u32;
        self.snd_wl1 = tcp.seq;
        self.snd_wnd = usize::from(tcp.window);
        self.max_snd_wnd = self.snd_wnd;
        if f.contains(TcpFlags::ACK) {
            self.process_ack(now, tcp, true);
            self.set_state(now, State::Established);
            self.events.push_back(Event::Connected);
            self.arm_keepalive(now);
            self.ack_now = true;
            if self.fin_queued {
                self.set_state(now, State::FinWait1);
            }
            if !tcp.payload.is_empty() || f.contains(TcpFlags::FIN) {
                // RFC 9293 §3.10.7.3: text or a FIN after the SYN is
                // processed as in a synchronized state; it starts one on.
                let mut rest = *tcp;
                rest.seq = tcp.seq + 1u32;
                rest.flags.remove(TcpFlags::SYN);
                self.handle_synchronized(now, &rest);
            }
        } else {
            // Simultaneous open: answer with SYN-ACK.
            self.set_state(now, State::SynReceived);
            self.snd_nxt = self.iss;
        }
    }

    fn recv_window(&self) -> usize {
        self.config
            .profile
            .recv_buffer
            .saturating_sub(self.readable)
    }

    fn acceptable(&self, tcp: &TcpRepr) -> bool {
        // RFC 9293 §3.10.7.4, the four cases.
        let len = tcp.segment_len();
        let wnd = self.recv_window();
        let end_wnd = self.rcv_nxt + wnd;
        match (len, wnd) {
            (0, 0) => tcp.seq == self.rcv_nxt,
            (0, _) => seq_in(tcp.seq, self.rcv_nxt, end_wnd),
            (_, 0) => false,
            (_, _) => {
                seq_in(tcp.seq, self.rcv_nxt, end_wnd)
                    || seq_in(tcp.seq + (len - 1), self.rcv_nxt, end_wnd)
            }
        }
    }

    fn handle_synchronized(&mut self, now: SimTime, tcp: &TcpRepr) {
        let mut trimmed;
        let mut tcp = tcp;
        let syn_window = tcp.flags.contains(TcpFlags::SYN);
        if self.state == State::SynReceived
            && tcp.flags.contains(TcpFlags::SYN | TcpFlags::ACK)
            && tcp.seq == self.irs
        {
            // Simultaneous open: the peer's SYN-ACK repeats the SYN we
            // already hold but acknowledges ours. Only the new part of a
            // segment is processed (RFC 9293 §3.10.7.4), so drop the old SYN
            // and use the ACK; answer so that a peer whose copy of our
            // SYN-ACK was lost gets established too.
            trimmed = *tcp;
            trimmed.seq = tcp.seq + 1u32;
            trimmed.flags.remove(TcpFlags::SYN);
            tcp = &trimmed;
            self.ack_now = true;
        }
        let f = tcp.flags;
        // RFC 7323 §5.3 PAWS: drop segments with an old timestamp.
        if self.ts_enabled && !f.contains(TcpFlags::RST) {
            if let Some(ts) = tcp.options.timestamps {
                if (ts.tsval.wrapping_sub(self.ts_recent) as i32) < 0 {
                    self.ack_now = true;
                    return;
                }
            }
        }
        if self.state == State::SynReceived
            && f.contains(TcpFlags::SYN)
            && !f.contains(TcpFlags::ACK)
            && tcp.seq == self.irs
        {
            // The peer repeated its SYN: our SYN-ACK was lost; resend it.
            self.snd_nxt = self.iss;
            return;
        }
        if self.state == State::SynReceived
            && f.contains(TcpFlags::ACK)
            && !f.contains(TcpFlags::RST)
            && (tcp.ack <= self.snd_una || tcp.ack > self.snd_max)
        {
            // An ACK of something other than our SYN means this half-open
            // connection grew from an old duplicate SYN (RFC 9293 §3.5,
            // recovery from an old duplicate SYN): reset it whatever its
            // sequence number. Answering an out-of-window ACK with an ACK,
            // as the generic check below would, can start an endless ACK
            // exchange with a peer in TIME-WAIT that does the same.
            self.rst_pending = Some(Reset {
                seq: tcp.ack,
                ack: None,
            });
            return;
        }
        if !self.acceptable(tcp) {
            if !f.contains(TcpFlags::RST) {
                self.ack_now = true;
                if self.state == State::TimeWait && f.contains(TcpFlags::FIN) {
                    // A retransmitted FIN: restart the 2 MSL timer.
                    self.timers
                        .set(TimerKind::TimeWait, now + self.config.profile.time_wait);
                }
                if !tcp.payload.is_empty() && tcp.seq < self.rcv_nxt && self.sack_enabled {
                    self.dsack = Some(SackBlock {
                        left: tcp.seq,
                        right: tcp.seq + tcp.payload.len(),
                    });
                }
            }
            return;
        }
        if f.contains(TcpFlags::RST) {
            // RFC 5961 §3: reset only on an exact match, else challenge.
            if tcp.seq == self.rcv_nxt {
                if self.state == State::TimeWait {
                    self.set_state(now, State::Closed);
                    self.timers.stop_all();
                    self.events.push_back(Event::Closed);
                } else {
                    self.drop_connection(now, Event::Reset);
                }
            } else {
                self.ack_now = true;
            }
            return;
        }
        if f.contains(TcpFlags::SYN) {
            // RFC 9293 §3.10.7.4 fourth: challenge ACK.
            self.ack_now = true;
            return;
        }
        // RFC 1122 §4.2.3.6: any acceptable segment shows the peer alive,
        // so keep-alive counts idle time from here (re-armed below).
        self.keepalive_probes = 0;
        if !f.contains(TcpFlags::ACK) {
            return;
        }
        if self.ts_enabled {
            if let Some(ts) = tcp.options.timestamps {
                // RFC 7323 §4.3 (2): remember the timestamp to echo.
                let last_ack = self.last_ack_sent.map_or(self.rcv_nxt, |(_, a, _)| a);
                if tcp.seq <= last_ack && (ts.tsval.wrapping_sub(self.ts_recent) as i32) >= 0 {
                    self.ts_recent = ts.tsval;
                }
            }
        }
        if self.state == State::SynReceived {
            if tcp.ack > self.snd_una && tcp.ack <= self.snd_max {
                self.set_state(now, State::Established);
                self.events.push_back(Event::Connected);
                self.arm_keepalive(now);
                if self.fin_queued {
                    self.set_state(now, State::FinWait1);
                }
            } else {
                self.rst_pending = Some(Reset {
                    seq: tcp.ack,
                    ack: None,
                });
                return;
            }
        }
        if tcp.ack > self.snd_max {
            // RFC 9293: ACK of something not yet sent.
            self.ack_now = true;
            return;
        }
        self.process_ack(now, tcp, syn_window);
        if self.state == State::Closed {
            return;
        }
        let fin_acked =
            self.fin_queued && self.snd_una == self.fin_seq() + 1u32 && self.sent.is_empty();
        match self.state {
            State::FinWait1 if fin_acked => self.set_state(now, State::FinWait2),
            State::Closing if fin_acked => self.enter_time_wait(now),
            State::LastAck if fin_acked => {
                self.set_state(now, State::Closed);
                self.timers.stop_all();
                self.events.push_back(Event::Closed);
                return;
            }
            _ => {}
        }
        let receiving = matches!(
            self.state,
            State::Established | State::FinWait1 | State::FinWait2
        );
        if receiving && (!tcp.payload.is_empty() || f.contains(TcpFlags::FIN)) {
            self.receive(now, tcp);
        }
    }

    fn receive(&mut self, now: SimTime, tcp: &TcpRepr) {
        let mut seq = tcp.seq;
        let mut data = tcp.payload;
        let had_holes = !self.ooo.is_empty();
        // The peer's full-sized segment is the largest seen so far (options
        // shorten it below the announced MSS).
        self.rcv_mss = self
            .rcv_mss
            .max(tcp.payload.len())
            .min(usize::from(self.config.profile.mss));
        if self.timelost_enabled {
            if let Some(rets) = tcp.options.timelost {
                self.timelost_echo = rets;
            }
        }
        // Trim what was already received (RFC 9293 §3.10.7.4 seventh).
        if seq < self.rcv_nxt {
            let dup = dist(self.rcv_nxt, seq).min(data.len());
            if dup > 0 && self.sack_enabled {
                self.dsack = Some(SackBlock {
                    left: seq,
                    right: seq + dup,
                });
            }
            data = &data[dup..];
            seq += dup;
        }
        // Trim to the window.
        let room = dist(self.rcv_nxt + self.recv_window(), seq);
        let fin_fits = data.len() <= room;
        data = &data[..data.len().min(room)];
        let offset = self.rcv_offset + dist(seq, self.rcv_nxt) as u64;
        let fin_offset =
            (tcp.flags.contains(TcpFlags::FIN) && fin_fits).then_some(offset + data.len() as u64);
        let out_of_order = seq != self.rcv_nxt;
        let received = data.len();
        if !data.is_empty() {
            if out_of_order {
                self.ooo_arrivals += 1;
                let at = self.readable + (offset - self.rcv_offset) as usize;
                write_at(&mut self.recv_buf, at, data);
                self.hold_out_of_order(OooRange {
                    start: offset,
                    end: offset + data.len() as u64,
                    arrival: self.ooo_arrivals,
                });
            } else {
                self.deliver(data);
            }
        }
        if let Some(fin) = fin_offset {
            self.ooo_fin = Some(fin);
        }
        let filled = had_holes && !out_of_order;
        self.pull_reassembled();
        let fin_now = !self.fin_received && self.ooo_fin == Some(self.rcv_offset);
        if fin_now {
            self.fin_received = true;
            self.rcv_nxt += 1usize;
            self.rcv_offset += 1;
            self.events.push_back(Event::PeerClosed);
            match self.state {
                State::Established => self.set_state(now, State::CloseWait),
                State::FinWait1 => {
                    if self.fin_queued
                        && self.sent.is_empty()
                        && self.snd_una == self.fin_seq() + 1u32
                    {
                        self.enter_time_wait(now);
                    } else {
                        self.set_state(now, State::Closing);
                    }
                }
                State::FinWait2 => self.enter_time_wait(now),
                _ => {}
            }
        }
        if received == 0 && !fin_now && !out_of_order {
            // Nothing new (e.g. a duplicate): acknowledge at once.
            self.ack_now = true;
            return;
        }
        self.last_segment_len = received;
        let pending_send = self.unsent_len().min(self.send_mss);
        let (decision, reason) = self.ack_policy.on_segment(
            now,
            &SegmentArrival {
                len: received,
                mss: self.rcv_mss,
                out_of_order: out_of_order || (received == 0 && !fin_now),
                fills_gap: filled,
                fin: fin_now,
                pending_send,
            },
        );
        match decision {
            AckDecision::Now => {
                self.ack_now = true;
                self.trace(now, TraceEvent::AckNow { reason });
            }
            AckDecision::Delay { until } => {
                if self.timers.get(TimerKind::DelayedAck) != Some(until) {
                    self.timers.set(TimerKind::DelayedAck, until);
                    self.trace(now, TraceEvent::AckDelayed { until });
                }
            }
        }
    }

    /// Appends in-order `data` to the readable bytes.
    fn deliver(&mut self, data: &[u8]) {
        write_at(&mut self.recv_buf, self.readable, data);
        self.made_readable(data.len());
    }

    /// Counts the `n` bytes after the readable ones, already in place in
    /// `recv_buf`, as readable.
    fn made_readable(&mut self, n: usize) {
        self.readable += n;
        self.rcv_nxt += n;
        self.rcv_offset += n as u64;
        self.stats.bytes_received += n as u64;
        self.events.push_back(Event::Readable);
    }

    /// Notes out-of-order data now in `recv_buf`, merging it with the
    /// ranges it overlaps or touches.
    fn hold_out_of_order(&mut self, mut range: OooRange) {
        let first = self.ooo.partition_point(|r| r.end < range.start);
        let mut last = first;
        while let Some(r) = self.ooo.get(last).filter(|r| r.start <= range.end) {
            range.start = range.start.min(r.start);
            range.end = range.end.max(r.end);
            range.arrival = range.arrival.max(r.arrival);
            last += 1;
        }
        self.ooo.splice(first..last, [range]);
    }

    /// Makes held data that the stream has reached readable: it is already
    /// in place behind the readable bytes.
    fn pull_reassembled(&mut self) {
        let reached = self
            .ooo
            .iter()
            .take_while(|r| r.start <= self.rcv_offset)
            .count();
        for i in 0..reached {
            let end = self.ooo[i].end;
            if end > self.rcv_offset {
                let take = ((end - self.rcv_offset) as usize).min(self.recv_window());
                self.made_readable(take);
            }
        }
        self.ooo.drain(..reached);
    }

    /// The SACK blocks to send, at most `max` (and 4): the DSACK first,
    /// then the reassembly ranges.
    fn sack_blocks(&self, max: usize) -> [Option<SackBlock>; 4] {
        let mut blocks = [None; 4];
        let mut n = 0;
        let max = max.min(blocks.len());
        if let Some(d) = self.dsack.filter(|_| max > 0) {
            blocks[0] = Some(d);
            n = 1;
        }
        // Merge reassembly ranges. RFC 2018 §4: the first block holds the
        // segment that triggered the ACK and the others follow from the
        // most recently reported, so a block is repeated in several ACKs
        // before a full option pushes it out. Only the most recent ranges
        // fit, so keep those, newest first (arrival numbers are distinct).
        let room = max - n;
        let mut newest = [(0u64, 0u64, 0u64); 4];
        let mut kept = 0;
        let mut offer = |range: (u64, u64, u64)| {
            let at = newest[..kept].partition_point(|r| r.2 > range.2);
            if at < room {
                kept = (kept + 1).min(room);
                newest.copy_within(at..kept - 1, at + 1);
                newest[at] = range;
            }
        };
        for r in &self.ooo {
            offer((r.start, r.end, r.arrival));
        }
        for &(start, end, _) in &newest[..kept] {
            let left = self.rcv_nxt + (start - self.rcv_offset) as usize;
            let right = self.rcv_nxt + (end - self.rcv_offset) as usize;
            blocks[n] = Some(SackBlock { left, right });
            n += 1;
        }
        blocks
    }

    // ----- internals: ACK processing ------------------------------------

    /// `syn_window`: the window field is a SYN's, which is never scaled
    /// (RFC 7323 §2.2).
    fn update_window(&mut self, tcp: &TcpRepr, syn_window: bool) -> bool {
        let shift = if syn_window { 0 } else { self.peer_wscale };
        let window = usize::from(tcp.window) << shift;
        // RFC 9293 §3.10.7.4: update from newer segments only.
        if self.snd_wl1 < tcp.seq || (self.snd_wl1 == tcp.seq && self.snd_wl2 <= tcp.ack) {
            let changed = window != self.snd_wnd;
            self.snd_wnd = window;
            self.max_snd_wnd = self.max_snd_wnd.max(window);
            self.snd_wl1 = tcp.seq;
            self.snd_wl2 = tcp.ack;
            return changed;
        }
        false
    }

    fn in_flight(&self) -> usize {
        let scan = || {
            self.sent
                .iter()
                .take_while(|s| s.seq < self.snd_nxt)
                .filter(|s| !s.sacked)
                .map(|s| s.len as usize)
                .sum()
        };
        // Unless a timeout sent SND.NXT back, everything sent is below it.
        if self.sent.back().map_or(true, |s| s.seq < self.snd_nxt) {
            debug_assert_eq!(self.unsacked_bytes, scan());
            return self.unsacked_bytes;
        }
        scan()
    }

    fn segments_in_flight(&self) -> usize {
        self.sent
            .iter()
            .take_while(|s| s.seq < self.snd_nxt)
            .filter(|s| !s.sacked)
            .count()
    }

    fn offset_of(&self, seq: SeqNumber) -> u64 {
        (self.snd_una_offset as i64 + (seq - self.snd_una)).max(0) as u64
    }

    fn ack_event(&self, bytes_acked: usize, in_flight_before: usize) -> AckEvent {
        AckEvent {
            bytes_acked,
            in_flight_before,
            in_flight: self.in_flight(),
            acked_to: self.snd_una_offset,
            highest_sent: self.offset_of(self.snd_max),
            mss: self.send_mss,
            duplicates: self.dup_acks,
            sack_lost: false,
            first_unacked: self.sent.front().map(|s| SentSegment {
                last_sent: s.last_sent,
                transmissions: s.retransmits + 1,
            }),
        }
    }

    fn process_sack(&mut self, now: SimTime, tcp: &TcpRepr) {
        if !self.sack_enabled {
            return;
        }
        for (i, block) in tcp.options.sack_blocks().enumerate() {
            if i == 0 && (block.right <= tcp.ack || block.left < self.snd_una) {
                // RFC 2883: a DSACK reports a duplicate; if it covers data we
                // retransmitted, the retransmission was spurious.
                let hit = self
                    .recent_retransmits
                    .iter()
                    .position(|&(l, r)| block.left >= l && block.right <= r);
                if let Some(i) = hit {
                    let (seq, _) = self.recent_retransmits.remove(i).unwrap_or_default();
                    self.stats.spurious_retransmissions += 1;
                    self.trace(
                        now,
                        TraceEvent::SpuriousRetransmission {
                            seq: seq.0,
                            detection: SpuriousDetection::Dsack,
                        },
                    );
                    self.cc.on_spurious_retransmission(now);
                }
                continue;
            }
            // `sent` is in sequence order, each segment following the last:
            // the ones the block covers are a run from the first at or
            // after its left edge.
            let first = self.sent.partition_point(|s| s.seq < block.left);
            for s in self.sent.range_mut(first..) {
                if s.end() > block.right {
                    break;
                }
                if !s.sacked {
                    self.unsacked_bytes -= s.len as usize;
                }
                s.sacked = true;
            }
        }
    }

    /// RFC 6675 `IsLost` for the first unacknowledged segment.
    fn first_is_lost(&self) -> bool {
        let Some(first) = self.sent.front() else {
            return false;
        };
        if first.sacked {
            return false;
        }
        let sacked_above: usize = self
            .sent
            .iter()
            .filter(|s| s.sacked)
            .map(|s| s.len as usize)
            .sum();
        sacked_above >= 3 * self.send_mss
    }

    fn process_ack(&mut self, now: SimTime, tcp: &TcpRepr, syn_window: bool) {
        let window_changed = self.update_window(tcp, syn_window);
        self.process_sack(now, tcp);
        if tcp.ack <= self.snd_una {
            // RFC 5681 §2 duplicate ACK.
            let duplicate = tcp.ack == self.snd_una
                && tcp.payload.is_empty()
                && !tcp.flags.contains(TcpFlags::SYN)
                && !tcp.flags.contains(TcpFlags::FIN)
                && !window_changed
                && self.snd_una != self.snd_max;
            if duplicate {
                self.dup_acks += 1;
                self.stats.dup_acks_received += 1;
                self.trace(
                    now,
                    TraceEvent::DupAckReceived {
                        ack: tcp.ack.0,
                        count: self.dup_acks,
                    },
                );
                let mut ev = self.ack_event(0, self.in_flight());
                ev.sack_lost = self.sack_enabled && self.first_is_lost();
                let action = self.cc.on_duplicate_ack(now, &ev);
                self.apply_recovery_action(action);
                self.trace_cc(now);
                // RFC 3042: on the first two duplicates, new data may go
                // out while FlightSize stays within cwnd + 2 * SMSS.
                let early = self.dup_acks <= 2 && !self.cc.metrics().in_recovery;
                self.limited_transmit = if self.config.profile.limited_transmit && early {
                    self.dup_acks as usize * self.send_mss
                } else {
                    0
                };
            }
            self.after_ack_timers(now);
            return;
        }
        let flight_before = self.in_flight();
        let newly = dist(tcp.ack, self.snd_una);
        let syn_acked = self.snd_una == self.iss;
        // RTT sample from the newest fully acknowledged segment.
        let mut sample_from: Option<Sent> = None;
        while let Some(front) = self.sent.front() {
            if front.end() <= tcp.ack {
                if !front.sacked {
                    self.unsacked_bytes -= front.len as usize;
                }
                sample_from = self.sent.pop_front();
            } else {
                if front.seq < tcp.ack {
                    // Partial ACK of a segment: keep the rest.
                    let cut = dist(tcp.ack, front.seq) as u32;
                    if let Some(f) = self.sent.front_mut() {
                        if !f.sacked {
                            self.unsacked_bytes -= cut as usize;
                        }
                        f.offset += u64::from(cut);
                        f.seq = f.seq + cut;
                        f.len -= cut;
                        f.syn = false;
                    }
                }
                break;
            }
        }
        // Release acknowledged application bytes.
        let data_acked = dist(tcp.ack, self.buf_seq).min(self.send_buf.len());
        self.send_buf.consume(data_acked);
        self.buf_seq += data_acked;
        self.stats.bytes_acked += data_acked as u64;
        self.snd_una = tcp.ack;
        self.snd_una_offset += newly as u64;
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        self.dup_acks = 0;
        self.limited_transmit = 0;
        self.consecutive_timeouts = 0;
        self.keepalive_probes = 0;
        if let Some(s) = sample_from {
            self.take_sample(now, tcp, &s);
        }
        let mut spurious_timeout = None;
        if let Some(probe) = self.eifel.take() {
            // RFC 3522: the ACK echoes a timestamp older than the
            // retransmission, so the original was not lost.
            if let Some(ts) = tcp.options.timestamps.filter(|_| self.ts_enabled) {
                if (ts.tsecr.wrapping_sub(probe.tsval) as i32) < 0 {
                    self.stats.spurious_retransmissions += 1;
                    self.trace(
                        now,
                        TraceEvent::SpuriousRetransmission {
                            seq: probe.seq.0,
                            detection: SpuriousDetection::Timestamps,
                        },
                    );
                    self.cc.on_spurious_retransmission(now);
                    spurious_timeout = Some(probe);
                }
            }
        }
        self.rto.on_ack(
            now,
            &AckProgress {
                acked_to: self.snd_una_offset,
                newly_acked: newly,
                syn_acked,
                outstanding: self.snd_una != self.snd_max,
                correction: self.rtt_correction(tcp).unwrap_or(SimDuration::ZERO),
            },
        );
        // Congestion control counts payload; a bare SYN or FIN does not
        // grow the window.
        if data_acked > 0 || self.cc.metrics().in_recovery {
            let ev = self.ack_event(data_acked, flight_before);
            let action = self.cc.on_ack(now, &ev);
            self.apply_recovery_action(action);
        }
        if let Some(probe) = spurious_timeout.filter(|_| self.config.profile.eifel_response) {
            self.eifel_response(now, &probe, data_acked);
        }
        if let Some(point) = self.sack_recovery {
            if self.snd_una >= point {
                self.sack_recovery = None;
                for s in self.sent.iter_mut() {
                    s.recovery_rexmit = false;
                }
            }
        }
        self.trace_cc(now);
        if data_acked > 0 {
            self.events.push_back(Event::Writable);
        }
        // RFC 6298 (5.2)/(5.3): stop when all is acknowledged, else restart.
        self.timers.stop(TimerKind::Retransmit);
        if self.snd_una != self.snd_max {
            self.arm_retransmit(now);
        }
        self.after_ack_timers(now);
    }

    /// RFC 4015 §3 after a spurious timeout: resume with the first unsent
    /// segment instead of resending the rest of the window (step 5), and
    /// let congestion control restore its window (step 6). Runs after the
    /// ACK's normal processing, whose window growth step 6 replaces.
    fn eifel_response(&mut self, now: SimTime, probe: &EifelProbe, bytes_acked: usize) {
        if self.snd_nxt < self.snd_max {
            self.snd_nxt = self.snd_max;
        }
        let undo = SpuriousTimeout {
            pipe_prev: probe.pipe_prev,
            in_flight: self.in_flight(),
            bytes_acked,
            mss: self.send_mss,
        };
        self.cc.on_spurious_timeout(now, &undo);
    }

    fn apply_recovery_action(&mut self, action: RecoveryAction) {
        match action {
            RecoveryAction::None => {}
            RecoveryAction::FastRetransmit => {
                self.fast_rexmit = true;
                if self.sack_enabled {
                    self.sack_recovery = Some(self.snd_max);
                    self.rescue_sent = false;
                    for s in self.sent.iter_mut() {
                        s.recovery_rexmit = false;
                    }
                    if let Some(f) = self.sent.front_mut() {
                        f.recovery_rexmit = true;
                    }
                }
            }
            RecoveryAction::RetransmitFirstUnacked => {
                if self.sack_recovery.is_none() {
                    self.fast_rexmit = true;
                }
            }
        }
    }

    fn take_sample(&mut self, now: SimTime, tcp: &TcpRepr, s: &Sent) {
        let mut sample = RttSample {
            rtt: now - s.last_sent,
            since_first_transmission: now - s.first_sent,
            correction: None,
            segment_len: s.len as usize,
            retransmitted: s.retransmits > 0,
            retransmissions: s.retransmits,
            source: SampleSource::SegmentTiming,
        };
        if s.retransmits > 0 && self.ts_enabled {
            if let Some(ts) = tcp.options.timestamps.filter(|t| t.tsecr != 0) {
                let ms = Self::tsval(now).wrapping_sub(ts.tsecr);
                sample.rtt = SimDuration::from_millis(u64::from(ms));
                sample.source = SampleSource::Timestamp;
            }
        }
        sample.correction = self.rtt_correction(tcp);
        self.trace(
            now,
            TraceEvent::RttSample {
                raw: sample.rtt,
                corrected: sample.corrected(),
                timelost: self.echoed_timelost(tcp),
                segment_len: sample.segment_len,
                retransmitted: sample.retransmitted,
                source: sample.source,
            },
        );
        self.rto.on_rtt_sample(now, &sample);
        self.cc.on_rtt_sample(now, &sample);
    }

    /// The MAC retransmission time an ACK echoes (timelost spec §2), when
    /// the option was agreed and this host removes it from its samples.
    fn rtt_correction(&self, tcp: &TcpRepr) -> Option<SimDuration> {
        self.echoed_timelost(tcp)
            .filter(|_| self.config.profile.rtt_correction)
    }

    /// The time an ACK's timelost option echoes, once the option is agreed.
    fn echoed_timelost(&self, tcp: &TcpRepr) -> Option<SimDuration> {
        if !self.timelost_enabled {
            return None;
        }
        tcp.options
            .timelost
            .map(|rets| TIMELOST_UNIT.saturating_mul(u64::from(rets)))
    }

    fn after_ack_timers(&mut self, now: SimTime) {
        if self.needs_persist() {
            if self.timers.get(TimerKind::Persist).is_none() {
                self.arm_persist(now);
            }
        } else {
            self.timers.stop(TimerKind::Persist);
            self.persist_backoff = 0;
        }
        self.arm_keepalive(now);
    }

    /// Whether only the persist timer can get the connection going again:
    /// the peer's window is zero, something waits to be sent and no
    /// retransmission timer runs whose expiry would provoke a window update.
    /// This includes a retransmission the zero window blocked after a
    /// timeout: the timer that fired is not re-armed until that segment
    /// leaves, so without the probe nothing would ever happen again.
    fn needs_persist(&self) -> bool {
        self.snd_wnd == 0
            && self.waiting_to_send()
            && self.snd_nxt == self.snd_una
            && self.timers.get(TimerKind::Retransmit).is_none()
    }

    fn enter_time_wait(&mut self, now: SimTime) {
        // No ACK of its own: a FIN that leads here is acknowledged by the
        // receive path, and the ACK that leads here from CLOSING needs none.
        self.set_state(now, State::TimeWait);
        self.timers.stop_all();
        self.timers
            .set(TimerKind::TimeWait, now + self.config.profile.time_wait);
    }

    // ----- internals: timers --------------------------------------------

    fn arm_retransmit(&mut self, now: SimTime) {
        let Some(oldest) = self.sent.front().copied() else {
            return;
        };
        let tx = self.transmission_of(&oldest, oldest.retransmits > 0);
        let rto = self.rto.timeout_for(now, &tx);
        let deadline = self.rto_timer.deadline(now, rto);
        self.timers.set(TimerKind::Retransmit, deadline);
        if self.trace_level != TraceLevel::All {
            return;
        }
        let e = self.rto.estimate();
        let policy = self.rto.name();
        self.trace(
            now,
            TraceEvent::RtoArmed {
                rto,
                deadline,
                seq: oldest.seq.0,
                policy,
                srtt: e.srtt,
                rttvar: e.rttvar,
                backoff: e.backoff,
            },
        );
    }

    fn arm_persist(&mut self, now: SimTime) {
        let p = &self.config.profile;
        let base = self.rto.estimate().rto.max(p.persist_min);
        let delay = base
            .saturating_mul(1u64 << self.persist_backoff.min(16))
            .min(p.persist_max);
        let at = self.rto_timer.deadline(now, delay);
        self.timers.set(TimerKind::Persist, at);
    }

    fn arm_keepalive(&mut self, now: SimTime) {
        if let Some(k) = self.config.profile.keepalive {
            if matches!(self.state, State::Established | State::CloseWait) {
                let delay = if self.keepalive_probes == 0 {
                    k.idle
                } else {
                    k.interval
                };
                let at = self.rto_timer.deadline(now, delay);
                self.timers.set(TimerKind::KeepAlive, at);
            }
        }
    }

    fn on_keepalive_timeout(&mut self, now: SimTime) {
        let Some(k) = self.config.profile.keepalive else {
            return;
        };
        if self.snd_una != self.snd_max
            || !matches!(self.state, State::Established | State::CloseWait)
        {
            // Not idle: the retransmission timer watches the path.
            self.arm_keepalive(now);
            return;
        }
        if self.keepalive_probes >= k.probes {
            self.drop_connection(now, Event::TimedOut);
            return;
        }
        self.keepalive_probes += 1;
        self.probe_pending = Some(RetransmitCause::KeepAlive);
        self.arm_keepalive(now);
    }

    fn on_retransmit_timeout(&mut self, now: SimTime) {
        let Some(oldest) = self.sent.front().copied() else {
            return;
        };
        let p = &self.config.profile;
        let limit = if oldest.syn {
            p.max_syn_retransmissions
        } else {
            p.max_retransmissions
        };
        if oldest.retransmits >= limit {
            self.drop_connection(now, Event::TimedOut);
            return;
        }
        self.stats.timeouts += 1;
        self.consecutive_timeouts += 1;
        let expiry = Expiry {
            segment: self.transmission_of(&oldest, oldest.retransmits > 0),
            consecutive: self.consecutive_timeouts,
        };
        self.rto.on_expiry(now, &expiry);
        let flight = self.in_flight();
        let pipe_prev = flight.max(self.cc.metrics().ssthresh);
        let ev = self.ack_event(0, flight);
        self.cc.on_timeout(now, &ev);
        self.trace_cc(now);
        // RFC 6298 (5.4): retransmit the earliest unacknowledged segment;
        // go back to it and resend the rest as the window allows.
        self.snd_nxt = self.snd_una;
        self.dup_acks = 0;
        self.limited_transmit = 0;
        self.fast_rexmit = false;
        self.sack_recovery = None;
        for s in self.sent.iter_mut() {
            // RFC 2018 §8: forget SACK information after a timeout.
            s.sacked = false;
            s.recovery_rexmit = false;
        }
        self.unsacked_bytes = self.sent.iter().map(|s| s.len as usize).sum();
        if self.ts_enabled && self.eifel.is_none() {
            // Only the first timeout of a run counts: its retransmission is
            // the one an echoed timestamp can predate.
            self.eifel = Some(EifelProbe {
                tsval: Self::tsval(now),
                seq: oldest.seq,
                pipe_prev,
            });
        }
    }

    // ----- internals: send path -----------------------------------------

    fn fin_seq(&self) -> SeqNumber {
        self.buf_seq + self.send_buf.len()
    }

    fn unsent_len(&self) -> usize {
        let data_end = self.buf_seq + self.send_buf.len();
        dist(data_end, self.snd_max.max(self.buf_seq))
    }

    fn has_unsent(&self) -> bool {
        self.unsent_len() > 0 || (self.fin_queued && self.snd_max <= self.fin_seq())
    }

    /// Never-sent data or FIN, or sequence space to resend after a timeout.
    fn waiting_to_send(&self) -> bool {
        self.snd_nxt < self.snd_max || self.has_unsent()
    }

    fn transmission_of(&self, s: &Sent, retransmission: bool) -> Transmission {
        Transmission {
            offset: s.offset,
            len: s.len as usize,
            retransmission,
            retransmit_count: s.retransmits,
            syn: s.syn,
        }
    }

    fn can_send_data(&self) -> bool {
        matches!(
            self.state,
            State::Established
                | State::CloseWait
                | State::FinWait1
                | State::LastAck
                | State::Closing
        )
    }

    fn window_allows(&self, len: usize) -> bool {
        let flight = self.in_flight();
        if let Some(max) = self.cc.max_segments_in_flight() {
            if self.segments_in_flight() >= max {
                return false;
            }
        }
        let wnd = self.cc.window().min(self.snd_wnd);
        flight == 0 && (len <= wnd.max(1) || self.snd_wnd > 0) || flight + len <= wnd
    }

    /// Options for a segment we send now.
    // Inlined so the options are built in the caller's segment rather than
    // copied out of a return slot.
    #[inline(always)]
    fn options(&self, now: SimTime, syn: bool, pure_ack: bool) -> TcpOptions {
        let p = &self.config.profile;
        let mut o = TcpOptions::default();
        if syn {
            o.mss = Some(p.mss);
            let answering = self.state == State::SynReceived;
            if p.window_scale.is_some()
                && (!answering || self.peer_wscale > 0 || self.our_wscale > 0)
            {
                o.window_scale = Some(self.our_wscale);
            }
            o.sack_permitted = p.sack && (!answering || self.sack_enabled);
            if p.timestamps && (!answering || self.ts_enabled) {
                o.timestamps = Some(Timestamps {
                    tsval: Self::tsval(now),
                    tsecr: if answering { self.ts_recent } else { 0 },
                });
            }
            if p.timelost && (!answering || self.timelost_enabled) {
                o.timelost = Some(0);
            }
            return o;
        }
        if self.ts_enabled {
            o.timestamps = Some(Timestamps {
                tsval: Self::tsval(now),
                tsecr: self.ts_recent,
            });
        }
        if self.timelost_enabled {
            // Data carries 0; ACKs echo the last data segment's value.
            o.timelost = Some(if pure_ack { self.timelost_echo } else { 0 });
        }
        // Without a duplicate or a hole to report there are no SACK blocks.
        if self.sack_enabled && (self.dsack.is_some() || !self.ooo.is_empty()) {
            let max_blocks = if self.ts_enabled { 3 } else { 4 };
            o.sack_blocks = self.sack_blocks(max_blocks);
            if self.timelost_enabled && o.sack_block_count() > 2 {
                o.sack_blocks[2] = None;
            }
        }
        o
    }

    fn advertised_window(&self) -> u16 {
        if self.frozen {
            return 0;
        }
        (self.recv_window() >> self.our_wscale).min(usize::from(u16::MAX)) as u16
    }

    fn send_at_snd_nxt(&mut self, now: SimTime, buf: &mut Vec<u8>) -> Option<usize> {
        // Resend segments after a timeout (go-back), skipping SACKed ones.
        while self.snd_nxt < self.snd_max {
            let index = self.sent.iter().position(|s| s.seq == self.snd_nxt)?;
            let s = self.sent[index];
            if s.sacked {
                self.snd_nxt = s.end();
                continue;
            }
            if !self.window_allows(s.len as usize) {
                if self.needs_persist() && self.timers.get(TimerKind::Persist).is_none() {
                    self.arm_persist(now);
                }
                return None;
            }
            return self.transmit_entry(now, buf, index, Some(RetransmitCause::Timeout));
        }
        self.send_new(now, buf)
    }

    fn send_new(&mut self, now: SimTime, buf: &mut Vec<u8>) -> Option<usize> {
        let syn_pending =
            matches!(self.state, State::SynSent | State::SynReceived) && self.snd_max == self.iss;
        let (syn, data_len, fin) = if syn_pending {
            (true, 0, false)
        } else if self.can_send_data() {
            let unsent = self.unsent_len();
            let fin_pending = self.fin_queued && self.snd_max <= self.fin_seq();
            if unsent == 0 && !fin_pending {
                return None;
            }
            let flight = self.in_flight();
            let cwnd = self.cc.window() + self.limited_transmit;
            let wnd = cwnd.min(self.snd_wnd);
            // The flight leaves out SACKed bytes, which still occupy the
            // receiver's window: new data must also stay below its right
            // edge, SND.UNA + SND.WND (RFC 9293 §3.8.6.2.1).
            let edge = (self.snd_una + self.snd_wnd) - self.snd_max;
            let usable = wnd
                .saturating_sub(flight)
                .min(usize::try_from(edge.max(0)).unwrap_or(usize::MAX));
            // The segment size matters only if some data may go now;
            // otherwise any positive value gives the same decisions below.
            let max_payload = if unsent > 0 && usable > 0 {
                let header_opts = self.options(now, false, false).buffer_len();
                self.send_mss.saturating_sub(header_opts).max(1)
            } else {
                1
            };
            let mut len = unsent.min(max_payload);
            if len > usable {
                if flight == 0 && self.snd_wnd == 0 {
                    // Zero window: the persist timer probes.
                    len = 0;
                    if self.timers.get(TimerKind::Persist).is_none() {
                        self.arm_persist(now);
                    }
                } else {
                    len = usable;
                }
            }
            if let Some(max) = self.cc.max_segments_in_flight() {
                if self.segments_in_flight() >= max {
                    return None;
                }
            }
            if len == 0 && unsent > 0 {
                return None;
            }
            if len > 0 && len < max_payload && len < unsent {
                // RFC 9293 §3.8.6.2.1 sender SWS avoidance: a partial
                // segment only if it is at least half the peer's window, or
                // if nothing is in flight (no ACK would come to open it).
                if len < self.max_snd_wnd / 2 && flight > 0 {
                    return None;
                }
            }
            if len > 0
                && len < max_payload
                && len == unsent
                && self.config.profile.nagle
                && flight > 0
                && !fin_pending
            {
                // RFC 9293 §3.7.4 Nagle: hold small data while unacked data
                // is outstanding.
                return None;
            }
            let fin = fin_pending && len == unsent;
            (false, len, fin)
        } else {
            return None;
        };
        let seq = self.snd_max;
        let entry = Sent {
            seq,
            len: (data_len + usize::from(syn) + usize::from(fin)) as u32,
            syn,
            fin,
            first_sent: now,
            last_sent: now,
            retransmits: 0,
            sacked: false,
            recovery_rexmit: false,
            offset: self.offset_of(seq),
        };
        if entry.len == 0 {
            return None;
        }
        self.unsacked_bytes += entry.len as usize;
        self.sent.push_back(entry);
        let index = self.sent.len() - 1;
        self.transmit_entry(now, buf, index, None)
    }

    fn sack_recovery_send(&mut self, now: SimTime, buf: &mut Vec<u8>) -> Option<usize> {
        // RFC 6675 §5: during recovery, send while cwnd - pipe >= 1 SMSS,
        // choosing with NextSeg(); cwnd here is ssthresh (no inflation).
        let pipe = self.pipe();
        let cwnd = self.cc.metrics().ssthresh.min(self.cc.window());
        if pipe + self.send_mss > cwnd.max(self.send_mss) {
            return None;
        }
        let highest_sacked = self.sent.iter().rev().find(|s| s.sacked).map(|s| s.end());
        // Rule 1: lost, unSACKed, not yet retransmitted in this recovery.
        let mut sacked_above = 0usize;
        let mut lost: Option<usize> = None;
        for (i, s) in self.sent.iter().enumerate().rev() {
            if s.sacked {
                sacked_above += s.len as usize;
            } else if !s.recovery_rexmit && sacked_above >= 3 * self.send_mss {
                lost = Some(i);
            }
        }
        if let Some(i) = lost {
            self.sent[i].recovery_rexmit = true;
            self.stats.fast_retransmits += 1;
            return self.transmit_entry(now, buf, i, Some(RetransmitCause::FastRetransmit));
        }
        // Rule 2: new data.
        if self.snd_nxt == self.snd_max {
            if let Some(len) = self.send_new(now, buf) {
                return Some(len);
            }
        }
        // Rule 3: unSACKed data below the highest SACKed byte.
        if let Some(high) = highest_sacked {
            if let Some(i) = self
                .sent
                .iter()
                .position(|s| !s.sacked && !s.recovery_rexmit && s.end() <= high)
            {
                self.sent[i].recovery_rexmit = true;
                self.stats.fast_retransmits += 1;
                return self.transmit_entry(now, buf, i, Some(RetransmitCause::FastRetransmit));
            }
        }
        // Rule 4, the rescue: once per recovery, resend the segment holding
        // the highest unSACKed sequence number, so a lost tail is repaired
        // without waiting for the retransmission timer. It does not count
        // as a retransmission for rules 1 and 3 or for `pipe` (HighRxt is
        // not updated).
        if !self.rescue_sent {
            let tail = self
                .sent
                .iter()
                .rposition(|s| !s.sacked && s.seq < self.snd_max);
            if let Some(i) = tail.filter(|&i| !self.sent[i].recovery_rexmit) {
                self.rescue_sent = true;
                self.stats.fast_retransmits += 1;
                return self.transmit_entry(now, buf, i, Some(RetransmitCause::FastRetransmit));
            }
        }
        None
    }

    /// RFC 6675 `pipe`: segments not SACKed and not deemed lost, plus the
    /// retransmitted ones.
    fn pipe(&self) -> usize {
        let mut sacked_above = 0usize;
        let mut pipe = 0usize;
        for s in self.sent.iter().rev() {
            if s.sacked {
                sacked_above += s.len as usize;
                continue;
            }
            let lost = sacked_above >= 3 * self.send_mss;
            if !lost {
                pipe += s.len as usize;
            }
            if s.recovery_rexmit {
                pipe += s.len as usize;
            }
        }
        pipe
    }

    fn transmit_entry(
        &mut self,
        now: SimTime,
        buf: &mut Vec<u8>,
        index: usize,
        cause: Option<RetransmitCause>,
    ) -> Option<usize> {
        let s = self.sent[index];
        let mut flags = TcpFlags::default();
        if s.syn {
            flags.insert(TcpFlags::SYN);
        }
        if s.fin {
            flags.insert(TcpFlags::FIN);
        }
        if self.state != State::SynSent {
            flags.insert(TcpFlags::ACK);
        }
        let data_start = dist(s.seq + usize::from(s.syn), self.buf_seq);
        let data_len = s.data_len();
        let options = self.options(now, s.syn, false);
        let data_end = data_start + data_len;
        if data_len > 0 && data_end == self.send_buf.len() {
            flags.insert(TcpFlags::PSH);
        }
        // The payload is read in place where the send buffer holds it in
        // one piece; only one that spans pieces is gathered into a reused
        // scratch buffer.
        let window = if s.syn {
            self.recv_window().min(usize::from(u16::MAX)) as u16
        } else {
            self.advertised_window()
        };
        let slice = self.send_buf.range(data_start, data_end, &mut self.scratch);
        let repr = TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq: s.seq,
            ack: if flags.contains(TcpFlags::ACK) {
                self.rcv_nxt
            } else {
                SeqNumber(0)
            },
            flags,
            window,
            urgent: 0,
            options,
            payload: slice,
        };
        let emitted = emit_datagram(
            buf,
            &mut self.ip_ident,
            &mut self.stats,
            (self.local, self.remote, self.config.profile.ttl),
            &repr,
        );
        let ack_out = AckOut::of(&repr);
        let len = emitted?;
        // Book-keeping after a successful emit.
        let is_retransmission = cause.is_some();
        let entry = &mut self.sent[index];
        if is_retransmission {
            entry.retransmits += 1;
        }
        entry.last_sent = now;
        let tx = self.transmission_of(&self.sent[index], is_retransmission);
        if let Some(cause) = cause {
            self.stats.retransmissions += 1;
            self.trace(
                now,
                TraceEvent::Retransmission {
                    seq: s.seq.0,
                    len: s.len as usize,
                    cause,
                },
            );
            self.recent_retransmits.push_back((s.seq, s.end()));
            if self.recent_retransmits.len() > 16 {
                self.recent_retransmits.pop_front();
            }
        }
        self.rto.on_transmit(now, &tx);
        // Fast retransmissions leave SND.NXT alone; go-back resends and new
        // data advance it.
        if (cause.is_none() || cause == Some(RetransmitCause::Timeout)) && self.snd_nxt < s.end() {
            self.snd_nxt = s.end();
        }
        if self.snd_max < s.end() {
            self.snd_max = s.end();
        }
        if self.timers.get(TimerKind::Retransmit).is_none() {
            // RFC 6298 (5.1).
            self.arm_retransmit(now);
        }
        if flags.contains(TcpFlags::ACK) {
            self.ack_sent(now, ack_out);
        }
        Some(len)
    }

    fn emit_control(
        &mut self,
        now: SimTime,
        buf: &mut Vec<u8>,
        seq: SeqNumber,
        probe: Option<RetransmitCause>,
    ) -> Option<usize> {
        let options = self.options(now, false, true);
        let repr = TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq,
            ack: self.rcv_nxt,
            flags: TcpFlags::ACK,
            window: self.advertised_window(),
            urgent: 0,
            options,
            payload: &[],
        };
        let len = self.emit(buf, &repr)?;
        if let Some(cause) = probe {
            self.trace(
                now,
                TraceEvent::Retransmission {
                    seq: seq.0,
                    len: 0,
                    cause,
                },
            );
        } else {
            let key = (repr.seq, repr.ack, repr.window);
            if self.last_ack_sent == Some(key) {
                self.dup_acks_sent += 1;
                self.stats.dup_acks_sent += 1;
                self.trace(
                    now,
                    TraceEvent::DupAckSent {
                        ack: repr.ack.0,
                        count: self.dup_acks_sent,
                    },
                );
            }
            if self.ack_delayed_fired {
                self.trace(now, TraceEvent::DelayedAckFired);
            }
        }
        self.ack_sent(now, AckOut::of(&repr));
        Some(len)
    }

    fn ack_sent(&mut self, now: SimTime, repr: AckOut) {
        let key = (repr.seq, repr.ack, repr.window);
        if self.last_ack_sent.map_or(true, |(_, a, _)| a != repr.ack) {
            self.dup_acks_sent = 0;
        }
        if repr.segment_len > 0 {
            // Only bare ACKs count towards duplicate detection.
            self.last_ack_sent = Some((
                SeqNumber(repr.seq.0.wrapping_add(repr.segment_len as u32)),
                repr.ack,
                repr.window,
            ));
        } else {
            self.last_ack_sent = Some(key);
        }
        self.ack_now = false;
        self.ack_delayed_fired = false;
        self.dsack = None;
        self.last_adv_window = self.recv_window();
        self.last_adv_right_edge = self.rcv_nxt + self.last_adv_window;
        self.timers.stop(TimerKind::DelayedAck);
        self.ack_policy.on_ack_sent(now);
    }

    fn emit(&mut self, buf: &mut Vec<u8>, repr: &TcpRepr) -> Option<usize> {
        let path = (self.local, self.remote, self.config.profile.ttl);
        emit_datagram(buf, &mut self.ip_ident, &mut self.stats, path, repr)
    }
}

/// Writes `repr` into `buf` as an IPv4 or IPv6 datagram of `path` (local
/// and remote address, TTL or hop limit), an IPv4 one with the next IP
/// ident; counts it as sent. A free function so the payload may borrow the
/// connection's send buffer.
fn emit_datagram(
    buf: &mut Vec<u8>,
    ip_ident: &mut u16,
    stats: &mut ConnectionStats,
    path: (SocketAddr, SocketAddr, u8),
    repr: &TcpRepr,
) -> Option<usize> {
    let (local, remote, ttl) = path;
    // Our own options always fit (at most 40 bytes by construction), so
    // an error here is a bug; it is reported by sending nothing.
    let len = match (local.ip(), remote.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            *ip_ident = ip_ident.wrapping_add(1);
            let ip = Ipv4Repr {
                src,
                dst,
                protocol: protocol::TCP,
                ttl,
                ident: *ip_ident,
                dont_fragment: true,
                tos: 0,
                payload_len: repr.buffer_len(),
            };
            emit_tcp(buf, &ip, repr).ok()?
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let ip = Ipv6Repr {
                src,
                dst,
                next_header: ipv6::next_header::TCP,
                hop_limit: ttl,
                traffic_class: 0,
                flow_label: 0,
                payload_len: repr.buffer_len(),
            };
            ipv6::emit_tcp(buf, &ip, repr).ok()?
        }
        // No datagram joins two families.
        _ => return None,
    };
    stats.segments_sent += 1;
    Some(len)
}

/// What the ACK bookkeeping needs of a segment that carried an ACK.
#[derive(Clone, Copy, Debug)]
struct AckOut {
    seq: SeqNumber,
    ack: SeqNumber,
    window: u16,
    /// Sequence space it occupies (payload, SYN, FIN).
    segment_len: usize,
}

impl AckOut {
    fn of(repr: &TcpRepr) -> AckOut {
        AckOut {
            seq: repr.seq,
            ack: repr.ack,
            window: repr.window,
            segment_len: repr.segment_len(),
        }
    }
}

/// The RST answering `tcp` when no connection accepts it (RFC 9293
/// §3.10.7.1); with `with_ack`, a segment carrying an ACK is also
/// acknowledged, as lwIP's `tcp_rst` does.
fn reset_for(tcp: &TcpRepr, with_ack: bool) -> Reset {
    let seg_end = tcp.seq + tcp.segment_len();
    if tcp.flags.contains(TcpFlags::ACK) {
        Reset {
            seq: tcp.ack,
            ack: with_ack.then_some(seg_end),
        }
    } else {
        Reset {
            seq: SeqNumber(0),
            ack: Some(seg_end),
        }
    }
}

/// Builds the RST answering `tcp` for a host with no matching connection
/// (RFC 9293 §3.10.7.1, or lwIP's RST+ACK with `with_ack`: see
/// [`crate::Profile::reset_with_ack`]); `None` if `tcp` is itself a RST.
pub fn reset_reply<'a>(tcp: &TcpRepr, with_ack: bool) -> Option<TcpRepr<'a>> {
    if tcp.flags.contains(TcpFlags::RST) {
        return None;
    }
    let r = reset_for(tcp, with_ack);
    let mut flags = TcpFlags::RST;
    if r.ack.is_some() {
        flags.insert(TcpFlags::ACK);
    }
    Some(TcpRepr {
        src_port: tcp.dst_port,
        dst_port: tcp.src_port,
        seq: r.seq,
        ack: r.ack.unwrap_or_default(),
        flags,
        window: 0,
        urgent: 0,
        options: TcpOptions::default(),
        payload: &[],
    })
}

#[cfg(test)]
mod tests;
