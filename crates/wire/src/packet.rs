//! Whole IPv4 datagrams in one call (what hosts use).

use crate::ipv4::{self, protocol, Ipv4Repr};
use crate::tcp::{self, TcpRepr};
use crate::udp::{self, UdpRepr};
use crate::{Result, WireError, WireErrorKind};

/// The parsed transport layer of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport<'a> {
    /// A TCP segment.
    Tcp(TcpRepr<'a>),
    /// A UDP datagram.
    Udp(UdpRepr<'a>),
    /// Any other protocol, left unparsed.
    Other {
        /// IP protocol number.
        protocol: u8,
        /// The IPv4 payload.
        payload: &'a [u8],
    },
}

/// A parsed IPv4 datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedPacket<'a> {
    /// The IPv4 header.
    pub ip: Ipv4Repr,
    /// What it carries.
    pub transport: Transport<'a>,
}

/// Parses a whole IPv4 datagram, verifying both checksums.
///
/// Error offsets count from the start of the datagram.
pub fn parse(datagram: &[u8]) -> Result<ParsedPacket<'_>> {
    let packet = ipv4::Packet::new_unchecked(datagram);
    let ip = Ipv4Repr::parse(&packet)?;
    let header_len = packet.header_len();
    let payload = &datagram[header_len..usize::from(packet.total_len())];
    let transport = match ip.protocol {
        protocol::TCP => Transport::Tcp(
            TcpRepr::parse(payload, ip.src, ip.dst, true).map_err(|e| e.shifted(header_len))?,
        ),
        protocol::UDP => Transport::Udp(
            UdpRepr::parse(payload, ip.src, ip.dst, true).map_err(|e| e.shifted(header_len))?,
        ),
        protocol => Transport::Other { protocol, payload },
    };
    Ok(ParsedPacket { ip, transport })
}

/// Clears `out`, writes IPv4 header + TCP segment (checksums filled), returns its length.
///
/// `ip.protocol` and `ip.payload_len` are ignored: they follow from `tcp`.
pub fn emit_tcp(out: &mut Vec<u8>, ip: &Ipv4Repr, tcp: &TcpRepr) -> Result<usize> {
    let ip = Ipv4Repr {
        protocol: protocol::TCP,
        payload_len: tcp.buffer_len(),
        ..*ip
    };
    start(out, &ip, tcp.header_len())?;
    tcp.emit_header(&mut out[ipv4::HEADER_LEN..])
        .map_err(|e| e.shifted(ipv4::HEADER_LEN))?;
    out.extend_from_slice(tcp.payload);
    tcp::Packet::new_unchecked(&mut out[ipv4::HEADER_LEN..]).fill_checksum(ip.src, ip.dst);
    Ok(out.len())
}

/// Clears `out`, writes IPv4 header + UDP datagram (checksums filled),
/// returns its length.
///
/// `ip.protocol` and `ip.payload_len` are ignored: they follow from `udp`.
pub fn emit_udp(out: &mut Vec<u8>, ip: &Ipv4Repr, udp: &UdpRepr) -> Result<usize> {
    let ip = Ipv4Repr {
        protocol: protocol::UDP,
        payload_len: udp.buffer_len(),
        ..*ip
    };
    start(out, &ip, udp::HEADER_LEN)?;
    udp.emit_header(&mut out[ipv4::HEADER_LEN..])
        .map_err(|e| e.shifted(ipv4::HEADER_LEN))?;
    out.extend_from_slice(udp.payload);
    udp::Packet::new_unchecked(&mut out[ipv4::HEADER_LEN..]).fill_checksum(ip.src, ip.dst);
    Ok(out.len())
}

/// Clears `out`, writes the IPv4 header and leaves `out` sized for the
/// transport header (`transport_header_len` zero bytes) that follows.
///
/// Only the headers are zero-filled: the payload is appended afterwards,
/// so each of its bytes is written once, on every packet's path.
fn start(out: &mut Vec<u8>, ip: &Ipv4Repr, transport_header_len: usize) -> Result<()> {
    let total = ip.buffer_len();
    if total > usize::from(u16::MAX) {
        return Err(WireError::new("ipv4.total_len", 2, WireErrorKind::TooLong));
    }
    out.clear();
    out.reserve(total);
    out.resize(ipv4::HEADER_LEN + transport_header_len, 0);
    ip.emit(&mut ipv4::Packet::new_unchecked(
        &mut out[..ipv4::HEADER_LEN],
    ));
    Ok(())
}
