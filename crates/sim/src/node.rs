//! Nodes: interfaces with IPv4 addresses, a static routing table, and the
//! counters of what the IP layer did.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::cidr::{Cidr, Family, Ipv4Cidr, Ipv6Cidr};
use crate::link::{Port, Position};

/// Index of a node in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// Index of a link in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

/// Index of an app in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppId(pub u32);

/// Index of a middlebox in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MiddleboxId(pub u32);

/// An interface: node plus index within the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfaceId {
    /// The node.
    pub node: NodeId,
    /// Index among the node's interfaces.
    pub index: u32,
}

/// A network interface attached to one link.
#[derive(Clone, Debug)]
pub struct Interface {
    /// IPv4 address and subnet (`0.0.0.0/32` on interfaces without one:
    /// bridge ports, IPv6-only interfaces).
    pub cidr: Ipv4Cidr,
    /// IPv6 address and on-link prefix, if any.
    pub ipv6: Option<Ipv6Cidr>,
    /// The link it is attached to.
    pub link: LinkId,
    /// Its attachment point on the link.
    pub port: Port,
    /// Whether the link last reported the medium busy (half-duplex and
    /// shared media send these notifications).
    pub medium_busy: bool,
    /// Whether a capture taps this interface.
    pub(crate) tapped: bool,
}

/// One entry of a routing table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<A = Ipv4Addr> {
    /// Destination prefix.
    pub destination: Cidr<A>,
    /// Next-hop router; `None` for directly connected subnets.
    pub gateway: Option<A>,
    /// Outgoing interface index.
    pub iface: u32,
}

/// Static routes with longest-prefix match.
#[derive(Clone, Debug)]
pub struct RoutingTable<A = Ipv4Addr> {
    /// Kept sorted by decreasing prefix length, ties in insertion order, so
    /// the first match is the longest.
    routes: Vec<Route<A>>,
}

impl<A> Default for RoutingTable<A> {
    fn default() -> Self {
        RoutingTable { routes: Vec::new() }
    }
}

impl<A: Family> RoutingTable<A> {
    /// Adds a route.
    pub fn add(&mut self, route: Route<A>) {
        let at = self
            .routes
            .iter()
            .position(|r| r.destination.prefix_len < route.destination.prefix_len)
            .unwrap_or(self.routes.len());
        self.routes.insert(at, route);
    }

    /// The longest-prefix match for `dst`: outgoing interface and next hop.
    pub fn lookup(&self, dst: A) -> Option<(u32, A)> {
        self.routes
            .iter()
            .find(|r| r.destination.contains(dst))
            .map(|r| (r.iface, r.gateway.unwrap_or(dst)))
    }

    /// All routes, longest prefixes first.
    pub fn routes(&self) -> &[Route<A>] {
        &self.routes
    }
}

/// What the IP layer of a node did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeStats {
    /// Datagrams sent by local apps.
    pub originated: u64,
    /// Datagrams handed to local apps.
    pub delivered: u64,
    /// Datagrams forwarded.
    pub forwarded: u64,
    /// Dropped: no route.
    pub dropped_no_route: u64,
    /// Dropped: next hop not on the outgoing link.
    pub dropped_neighbour_unknown: u64,
    /// Dropped: TTL expired.
    pub dropped_ttl_expired: u64,
    /// Dropped: malformed header or bad checksum.
    pub dropped_bad_header: u64,
    /// Dropped: no app bound to the destination port.
    pub dropped_no_listener: u64,
    /// Datagrams a bridge passed on unchanged.
    pub bridged: u64,
}

/// A host or router.
#[derive(Clone, Debug)]
pub struct Node {
    /// Unique name.
    pub name: String,
    /// Where it stands, for radio media.
    pub position: Option<Position>,
    /// Its interfaces, in attachment order.
    pub interfaces: Vec<Interface>,
    /// Its IPv4 routes, including one per connected subnet.
    pub routes: RoutingTable,
    /// Its IPv6 routes, including one per on-link prefix.
    pub routes6: RoutingTable<Ipv6Addr>,
    /// IP-layer counters.
    pub stats: NodeStats,
    /// Whether the node is a link-layer bridge: it passes every datagram
    /// that arrives on one interface out of the other, unchanged, without
    /// looking at its addresses.
    pub bridge: bool,
}

impl Node {
    pub(crate) fn new(name: &str) -> Self {
        Node {
            name: name.to_string(),
            position: None,
            interfaces: Vec::new(),
            routes: RoutingTable::default(),
            routes6: RoutingTable::default(),
            stats: NodeStats::default(),
            bridge: false,
        }
    }

    /// Whether `addr` is one of this node's interface addresses.
    pub fn owns(&self, addr: Ipv4Addr) -> bool {
        self.interfaces.iter().any(|i| i.cidr.addr == addr)
    }

    /// Whether `addr` is one of this node's IPv6 interface addresses.
    pub fn owns6(&self, addr: Ipv6Addr) -> bool {
        self.interfaces
            .iter()
            .any(|i| i.ipv6.is_some_and(|c| c.addr == addr))
    }

    /// The IPv6 source address of a locally originated datagram to `dst`:
    /// that of the outgoing interface.
    pub fn source_address6_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if self.owns6(dst) {
            return Some(dst);
        }
        let (iface, _) = self.routes6.lookup(dst)?;
        self.interfaces[iface as usize].ipv6.map(|c| c.addr)
    }

    /// The address a locally originated datagram to `dst` should carry as
    /// its source: that of the outgoing interface.
    pub fn source_address_for(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if self.owns(dst) {
            return Some(dst);
        }
        let (iface, _) = self.routes.lookup(dst)?;
        Some(self.interfaces[iface as usize].cidr.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(dest: &str, gw: Option<[u8; 4]>, iface: u32) -> Route {
        Route {
            destination: dest.parse().unwrap(),
            gateway: gw.map(Ipv4Addr::from),
            iface,
        }
    }

    #[test]
    fn longest_prefix_wins_regardless_of_insertion_order() {
        let mut t = RoutingTable::default();
        t.add(route("0.0.0.0/0", Some([10, 0, 0, 254]), 0));
        t.add(route("10.1.0.0/16", Some([10, 0, 0, 2]), 1));
        t.add(route("10.1.2.0/24", Some([10, 0, 0, 3]), 2));
        t.add(route("10.0.0.0/24", None, 0));
        let hop = |a: [u8; 4]| t.lookup(Ipv4Addr::from(a));
        assert_eq!(hop([10, 1, 2, 9]), Some((2, Ipv4Addr::new(10, 0, 0, 3))));
        assert_eq!(hop([10, 1, 3, 9]), Some((1, Ipv4Addr::new(10, 0, 0, 2))));
        assert_eq!(hop([10, 0, 0, 7]), Some((0, Ipv4Addr::new(10, 0, 0, 7))));
        assert_eq!(hop([192, 0, 2, 1]), Some((0, Ipv4Addr::new(10, 0, 0, 254))));
    }

    #[test]
    fn no_default_route_means_no_match() {
        let mut t = RoutingTable::default();
        t.add(route("10.0.0.0/24", None, 0));
        assert_eq!(t.lookup(Ipv4Addr::new(10, 0, 1, 1)), None);
    }

    #[test]
    fn equal_prefixes_keep_insertion_order() {
        let mut t = RoutingTable::default();
        t.add(route("10.0.0.0/8", Some([1, 1, 1, 1]), 0));
        t.add(route("10.0.0.0/8", Some([2, 2, 2, 2]), 1));
        assert_eq!(t.lookup(Ipv4Addr::new(10, 9, 9, 9)).map(|r| r.0), Some(0));
    }
}
