//! IPv6 over IEEE 802.15.4: IPHC header compression (RFC 6282) and
//! fragmentation (RFC 4944 §5.3), both ways.
//!
//! The IPHC and fragment headers are laid out and read by the `smoltcp`
//! crate's `sixlowpan` module; this module decides what to compress, splits
//! and reassembles, and reports errors with byte offsets. No smoltcp type
//! appears in its API.
//!
//! The UDP next-header compression (NHC) is written here: smoltcp 0.12 (and
//! 0.14) corrupt ports compressed to 4 bits (its encoder joins the two
//! nibbles with `&` instead of `|`, its decoder masks the destination with
//! `0xff`), which the `udp_ports_in_every_compression_mode` test catches.
//!
//! # What is compressed (context-free, as Contiki 3.0's `sicslowpan.c`
//! does with no address context configured)
//!
//! * Traffic class and flow label: elided (TF = 11). Only zero values can
//!   be compressed that way, and smoltcp writes no other TF mode, so a
//!   datagram with a non-zero traffic class or flow label is refused
//!   (`Unsupported`). Contiki's TCP/IP stack sends both as zero.
//! * Next header: UDP is compressed with NHC (RFC 6282 §4.3: ports in 4, 8
//!   or 16 bits as their values allow, checksum always carried, length
//!   elided); TCP, ICMPv6 and anything else go inline (1 byte) with their
//!   headers uncompressed, as RFC 6282 defines no TCP compression.
//! * Hop limit: 1, 64 and 255 are coded in 2 bits, others inline.
//! * Link-local addresses whose interface identifier derives from the MAC
//!   address of the frame (RFC 4944 §6) are elided entirely; other
//!   link-local addresses keep 64 bits (16 if of the `::ff:fe00:XXXX`
//!   short form). Multicast addresses are compressed to 8, 32 or 48 bits.
//! * Every other address (global, unique local) is carried in full (128
//!   bits): with no shared context there is nothing to derive its prefix
//!   from. Contiki with an address context for the network's prefix would
//!   elide those too; not modelled yet.
//!
//! Decompression accepts what this module emits and any context-free IPHC
//! packet; packets that use a context or compress extension headers are
//! `Unsupported`.

use std::collections::HashMap;

use smoltcp::wire::{
    IpProtocol, SixlowpanFragPacket, SixlowpanFragRepr, SixlowpanIphcPacket, SixlowpanIphcRepr,
    SixlowpanNextHeader,
};

use crate::ieee802154::Address;
use crate::ipv6::{self, next_header, Ipv6Repr};
use crate::{checksum, udp, Result, WireError, WireErrorKind};

/// Length of the first fragment's header (RFC 4944 §5.3).
pub const FRAG1_HEADER_LEN: usize = 4;
/// Length of a subsequent fragment's header (RFC 4944 §5.3).
pub const FRAGN_HEADER_LEN: usize = 5;
/// Fragment offsets count units of this many bytes (RFC 4944 §5.3).
pub const FRAG_UNIT: usize = 8;
/// Largest datagram the 11-bit datagram size field can describe.
pub const MAX_DATAGRAM_LEN: usize = 2047;

const DISPATCH_IPHC_MASK: u8 = 0b1110_0000;
const DISPATCH_IPHC: u8 = 0b0110_0000;
const DISPATCH_FRAG_MASK: u8 = 0b1111_1000;
const DISPATCH_FRAG1: u8 = 0b1100_0000;
const DISPATCH_FRAGN: u8 = 0b1110_0000;
const NHC_UDP_MASK: u8 = 0b1111_1000;
const NHC_UDP: u8 = 0b1111_0000;

/// An IPv6 datagram in compressed form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compressed {
    /// IPHC header (and NHC UDP header) followed by the rest of the datagram
    /// unchanged.
    pub bytes: Vec<u8>,
    /// Bytes of `bytes` that are compressed headers.
    pub header_len: usize,
    /// Bytes of the original datagram those headers stand for (40, or 48
    /// with a compressed UDP header).
    pub uncompressed_header_len: usize,
}

