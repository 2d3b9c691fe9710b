//! Reading captures: the records of a pcap or pcapng file, the IP datagram
//! inside each link-layer frame, and the TCP header fields of a datagram.
//!
//! The containers are parsed by the `pcap-file` crate's slice parsers; this
//! module adds what a reader of captures taken anywhere needs on top:
//!
//! * [`records`]: every packet record of a pcap or pcapng file in order,
//!   with its link type and its time in nanoseconds (pcapng interfaces
//!   give each their own link type and `if_tsresol`); an error names the
//!   packet number and the byte offset where the file stops making sense;
//! * [`network_layer`]: the IP datagram inside a frame of the link types
//!   real captures use (Ethernet with VLAN tags, Linux cooked v1 and v2,
//!   BSD loopback, raw IP);
//! * [`tcp_header`]: the TCP fields a packet-by-packet comparison needs,
//!   read without verifying checksums or requiring the whole segment, since
//!   real captures carry offloaded (not yet computed) checksums and
//!   snapshot-length cuts.
//!
//! Nothing here panics, whatever the bytes (see the crate's panic safety).

use std::borrow::Cow;
use std::net::IpAddr;

use byteorder_slice::{BigEndian, LittleEndian};
use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::{ENHANCED_PACKET_BLOCK, SIMPLE_PACKET_BLOCK};
use pcap_file::pcapng::{Block, PcapNgParser, RawBlock};
use pcap_file::{Endianness, PcapError, TsResolution};

use crate::ipv4;
use crate::tcp::{self, SeqNumber, TcpFlags};

/// Largest packet record accepted; a larger length means the file is
/// garbled (no link carries megabyte frames).
pub const MAX_RECORD: u32 = 1 << 20;

/// pcap magic numbers as the file's first four bytes (both byte orders,
/// microsecond and nanosecond timestamps).
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
];
/// The block type of a pcapng section header, the file's first four bytes.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Bytes of a pcap file header and of a pcap record header.
const PCAP_HEADER_LEN: usize = 24;
const PCAP_RECORD_HEADER_LEN: usize = 16;

/// Whether `head` (a file's first bytes) starts like a pcap or pcapng file.
pub fn is_capture(head: &[u8]) -> bool {
    head.get(..4)
        .is_some_and(|m| PCAP_MAGICS.iter().any(|p| p == m) || m == PCAPNG_MAGIC)
}

/// Why a capture's records could not be read, on one line that names the
/// packet (counted from 1) or the byte offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ReadError {
    /// Byte offset of the header, record or block at fault.
    pub offset: usize,
    /// The packet at fault, when the fault is in a packet record.
    pub packet: Option<u64>,
    /// What went wrong.
    pub message: String,
}

/// One packet record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Position among the file's packet records, from 1 (what Wireshark
    /// calls the frame number).
    pub number: u64,
    /// Byte offset of the record (pcap) or block (pcapng) in the file.
    pub offset: usize,
    /// Timestamp in nanoseconds since 1970 (or since the run's start for
    /// a simulated capture). Wider than `u64`: a pcapng interface may
    /// count seconds in a 64-bit field.
    pub time_ns: u128,
    /// LINKTYPE_ number of the record's interface.
    pub link_type: u32,
    /// The bytes captured.
    pub data: Cow<'a, [u8]>,
    /// The packet's length on the wire.
    pub orig_len: u32,
}

enum Format {
    Pcap(PcapParser),
    PcapNg(PcapNgParser),
}

/// The packet records of a capture, in file order; see [`records`].
pub struct Records<'a> {
    data: &'a [u8],
    offset: usize,
    number: u64,
    format: Format,
    done: bool,
}

/// The records of the pcap or pcapng file `data`. Fails when the file
/// header cannot be read; a later fault ends the iteration with one error.
pub fn records(data: &[u8]) -> Result<Records<'_>, ReadError> {
    let fail = |message: String| ReadError {
        offset: 0,
        packet: None,
        message,
    };
    let head = data.get(..4).unwrap_or(data);
    let format = if PCAP_MAGICS.iter().any(|m| m == head) {
        let (_, parser) = PcapParser::new(data).map_err(|e| match e {
            PcapError::IncompleteBuffer => fail("truncated pcap header".into()),
            e => fail(format!("garbled pcap header: {e}")),
        })?;
        Format::Pcap(parser)
    } else if head == PCAPNG_MAGIC {
        // The section header is read with the other blocks, so that its
        // errors name their offset the same way.
        let (_, parser) = PcapNgParser::new(data).map_err(|e| block_error(0, e))?;
        Format::PcapNg(parser)
    } else {
        return Err(fail("not a pcap or pcapng file".into()));
    };
    let offset = match format {
        Format::Pcap(_) => PCAP_HEADER_LEN,
        Format::PcapNg(_) => 0,
    };
    Ok(Records {
        data,
        offset,
        number: 0,
        format,
        done: false,
    })
}

