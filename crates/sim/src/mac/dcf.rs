//! The IEEE 802.11 distributed coordination function (DCF) of one station,
//! with the 802.11b DSSS PHY's timing (IEEE 802.11-2016 §10.3, §16).
//!
//! A sans-IO state machine like the other MACs: it is told the time with
//! every input and never reads a clock; its random draws come from the
//! stream the caller passes.
//!
//! * Inputs: [`Dcf::enqueue`] (a packet to send), [`Dcf::set_channel_busy`]
//!   (physical carrier sense changed), [`Dcf::handle_frame`] (a frame
//!   ended at this station's radio, intact or not),
//!   [`Dcf::handle_tx_end`] (this station's frame left the antenna) and
//!   [`Dcf::handle_timeout`] at the instant [`Dcf::poll_timeout`] gave.
//! * Outputs: [`Dcf::poll_transmit`] (a frame to put on air now, with its
//!   airtime) and [`Dcf::poll_event`] (acknowledged, dropped and received
//!   packets, attempts).
//!
//! What it does, with the standard's names:
//!
//! * carrier sense: physical (from the radio) and virtual (the NAV, set
//!   from the Duration field of frames addressed to others); the medium is
//!   idle when neither is busy and the station is not itself sending or
//!   waiting for a response;
//! * access: a packet that finds the medium idle for DIFS and no backoff
//!   pending is sent at once; otherwise a backoff of `U{0..=CW}` slots
//!   counts down while the medium is idle, starting DIFS (EIFS after a
//!   frame received in error) after it became idle, frozen while busy;
//!   after every exchange (success or drop) a new backoff is drawn (the
//!   post-backoff), so a saturated station always backs off;
//! * CW from `cw_min` to `cw_max`, `CW ← 2(CW + 1) - 1` per failed attempt,
//!   back to `cw_min` after a success or a drop;
//! * acknowledgement: the receiver answers an intact data frame addressed
//!   to it with an ACK SIFS after its end, whatever the medium; the sender
//!   counts the attempt failed if no ACK has ended by `SIFS + slot + ACK
//!   airtime` after its frame ended (ACKTimeout);
//! * RTS/CTS for MPDUs longer than `rts_threshold` bytes, with the NAV;
//! * retry limits: a frame is sent at most `short_retry_limit` times
//!   (MPDUs up to the RTS threshold, and RTS frames) or `long_retry_limit`
//!   times (longer MPDUs), then dropped;
//! * duplicates: the receiver remembers the last sequence number per
//!   sender and acknowledges but does not pass up a retried frame it has
//!   already received.
//!
//! Not modelled: fragmentation, power save, rate adaptation (a fixed data
//! rate and a basic rate for control frames), beacons and association
//! (the BSS is set up from the scenario), the TXOP and QoS of 802.11e.

use std::collections::{BTreeMap, VecDeque};

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};

use crate::event::earliest;
use crate::rng::SimRng;

/// The DSSS long PLCP preamble (144 bits) and header (48 bits), both at
/// 1 Mbit/s (§16.2.2).
pub const LONG_PLCP: SimDuration = SimDuration::from_micros(192);

/// Bytes of a data frame's MAC header (frame control, duration, three
/// addresses, sequence control) and FCS, plus the LLC/SNAP header of an
/// IP payload (RFC 1042).
pub const DATA_OVERHEAD: u32 = 24 + 4 + 8;
/// Bytes of an ACK and of a CTS frame (frame control, duration, RA, FCS).
pub const ACK_LEN: u32 = 14;
/// Bytes of an RTS frame (frame control, duration, RA, TA, FCS).
pub const RTS_LEN: u32 = 20;

/// The rates of the 802.11b DSSS/HR-DSSS PHY.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PhyRate {
    /// 1 Mbit/s (DBPSK).
    Mbps1,
    /// 2 Mbit/s (DQPSK).
    Mbps2,
    /// 5.5 Mbit/s (CCK).
    Mbps5_5,
    /// 11 Mbit/s (CCK).
    Mbps11,
}

impl PhyRate {
    /// Every rate, slowest first.
    pub const ALL: [PhyRate; 4] = [
        PhyRate::Mbps1,
        PhyRate::Mbps2,
        PhyRate::Mbps5_5,
        PhyRate::Mbps11,
    ];

    /// Bits per second.
    pub fn bps(self) -> u64 {
        match self {
            PhyRate::Mbps1 => 1_000_000,
            PhyRate::Mbps2 => 2_000_000,
            PhyRate::Mbps5_5 => 5_500_000,
            PhyRate::Mbps11 => 11_000_000,
        }
    }

    /// The rate of `bps` bits per second, if it is one of the PHY's.
    pub fn from_bps(bps: u64) -> Option<PhyRate> {
        PhyRate::ALL.into_iter().find(|r| r.bps() == bps)
    }

    /// The rate in units of 500 kbit/s, as radiotap's Rate field has it.
    pub fn radiotap_units(self) -> u8 {
        (self.bps() / 500_000) as u8
    }

