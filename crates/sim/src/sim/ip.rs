//! The IP layer: bridging, IPv4 and IPv6 input and forwarding, one
//! routing function for both families, and handing datagrams to links.

use std::net::{Ipv4Addr, Ipv6Addr};

use rtolab_tcp::{IpRepr, ParsedIp};
use rtolab_wire::{ipv4, WireError};

use crate::cidr::Family;
use crate::link::{Datagram, Frame, LinkModel, Medium, Port};
use crate::node::{IfaceId, Interface, Node, NodeId, RoutingTable};
use crate::pool::PacketId;
use crate::trace::{DropReason, TraceEvent};

use super::{Simulator, Work};

impl Simulator {
    /// A packet past the node's middleboxes: a bridge passes it on, any
    /// other node delivers or forwards it.
    #[inline]
    pub(super) fn bridge_or_route(&mut self, iface: IfaceId, packet: PacketId) {
        if self.nodes[iface.node.0 as usize].bridge {
            self.bridge_forward(iface, packet);
        } else {
            self.ip_input(iface, packet);
        }
    }

    /// A bridge passes a frame that arrived on `iface` out of its other
    /// interface, byte for byte.
    fn bridge_forward(&mut self, iface: IfaceId, packet: PacketId) {
        let node = iface.node;
        let node_ref = &self.nodes[node.0 as usize];
        let out_index = (0..node_ref.interfaces.len() as u32).find(|&i| i != iface.index);
        let Some(out_index) = out_index else {
            self.drop_at(node, packet, DropReason::NoRoute);
            return;
        };
        let interface = &node_ref.interfaces[out_index as usize];
        let (link, port) = (interface.link, interface.port);
        let slot = &self.links[link.0 as usize];
        if slot.ports.len() != 2 {
            self.drop_at(node, packet, DropReason::NeighbourUnknown);
            return;
        }
        self.nodes[node.0 as usize].stats.bridged += 1;
        trace!(
            self,
            TraceEvent::PacketBridged {
                node: node.0,
                in_iface: iface.index,
                out_iface: out_index,
                packet: self.pool.uid(packet),
            }
        );
        let frame = Frame {
            packet,
            len: self.pool.len(packet) as u32,
        };
        self.link_transmit(link.0, port, 1 - port, frame, None);
    }

    /// A datagram arrived on `iface`: deliver it, forward it or drop it.
    /// Its IP header is parsed here, once, and handed on.
    fn ip_input(&mut self, iface: IfaceId, packet: PacketId) {
        let node = iface.node;
        let Ok(mut ip) = parse_ip(self.pool.bytes(packet), true) else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        match &mut ip.header {
            IpRepr::V4(h) => {
                if self.nodes[node.0 as usize].owns(h.dst) {
                    self.deliver_local(node, packet, &ip);
                    return;
                }
                if h.ttl <= 1 {
                    self.drop_at(node, packet, DropReason::TtlExpired);
                    return;
                }
                h.ttl -= 1;
                let mut view = ipv4::Packet::new_unchecked(&mut self.pool.buf_mut(packet)[..]);
                view.set_ttl(h.ttl);
                view.fill_checksum();
                let (dst, ttl) = (h.dst, h.ttl);
                self.route_out(node, packet, dst, &ip, Some((iface.index, ttl)));
            }
            IpRepr::V6(h) => {
                if self.nodes[node.0 as usize].owns6(h.dst) {
                    self.deliver_local(node, packet, &ip);
                    return;
                }
                if h.hop_limit <= 1 {
                    self.drop_at(node, packet, DropReason::TtlExpired);
                    return;
                }
                // IPv6 has no header checksum: only the hop limit changes.
                h.hop_limit -= 1;
                self.pool.buf_mut(packet)[IPV6_HOP_LIMIT_OFFSET] = h.hop_limit;
                let (dst, hop_limit) = (h.dst, h.hop_limit);
                self.route_out(node, packet, dst, &ip, Some((iface.index, hop_limit)));
            }
        }
    }

