//! `kind = "slip"`: a serial line carrying IP datagrams in SLIP frames
//! (RFC 1055), as between a mesh's border router and the host it is wired
//! to (docs/mesh.md, "SLIP").
//!
//! Full duplex: each direction sends one frame at a time, from a drop-tail
//! queue, at `baud` line bits per second with `bits_per_byte` line bits per
//! byte (10 for 8N1). A frame takes the time of its SLIP encoding
//! ([`slip::encoded_len`]: the datagram, one more byte for each `END` or
//! `ESC` in it, and the two `END`s Contiki sends), then `delay` to arrive.
//! The line has no flow control and no noise: apart from the optional
//! `loss` (whole frames, as a receiver drops a frame noise broke), every
//! frame arrives intact.
//!
//! ```toml
//! [[link]]
//! name = "serial"
//! kind = "slip"
//! ends = [ { host = "border-router", address = "10.0.0.1/24" },
//!          { host = "server", address = "10.0.0.2/24" } ]
//! baud = 115200            # optional, default 115200
//! bits_per_byte = 10       # optional, default 10 (8N1)
//! queue = 100              # optional, frames waiting per end
//! delay = "0s"             # optional propagation delay
//! loss = 0.0               # optional
//! ```
//!
//! The model needs the datagram's bytes to time it: it
//! carries datagrams ([`Medium::Ip`]), and the simulator hands
//! them over with [`LinkModel::transmit_datagram`] (without picking a
//! receiving port: each port's peer is the other one). A frame handed over
//! by plain [`LinkModel::transmit`] is timed as if nothing in it needed
//! escaping. The emulator passes frames without their bytes, so it does
//! not run this kind.
//!
//! The line is a [`P2pLink`] whose frames are queued with their own time
//! and wire length ([`P2pLink::transmit_timed`]) rather than timed by a
//! bit rate: the line's byte rate, `baud × 8 / bits_per_byte`, is not a
//! whole number of bits per second in general (115 200 baud with 11-bit
//! bytes), and the line length is not the length the simulator, the
//! traces and the IP-byte counters know. Each frame is timed by
//! [`slip::serial_time_ns`], exact to the nanosecond (rounded up), and
//! outputs carry the frame as it was handed over.

use std::num::NonZeroU32;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::slip;
use serde::{Deserialize, Serialize};

use super::ends::two_ends;
use super::p2p::loss_probability;
use super::{
    Datagram, DirectionStats, EndSpec, Frame, LinkCheck, LinkModel, LinkOut, Medium, P2pConfig,
    P2pLink, Port, RawEnd, ScenarioLink, DEFAULT_QUEUE,
};
use crate::config::{Attachment, Duration, ScenarioError};
use crate::pool::PacketId;
use crate::rng::SimRng;

/// The baud rate of the study's serial line, and the default.
pub const DEFAULT_BAUD: u32 = 115_200;

/// The highest baud rate accepted: 12 Mbaud, what the fastest common USB
/// serial adapters run at.
pub const MAX_BAUD: u32 = 12_000_000;

/// Line bits per byte accepted: 8 (bare bytes, no start or stop bits) to
/// 12 (a start bit, 8 data bits, parity and two stop bits). SLIP needs all
/// 8 data bits, so there is no 7-bit framing.
pub const BITS_PER_BYTE: std::ops::RangeInclusive<u32> = 8..=12;

/// Parameters of a [`SlipLink`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlipConfig {
    /// Line bits per second, the same in both directions.
    pub baud: NonZeroU32,
    /// Line bits per byte ([`slip::BITS_PER_BYTE_8N1`] for 8N1).
    pub bits_per_byte: u32,
    /// One-way propagation delay.
    pub delay: SimDuration,
    /// Frames that may wait at each end, excluding the one being sent.
    pub queue_capacity: usize,
    /// Probability in [0, 1] that a frame is lost on the line.
    pub loss: f64,
}

