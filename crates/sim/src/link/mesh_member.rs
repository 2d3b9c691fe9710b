//! One node of the low-power mesh above its radio: the MAC stack, the
//! 6LoWPAN adaptation layer (compression, fragmentation, reassembly per
//! sender), RPL, and IPv6 forwarding among the mesh's nodes (route-over,
//! RFC 6550 storing mode).
//!
//! A [`Member`] is driven by the `ieee802154` link model, which owns the
//! radio medium and carries the MAC's radio commands to it. Datagrams come
//! from the simulator node at the member's port ([`Member::from_node`]) or
//! from the MAC ([`Member::mac_event`]); datagrams for the node go up as
//! [`LinkOutput::Arrived`], everything else stays inside: RPL's messages,
//! and datagrams the member forwards for others.
//!
//! A datagram keeps the trace uid the node handed it over with on every
//! hop: the radio carries bytes only, so the members' datagrams on the air
//! are kept by sender ([`OnAir`]) until the MAC reports on them, and the
//! member that reassembles one looks its uid up there.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ieee802154::{Address, MAX_PSDU_LEN};
use rtolab_wire::ipv6::{self, next_header, Ipv6Repr};
use rtolab_wire::sixlowpan::{self, Reassembler};
use rtolab_wire::{checksum, icmpv6};
use serde::Serialize;

use super::{Datagram, Frame, LinkOut, LinkOutput, Port};
use crate::cidr::Ipv6Cidr;
use crate::mesh::mac::{framer, MacEvent, MacPacketId, MacStack, TxStatus, BROADCAST};
use crate::mesh::rpl::addr::{interface_id, is_link_local, link_local, with_iid, ALL_RPL_NODES};
use crate::mesh::rpl::{self, Rpl, RplTransmit};
use crate::trace::DropReason;
use rtolab_tcp::IpRepr;

/// How long a partly reassembled datagram is kept: Contiki's
/// `SICSLOWPAN_REASS_MAXAGE` (20, uipopt.h) × `CLOCK_SECOND` / 16, as
/// sicslowpan.c sets its reassembly timer: 1.25 s.
pub const REASSEMBLY_TIMEOUT: SimDuration = SimDuration::from_millis(1250);

/// Hop limit of the messages RPL sends (`uip_icmp6_send` uses the default
/// `UIP_TTL`, 64).
const RPL_HOP_LIMIT: u8 = 64;

/// The MAC address of the mesh node at `port`, shaped like Cooja's Sky
/// motes' (node id `port + 1`: 00:12:74:0n:00:0n:0n:0n). At most 255
/// members, which scenario validation enforces.
pub fn member_mac(port: Port) -> Address {
    let id = (port + 1) as u8;
    Address::Extended([0x00, 0x12, 0x74, id, 0x00, id, id, id])
}

/// The MAC address a link-local (or any) address's interface identifier
/// was derived from (the inverse of [`interface_id`] for extended
/// addresses).
pub fn mac_of(addr: Ipv6Addr) -> Address {
    let mut iid = [0u8; 8];
    iid.copy_from_slice(&addr.octets()[8..]);
    iid[0] ^= 0x02;
    Address::Extended(iid)
}

/// Counters of the adaptation and forwarding layers of one member.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AdaptationStats {
    /// Datagrams the node at this port handed to the mesh.
    pub from_node: u64,
    /// Datagrams handed up to the node at this port.
    pub to_node: u64,
    /// Datagrams forwarded for other members.
    pub forwarded: u64,
    /// RPL messages sent (multicast and unicast).
    pub rpl_sent: u64,
    /// RPL messages received.
    pub rpl_received: u64,
    /// Datagrams sent in fragments.
    pub fragmented: u64,
    /// Fragments sent (FRAG1 and FRAGN).
    pub fragments_sent: u64,
    /// Fragments received.
    pub fragments_received: u64,
    /// Datagrams reassembled from fragments.
    pub reassembled: u64,
    /// Partly reassembled datagrams given up after [`REASSEMBLY_TIMEOUT`].
    pub reassembly_timeouts: u64,
    /// Frames or datagrams that could not be read.
    pub malformed: u64,
    /// Datagrams dropped: the MAC's queue was full.
    pub dropped_queue_full: u64,
    /// Datagrams dropped: no route (not joined, or no downward route).
    pub dropped_no_route: u64,
    /// Datagrams dropped: hop limit reached while forwarding.
    pub dropped_hop_limit: u64,
    /// Datagrams dropped: a frame went unacknowledged.
    pub dropped_no_ack: u64,
    /// Datagrams dropped: the MAC gave up on a busy channel.
    pub dropped_collision: u64,
    /// Datagrams dropped: the member was off (not booted, or switched off).
    pub dropped_off: u64,
    /// Datagrams that could not be compressed or framed.
    pub dropped_bad_header: u64,
}