    /// A local app sent a datagram. Its IP header is parsed here, once (its
    /// IPv4 checksum is the receiver's to verify), and handed on.
    pub(super) fn send_local(&mut self, node: NodeId, packet: PacketId) {
        let Ok(ip) = parse_ip(self.pool.bytes(packet), false) else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        self.nodes[node.0 as usize].stats.originated += 1;
        let own = match &ip.header {
            IpRepr::V4(h) => self.nodes[node.0 as usize].owns(h.dst),
            IpRepr::V6(h) => self.nodes[node.0 as usize].owns6(h.dst),
        };
        if own {
            self.work.push_back(Work::Loopback { node, packet });
            return;
        }
        match &ip.header {
            IpRepr::V4(h) => self.route_out(node, packet, h.dst, &ip, None),
            IpRepr::V6(h) => self.route_out(node, packet, h.dst, &ip, None),
        }
    }

    /// A datagram a local app sent to its own node arrives there: it
    /// enters the node as any other does.
    pub(super) fn loopback(&mut self, node: NodeId, packet: PacketId) {
        let Ok(ip) = parse_ip(self.pool.bytes(packet), true) else {
            self.drop_at(node, packet, DropReason::BadHeader);
            return;
        };
        self.deliver_local(node, packet, &ip);
    }

    /// Sends a datagram towards `dst`, of either family; `forwarded` is the
    /// arrival interface and new TTL or hop limit when routing on behalf of
    /// another node.
    fn route_out<A: Routed>(
        &mut self,
        node: NodeId,
        packet: PacketId,
        dst: A,
        ip: &ParsedIp,
        forwarded: Option<(u32, u8)>,
    ) {
        let node_ref = &self.nodes[node.0 as usize];
        let Some((out_iface, next_hop)) = A::routes(node_ref).lookup(dst) else {
            self.drop_at(node, packet, DropReason::NoRoute);
            return;
        };
        let interface = &node_ref.interfaces[out_iface as usize];
        let (link, port) = (interface.link, interface.port);
        let slot = &self.links[link.0 as usize];
        let to = match slot.medium {
            Medium::PointToPoint => (slot.ports.len() == 2).then_some(1 - port as usize),
            Medium::Broadcast => slot.ports.iter().position(|p| {
                let neighbour = &self.nodes[p.node.0 as usize].interfaces[p.index as usize];
                A::address(neighbour) == Some(next_hop)
            }),
            // A link that carries datagrams picks the receiver itself.
            Medium::Ip => Some(0),
        };
        let Some(to) = to else {
            self.drop_at(node, packet, DropReason::NeighbourUnknown);
            return;
        };
        self.link_send(node, packet, out_iface, to as u32, ip, forwarded);
    }

    /// Hands a datagram to the link of `node`'s interface `out_iface`,
    /// for port `to`; traces the forwarding when it is not the node's own.
    fn link_send(
        &mut self,
        node: NodeId,
        packet: PacketId,
        out_iface: u32,
        to: Port,
        ip: &ParsedIp,
        forwarded: Option<(u32, u8)>,
    ) {
        if let Some((in_iface, ttl)) = forwarded {
            self.nodes[node.0 as usize].stats.forwarded += 1;
            trace!(
                self,
                TraceEvent::PacketForwarded {
                    node: node.0,
                    in_iface,
                    out_iface,
                    packet: self.pool.uid(packet),
                    ttl,
                }
            );
        }
        let interface = &self.nodes[node.0 as usize].interfaces[out_iface as usize];
        let (link, port) = (interface.link, interface.port);
        let frame = Frame {
            packet,
            len: self.pool.len(packet) as u32,
        };
        self.link_transmit(link.0, port, to, frame, Some(ip));
    }

