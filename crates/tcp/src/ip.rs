//! What TCP needs of the network layer: the addresses a segment came with,
//! for IPv4 and IPv6 alike, and the exact demultiplexing key of a
//! connection in either family.
//!
//! Addresses are the standard library's [`IpAddr`] and [`SocketAddr`]:
//! their `From` conversions from the IPv4 types keep IPv4 callers
//! compiling unchanged, and they print and parse as users expect. A
//! [`SocketAddrV6`]'s flow label and scope id play no part in a
//! connection's identity (a stack has one interface).

use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use rtolab_wire::ipv4::Ipv4Repr;
use rtolab_wire::ipv6::Ipv6Repr;
use rtolab_wire::tcp::TcpRepr;

/// The MSS assumed over IPv4 when the peer sends no MSS option: the
/// 576-byte datagram every IPv4 host accepts, less 40 bytes of headers
/// (RFC 9293 §3.7.1).
pub const DEFAULT_MSS: usize = 536;

/// The MSS assumed over IPv6 when the peer sends no MSS option: the
/// 1280-byte minimum IPv6 MTU, less the 40-byte IPv6 and 20-byte TCP
/// headers (RFC 9293 §3.7.1, RFC 8200 §8.3).
pub const DEFAULT_MSS_V6: usize = 1220;

/// The MSS to assume for a peer at `remote` that announced none.
pub fn default_mss(remote: IpAddr) -> usize {
    match remote {
        IpAddr::V4(_) => DEFAULT_MSS,
        IpAddr::V6(_) => DEFAULT_MSS_V6,
    }
}

/// The header of the datagram a TCP segment arrived in, as far as TCP
/// reads it. Implemented for [`Ipv4Repr`] and [`Ipv6Repr`], so the
/// segment entry points take either.
pub trait IpHeader {
    /// Source address.
    fn src_addr(&self) -> IpAddr;
    /// Destination address.
    fn dst_addr(&self) -> IpAddr;
    /// The key of the connection `tcp` belongs to, seen from the receiver
    /// (local = destination).
    fn tuple_key(&self, tcp: &TcpRepr) -> TupleKey;
}

impl IpHeader for Ipv4Repr {
    fn src_addr(&self) -> IpAddr {
        IpAddr::V4(self.src)
    }
    fn dst_addr(&self) -> IpAddr {
        IpAddr::V4(self.dst)
    }
    #[inline]
    fn tuple_key(&self, tcp: &TcpRepr) -> TupleKey {
        TupleKey::V4(tuple_key(
            SocketAddrV4::new(self.dst, tcp.dst_port),
            SocketAddrV4::new(self.src, tcp.src_port),
        ))
    }
}

impl IpHeader for Ipv6Repr {
    fn src_addr(&self) -> IpAddr {
        IpAddr::V6(self.src)
    }
    fn dst_addr(&self) -> IpAddr {
        IpAddr::V6(self.dst)
    }
    #[inline]
    fn tuple_key(&self, tcp: &TcpRepr) -> TupleKey {
        TupleKey::V6(TupleKey6::new(
            (self.dst, tcp.dst_port),
            (self.src, tcp.src_port),
        ))
    }
}

/// An IPv4 (local, remote) address pair as one integer: 96 bits of
/// addresses and ports in a `u128`, cheaper to hash and compare than the
/// addresses.
pub fn tuple_key(local: SocketAddrV4, remote: SocketAddrV4) -> u128 {
    let half = |a: SocketAddrV4| u128::from(u32::from(*a.ip())) << 16 | u128::from(a.port());
    half(local) << 48 | half(remote)
}

/// An IPv6 (local, remote) address pair: all 288 bits of addresses and
/// ports, so two connections share a key only if they are the same
/// connection (no folding into a hash that could alias).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TupleKey6 {
    local: u128,
    remote: u128,
    /// Local port in the high half, remote port in the low half.
    ports: u32,
}

impl TupleKey6 {
    /// The key of the connection between `local` and `remote`.
    pub fn new(local: (Ipv6Addr, u16), remote: (Ipv6Addr, u16)) -> TupleKey6 {
        TupleKey6 {
            local: u128::from(local.0),
            remote: u128::from(remote.0),
            ports: u32::from(local.1) << 16 | u32::from(remote.1),
        }
    }
}

/// The demultiplexing key of a connection in either family. The family is
/// part of the key: an IPv4 connection and an IPv6 one never share a key,
/// whatever their addresses (IPv4-mapped IPv6 addresses included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TupleKey {
    /// See [`tuple_key`].
    V4(u128),
    /// See [`TupleKey6`].
    V6(TupleKey6),
}

impl TupleKey {
    /// The key of the connection between `local` and `remote`; `None` when
    /// they are of different families, which no datagram can join.
    pub fn of(local: SocketAddr, remote: SocketAddr) -> Option<TupleKey> {
        match (local, remote) {
            (SocketAddr::V4(l), SocketAddr::V4(r)) => Some(TupleKey::V4(tuple_key(l, r))),
            (SocketAddr::V6(l), SocketAddr::V6(r)) => Some(TupleKey::V6(TupleKey6::new(
                (*l.ip(), l.port()),
                (*r.ip(), r.port()),
            ))),
            _ => None,
        }
    }
}

