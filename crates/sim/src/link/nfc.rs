//! The time-slotted NFC link of the bridge study (bridge spec §1.1-1.2,
//! §3.1): stack, UART and MCU at each end, and a half-duplex air interface
//! that moves one packet at a time in fixed-size chunks, one per 10 ms slot.
//!
//! A packet's journey from port `p` to the other end:
//!
//! 1. It leaves the stack's interface (this is when a capture on the NFC
//!    side stamps it as sent). With channel sensing at `p` it first waits in
//!    the interface queue until the link is reported free.
//! 2. The MCU takes it over the UART (115 200 baud, 10 bits a byte). A
//!    packet that finds the UART busy waits in the queue in front of it if
//!    the end has room there ([`NfcConfig::uart_queue`]: none at the
//!    appliance, one packet at the PTx), else it is lost. The MCU keeps a
//!    packet in its 2 kB buffer until the packet's last chunk has left on
//!    air; a packet that does not fit beside those it already holds is
//!    dropped. Both losses are traced with reason `mcu_busy`. The study
//!    leaves these two rules open; the defaults are the ones its published
//!    captures A and B require (see docs/bridge.md).
//! 3. The NFC payload (IP packet plus 16 bytes of UI protocol and MCU
//!    framing) is cut into chunks of 10 or 26 bytes, one per slot. A chunk
//!    must be in the module 2 ms before its slot, so the first slot is the
//!    first slot boundary at least 2 ms after the MCU has the packet; the
//!    packet then uses consecutive slots. The air is half duplex: while a
//!    packet crosses, the other end's packet waits in its MCU for the first
//!    usable slot after it; when both wait they take turns. This stage is a
//!    [`HalfDuplexLink`] with [`NfcSlots`] timing.
//! 4. The far MCU forwards chunks over its UART as they arrive, so only the
//!    last chunk's UART time follows the last slot; then the packet is
//!    delivered (a capture at the far end stamps it as received).
//!
//! Slot boundaries lie at `phase + k * 10 ms`; the phase is drawn once per
//! run from the link's random stream, since the study's hardware starts
//! with an arbitrary slot phase. No bit errors are modelled: the study's
//! reader ends the session on any bit error, so loss on this link comes only
//! from the MCU rule.
//!
//! Channel sensing (§3.1), configured per end: the NFC side reports the link
//! busy while its own MCU holds a packet, while a packet crosses the air in
//! either direction, and while it is delivering a packet to its stack; the
//! interface hands its next packet to the MCU only once the link is free.
//! Both ends are told through `MediumBusy`/`MediumFree` outputs.
//!
//! Power-control traffic (`power_control = { period, bytes }`, off by
//! default): the PTx and the appliance exchange power-control messages over
//! the same slots, a message from the PTx and the appliance's reply of
//! `bytes` each, every `period`. They have the slots they need first: a
//! packet's chunks skip them and resume after, so packets that overlap an
//! exchange take longer (the variability Algorithm 1's `r` answers, bridge
//! spec §3.3). The study gives no size or period; see
//! [`PowerControl::DEFAULT_BYTES`] and [`PowerControl::DEFAULT_PERIOD`].
//!
//! Header compression (`header_compression = "rfc1144"`, off by default;
//! the study's future work, bridge spec §5): the stack's NFC driver at each
//! end compresses TCP/IP headers as RFC 1144 does for serial lines
//! ([`super::header_compression`]) before the packet goes over the UART,
//! and the far end rebuilds them. The compressed length sets the UART time,
//! the MCU buffer room, the chunks and the slots; the packet delivered is
//! the one sent (its IP length unchanged in every other output and
//! counter). A packet the MCU drops was already compressed, so the far
//! decompressor misses it: it discards the next compressed packets as
//! RFC 1144 says (trace reason `decompression`) until the sender's
//! retransmission, which goes uncompressed, refreshes its state. With
//! compression on, each packet's first slot is reported as a `MacAttempt`
//! whose length is its length on the link, for traces.

use std::collections::VecDeque;

use rand::Rng;
use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::ends::two_ends;
use super::half_duplex::{HalfDuplexConfig, HalfDuplexLink, MediumTiming, Occupancy};
use super::header_compression::{Compressor, Decompressor, Discard, Encoded, PacketType};
use super::nfc_buffers::{EndBuffer, NfcBuffers};
use super::{
    admit, Datagram, EndSpec, Frame, LinkCheck, LinkModel, LinkOut, LinkOutput, LinkTrace, Medium,
    Port, RawEnd, ScenarioLink, DEFAULT_QUEUE,
};
use crate::config::{required, Attachment, Duration, Rate, ScenarioError};
use crate::pool::PacketId;
use crate::rng::SimRng;
use crate::trace::DropReason;

/// Parameters of an [`NfcLink`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfcConfig {
    /// Payload bytes carried per slot (10 at 11.2 kbps, 26 at 24 kbps).
    pub payload_per_slot: u32,
    /// NFC protocol header bytes per slot (4); they count towards the
    /// nominal rate but carry no payload.
    pub header_per_slot: u32,
    /// Slot period (10 ms).
    pub slot_period: SimDuration,
    /// Air time of one slot's chunk (1.5 ms).
    pub slot_air: SimDuration,
    /// How long before its slot a chunk must be in the module (2 ms).
    pub lead: SimDuration,
    /// UART baud rate between stack and MCU (115 200).
    pub uart_baud: u64,
    /// UART bits per byte (10: start, 8 data, stop).
    pub uart_bits_per_byte: u64,
    /// Bytes the UI protocol and MCU framing add to an IP packet (16).
    pub framing: u32,
    /// Channel sensing at port 0 and port 1.
    pub sensing: [bool; 2],
    /// Packets the interface queue of a sensing end holds.
    pub queue_capacity: usize,
    /// Bytes of NFC payload the MCU's packet buffer holds (2 kB, bridge spec
    /// §1.1). A packet that arrives while the MCU holds others is kept if it
    /// fits beside them (capture A: the PTx's MCU, holding a 1080-byte
    /// segment, drops a second one; captures A and B: it keeps a 56-byte
    /// FIN or ACK). A packet always fits an empty buffer.
    pub mcu_buffer: u32,
    /// Packets the software in front of the UART holds while the UART is
    /// moving another packet into the MCU, at port 0 and port 1, for ends
    /// without sensing; a packet that finds the UART busy and this queue full
    /// is lost. Calibrated on the study's captures: 0 at the appliance (its
    /// first data segment, written 50 us after the handshake ACK, is lost in
    /// captures A and B) and 1 at the PTx (capture B: the end-user device's
    /// FIN, 95 us after its ACK, crosses).
    pub uart_queue: [usize; 2],
    /// Slot phase; `None` draws it uniformly in `[0, slot_period)` from the
    /// link's random stream.
    pub slot_phase: Option<SimDuration>,
    /// TCP/IP header compression between the two ends (off by default).
    pub header_compression: HeaderCompression,
    /// Power-control messages sharing the slots (`None`, the default: no
    /// other traffic on the link).
    pub power_control: Option<PowerControl>,
    /// Each end's own packet buffer, and whether the ends exchange their
    /// sizes at set-up ([`super::nfc_buffers`]). With it, each end keeps
    /// packets by its own buffer instead of `mcu_buffer`, and a packet
    /// either end cannot hold is lost: at the sender's MCU, or on arrival
    /// after crossing the air. `None`, the default: `mcu_buffer` at both
    /// ends, and an empty MCU takes any packet.
    pub buffers: Option<NfcBuffers>,
}

/// The power-control exchange between the PTx and the appliance that
/// shares an [`NfcLink`]'s slots: every `period`, from the first slot
/// boundary at or after each multiple of it (counted from the slot phase),
/// a message of `bytes` from the PTx and the appliance's reply of `bytes`
/// hold consecutive slots, which no packet's chunk may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PowerControl {
    /// Time between the starts of two exchanges.
    pub period: SimDuration,
    /// Bytes of each message (NFC payload, cut into chunks as packets are).
    pub bytes: u32,
}

impl PowerControl {
    /// Bytes of one power-control message when a scenario does not say.
    /// The study gives no size; 10 bytes (one slot at 11.2 kbps) holds a
    /// power set-point or a status report with its message type.
    pub const DEFAULT_BYTES: u32 = 10;
    /// Time between exchanges when a scenario does not say. The study gives
    /// none; 100 ms (every tenth slot) is a power-control loop of 10 Hz,
    /// fast enough to follow a pan being moved on the hob.
    pub const DEFAULT_PERIOD: SimDuration = SimDuration::from_millis(100);

    /// Slots one exchange holds with `payload_per_slot` bytes per slot:
    /// the message and its reply.
    pub fn slots(&self, payload_per_slot: u32) -> u64 {
        2 * u64::from(self.bytes).div_ceil(u64::from(payload_per_slot.max(1)))
    }
}