/// Compresses a whole IPv6 datagram sent from MAC address `ll_src` to
/// `ll_dst`. The datagram is first parsed in full (checksums included), so
/// nothing malformed is compressed.
pub fn compress(datagram: &[u8], ll_src: Address, ll_dst: Address) -> Result<Compressed> {
    let parsed = ipv6::parse(datagram)?;
    let ip = parsed.ip;
    if ip.traffic_class != 0 {
        return Err(WireError::new(
            "ipv6.traffic_class",
            0,
            WireErrorKind::Unsupported,
        ));
    }
    if ip.flow_label != 0 {
        return Err(WireError::new(
            "ipv6.flow_label",
            1,
            WireErrorKind::Unsupported,
        ));
    }
    let payload = &datagram[ipv6::HEADER_LEN..ip.buffer_len()];
    let is_udp = ip.next_header == next_header::UDP;
    let iphc = SixlowpanIphcRepr {
        src_addr: ip.src,
        ll_src_addr: Some(ll_src.to_smol()),
        dst_addr: ip.dst,
        ll_dst_addr: Some(ll_dst.to_smol()),
        next_header: if is_udp {
            SixlowpanNextHeader::Compressed
        } else {
            SixlowpanNextHeader::Uncompressed(IpProtocol::from(ip.next_header))
        },
        hop_limit: ip.hop_limit,
        ecn: None,
        dscp: None,
        flow_label: None,
    };
    let iphc_len = iphc.buffer_len();
    let mut bytes = vec![0; iphc_len];
    iphc.emit(&mut SixlowpanIphcPacket::new_unchecked(&mut bytes[..]));
    if !is_udp {
        bytes.extend_from_slice(payload);
        return Ok(Compressed {
            bytes,
            header_len: iphc_len,
            uncompressed_header_len: ipv6::HEADER_LEN,
        });
    }
    let packet = udp::Packet::new_unchecked(payload);
    let nhc = emit_udp_nhc(packet.src_port(), packet.dst_port(), packet.checksum());
    let nhc_len = nhc.len();
    bytes.extend_from_slice(&nhc);
    bytes.extend_from_slice(packet.payload());
    Ok(Compressed {
        bytes,
        header_len: iphc_len + nhc_len,
        uncompressed_header_len: ipv6::HEADER_LEN + udp::HEADER_LEN,
    })
}

/// The NHC UDP header (RFC 6282 §4.3.3) for these ports, checksum carried
/// inline. Ports are shortened in the order of Contiki 3.0's
/// `compress_hdr_iphc`: both to 4 bits if both are in 0xF0B0–0xF0BF, else
/// the destination to 8 bits if in 0xF000–0xF0FF, else the source.
fn emit_udp_nhc(src: u16, dst: u16, checksum: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(7);
    let [s_hi, s_lo] = src.to_be_bytes();
    let [d_hi, d_lo] = dst.to_be_bytes();
    if src & 0xfff0 == 0xf0b0 && dst & 0xfff0 == 0xf0b0 {
        out.extend_from_slice(&[NHC_UDP | 0b11, (s_lo & 0x0f) << 4 | (d_lo & 0x0f)]);
    } else if dst & 0xff00 == 0xf000 {
        out.extend_from_slice(&[NHC_UDP | 0b01, s_hi, s_lo, d_lo]);
    } else if src & 0xff00 == 0xf000 {
        out.extend_from_slice(&[NHC_UDP | 0b10, s_lo, d_hi, d_lo]);
    } else {
        out.extend_from_slice(&[NHC_UDP, s_hi, s_lo, d_hi, d_lo]);
    }
    out.extend_from_slice(&checksum.to_be_bytes());
    out
}

