//! Shared broadcast medium with a unit-disk radio model.
//!
//! Members have positions in metres. A transmission is heard by every member
//! within the interference range of the sender; those within the (shorter)
//! transmission range could decode it. At each receiver, two signals that
//! overlap in time both become undecodable ("collision"), and a radio cannot
//! receive while it transmits. Frames are unicast at the link layer: the
//! addressed member receives the frame, the others only hear the signal
//! (which still collides with what they receive and makes them sense the
//! medium busy).
//!
//! Channel access is a plug-in ([`crate::mac`]): by default a member with
//! nothing on air transmits at once (ALOHA), otherwise the frame waits in
//! its drop-tail queue; with `mac = { kind = "csma-ca" }` it backs off and
//! senses the carrier first ([`BroadcastMedium::carrier_sense`]).
//! Acknowledgements, retries and duty cycling are not modelled yet.

use std::collections::VecDeque;

use rtolab_time::{SimDuration, SimTime};
use serde::{Deserialize, Serialize};

use super::{
    admit, Frame, LinkCheck, LinkModel, LinkOut, LinkOutput, Medium, Port, ScenarioLink,
    DEFAULT_QUEUE,
};
use crate::cidr::Ipv4Cidr;
use crate::config::{check_position, required, Attachment, Rate, ScenarioError};
use crate::mac::{AnyMac, Mac, MacSpec, MacStep};
use crate::pool::PacketId;
use crate::position::Position;
use crate::rng::{component_stream, SimRng};
use crate::trace::DropReason;

/// Speed of light in vacuum, m/s, for propagation delays.
const SPEED_OF_LIGHT: f64 = 299_792_458.0;

/// Parameters of a [`BroadcastMedium`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BroadcastConfig {
    /// Bits per second of every transmission.
    pub rate_bps: u64,
    /// Receivers within this distance (m) can decode a transmission.
    pub tx_range: f64,
    /// Receivers within this distance (m) are disturbed by a transmission;
    /// at least `tx_range`.
    pub interference_range: f64,
    /// Frames that may wait at each member, excluding the one on air.
    pub queue_capacity: usize,
}

/// Counters of one member of a [`BroadcastMedium`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemberStats {
    /// Frames accepted into the queue.
    pub enqueued: u64,
    /// Frames dropped because the queue was full.
    pub dropped_queue_full: u64,
    /// Frames transmitted.
    pub sent_packets: u64,
    /// Bytes transmitted.
    pub sent_bytes: u64,
    /// Frames sent whose addressee was out of transmission range.
    pub out_of_range: u64,
    /// Frames addressed to this member and received intact.
    pub delivered_packets: u64,
    /// Bytes addressed to this member and received intact.
    pub delivered_bytes: u64,
    /// Frames addressed to this member lost to overlapping signals.
    pub collisions: u64,
    /// Frames addressed to this member lost because it was transmitting.
    pub receiver_transmitting: u64,
    /// Decodable transmissions addressed to other members.
    pub overheard: u64,
    /// Longest queue seen, in frames.
    pub max_queue_len: u64,
    /// Time spent transmitting, in ns.
    pub busy_ns: u64,
    /// Clear channel assessments that found the medium busy (left out of
    /// reports while zero, as under ALOHA).
    #[serde(skip_serializing_if = "is_zero")]
    pub busy_channels: u64,
    /// Frames dropped because the MAC gave up on a busy channel.
    #[serde(skip_serializing_if = "is_zero")]
    pub channel_access_failures: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counters of a [`BroadcastMedium`], one entry per member (port).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BroadcastStats {
    /// `members[p]` counts for port `p`.
    pub members: Vec<MemberStats>,
}

#[derive(Debug)]
struct Member<P> {
    position: Position,
    queue: VecDeque<(Port, Frame<P>)>,
    /// End of the member's current transmission.
    on_air_until: Option<SimTime>,
    /// A frame sent to an addressee out of range, dropped when sending ends.
    unreachable: Option<Frame<P>>,
    /// Channel access for the frame at the head of the queue.
    mac: AnyMac,
    /// The MAC's next step for that frame, and when.
    access: Option<(SimTime, Access)>,
    stats: MemberStats,
}