    /// Time on air of an MPDU of `bytes` bytes: the long PLCP preamble and
    /// header, then the MPDU at this rate, rounded up to a whole
    /// microsecond as the PLCP LENGTH field counts it (§16.3.3.6).
    pub fn airtime(self, bytes: u32) -> SimDuration {
        let bits = u64::from(bytes) * 8;
        let micros = (bits * 1_000_000).div_ceil(self.bps());
        LONG_PLCP + SimDuration::from_micros(micros)
    }
}

/// Parameters of a DCF station.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcfSpec {
    /// aSlotTime (802.11b: 20 µs).
    pub slot: SimDuration,
    /// aSIFSTime (802.11b: 10 µs).
    pub sifs: SimDuration,
    /// aCWmin (802.11b: 31).
    pub cw_min: u32,
    /// aCWmax (802.11b: 1023).
    pub cw_max: u32,
    /// dot11ShortRetryLimit: attempts of a frame up to the RTS threshold
    /// (and of an RTS).
    pub short_retry_limit: u32,
    /// dot11LongRetryLimit: attempts of a longer frame.
    pub long_retry_limit: u32,
    /// dot11RTSThreshold: MPDUs longer than this many bytes are preceded
    /// by RTS/CTS (the default, 2347, means never).
    pub rts_threshold: u32,
    /// Rate of data frames.
    pub data_rate: PhyRate,
    /// Rate of control frames (ACK, RTS, CTS).
    pub basic_rate: PhyRate,
    /// Packets that may wait, besides the one being sent.
    pub queue_limit: usize,
    /// Whether a station answers an RTS addressed to it while its own
    /// exchange waits for a CTS or an ACK, while it sends or is about to
    /// respond, or after its CTS until the data frame it cleared would have
    /// ended. The standard has it answer (a frame other than the awaited
    /// response ends the wait, §10.3.2.7); ns-2.35's `recvRTS` discards
    /// the RTS whenever `tx_state_` is not idle, `MAC_CTS` included.
    pub answer_rts_when_busy: bool,
}

impl Default for DcfSpec {
    fn default() -> Self {
        DcfSpec {
            slot: SimDuration::from_micros(20),
            sifs: SimDuration::from_micros(10),
            cw_min: 31,
            cw_max: 1023,
            short_retry_limit: 7,
            long_retry_limit: 4,
            rts_threshold: 2347,
            data_rate: PhyRate::Mbps11,
            basic_rate: PhyRate::Mbps1,
            queue_limit: 50,
            answer_rts_when_busy: true,
        }
    }
}

impl DcfSpec {
    /// ns-2.35's `Mac/802_11` with its defaults (`tcl/lib/ns-default.tcl`,
    /// `ns-mac.tcl`), the timelost study's MAC: data and control frames
    /// at 1 Mbit/s, RTS/CTS before every unicast frame
    /// (`RTSThreshold_ 0`), the rest as 802.11b (20 µs slots, 10 µs SIFS,
    /// the long PLCP preamble, CW 31..1023, retry limits 7 and 4, an
    /// interface queue of 50 packets), and an RTS left unanswered by a
    /// station busy with its own exchange (`recvRTS`).
    pub fn ns2() -> DcfSpec {
        DcfSpec {
            data_rate: PhyRate::Mbps1,
            basic_rate: PhyRate::Mbps1,
            rts_threshold: 0,
            answer_rts_when_busy: false,
            ..DcfSpec::default()
        }
    }

    /// DIFS = SIFS + 2 slots.
    pub fn difs(&self) -> SimDuration {
        self.sifs + self.slot.saturating_mul(2)
    }

    /// Airtime of an ACK (and of a CTS) at the basic rate.
    pub fn ack_airtime(&self) -> SimDuration {
        self.basic_rate.airtime(ACK_LEN)
    }

    /// EIFS = SIFS + DIFS + the airtime of an ACK at the lowest rate.
    pub fn eifs(&self) -> SimDuration {
        self.sifs + self.difs() + PhyRate::Mbps1.airtime(ACK_LEN)
    }

    /// How long after its frame ended a sender waits for the response to
    /// start and end: SIFS + a slot + the response's airtime.
    pub fn response_timeout(&self) -> SimDuration {
        self.sifs + self.slot + self.ack_airtime()
    }

    /// Airtime of a data frame carrying an `msdu_len`-byte payload.
    pub fn data_airtime(&self, msdu_len: u32) -> SimDuration {
        self.data_rate.airtime(msdu_len + DATA_OVERHEAD)
    }

    /// Whether a payload of `msdu_len` bytes goes with RTS/CTS.
    pub fn uses_rts(&self, msdu_len: u32) -> bool {
        msdu_len + DATA_OVERHEAD > self.rts_threshold
    }
}

/// A station's MAC address on the BSS (its index).
pub type StationId = u16;

/// The kinds of frame the DCF sends: the frames its captures are written as.
pub use rtolab_wire::ieee80211::FrameKind;