/// Header compression on an [`NfcLink`] (bridge spec §5, the study's
/// future work).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeaderCompression {
    /// Packets cross with their headers as they are.
    #[default]
    Off,
    /// RFC 1144 (Van Jacobson) TCP/IP header compression, by the stack's
    /// NFC driver at each end ([`super::header_compression`]).
    Rfc1144,
}

impl NfcConfig {
    /// The 11.2 kbps mode (212 kbps radio): 14-byte chunks, 10 of payload.
    pub const fn rate_11_2kbps() -> Self {
        NfcConfig {
            payload_per_slot: 10,
            header_per_slot: 4,
            slot_period: SimDuration::from_millis(10),
            slot_air: SimDuration::from_micros(1500),
            lead: SimDuration::from_millis(2),
            uart_baud: 115_200,
            uart_bits_per_byte: 10,
            framing: 16,
            sensing: [false, false],
            queue_capacity: 100,
            mcu_buffer: 2048,
            uart_queue: [0, 1],
            slot_phase: None,
            header_compression: HeaderCompression::Off,
            power_control: None,
            buffers: None,
        }
    }

    /// The 24 kbps mode (424 kbps radio): 30-byte chunks, 26 of payload.
    pub const fn rate_24kbps() -> Self {
        NfcConfig {
            payload_per_slot: 26,
            ..NfcConfig::rate_11_2kbps()
        }
    }

    /// The mode whose nominal rate is `bps` (11 200 or 24 000).
    pub fn for_rate(bps: u64) -> Option<Self> {
        [NfcConfig::rate_11_2kbps(), NfcConfig::rate_24kbps()]
            .into_iter()
            .find(|c| c.nominal_rate_bps() == bps)
    }

    /// Chunk bits on air per slot period: 11 200 or 24 000 bit/s.
    pub fn nominal_rate_bps(&self) -> u64 {
        u64::from(self.payload_per_slot + self.header_per_slot) * 8 * 1_000_000_000
            / self.slot_period.as_nanos().max(1)
    }

    /// NFC payload of an IP packet of `ip_len` bytes.
    pub fn nfc_payload(&self, ip_len: u32) -> u32 {
        ip_len.saturating_add(self.framing)
    }

    /// Slots an IP packet of `ip_len` bytes occupies.
    pub fn slots(&self, ip_len: u32) -> u64 {
        u64::from(self.nfc_payload(ip_len)).div_ceil(u64::from(self.payload_per_slot.max(1)))
    }

    /// Time to move `bytes` over the UART (rounded up to whole ns).
    pub fn uart_time(&self, bytes: u64) -> SimDuration {
        let bits = u128::from(bytes) * u128::from(self.uart_bits_per_byte);
        let ns = (bits * 1_000_000_000).div_ceil(u128::from(self.uart_baud.max(1)));
        SimDuration::from_nanos(ns.min(u128::from(u64::MAX)) as u64)
    }

    /// Payload bytes in the last chunk of an IP packet of `ip_len` bytes.
    pub fn last_chunk(&self, ip_len: u32) -> u32 {
        let size = self.nfc_payload(ip_len);
        let chunk = self.payload_per_slot.max(1);
        match size % chunk {
            0 => chunk,
            rest => rest,
        }
    }
}

/// Slot timing of the air interface: a [`MediumTiming`] for the
/// [`HalfDuplexLink`] that carries the chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfcSlots {
    config: NfcConfig,
    phase: SimDuration,
    /// Power-control slots that fell inside packets' crossings.
    yielded: u64,
}

impl NfcSlots {
    /// Slots of `config` whose boundaries lie at `phase + k * period`.
    pub fn new(config: NfcConfig, phase: SimDuration) -> Self {
        NfcSlots {
            config,
            phase,
            yielded: 0,
        }
    }

    /// Power-control slots that fell between a packet's first and last
    /// chunk so far.
    pub fn yielded(&self) -> u64 {
        self.yielded
    }

    /// The index of the slot starting at boundary `t` (counted from the
    /// phase).
    fn index(&self, t: SimTime) -> u64 {
        let phase = SimTime::ZERO + self.phase;
        t.saturating_since(phase).as_nanos() / self.config.slot_period.as_nanos().max(1)
    }

    /// The boundary of slot `i`.
    fn slot_time(&self, i: u64) -> SimTime {
        SimTime::ZERO + self.phase + self.config.slot_period.saturating_mul(i)
    }

    /// Whether power control holds slot `i`.
    pub fn reserved(&self, i: u64) -> bool {
        let Some(pc) = self.config.power_control else {
            return false;
        };
        let slot = u128::from(self.config.slot_period.as_nanos().max(1));
        let period = u128::from(pc.period.as_nanos().max(1));
        // The last exchange that started at or before slot i, and its
        // first slot: the first boundary at or after k periods.
        let k = u128::from(i) * slot / period;
        let first = (k * period).div_ceil(slot);
        u128::from(i) - first < u128::from(pc.slots(self.config.payload_per_slot))
    }

    /// The slot phase.
    pub fn phase(&self) -> SimDuration {
        self.phase
    }

    /// The first slot boundary at or after `t`.
    pub fn next_slot(&self, t: SimTime) -> SimTime {
        let phase = SimTime::ZERO + self.phase;
        if t <= phase {
            return phase;
        }
        let period = self.config.slot_period.as_nanos().max(1);
        let k = (t - phase).as_nanos().div_ceil(period);
        phase + SimDuration::from_nanos(k * period)
    }
}

impl MediumTiming for NfcSlots {
    fn earliest_start(&self, now: SimTime) -> SimTime {
        let first = self.next_slot(now + self.config.lead);
        if self.config.power_control.is_none() {
            return first;
        }
        let mut i = self.index(first);
        while self.reserved(i) {
            i += 1;
        }
        self.slot_time(i)
    }

    /// From the first slot to the end of the last chunk's air time; with
    /// power control the chunks skip the slots it holds.
    fn occupy(&mut self, start: SimTime, _from: Port, len: u32) -> Occupancy {
        let slots = self.config.slots(len).max(1);
        let end = if self.config.power_control.is_none() {
            start + self.config.slot_period.saturating_mul(slots - 1) + self.config.slot_air
        } else {
            let first = self.index(start);
            let (mut i, mut used) = (first, 0);
            loop {
                if !self.reserved(i) {
                    used += 1;
                    if used == slots {
                        break;
                    }
                }
                i += 1;
            }
            self.yielded += i + 1 - first - slots;
            self.slot_time(i) + self.config.slot_air
        };
        Occupancy {
            deliver_at: end,
            free_at: end,
        }
    }
}

/// Counters of one end of an [`NfcLink`], as sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NfcDirectionStats {
    /// Packets accepted into the interface queue (sensing ends) or the
    /// queue in front of the UART (other ends).
    pub enqueued: u64,
    /// Packets that left the stack towards the MCU.
    pub sent_packets: u64,
    /// IP bytes of those packets.
    pub sent_bytes: u64,
    /// Packets delivered to the other end's stack.
    pub delivered_packets: u64,
    /// IP bytes of those packets.
    pub delivered_bytes: u64,
    /// NFC payload bytes (IP packet plus framing) that crossed the air.
    pub nfc_payload_bytes: u64,
    /// Slots used.
    pub slots: u64,
    /// Packets dropped because the MCU already held one.
    pub dropped_mcu_busy: u64,
    /// Packets dropped because the interface queue was full.
    pub dropped_queue_full: u64,
    /// Longest interface queue seen, in packets.
    pub max_queue_len: u64,
    /// IP bytes of the sent packets as they crossed the link: after header
    /// compression when it is on, else `sent_bytes`.
    pub link_bytes: u64,
    /// Sent packets with a compressed header (`COMPRESSED_TCP`).
    pub compressed_packets: u64,
    /// Sent TCP packets whose header went whole to refresh the far end's
    /// state (`UNCOMPRESSED_TCP`).
    pub uncompressed_tcp_packets: u64,
    /// Packets the far end's decompressor discarded: rebuilt on stale state
    /// after a lost packet (bad TCP checksum), or tossed until a refresh.
    pub dropped_decompression: u64,
    /// Packets the far end rebuilt with a different IP ID than was sent
    /// (undetectable: no checksum covers it); delivered as sent.
    pub rebuilt_ip_id_differs: u64,
    /// Packets lost because this end's buffer or the far end's could not
    /// hold them (with `buffers` only).
    pub dropped_buffer_overflow: u64,
}

/// Counters of an [`NfcLink`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NfcStats {
    /// `directions[p]` counts packets sent from port `p`.
    pub directions: [NfcDirectionStats; 2],
    /// Packets that crossed the air.
    pub busy_periods: u64,
    /// Time the air was held by crossing packets (first slot to the end of
    /// the last chunk), in ns.
    pub busy_ns: u64,
    /// The slot phase of the run, in ns.
    pub slot_phase_ns: u64,
    /// Nominal rate (chunk bits per slot period), bit/s.
    pub nominal_rate_bps: u64,
    /// Power-control slots that fell between a packet's first and last
    /// chunk, delaying it by a slot period each (left out when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub power_control_slots: u64,
    /// The MSS the ends' buffer exchange gave the hosts at the ends (left
    /// out without the exchange).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub negotiated_mss: Option<u16>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A packet on its way through the MCUs and the air: its frame as the