fn block_error(offset: usize, e: PcapError) -> ReadError {
    let message = match e {
        PcapError::IncompleteBuffer => format!("truncated: block at byte {offset} is cut short"),
        e => format!("garbled: block at byte {offset}: {e}"),
    };
    ReadError {
        offset,
        packet: None,
        message,
    }
}

impl Records<'_> {
    /// The link type of a pcap file's header (`None` for pcapng, whose
    /// interfaces each have their own).
    pub fn pcap_link_type(&self) -> Option<u32> {
        match &self.format {
            Format::Pcap(parser) => Some(pcap_link_type(parser)),
            Format::PcapNg(_) => None,
        }
    }
}

/// The low 16 bits: the upper ones of a pcap header's link type field
/// carry FCS information.
fn pcap_link_type(parser: &PcapParser) -> u32 {
    u32::from(parser.header().datalink) & 0xffff
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = match &mut self.format {
            Format::Pcap(_) => self.next_pcap(),
            Format::PcapNg(_) => self.next_pcapng(),
        };
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}

impl<'a> Records<'a> {
    /// An error in the current packet, which starts at byte `offset`.
    fn fault(&self, offset: usize, message: String) -> ReadError {
        ReadError {
            offset,
            packet: Some(self.number),
            message,
        }
    }

    fn next_pcap(&mut self) -> Option<Result<Record<'a>, ReadError>> {
        let Format::Pcap(parser) = &self.format else {
            return None;
        };
        let offset = self.offset;
        let rest = self.data.get(offset..).unwrap_or_default();
        if rest.is_empty() {
            return None;
        }
        self.number += 1;
        let number = self.number;
        let header = parser.header();
        let claimed = rest.get(8..12).map(|b| {
            let b = [b[0], b[1], b[2], b[3]];
            match header.endianness {
                Endianness::Big => u32::from_be_bytes(b),
                Endianness::Little => u32::from_le_bytes(b),
            }
        });
        if let Some(claimed) = claimed.filter(|&c| c > MAX_RECORD) {
            let message =
                format!("garbled: packet {number} (byte {offset}) claims {claimed} bytes");
            return Some(Err(self.fault(offset, message)));
        }
        let Ok((_, raw)) = parser.next_raw_packet(rest) else {
            // The only error of a record within MAX_RECORD: too few bytes.
            let message = format!("truncated: packet {number} (byte {offset}) is cut short");
            return Some(Err(self.fault(offset, message)));
        };
        self.offset = offset + PCAP_RECORD_HEADER_LEN + raw.data.len();
        // The fraction is taken as written, even past a second, as
        // Wireshark shows it.
        let unit: u128 = match header.ts_resolution {
            TsResolution::MicroSecond => 1_000,
            TsResolution::NanoSecond => 1,
        };
        let time_ns = u128::from(raw.ts_sec) * 1_000_000_000 + u128::from(raw.ts_frac) * unit;
        Some(Ok(Record {
            number,
            offset,
            time_ns,
            link_type: pcap_link_type(parser),
            data: raw.data,
            orig_len: raw.orig_len,
        }))
    }

    fn next_pcapng(&mut self) -> Option<Result<Record<'a>, ReadError>> {
        loop {
            let Format::PcapNg(parser) = &mut self.format else {
                return None;
            };
            let offset = self.offset;
            let rest = self.data.get(offset..).unwrap_or_default();
            if rest.is_empty() {
                return None;
            }
            // The parser keeps the section's byte order and interfaces as
            // it goes; packet blocks are decoded here, other blocks skipped.
            let (remaining, raw) = match parser.next_raw_block(rest) {
                Ok(parsed) => parsed,
                Err(e) => return Some(Err(block_error(offset, e))),
            };
            self.offset = offset + (rest.len() - remaining.len());
            match raw.type_ {
                ENHANCED_PACKET_BLOCK => {
                    self.number += 1;
                    let little = parser.section().endianness == Endianness::Little;
                    return Some(self.enhanced_packet(offset, raw, little));
                }
                SIMPLE_PACKET_BLOCK => {
                    self.number += 1;
                    let message = format!(
                        "packet {} (byte {offset}) is a simple packet block, which carries no time",
                        self.number
                    );
                    return Some(Err(self.fault(offset, message)));
                }
                _ => {}
            }
        }
    }

    fn enhanced_packet(
        &self,
        offset: usize,
        raw: RawBlock<'a>,
        little: bool,
    ) -> Result<Record<'a>, ReadError> {
        let garbled = |why: String| {
            let message = format!("garbled: packet {} (byte {offset}){why}", self.number);
            self.fault(offset, message)
        };
        let block = if little {
            raw.try_into_block::<LittleEndian>()
        } else {
            raw.try_into_block::<BigEndian>()
        };
        let packet: EnhancedPacketBlock<'a> = match block {
            Ok(Block::EnhancedPacket(packet)) => packet,
            Ok(_) => return Err(garbled(String::new())),
            Err(e) => return Err(garbled(format!(": {e}"))),
        };
        let Format::PcapNg(parser) = &self.format else {
            return Err(garbled(String::new()));
        };
        let Some(interface) = parser.interfaces().get(packet.interface_id as usize) else {
            let why = format!(": interface {} is not described", packet.interface_id);
            return Err(garbled(why));
        };
        // pcap-file hands the raw timestamp over as nanoseconds: it is a
        // count of the interface's units.
        let ticks = packet.timestamp.as_nanos();
        Ok(Record {
            number: self.number,
            offset,
            time_ns: ticks_to_ns(ticks, resolution(interface)),
            link_type: u32::from(interface.linktype),
            data: packet.data,
            orig_len: packet.original_len,
        })
    }
}