/// A frame on air between DCF stations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcfFrame<P> {
    /// What it is.
    pub kind: FrameKind,
    /// Transmitter.
    pub src: StationId,
    /// Receiver.
    pub dst: StationId,
    /// The Duration field: how long after its end the medium stays
    /// reserved (sets the NAV of the others).
    pub duration: SimDuration,
    /// Sequence number (data frames), modulo 4096.
    pub seq: u16,
    /// The Retry bit of frame control.
    pub retry: bool,
    /// MPDU bytes.
    pub len: u32,
    /// Its rate.
    pub rate: PhyRate,
    /// The packet of a data frame.
    pub payload: Option<P>,
}

/// A frame to put on air now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRequest<P> {
    /// The frame.
    pub frame: DcfFrame<P>,
    /// Its time on air.
    pub airtime: SimDuration,
    /// For a data frame: the time since its first attempt, the first RTS
    /// when RTS/CTS precedes it (zero on a first attempt without RTS),
    /// which the timelost option accounts.
    pub since_first_attempt: SimDuration,
}

/// What a station reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DcfEvent<P> {
    /// A data frame carrying `payload` went on air, attempt `attempt`
    /// (1 for the first).
    Attempt {
        /// The packet.
        payload: P,
        /// Attempt number.
        attempt: u32,
    },
    /// The packet was acknowledged after `retries` retransmissions.
    Acked {
        /// The packet.
        payload: P,
        /// Attempts beyond the first.
        retries: u32,
    },
    /// The packet was dropped after its last allowed attempt failed.
    RetryLimit {
        /// The packet.
        payload: P,
        /// Attempts beyond the first.
        retries: u32,
    },
    /// The queue was full: the packet was not accepted.
    QueueFull {
        /// The packet.
        payload: P,
    },
    /// A packet from `src` arrived intact (not a duplicate).
    Received {
        /// The sender.
        src: StationId,
        /// The packet.
        payload: P,
    },
}

/// Counters of one station.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DcfStats {
    /// Packets accepted into the queue.
    pub enqueued: u64,
    /// Packets refused because the queue was full.
    pub dropped_queue_full: u64,
    /// Data frames sent, retries included.
    pub data_attempts: u64,
    /// Data frames sent with the Retry bit.
    pub retries: u64,
    /// RTS frames sent.
    pub rts_sent: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Packets dropped at the retry limit.
    pub dropped_retry_limit: u64,
    /// Attempts whose response (ACK or CTS) did not come.
    pub response_timeouts: u64,
    /// Data frames received intact and passed up.
    pub received: u64,
    /// Retried data frames received again and not passed up.
    pub duplicates: u64,
    /// Frames received in error (collisions).
    pub rx_errors: u64,
    /// ACK frames sent.
    pub acks_sent: u64,
    /// CTS frames sent.
    pub cts_sent: u64,
}

#[derive(Clone, Debug)]
struct Msdu<P> {
    payload: P,
    dst: StationId,
    len: u32,
}

/// The packet being sent and its attempts so far.
#[derive(Clone, Debug)]
struct Current<P> {
    msdu: Msdu<P>,
    seq: u16,
    short_count: u32,
    long_count: u32,
    attempts: u32,
    first_attempt: Option<SimTime>,
}

/// What the station is doing in an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Contending, or nothing to do.
    Idle,
    /// Sending its data frame.
    SendingData,
    /// Sending its RTS.
    SendingRts,
    /// Waiting for the ACK until the instant.
    AwaitAck(SimTime),
    /// Waiting for the CTS until the instant.
    AwaitCts(SimTime),
    /// CTS received: sends its data frame at the instant.
    DataAfterCts(SimTime),
}

/// The DCF of one station. See the [module documentation](self).
#[derive(Debug)]
pub struct Dcf<P> {
    spec: DcfSpec,
    addr: StationId,
    queue: VecDeque<Msdu<P>>,
    current: Option<Current<P>>,
    phase: Phase,
    /// After sending a CTS, until the data frame it cleared would have
    /// ended: ns-2's `MAC_CTS` state, in which it answers no RTS.
    cts_wait_until: Option<SimTime>,
    cw: u32,
    /// Backoff slots left, counted from the medium's idle start.
    backoff: Option<u64>,
    /// Physical carrier sense says busy.
    channel_busy: bool,
    /// The station's own radio is sending.
    transmitting: bool,
    /// When the medium (physical carrier sense, own sending, a response
    /// wait) last became idle.
    idle_since: SimTime,
    /// The NAV: the medium is reserved by others until then.
    nav_until: SimTime,
    /// The last frame heard was in error: wait EIFS, not DIFS.
    eifs: bool,
    /// An ACK or CTS to send at an instant.
    response: Option<(SimTime, DcfFrame<P>)>,
    next_seq: u16,
    /// The last sequence number received from each sender.
    last_seq: BTreeMap<StationId, u16>,
    transmit: VecDeque<TxRequest<P>>,
    events: VecDeque<DcfEvent<P>>,
    stats: DcfStats,
}

impl<P: Clone> Dcf<P> {
    /// A station with address `addr`, idle since time zero.
    pub fn new(spec: DcfSpec, addr: StationId) -> Self {
        Dcf {
            spec,
            addr,
            queue: VecDeque::new(),
            current: None,
            phase: Phase::Idle,
            cts_wait_until: None,
            cw: spec.cw_min,
            backoff: None,
            channel_busy: false,
            transmitting: false,
            idle_since: SimTime::ZERO,
            nav_until: SimTime::ZERO,
            eifs: false,
            response: None,
            next_seq: 0,
            last_seq: BTreeMap::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            stats: DcfStats::default(),
        }
    }