/// stack handed it, and whether the far decompressor discards it. Its
/// [`Frame`] on the air has the length it has on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Carried<P> {
    frame: Frame<P>,
    discarded: bool,
    /// The far end's buffer cannot hold it.
    overflow: bool,
}

/// A packet waiting in front of an MCU, with its link encoding when header
/// compression is on.
#[derive(Clone, Debug)]
struct Pending<P> {
    frame: Frame<P>,
    /// The compressor's output and the packet's own bytes.
    encoded: Option<(Encoded, Vec<u8>)>,
}

/// What the UART between an end's stack and its MCU is doing.
#[derive(Clone, Copy, Debug)]
enum Uart<P> {
    Idle,
    /// Moving the packet into the MCU until `ready_at`.
    Loading {
        frame: Frame<Carried<P>>,
        ready_at: SimTime,
    },
}

#[derive(Debug)]
struct End<P> {
    sensing: bool,
    /// The interface queue of a sensing end, or the queue in front of the
    /// UART of an end without sensing.
    queue: VecDeque<Pending<P>>,
    uart: Uart<P>,
    /// NFC payload sizes of the packets in the MCU's buffer, oldest first:
    /// the one on the UART, then those waiting for or using the air.
    held: VecDeque<u32>,
    /// Whether this end's MCU is sending a packet's chunks on air.
    on_air: bool,
    /// Packets towards this end whose last chunk is on the far UART.
    delivering: VecDeque<(SimTime, Carried<P>)>,
    /// What this end was last told: busy or free.
    told_busy: bool,
}

impl<P> End<P> {
    fn new(sensing: bool) -> Self {
        End {
            sensing,
            queue: VecDeque::new(),
            uart: Uart::Idle,
            held: VecDeque::new(),
            on_air: false,
            delivering: VecDeque::new(),
            told_busy: false,
        }
    }
}

/// The NFC link between ports 0 and 1 (see the module documentation).
#[derive(Debug)]
pub struct NfcLink<P> {
    config: NfcConfig,
    air: HalfDuplexLink<Carried<P>, NfcSlots>,
    ends: [End<P>; 2],
    /// Header compression of the packets sent from each port, and their
    /// decompression at the other end.
    compressors: [Compressor; 2],
    decompressors: [Decompressor; 2],
    scratch: LinkOut<Carried<P>>,
    stats: NfcStats,
}