/// A pending step of a member's channel access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Sense,
    Transmit,
}

/// A signal arriving at one receiver.
#[derive(Debug)]
struct Signal<P> {
    receiver: Port,
    start: SimTime,
    end: SimTime,
    /// Why it cannot be decoded, if it cannot.
    spoiled: Option<DropReason>,
    /// The frame, when this receiver is its addressee and in range.
    frame: Option<Frame<P>>,
}

impl<P> Signal<P> {
    fn overlaps(&self, start: SimTime, end: SimTime) -> bool {
        self.start < end && start < self.end
    }

    fn spoil(&mut self, reason: DropReason) {
        self.spoiled.get_or_insert(reason);
    }
}

/// A shared radio medium with unit-disk reception and interference.
#[derive(Debug)]
pub struct BroadcastMedium<P> {
    config: BroadcastConfig,
    mac: MacSpec,
    members: Vec<Member<P>>,
    signals: Vec<Signal<P>>,
    rng: SimRng,
}

impl<P: Copy> BroadcastMedium<P> {
    /// A medium with no members yet, whose members send at once (ALOHA).
    pub fn new(config: BroadcastConfig) -> Self {
        // ALOHA draws nothing, so any stream will do.
        BroadcastMedium::with_mac(config, MacSpec::default(), component_stream(0, "aloha"))
    }

    /// A medium whose members access the channel with `mac`, drawing their
    /// backoffs from `rng`.
    pub fn with_mac(config: BroadcastConfig, mac: MacSpec, rng: SimRng) -> Self {
        BroadcastMedium {
            config,
            mac,
            members: Vec::new(),
            signals: Vec::new(),
            rng,
        }
    }

    /// The medium's parameters.
    pub fn config(&self) -> &BroadcastConfig {
        &self.config
    }

    /// Adds a member at `position`; returns its port.
    pub fn add_member(&mut self, position: Position) -> Port {
        self.members.push(Member {
            position,
            queue: VecDeque::new(),
            on_air_until: None,
            unreachable: None,
            mac: self.mac.build(),
            access: None,
            stats: MemberStats::default(),
        });
        (self.members.len() - 1) as Port
    }

    /// Number of members.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// The position of member `port`.
    pub fn position(&self, port: Port) -> Position {
        self.members[port as usize].position
    }

    /// Carrier sense: whether member `port` hears the medium busy at `now`,
    /// because it is transmitting or a signal from within its interference
    /// range is arriving.
    pub fn carrier_sense(&self, port: Port, now: SimTime) -> bool {
        let member = &self.members[port as usize];
        member.on_air_until.is_some_and(|until| now < until)
            || self
                .signals
                .iter()
                .any(|s| s.receiver == port && s.start <= now && now < s.end)
    }

