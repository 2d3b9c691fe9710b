//! A datagram's IP header parsed once, where the datagram enters a host,
//! and handed down with it: the IP layer routes on it, the transport
//! layer demultiplexes on it, and TCP parses only its own header
//! ([`parse_tcp`]), as smoltcp's `process_ipv6` hands its `Ipv6Repr` and
//! payload on.

use std::net::IpAddr;
use std::ops::Range;

use rtolab_wire::ipv4::{self, Ipv4Repr};
use rtolab_wire::ipv6::{self, Ipv6Repr};
use rtolab_wire::tcp::TcpRepr;
use rtolab_wire::{checksum, WireError, WireErrorKind};

/// An IPv4 or IPv6 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpRepr {
    /// IPv4 (options skipped).
    V4(Ipv4Repr),
    /// IPv6's fixed header (extension headers are payload).
    V6(Ipv6Repr),
}

/// A datagram's IP header and where its payload lies in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedIp {
    /// The header.
    pub header: IpRepr,
    /// Bytes of header (options included) before the payload.
    pub header_len: usize,
    /// An IPv4 fragment: routers forward it, TCP refuses it.
    pub fragment: bool,
}

/// Offset of IPv4's flags and fragment offset (RFC 791 §3.1).
const IPV4_FLAGS_FRAG: usize = 6;
/// Offset of TCP's checksum (RFC 9293 §3.1).
const TCP_CHECKSUM: usize = 16;

impl ParsedIp {
    /// Parses the IP header of `datagram` (told apart by its version
    /// field), with its lengths; an IPv4 header's checksum is verified
    /// when `verify_checksum` (a router and a receiver verify it; the
    /// sender's own datagram is not). Bytes past the length the header
    /// announces are link padding and ignored.
    #[inline]
    pub fn parse(datagram: &[u8], verify_checksum: bool) -> Result<Self, WireError> {
        if datagram.first().is_some_and(|b| b >> 4 == 6) {
            let (header, _) = Ipv6Repr::parse(datagram)?;
            return Ok(ParsedIp {
                header: IpRepr::V6(header),
                header_len: ipv6::HEADER_LEN,
                fragment: false,
            });
        }
        if datagram.first().is_some_and(|b| b >> 4 != 4) {
            return Err(WireError::new("ipv4.version", 0, WireErrorKind::BadVersion));
        }
        let packet = ipv4::Packet::new_checked(datagram)?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(WireError::new(
                "ipv4.checksum",
                10,
                WireErrorKind::BadChecksum,
            ));
        }
        Ok(ParsedIp {
            header: IpRepr::V4(Ipv4Repr::fields(&packet)),
            header_len: packet.header_len(),
            fragment: packet.more_fragments() || packet.frag_offset() != 0,
        })
    }

    /// Where the payload lies in the datagram.
    #[inline]
    pub fn payload(&self) -> Range<usize> {
        let len = match &self.header {
            IpRepr::V4(h) => h.payload_len,
            IpRepr::V6(h) => h.payload_len,
        };
        self.header_len..self.header_len + len
    }

    /// The payload's protocol (IPv4's protocol, IPv6's next header; both
    /// number TCP and UDP alike).
    #[inline]
    pub fn protocol(&self) -> u8 {
        match &self.header {
            IpRepr::V4(h) => h.protocol,
            IpRepr::V6(h) => h.next_header,
        }
    }

    /// The destination address.
    #[inline]
    pub fn dst(&self) -> IpAddr {
        match &self.header {
            IpRepr::V4(h) => IpAddr::V4(h.dst),
            IpRepr::V6(h) => IpAddr::V6(h.dst),
        }
    }
}

/// Parses the TCP segment `segment` (the payload of the datagram `ip`
/// describes), verifying its checksum with `ip`'s pseudo-header. Errors
/// count offsets from the start of the datagram, as whole-datagram parsers
/// do. An IPv4 fragment is refused: TCP reads whole segments.
pub fn parse_tcp<'a>(ip: &ParsedIp, segment: &'a [u8]) -> Result<TcpRepr<'a>, WireError> {
    let shift = |e: WireError| e.shifted(ip.header_len);
    match &ip.header {
        IpRepr::V4(h) => {
            if ip.fragment {
                return Err(WireError::new(
                    "ipv4.fragment",
                    IPV4_FLAGS_FRAG,
                    WireErrorKind::Unsupported,
                ));
            }
            TcpRepr::parse(segment, h.src, h.dst, true).map_err(shift)
        }
        IpRepr::V6(h) => {
            // The parser's IPv4 addresses only serve its IPv4 checksum,
            // skipped here for IPv6's.
            let any = std::net::Ipv4Addr::UNSPECIFIED;
            let tcp = TcpRepr::parse(segment, any, any, false).map_err(shift)?;
            // Over the segment as received, checksum field included, a
            // sound segment sums to zero.
            if checksum::upper_layer_v6(h.src, h.dst, ipv6::next_header::TCP, segment) != 0 {
                return Err(WireError::new(
                    "tcp.checksum",
                    ip.header_len + TCP_CHECKSUM,
                    WireErrorKind::BadChecksum,
                ));
            }
            Ok(tcp)
        }
    }
}