/// An NHC UDP header read back: ports, checksum (`None` when elided) and
/// its length.
struct UdpNhc {
    src: u16,
    dst: u16,
    checksum: Option<u16>,
    len: usize,
}

/// Reads the NHC UDP header at the start of `bytes`; offsets count from
/// `at`, where `bytes` starts in the packet.
fn parse_udp_nhc(bytes: &[u8], at: usize) -> Result<UdpNhc> {
    let truncated = || {
        WireError::new(
            "sixlowpan.nhc.udp",
            at + bytes.len(),
            WireErrorKind::Truncated,
        )
    };
    let &first = bytes.first().ok_or_else(truncated)?;
    if first & NHC_UDP_MASK != NHC_UDP {
        return Err(WireError::new(
            "sixlowpan.nhc",
            at,
            WireErrorKind::Unsupported,
        ));
    }
    let ports_len = match first & 0b11 {
        0b00 => 4,
        0b11 => 1,
        _ => 3,
    };
    let elided = first & 0b100 != 0;
    let len = 1 + ports_len + if elided { 0 } else { 2 };
    let b = bytes.get(..len).ok_or_else(truncated)?;
    let (src, dst) = match first & 0b11 {
        0b00 => (
            u16::from_be_bytes([b[1], b[2]]),
            u16::from_be_bytes([b[3], b[4]]),
        ),
        0b01 => (u16::from_be_bytes([b[1], b[2]]), 0xf000 | u16::from(b[3])),
        0b10 => (0xf000 | u16::from(b[1]), u16::from_be_bytes([b[2], b[3]])),
        _ => (
            0xf0b0 | u16::from(b[1] >> 4),
            0xf0b0 | u16::from(b[1] & 0x0f),
        ),
    };
    let checksum = (!elided).then(|| u16::from_be_bytes([b[len - 2], b[len - 1]]));
    Ok(UdpNhc {
        src,
        dst,
        checksum,
        len,
    })
}

/// Headers restored from the start of an IPHC packet.
struct Restored {
    /// The uncompressed IPv6 (and UDP) headers.
    headers: Vec<u8>,
    /// How many bytes of the IPHC packet they took.
    consumed: usize,
}