/// An interface's `if_tsresol`: 6 (microseconds) when absent.
fn resolution(interface: &InterfaceDescriptionBlock<'_>) -> u8 {
    interface
        .options
        .iter()
        .find_map(|o| match o {
            InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
            _ => None,
        })
        .unwrap_or(6)
}

/// Nanoseconds in `ticks` units of `if_tsresol` (a negative power of ten,
/// or of two when its top bit is set), rounded to the nearest.
fn ticks_to_ns(ticks: u128, tsresol: u8) -> u128 {
    let exponent = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 != 0 {
        // ticks / 2^e seconds; ticks < 2^64, so ticks * 1e9 fits.
        let scaled = ticks * 1_000_000_000;
        if exponent >= 127 {
            return 0;
        }
        return (scaled + (1 << exponent >> 1)) >> exponent;
    }
    if exponent <= 9 {
        ticks * 10u128.pow(9 - exponent)
    } else {
        match 10u128.checked_pow(exponent - 9) {
            Some(per_ns) => (ticks + per_ns / 2) / per_ns,
            None => 0,
        }
    }
}

/// The link header of a frame did not say, or the link type is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("link type {0} is not supported")]
pub struct UnsupportedLink(pub u32);

/// LINKTYPE_ numbers [`network_layer`] reads.
pub mod link_type {
    /// BSD loopback: a 4-byte address family in the capturing host's order.
    pub const NULL: u32 = 0;
    /// Ethernet (possibly 802.1Q / 802.1ad tagged).
    pub const ETHERNET: u32 = 1;
    /// Raw IP as some systems number it in pcap files (DLT_RAW).
    pub const RAW_12: u32 = 12;
    /// Raw IP as OpenBSD numbers it (DLT_RAW).
    pub const RAW_14: u32 = 14;
    /// Raw IP, IPv4 or IPv6 by the version nibble.
    pub const RAW: u32 = 101;
    /// OpenBSD loopback: like [`NULL`] in network order.
    pub const LOOP: u32 = 108;
    /// Linux cooked capture v1 (`tcpdump -i any`).
    pub const LINUX_SLL: u32 = 113;
    /// Raw IPv4.
    pub const IPV4: u32 = 228;
    /// Raw IPv6.
    pub const IPV6: u32 = 229;
    /// Linux cooked capture v2.
    pub const LINUX_SLL2: u32 = 276;
}

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
const ETHERTYPE_VLAN: [[u8; 2]; 2] = [[0x81, 0x00], [0x88, 0xa8]];