    /// Hands `frame` from `port` to `link`, as its medium takes it: a
    /// frame for port `to`, or a datagram with its bytes (and its IP
    /// header, when the node parsed it).
    fn link_transmit(
        &mut self,
        link: u32,
        port: Port,
        to: Port,
        frame: Frame<PacketId>,
        ip: Option<&ParsedIp>,
    ) {
        let slot = &mut self.links[link as usize];
        match slot.medium {
            Medium::PointToPoint | Medium::Broadcast => {
                slot.link
                    .transmit(self.now, port, to, frame, &mut self.link_out)
            }
            Medium::Ip => {
                let datagram = Datagram {
                    bytes: self.pool.bytes(frame.packet),
                    uid: self.pool.uid(frame.packet),
                    ip,
                };
                slot.link
                    .transmit_datagram(self.now, port, frame, datagram, &mut self.link_out)
            }
        }
        self.after_link_call(link);
    }

    pub(super) fn drop_at(&mut self, node: NodeId, packet: PacketId, reason: DropReason) {
        let stats = &mut self.nodes[node.0 as usize].stats;
        match reason {
            DropReason::NoRoute => stats.dropped_no_route += 1,
            DropReason::NeighbourUnknown => stats.dropped_neighbour_unknown += 1,
            DropReason::TtlExpired => stats.dropped_ttl_expired += 1,
            DropReason::BadHeader => stats.dropped_bad_header += 1,
            DropReason::NoListener => stats.dropped_no_listener += 1,
            _ => {}
        }
        trace!(
            self,
            TraceEvent::PacketDropped {
                node: node.0,
                iface: None,
                link: None,
                packet: self.pool.uid(packet),
                len: self.pool.len(packet) as u32,
                reason,
            }
        );
        self.pool.free(packet);
    }
}

/// Offset of the hop limit in the IPv6 header (RFC 8200 §3).
const IPV6_HOP_LIMIT_OFFSET: usize = 7;

/// Parses a datagram's IP header ([`ParsedIp::parse`]): the one place
/// the simulator's nodes do, counted in tests.
#[inline]
pub(crate) fn parse_ip(datagram: &[u8], verify_checksum: bool) -> Result<ParsedIp, WireError> {
    #[cfg(test)]
    parse_count::bump_node();
    ParsedIp::parse(datagram, verify_checksum)
}

/// What routing needs of an address family: the node's table for it and
/// an interface's address in it.
trait Routed: Family {
    fn routes(node: &Node) -> &RoutingTable<Self>;
    fn address(interface: &Interface) -> Option<Self>;
}

impl Routed for Ipv4Addr {
    fn routes(node: &Node) -> &RoutingTable<Self> {
        &node.routes
    }
    fn address(interface: &Interface) -> Option<Self> {
        Some(interface.cidr.addr)
    }
}

impl Routed for Ipv6Addr {
    fn routes(node: &Node) -> &RoutingTable<Self> {
        &node.routes6
    }
    fn address(interface: &Interface) -> Option<Self> {
        interface.ipv6.map(|c| c.addr)
    }
}

/// How many IP headers of whole datagrams this thread has parsed, for
/// tests that a datagram is parsed once where it enters a node: by the
/// nodes ([`parse_ip`]) and by mesh members, next to how many datagrams
/// mesh members got from the radio (which they must parse).
#[cfg(test)]
pub(crate) mod parse_count {
    use std::cell::Cell;

    thread_local! {
        static NODE: Cell<u64> = const { Cell::new(0) };
        static MEMBER: Cell<u64> = const { Cell::new(0) };
        static FROM_RADIO: Cell<u64> = const { Cell::new(0) };
    }

    fn bump(counter: &'static std::thread::LocalKey<Cell<u64>>) {
        counter.with(|c| c.set(c.get() + 1));
    }

    pub(crate) fn bump_node() {
        bump(&NODE);
    }

    pub(crate) fn bump_member() {
        bump(&MEMBER);
    }

    pub(crate) fn bump_from_radio() {
        bump(&FROM_RADIO);
    }

    /// (node parses, member parses, datagrams members got from the radio)
    /// on this thread so far.
    pub(crate) fn get() -> (u64, u64, u64) {
        (
            NODE.with(Cell::get),
            MEMBER.with(Cell::get),
            FROM_RADIO.with(Cell::get),
        )
    }
}
