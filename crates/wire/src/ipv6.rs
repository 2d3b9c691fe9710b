//! IPv6 (RFC 8200): the fixed header, and whole datagrams carrying TCP, UDP
//! or ICMPv6 with their pseudo-header checksums.
//!
//! The header's fields are read and written by the `smoltcp` crate's
//! `Ipv6Packet`; this module adds the length checks with byte offsets and
//! the upper layers. Extension headers are not interpreted: a datagram
//! whose next header is not TCP, UDP or ICMPv6 is returned as
//! [`Transport6::Other`].

use std::net::Ipv6Addr;

use smoltcp::wire::{IpProtocol, Ipv6Packet};

use crate::icmpv6::Icmpv6Repr;
use crate::tcp::{self, TcpRepr};
use crate::udp::{self, UdpRepr};
use crate::{checksum, Result, WireError, WireErrorKind};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;
/// Smallest link MTU IPv6 allows (RFC 8200 §5): what 6LoWPAN must carry
/// by fragmenting.
pub const MIN_MTU: usize = 1280;

/// Next header values this crate understands.
pub mod next_header {
    /// Transmission Control Protocol.
    pub const TCP: u8 = 6;
    /// User Datagram Protocol.
    pub const UDP: u8 = 17;
    /// ICMP for IPv6 (RFC 4443).
    pub const ICMPV6: u8 = 58;
}

const FLOW_LABEL_MAX: u32 = 0xf_ffff;

/// The fixed IPv6 header as plain values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Protocol of the payload (see [`next_header`]).
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Payload length (bytes after the fixed header).
    pub payload_len: usize,
}

impl Ipv6Repr {
    /// Parses the fixed header and returns it with the payload (the
    /// `payload_len` bytes after it; bytes beyond are link padding and
    /// ignored).
    pub fn parse(datagram: &[u8]) -> Result<(Self, &[u8])> {
        if datagram.len() < HEADER_LEN {
            return Err(WireError::new(
                "ipv6.header",
                datagram.len(),
                WireErrorKind::Truncated,
            ));
        }
        let packet = Ipv6Packet::new_unchecked(datagram);
        if packet.version() != 6 {
            return Err(WireError::new("ipv6.version", 0, WireErrorKind::BadVersion));
        }
        let payload_len = usize::from(packet.payload_len());
        if HEADER_LEN + payload_len > datagram.len() {
            return Err(WireError::new(
                "ipv6.payload_len",
                4,
                WireErrorKind::Truncated,
            ));
        }
        let repr = Ipv6Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: u8::from(packet.next_header()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
            payload_len,
        };
        Ok((repr, &datagram[HEADER_LEN..HEADER_LEN + payload_len]))
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the 40-byte header into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < HEADER_LEN {
            return Err(WireError::new(
                "ipv6",
                buf.len(),
                WireErrorKind::BufferTooSmall,
            ));
        }
        let payload_len = u16::try_from(self.payload_len)
            .map_err(|_| WireError::new("ipv6.payload_len", 4, WireErrorKind::TooLong))?;
        if self.flow_label > FLOW_LABEL_MAX {
            return Err(WireError::new(
                "ipv6.flow_label",
                1,
                WireErrorKind::BadValue,
            ));
        }
        let mut packet = Ipv6Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        packet.set_version(6);
        packet.set_traffic_class(self.traffic_class);
        packet.set_flow_label(self.flow_label);
        packet.set_payload_len(payload_len);
        packet.set_next_header(IpProtocol::from(self.next_header));
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        Ok(HEADER_LEN)
    }
}