    /// Hands a frame from member `from` addressed to member `to`.
    pub fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        self.handle_timeout(now, out);
        let member = &mut self.members[from as usize];
        let idle = member.on_air_until.is_none() && member.queue.is_empty();
        let waiting = member.queue.len();
        let full = !idle && waiting >= self.config.queue_capacity;
        let counters = (
            &mut member.stats.enqueued,
            &mut member.stats.dropped_queue_full,
        );
        if !admit(from, frame, waiting, full, counters, out) {
            return;
        }
        member.queue.push_back((to, frame));
        if idle {
            self.ready(now, from, out);
        }
        let member = &mut self.members[from as usize];
        member.stats.max_queue_len = member.stats.max_queue_len.max(member.queue.len() as u64);
    }

    /// Ends transmissions and receptions due at or before `now`, in time
    /// order, and takes channel access steps (starting queued frames).
    pub fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        loop {
            // Signal ends go before transmission ends at the same instant,
            // and both before channel access steps (kinds 0 < 1 < 2), so a
            // carrier sensed as a signal ends finds it gone; ties within a
            // kind go to the lowest index.
            let signal_end = self
                .signals
                .iter()
                .enumerate()
                .map(|(i, s)| (s.end, 0u8, i))
                .min();
            let tx_end = self
                .members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.on_air_until.map(|t| (t, 1u8, i)))
                .min();
            let access = self
                .members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.access.map(|(t, _)| (t, 2u8, i)))
                .min();
            match signal_end.into_iter().chain(tx_end).chain(access).min() {
                Some((t, 0, i)) if t <= now => self.end_signal(i, out),
                Some((t, 1, i)) if t <= now => self.end_transmission(t, i as Port, out),
                Some((t, _, i)) if t <= now => self.access_step(t, i as Port, out),
                _ => break,
            }
        }
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let signals = self.signals.iter().map(|s| s.end);
        let sending = self.members.iter().filter_map(|m| m.on_air_until);
        let access = self.members.iter().filter_map(|m| m.access.map(|(t, _)| t));
        signals.chain(sending).chain(access).min()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> BroadcastStats {
        BroadcastStats {
            members: self.members.iter().map(|m| m.stats).collect(),
        }
    }

    fn propagation(distance: f64) -> SimDuration {
        SimDuration::from_secs_f64(distance / SPEED_OF_LIGHT)
    }

    fn start(&mut self, now: SimTime, from: Port, out: &mut LinkOut<P>) {
        let config = self.config;
        let sender = &mut self.members[from as usize];
        let Some((to, frame)) = sender.queue.pop_front() else {
            return;
        };
        let airtime = SimDuration::transmission(u64::from(frame.len), config.rate_bps);
        let end = now + airtime;
        sender.on_air_until = Some(end);
        sender.stats.sent_packets += 1;
        sender.stats.sent_bytes += u64::from(frame.len);
        sender.stats.busy_ns += airtime.as_nanos();
        let origin = sender.position;
        out.push(LinkOutput::TxStart { port: from, frame });

        // A radio that transmits cannot receive what is arriving meanwhile.
        for s in self.signals.iter_mut() {
            if s.receiver == from && s.overlaps(now, end) {
                s.spoil(DropReason::ReceiverTransmitting);
            }
        }

        let mut delivered = false;
        for (port, member) in self.members.iter_mut().enumerate() {
            let port = port as Port;
            if port == from {
                continue;
            }
            let distance = origin.distance(&member.position);
            if distance > config.interference_range {
                continue;
            }
            let delay = Self::propagation(distance);
            let (start, stop) = (now + delay, end + delay);
            let decodable = distance <= config.tx_range;
            let mut signal = Signal {
                receiver: port,
                start,
                end: stop,
                spoiled: None,
                frame: None,
            };
            for other in self.signals.iter_mut() {
                if other.receiver == port && other.overlaps(start, stop) {
                    other.spoil(DropReason::Collision);
                    signal.spoil(DropReason::Collision);
                }
            }
            if member.on_air_until.is_some_and(|until| start < until) {
                signal.spoil(DropReason::ReceiverTransmitting);
            }
            if decodable {
                if port == to {
                    signal.frame = Some(frame);
                    delivered = true;
                } else {
                    member.stats.overheard += 1;
                }
            }
            self.signals.push(signal);
        }
        if !delivered {
            let sender = &mut self.members[from as usize];
            sender.unreachable = Some(frame);
        }
    }

    fn end_transmission(&mut self, at: SimTime, port: Port, out: &mut LinkOut<P>) {
        let member = &mut self.members[port as usize];
        member.on_air_until = None;
        if let Some(frame) = member.unreachable.take() {
            member.stats.out_of_range += 1;
            out.push(LinkOutput::Dropped {
                port,
                frame,
                reason: DropReason::OutOfRange,
            });
        }
        if !member.queue.is_empty() {
            self.ready(at, port, out);
        }
    }

    /// The frame at the head of `port`'s queue is ready to go, the radio
    /// being free: asks the MAC how.
    fn ready(&mut self, now: SimTime, port: Port, out: &mut LinkOut<P>) {
        let step = self.members[port as usize].mac.ready(now, &mut self.rng);
        self.follow(now, port, step, out);
    }

    /// Carries out a MAC step for the frame at the head of `port`'s queue.
    fn follow(&mut self, now: SimTime, port: Port, mut step: MacStep, out: &mut LinkOut<P>) {
        loop {
            let member = &mut self.members[port as usize];
            match step {
                MacStep::Transmit(at) if at <= now => return self.start(now, port, out),
                MacStep::Transmit(at) => member.access = Some((at, Access::Transmit)),
                MacStep::Sense(at) => member.access = Some((at, Access::Sense)),
                MacStep::Fail => {
                    if let Some((_, frame)) = member.queue.pop_front() {
                        member.stats.channel_access_failures += 1;
                        out.push(LinkOutput::Dropped {
                            port,
                            frame,
                            reason: DropReason::ChannelAccessFailure,
                        });
                    }
                    if !member.queue.is_empty() {
                        step = member.mac.ready(now, &mut self.rng);
                        continue;
                    }
                }
            }
            return;
        }
    }

    /// A channel access step of `port` is due at `at`.
    fn access_step(&mut self, at: SimTime, port: Port, out: &mut LinkOut<P>) {
        let Some((_, access)) = self.members[port as usize].access.take() else {
            return;
        };
        match access {
            Access::Transmit => self.start(at, port, out),
            Access::Sense => {
                let busy = self.carrier_sense(port, at);
                let member = &mut self.members[port as usize];
                if busy {
                    member.stats.busy_channels += 1;
                }
                let step = member.mac.sensed(at, busy, &mut self.rng);
                self.follow(at, port, step, out);
            }
        }
    }

    fn end_signal(&mut self, index: usize, out: &mut LinkOut<P>) {
        // Order of `signals` never affects results: every scan either
        // touches all of them or picks by time and then lowest index.
        let signal = self.signals.swap_remove(index);
        let Some(frame) = signal.frame else {
            return;
        };
        let stats = &mut self.members[signal.receiver as usize].stats;
        match signal.spoiled {
            None => {
                stats.delivered_packets += 1;
                stats.delivered_bytes += u64::from(frame.len);
                out.push(LinkOutput::Delivered {
                    port: signal.receiver,
                    frame,
                });
            }
            Some(reason) => {
                if reason == DropReason::Collision {
                    stats.collisions += 1;
                } else {
                    stats.receiver_transmitting += 1;
                }
                out.push(LinkOutput::Dropped {
                    port: signal.receiver,
                    frame,
                    reason,
                });
            }
        }
    }
}