    /// Its parameters.
    pub fn spec(&self) -> &DcfSpec {
        &self.spec
    }

    /// Its address.
    pub fn addr(&self) -> StationId {
        self.addr
    }

    /// Its counters.
    pub fn stats(&self) -> DcfStats {
        self.stats
    }

    /// Packets waiting, the one being sent included.
    pub fn backlog(&self) -> usize {
        self.queue.len() + usize::from(self.current.is_some())
    }

    /// The current contention window.
    pub fn cw(&self) -> u32 {
        self.cw
    }

    /// Hands over a packet of `len` bytes (the IP datagram) for `dst`.
    pub fn enqueue(
        &mut self,
        now: SimTime,
        dst: StationId,
        payload: P,
        len: u32,
        rng: &mut SimRng,
    ) {
        if self.queue.len() >= self.spec.queue_limit {
            self.stats.dropped_queue_full += 1;
            self.events.push_back(DcfEvent::QueueFull { payload });
            return;
        }
        self.stats.enqueued += 1;
        self.queue.push_back(Msdu { payload, dst, len });
        self.next_packet(now, rng);
    }

    /// Physical carrier sense at `now`: `busy` when the radio hears the
    /// medium in use (the station's own frames aside).
    pub fn set_channel_busy(&mut self, now: SimTime, busy: bool) {
        if busy == self.channel_busy {
            return;
        }
        if busy {
            self.freeze(now);
            self.channel_busy = true;
        } else {
            self.channel_busy = false;
            self.idle_since = self.idle_since.max(now);
            self.try_access(now);
        }
    }

    /// A frame ended at this station's radio at `now`: `Some` when it
    /// arrived intact, `None` when it was received in error.
    pub fn handle_frame(&mut self, now: SimTime, frame: Option<DcfFrame<P>>, rng: &mut SimRng) {
        let Some(frame) = frame else {
            self.stats.rx_errors += 1;
            self.eifs = true;
            return;
        };
        self.eifs = false;
        if frame.dst != self.addr {
            // Virtual carrier sense: the exchange it belongs to goes on.
            let until = now + frame.duration;
            if until > self.nav_until {
                self.freeze(now);
                self.nav_until = until;
            }
            return;
        }
        match frame.kind {
            FrameKind::Data => {
                self.cts_wait_until = None;
                self.respond(now, FrameKind::Ack, frame.src, SimDuration::ZERO);
                let duplicate = frame.retry && self.last_seq.get(&frame.src) == Some(&frame.seq);
                self.last_seq.insert(frame.src, frame.seq);
                if duplicate {
                    self.stats.duplicates += 1;
                } else if let Some(payload) = frame.payload {
                    self.stats.received += 1;
                    self.events.push_back(DcfEvent::Received {
                        src: frame.src,
                        payload,
                    });
                }
            }
            FrameKind::Rts => {
                // A station whose NAV is set does not answer (§10.3.2.7),
                // nor, in ns-2, one busy with an exchange of its own.
                let busy = self.transmitting
                    || self.response.is_some()
                    || self.cts_wait_until.is_some_and(|until| now < until)
                    || matches!(
                        self.phase,
                        Phase::AwaitCts(_) | Phase::AwaitAck(_) | Phase::DataAfterCts(_)
                    );
                if now >= self.nav_until && (self.spec.answer_rts_when_busy || !busy) {
                    let cts = self.spec.ack_airtime();
                    let left = frame.duration.saturating_sub(self.spec.sifs + cts);
                    self.respond(now, FrameKind::Cts, frame.src, left);
                }
            }
            FrameKind::Ack => {
                if matches!(self.phase, Phase::AwaitAck(_)) {
                    self.succeed(now, rng);
                }
            }
            FrameKind::Cts => {
                if matches!(self.phase, Phase::AwaitCts(_)) {
                    self.phase = Phase::DataAfterCts(now + self.spec.sifs);
                }
            }
        }
    }

    /// The station's frame left its antenna at `now`.
    pub fn handle_tx_end(&mut self, now: SimTime) {
        self.transmitting = false;
        self.idle_since = self.idle_since.max(now);
        let timeout = now + self.spec.response_timeout();
        match self.phase {
            Phase::SendingData => self.phase = Phase::AwaitAck(timeout),
            Phase::SendingRts => self.phase = Phase::AwaitCts(timeout),
            _ => {}
        }
        self.try_access(now);
    }