impl<P: Copy> NfcLink<P> {
    /// An idle link; `rng` draws the slot phase unless the configuration
    /// fixes it.
    pub fn new(config: NfcConfig, mut rng: SimRng) -> Self {
        let period = config.slot_period.as_nanos().max(1);
        let phase = config
            .slot_phase
            .map(|p| SimDuration::from_nanos(p.as_nanos() % period))
            .unwrap_or_else(|| SimDuration::from_nanos(rng.gen_range(0..period)));
        let air = HalfDuplexLink::new(
            NfcSlots::new(config, phase),
            // The MCU's buffer bounds what waits for the air.
            HalfDuplexConfig {
                queue_capacity: usize::MAX,
                loss: 0.0,
            },
            rng,
        );
        NfcLink {
            air,
            ends: [End::new(config.sensing[0]), End::new(config.sensing[1])],
            compressors: Default::default(),
            decompressors: Default::default(),
            scratch: LinkOut::new(),
            stats: NfcStats {
                directions: [NfcDirectionStats::default(); 2],
                busy_periods: 0,
                busy_ns: 0,
                slot_phase_ns: phase.as_nanos(),
                nominal_rate_bps: config.nominal_rate_bps(),
                power_control_slots: 0,
                negotiated_mss: config
                    .buffers
                    .filter(|b| b.exchange)
                    .and_then(|b| b.negotiated_mss(config.framing)),
            },
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NfcConfig {
        &self.config
    }

    /// The slot phase of this run.
    pub fn slot_phase(&self) -> SimDuration {
        self.air.timing().phase()
    }

    /// Whether the NFC side at `port` reports the link busy at `now`.
    pub fn is_busy(&self, port: Port, now: SimTime) -> bool {
        let end = &self.ends[port as usize & 1];
        !end.held.is_empty() || self.air.is_busy(now) || !end.delivering.is_empty()
    }

    /// Hands a packet from the stack at `from` to the link, without its
    /// bytes: it crosses with its header as it is.
    pub fn transmit(&mut self, now: SimTime, from: Port, frame: Frame<P>, out: &mut LinkOut<P>) {
        self.transmit_datagram(now, from, frame, None, out);
    }

    /// Hands a packet from the stack at `from` to the link, with its bytes
    /// (`datagram`), which header compression needs.
    pub fn transmit_datagram(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        datagram: Option<&[u8]>,
        out: &mut LinkOut<P>,
    ) {
        self.handle_timeout(now, out);
        let p = from as usize & 1;
        if self.ends[p].sensing {
            let stats = &mut self.stats.directions[p];
            let queue = &mut self.ends[p].queue;
            let full = queue.len() >= self.config.queue_capacity;
            let counters = (&mut stats.enqueued, &mut stats.dropped_queue_full);
            if !admit(from, frame, queue.len(), full, counters, out) {
                return;
            }
            let pending = self.encode(p, frame, datagram);
            let queue = &mut self.ends[p].queue;
            queue.push_back(pending);
            let stats = &mut self.stats.directions[p];
            stats.max_queue_len = stats.max_queue_len.max(queue.len() as u64);
            self.settle(now, out);
        } else {
            let pending = self.encode(p, frame, datagram);
            let uart_busy = matches!(self.ends[p].uart, Uart::Loading { .. });
            let queue = &mut self.ends[p].queue;
            if uart_busy && queue.len() < self.config.uart_queue[p] {
                let stats = &mut self.stats.directions[p];
                queue.push_back(pending);
                stats.enqueued += 1;
                stats.max_queue_len = stats.max_queue_len.max(queue.len() as u64);
            } else {
                self.hand(now, p, pending, out);
            }
            self.notify(now, out);
        }
    }

    /// The stack's NFC driver at end `p` compresses the packet's header
    /// when compression is on (and the packet's bytes are known).
    fn encode(&mut self, p: usize, frame: Frame<P>, datagram: Option<&[u8]>) -> Pending<P> {
        let encoded = match (self.config.header_compression, datagram) {
            (HeaderCompression::Rfc1144, Some(bytes)) => {
                Some((self.compressors[p].compress(bytes), bytes.to_vec()))
            }
            _ => None,
        };
        Pending { frame, encoded }
    }

    /// Processes everything due at or before `now`, in time order.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        while let Some(t) = self.poll_timeout() {
            if t > now {
                break;
            }
            self.air.handle_timeout(t, &mut self.scratch);
            self.absorb_air(t, out);
            for p in 0..2 {
                if let Uart::Loading { frame, ready_at } = self.ends[p].uart {
                    if ready_at <= t {
                        self.ends[p].uart = Uart::Idle;
                        self.air.transmit(t, p as Port, frame, &mut self.scratch);
                        self.absorb_air(t, out);
                    }
                }
            }
            for p in 0..2 {
                while let Some(&(at, carried)) = self.ends[p].delivering.front() {
                    if at > t {
                        break;
                    }
                    self.ends[p].delivering.pop_front();
                    let stats = &mut self.stats.directions[1 - p];
                    let (port, frame) = (p as Port, carried.frame);
                    if carried.overflow {
                        stats.dropped_buffer_overflow += 1;
                        out.push(LinkOutput::Dropped {
                            port,
                            frame,
                            reason: DropReason::BufferOverflow,
                        });
                        continue;
                    }
                    if carried.discarded {
                        stats.dropped_decompression += 1;
                        out.push(LinkOutput::Dropped {
                            port,
                            frame,
                            reason: DropReason::Decompression,
                        });
                        continue;
                    }
                    stats.delivered_packets += 1;
                    stats.delivered_bytes += u64::from(frame.len);
                    out.push(LinkOutput::Delivered { port, frame });
                }
            }
            self.settle(t, out);
        }
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let loading = self.ends.iter().filter_map(|e| match e.uart {
            Uart::Loading { ready_at, .. } => Some(ready_at),
            _ => None,
        });
        let delivering = self
            .ends
            .iter()
            .filter_map(|e| e.delivering.front().map(|d| d.0));
        loading
            .chain(delivering)
            .chain(self.air.poll_timeout())
            .min()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> NfcStats {
        let air = self.air.stats();
        NfcStats {
            busy_periods: air.busy_periods,
            busy_ns: air.busy_ns,
            power_control_slots: self.air.timing().yielded(),
            ..self.stats.clone()
        }
    }

    /// The packet leaves the stack at end `p` for its MCU.
    fn hand(&mut self, now: SimTime, p: usize, pending: Pending<P>, out: &mut LinkOut<P>) {
        let port = p as Port;
        let frame = pending.frame;
        let link_len = match &pending.encoded {
            Some((encoded, _)) => encoded.len() as u32,
            None => frame.len,
        };
        let stats = &mut self.stats.directions[p];
        stats.sent_packets += 1;
        stats.sent_bytes += u64::from(frame.len);
        stats.link_bytes += u64::from(link_len);
        match pending.encoded.as_ref().map(|e| e.0.kind) {
            Some(PacketType::CompressedTcp) => stats.compressed_packets += 1,
            Some(PacketType::UncompressedTcp) => stats.uncompressed_tcp_packets += 1,
            _ => {}
        }
        out.push(LinkOutput::TxStart { port, frame });
        let bytes = self.config.nfc_payload(link_len);
        let end = &self.ends[p];
        let own = self.config.buffers.map(|b| b.ends[p]);
        if own.is_some_and(|b| !b.holds(bytes)) {
            // Too large for this end's buffer even when it is empty.
            stats.dropped_buffer_overflow += 1;
            out.push(LinkOutput::Dropped {
                port,
                frame,
                reason: DropReason::BufferOverflow,
            });
            return;
        }
        let fits = end.held.is_empty()
            || match own {
                None => {
                    end.held.iter().sum::<u32>().saturating_add(bytes) <= self.config.mcu_buffer
                }
                Some(b) => {
                    let used: u64 = end.held.iter().map(|&h| b.footprint(h)).sum();
                    used + b.footprint(bytes) <= u64::from(b.bytes)
                }
            };
        if matches!(end.uart, Uart::Loading { .. }) || end.on_air || !fits {
            stats.dropped_mcu_busy += 1;
            out.push(LinkOutput::Dropped {
                port,
                frame,
                reason: DropReason::McuBusy,
            });
            return;
        }
        // Whether the far end can hold it is known now, and travels with it.
        let overflow = self
            .config
            .buffers
            .is_some_and(|b| !b.ends[1 - p].holds(bytes));
        // The air neither loses nor reorders packets, so the far end's
        // decompressor sees exactly the packets this MCU accepts, in this
        // order (less those the far end cannot hold): its verdict is known
        // now and travels with the packet.
        let mut discarded = false;
        if let Some((encoded, original)) = pending.encoded.as_ref().filter(|_| !overflow) {
            match self.decompressors[p].decompress(encoded) {
                Ok(rebuilt) if rebuilt != *original => stats.rebuilt_ip_id_differs += 1,
                Ok(_) => {}
                Err(Discard::Tossed | Discard::BadChecksum | Discard::Malformed) => {
                    discarded = true;
                }
            }
        }
        self.ends[p].held.push_back(bytes);
        self.ends[p].uart = Uart::Loading {
            frame: Frame {
                packet: Carried {
                    frame,
                    discarded,
                    overflow,
                },
                len: link_len,
            },
            ready_at: now + self.config.uart_time(u64::from(bytes)),
        };
    }

    /// Takes in what the air stage reported at `t`.
    fn absorb_air(&mut self, t: SimTime, out: &mut LinkOut<P>) {
        for output in std::mem::take(&mut *self.scratch) {
            match output {
                LinkOutput::TxStart { port, frame } => {
                    self.ends[port as usize & 1].on_air = true;
                    let stats = &mut self.stats.directions[port as usize & 1];
                    stats.slots += self.config.slots(frame.len);
                    stats.nfc_payload_bytes += u64::from(self.config.nfc_payload(frame.len));
                    if self.config.header_compression != HeaderCompression::Off {
                        // For traces: the packet's first chunk on air, with
                        // its length on the link (after compression).
                        out.trace(|| LinkTrace::MacAttempt {
                            port,
                            frame: Frame {
                                packet: frame.packet.frame.packet,
                                len: frame.len,
                            },
                            attempt: 1,
                        });
                    }
                }
                LinkOutput::Delivered { port, frame } => {
                    let to = port as usize & 1;
                    // The last chunk left: its room in the sender's buffer
                    // is free (the air takes each end's packets in order).
                    self.ends[1 - to].held.pop_front();
                    self.ends[1 - to].on_air = false;
                    let tail = self
                        .config
                        .uart_time(u64::from(self.config.last_chunk(frame.len)));
                    self.ends[to].delivering.push_back((t + tail, frame.packet));
                }
                // The air never loses frames and each MCU hands it at most
                // one, so nothing else needs handling.
                _ => {}
            }
        }
    }

    /// Hands waiting packets of sensing ends to idle MCUs, and of other
    /// ends to idle UARTs, and tells both ends about changes of the link's
    /// state.
    fn settle(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        for p in 0..2 {
            let ready = if self.ends[p].sensing {
                !self.is_busy(p as Port, now)
            } else {
                matches!(self.ends[p].uart, Uart::Idle)
            };
            if ready {
                if let Some(pending) = self.ends[p].queue.pop_front() {
                    self.hand(now, p, pending, out);
                }
            }
        }
        self.notify(now, out);
    }

    fn notify(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        for p in 0..2 {
            let busy = self.is_busy(p as Port, now);
            if busy == self.ends[p].told_busy {
                continue;
            }
            self.ends[p].told_busy = busy;
            let port = p as Port;
            if busy {
                out.push(LinkOutput::MediumBusy {
                    port,
                    until: self.known_busy_until(p, now),
                });
            } else {
                out.push(LinkOutput::MediumFree { port });
            }
        }
    }

    /// The end of what is already scheduled at end `p` (a lower bound on
    /// when the link turns free).
    fn known_busy_until(&self, p: usize, now: SimTime) -> SimTime {
        let end = &self.ends[p];
        let loading = match end.uart {
            Uart::Loading { ready_at, .. } => Some(ready_at),
            _ => None,
        };
        [
            loading,
            self.air.busy_until(),
            end.delivering.back().map(|d| d.0),
        ]
        .into_iter()
        .flatten()
        .fold(now, SimTime::max)
    }
}

impl<P: Copy> LinkModel<P> for NfcLink<P> {
    type Stats = NfcStats;

    #[inline]
    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        _to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        NfcLink::transmit(self, now, from, frame, out);
    }

    #[inline]
    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        NfcLink::handle_timeout(self, now, out);
    }

    #[inline]
    fn poll_timeout(&self) -> Option<SimTime> {
        NfcLink::poll_timeout(self)
    }

    fn stats(&self, _now: SimTime) -> NfcStats {
        NfcLink::stats(self)
    }

    fn carrier_sense(&self, port: Port, now: SimTime) -> bool {
        self.is_busy(port, now)
    }

    /// Header compression reads the packets' bytes.
    fn medium(&self) -> Medium {
        if self.config.header_compression == HeaderCompression::Off {
            Medium::PointToPoint
        } else {
            Medium::Ip
        }
    }

    fn transmit_datagram(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        datagram: Datagram<'_>,
        out: &mut LinkOut<P>,
    ) {
        NfcLink::transmit_datagram(self, now, from, frame, Some(datagram.bytes), out);
    }
}

/// The `[[link]]` fields of an NFC link.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNfc {
    /// The two ends, as on a point-to-point link, each with optional `sensing` (channel sensing
    /// at that end). Required.
    ends: Option<Vec<RawEnd>>,
    /// Nominal rate: `"11.2kbps"` or `"24kbps"`. Required.
    rate: Option<Rate>,
    /// Packets the interface queue of a sensing end holds. Unit: packets. Default: 100.
    queue: Option<usize>,
    /// Bytes the MCU's packet buffer holds (calibrated on the study's captures A and B). Unit:
    /// bytes. Default: 2048.
    mcu_buffer: Option<u32>,
    /// Packets held in front of each end's UART, one count per end. Unit: packets. Default:
    /// `[0, 1]`.
    uart_queue: Option<Vec<usize>>,
    /// Fixed phase of the slot boundaries, below the slot period. Default: drawn from the seed.
    slot_phase: Option<Duration>,
    /// Baud rate of the serial line between each stack and its MCU, 1200 to 100000000. Unit:
    /// bit/s. Default: 115200.
    uart_baud: Option<u64>,
    /// Whether an MCU sits between the stack and the NFC module (without it a packet loses the
    /// MCU's 8 bytes of framing). Default: true.
    mcu: Option<bool>,
    /// TCP/IP header compression between the ends: `"none"` or `"rfc1144"`. Default: `"none"`.
    header_compression: Option<String>,
    /// Power-control messages between the PTx and the appliance that take slots first: `{
    /// period, bytes }`, a message of `bytes` each way every `period` (bridge.md). Default:
    /// none (no power-control traffic).
    power_control: Option<RawPowerControl>,
    /// Each end's own packet buffer, and whether the ends exchange their sizes at set-up so the
    /// TCP hosts at the ends take the largest segment both hold as their MSS: `{ bytes, pbuf,
    /// exchange }` (bridge.md, *Buffer and MTU exchange*). A packet an end cannot hold is lost.
    /// Not with `mcu_buffer`. Default: none (`mcu_buffer` at both ends, and an empty MCU takes
    /// any packet).
    buffers: Option<RawBuffers>,
}