impl<P: Copy> LinkModel<P> for BroadcastMedium<P> {
    type Stats = BroadcastStats;

    #[inline]
    fn transmit(
        &mut self,
        now: SimTime,
        from: Port,
        to: Port,
        frame: Frame<P>,
        out: &mut LinkOut<P>,
    ) {
        BroadcastMedium::transmit(self, now, from, to, frame, out);
    }

    #[inline]
    fn handle_timeout(&mut self, now: SimTime, out: &mut LinkOut<P>) {
        BroadcastMedium::handle_timeout(self, now, out);
    }

    #[inline]
    fn poll_timeout(&self) -> Option<SimTime> {
        BroadcastMedium::poll_timeout(self)
    }

    fn stats(&self, _now: SimTime) -> BroadcastStats {
        BroadcastMedium::stats(self)
    }

    fn max_ports(&self) -> Option<usize> {
        None
    }

    fn medium(&self) -> Medium {
        Medium::Broadcast
    }

    fn add_port(&mut self, _index: Port, position: Option<Position>) -> Option<Port> {
        position.map(|p| self.add_member(p))
    }

    fn carrier_sense(&self, port: Port, now: SimTime) -> bool {
        BroadcastMedium::carrier_sense(self, port, now)
    }
}

/// A member of a broadcast medium, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMember {
    /// The member's host. Required.
    host: String,
    /// Its IPv4 interface address with the prefix, like `"10.1.0.1/24"`. Required.
    address: Ipv4Cidr,
    /// Where it stands, `{ x, y }` in metres. Default: the host's position.
    position: Option<Position>,
}