/// Values by IPv4 4-tuple ([`tuple_key`]), looked up for every segment.
///
/// A hash map with FxHash rather than a B-tree: one probe instead of a walk
/// down the tree, which matters with hundreds of connections. Such maps are
/// only ever looked up, never iterated, so the hash order cannot leak into
/// a run's results.
pub type TupleMap<V> = rustc_hash::FxHashMap<u128, V>;

/// Values by IPv6 4-tuple ([`TupleKey6`]), as [`TupleMap`] for IPv4.
pub type TupleMap6<V> = rustc_hash::FxHashMap<TupleKey6, V>;

/// Values by 4-tuple of either family: one map per family, so a lookup is
/// one probe of the segment's family's map and the IPv4 map keeps its
/// 16-byte keys.
#[derive(Clone, Debug)]
pub struct Tuples<V> {
    v4: TupleMap<V>,
    v6: TupleMap6<V>,
}

impl<V> Default for Tuples<V> {
    fn default() -> Self {
        Tuples {
            v4: TupleMap::default(),
            v6: TupleMap6::default(),
        }
    }
}

impl<V> Tuples<V> {
    /// The value under `key`.
    #[inline]
    pub fn get(&self, key: &TupleKey) -> Option<&V> {
        match key {
            TupleKey::V4(k) => self.v4.get(k),
            TupleKey::V6(k) => self.v6.get(k),
        }
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &TupleKey) -> bool {
        self.get(key).is_some()
    }

    /// Stores `value` under `key`, returning the value it replaces.
    pub fn insert(&mut self, key: TupleKey, value: V) -> Option<V> {
        match key {
            TupleKey::V4(k) => self.v4.insert(k, value),
            TupleKey::V6(k) => self.v6.insert(k, value),
        }
    }

    /// Removes and returns the value under `key`.
    pub fn remove(&mut self, key: &TupleKey) -> Option<V> {
        match key {
            TupleKey::V4(k) => self.v4.remove(k),
            TupleKey::V6(k) => self.v6.remove(k),
        }
    }

    /// Number of entries, both families together.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `addr` without the IPv6 flow label and scope id, which play no part in
/// a connection's identity.
pub(crate) fn plain(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(a) => SocketAddr::V6(SocketAddrV6::new(*a.ip(), a.port(), 0, 0)),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn families_never_share_a_key() {
        // The same addresses written as IPv4, IPv4-mapped and
        // IPv4-compatible IPv6, same ports: three different connections.
        let pairs = [
            (v4("10.0.0.1:80"), v4("10.0.0.2:49152")),
            (v4("[::ffff:10.0.0.1]:80"), v4("[::ffff:10.0.0.2]:49152")),
            (v4("[::a00:1]:80"), v4("[::a00:2]:49152")),
        ];
        let mut tuples = Tuples::default();
        for (i, (local, remote)) in pairs.into_iter().enumerate() {
            let key = TupleKey::of(local, remote).expect("one family");
            assert_eq!(tuples.insert(key, i), None, "{local} {remote} aliased");
        }
        assert_eq!(tuples.len(), 3);
        for (i, (local, remote)) in pairs.into_iter().enumerate() {
            assert_eq!(tuples.get(&TupleKey::of(local, remote).unwrap()), Some(&i));
        }
        // The IPv4 key's integer value also appears as an IPv6 key's bits
        // when the IPv6 addresses are chosen to match: still apart.
        let k4 = tuple_key(
            "10.0.0.1:80".parse().unwrap(),
            "10.0.0.2:1".parse().unwrap(),
        );
        let alias = TupleKey::V6(TupleKey6 {
            local: k4,
            remote: 0,
            ports: 0,
        });
        assert_eq!(tuples.get(&alias), None);
        assert_eq!(TupleKey::of(v4("10.0.0.1:80"), v4("[::1]:80")), None);
    }

    #[test]
    fn v6_keys_are_exact_in_every_bit() {
        let local: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let remote: Ipv6Addr = "fd00::212:4b00:0:2".parse().unwrap();
        let base = TupleKey6::new((local, 80), (remote, 49152));
        let mut tuples = Tuples::default();
        tuples.insert(TupleKey::V6(base), usize::MAX);
        // Flipping any one of the 288 bits of addresses and ports makes
        // another connection.
        let bits = |a: Ipv6Addr| u128::from(a);
        for bit in 0..128 {
            for (l, r) in [
                (bits(local) ^ 1 << bit, bits(remote)),
                (bits(local), bits(remote) ^ 1 << bit),
            ] {
                let key = TupleKey6::new((Ipv6Addr::from(l), 80), (Ipv6Addr::from(r), 49152));
                assert_ne!(key, base);
                assert_eq!(tuples.insert(TupleKey::V6(key), bit), None);
            }
        }
        for bit in 0..16 {
            for (lp, rp) in [(80 ^ 1 << bit, 49152), (80, 49152 ^ 1 << bit)] {
                let key = TupleKey6::new((local, lp), (remote, rp));
                assert_eq!(tuples.insert(TupleKey::V6(key), bit), None);
            }
        }
        assert_eq!(tuples.len(), 1 + 2 * 128 + 2 * 16);
        assert_eq!(tuples.get(&TupleKey::V6(base)), Some(&usize::MAX));
    }

    #[test]
    fn default_mss_follows_the_family() {
        assert_eq!(default_mss("10.0.0.1".parse().unwrap()), 576 - 40);
        assert_eq!(default_mss("::1".parse().unwrap()), 1280 - 40 - 20);
    }
}