fn ethertype_at(frame: &[u8], at: usize) -> Option<[u8; 2]> {
    frame.get(at..at + 2).map(|b| [b[0], b[1]])
}

fn ip_after(frame: &[u8], ethertype_at_: usize, header_len: usize) -> Option<&[u8]> {
    let ethertype = ethertype_at(frame, ethertype_at_)?;
    (ethertype == ETHERTYPE_IPV4 || ethertype == ETHERTYPE_IPV6)
        .then(|| frame.get(header_len..).unwrap_or_default())
}

/// The IP datagram inside a frame of link type `link_type`; `Ok(None)` when
/// the frame holds something else (ARP, a truncated header).
pub fn network_layer(link_type: u32, frame: &[u8]) -> Result<Option<&[u8]>, UnsupportedLink> {
    use link_type::*;
    Ok(match link_type {
        RAW | IPV4 | IPV6 | RAW_12 | RAW_14 => Some(frame),
        ETHERNET => {
            // Destination and source MACs, then the EtherType, after any
            // number of 4-byte VLAN tags.
            let mut at = 12;
            while let Some(ethertype) = ethertype_at(frame, at) {
                if !ETHERTYPE_VLAN.contains(&ethertype) || frame.len() < at + 6 {
                    break;
                }
                at += 4;
            }
            ip_after(frame, at, at + 2)
        }
        // Packet type, address type and length, 8 address bytes, protocol.
        LINUX_SLL => ip_after(frame, 14, 16),
        // Protocol first, then 18 bytes of interface, type and address.
        LINUX_SLL2 => ip_after(frame, 0, 20),
        NULL | LOOP => Some(frame.get(4..).unwrap_or_default()),
        other => return Err(UnsupportedLink(other)),
    })
}

/// What a packet-by-packet comparison reads of a TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpHeader {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number (meaningful with ACK only).
    pub ack: SeqNumber,
    /// The eight flag bits.
    pub flags: TcpFlags,
    /// Payload bytes, from the IP header's length (so a segment cut by the
    /// snapshot length still counts whole).
    pub payload_len: usize,
}