impl SlipConfig {
    /// The study's line: 115 200 baud, 8N1, no delay, the default queue,
    /// no losses.
    pub fn default_line() -> SlipConfig {
        SlipConfig {
            baud: NonZeroU32::new(DEFAULT_BAUD).expect("positive"),
            bits_per_byte: slip::BITS_PER_BYTE_8N1,
            delay: SimDuration::ZERO,
            queue_capacity: DEFAULT_QUEUE,
            loss: 0.0,
        }
    }

    /// How long `line_bytes` bytes take on the line.
    pub fn serial_time(&self, line_bytes: u32) -> SimDuration {
        SimDuration::from_nanos(slip::serial_time_ns(
            line_bytes as usize,
            self.baud,
            self.bits_per_byte,
        ))
    }

    /// The rate at which the line carries bytes, in bits per second
    /// (rounded down): `baud × 8 / bits_per_byte`.
    pub fn data_rate_bps(&self) -> u64 {
        u64::from(self.baud.get()) * 8 / u64::from(self.bits_per_byte)
    }
}

/// Counters of a [`SlipLink`], indexed by sending port.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlipStats {
    /// What a point-to-point link counts, in IP bytes.
    pub directions: [DirectionStats; 2],
    /// Bytes of SLIP frames (escapes and `END`s included) that started
    /// crossing.
    pub line_bytes_sent: [u64; 2],
    /// Bytes of SLIP frames delivered to the other end.
    pub line_bytes_delivered: [u64; 2],
}

/// A full-duplex SLIP serial line between ports 0 and 1: a
/// point-to-point link whose frames are timed and counted by their SLIP
/// encoding.
///
/// As on a [`P2pLink`], each frame's timing is fixed when it is queued;
/// starts are accounted for at the first call at or after them, and with
/// start notices on (the default) the line asks to be woken at each so
/// [`super::LinkOutput::TxStart`] comes at its exact time.
#[derive(Debug)]
pub struct SlipLink<P> {
    config: SlipConfig,
    line: P2pLink<P>,
}

impl<P: Copy> SlipLink<P> {
    /// A new idle line; `rng` decides losses.
    pub fn new(config: SlipConfig, rng: SimRng) -> Self {
        let wired = P2pConfig {
            // Only for what reads a link's rate; frames are timed by
            // `serial_time` (see the module documentation).
            rate_bps: config.data_rate_bps(),
            delay: config.delay,
            queue_capacity: config.queue_capacity,
            loss: config.loss,
        };
        SlipLink {
            config,
            line: P2pLink::new(wired, rng),
        }
    }

    /// The line's parameters.
    pub fn config(&self) -> &SlipConfig {
        &self.config
    }

    /// Hands the datagram `datagram`, whose handle is `frame`, from port
    /// `from` (0 or 1) to the line; it goes to the other port.
    pub fn send(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        datagram: &[u8],
        out: &mut LinkOut<P>,
    ) {
        let line_len = u32::try_from(slip::encoded_len(datagram)).unwrap_or(u32::MAX);
        self.send_encoded(now, from, frame, line_len, out);
    }

    /// Queues `frame`, `line_len` bytes once SLIP-encoded.
    fn send_encoded(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        line_len: u32,
        out: &mut LinkOut<P>,
    ) {
        let tx = self.config.serial_time(line_len);
        self.line
            .transmit_timed(now, from, frame, line_len, tx, out);
    }

    /// Delivers arrivals and accounts for starts due at or before `now`.
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        self.line.handle_timeout(now, out);
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.line.poll_timeout()
    }

    /// A snapshot of the counters as of `now`: frames that started by then
    /// count as sent even if no call has accounted for them yet.
    pub fn stats(&self, now: SimTime) -> SlipStats {
        let (line_bytes_sent, line_bytes_delivered) = self.line.wire_bytes(now);
        SlipStats {
            directions: self.line.stats(now).directions,
            line_bytes_sent,
            line_bytes_delivered,
        }
    }
}

impl<P: Copy> LinkModel<P> for SlipLink<P> {
    type Stats = SlipStats;

