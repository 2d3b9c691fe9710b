//! IPv4 addresses with a prefix length (`10.0.0.1/24`).

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An IPv4 address with a prefix length: an interface address such as
/// `10.0.0.1/24`, or a route destination such as `10.0.1.0/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    /// The address (host bits may be set).
    pub addr: Ipv4Addr,
    /// Number of leading network bits, 0..=32.
    pub prefix_len: u8,
}

impl Ipv4Cidr {
    /// `0.0.0.0/0`, the default route.
    pub const DEFAULT: Ipv4Cidr = Ipv4Cidr {
        addr: Ipv4Addr::UNSPECIFIED,
        prefix_len: 0,
    };

    /// A new prefix, `None` if `prefix_len` exceeds 32.
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> Option<Self> {
        (prefix_len <= 32).then_some(Ipv4Cidr { addr, prefix_len })
    }

    /// The network mask as an integer (`/24` → `0xffff_ff00`).
    pub fn mask(&self) -> u32 {
        match self.prefix_len {
            0 => 0,
            n => u32::MAX << (32 - u32::from(n.min(32))),
        }
    }

    /// The address with its host bits cleared.
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & self.mask())
    }

    /// Whether `addr` lies inside this prefix.
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        (u32::from(addr) ^ u32::from(self.addr)) & self.mask() == 0
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (addr, len) = text.split_once('/').ok_or_else(|| {
            format!("expected an address with a prefix length like \"10.0.0.1/24\", got {text:?}")
        })?;
        let addr: Ipv4Addr = addr
            .trim()
            .parse()
            .map_err(|_| format!("not an IPv4 address: {text:?}"))?;
        let prefix_len: u8 = len
            .trim()
            .parse()
            .ok()
            .filter(|n| *n <= 32)
            .ok_or_else(|| format!("prefix length must be 0..=32, got {text:?}"))?;
        Ok(Ipv4Cidr { addr, prefix_len })
    }
}

impl Serialize for Ipv4Cidr {
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

impl<'de> Deserialize<'de> for Ipv4Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = d.deserialize_str(StrVisitor(
            "an address with a prefix length, like \"10.0.0.1/24\"",
        ))?;
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
    }
}