/// A datagram on its way out of this member: the simulator's handle while
/// it is held, and its frames the MAC has not reported on yet.
struct Outgoing<P> {
    handle: Option<Frame<P>>,
    in_mac: usize,
    failed: Option<DropReason>,
}

/// A datagram inside the mesh and the trace uid it entered with (`None`:
/// RPL's own, or one whose origin was not found).
struct MeshDatagram {
    bytes: Vec<u8>,
    uid: Option<u64>,
    /// Its IPv6 header, when the node handed it over parsed.
    ip: Option<Ipv6Repr>,
}

/// The datagrams with a trace uid that members have handed to their MACs,
/// shared by the members of one mesh: those the MACs have not reported
/// on yet, and those reported within [`AIR_KEEP`].
#[derive(Default)]
pub struct OnAir {
    datagrams: Vec<Sent>,
    /// Reported on, with when: a receiving MAC that is itself sending
    /// holds a frame it acknowledged until it is done (ContikiMAC's
    /// pending frame), so the sender can report before the receiver reads
    /// it.
    reported: Vec<(Sent, SimTime)>,
}

/// How long a datagram's uid stays findable after its sender's MAC
/// reported on it: as long as a member keeps a partial datagram
/// ([`REASSEMBLY_TIMEOUT`]).
const AIR_KEEP: SimDuration = REASSEMBLY_TIMEOUT;

struct Sent {
    from: Address,
    /// The sender's key for it ([`Member`]'s `outgoing`).
    key: u64,
    bytes: Vec<u8>,
    uid: u64,
}

impl OnAir {
    /// The trace uid of `datagram` as reassembled from `from`'s frames at
    /// `now`. Two datagrams of the same bytes from one sender cannot be
    /// told apart: of those in flight the older one's uid is given, else
    /// that of the one reported on last.
    fn uid(&self, from: Address, datagram: &[u8], now: SimTime) -> Option<u64> {
        let matches = |s: &Sent| s.from == from && s.bytes == datagram;
        self.datagrams
            .iter()
            .find(|s| matches(s))
            .or_else(|| {
                self.reported
                    .iter()
                    .rev()
                    .find(|(s, at)| matches(s) && now < *at + AIR_KEEP)
                    .map(|(s, _)| s)
            })
            .map(|s| s.uid)
    }

    /// `from`'s MAC reported on its datagram `key` at `now`.
    fn remove(&mut self, from: Address, key: u64, now: SimTime) {
        self.reported.retain(|(_, at)| now < *at + AIR_KEEP);
        if let Some(i) = self
            .datagrams
            .iter()
            .position(|s| s.from == from && s.key == key)
        {
            self.reported.push((self.datagrams.swap_remove(i), now));
        }
    }
}

/// Reassembly of the fragments from one sender.
struct Incoming {
    reassembler: Reassembler,
    /// When the oldest partial datagram is given up.
    deadline: Option<SimTime>,
}

/// One mesh node's stack above the radio. See the [module documentation](self).
pub struct Member<P> {
    pub(crate) port: Port,
    pub(crate) mac: MacStack,
    pub(crate) rpl: Rpl,
    prefix: Ipv6Cidr,
    queue_len: usize,
    tag: u16,
    next_out: u64,
    outgoing: BTreeMap<u64, Outgoing<P>>,
    in_mac: BTreeMap<MacPacketId, u64>,
    incoming: BTreeMap<Address, Incoming>,
    pub(crate) stats: AdaptationStats,
}