/// Restores the headers of the IPHC packet `packet`, whose datagram is
/// `datagram_len` bytes long uncompressed (`None`: the packet holds the
/// whole datagram, so the length follows from it).
fn restore(
    packet: &[u8],
    ll_src: Address,
    ll_dst: Address,
    datagram_len: Option<usize>,
) -> Result<Restored> {
    if packet.first().map(|b| b & DISPATCH_IPHC_MASK) != Some(DISPATCH_IPHC) {
        return Err(WireError::new(
            "sixlowpan.dispatch",
            0,
            WireErrorKind::BadValue,
        ));
    }
    let view = SixlowpanIphcPacket::new_checked(packet)
        .map_err(|_| WireError::new("sixlowpan.iphc", packet.len(), WireErrorKind::Truncated))?;
    if view.src_context_id().is_some() || view.dst_context_id().is_some() {
        return Err(WireError::new(
            "sixlowpan.iphc.context",
            1,
            WireErrorKind::Unsupported,
        ));
    }
    let repr = SixlowpanIphcRepr::parse(&view, Some(ll_src.to_smol()), Some(ll_dst.to_smol()), &[])
        .map_err(|_| WireError::new("sixlowpan.iphc.address", 1, WireErrorKind::Unsupported))?;
    let iphc_len = view.header_len();
    let (proto, nhc) = match repr.next_header {
        SixlowpanNextHeader::Uncompressed(p) => (u8::from(p), None),
        SixlowpanNextHeader::Compressed => {
            let nhc = parse_udp_nhc(&packet[iphc_len..], iphc_len)?;
            (next_header::UDP, Some(nhc))
        }
    };
    let consumed = iphc_len + nhc.as_ref().map_or(0, |n| n.len);
    let udp_len = if nhc.is_some() { udp::HEADER_LEN } else { 0 };
    let total = match datagram_len {
        Some(len) => len,
        None => ipv6::HEADER_LEN + udp_len + (packet.len() - consumed),
    };
    if total < ipv6::HEADER_LEN + udp_len {
        return Err(WireError::new(
            "sixlowpan.frag.datagram_size",
            0,
            WireErrorKind::BadLength,
        ));
    }
    let payload_len = total - ipv6::HEADER_LEN;
    let ip = Ipv6Repr {
        src: repr.src_addr,
        dst: repr.dst_addr,
        next_header: proto,
        hop_limit: repr.hop_limit,
        traffic_class: repr.dscp.unwrap_or(0) << 2 | repr.ecn.unwrap_or(0),
        flow_label: u32::from(repr.flow_label.unwrap_or(0)),
        payload_len,
    };
    let mut headers = vec![0; ipv6::HEADER_LEN + udp_len];
    ip.emit(&mut headers)?;
    if let Some(nhc) = nhc {
        let length = u16::try_from(payload_len)
            .map_err(|_| WireError::new("udp.length", 0, WireErrorKind::TooLong))?;
        let mut view = udp::Packet::new_unchecked(&mut headers[ipv6::HEADER_LEN..]);
        view.set_src_port(nhc.src);
        view.set_dst_port(nhc.dst);
        view.set_len(length);
        match nhc.checksum {
            Some(sum) => view.set_checksum(sum),
            // An elided checksum (RFC 6282 §4.3.2) is recomputed, which
            // needs the whole datagram.
            None if datagram_len.is_none() => {
                let mut whole = headers[ipv6::HEADER_LEN..].to_vec();
                whole.extend_from_slice(&packet[consumed..]);
                let sum = match checksum::upper_layer_v6(ip.src, ip.dst, next_header::UDP, &whole) {
                    0 => 0xffff,
                    c => c,
                };
                udp::Packet::new_unchecked(&mut headers[ipv6::HEADER_LEN..]).set_checksum(sum);
            }
            None => {
                return Err(WireError::new(
                    "sixlowpan.nhc.udp.checksum",
                    iphc_len,
                    WireErrorKind::Unsupported,
                ))
            }
        }
    }
    Ok(Restored { headers, consumed })
}

/// Decompresses a whole (unfragmented) IPHC packet back into the IPv6
/// datagram, given the MAC addresses of the frame that carried it.
pub fn decompress(packet: &[u8], ll_src: Address, ll_dst: Address) -> Result<Vec<u8>> {
    let restored = restore(packet, ll_src, ll_dst, None)?;
    let mut datagram = restored.headers;
    datagram.extend_from_slice(&packet[restored.consumed..]);
    if datagram.len() > usize::from(u16::MAX) + ipv6::HEADER_LEN {
        return Err(WireError::new(
            "ipv6.payload_len",
            0,
            WireErrorKind::TooLong,
        ));
    }
    Ok(datagram)
}