/// The parsed upper layer of an IPv6 datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport6<'a> {
    /// A TCP segment.
    Tcp(TcpRepr<'a>),
    /// A UDP datagram.
    Udp(UdpRepr<'a>),
    /// An ICMPv6 message.
    Icmpv6(Icmpv6Repr<'a>),
    /// Anything else (extension headers included), left unparsed.
    Other {
        /// Next header value.
        next_header: u8,
        /// The IPv6 payload.
        payload: &'a [u8],
    },
}

/// A parsed IPv6 datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedPacket6<'a> {
    /// The fixed header.
    pub ip: Ipv6Repr,
    /// What it carries.
    pub transport: Transport6<'a>,
}

/// Parses a whole IPv6 datagram, verifying the upper layer's checksum.
///
/// Error offsets count from the start of the datagram. A UDP checksum of
/// zero is refused: IPv6 makes it mandatory (RFC 8200 §8.1).
pub fn parse(datagram: &[u8]) -> Result<ParsedPacket6<'_>> {
    let (ip, payload) = Ipv6Repr::parse(datagram)?;
    let shift = |e: WireError| e.shifted(HEADER_LEN);
    let verify = |field: &'static str, at: usize| {
        // Computed over the packet as received, checksum field included,
        // the checksum of a sound packet is zero.
        if checksum::upper_layer_v6(ip.src, ip.dst, ip.next_header, payload) != 0 {
            return Err(WireError::new(
                field,
                HEADER_LEN + at,
                WireErrorKind::BadChecksum,
            ));
        }
        Ok(())
    };
    // The IPv4 parsers check lengths and fields; the addresses they take
    // only serve their IPv4 checksum, which is skipped here.
    let any = std::net::Ipv4Addr::UNSPECIFIED;
    let transport = match ip.next_header {
        next_header::TCP => {
            let tcp = TcpRepr::parse(payload, any, any, false).map_err(shift)?;
            verify("tcp.checksum", 16)?;
            Transport6::Tcp(tcp)
        }
        next_header::UDP => {
            let udp = UdpRepr::parse(payload, any, any, false).map_err(shift)?;
            if udp::Packet::new_unchecked(payload).checksum() == 0 {
                return Err(WireError::new(
                    "udp.checksum",
                    HEADER_LEN + 6,
                    WireErrorKind::BadChecksum,
                ));
            }
            verify("udp.checksum", 6)?;
            Transport6::Udp(udp)
        }
        next_header::ICMPV6 => {
            verify("icmpv6.checksum", 2)?;
            Transport6::Icmpv6(Icmpv6Repr::parse(payload).map_err(shift)?)
        }
        next_header => Transport6::Other {
            next_header,
            payload,
        },
    };
    Ok(ParsedPacket6 { ip, transport })
}

/// Clears `out`, writes the IPv6 header and the TCP segment (checksum
/// filled) and returns the datagram's length.
///
/// `ip.next_header` and `ip.payload_len` are ignored: they follow from `tcp`.
pub fn emit_tcp(out: &mut Vec<u8>, ip: &Ipv6Repr, tcp: &TcpRepr) -> Result<usize> {
    let ip = start(
        out,
        ip,
        next_header::TCP,
        tcp.buffer_len(),
        tcp.header_len(),
    )?;
    tcp.emit_header(&mut out[HEADER_LEN..])
        .map_err(|e| e.shifted(HEADER_LEN))?;
    out.extend_from_slice(tcp.payload);
    let sum = checksum::upper_layer_v6(ip.src, ip.dst, next_header::TCP, &out[HEADER_LEN..]);
    tcp::Packet::new_unchecked(&mut out[HEADER_LEN..]).set_checksum(sum);
    Ok(out.len())
}

/// Clears `out`, writes the IPv6 header and the UDP datagram (checksum
/// filled; a computed 0 is sent as 0xFFFF) and returns the datagram's length.
///
/// `ip.next_header` and `ip.payload_len` are ignored: they follow from `udp`.
pub fn emit_udp(out: &mut Vec<u8>, ip: &Ipv6Repr, udp: &UdpRepr) -> Result<usize> {
    let ip = start(out, ip, next_header::UDP, udp.buffer_len(), udp::HEADER_LEN)?;
    udp.emit_header(&mut out[HEADER_LEN..])
        .map_err(|e| e.shifted(HEADER_LEN))?;
    out.extend_from_slice(udp.payload);
    let sum = match checksum::upper_layer_v6(ip.src, ip.dst, next_header::UDP, &out[HEADER_LEN..]) {
        0 => 0xffff,
        c => c,
    };
    udp::Packet::new_unchecked(&mut out[HEADER_LEN..]).set_checksum(sum);
    Ok(out.len())
}