impl<P: Copy> Member<P> {
    /// The stack of the node at `port`; `queue_len` is its MAC's CSMA
    /// queue (fragments beyond it are refused).
    pub fn new(port: Port, mac: MacStack, rpl: Rpl, prefix: Ipv6Cidr, queue_len: usize) -> Self {
        Member {
            port,
            mac,
            rpl,
            prefix,
            queue_len,
            tag: 0,
            next_out: 0,
            outgoing: BTreeMap::new(),
            in_mac: BTreeMap::new(),
            incoming: BTreeMap::new(),
            stats: AdaptationStats::default(),
        }
    }

    /// The node's global address (the DODAG prefix and its interface
    /// identifier), which it has from the start: the scenario gives it.
    pub fn global(&self) -> Ipv6Addr {
        with_iid(self.prefix.network(), interface_id(self.mac.address()))
    }

    /// The node's link-local address.
    pub fn link_local(&self) -> Ipv6Addr {
        link_local(self.mac.address())
    }

    fn owns(&self, addr: Ipv6Addr) -> bool {
        addr == self.link_local() || addr == self.global()
    }

    /// When the member's own timers (MAC, RPL, reassembly) are next due.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        let reassembly = self.incoming.values().filter_map(|i| i.deadline).min();
        [self.mac.poll_timeout(), self.rpl.poll_timeout(), reassembly]
            .into_iter()
            .flatten()
            .min()
    }

    /// Fires the member's timers due by `now`.
    pub fn handle_timeout(&mut self, now: SimTime) {
        if self.mac.poll_timeout().is_some_and(|t| t <= now) {
            self.mac.handle_timeout(now);
        }
        if self.rpl.poll_timeout().is_some_and(|t| t <= now) {
            self.rpl.handle_timeout(now);
        }
        for incoming in self.incoming.values_mut() {
            if incoming.deadline.is_some_and(|t| t <= now) {
                self.stats.reassembly_timeouts += incoming.reassembler.pending() as u64;
                incoming.reassembler.clear();
                incoming.deadline = None;
            }
        }
    }

    /// A datagram from the node at this port (`frame` is the simulator's
    /// handle for it).
    pub fn send_from_node(
        &mut self,
        now: SimTime,
        frame: Frame<P>,
        datagram: Datagram<'_>,
        air: &mut OnAir,
        out: &mut LinkOut<P>,
    ) {
        self.stats.from_node += 1;
        // The node parsed the header where the datagram entered it.
        let ip = match datagram.ip.map(|ip| ip.header) {
            Some(IpRepr::V6(ip)) => Some(ip),
            _ => None,
        };
        let datagram = MeshDatagram {
            bytes: datagram.bytes.to_vec(),
            uid: Some(datagram.uid),
            ip,
        };
        self.route(now, datagram, Some(frame), false, air, out);
    }

    /// The member was switched off: every datagram it held is lost.
    pub fn switch_off(&mut self, air: &mut OnAir, out: &mut LinkOut<P>) {
        let me = self.mac.address();
        air.datagrams.retain(|s| s.from != me);
        for (_, o) in std::mem::take(&mut self.outgoing) {
            self.stats.dropped_off += 1;
            if let Some(frame) = o.handle {
                out.push(LinkOutput::Dropped {
                    port: self.port,
                    frame,
                    reason: DropReason::LinkDown,
                });
            }
        }
        self.in_mac.clear();
        self.incoming.clear();
    }

    /// A datagram handed to a member that is off.
    pub fn refuse(&mut self, frame: Frame<P>, out: &mut LinkOut<P>) {
        self.stats.from_node += 1;
        self.stats.dropped_off += 1;
        out.push(LinkOutput::Dropped {
            port: self.port,
            frame,
            reason: DropReason::LinkDown,
        });
    }

    /// Routes a datagram: up to the node, to RPL, or on through the MAC;
    /// its header is parsed here unless the node handed it over parsed.
    /// `forwarding`: it came from another member, so it crosses this one.
    // Out of line: inlined into the radio loop it costs that loop's every
    // call (performance.md, "One packet id across every link").
    #[inline(never)]
    fn route(
        &mut self,
        now: SimTime,
        mut datagram: MeshDatagram,
        handle: Option<Frame<P>>,
        forwarding: bool,
        air: &mut OnAir,
        out: &mut LinkOut<P>,
    ) {
        let ip = match datagram.ip.take() {
            Some(ip) => ip,
            None => match parse_ipv6(&datagram.bytes) {
                Ok(ip) => ip,
                Err(_) => {
                    self.stats.malformed += 1;
                    return self.drop(handle, DropReason::BadHeader, out);
                }
            },
        };
        let dst = ip.dst;
        if dst.is_multicast() {
            if handle.is_some() {
                // Link-scope multicast from the node: one broadcast frame.
                return self.send(now, datagram, BROADCAST, handle, air, out);
            }
            return self.local(now, &ip, datagram, out);
        }
        if self.owns(dst) {
            return self.local(now, &ip, datagram, out);
        }
        let on_mesh = is_link_local(dst) || self.prefix.contains(dst);
        if self.rpl.is_root() && !on_mesh {
            // The border router's node forwards it beyond the mesh; one
            // the node itself sent has no way out here.
            if forwarding {
                self.stats.to_node += 1;
                out.push(LinkOutput::arrived(self.port, datagram.bytes, datagram.uid));
                return;
            }
            return self.drop(handle, DropReason::NoRoute, out);
        }
        if forwarding {
            if ip.hop_limit <= 1 {
                return self.drop(handle, DropReason::TtlExpired, out);
            }
            // The hop limit is the 8th byte of the fixed header.
            datagram.bytes[7] = ip.hop_limit - 1;
            self.stats.forwarded += 1;
        }
        let Some(next) = self.rpl.next_hop(dst) else {
            return self.drop(handle, DropReason::NoRoute, out);
        };
        self.send(now, datagram, mac_of(next), handle, air, out);
    }

    /// A datagram addressed to this member (its header `ip`): RPL's, or
    /// the node's.
    fn local(&mut self, now: SimTime, ip: &Ipv6Repr, datagram: MeshDatagram, out: &mut LinkOut<P>) {
        // Only a sound (checksums and all) ICMPv6 message, or one to all
        // RPL nodes, stays here: anything else goes up unread.
        let maybe_rpl = ip.next_header == next_header::ICMPV6 || ip.dst == ALL_RPL_NODES;
        if maybe_rpl && ipv6::parse(&datagram.bytes).is_ok() {
            let payload = &datagram.bytes[ipv6::HEADER_LEN..ip.buffer_len()];
            let rpl_message = ip.next_header == next_header::ICMPV6
                && payload.first() == Some(&icmpv6::msg_type::RPL_CONTROL);
            if rpl_message {
                self.stats.rpl_received += 1;
                // A malformed message is counted in RPL's own statistics.
                let _ = self.rpl.handle_message(now, ip.src, ip.dst, payload);
                return;
            }
            if ip.dst == ALL_RPL_NODES {
                return;
            }
        }
        self.stats.to_node += 1;
        out.push(LinkOutput::arrived(self.port, datagram.bytes, datagram.uid));
    }

    /// Sends one of RPL's messages from the link-local address.
    pub fn send_rpl(
        &mut self,
        now: SimTime,
        tx: RplTransmit,
        air: &mut OnAir,
        out: &mut LinkOut<P>,
    ) {
        let src = self.link_local();
        let mut message = tx.message;
        if message.len() < icmpv6::HEADER_LEN {
            return;
        }
        message[2..4].fill(0);
        let sum = checksum::upper_layer_v6(src, tx.dst, next_header::ICMPV6, &message);
        message[2..4].copy_from_slice(&sum.to_be_bytes());
        let ip = Ipv6Repr {
            src,
            dst: tx.dst,
            next_header: next_header::ICMPV6,
            hop_limit: RPL_HOP_LIMIT,
            traffic_class: 0,
            flow_label: 0,
            payload_len: message.len(),
        };
        let mut datagram = vec![0; ipv6::HEADER_LEN];
        if ip.emit(&mut datagram).is_err() {
            return;
        }
        datagram.extend_from_slice(&message);
        self.stats.rpl_sent += 1;
        let dst = if tx.dst.is_multicast() {
            BROADCAST
        } else {
            mac_of(tx.dst)
        };
        let datagram = MeshDatagram {
            bytes: datagram,
            uid: None,
            ip: None,
        };
        self.send(now, datagram, dst, None, air, out);
    }

    /// Compresses (and if need be fragments) `datagram` for the neighbour
    /// `dst` and hands every frame to the MAC at once, as sicslowpan.c
    /// does: a fragment that finds the MAC's queue full ends the datagram
    /// (Contiki sends no fragment after a `MAC_TX_ERR`), so a datagram of
    /// more fragments than the queue holds cannot be sent.
    fn send(
        &mut self,
        now: SimTime,
        datagram: MeshDatagram,
        dst: Address,
        handle: Option<Frame<P>>,
        air: &mut OnAir,
        out: &mut LinkOut<P>,
    ) {
        let me = self.mac.address();
        let room = MAX_PSDU_LEN.saturating_sub(framer::psdu_len(me, dst, 0));
        let frames = match sixlowpan::fragment(&datagram.bytes, me, dst, self.tag, room) {
            Ok(frames) => frames,
            Err(_) => return self.drop(handle, DropReason::BadHeader, out),
        };
        let fragments = frames.len() > 1;
        if fragments {
            // One tag per fragmented datagram, as sicslowpan.c's `my_tag`.
            self.tag = self.tag.wrapping_add(1);
            self.stats.fragmented += 1;
        }
        let key = self.next_out;
        self.next_out += 1;
        self.outgoing.insert(
            key,
            Outgoing {
                handle,
                in_mac: 0,
                failed: None,
            },
        );
        if let Some(uid) = datagram.uid {
            air.datagrams.push(Sent {
                from: me,
                key,
                bytes: datagram.bytes,
                uid,
            });
        }
        for (k, frame) in frames.into_iter().enumerate() {
            if k > 0 && self.mac.queued() >= self.queue_len {
                if let Some(o) = self.outgoing.get_mut(&key) {
                    o.failed.get_or_insert(DropReason::QueueFull);
                }
                break;
            }
            if fragments {
                self.stats.fragments_sent += 1;
            }
            if let Some(o) = self.outgoing.get_mut(&key) {
                o.in_mac += 1;
            }
            let id = self.mac.send(now, dst, frame);
            self.in_mac.insert(id, key);
        }
    }

    /// What the MAC reports.
    #[inline(never)]
    pub fn mac_event(
        &mut self,
        now: SimTime,
        event: MacEvent,
        air: &mut OnAir,
        out: &mut LinkOut<P>,
    ) {
        match event {
            MacEvent::TxOutcome {
                id,
                dst,
                status,
                transmissions,
            } => {
                if !framer::is_broadcast(dst) {
                    let status = match status {
                        TxStatus::Ok => rpl::TxStatus::Ok,
                        TxStatus::NoAck => rpl::TxStatus::NoAck,
                        TxStatus::Collision => rpl::TxStatus::Collision,
                        TxStatus::Err | TxStatus::QueueFull => rpl::TxStatus::Error,
                    };
                    self.rpl
                        .handle_tx_outcome(now, link_local(dst), status, transmissions);
                }
                self.tx_outcome(now, id, status, air, out);
            }
            MacEvent::Received { src, dst, payload } => {
                self.received(now, src, dst, &payload, air, out);
            }
        }
    }

    fn tx_outcome(
        &mut self,
        now: SimTime,
        id: MacPacketId,
        status: TxStatus,
        air: &mut OnAir,
        out: &mut LinkOut<P>,
    ) {
        let Some(key) = self.in_mac.remove(&id) else {
            return;
        };
        let Some(o) = self.outgoing.get_mut(&key) else {
            return;
        };
        o.in_mac -= 1;
        if status != TxStatus::Ok && o.failed.is_none() {
            // Contiki drops the rest of a datagram after a failed fragment.
            o.failed = Some(match status {
                TxStatus::QueueFull => DropReason::QueueFull,
                TxStatus::NoAck => DropReason::NoAck,
                TxStatus::Collision => DropReason::ChannelAccessFailure,
                TxStatus::Err | TxStatus::Ok => DropReason::BadHeader,
            });
        }
        if o.in_mac > 0 {
            return;
        }
        let Some(o) = self.outgoing.remove(&key) else {
            return;
        };
        air.remove(self.mac.address(), key, now);
        match (o.failed, o.handle) {
            (Some(reason), handle) => self.drop(handle, reason, out),
            (None, Some(frame)) => out.push(LinkOutput::Consumed {
                port: self.port,
                frame,
            }),
            (None, None) => {}
        }
    }

    fn received(
        &mut self,
        now: SimTime,
        src: Address,
        dst: Address,
        payload: &[u8],
        air: &mut OnAir,
        out: &mut LinkOut<P>,
    ) {
        let dispatch = payload.first().copied().unwrap_or(0) & 0xf8;
        let fragment = dispatch == 0xc0 || dispatch == 0xe0;
        if fragment {
            self.stats.fragments_received += 1;
        }
        let incoming = self.incoming.entry(src).or_insert_with(|| Incoming {
            reassembler: Reassembler::new(),
            deadline: None,
        });
        let result = incoming.reassembler.push(payload, src, dst);
        if incoming.reassembler.pending() == 0 {
            incoming.deadline = None;
        } else if incoming.deadline.is_none() {
            incoming.deadline = Some(now + REASSEMBLY_TIMEOUT);
        }
        match result {
            Ok(Some(bytes)) => {
                if fragment {
                    self.stats.reassembled += 1;
                }
                let uid = air.uid(src, &bytes, now);
                #[cfg(test)]
                crate::sim::parse_count::bump_from_radio();
                let datagram = MeshDatagram {
                    bytes,
                    uid,
                    ip: None,
                };
                self.route(now, datagram, None, true, air, out);
            }
            Ok(None) => {}
            Err(_) => self.stats.malformed += 1,
        }
    }

    fn drop(&mut self, handle: Option<Frame<P>>, reason: DropReason, out: &mut LinkOut<P>) {
        let s = &mut self.stats;
        match reason {
            DropReason::QueueFull => s.dropped_queue_full += 1,
            DropReason::NoRoute => s.dropped_no_route += 1,
            DropReason::TtlExpired => s.dropped_hop_limit += 1,
            DropReason::NoAck => s.dropped_no_ack += 1,
            DropReason::ChannelAccessFailure => s.dropped_collision += 1,
            DropReason::LinkDown => s.dropped_off += 1,
            _ => s.dropped_bad_header += 1,
        }
        if let Some(frame) = handle {
            out.push(LinkOutput::Dropped {
                port: self.port,
                frame,
                reason,
            });
        }
    }
}