/// The `buffers` table of an NFC link.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBuffers {
    /// Size of each end's packet buffer, one count per end in the order of `ends`; it must
    /// hold at least a bare TCP/IP header with the link's framing. Unit: bytes. Required.
    bytes: Option<Vec<u32>>,
    /// Payload of one pool pbuf (lwIP's `PBUF_POOL_BUFSIZE`) at an end whose buffer is lwIP's
    /// pbuf pool, each pbuf costing 16 bytes of `struct pbuf` besides, or 0 for a plain byte
    /// buffer; one per end. Unit: bytes. Default: `[0, 0]`.
    pbuf: Option<Vec<u32>>,
    /// Whether the ends advertise their buffers at link set-up, the hosts at the ends then
    /// clamping their MSS to the largest segment both hold (never raising it). Default: false
    /// (each host keeps its own MSS).
    exchange: Option<bool>,
}

/// The `power_control` table of an NFC link.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPowerControl {
    /// Time between two power-control exchanges, each from the first slot boundary at or after
    /// a multiple of it. Default: `"100ms"`.
    period: Option<Duration>,
    /// Size of the PTx's message and of the appliance's reply, at least 1. Unit: bytes.
    /// Default: 10.
    bytes: Option<u32>,
}

/// `kind = "nfc"`: a time-slotted [`NfcLink`] (bridge spec §1.1).
#[derive(Clone, Debug, PartialEq)]
pub struct NfcSpec {
    /// The two ends.
    pub ends: [EndSpec; 2],
    /// Nominal rate: 11 200 or 24 000 bit/s.
    pub rate_bps: u64,
    /// Channel sensing at each end.
    pub sensing: [bool; 2],
    /// Packets the interface queue of a sensing end holds.
    pub queue: usize,
    /// Bytes the MCU's packet buffer holds ([`NfcConfig::mcu_buffer`]).
    pub mcu_buffer: u32,
    /// Packets held in front of each end's UART
    /// ([`NfcConfig::uart_queue`]).
    pub uart_queue: [usize; 2],
    /// Fixed slot phase, or `None` to draw it from the seed.
    pub slot_phase: Option<SimDuration>,
    /// UART baud rate between each stack and its MCU (the study's 115 200;
    /// its recommendation of a faster link raises it).
    pub uart_baud: u64,
    /// Whether an MCU sits between the stack and the NFC module; without
    /// it (the study's other bandwidth recommendation) a packet loses the
    /// MCU's 8 bytes of framing and the stack writes to the module over
    /// the same serial stage.
    pub mcu: bool,
    /// TCP/IP header compression between the ends (`"none"`, the default,
    /// or `"rfc1144"`).
    pub header_compression: HeaderCompression,
    /// Power-control messages sharing the slots (off unless the
    /// `power_control` table is given).
    pub power_control: Option<PowerControl>,
    /// Each end's own buffer and whether the ends exchange their sizes
    /// (off unless the `buffers` table is given).
    pub buffers: Option<NfcBuffers>,
}

/// Bytes of MCU packet framing (bridge spec §1.2), gone without the MCU.
pub const MCU_FRAMING: u32 = 8;

impl NfcSpec {
    /// Bytes of framing the link adds to each IP packet.
    fn framing(&self) -> u32 {
        let mode = NfcConfig::for_rate(self.rate_bps).unwrap_or(NfcConfig::rate_11_2kbps());
        if self.mcu {
            mode.framing
        } else {
            mode.framing - MCU_FRAMING
        }
    }
}

impl ScenarioLink for NfcSpec {
    const KIND: &'static str = "nfc";
    type Raw = RawNfc;
    type Model = NfcLink<PacketId>;

    fn validate(raw: RawNfc, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        let rate = required(&raw.rate, cx.at("rate"), &cx.what)?.0;
        let (ends, sensing) = two_ends(&raw.ends, cx, true)?;
        if NfcConfig::for_rate(rate).is_none() {
            return Err(ScenarioError::new(
                cx.at("rate"),
                format!("an nfc link runs at \"11.2kbps\" or \"24kbps\", got {rate} bit/s"),
            ));
        }
        let defaults = NfcConfig::rate_11_2kbps();
        if raw.mcu_buffer.is_some() && raw.buffers.is_some() {
            return Err(ScenarioError::new(
                cx.at("buffers"),
                "give the buffers either as `mcu_buffer` or as `buffers`, not both".to_string(),
            ));
        }
        let mcu_buffer = raw.mcu_buffer.unwrap_or(defaults.mcu_buffer);
        if mcu_buffer == 0 {
            return Err(ScenarioError::new(
                cx.at("mcu_buffer"),
                "must be at least 1 byte".to_string(),
            ));
        }
        // A phase past the first slot period would silence the link until
        // then: slot boundaries repeat every period, so the phase is below it.
        let period = NfcConfig::for_rate(rate).map_or(defaults.slot_period, |m| m.slot_period);
        if let Some(phase) = raw.slot_phase.filter(|p| p.0 >= period) {
            return Err(ScenarioError::new(
                cx.at("slot_phase"),
                format!(
                    "must be below the slot period ({}), got \"{}\"",
                    rtolab_time::units::format_duration(period),
                    rtolab_time::units::format_duration(phase.0)
                ),
            ));
        }
        let uart_queue = match raw.uart_queue.as_deref() {
            None => defaults.uart_queue,
            Some(&[a, b]) => [a, b],
            Some(other) => {
                return Err(ScenarioError::new(
                    cx.at("uart_queue"),
                    format!(
                        "must list two packet counts, one per end, got {}",
                        other.len()
                    ),
                ))
            }
        };
        let uart_baud = raw.uart_baud.unwrap_or(defaults.uart_baud);
        if !(1_200..=100_000_000).contains(&uart_baud) {
            return Err(ScenarioError::new(
                cx.at("uart_baud"),
                format!("must be between 1200 and 100000000 baud, got {uart_baud}"),
            ));
        }
        let header_compression = match raw.header_compression.as_deref() {
            None | Some("none") => HeaderCompression::Off,
            Some("rfc1144") => HeaderCompression::Rfc1144,
            Some(other) => {
                return Err(ScenarioError::new(
                    cx.at("header_compression"),
                    format!("must be \"none\" or \"rfc1144\", got {other:?}"),
                ))
            }
        };
        let mode = NfcConfig::for_rate(rate).unwrap_or(defaults);
        let power_control = match raw.power_control {
            None => None,
            Some(pc) => Some(power_control(pc, &mode, cx)?),
        };
        let mcu = raw.mcu.unwrap_or(true);
        let framing = if mcu {
            mode.framing
        } else {
            mode.framing - MCU_FRAMING
        };
        let buffers = match raw.buffers {
            None => None,
            Some(b) => Some(buffers(b, framing, cx)?),
        };
        Ok(NfcSpec {
            header_compression,
            power_control,
            buffers,
            ends,
            rate_bps: rate,
            sensing,
            queue: raw.queue.unwrap_or(DEFAULT_QUEUE),
            mcu_buffer,
            uart_queue,
            slot_phase: raw.slot_phase.map(|d| d.0),
            uart_baud,
            mcu,
        })
    }

    fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    // The emulator sets a real lwIP host's MSS from its own `lwip` table,
    // which the buffer exchange does not reach.
    fn emulated(&self) -> bool {
        !self.buffers.is_some_and(|b| b.exchange)
    }

    fn mss_limit(&self) -> Option<u16> {
        let buffers = self.buffers.filter(|b| b.exchange)?;
        buffers.negotiated_mss(self.framing())
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.ends.iter().map(EndSpec::attachment).collect()
    }

    fn build(&self, rng: SimRng) -> NfcLink<PacketId> {
        // Validation admits only the rates of the two modes.
        let mode = NfcConfig::for_rate(self.rate_bps).unwrap_or(NfcConfig::rate_11_2kbps());
        NfcLink::new(
            NfcConfig {
                sensing: self.sensing,
                queue_capacity: self.queue,
                mcu_buffer: self.mcu_buffer,
                uart_queue: self.uart_queue,
                slot_phase: self.slot_phase,
                uart_baud: self.uart_baud,
                header_compression: self.header_compression,
                power_control: self.power_control,
                buffers: self.buffers,
                framing: self.framing(),
                ..mode
            },
            rng,
        )
    }
}