/// The `[[link]]` fields of a broadcast medium.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBroadcast {
    /// The interfaces on the medium: `{ host, address, position }` each, `position` (metres)
    /// defaulting to the host's. Required.
    members: Option<Vec<RawMember>>,
    /// Bit rate of the shared channel, like `"250kbps"`. Required.
    rate: Option<Rate>,
    /// Distance within which a frame is received (unit-disk model). Unit: m. Required.
    tx_range: Option<f64>,
    /// Distance within which a transmission collides with others, at least `tx_range`. Unit: m.
    /// Required.
    interference_range: Option<f64>,
    /// Frames that may wait at each member. Unit: packets. Default: 100.
    queue: Option<usize>,
    /// Channel access, `{ kind = "…", … }`: a MAC of `rtolab list macs`. Default: `{ kind =
    /// "aloha" }` (send at once).
    mac: Option<toml::Table>,
}

/// A member of a broadcast medium.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberSpec {
    /// Host name.
    pub host: String,
    /// Interface address.
    pub address: Ipv4Cidr,
    /// Position, metres (the host's if not given in the member).
    pub position: Position,
}

/// `kind = "broadcast"`: a [`BroadcastMedium`].
#[derive(Clone, Debug, PartialEq)]
pub struct BroadcastSpec {
    /// Attached interfaces.
    pub members: Vec<MemberSpec>,
    /// Bits per second.
    pub rate_bps: u64,
    /// Decoding range, metres.
    pub tx_range: f64,
    /// Interference range, metres.
    pub interference_range: f64,
    /// Packets that may wait at each member.
    pub queue: usize,
    /// Channel access of every member.
    pub mac: MacSpec,
}

impl ScenarioLink for BroadcastSpec {
    const KIND: &'static str = "broadcast";
    // The emulator has no shared medium yet.
    const EMULATED: bool = false;
    type Raw = RawBroadcast;
    type Model = BroadcastMedium<PacketId>;

    fn validate(raw: RawBroadcast, cx: &mut LinkCheck<'_>) -> Result<Self, ScenarioError> {
        let rate = required(&raw.rate, cx.at("rate"), &cx.what)?.0;
        let tx_range = required(&raw.tx_range, cx.at("tx_range"), &cx.what)?;
        if !(tx_range.is_finite() && tx_range > 0.0) {
            return Err(ScenarioError::new(
                cx.at("tx_range"),
                format!("must be a positive distance in metres, got {tx_range}"),
            ));
        }
        let interference_range = required(
            &raw.interference_range,
            cx.at("interference_range"),
            &cx.what,
        )?;
        if !(interference_range.is_finite() && interference_range >= tx_range) {
            return Err(ScenarioError::new(
                cx.at("interference_range"),
                format!("must be at least tx_range ({tx_range}), got {interference_range}"),
            ));
        }
        let raw_members = raw.members.as_ref().ok_or_else(|| cx.required("members"))?;
        if raw_members.len() < 2 {
            return Err(ScenarioError::new(
                cx.at("members"),
                format!(
                    "a broadcast link needs at least 2 members, got {}",
                    raw_members.len()
                ),
            ));
        }
        let mut members = Vec::new();
        for (m, member) in raw_members.iter().enumerate() {
            let member_at = |field: &str| format!("link[{}].members[{m}].{field}", cx.index);
            cx.topology.host(&member_at("host"), &member.host)?;
            if cx.topology.is_bridge(&member.host) {
                return Err(ScenarioError::new(
                    member_at("host"),
                    format!(
                        "{:?} is a bridge: it joins wired and nfc links only",
                        member.host
                    ),
                ));
            }
            if raw_members[..m]
                .iter()
                .any(|other| other.host == member.host)
            {
                return Err(ScenarioError::new(
                    member_at("host"),
                    format!("host {:?} is already a member of this link", member.host),
                ));
            }
            let position = member
                .position
                .or(cx.topology.host_position(&member.host))
                .ok_or_else(|| {
                    ScenarioError::new(
                        member_at("position"),
                        format!("required (host {:?} has no position either)", member.host),
                    )
                })?;
            check_position(member_at("position"), &position)?;
            cx.topology
                .assign(&member_at("address"), &member.host, cx.name, member.address)?;
            members.push(MemberSpec {
                host: member.host.clone(),
                address: member.address,
                position,
            });
        }
        Ok(BroadcastSpec {
            members,
            rate_bps: rate,
            tx_range,
            interference_range,
            queue: raw.queue.unwrap_or(DEFAULT_QUEUE),
            mac: match raw.mac {
                Some(table) => MacSpec::parse(table, &cx.at("mac"))?,
                None => MacSpec::default(),
            },
        })
    }

    fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    fn attachments(&self) -> Vec<Attachment> {
        self.members
            .iter()
            .map(|m| Attachment {
                host: m.host.clone(),
                address: Some(m.address),
                ipv6: None,
                position: Some(m.position),
            })
            .collect()
    }

    fn build(&self, rng: SimRng) -> BroadcastMedium<PacketId> {
        BroadcastMedium::with_mac(
            BroadcastConfig {
                rate_bps: self.rate_bps,
                tx_range: self.tx_range,
                interference_range: self.interference_range,
                queue_capacity: self.queue,
            },
            self.mac.clone(),
            rng,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LinkOutput::*;

    const A: Port = 0;
    const B: Port = 1;
    const C: Port = 2;

    fn frame(id: u32) -> Frame<u32> {
        Frame {
            packet: id,
            len: 125,
        } // 1 ms at 1 Mbit/s
    }

    fn medium(positions: &[(f64, f64)]) -> BroadcastMedium<u32> {
        let mut m = BroadcastMedium::new(BroadcastConfig {
            rate_bps: 1_000_000,
            tx_range: 50.0,
            interference_range: 60.0,
            queue_capacity: 4,
        });
        for &(x, y) in positions {
            m.add_member(Position { x, y });
        }
        m
    }

    /// Drives the medium until idle; returns `out` (outputs of earlier
    /// `transmit` calls) followed by everything that happened.
    fn run(m: &mut BroadcastMedium<u32>, mut out: LinkOut<u32>) -> Vec<LinkOutput<u32>> {
        while let Some(t) = m.poll_timeout() {
            m.handle_timeout(t, &mut out);
        }
        out.into_outputs()
    }

    fn receptions(out: &[LinkOutput<u32>]) -> Vec<LinkOutput<u32>> {
        out.iter()
            .filter(|o| matches!(o, Delivered { .. } | Dropped { .. }))
            .cloned()
            .collect()
    }

    /// A and C are in range of B but not of each other.
    fn hidden_terminal() -> BroadcastMedium<u32> {
        medium(&[(0.0, 0.0), (40.0, 0.0), (80.0, 0.0)])
    }

    #[test]
    fn hidden_terminals_collide_at_the_middle_node() {
        let mut m = hidden_terminal();
        let mut out = LinkOut::new();
        m.transmit(SimTime::ZERO, A, B, frame(1), &mut out);
        assert!(
            !m.carrier_sense(C, SimTime::from_micros(1)),
            "C cannot hear A"
        );
        m.transmit(SimTime::from_micros(500), C, B, frame(2), &mut out);
        let log = receptions(&run(&mut m, out));
        assert_eq!(
            log,
            [
                Dropped {
                    port: B,
                    frame: frame(1),
                    reason: DropReason::Collision
                },
                Dropped {
                    port: B,
                    frame: frame(2),
                    reason: DropReason::Collision
                },
            ]
        );
        assert_eq!(m.stats().members[B as usize].collisions, 2);
    }

    #[test]
    fn hidden_terminals_back_to_back_both_arrive() {
        let mut m = hidden_terminal();
        let mut out = LinkOut::new();
        m.transmit(SimTime::ZERO, A, B, frame(1), &mut out);
        // C starts just after A's signal has fully arrived at B
        // (1 ms airtime plus 133 ns propagation over 40 m).
        m.transmit(SimTime::from_nanos(1_000_134), C, B, frame(2), &mut out);
        let log = receptions(&run(&mut m, out));
        assert_eq!(
            log,
            [
                Delivered {
                    port: B,
                    frame: frame(1)
                },
                Delivered {
                    port: B,
                    frame: frame(2)
                },
            ]
        );
    }

    #[test]
    fn a_transmitter_beyond_interference_range_does_not_disturb() {
        // D at 150 m is out of B's interference range (60 m) but is still a
        // member of the medium.
        let mut m = medium(&[(0.0, 0.0), (40.0, 0.0), (80.0, 0.0), (150.0, 0.0)]);
        let mut out = LinkOut::new();
        m.transmit(SimTime::ZERO, A, B, frame(1), &mut out);
        m.transmit(SimTime::from_micros(100), 3, C, frame(2), &mut out);
        let log = receptions(&run(&mut m, out));
        assert!(
            log.contains(&Delivered {
                port: B,
                frame: frame(1)
            }),
            "{log:?}"
        );
        // C (70 m from D) hears nothing it can decode from D: out of range.
        assert!(log.contains(&Dropped {
            port: 3,
            frame: frame(2),
            reason: DropReason::OutOfRange
        }));
    }

    #[test]
    fn interferer_outside_tx_range_but_inside_interference_range_collides() {
        // C at 95 m from A, 55 m from B: it cannot reach B (50 m) but
        // disturbs it (60 m) while sending to a fourth node far from A and B.
        let mut m = medium(&[(0.0, 0.0), (40.0, 0.0), (95.0, 0.0), (130.0, 0.0)]);
        let mut out = LinkOut::new();
        m.transmit(SimTime::ZERO, A, B, frame(1), &mut out);
        m.transmit(SimTime::from_micros(10), C, 3, frame(2), &mut out);
        let log = receptions(&run(&mut m, out));
        assert_eq!(
            log,
            [
                Dropped {
                    port: B,
                    frame: frame(1),
                    reason: DropReason::Collision
                },
                Delivered {
                    port: 3,
                    frame: frame(2)
                },
            ]
        );
    }

    #[test]
    fn transmission_reaches_every_member_in_range() {
        let mut m = medium(&[
            (0.0, 0.0),
            (10.0, 0.0),
            (0.0, 30.0),
            (45.0, 0.0),
            (55.0, 0.0),
            (70.0, 0.0),
        ]);
        let mut out = LinkOut::new();
        m.transmit(SimTime::ZERO, A, B, frame(1), &mut out);
        let sensed: Vec<bool> = (1..=5)
            .map(|port| m.carrier_sense(port, SimTime::from_micros(10)))
            .collect();
        assert_eq!(sensed, [true, true, true, true, false]);
        run(&mut m, out);
        let stats = m.stats().members;
        assert_eq!(stats[1].delivered_packets, 1);
        let overheard: Vec<u64> = stats[2..].iter().map(|s| s.overheard).collect();
        assert_eq!(overheard, [1, 1, 0, 0]);
    }

    #[test]
    fn a_radio_cannot_receive_while_transmitting() {
        let mut m = medium(&[(0.0, 0.0), (40.0, 0.0)]);
        let mut out = LinkOut::new();
        m.transmit(SimTime::ZERO, A, B, frame(1), &mut out);
        m.transmit(SimTime::from_micros(300), B, A, frame(2), &mut out);
        let log = receptions(&run(&mut m, out));
        assert_eq!(
            log,
            [
                Dropped {
                    port: B,
                    frame: frame(1),
                    reason: DropReason::ReceiverTransmitting
                },
                Dropped {
                    port: A,
                    frame: frame(2),
                    reason: DropReason::ReceiverTransmitting
                },
            ]
        );
    }

    #[test]
    fn queued_frames_follow_each_other() {
        let mut m = medium(&[(0.0, 0.0), (40.0, 0.0)]);
        let mut out = LinkOut::new();
        m.transmit(SimTime::ZERO, A, B, frame(1), &mut out);
        m.transmit(SimTime::ZERO, A, B, frame(2), &mut out);
        assert!(m.carrier_sense(A, SimTime::ZERO));
        let log = run(&mut m, out);
        assert_eq!(
            receptions(&log),
            [
                Delivered {
                    port: B,
                    frame: frame(1)
                },
                Delivered {
                    port: B,
                    frame: frame(2)
                }
            ]
        );
        assert!(!m.carrier_sense(A, SimTime::from_millis(3)));
    }
}
