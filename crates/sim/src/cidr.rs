//! IP addresses with a prefix length (`10.0.0.1/24`, `fd00::1/64`).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An address family: what a [`Cidr`] needs to know about its addresses.
pub trait Family: Copy + Eq + fmt::Display + FromStr {
    /// Address width in bits.
    const BITS: u8;
    /// The all-zeros address.
    const UNSPECIFIED: Self;
    /// Name in messages: "IPv4".
    const NAME: &'static str;
    /// An example prefix for messages.
    const EXAMPLE: &'static str;
    /// The address as an integer, right-aligned.
    fn to_bits(self) -> u128;
    /// The address from an integer, right-aligned.
    fn from_bits(bits: u128) -> Self;
}

impl Family for Ipv4Addr {
    const BITS: u8 = 32;
    const UNSPECIFIED: Self = Ipv4Addr::UNSPECIFIED;
    const NAME: &'static str = "IPv4";
    const EXAMPLE: &'static str = "10.0.0.1/24";
    fn to_bits(self) -> u128 {
        u128::from(u32::from(self))
    }
    fn from_bits(bits: u128) -> Self {
        Ipv4Addr::from(bits as u32)
    }
}

impl Family for Ipv6Addr {
    const BITS: u8 = 128;
    const UNSPECIFIED: Self = Ipv6Addr::UNSPECIFIED;
    const NAME: &'static str = "IPv6";
    const EXAMPLE: &'static str = "fd00::1/64";
    fn to_bits(self) -> u128 {
        u128::from(self)
    }
    fn from_bits(bits: u128) -> Self {
        Ipv6Addr::from(bits)
    }
}

/// An address with a prefix length: an interface address such as
/// `10.0.0.1/24`, or a route destination such as `10.0.1.0/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr<A> {
    /// The address (host bits may be set).
    pub addr: A,
    /// Number of leading network bits, up to the family's width.
    pub prefix_len: u8,
}

/// An IPv4 prefix.
pub type Ipv4Cidr = Cidr<Ipv4Addr>;
/// An IPv6 prefix.
pub type Ipv6Cidr = Cidr<Ipv6Addr>;

impl<A: Family> Cidr<A> {
    /// The default route (`0.0.0.0/0`, `::/0`).
    pub const DEFAULT: Self = Cidr {
        addr: A::UNSPECIFIED,
        prefix_len: 0,
    };

    /// A new prefix, `None` if `prefix_len` exceeds the address width.
    pub fn new(addr: A, prefix_len: u8) -> Option<Self> {
        (prefix_len <= A::BITS).then_some(Cidr { addr, prefix_len })
    }

    /// The network mask as a right-aligned integer (`/24` → `0xffff_ff00`).
    fn mask_bits(&self) -> u128 {
        let width = u32::from(A::BITS);
        let all = u128::MAX >> (128 - width);
        match u32::from(self.prefix_len.min(A::BITS)) {
            0 => 0,
            n => (all << (width - n)) & all,
        }
    }

    /// The address with its host bits cleared.
    pub fn network(&self) -> A {
        A::from_bits(self.addr.to_bits() & self.mask_bits())
    }

    /// Whether `addr` lies inside this prefix.
    pub fn contains(&self, addr: A) -> bool {
        (addr.to_bits() ^ self.addr.to_bits()) & self.mask_bits() == 0
    }
}

impl<A: Family> fmt::Display for Cidr<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

impl<A: Family> FromStr for Cidr<A> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (addr, len) = text.split_once('/').ok_or_else(|| {
            format!(
                "expected an address with a prefix length like {:?}, got {text:?}",
                A::EXAMPLE
            )
        })?;
        let addr: A = addr
            .trim()
            .parse()
            .map_err(|_| format!("not an {} address: {text:?}", A::NAME))?;
        let prefix_len: u8 = len
            .trim()
            .parse()
            .ok()
            .filter(|n| *n <= A::BITS)
            .ok_or_else(|| format!("prefix length must be 0..={}, got {text:?}", A::BITS))?;
        Ok(Cidr { addr, prefix_len })
    }
}

impl<A: Family> Serialize for Cidr<A> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Deserializes any string, naming what was expected in type errors (for
/// values written as text: prefixes here, quantities with units elsewhere).
pub(crate) struct StrVisitor(pub(crate) &'static str);

impl serde::de::Visitor<'_> for StrVisitor {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
}

impl<'de, A: Family> Deserialize<'de> for Cidr<A> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor("an address with a prefix length"))?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prints_and_matches() {
        let c: Ipv4Cidr = "10.0.1.7/24".parse().unwrap();
        assert_eq!(c.to_string(), "10.0.1.7/24");
        assert_eq!(c.network(), Ipv4Addr::new(10, 0, 1, 0));
        assert!(c.contains(Ipv4Addr::new(10, 0, 1, 200)));
        assert!(!c.contains(Ipv4Addr::new(10, 0, 2, 1)));
        assert!(Ipv4Cidr::DEFAULT.contains(Ipv4Addr::new(8, 8, 8, 8)));
        let host: Ipv4Cidr = "1.2.3.4/32".parse().unwrap();
        assert!(host.contains(Ipv4Addr::new(1, 2, 3, 4)));
        assert!(!host.contains(Ipv4Addr::new(1, 2, 3, 5)));
    }

    #[test]
    fn rejects_malformed_prefixes() {
        assert!("10.0.0.1"
            .parse::<Ipv4Cidr>()
            .unwrap_err()
            .contains("prefix length"));
        assert!("10.0.0.1/33".parse::<Ipv4Cidr>().is_err());
        assert!("10.0.0/24".parse::<Ipv4Cidr>().is_err());
        assert!("fd00::1/129".parse::<Ipv6Cidr>().is_err());
        assert!("10.0.0.1/24"
            .parse::<Ipv6Cidr>()
            .unwrap_err()
            .contains("not an IPv6 address"));
    }

    #[test]
    fn ipv6_prefixes_match_by_their_leading_bits() {
        let c: Ipv6Cidr = "fd00::212:7401:1:101/64".parse().unwrap();
        assert_eq!(c.to_string(), "fd00::212:7401:1:101/64");
        assert_eq!(c.network(), "fd00::".parse::<Ipv6Addr>().unwrap());
        assert!(c.contains("fd00::1".parse().unwrap()));
        assert!(!c.contains("fd00:0:0:1::1".parse().unwrap()));
        assert!(Ipv6Cidr::DEFAULT.contains("2001:db8::1".parse().unwrap()));
        let odd: Ipv6Cidr = "fe80::/10".parse().unwrap();
        assert!(odd.contains("febf::1".parse().unwrap()));
        assert!(!odd.contains("fec0::1".parse().unwrap()));
        let host: Ipv6Cidr = "::1/128".parse().unwrap();
        assert!(host.contains(Ipv6Addr::LOCALHOST));
        assert!(!host.contains("::2".parse().unwrap()));
    }
}
