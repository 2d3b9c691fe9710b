//! Addresses as Contiki derives them from the 802.15.4 address.

use std::net::Ipv6Addr;

use rtolab_wire::ieee802154::Address;

/// The link-local multicast group of all RPL nodes, ff02::1a (RFC 6550
/// §20.19), where DIOs and DISes go.
pub const ALL_RPL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x1a);

/// The interface identifier derived from a MAC address (RFC 4944 §6,
/// Contiki's `uip_ds6_set_addr_iid`): an extended address with its
/// universal/local bit inverted, or 0000:00ff:fe00:XXXX for a short one.
pub fn interface_id(mac: Address) -> [u8; 8] {
    match mac {
        Address::Extended(mut eui) => {
            eui[0] ^= 0x02;
            eui
        }
        Address::Short(a) => {
            let [hi, lo] = a.to_be_bytes();
            [0, 0, 0, 0xff, 0xfe, 0, hi, lo]
        }
    }
}

/// fe80::/64 with the interface identifier of `mac`.
pub fn link_local(mac: Address) -> Ipv6Addr {
    with_iid(
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        interface_id(mac),
    )
}

/// The upper 64 bits of `prefix` with `iid` below (stateless
/// autoconfiguration, Contiki's `set_ip_from_prefix`).
pub fn with_iid(prefix: Ipv6Addr, iid: [u8; 8]) -> Ipv6Addr {
    let mut octets = prefix.octets();
    octets[8..].copy_from_slice(&iid);
    Ipv6Addr::from(octets)
}

/// Whether `a` is in fe80::/10.
pub fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_from_mac_as_contiki_derives_them() {
        // Cooja's Sky mote 2: 00:12:74:02:00:02:02:02.
        let mac = Address::Extended([0x00, 0x12, 0x74, 0x02, 0x00, 0x02, 0x02, 0x02]);
        assert_eq!(
            link_local(mac),
            "fe80::212:7402:2:202".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            with_iid("fd00::".parse().unwrap(), interface_id(mac)),
            "fd00::212:7402:2:202".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            link_local(Address::Short(0x0102)),
            "fe80::ff:fe00:102".parse::<Ipv6Addr>().unwrap()
        );
        assert!(is_link_local(link_local(mac)));
        assert!(!is_link_local(ALL_RPL_NODES));
    }
}