    /// Without the bytes, the frame is timed as if nothing in it needed
    /// escaping: its length and the two `END`s.
    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        _to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        let line_len = frame.len.saturating_add(2);
        self.send_encoded(now, from, frame, line_len, out);
    }

    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        SlipLink::handle_timeout(self, now, out);
    }

    fn poll_timeout(&self) -> Option<SimTime> {
        SlipLink::poll_timeout(self)
    }

    fn stats(&self, now: SimTime) -> SlipStats {
        SlipLink::stats(self, now)
    }

    fn set_start_notices(&mut self, on: bool) {
        self.line.set_start_notices(on);
    }

    fn medium(&self) -> Medium {
        Medium::Ip
    }

    fn transmit_datagram(
        &mut self,
        now: SimTime,
        from: Port,
        frame: Frame<P>,
        datagram: Datagram<'_>,
        out: &mut LinkOut<P>,
    ) {
        self.send(now, from, frame, datagram.bytes, out);
    }
}

/// The `[[link]]` fields of a SLIP serial line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlip {
    /// The two ends, as on a point-to-point link. Required.
    ends: Option<Vec<RawEnd>>,
    /// Line rate, 1 to 12000000. Unit: bit/s. Default: 115200.
    baud: Option<u64>,
    /// Line bits per byte sent, 8 to 12 (start, data, parity and stop bits). Unit: bits.
    /// Default: 10 (8N1).
    bits_per_byte: Option<u64>,
    /// One-way propagation delay. Default: `"0s"`.
    delay: Option<Duration>,
    /// Datagrams that may wait at each end. Unit: packets. Default: 100.
    queue: Option<usize>,
    /// Probability that a datagram is lost, 0 to 1. Default: 0.
    loss: Option<f64>,
}

/// A validated SLIP serial line.
#[derive(Clone, Debug, PartialEq)]
pub struct SlipSpec {
    /// The two ends.
    pub ends: [EndSpec; 2],
    /// Its line.
    pub config: SlipConfig,
}

impl ScenarioLink for SlipSpec {
    const KIND: &'static str = "slip";
    // The emulator hands links frames without their bytes
    // (`LinkModel::transmit`), which cannot be timed by their encoding.
    const EMULATED: bool = false;
    type Raw = RawSlip;
    type Model = SlipLink<PacketId>;

    fn validate(raw: RawSlip, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        let (ends, _) = two_ends(&raw.ends, cx, false)?;
        let baud = raw.baud.unwrap_or(u64::from(DEFAULT_BAUD));
        let baud = u32::try_from(baud)
            .ok()
            .filter(|b| (1..=MAX_BAUD).contains(b))
            .and_then(NonZeroU32::new)
            .ok_or_else(|| {
                ScenarioError::new(
                    cx.at("baud"),
                    format!("must be between 1 and {MAX_BAUD} line bits per second, got {baud}"),
                )
            })?;
        let bits = raw
            .bits_per_byte
            .unwrap_or(u64::from(slip::BITS_PER_BYTE_8N1));
        let bits_per_byte = u32::try_from(bits)
            .ok()
            .filter(|b| BITS_PER_BYTE.contains(b))
            .ok_or_else(|| {
                ScenarioError::new(
                    cx.at("bits_per_byte"),
                    format!(
                        "must be between {} and {} (10 for 8N1), got {bits}",
                        BITS_PER_BYTE.start(),
                        BITS_PER_BYTE.end()
                    ),
                )
            })?;
        let loss = loss_probability(raw.loss, cx)?;
        Ok(SlipSpec {
            ends,
            config: SlipConfig {
                baud,
                bits_per_byte,
                delay: raw.delay.map_or(SimDuration::ZERO, |d| d.0),
                queue_capacity: raw.queue.unwrap_or(DEFAULT_QUEUE),
                loss,
            },
        })
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.ends.iter().map(EndSpec::attachment).collect()
    }

    /// The rate at which it carries bytes, escapes aside.
    fn rate_bps(&self) -> u64 {
        self.config.data_rate_bps()
    }