/// Validates a `buffers` table: two ends, each able to hold at least a
/// segment of one byte with its headers and `framing`.
fn buffers(raw: RawBuffers, framing: u32, cx: &LinkCheck<'_>) -> Result<NfcBuffers, ScenarioError> {
    let per_end = |field: &str, values: Option<&[u32]>, default: [u32; 2]| match values {
        None => Ok(default),
        Some(&[a, b]) => Ok([a, b]),
        Some(other) => Err(ScenarioError::new(
            cx.at(&format!("buffers.{field}")),
            format!(
                "must list two byte counts, one per end, got {}",
                other.len()
            ),
        )),
    };
    let Some(bytes) = raw.bytes.as_deref() else {
        return Err(ScenarioError::new(
            cx.at("buffers.bytes"),
            "required in a `buffers` table".to_string(),
        ));
    };
    let bytes = per_end("bytes", Some(bytes), [0, 0])?;
    let pbuf = per_end("pbuf", raw.pbuf.as_deref(), [0, 0])?;
    let ends = [0, 1].map(|p| EndBuffer {
        bytes: bytes[p],
        pbuf: pbuf[p],
    });
    // The smallest packet the hosts send: headers and framing, no data.
    let bare = super::nfc_buffers::TCP_IP_HEADERS + framing;
    for (p, end) in ends.iter().enumerate() {
        if end.largest_payload() < bare + 1 {
            let pbufs = if end.pbuf > 0 {
                format!(" in {}-byte pbufs", end.pbuf)
            } else {
                String::new()
            };
            return Err(ScenarioError::new(
                cx.at("buffers.bytes"),
                format!(
                    "end {p} holds at most {} bytes of NFC payload{pbufs}, too few for a \
                     segment of one byte ({} with headers and framing)",
                    end.largest_payload(),
                    bare + 1
                ),
            ));
        }
    }
    Ok(NfcBuffers {
        ends,
        exchange: raw.exchange.unwrap_or(false),
    })
}