    /// Handles what is due at or before `now`.
    pub fn handle_timeout(&mut self, now: SimTime, rng: &mut SimRng) {
        if self.response.as_ref().is_some_and(|(at, _)| *at <= now) {
            // A station cannot be sending SIFS after it received; were it
            // so, the response is lost rather than delayed.
            if let Some((_, frame)) = self.response.take().filter(|_| !self.transmitting) {
                self.send(now, frame, SimDuration::ZERO);
            }
        }
        match self.phase {
            Phase::AwaitAck(deadline) | Phase::AwaitCts(deadline) if deadline <= now => {
                self.stats.response_timeouts += 1;
                self.idle_since = self.idle_since.max(deadline);
                self.fail(now, rng);
            }
            Phase::DataAfterCts(at) if at <= now => self.send_data(now),
            _ => {}
        }
        self.try_access(now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let response = self.response.as_ref().map(|(at, _)| *at);
        let phase = match self.phase {
            Phase::AwaitAck(at) | Phase::AwaitCts(at) | Phase::DataAfterCts(at) => Some(at),
            _ => None,
        };
        let nav = self.nav_until;
        let access = self.access_at().map(|at| at.max(nav));
        earliest(earliest(response, phase), access)
    }

    /// The next frame to put on air now, if any.
    pub fn poll_transmit(&mut self) -> Option<TxRequest<P>> {
        self.transmit.pop_front()
    }

    /// Whether a frame waits for [`poll_transmit`](Self::poll_transmit).
    pub fn has_transmit(&self) -> bool {
        !self.transmit.is_empty()
    }

    /// The next thing to report, if any.
    pub fn poll_event(&mut self) -> Option<DcfEvent<P>> {
        self.events.pop_front()
    }

    /// Whether the medium counts as idle for contention now.
    fn medium_idle(&self, now: SimTime) -> bool {
        !self.channel_busy
            && !self.transmitting
            && self.response.is_none()
            && self.phase == Phase::Idle
            && now >= self.nav_until
    }

    /// When the backoff count (or immediate access) may start: DIFS (or
    /// EIFS) after the medium became idle, physically and virtually.
    fn access_start(&self) -> SimTime {
        let ifs = if self.eifs {
            self.spec.eifs()
        } else {
            self.spec.difs()
        };
        self.idle_since.max(self.nav_until) + ifs
    }

    /// When the pending backoff ends, or the waiting packet may go, while
    /// the medium stays idle.
    fn access_at(&self) -> Option<SimTime> {
        if self.channel_busy || self.transmitting || self.phase != Phase::Idle {
            return None;
        }
        if self.response.is_some() {
            return None;
        }
        let slots = match (self.backoff, self.current.is_some()) {
            (Some(slots), _) => slots,
            (None, true) => 0,
            (None, false) => return None,
        };
        Some(self.access_start() + self.spec.slot.saturating_mul(slots))
    }

    /// The medium turns busy at `now`: the backoff keeps the slots left.
    fn freeze(&mut self, now: SimTime) {
        if !self.medium_idle(now) {
            return;
        }
        let start = self.access_start();
        if let Some(slots) = self.backoff {
            if now > start {
                let elapsed = (now - start).as_nanos() / self.spec.slot.as_nanos();
                self.backoff = Some(slots.saturating_sub(elapsed));
            }
        }
    }

    /// Sends the waiting packet, or ends the post-backoff, when the
    /// medium has been idle long enough.
    fn try_access(&mut self, now: SimTime) {
        let Some(at) = self.access_at() else {
            return;
        };
        if at > now || now < self.nav_until {
            return;
        }
        self.backoff = None;
        if self.current.is_none() {
            return;
        }
        let uses_rts = self
            .current
            .as_ref()
            .is_some_and(|c| self.spec.uses_rts(c.msdu.len));
        if uses_rts {
            self.send_rts(now);
        } else {
            self.send_data(now);
        }
    }

    /// Takes the next packet from the queue when none is being sent; it
    /// backs off if the medium is busy when it arrives.
    fn next_packet(&mut self, now: SimTime, rng: &mut SimRng) {
        if self.current.is_some() {
            return;
        }
        let Some(msdu) = self.queue.pop_front() else {
            return;
        };
        let seq = self.next_seq;
        self.next_seq = (self.next_seq + 1) % 4096;
        self.current = Some(Current {
            msdu,
            seq,
            short_count: 0,
            long_count: 0,
            attempts: 0,
            first_attempt: None,
        });
        if self.backoff.is_none() && !self.medium_idle(now) {
            self.draw_backoff(rng);
        }
        self.try_access(now);
    }

    fn draw_backoff(&mut self, rng: &mut SimRng) {
        self.backoff = Some(rng.gen_range(0..=u64::from(self.cw)));
    }

    fn send(&mut self, now: SimTime, frame: DcfFrame<P>, since_first_attempt: SimDuration) {
        self.freeze(now);
        // EIFS protects the response to a frame this station could not
        // read; once it sends, that exchange is over.
        self.eifs = false;
        let airtime = frame.rate.airtime(frame.len);
        match frame.kind {
            FrameKind::Ack => self.stats.acks_sent += 1,
            FrameKind::Cts => {
                self.stats.cts_sent += 1;
                // The CTS's Duration covers SIFS, the data frame, SIFS and
                // the ACK (ns-2 waits out the data frame).
                let data_end = frame
                    .duration
                    .saturating_sub(self.spec.sifs + self.spec.ack_airtime());
                self.cts_wait_until = Some(now + airtime + data_end);
            }
            FrameKind::Rts => self.stats.rts_sent += 1,
            FrameKind::Data => {}
        }
        self.transmitting = true;
        self.transmit.push_back(TxRequest {
            frame,
            airtime,
            since_first_attempt,
        });
    }

    fn respond(&mut self, now: SimTime, kind: FrameKind, to: StationId, duration: SimDuration) {
        let frame = DcfFrame {
            kind,
            src: self.addr,
            dst: to,
            duration,
            seq: 0,
            retry: false,
            len: ACK_LEN,
            rate: self.spec.basic_rate,
            payload: None,
        };
        self.freeze(now);
        self.response = Some((now + self.spec.sifs, frame));
    }

    fn send_rts(&mut self, now: SimTime) {
        let Some(c) = self.current.as_mut() else {
            return;
        };
        // The packet's first attempt is its first RTS: time lost to RTS
        // frames that got no CTS is retransmission time too (ns-2 with the
        // study's per-frame timer counts it the same way).
        c.first_attempt.get_or_insert(now);
        let s = &self.spec;
        let duration = s.sifs.saturating_mul(3)
            + s.ack_airtime().saturating_mul(2)
            + s.data_airtime(c.msdu.len);
        let frame = DcfFrame {
            kind: FrameKind::Rts,
            src: self.addr,
            dst: c.msdu.dst,
            duration,
            seq: 0,
            retry: false,
            len: RTS_LEN,
            rate: s.basic_rate,
            payload: None,
        };
        self.phase = Phase::SendingRts;
        self.send(now, frame, SimDuration::ZERO);
    }

    fn send_data(&mut self, now: SimTime) {
        let Some(c) = self.current.as_mut() else {
            return;
        };
        let first = *c.first_attempt.get_or_insert(now);
        c.attempts += 1;
        let retry = c.attempts > 1;
        let frame = DcfFrame {
            kind: FrameKind::Data,
            src: self.addr,
            dst: c.msdu.dst,
            duration: self.spec.sifs + self.spec.ack_airtime(),
            seq: c.seq,
            retry,
            len: c.msdu.len + DATA_OVERHEAD,
            rate: self.spec.data_rate,
            payload: Some(c.msdu.payload.clone()),
        };
        self.stats.data_attempts += 1;
        if retry {
            self.stats.retries += 1;
        }
        self.events.push_back(DcfEvent::Attempt {
            payload: c.msdu.payload.clone(),
            attempt: c.attempts,
        });
        self.phase = Phase::SendingData;
        self.send(now, frame, now - first);
    }

    fn succeed(&mut self, now: SimTime, rng: &mut SimRng) {
        self.phase = Phase::Idle;
        if let Some(c) = self.current.take() {
            self.stats.acked += 1;
            self.events.push_back(DcfEvent::Acked {
                payload: c.msdu.payload,
                retries: c.attempts.saturating_sub(1),
            });
        }
        self.cw = self.spec.cw_min;
        self.draw_backoff(rng);
        self.next_packet(now, rng);
    }

    /// The response did not come: count the attempt against its retry
    /// limit, then retry with a doubled window or drop.
    fn fail(&mut self, now: SimTime, rng: &mut SimRng) {
        let was_rts = matches!(self.phase, Phase::AwaitCts(_));
        self.phase = Phase::Idle;
        let Some(c) = self.current.as_mut() else {
            return;
        };
        let long = !was_rts && self.spec.uses_rts(c.msdu.len);
        let (count, limit) = if long {
            c.long_count += 1;
            (c.long_count, self.spec.long_retry_limit)
        } else {
            c.short_count += 1;
            (c.short_count, self.spec.short_retry_limit)
        };
        if count >= limit {
            if let Some(c) = self.current.take() {
                self.stats.dropped_retry_limit += 1;
                self.events.push_back(DcfEvent::RetryLimit {
                    payload: c.msdu.payload,
                    retries: c.attempts.saturating_sub(1),
                });
            }
            self.cw = self.spec.cw_min;
            self.draw_backoff(rng);
            self.next_packet(now, rng);
            return;
        }
        self.cw = (2 * (self.cw + 1) - 1).min(self.spec.cw_max);
        self.draw_backoff(rng);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::component_stream;

    fn us(n: u64) -> SimTime {
        SimTime::from_micros(n)
    }

    fn data(src: StationId, dst: StationId, seq: u16, retry: bool, payload: u32) -> DcfFrame<u32> {
        DcfFrame {
            kind: FrameKind::Data,
            src,
            dst,
            duration: SimDuration::from_micros(314),
            seq,
            retry,
            len: 100 + DATA_OVERHEAD,
            rate: PhyRate::Mbps11,
            payload: Some(payload),
        }
    }

    /// Drives a lone station: handles its timeouts up to `until`,
    /// returning what it sent and when.
    fn drive(d: &mut Dcf<u32>, until: SimTime, rng: &mut SimRng) -> Vec<(SimTime, TxRequest<u32>)> {
        let mut sent = Vec::new();
        while let Some(t) = d.poll_timeout().filter(|&t| t <= until) {
            d.handle_timeout(t, rng);
            while let Some(r) = d.poll_transmit() {
                sent.push((t, r));
            }
            if d.transmitting {
                // The caller would end the frame after its airtime.
                let end = t + sent.last().map_or(SimDuration::ZERO, |s| s.1.airtime);
                d.handle_tx_end(end);
            }
        }
        sent
    }

    #[test]
    fn a_retried_frame_received_twice_is_acknowledged_twice_and_passed_up_once() {
        let mut rng = component_stream(1, "dcf");
        let mut d: Dcf<u32> = Dcf::new(DcfSpec::default(), 1);
        d.handle_frame(us(100), Some(data(0, 1, 9, false, 42)), &mut rng);
        let acks = drive(&mut d, us(200), &mut rng);
        assert_eq!(acks.len(), 1);
        assert_eq!(acks[0].0, us(110));
        assert_eq!(acks[0].1.frame.kind, FrameKind::Ack);
        assert_eq!(acks[0].1.frame.dst, 0);
        // The ACK was lost: the sender retries the same sequence number.
        d.handle_frame(us(2000), Some(data(0, 1, 9, true, 42)), &mut rng);
        assert_eq!(drive(&mut d, us(3000), &mut rng).len(), 1);
        // A new frame with the next number, and one from another sender
        // with the same number, are both new.
        d.handle_frame(us(4000), Some(data(0, 1, 10, false, 43)), &mut rng);
        d.handle_frame(us(6000), Some(data(2, 1, 10, true, 44)), &mut rng);
        let mut passed = Vec::new();
        while let Some(e) = d.poll_event() {
            if let DcfEvent::Received { payload, .. } = e {
                passed.push(payload);
            }
        }
        assert_eq!(passed, [42, 43, 44]);
        assert_eq!(d.stats().duplicates, 1);
        assert_eq!(d.stats().acks_sent, 2);
    }

    /// A station whose packet found the medium busy, with its backoff
    /// drawn: returns it and the slots drawn.
    fn backed_off(seed: u64) -> (Dcf<u32>, SimRng, u64) {
        let mut rng = component_stream(seed, "dcf");
        let mut d: Dcf<u32> = Dcf::new(DcfSpec::default(), 0);
        d.set_channel_busy(us(0), true);
        d.enqueue(us(0), 1, 5, 100, &mut rng);
        assert_eq!(d.poll_timeout(), None, "busy: no access");
        d.set_channel_busy(us(1000), false);
        let at = d.poll_timeout().unwrap();
        let slots = (at - us(1050)).as_nanos() / 20_000;
        assert_eq!(at, us(1050 + 20 * slots));
        (d, rng, slots)
    }

    #[test]
    fn the_backoff_freezes_while_the_medium_is_busy_and_resumes_after_difs() {
        let (mut d, mut rng, slots) = (1..)
            .map(backed_off)
            .find(|(_, _, slots)| *slots >= 4)
            .unwrap();
        // Busy 3 slots and 7 µs into the count: 3 slots are spent.
        d.set_channel_busy(us(1050 + 67), true);
        assert_eq!(d.poll_timeout(), None);
        d.set_channel_busy(us(5000), false);
        assert_eq!(d.poll_timeout(), Some(us(5050 + 20 * (slots - 3))));
        // Busy again during DIFS: no slot spent.
        d.set_channel_busy(us(5030), true);
        d.set_channel_busy(us(6000), false);
        let at = us(6050 + 20 * (slots - 3));
        assert_eq!(d.poll_timeout(), Some(at));
        let sent = drive(&mut d, at, &mut rng);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, at);
    }

    #[test]
    fn with_rts_cts_the_lost_time_counts_from_the_first_rts() {
        let mut rng = component_stream(1, "dcf");
        let mut d: Dcf<u32> = Dcf::new(DcfSpec::ns2(), 0);
        d.enqueue(us(0), 1, 5, 100, &mut rng);
        // Two RTS frames go unanswered... (the second's CTS comes below)
        let mut rts = Vec::new();
        while rts.len() < 2 {
            let t = d.poll_timeout().unwrap();
            d.handle_timeout(t, &mut rng);
            while let Some(r) = d.poll_transmit() {
                assert_eq!(r.frame.kind, FrameKind::Rts);
                assert_eq!(r.since_first_attempt, SimDuration::ZERO);
                rts.push(t);
                d.handle_tx_end(t + r.airtime);
            }
        }
        assert_eq!(rts[0], us(50), "DIFS after an idle medium");
        // ...the second is answered SIFS after it ended (RTS 352 µs at
        // 1 Mbit/s, CTS 304 µs).
        let cts_end = rts[1] + SimDuration::from_micros(352 + 10 + 304);
        let cts = DcfFrame {
            kind: FrameKind::Cts,
            src: 1,
            dst: 0,
            duration: SimDuration::from_micros(2000),
            seq: 0,
            retry: false,
            len: ACK_LEN,
            rate: PhyRate::Mbps1,
            payload: None,
        };
        d.handle_frame(cts_end, Some(cts), &mut rng);
        let t = d.poll_timeout().unwrap();
        assert_eq!(t, cts_end + SimDuration::from_micros(10));
        d.handle_timeout(t, &mut rng);
        let data = d.poll_transmit().unwrap();
        assert_eq!(data.frame.kind, FrameKind::Data);
        assert!(!data.frame.retry, "the data frame's own first attempt");
        // What the option accounts: from the first RTS, not from this frame.
        assert_eq!(data.since_first_attempt, t - rts[0]);
    }

    /// A station that sent its RTS to station 1 and waits for the CTS, and
    /// station 1's own RTS arriving for it then.
    fn rts_while_awaiting_cts(spec: DcfSpec) -> Option<FrameKind> {
        let mut rng = component_stream(1, "dcf");
        let mut d: Dcf<u32> = Dcf::new(spec, 0);
        d.enqueue(us(0), 1, 5, 100, &mut rng);
        let t = d.poll_timeout().unwrap();
        d.handle_timeout(t, &mut rng);
        let r = d.poll_transmit().unwrap();
        assert_eq!(r.frame.kind, FrameKind::Rts);
        let end = t + r.airtime;
        d.handle_tx_end(end);
        let rts = DcfFrame {
            kind: FrameKind::Rts,
            src: 1,
            dst: 0,
            duration: SimDuration::from_micros(3000),
            seq: 0,
            retry: false,
            len: 20,
            rate: PhyRate::Mbps1,
            payload: None,
        };
        let at = end + SimDuration::from_micros(5);
        d.handle_frame(at, Some(rts), &mut rng);
        let respond_at = at + SimDuration::from_micros(10);
        d.handle_timeout(respond_at, &mut rng);
        d.poll_transmit().map(|r| r.frame.kind)
    }

    #[test]
    fn an_rts_is_answered_while_awaiting_a_cts_unless_ns2_says_not() {
        assert_eq!(
            rts_while_awaiting_cts(DcfSpec::ns2()),
            None,
            "ns-2's recvRTS discards it while tx_state_ is MAC_RTS"
        );
        let standard = DcfSpec {
            answer_rts_when_busy: true,
            ..DcfSpec::ns2()
        };
        assert_eq!(rts_while_awaiting_cts(standard), Some(FrameKind::Cts));
    }

    #[test]
    fn after_its_cts_an_ns2_station_answers_no_rts_until_the_data_would_have_ended() {
        let mut rng = component_stream(1, "dcf");
        let rts = |duration_us: u64| DcfFrame {
            kind: FrameKind::Rts,
            src: 1,
            dst: 0,
            duration: SimDuration::from_micros(duration_us),
            seq: 0,
            retry: false,
            len: 20,
            rate: PhyRate::Mbps1,
            payload: None,
        };
        // Answers the first RTS with a CTS whose Duration runs to the end
        // of the exchange: SIFS + 8000 µs of data + SIFS + 304 µs ACK.
        let answered = |d: &mut Dcf<u32>, at: SimTime, rng: &mut SimRng| {
            d.handle_frame(at, Some(rts(10 + 304 + 10 + 8000 + 10 + 304)), rng);
            let t = at + SimDuration::from_micros(10);
            d.handle_timeout(t, rng);
            let r = d.poll_transmit();
            if let Some(r) = &r {
                d.handle_tx_end(t + r.airtime);
            }
            r.map(|r| r.frame.kind)
        };
        let mut d: Dcf<u32> = Dcf::new(DcfSpec::ns2(), 0);
        assert_eq!(answered(&mut d, us(0), &mut rng), Some(FrameKind::Cts));
        // The CTS went on air at 10 µs for 304 µs; the data would end at
        // 314 + 10 + 8000 µs. A retried RTS before then is not answered...
        assert_eq!(answered(&mut d, us(2000), &mut rng), None);
        // ...one after it is.
        assert_eq!(answered(&mut d, us(8400), &mut rng), Some(FrameKind::Cts));
        // The standard's station answers the retry at once.
        let mut d: Dcf<u32> = Dcf::new(
            DcfSpec {
                answer_rts_when_busy: true,
                ..DcfSpec::ns2()
            },
            0,
        );
        assert_eq!(answered(&mut d, us(0), &mut rng), Some(FrameKind::Cts));
        assert_eq!(answered(&mut d, us(2000), &mut rng), Some(FrameKind::Cts));
    }

    #[test]
    fn a_frame_received_in_error_makes_the_station_wait_eifs() {
        let (mut d, _, slots) = backed_off(3);
        d.set_channel_busy(us(1040), true);
        d.handle_frame(us(2000), None, &mut component_stream(9, "x"));
        d.set_channel_busy(us(2000), false);
        // EIFS = SIFS + DIFS + 304 µs ACK at 1 Mbit/s = 364 µs.
        assert_eq!(d.poll_timeout(), Some(us(2364 + 20 * slots)));
        // An intact frame afterwards restores DIFS.
        d.set_channel_busy(us(2100), true);
        d.handle_frame(
            us(2500),
            Some(data(3, 4, 0, false, 1)),
            &mut component_stream(9, "x"),
        );
        d.set_channel_busy(us(2500), false);
        // The frame for another station set the NAV for 314 µs.
        assert_eq!(d.poll_timeout(), Some(us(2814 + 50 + 20 * slots)));
    }
}