/// Clears `out`, writes the IPv6 header and the ICMPv6 message (checksum
/// filled) and returns the datagram's length.
///
/// `ip.next_header` and `ip.payload_len` are ignored: they follow from `icmp`.
pub fn emit_icmpv6(out: &mut Vec<u8>, ip: &Ipv6Repr, icmp: &Icmpv6Repr) -> Result<usize> {
    let len = icmp.buffer_len();
    let ip = start(out, ip, next_header::ICMPV6, len, 0)?;
    out.resize(HEADER_LEN + len, 0);
    icmp.emit(&mut out[HEADER_LEN..])
        .map_err(|e| e.shifted(HEADER_LEN))?;
    let sum = checksum::upper_layer_v6(ip.src, ip.dst, next_header::ICMPV6, &out[HEADER_LEN..]);
    out[HEADER_LEN + 2..HEADER_LEN + 4].copy_from_slice(&sum.to_be_bytes());
    Ok(out.len())
}

/// Clears `out`, writes the header for a payload of `payload_len` bytes and
/// leaves `out` sized for the upper-layer header (`header_len` zero bytes).
fn start(
    out: &mut Vec<u8>,
    ip: &Ipv6Repr,
    next_header: u8,
    payload_len: usize,
    header_len: usize,
) -> Result<Ipv6Repr> {
    let ip = Ipv6Repr {
        next_header,
        payload_len,
        ..*ip
    };
    out.clear();
    out.reserve(ip.buffer_len());
    out.resize(HEADER_LEN + header_len, 0);
    ip.emit(out)?;
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{SeqNumber, TcpFlags, TcpOptions};

    pub(crate) fn ip() -> Ipv6Repr {
        Ipv6Repr {
            src: "fe80::212:4b00:0:1".parse().unwrap(),
            dst: "2001:db8::1".parse().unwrap(),
            next_header: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        }
    }

    #[test]
    fn tcp_round_trip_and_checksum_against_smoltcp() {
        let syn = TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(1000),
            ack: SeqNumber(0),
            flags: TcpFlags::SYN,
            window: 1000,
            urgent: 0,
            options: TcpOptions {
                mss: Some(48),
                ..Default::default()
            },
            payload: b"abc",
        };
        let mut out = Vec::new();
        let len = emit_tcp(&mut out, &ip(), &syn).unwrap();
        assert_eq!(len, 40 + 24 + 3);
        let parsed = parse(&out).unwrap();
        assert_eq!(parsed.ip.payload_len, 27);
        assert_eq!(parsed.transport, Transport6::Tcp(syn));
        // smoltcp computes the same checksum from its own pseudo header.
        let packet = Ipv6Packet::new_checked(&out[..]).unwrap();
        let segment = smoltcp::wire::TcpPacket::new_checked(packet.payload()).unwrap();
        assert!(segment.verify_checksum(&packet.src_addr().into(), &packet.dst_addr().into()));
        out[HEADER_LEN + 24] ^= 1;
        let e = parse(&out).unwrap_err();
        assert_eq!((e.field, e.offset), ("tcp.checksum", 56));
    }

    #[test]
    fn udp_round_trip_and_zero_checksum_refused() {
        let udp = UdpRepr {
            src_port: 5683,
            dst_port: 5684,
            payload: b"hello",
        };
        let ip = Ipv6Repr {
            traffic_class: 0xb8,
            flow_label: 0x12345,
            ..ip()
        };
        let mut out = Vec::new();
        emit_udp(&mut out, &ip, &udp).unwrap();
        let parsed = parse(&out).unwrap();
        assert_eq!(
            (parsed.ip.traffic_class, parsed.ip.flow_label),
            (0xb8, 0x12345)
        );
        assert_eq!(parsed.transport, Transport6::Udp(udp));
        out[HEADER_LEN + 6] = 0;
        out[HEADER_LEN + 7] = 0;
        assert_eq!(parse(&out).unwrap_err().field, "udp.checksum");
    }

    #[test]
    fn header_errors_are_named() {
        let mut out = Vec::new();
        emit_udp(
            &mut out,
            &ip(),
            &UdpRepr {
                src_port: 1,
                dst_port: 2,
                payload: &[],
            },
        )
        .unwrap();
        assert_eq!(parse(&out[..39]).unwrap_err().field, "ipv6.header");
        assert_eq!(parse(&out[..47]).unwrap_err().field, "ipv6.payload_len");
        out[0] = 0x45;
        assert_eq!(parse(&out).unwrap_err().kind, WireErrorKind::BadVersion);
        let bad = Ipv6Repr {
            flow_label: 1 << 20,
            ..ip()
        };
        assert_eq!(bad.emit(&mut [0; 40]).unwrap_err().field, "ipv6.flow_label");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120)) {
            let _ = parse(&bytes);
        }
    }
}