/// Validates a `power_control` table: a message of at least one byte, and
/// exchanges far enough apart that packets keep at least one slot of every
/// period (else no packet would ever finish crossing).
fn power_control(
    raw: RawPowerControl,
    mode: &NfcConfig,
    cx: &LinkCheck<'_>,
) -> Result<PowerControl, ScenarioError> {
    let bytes = raw.bytes.unwrap_or(PowerControl::DEFAULT_BYTES);
    if bytes == 0 {
        return Err(ScenarioError::new(
            cx.at("power_control.bytes"),
            "must be at least 1 byte".to_string(),
        ));
    }
    let pc = PowerControl {
        period: raw.period.map_or(PowerControl::DEFAULT_PERIOD, |d| d.0),
        bytes,
    };
    let held = pc.slots(mode.payload_per_slot);
    let shortest = mode.slot_period.saturating_mul(held + 1);
    if pc.period < shortest {
        return Err(ScenarioError::new(
            cx.at("power_control.period"),
            format!(
                "must leave packets a slot between exchanges: at least {} for \
                 {held} slots of power control, got \"{}\"",
                rtolab_time::units::format_duration(shortest),
                rtolab_time::units::format_duration(pc.period)
            ),
        ));
    }
    Ok(pc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::Emitted;
    use crate::rng::component_stream;
    use LinkOutput::*;

    fn frame(id: u32, len: u32) -> Frame<u32> {
        Frame { packet: id, len }
    }

    fn ms(v: u64) -> SimTime {
        SimTime::from_millis(v)
    }

    fn link(sensing: [bool; 2], phase_ms: u64) -> NfcLink<u32> {
        NfcLink::new(
            NfcConfig {
                sensing,
                slot_phase: Some(SimDuration::from_millis(phase_ms)),
                ..NfcConfig::rate_11_2kbps()
            },
            component_stream(1, "nfc"),
        )
    }

    /// Runs the link to quiescence; every output with its time.
    fn drain(l: &mut NfcLink<u32>) -> Vec<(SimTime, LinkOutput<u32>)> {
        let mut log = Vec::new();
        let mut out = LinkOut::new();
        while let Some(t) = l.poll_timeout() {
            l.handle_timeout(t, &mut out);
            log.extend(out.drain(..).map(|o| (t, o)));
        }
        log
    }

    fn deliveries(log: &[(SimTime, LinkOutput<u32>)]) -> Vec<(SimTime, Port, u32)> {
        log.iter()
            .filter_map(|(t, o)| match o {
                Delivered { port, frame } => Some((*t, *port, frame.packet)),
                _ => None,
            })
            .collect()
    }

    /// The packets dropped in `out`, in order.
    fn dropped(out: &[LinkOutput<u32>]) -> Vec<u32> {
        out.iter()
            .filter_map(|o| match o {
                Dropped { frame, .. } => Some(frame.packet),
                _ => None,
            })
            .collect()
    }

    /// The packets delivered in `log`, in order.
    fn delivered(log: &[(SimTime, LinkOutput<u32>)]) -> Vec<u32> {
        deliveries(log).iter().map(|d| d.2).collect()
    }

    /// What the MCU at `port` says of a packet it cannot take.
    fn mcu_busy(port: Port, packet: u32, len: u32) -> LinkOutput<u32> {
        Dropped {
            port,
            frame: frame(packet, len),
            reason: DropReason::McuBusy,
        }
    }

    #[test]
    fn modes_have_the_published_rates_and_sizes() {
        let slow = NfcConfig::rate_11_2kbps();
        assert_eq!(slow.nominal_rate_bps(), 11_200);
        assert_eq!(NfcConfig::rate_24kbps().nominal_rate_bps(), 24_000);
        assert_eq!(NfcConfig::for_rate(24_000), Some(NfcConfig::rate_24kbps()));
        assert_eq!(NfcConfig::for_rate(10_000), None);
        // A bare ACK (40 bytes of IP) is a 56-byte NFC payload: 6 slots,
        // the last carrying 6 bytes; 11.52 bytes/ms on the UART.
        assert_eq!(slow.slots(40), 6);
        assert_eq!(slow.last_chunk(40), 6);
        assert_eq!(slow.last_chunk(44), 10);
        assert_eq!(slow.uart_time(1152), SimDuration::from_millis(100));
    }

    #[test]
    fn a_packet_takes_uart_lead_slots_and_the_last_chunks_uart() {
        // Phase 3 ms: slots at 3, 13, 23, ... ms.
        let mut l = link([false, false], 3);
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1, 40), &mut out);
        assert_eq!(
            out[0],
            TxStart {
                port: 0,
                frame: frame(1, 40)
            }
        );
        let log = drain(&mut l);
        // UART: 56 bytes in 4.861 ms; +2 ms lead -> first slot at 13 ms;
        // 6 slots: the last at 63 ms, its air ends at 64.5 ms; the far
        // UART takes the last 6 bytes in 0.521 ms.
        let expected = ms(63) + SimDuration::from_micros(1500) + l.config.uart_time(6);
        assert_eq!(deliveries(&log), [(expected, 1, 1)]);
        let s = l.stats();
        assert_eq!(s.directions[0].slots, 6);
        assert_eq!(s.directions[0].nfc_payload_bytes, 56);
        assert_eq!(s.slot_phase_ns, 3_000_000);
    }

    #[test]
    fn appliance_loses_a_packet_written_while_its_uart_is_busy() {
        let mut l = link([false, false], 0);
        let mut out = LinkOut::new();
        // The handshake ACK, then the first data segment 50 us later, while
        // the ACK is still on the UART (4.9 ms): the appliance has no queue
        // in front of its UART.
        l.transmit(SimTime::ZERO, 0, frame(1, 40), &mut out);
        l.transmit(SimTime::from_micros(50), 0, frame(2, 1064), &mut out);
        assert!(out.contains(&mcu_busy(0, 2, 1064)));
        // The ACK's chunks are on air (~69 ms): the MCU takes nothing.
        l.transmit(ms(60), 0, frame(3, 40), &mut out);
        assert_eq!(out.last(), Some(&mcu_busy(0, 3, 40)));
        let log = drain(&mut l);
        assert_eq!(deliveries(&log).len(), 1);
        assert_eq!(l.stats().directions[0].dropped_mcu_busy, 2);
    }

    #[test]
    fn a_waiting_mcu_keeps_what_fits_its_buffer() {
        let mut l = link([false, false], 0);
        let mut out = LinkOut::new();
        // The far end holds the air (capture A: the response crossing while
        // the appliance's retransmission waits for it).
        l.transmit(SimTime::ZERO, 1, frame(9, 1064), &mut out);
        l.transmit(ms(10), 0, frame(1, 1064), &mut out);
        // While segment 1 waits for the air the MCU takes a FIN, which fits
        // beside it, but not a packet that would overflow its 2 kB.
        l.transmit(ms(500), 0, frame(2, 40), &mut out);
        l.transmit(ms(600), 0, frame(3, 1000), &mut out);
        assert_eq!(dropped(&out), [3]);
        let log = drain(&mut l);
        assert_eq!(delivered(&log), [9, 1, 2]);
    }

    #[test]
    fn ptx_queues_one_packet_in_front_of_its_uart() {
        let mut l = link([false, false], 0);
        let mut out = LinkOut::new();
        // The end-user device's ACK and FIN 95 us apart (capture B), then a
        // third packet while the queue is full.
        l.transmit(SimTime::ZERO, 1, frame(1, 40), &mut out);
        l.transmit(SimTime::from_micros(95), 1, frame(2, 40), &mut out);
        l.transmit(SimTime::from_micros(100), 1, frame(3, 40), &mut out);
        assert_eq!(dropped(&out), [3]);
        let log = drain(&mut l);
        assert_eq!(delivered(&log), [1, 2]);
        let s = l.stats().directions[1];
        assert_eq!((s.enqueued, s.max_queue_len, s.dropped_mcu_busy), (1, 1, 1));
    }

    #[test]
    fn ptx_drops_a_second_full_segment_that_does_not_fit_its_buffer() {
        let mut l = link([false, false], 0);
        let mut out = LinkOut::new();
        // Capture A: the end-user device's response (1080 bytes of NFC
        // payload) is on air when its retransmission arrives.
        l.transmit(SimTime::ZERO, 1, frame(1, 1064), &mut out);
        l.transmit(ms(800), 1, frame(2, 1064), &mut out);
        assert_eq!(out.last(), Some(&mcu_busy(1, 2, 1064)));
        let log = drain(&mut l);
        assert_eq!(deliveries(&log).len(), 1);
    }

    #[test]
    fn sensing_queues_instead_of_dropping() {
        let mut l = link([true, true], 0);
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1, 140), &mut out);
        l.transmit(SimTime::from_micros(50), 0, frame(2, 240), &mut out);
        l.transmit(SimTime::from_micros(100), 0, frame(3, 340), &mut out);
        l.transmit(SimTime::from_micros(150), 1, frame(9, 40), &mut out);
        let mut log: Vec<_> = out.drain(..).map(|o| (SimTime::ZERO, o)).collect();
        log.extend(drain(&mut l));
        assert!(!log.iter().any(|(_, o)| matches!(o, Dropped { .. })));
        let got = deliveries(&log);
        assert_eq!(got.len(), 4);
        let from_0: Vec<u32> = got.iter().filter(|d| d.1 == 1).map(|d| d.2).collect();
        assert_eq!(from_0, [1, 2, 3]);
        // Each packet left the stack only after the previous one of its end
        // had finished crossing.
        let handed = |id: u32| {
            log.iter()
                .find(|(_, o)| matches!(o, TxStart { frame, .. } if frame.packet == id))
                .map(|(t, _)| *t)
        };
        for (prev, next) in [(1, 2), (2, 3)] {
            let done = got.iter().find(|d| d.2 == prev).map(|d| d.0);
            let started = handed(next);
            assert!(started.is_some() && done.is_some());
            // Handed at the end of the previous packet's air time, which
            // is its delivery minus the last chunk's UART.
            assert!(started <= done && started > handed(prev));
        }
        assert_eq!(l.stats().directions[0].max_queue_len, 2);
        assert_eq!(l.stats().directions[0].dropped_mcu_busy, 0);
    }

    #[test]
    fn one_packet_crosses_at_a_time_in_either_direction() {
        let mut l = link([false, false], 7);
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1, 500), &mut out);
        l.transmit(SimTime::from_millis(1), 1, frame(2, 500), &mut out);
        let log = drain(&mut l);
        let got = deliveries(&log);
        assert_eq!(
            got.iter().map(|d| (d.1, d.2)).collect::<Vec<_>>(),
            [(1, 1), (0, 2)]
        );
        let s = l.stats();
        assert_eq!(s.busy_periods, 2);
        let slots = l.config.slots(500);
        let air =
            SimDuration::from_millis(10).saturating_mul(slots - 1) + SimDuration::from_micros(1500);
        // The air was held for exactly the two crossings, which did not
        // overlap: the second started in the first slot after the first
        // one's last chunk, so they are a whole number of slots apart.
        assert_eq!(s.busy_ns, 2 * air.as_nanos());
        assert_eq!(
            got[1].0 - got[0].0,
            SimDuration::from_millis(10).saturating_mul(slots)
        );
        assert_eq!(s.directions[1].dropped_mcu_busy, 0);
    }

    /// A TCP segment of the appliance's connection with `len` data bytes.
    fn segment(seq: u32, id: u16, len: usize) -> Vec<u8> {
        use rtolab_wire::ipv4::Ipv4Repr;
        use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
        let ip = Ipv4Repr {
            src: [192, 168, 1, 102].into(),
            dst: [192, 168, 1, 202].into(),
            protocol: 0,
            ttl: 255,
            ident: id,
            dont_fragment: false,
            tos: 0,
            payload_len: 0,
        };
        let payload = vec![7; len];
        let tcp = TcpRepr {
            src_port: 49153,
            dst_port: 7891,
            seq: SeqNumber(seq),
            ack: SeqNumber(1),
            flags: TcpFlags::PSH | TcpFlags::ACK,
            window: 8096,
            urgent: 0,
            options: TcpOptions::default(),
            payload: &payload,
        };
        let mut out = Vec::new();
        rtolab_wire::packet::emit_tcp(&mut out, &ip, &tcp).expect("fits");
        out
    }

    fn compressing(sensing: [bool; 2]) -> NfcLink<u32> {
        NfcLink::new(
            NfcConfig {
                sensing,
                slot_phase: Some(SimDuration::ZERO),
                header_compression: HeaderCompression::Rfc1144,
                ..NfcConfig::rate_11_2kbps()
            },
            component_stream(1, "nfc"),
        )
    }

    #[test]
    fn a_compressed_packet_takes_the_slots_and_uart_of_its_compressed_size() {
        let mut l = compressing([true, true]);
        let mut out = LinkOut::traced();
        // Two 100-byte segments back to back: the first sets the state (its
        // 140 bytes cross whole), the second crosses as 3 + 100 bytes.
        let (first, second) = (segment(1, 1, 100), segment(101, 2, 100));
        l.transmit_datagram(SimTime::ZERO, 0, frame(1, 140), Some(&first), &mut out);
        l.transmit_datagram(SimTime::ZERO, 0, frame(2, 140), Some(&second), &mut out);
        while let Some(t) = l.poll_timeout() {
            l.handle_timeout(t, &mut out);
        }
        let log = out.take_all();
        let s = l.stats().directions[0];
        assert_eq!((s.sent_bytes, s.link_bytes), (280, 140 + 103));
        assert_eq!((s.compressed_packets, s.uncompressed_tcp_packets), (1, 1));
        // NFC payloads 156 and 119: 16 + 12 slots.
        assert_eq!(s.nfc_payload_bytes, 156 + 119);
        assert_eq!(s.slots, 16 + 12);
        // Delivered as handed over, the frame keeping its IP length; the
        // trace notice carries the length on the link.
        let got: Vec<_> = log
            .iter()
            .filter_map(|o| match o {
                Emitted::Output(Delivered { frame, .. }) => Some(*frame),
                _ => None,
            })
            .collect();
        assert_eq!(got, [frame(1, 140), frame(2, 140)]);
        let on_link: Vec<u32> = log
            .iter()
            .filter_map(|o| match o {
                Emitted::Trace(LinkTrace::MacAttempt { frame, .. }) => Some(frame.len),
                _ => None,
            })
            .collect();
        assert_eq!(on_link, [140, 103]);
    }

    #[test]
    fn a_frame_lost_at_the_mcu_is_recovered_as_rfc_1144_says() {
        let mut l = compressing([false, false]);
        let mut out = LinkOut::new();
        let segs: Vec<Vec<u8>> = (0..4u32)
            .map(|k| segment(1 + 100 * k, k as u16, 100))
            .collect();
        let send =
            |l: &mut NfcLink<u32>, at: SimTime, id: u32, bytes: &[u8], out: &mut LinkOut<_>| {
                l.transmit_datagram(at, 0, frame(id, bytes.len() as u32), Some(bytes), out);
            };
        send(&mut l, SimTime::ZERO, 0, &segs[0], &mut out);
        // Segment 1 is written while the UART still moves segment 0: the
        // appliance's MCU drops it, compressed.
        send(&mut l, SimTime::from_micros(50), 1, &segs[1], &mut out);
        assert_eq!(dropped(&out), [1]);
        let mut log = drain(&mut l);
        // Segment 2 crosses, but the far end rebuilds it on the state of
        // segment 0: discarded, and segment 3 after it is tossed.
        send(&mut l, ms(1000), 2, &segs[2], &mut out);
        log.extend(drain(&mut l));
        send(&mut l, ms(2000), 3, &segs[3], &mut out);
        log.extend(drain(&mut l));
        // TCP resends segment 1: its sequence number went back, so it
        // crosses whole and the far end is in step again.
        send(&mut l, ms(3000), 11, &segs[1], &mut out);
        log.extend(drain(&mut l));
        send(&mut l, ms(4000), 12, &segment(401, 5, 100), &mut out);
        log.extend(drain(&mut l));
        assert_eq!(delivered(&log), [0, 11, 12]);
        let discarded: Vec<u32> = log
            .iter()
            .filter_map(|(_, o)| match o {
                Dropped {
                    port: 1,
                    frame,
                    reason: DropReason::Decompression,
                } => Some(frame.packet),
                _ => None,
            })
            .collect();
        assert_eq!(discarded, [2, 3]);
        let s = l.stats().directions[0];
        assert_eq!(s.dropped_decompression, 2);
        assert_eq!(s.dropped_mcu_busy, 1);
        // Segments 0 and the resent 1 went whole; 1, 2, 3 and the last one
        // compressed.
        assert_eq!((s.uncompressed_tcp_packets, s.compressed_packets), (2, 4));
    }

    fn slots_with(power_control: PowerControl, phase_ms: u64) -> NfcSlots {
        NfcSlots::new(
            NfcConfig {
                power_control: Some(power_control),
                ..NfcConfig::rate_11_2kbps()
            },
            SimDuration::from_millis(phase_ms),
        )
    }

    #[test]
    fn power_control_holds_a_message_and_its_reply_every_period() {
        // 10 bytes: one slot each way at 11.2 kbps, every 10th slot.
        let s = slots_with(
            PowerControl {
                period: SimDuration::from_millis(100),
                bytes: 10,
            },
            0,
        );
        let held: Vec<u64> = (0..25).filter(|&i| s.reserved(i)).collect();
        assert_eq!(held, [0, 1, 10, 11, 20, 21]);
        // 25 bytes: three slots each way.
        let s = slots_with(
            PowerControl {
                period: SimDuration::from_millis(100),
                bytes: 25,
            },
            0,
        );
        let held: Vec<u64> = (0..15).filter(|&i| s.reserved(i)).collect();
        assert_eq!(held, [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14]);
        // A period that is no whole number of slots: each exchange starts
        // at the first boundary at or after its time (0, 35, 70, 105,
        // 140 ms).
        let s = slots_with(
            PowerControl {
                period: SimDuration::from_millis(35),
                bytes: 10,
            },
            0,
        );
        let held: Vec<u64> = (0..16).filter(|&i| s.reserved(i)).collect();
        assert_eq!(held, [0, 1, 4, 5, 7, 8, 11, 12, 14, 15]);
    }

    #[test]
    fn a_packet_waits_for_and_skips_the_slots_power_control_holds() {
        // Phase 3 ms; power control every 50 ms holds slots 0-1 (3, 13 ms),
        // 5-6 (53, 63 ms), 10-11, ...
        let power_control = PowerControl {
            period: SimDuration::from_millis(50),
            bytes: 10,
        };
        let mut l = NfcLink::new(
            NfcConfig {
                slot_phase: Some(SimDuration::from_millis(3)),
                power_control: Some(power_control),
                ..NfcConfig::rate_11_2kbps()
            },
            component_stream(1, "nfc"),
        );
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1, 40), &mut out);
        let log = drain(&mut l);
        // Without power control the 6 slots are 13-63 ms (see above). The
        // first usable slot is now 23 ms (13 ms is held), the chunks use
        // slots 2-4, skip 5-6 and end in slot 9 at 93 ms.
        let expected = ms(93) + SimDuration::from_micros(1500) + l.config.uart_time(6);
        assert_eq!(deliveries(&log), [(expected, 1, 1)]);
        let s = l.stats();
        assert_eq!(s.directions[0].slots, 6);
        assert_eq!(s.power_control_slots, 2);
    }

    #[test]
    fn without_power_control_the_counter_stays_out_of_the_stats() {
        let mut l = link([false, false], 3);
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, 0, frame(1, 400), &mut out);
        drain(&mut l);
        let json = serde_json::to_value(l.stats()).expect("serializes");
        assert!(json.get("power_control_slots").is_none(), "{json}");
    }
}