    fn build(&self, rng: SimRng) -> SlipLink<PacketId> {
        SlipLink::new(self.config, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Emitted, LinkOutput, LinkTrace};
    use crate::rng::component_stream;
    use crate::trace::DropReason;

    fn line(queue: usize, delay: SimDuration) -> SlipLink<u32> {
        SlipLink::new(
            SlipConfig {
                queue_capacity: queue,
                delay,
                ..SlipConfig::default_line()
            },
            component_stream(1, "link/slip"),
        )
    }

    /// `n` bytes, none of them `END` or `ESC`.
    fn plain(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 0x80) as u8).collect()
    }

    fn datagram(bytes: &[u8]) -> Datagram<'_> {
        Datagram {
            bytes,
            uid: 0,
            ip: None,
        }
    }

    fn frame(id: u32, datagram: &[u8]) -> Frame<u32> {
        Frame {
            packet: id,
            len: datagram.len() as u32,
        }
    }

    /// `bytes` line bytes at 115 200 baud, 8N1, in ns, rounded up.
    fn at_115200(bytes: u64) -> u64 {
        (bytes * 10 * 1_000_000_000).div_ceil(115_200)
    }

    use crate::link::drain_link as drain;

    fn deliveries(log: &[(SimTime, LinkOutput<u32>)]) -> Vec<(u64, Port, u32)> {
        log.iter()
            .filter_map(|(t, o)| match o {
                LinkOutput::Delivered { port, frame } => Some((t.as_nanos(), *port, frame.packet)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_plain_datagram_takes_its_bytes_and_two_ends() {
        let mut l = line(10, SimDuration::ZERO);
        let d = plain(48);
        let mut out = LinkOut::traced();
        l.transmit_datagram(SimTime::ZERO, 0, frame(1, &d), datagram(&d), &mut out);
        assert_eq!(
            out.take_all(),
            [
                Emitted::Trace(LinkTrace::Enqueued {
                    port: 0,
                    frame: frame(1, &d),
                    queue_len: 0
                }),
                Emitted::Output(LinkOutput::TxStart {
                    port: 0,
                    frame: frame(1, &d)
                }),
            ]
        );
        out.clear();
        let log = drain(&mut l, &mut out);
        // (48 + 2) bytes × 10 bits / 115 200 bit/s = 4.340277… ms.
        assert_eq!(at_115200(50), 4_340_278);
        assert_eq!(
            log,
            [(
                SimTime::from_nanos(4_340_278),
                LinkOutput::Delivered {
                    port: 1,
                    frame: frame(1, &d)
                }
            )]
        );
        let s = l.stats(SimTime::MAX);
        assert_eq!(s.directions[0].sent_bytes, 48);
        assert_eq!(s.directions[0].delivered_bytes, 48);
        assert_eq!(s.directions[0].busy_ns, 4_340_278);
        assert_eq!(s.line_bytes_sent, [50, 0]);
        assert_eq!(s.line_bytes_delivered, [50, 0]);
    }

    #[test]
    fn escaped_bytes_take_a_byte_s_time_more_each() {
        let mut l = line(10, SimDuration::ZERO);
        let mut d = plain(48);
        d[3] = slip::END;
        d[20] = slip::ESC;
        let mut out = LinkOut::new();
        l.transmit_datagram(SimTime::ZERO, 0, frame(1, &d), datagram(&d), &mut out);
        out.clear();
        let log = drain(&mut l, &mut out);
        // 52 line bytes: 4.513888… ms, two bytes' 173.611 µs more.
        assert_eq!(deliveries(&log), [(4_513_889, 1, 1)]);
        assert_eq!(4_513_889 - at_115200(50), 173_611);
        let s = l.stats(SimTime::MAX);
        // The frame is still the datagram's 48 bytes; the line carried 52.
        assert_eq!(s.directions[0].delivered_bytes, 48);
        assert_eq!(s.line_bytes_delivered[0], 52);
    }

    #[test]
    fn back_to_back_frames_queue_behind_each_other() {
        let mut l = line(10, SimDuration::ZERO);
        let d = plain(48);
        let mut out = LinkOut::traced();
        for id in 1..=3 {
            l.transmit_datagram(SimTime::ZERO, 0, frame(id, &d), datagram(&d), &mut out);
        }
        let queued: Vec<u32> = out
            .traces()
            .filter_map(|o| match o {
                LinkTrace::Enqueued { queue_len, .. } => Some(*queue_len),
                _ => None,
            })
            .collect();
        assert_eq!(queued, [0, 0, 1]);
        out.clear();
        let log = drain(&mut l, &mut out);
        // Each frame's end is rounded up on its own.
        let one = at_115200(50);
        assert_eq!(
            deliveries(&log),
            [(one, 1, 1), (2 * one, 1, 2), (3 * one, 1, 3)]
        );
        let starts: Vec<u64> = log
            .iter()
            .filter(|(_, o)| matches!(o, LinkOutput::TxStart { .. }))
            .map(|(t, _)| t.as_nanos())
            .collect();
        assert_eq!(starts, [one, 2 * one]);
        assert_eq!(l.stats(SimTime::MAX).directions[0].max_queue_len, 2);
    }

    #[test]
    fn directions_are_independent() {
        let mut l = line(10, SimDuration::ZERO);
        let a = plain(48);
        let b = plain(100);
        let mut out = LinkOut::new();
        l.transmit_datagram(SimTime::ZERO, 0, frame(1, &a), datagram(&a), &mut out);
        l.transmit_datagram(SimTime::ZERO, 1, frame(2, &b), datagram(&b), &mut out);
        out.clear();
        let log = drain(&mut l, &mut out);
        assert_eq!(
            deliveries(&log),
            [(at_115200(50), 1, 1), (at_115200(102), 0, 2)]
        );
        let s = l.stats(SimTime::MAX);
        assert_eq!(s.line_bytes_sent, [50, 102]);
        assert_eq!(s.directions[1].delivered_packets, 1);
    }

    #[test]
    fn a_full_queue_drops_the_tail() {
        let mut l = line(1, SimDuration::ZERO);
        let d = plain(48);
        let mut out = LinkOut::new();
        for id in 1..=3 {
            l.transmit_datagram(SimTime::ZERO, 0, frame(id, &d), datagram(&d), &mut out);
        }
        assert_eq!(
            out.last(),
            Some(&LinkOutput::Dropped {
                port: 0,
                frame: frame(3, &d),
                reason: DropReason::QueueFull
            })
        );
        out.clear();
        let log = drain(&mut l, &mut out);
        assert_eq!(deliveries(&log).len(), 2);
        let s = l.stats(SimTime::MAX).directions[0];
        assert_eq!(
            (s.enqueued, s.dropped_queue_full, s.delivered_packets),
            (2, 1, 2)
        );
    }

    #[test]
    fn the_delay_adds_to_the_serial_time() {
        let mut l = line(10, SimDuration::from_millis(3));
        let d = plain(48);
        let mut out = LinkOut::new();
        l.transmit_datagram(SimTime::ZERO, 0, frame(1, &d), datagram(&d), &mut out);
        l.transmit_datagram(SimTime::ZERO, 0, frame(2, &d), datagram(&d), &mut out);
        out.clear();
        let log = drain(&mut l, &mut out);
        let one = at_115200(50);
        // The delay does not hold the sender: the second frame follows the
        // first at once.
        assert_eq!(
            deliveries(&log),
            [(one + 3_000_000, 1, 1), (2 * one + 3_000_000, 1, 2)]
        );
    }

    #[test]
    fn other_line_framings_and_rates() {
        let mut l = SlipLink::new(
            SlipConfig {
                baud: NonZeroU32::new(9600).unwrap(),
                bits_per_byte: 11,
                ..SlipConfig::default_line()
            },
            component_stream(1, "link/slip"),
        );
        let d = plain(98);
        let mut out = LinkOut::new();
        l.transmit_datagram(SimTime::ZERO, 1, frame(1, &d), datagram(&d), &mut out);
        out.clear();
        // 100 bytes × 11 bits at 9600 baud: 114.583333… ms.
        assert_eq!(deliveries(&drain(&mut l, &mut out)), [(114_583_334, 0, 1)]);
        assert_eq!(l.config().data_rate_bps(), 6981);
    }

    #[test]
    fn plain_transmit_assumes_nothing_to_escape() {
        let mut l = line(10, SimDuration::ZERO);
        let mut out = LinkOut::new();
        let f = Frame { packet: 7, len: 48 };
        LinkModel::transmit(&mut l, SimTime::ZERO, 0, 0, f, &mut out);
        out.clear();
        assert_eq!(
            deliveries(&drain(&mut l, &mut out)),
            [(at_115200(50), 1, 7)]
        );
        assert_eq!(LinkModel::<u32>::medium(&l), Medium::Ip);
    }

    #[test]
    fn without_start_notices_the_same_frames_arrive_at_the_same_times() {
        let run = |notices: bool| {
            let mut l = line(1, SimDuration::ZERO);
            l.set_start_notices(notices);
            let d = plain(200);
            let mut out = LinkOut::new();
            for id in 0..4 {
                l.transmit_datagram(SimTime::ZERO, 0, frame(id, &d), datagram(&d), &mut out);
            }
            let sent_at_first_end = l.stats(SimTime::from_nanos(at_115200(202)));
            let log: Vec<_> = drain(&mut l, &mut out)
                .into_iter()
                .filter(|(_, o)| !matches!(o, LinkOutput::TxStart { .. }))
                .collect();
            (log, sent_at_first_end, l.stats(SimTime::MAX))
        };
        let (loud, loud_mid, loud_end) = run(true);
        let (quiet, quiet_mid, quiet_end) = run(false);
        assert_eq!(loud, quiet);
        assert_eq!(loud_end, quiet_end);
        // The second frame started when the first ended, whether or not a
        // call accounted for it.
        assert_eq!(quiet_mid.directions[0].sent_packets, 2);
        assert_eq!(quiet_mid.line_bytes_sent[0], 404);
        assert_eq!(loud_mid, quiet_mid);
    }

    fn validate(fields: &str) -> Result<SlipSpec, ScenarioError> {
        let toml = format!(
            r#"
name = "t"
duration = "1s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
name = "serial"
kind = "slip"
ends = [ {{ host = "a", address = "10.0.0.1/24" }},
         {{ host = "b", address = "10.0.0.2/24" }} ]
{fields}
"#
        );
        let s = crate::Scenario::from_toml_str(&toml)?;
        match &s.links[0].model {
            super::super::LinkModelSpec::Slip(spec) => Ok(spec.clone()),
            other => panic!("not a slip link: {other:?}"),
        }
    }

    #[test]
    fn defaults_are_the_study_s_line() {
        let spec = validate("").unwrap();
        assert_eq!(spec.config, SlipConfig::default_line());
        assert_eq!(spec.config.data_rate_bps(), 92_160);
        let spec =
            validate("baud = 9600\nbits_per_byte = 11\nqueue = 4\ndelay = \"2ms\"\nloss = 0.5")
                .unwrap();
        assert_eq!(
            spec.config,
            SlipConfig {
                baud: NonZeroU32::new(9600).unwrap(),
                bits_per_byte: 11,
                delay: SimDuration::from_millis(2),
                queue_capacity: 4,
                loss: 0.5,
            }
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let err = |fields: &str| validate(fields).unwrap_err().to_string();
        for (fields, path) in [
            ("baud = 0", "link[0].baud"),
            ("baud = 12000001", "link[0].baud"),
            ("baud = 5000000000", "link[0].baud"),
            ("bits_per_byte = 7", "link[0].bits_per_byte"),
            ("bits_per_byte = 13", "link[0].bits_per_byte"),
            ("loss = 1.5", "link[0].loss"),
            ("loss = -0.1", "link[0].loss"),
            ("rate = \"1Mbps\"", "link[0].rate"),
        ] {
            let e = err(fields);
            assert!(e.starts_with(path), "{fields}: {e}");
        }
        assert!(err("baud = 0").contains("between 1 and 12000000"));
        assert!(err("bits_per_byte = 7").contains("between 8 and 12"));
    }
}