/// Parses the fixed IPv6 header of a datagram the member did not get
/// parsed from its node (a relayed one); counted in tests with the
/// simulator's own parses.
fn parse_ipv6(datagram: &[u8]) -> rtolab_wire::Result<Ipv6Repr> {
    #[cfg(test)]
    crate::sim::parse_count::bump_member();
    Ipv6Repr::parse(datagram).map(|(ip, _)| ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(from: Port, key: u64, bytes: &[u8], uid: u64) -> Sent {
        Sent {
            from: member_mac(from),
            key,
            bytes: bytes.to_vec(),
            uid,
        }
    }

    #[test]
    fn a_datagram_keeps_its_uid_a_while_after_its_sender_reported() {
        let mut air = OnAir::default();
        let t = SimTime::from_secs(10);
        air.datagrams.push(sent(1, 0, b"ack", 7));
        air.datagrams.push(sent(1, 1, b"data", 8));
        assert_eq!(air.uid(member_mac(1), b"ack", t), Some(7));
        // The sender heard the acknowledgement before the receiver, busy
        // sending, read the frame.
        air.remove(member_mac(1), 0, t);
        let later = t + SimDuration::from_millis(300);
        assert_eq!(air.uid(member_mac(1), b"ack", later), Some(7));
        assert_eq!(air.uid(member_mac(2), b"ack", later), None);
        assert_eq!(air.uid(member_mac(1), b"data", later), Some(8));
        // The same bytes sent again: the one in flight is meant, and once
        // reported on, the last one.
        air.datagrams.push(sent(1, 2, b"ack", 9));
        assert_eq!(air.uid(member_mac(1), b"ack", later), Some(9));
        air.remove(member_mac(1), 2, later);
        assert_eq!(air.uid(member_mac(1), b"ack", later), Some(9));
        // Long after, it is gone.
        let gone = later + AIR_KEEP;
        assert_eq!(air.uid(member_mac(1), b"ack", gone), None);
        air.remove(member_mac(1), 1, gone);
        assert_eq!(air.reported.len(), 1);
    }
}