/// The TCP header of an IPv4 or IPv6 datagram; `None` for any other
/// protocol, an IPv4 fragment after the first, IPv6 with extension headers,
/// or lengths that contradict each other. Only the fixed headers need be
/// captured; checksums are not verified.
pub fn tcp_header(datagram: &[u8]) -> Option<TcpHeader> {
    let version = datagram.first()? >> 4;
    let (src, dst, header_len, ip_len, rest) = match version {
        4 => {
            if datagram.len() < ipv4::HEADER_LEN {
                return None;
            }
            // The fixed header is there, which is all these accessors read.
            let ip = ipv4::Packet::new_unchecked(datagram);
            let header_len = ip.header_len();
            if ip.protocol() != ipv4::protocol::TCP
                || ip.frag_offset() != 0
                || header_len < ipv4::HEADER_LEN
            {
                return None;
            }
            // Segmentation offload captures may say 0; the bytes captured
            // then tell the length.
            let ip_len = match ip.total_len() {
                0 => datagram.len(),
                total => usize::from(total),
            };
            let rest = datagram.get(header_len..)?;
            (
                IpAddr::V4(ip.src_addr()),
                IpAddr::V4(ip.dst_addr()),
                header_len,
                ip_len,
                rest,
            )
        }
        6 => {
            use smoltcp::wire::{IpProtocol, Ipv6Packet};
            let header_len = crate::ipv6::HEADER_LEN;
            let rest = datagram.get(header_len..)?;
            let ip = Ipv6Packet::new_unchecked(datagram);
            if ip.next_header() != IpProtocol::Tcp {
                return None;
            }
            (
                IpAddr::V6(ip.src_addr()),
                IpAddr::V6(ip.dst_addr()),
                header_len,
                header_len + usize::from(ip.payload_len()),
                rest,
            )
        }
        _ => return None,
    };
    if rest.len() < tcp::HEADER_LEN {
        return None;
    }
    // The fixed header is there: the options need not be (snapshot length).
    let segment = tcp::Packet::new_unchecked(rest);
    let data_offset = segment.header_len();
    if data_offset < tcp::HEADER_LEN {
        return None;
    }
    let payload_len = ip_len.checked_sub(header_len + data_offset)?;
    Some(TcpHeader {
        src,
        dst,
        src_port: segment.src_port(),
        dst_port: segment.dst_port(),
        seq: segment.seq_number(),
        ack: segment.ack_number(),
        flags: segment.flags(),
        payload_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::{protocol, Ipv4Repr};
    use crate::ipv6::Ipv6Repr;
    use crate::packet;
    use crate::tcp::{TcpOptions, TcpRepr};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn segment(payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(1000),
            ack: SeqNumber(2000),
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 512,
            urgent: 0,
            options: TcpOptions {
                mss: Some(1460),
                ..TcpOptions::default()
            },
            payload,
        }
    }

    fn v4_datagram(payload: &[u8]) -> Vec<u8> {
        let ip = Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: protocol::TCP,
            ttl: 64,
            ident: 7,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let mut buf = Vec::new();
        packet::emit_tcp(&mut buf, &ip, &segment(payload)).unwrap();
        buf
    }

    fn v6_datagram(payload: &[u8]) -> Vec<u8> {
        let ip = Ipv6Repr {
            src: "fd00::1".parse().unwrap(),
            dst: "fd00::2".parse().unwrap(),
            next_header: crate::ipv6::next_header::TCP,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        };
        let mut buf = Vec::new();
        crate::ipv6::emit_tcp(&mut buf, &ip, &segment(payload)).unwrap();
        buf
    }

    fn expected_v4(payload_len: usize) -> TcpHeader {
        TcpHeader {
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber(1000),
            ack: SeqNumber(2000),
            flags: TcpFlags::ACK | TcpFlags::PSH,
            payload_len,
        }
    }

    /// A pcap file (little-endian, microseconds unless `nanos`) with one
    /// record per `(seconds, fraction, frame)`.
    fn pcap(link_type: u32, nanos: bool, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut out = magic.to_le_bytes().to_vec();
        out.extend_from_slice(&[2, 0, 4, 0]); // version 2.4
        for word in [0, 0, 65535, link_type] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        for (seconds, fraction, frame) in frames {
            let len = frame.len() as u32;
            for word in [*seconds, *fraction, len, len] {
                out.extend_from_slice(&word.to_le_bytes());
            }
            out.extend_from_slice(frame);
        }
        out
    }

    /// pcapng blocks in little endian (`big` for big endian).
    struct Ng {
        out: Vec<u8>,
        big: bool,
    }

    impl Ng {
        fn new(big: bool) -> Self {
            let mut ng = Ng {
                out: Vec::new(),
                big,
            };
            let mut body = ng.u32(0x1a2b_3c4d);
            body.extend(ng.u16(1));
            body.extend(ng.u16(0));
            body.extend_from_slice(&[0xff; 8]); // section length unknown
            ng.block(0x0a0d_0d0a, &body);
            ng
        }
        fn u32(&self, v: u32) -> Vec<u8> {
            if self.big {
                v.to_be_bytes().to_vec()
            } else {
                v.to_le_bytes().to_vec()
            }
        }
        fn u16(&self, v: u16) -> Vec<u8> {
            if self.big {
                v.to_be_bytes().to_vec()
            } else {
                v.to_le_bytes().to_vec()
            }
        }
        fn block(&mut self, kind: u32, body: &[u8]) {
            let mut body = body.to_vec();
            while body.len() % 4 != 0 {
                body.push(0);
            }
            let len = body.len() as u32 + 12;
            let block = [self.u32(kind), self.u32(len), body, self.u32(len)].concat();
            self.out.extend(block);
        }
        fn interface(&mut self, link_type: u16, tsresol: Option<u8>) {
            let mut body = [self.u16(link_type), self.u16(0), self.u32(0)].concat();
            if let Some(r) = tsresol {
                body.extend([self.u16(9), self.u16(1), vec![r, 0, 0, 0]].concat());
                body.extend([self.u16(0), self.u16(0)].concat());
            }
            self.block(1, &body);
        }
        fn packet(&mut self, interface: u32, ticks: u64, frame: &[u8]) {
            let len = frame.len() as u32;
            let body = [
                self.u32(interface),
                self.u32((ticks >> 32) as u32),
                self.u32(ticks as u32),
                self.u32(len),
                self.u32(len),
                frame.to_vec(),
            ]
            .concat();
            self.block(6, &body);
        }
    }

    fn read_all(data: &[u8]) -> Result<Vec<Record<'_>>, ReadError> {
        records(data)?.collect()
    }

    #[test]
    fn tcp_fields_of_ipv4_and_ipv6_datagrams() {
        assert_eq!(tcp_header(&v4_datagram(b"hello")), Some(expected_v4(5)));
        let v6 = tcp_header(&v6_datagram(b"hi")).unwrap();
        assert_eq!(v6.src, "fd00::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            (v6.src_port, v6.seq, v6.payload_len),
            (40000, SeqNumber(1000), 2)
        );
    }

    #[test]
    fn tcp_fields_survive_offloaded_checksums_and_snapshot_cuts() {
        let mut datagram = v4_datagram(&[7; 100]);
        datagram[36] ^= 0xff; // TCP checksum: not yet computed by the NIC
                              // Cut after the fixed TCP header: the options and payload are gone,
                              // the IP header still tells the length.
        datagram.truncate(40);
        assert_eq!(tcp_header(&datagram), Some(expected_v4(100)));
        // Total length 0 (segmentation offload): the bytes captured count.
        let mut tso = v4_datagram(&[7; 10]);
        tso[2..4].copy_from_slice(&[0, 0]);
        assert_eq!(tcp_header(&tso), Some(expected_v4(10)));
    }

    #[test]
    fn what_is_not_a_whole_tcp_header_gives_none() {
        let datagram = v4_datagram(b"x");
        assert_eq!(tcp_header(&datagram[..39]), None, "TCP header cut");
        let mut udp = datagram.clone();
        udp[9] = protocol::UDP;
        assert_eq!(tcp_header(&udp), None);
        let mut fragment = datagram.clone();
        fragment[7] = 1; // fragment offset 8 bytes
        assert_eq!(tcp_header(&fragment), None);
        let mut short_offset = datagram.clone();
        short_offset[32] = 0x40; // data offset 16 bytes
        assert_eq!(tcp_header(&short_offset), None);
        let mut lying = datagram.clone();
        lying[2..4].copy_from_slice(&30u16.to_be_bytes()); // shorter than its headers
        assert_eq!(tcp_header(&lying), None);
        assert_eq!(tcp_header(&[0x55; 60]), None, "version 5");
        assert_eq!(tcp_header(&[]), None);
        assert_eq!(tcp_header(&v6_datagram(b"")[..59]), None);
    }

    fn ethernet(ip: &[u8], vlans: usize) -> Vec<u8> {
        let mut frame = vec![0u8; 12];
        for _ in 0..vlans {
            frame.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        let ethertype = if ip[0] >> 4 == 6 {
            [0x86, 0xdd]
        } else {
            [0x08, 0x00]
        };
        frame.extend_from_slice(&ethertype);
        frame.extend_from_slice(ip);
        frame
    }

    #[test]
    fn each_link_type_yields_the_datagram() {
        use link_type::*;
        let ip = v4_datagram(b"abc");
        let v6 = v6_datagram(b"abc");
        assert_eq!(network_layer(RAW, &ip), Ok(Some(&ip[..])));
        for raw in [IPV4, IPV6, RAW_12, RAW_14] {
            assert_eq!(network_layer(raw, &ip), Ok(Some(&ip[..])));
        }
        for (datagram, vlans) in [(&ip, 0), (&ip, 2), (&v6, 1)] {
            let frame = ethernet(datagram, vlans);
            assert_eq!(network_layer(ETHERNET, &frame), Ok(Some(&datagram[..])));
        }
        let mut arp = ethernet(&ip, 0);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(network_layer(ETHERNET, &arp), Ok(None));
        assert_eq!(network_layer(ETHERNET, &[0; 13]), Ok(None));
        assert_eq!(network_layer(ETHERNET, &[0x81, 0x00][..]), Ok(None));

        let mut sll = vec![0, 4, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&ip);
        assert_eq!(network_layer(LINUX_SLL, &sll), Ok(Some(&ip[..])));
        let mut sll2 = vec![0x86, 0xdd, 0, 0, 0, 0, 0, 1, 0, 1, 4, 6];
        sll2.extend_from_slice(&[1, 2, 3, 4, 5, 6, 0, 0]);
        sll2.extend_from_slice(&v6);
        assert_eq!(network_layer(LINUX_SLL2, &sll2), Ok(Some(&v6[..])));
        sll2[0] = 0x08;
        sll2[1] = 0x06;
        assert_eq!(network_layer(LINUX_SLL2, &sll2), Ok(None));

        for null in [NULL, LOOP] {
            let frame = [&2u32.to_le_bytes()[..], &ip].concat();
            assert_eq!(network_layer(null, &frame), Ok(Some(&ip[..])));
            assert_eq!(network_layer(null, &[2]), Ok(Some(&[][..])));
        }
        assert_eq!(network_layer(147, &ip), Err(UnsupportedLink(147)));
        assert_eq!(
            UnsupportedLink(147).to_string(),
            "link type 147 is not supported"
        );
    }

    #[test]
    fn pcap_records_with_their_times_and_link_type() {
        let ip = v4_datagram(b"abc");
        let frame = ethernet(&ip, 0);
        let micro = pcap(1, false, &[(2, 500_000, &frame), (3, 1, &frame)]);
        let records = read_all(&micro).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].time_ns, 2_500_000_000);
        assert_eq!(records[1].time_ns, 3_000_001_000);
        assert_eq!(
            (records[1].number, records[1].offset),
            (2, 24 + 16 + frame.len())
        );
        assert_eq!(records[0].link_type, link_type::ETHERNET);
        assert_eq!(&*records[0].data, &frame[..]);
        let nano = pcap(101, true, &[(2, 5, &ip)]);
        assert_eq!(read_all(&nano).unwrap()[0].time_ns, 2_000_000_005);
        assert_eq!(records_link(&nano), Some(101));
        // FCS bits above the link type are not part of it.
        assert_eq!(records_link(&pcap(0x1000_0001, false, &[])), Some(1));
    }

    fn records_link(data: &[u8]) -> Option<u32> {
        super::records(data).unwrap().pcap_link_type()
    }

    #[test]
    fn pcapng_records_use_each_interfaces_link_type_and_resolution() {
        let ip = v4_datagram(b"abc");
        let frame = ethernet(&ip, 0);
        for big in [false, true] {
            let mut ng = Ng::new(big);
            ng.interface(1, None); // microseconds
            ng.interface(101, Some(9)); // nanoseconds
            ng.block(4, &[0; 4]); // name resolution: skipped
            ng.packet(0, 1_500_000, &frame);
            ng.packet(1, 2_000_000_007, &ip);
            let records = read_all(&ng.out).unwrap();
            assert_eq!(records.len(), 2, "big endian: {big}");
            assert_eq!(
                (records[0].link_type, records[0].time_ns),
                (1, 1_500_000_000)
            );
            assert_eq!(
                (records[1].link_type, records[1].time_ns),
                (101, 2_000_000_007)
            );
            assert_eq!(&*records[0].data, &frame[..]);
            assert_eq!(records[1].number, 2);
            assert_eq!(records_link(&ng.out), None);
        }
    }

    #[test]
    fn pcapng_resolutions_powers_of_ten_and_two() {
        assert_eq!(ticks_to_ns(3, 0), 3_000_000_000);
        assert_eq!(ticks_to_ns(3, 6), 3_000);
        assert_eq!(ticks_to_ns(3_499, 12), 3); // picoseconds, rounded
        assert_eq!(ticks_to_ns(3_500, 12), 4);
        assert_eq!(ticks_to_ns(1 << 20, 0x80 | 20), 1_000_000_000);
        assert_eq!(ticks_to_ns(1, 0x80 | 1), 500_000_000);
        assert_eq!(ticks_to_ns(u128::from(u64::MAX), 0x7f), 0);
        assert_eq!(ticks_to_ns(u128::from(u64::MAX), 0xff), 0);
        // A new section starts with no interfaces.
        let mut ng = Ng::new(false);
        ng.interface(101, Some(0x80 | 10));
        ng.packet(0, 1024, &[0x45]);
        let section = Ng::new(false).out;
        ng.out.extend(section);
        ng.packet(0, 1, &[0x45]);
        let mut records = records(&ng.out).unwrap();
        assert_eq!(records.next().unwrap().unwrap().time_ns, 1_000_000_000);
        let err = records.next().unwrap().unwrap_err();
        assert_eq!(err.packet, Some(2));
        assert!(
            err.message.contains("interface 0 is not described"),
            "{err}"
        );
        assert!(records.next().is_none(), "an error ends the records");
    }

    /// Hostile files: the error names the packet and the byte offset.
    #[test]
    fn garbled_captures_are_errors_naming_packet_and_offset() {
        let ip = v4_datagram(b"abc");
        let good = pcap(101, false, &[(1, 0, &ip), (2, 0, &ip)]);
        let second = 24 + 16 + ip.len();
        let fail = |data: &[u8]| read_all(data).unwrap_err();

        let cut = fail(&good[..good.len() - 1]);
        assert_eq!(
            cut.message,
            format!("truncated: packet 2 (byte {second}) is cut short")
        );
        assert_eq!((cut.packet, cut.offset), (Some(2), second));
        assert!(fail(&good[..second + 3]).message.contains("packet 2"));

        let mut absurd = good.clone();
        absurd[second + 8..second + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            fail(&absurd).message,
            format!("garbled: packet 2 (byte {second}) claims 4294967295 bytes")
        );
        assert_eq!(fail(&good[..20]).message, "truncated pcap header");
        assert_eq!(fail(b"GIF89a").message, "not a pcap or pcapng file");
        assert_eq!(fail(b"").message, "not a pcap or pcapng file");

        let mut ng = Ng::new(false);
        ng.interface(101, None);
        let packet_at = ng.out.len();
        ng.packet(0, 1, &ip);
        let whole = ng.out.clone();
        let e = fail(&whole[..whole.len() - 4]);
        assert_eq!(
            e.message,
            format!("truncated: block at byte {packet_at} is cut short")
        );
        let mut bad_len = whole.clone();
        bad_len[packet_at + 4..packet_at + 8].copy_from_slice(&13u32.to_le_bytes());
        let e = fail(&bad_len);
        assert!(
            e.message
                .starts_with(&format!("garbled: block at byte {packet_at}")),
            "{e}"
        );
        let mut huge = whole.clone();
        huge[packet_at + 4..packet_at + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert!(fail(&huge).message.contains(&format!("byte {packet_at}")));
        // Captured length past the block's end.
        let mut overlong = whole.clone();
        overlong[packet_at + 20..packet_at + 24].copy_from_slice(&4000u32.to_le_bytes());
        let e = fail(&overlong);
        assert_eq!((e.packet, e.offset), (Some(1), packet_at));
        assert!(e
            .message
            .starts_with(&format!("garbled: packet 1 (byte {packet_at})")));
        let mut bad_magic = whole.clone();
        bad_magic[8] = 0;
        assert!(fail(&bad_magic)
            .message
            .starts_with("garbled: block at byte 0"));
        // A simple packet block has no time.
        let mut simple = Ng::new(false);
        simple.interface(101, None);
        simple.block(3, &[&(ip.len() as u32).to_le_bytes()[..], &ip].concat());
        assert!(fail(&simple.out).message.contains("simple packet block"));
    }

    #[test]
    fn an_unknown_link_type_reads_as_records_and_fails_in_network_layer() {
        let file = pcap(147, false, &[(0, 0, &[1, 2, 3])]);
        let records = read_all(&file).unwrap();
        assert_eq!(
            network_layer(records[0].link_type, &records[0].data),
            Err(UnsupportedLink(147))
        );
    }

    proptest::proptest! {
        /// Whatever follows a capture's magic number, reading ends with
        /// records inside the file or one error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(
            ng in proptest::bool::ANY,
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
        ) {
            let data = if ng {
                let mut ng = Ng::new(false);
                ng.interface(1, Some(9));
                [ng.out, tail].concat()
            } else {
                [pcap(1, false, &[]), tail].concat()
            };
            if let Ok(records) = records(&data) {
                for record in records {
                    let Ok(record) = record else { break };
                    proptest::prop_assert!(record.offset < data.len());
                    if let Ok(Some(ip)) = network_layer(record.link_type, &record.data) {
                        let _ = tcp_header(ip);
                    }
                }
            }
        }
    }
}