#[cfg(test)]
mod buffer_tests {
    use super::*;
    use crate::rng::component_stream;
    use LinkOutput::*;

    /// The appliance (port 0) keeps packets in 256-byte pool pbufs within
    /// 1024 bytes (768 bytes of NFC payload), the PTx (port 1) in 2048
    /// plain bytes.
    fn small_appliance(exchange: bool) -> NfcLink<u32> {
        NfcLink::new(
            NfcConfig {
                slot_phase: Some(SimDuration::ZERO),
                buffers: Some(NfcBuffers {
                    ends: [
                        EndBuffer {
                            bytes: 1024,
                            pbuf: 256,
                        },
                        EndBuffer {
                            bytes: 2048,
                            pbuf: 0,
                        },
                    ],
                    exchange,
                }),
                ..NfcConfig::rate_11_2kbps()
            },
            component_stream(1, "nfc"),
        )
    }

    fn run(l: &mut NfcLink<u32>, from: Port, len: u32) -> Vec<LinkOutput<u32>> {
        let mut out = LinkOut::new();
        l.transmit(SimTime::ZERO, from, Frame { packet: 7, len }, &mut out);
        while let Some(t) = l.poll_timeout() {
            l.handle_timeout(t, &mut out);
        }
        out.into_outputs()
    }

    fn overflow(port: Port, len: u32) -> LinkOutput<u32> {
        Dropped {
            port,
            frame: Frame { packet: 7, len },
            reason: DropReason::BufferOverflow,
        }
    }

    #[test]
    fn a_packet_larger_than_the_senders_buffer_is_lost_at_its_mcu() {
        let mut l = small_appliance(false);
        // 753 + 16 bytes of framing: one byte more than three pbufs carry.
        let out = run(&mut l, 0, 753);
        assert!(out.contains(&overflow(0, 753)), "{out:?}");
        let s = l.stats();
        assert_eq!(s.directions[0].dropped_buffer_overflow, 1);
        assert_eq!((s.directions[0].slots, s.busy_periods), (0, 0));
        // One byte less fits, and crosses.
        let mut l = small_appliance(false);
        let out = run(&mut l, 0, 752);
        assert!(out.iter().any(|o| matches!(o, Delivered { port: 1, .. })));
    }

    #[test]
    fn a_packet_larger_than_the_receivers_buffer_crosses_and_is_lost_there() {
        let mut l = small_appliance(false);
        // The study's full segment from the PTx fits the PTx, not the
        // appliance: it takes its 108 slots and is lost on arrival.
        let out = run(&mut l, 1, 1064);
        assert!(out.contains(&overflow(0, 1064)), "{out:?}");
        assert!(!out.iter().any(|o| matches!(o, Delivered { .. })));
        let s = l.stats();
        assert_eq!(s.directions[1].dropped_buffer_overflow, 1);
        assert_eq!(s.directions[1].slots, 108);
        assert_eq!(s.directions[1].delivered_packets, 0);
    }

    #[test]
    fn the_hosts_at_the_link_take_the_negotiated_mss_and_only_they() {
        use crate::scenario::Scenario;
        let text = include_str!("../../../../scenarios/bridge-buffers.toml");
        let mss = |text: &str| {
            let s = Scenario::from_toml_str(text).unwrap();
            let app = |name: &str| {
                let app = s.apps.iter().find(|a| a.name == name).unwrap();
                app.tcp.as_ref().map(|p| p.mss)
            };
            (
                app("client"),
                app("server"),
                s.hosts[0].smoltcp.as_ref().map(|m| m.mtu),
            )
        };
        // The appliance at the link announces 712; the end-user device,
        // beyond the bridge, keeps its own (it learns 712 from the SYN).
        assert_eq!(mss(text), (Some(712), Some(1024), None));
        let fixed = text.replace("exchange = true", "exchange = false");
        assert_eq!(mss(&fixed), (Some(1024), Some(1024), None));
        // A smoltcp appliance gets the MSS through its MTU.
        let smol = text
            .replacen("profile = \"lwip\"", "stack = \"smoltcp\"", 1)
            .replacen("tcp = { rto = { initial = \"3.5s\" } }", "", 1);
        assert_eq!(mss(&smol).2, Some(752));
    }

    #[test]
    fn the_exchange_reports_the_mss_both_ends_hold() {
        assert_eq!(small_appliance(true).stats().negotiated_mss, Some(712));
        assert_eq!(small_appliance(false).stats().negotiated_mss, None);
        // A segment of that MSS fits both ways.
        for from in [0, 1] {
            let mut l = small_appliance(true);
            let out = run(&mut l, from, 712 + 40);
            assert!(out.iter().any(|o| matches!(o, Delivered { .. })), "{out:?}");
        }
    }
}