/// Compresses `datagram` and splits it into the 6LoWPAN payloads of
/// frames holding at most `max_payload` bytes each: one IPHC packet when
/// it fits, else a first fragment (FRAG1 header, compressed headers and
/// data) and subsequent fragments (FRAGN), all tagged `tag`.
///
/// Fragment boundaries fall on multiples of 8 bytes of the uncompressed
/// datagram, as the offsets require; each fragment carries as much as
/// fits, as Contiki's `sicslowpan.c` does.
pub fn fragment(
    datagram: &[u8],
    ll_src: Address,
    ll_dst: Address,
    tag: u16,
    max_payload: usize,
) -> Result<Vec<Vec<u8>>> {
    let compressed = compress(datagram, ll_src, ll_dst)?;
    if compressed.bytes.len() <= max_payload {
        return Ok(vec![compressed.bytes]);
    }
    // The datagram as parsed: link padding beyond its payload length was
    // not compressed and is not sent.
    let size =
        compressed.uncompressed_header_len + (compressed.bytes.len() - compressed.header_len);
    if size > MAX_DATAGRAM_LEN {
        return Err(WireError::new(
            "sixlowpan.frag.datagram_size",
            0,
            WireErrorKind::TooLong,
        ));
    }
    let rest = &compressed.bytes[compressed.header_len..];
    let uh = compressed.uncompressed_header_len;
    let room = max_payload.saturating_sub(FRAG1_HEADER_LEN + compressed.header_len);
    let first_end = (uh + room) / FRAG_UNIT * FRAG_UNIT;
    let room_n = max_payload.saturating_sub(FRAGN_HEADER_LEN) / FRAG_UNIT * FRAG_UNIT;
    if first_end <= uh || room_n == 0 {
        return Err(WireError::new(
            "sixlowpan.frag",
            max_payload,
            WireErrorKind::BufferTooSmall,
        ));
    }
    let size16 = size as u16;
    let mut out = Vec::new();
    let mut first = vec![0; FRAG1_HEADER_LEN];
    SixlowpanFragRepr::FirstFragment { size: size16, tag }
        .emit(&mut SixlowpanFragPacket::new_unchecked(&mut first[..]));
    first.extend_from_slice(&compressed.bytes[..compressed.header_len]);
    first.extend_from_slice(&rest[..first_end - uh]);
    out.push(first);
    let mut offset = first_end;
    while offset < size {
        let end = (offset + room_n).min(size);
        let mut frag = vec![0; FRAGN_HEADER_LEN];
        SixlowpanFragRepr::Fragment {
            size: size16,
            tag,
            // size ≤ 2047, so offset / 8 < 256.
            offset: (offset / FRAG_UNIT) as u8,
        }
        .emit(&mut SixlowpanFragPacket::new_unchecked(&mut frag[..]));
        frag.extend_from_slice(&rest[offset - uh..end - uh]);
        out.push(frag);
        offset = end;
    }
    Ok(out)
}

/// Identifies a datagram being reassembled (RFC 4944 §5.3: sender,
/// receiver, size and tag).
type Key = (Address, Address, u16, u16);

struct Partial {
    data: Vec<u8>,
    filled: Vec<bool>,
    missing: usize,
}

/// Reassembles fragmented datagrams and decompresses every 6LoWPAN payload.
///
/// Datagrams stay until complete or [`Reassembler::clear`]: expiring stale
/// ones is left to the caller, which owns the clock.
#[derive(Default)]
pub struct Reassembler {
    partial: HashMap<Key, Partial>,
}

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of datagrams partly received.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Forgets every partly received datagram.
    pub fn clear(&mut self) {
        self.partial.clear();
    }

    /// Takes the 6LoWPAN payload of one frame from `ll_src` to `ll_dst` and
    /// returns the IPv6 datagram once it is whole: at once for an
    /// unfragmented IPHC packet, at the last missing fragment otherwise.
    pub fn push(
        &mut self,
        payload: &[u8],
        ll_src: Address,
        ll_dst: Address,
    ) -> Result<Option<Vec<u8>>> {
        let Some(&dispatch) = payload.first() else {
            return Err(WireError::new(
                "sixlowpan.dispatch",
                0,
                WireErrorKind::Truncated,
            ));
        };
        let kind = dispatch & DISPATCH_FRAG_MASK;
        if kind != DISPATCH_FRAG1 && kind != DISPATCH_FRAGN {
            return decompress(payload, ll_src, ll_dst).map(Some);
        }
        let frag = SixlowpanFragPacket::new_checked(payload).map_err(|_| {
            WireError::new("sixlowpan.frag", payload.len(), WireErrorKind::Truncated)
        })?;
        let repr = SixlowpanFragRepr::parse(&frag).map_err(|_| {
            WireError::new("sixlowpan.frag", payload.len(), WireErrorKind::Truncated)
        })?;
        let (size, tag, offset, header_len) = match repr {
            SixlowpanFragRepr::FirstFragment { size, tag } => (size, tag, 0, FRAG1_HEADER_LEN),
            SixlowpanFragRepr::Fragment { size, tag, offset } => {
                (size, tag, usize::from(offset) * FRAG_UNIT, FRAGN_HEADER_LEN)
            }
        };
        let total = usize::from(size);
        if total < ipv6::HEADER_LEN {
            return Err(WireError::new(
                "sixlowpan.frag.datagram_size",
                0,
                WireErrorKind::BadLength,
            ));
        }
        let body = &payload[header_len..];
        let piece: Vec<u8> = if kind == DISPATCH_FRAG1 {
            let restored =
                restore(body, ll_src, ll_dst, Some(total)).map_err(|e| e.shifted(header_len))?;
            let mut piece = restored.headers;
            piece.extend_from_slice(&body[restored.consumed..]);
            piece
        } else {
            body.to_vec()
        };
        if offset + piece.len() > total {
            return Err(WireError::new(
                "sixlowpan.frag.datagram_offset",
                4,
                WireErrorKind::BadLength,
            ));
        }
        let key = (ll_src, ll_dst, size, tag);
        let partial = self.partial.entry(key).or_insert_with(|| Partial {
            data: vec![0; total],
            filled: vec![false; total],
            missing: total,
        });
        for (i, &b) in piece.iter().enumerate() {
            let at = offset + i;
            partial.data[at] = b;
            if !partial.filled[at] {
                partial.filled[at] = true;
                partial.missing -= 1;
            }
        }
        if partial.missing > 0 {
            return Ok(None);
        }
        let done = self.partial.remove(&key).map(|p| p.data);
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::icmpv6::Icmpv6Repr;
    use crate::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
    use crate::udp::UdpRepr;
    use std::net::Ipv6Addr;

    const A: Address = Address::Extended([0x00, 0x12, 0x4b, 0, 0, 0, 0, 0x01]);
    const B: Address = Address::Extended([0x00, 0x12, 0x4b, 0, 0, 0, 0, 0x02]);

    /// The link-local address RFC 4944 §6 derives from an extended address.
    fn link_local(a: Address) -> Ipv6Addr {
        let Address::Extended(mut eui) = a else {
            unreachable!()
        };
        eui[0] ^= 0x02;
        let mut o = [0u8; 16];
        o[0] = 0xfe;
        o[1] = 0x80;
        o[8..].copy_from_slice(&eui);
        Ipv6Addr::from(o)
    }

    fn ip(src: Ipv6Addr, dst: Ipv6Addr) -> Ipv6Repr {
        Ipv6Repr {
            src,
            dst,
            next_header: 0,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        }
    }

    fn tcp(payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            src_port: 49152,
            dst_port: 80,
            seq: SeqNumber(12345),
            ack: SeqNumber(678),
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 960,
            urgent: 0,
            options: TcpOptions::default(),
            payload,
        }
    }

    #[test]
    fn link_local_udp_compresses_to_seven_bytes_of_headers() {
        let mut d = Vec::new();
        ipv6::emit_udp(
            &mut d,
            &ip(link_local(A), link_local(B)),
            &UdpRepr {
                src_port: 0xf0b1,
                dst_port: 0xf0b2,
                payload: b"hi",
            },
        )
        .unwrap();
        let c = compress(&d, A, B).unwrap();
        // IPHC 2 bytes (everything elided), NHC 1 + 1 (4-bit ports) + 2
        // (checksum) bytes.
        assert_eq!((c.header_len, c.uncompressed_header_len), (2 + 4, 48));
        // TF 11, NH 1, HLIM 10 (64); SAM and DAM 11 (derived from the MAC).
        assert_eq!(&c.bytes[..2], &[0x7e, 0x33]);
        assert_eq!(decompress(&c.bytes, A, B).unwrap(), d);
        // The same bytes under other MAC addresses decompress to other
        // IPv6 addresses, and the UDP checksum then fails.
        let c_addr = Address::Extended([0x00, 0x12, 0x4b, 0, 0, 0, 0, 0x03]);
        let other = decompress(&c.bytes, c_addr, B).unwrap();
        assert_eq!(ipv6::parse(&other).unwrap_err().field, "udp.checksum");
    }

    #[test]
    fn udp_ports_in_every_compression_mode() {
        let cases = [
            (0xf0b1, 0xf0bf, 2),
            (0xf0b1, 0xf0c0, 4),
            (1234, 0xf001, 4),
            (0xf0ff, 5683, 4),
            (5683, 5684, 5),
        ];
        for (src_port, dst_port, ports_len) in cases {
            let mut d = Vec::new();
            ipv6::emit_udp(
                &mut d,
                &ip(link_local(A), link_local(B)),
                &UdpRepr {
                    src_port,
                    dst_port,
                    payload: b"x",
                },
            )
            .unwrap();
            let c = compress(&d, A, B).unwrap();
            assert_eq!(c.header_len, 2 + ports_len + 2, "{src_port} {dst_port}");
            assert_eq!(decompress(&c.bytes, A, B).unwrap(), d);
        }
    }

    #[test]
    fn elided_udp_checksum_is_recomputed() {
        let mut d = Vec::new();
        ipv6::emit_udp(
            &mut d,
            &ip(link_local(A), link_local(B)),
            &UdpRepr {
                src_port: 7,
                dst_port: 9,
                payload: b"abc",
            },
        )
        .unwrap();
        let c = compress(&d, A, B).unwrap();
        // Drop the checksum and set the C bit, as a peer may (RFC 6282 §4.3.2).
        let mut packet = c.bytes[..2].to_vec();
        packet.push(c.bytes[2] | 0b100);
        packet.extend_from_slice(&c.bytes[3..7]);
        packet.extend_from_slice(&c.bytes[9..]);
        assert_eq!(decompress(&packet, A, B).unwrap(), d);
    }

    #[test]
    fn global_tcp_carries_both_addresses() {
        let src: Ipv6Addr = "fd00::212:4b00:0:1".parse().unwrap();
        let dst: Ipv6Addr = "fd00::1".parse().unwrap();
        let mut d = Vec::new();
        ipv6::emit_tcp(&mut d, &ip(src, dst), &tcp(&[7; 48])).unwrap();
        let c = compress(&d, A, B).unwrap();
        // IPHC 2 + next header 1 + 16 + 16; TCP unchanged.
        assert_eq!(c.header_len, 35);
        assert_eq!(c.bytes.len(), 35 + 20 + 48);
        assert_eq!(decompress(&c.bytes, A, B).unwrap(), d);
    }

    #[test]
    fn nonzero_flow_label_is_refused_by_name() {
        let mut d = Vec::new();
        let mut repr = ip(link_local(A), link_local(B));
        repr.flow_label = 5;
        ipv6::emit_icmpv6(
            &mut d,
            &repr,
            &Icmpv6Repr::EchoRequest {
                ident: 1,
                seq: 1,
                data: &[],
            },
        )
        .unwrap();
        assert_eq!(compress(&d, A, B).unwrap_err().field, "ipv6.flow_label");
    }

    #[test]
    fn fragments_fit_and_reassemble_out_of_order() {
        let src: Ipv6Addr = "fd00::212:4b00:0:1".parse().unwrap();
        let dst: Ipv6Addr = "fd00::1".parse().unwrap();
        let data: Vec<u8> = (0..=255).cycle().take(400).collect();
        let mut d = Vec::new();
        ipv6::emit_tcp(&mut d, &ip(src, dst), &tcp(&data)).unwrap();
        let frags = fragment(&d, A, B, 0x1234, 104).unwrap();
        assert!(frags.len() > 4);
        assert!(frags.iter().all(|f| f.len() <= 104));
        assert_eq!(frags[0][0] & 0xf8, 0xc0);
        assert!(frags[1..].iter().all(|f| f[0] & 0xf8 == 0xe0));
        let mut r = Reassembler::new();
        let mut order: Vec<usize> = (0..frags.len()).rev().collect();
        order.rotate_left(1);
        let mut got = None;
        for &i in &order {
            assert!(got.is_none());
            got = r.push(&frags[i], A, B).unwrap();
        }
        assert_eq!(got.unwrap(), d);
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn bad_fragments_are_named() {
        let mut r = Reassembler::new();
        assert_eq!(
            r.push(&[0xc0, 0x10], A, B).unwrap_err().field,
            "sixlowpan.frag"
        );
        // A FRAGN whose data runs past the datagram size.
        let e = r
            .push(&[0xe0, 0x30, 0, 1, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9], A, B)
            .unwrap_err();
        assert_eq!(e.field, "sixlowpan.frag.datagram_offset");
        assert_eq!(
            r.push(&[0x41], A, B).unwrap_err().field,
            "sixlowpan.dispatch"
        );
    }

    /// Ports in each NHC range as well as anywhere.
    fn port() -> impl proptest::strategy::Strategy<Value = u16> {
        proptest::prop_oneof![
            0xf0b0u16..=0xf0bf,
            0xf000u16..=0xf0ff,
            proptest::num::u16::ANY
        ]
    }

    proptest::proptest! {
        #[test]
        fn tcp_and_udp_round_trip(
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..1200),
            udp_proto in proptest::bool::ANY,
            global in proptest::bool::ANY,
            hop_limit in proptest::num::u8::ANY,
            src_port in port(),
            dst_port in port(),
            tag in proptest::num::u16::ANY,
            // From a frame with long addresses and a separate source PAN to one
            // with short addresses.
            max_payload in 60usize..=118,
        ) {
            let (src, dst) = if global {
                ("fd00::212:4b00:0:1".parse().unwrap(), "2001:db8::1".parse().unwrap())
            } else {
                (link_local(A), link_local(B))
            };
            let mut repr = ip(src, dst);
            repr.hop_limit = hop_limit;
            let mut d = Vec::new();
            if udp_proto {
                ipv6::emit_udp(&mut d, &repr, &UdpRepr { src_port, dst_port, payload: &payload }).unwrap();
            } else {
                let mut t = tcp(&payload);
                t.src_port = src_port;
                t.dst_port = dst_port;
                ipv6::emit_tcp(&mut d, &repr, &t).unwrap();
            }
            let frags = fragment(&d, A, B, tag, max_payload).unwrap();
            let mut r = Reassembler::new();
            let mut out = None;
            for f in &frags {
                proptest::prop_assert!(f.len() <= max_payload);
                proptest::prop_assert!(out.is_none());
                out = r.push(f, A, B).unwrap();
            }
            proptest::prop_assert_eq!(out.unwrap(), d);
        }

        #[test]
        fn push_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..130)) {
            let _ = Reassembler::new().push(&bytes, A, B);
            // Random bytes rarely start with an IPHC or fragment dispatch:
            // force each, so the decoders behind them are reached too.
            if let Some((&first, rest)) = bytes.split_first() {
                let mut r = Reassembler::new();
                let iphc: Vec<u8> = [DISPATCH_IPHC | (first & 0x1f)].iter().chain(rest).copied().collect();
                let _ = r.push(&iphc, A, B);
                let _ = r.push(&iphc, A, Address::Short(u16::from(first)));
                for head in [[0xc0 | (first & 7), 0x80, 0, 1], [0xc0, 0x28, 0, 1]] {
                    let frag1: Vec<u8> = head.iter().chain(&iphc).copied().collect();
                    let _ = r.push(&frag1, A, B);
                }
            }
        }
    }
}
