//! TCP/IP header compression for serial point-to-point links, as RFC 1144
//! (Van Jacobson, 1990) describes it: the NFC link's option
//! `header_compression = "rfc1144"` (docs/bridge.md).
//!
//! Why RFC 1144 and not RFC 6282 (6LoWPAN IPHC/NHC): the NFC link carries
//! the appliance's IPv4/TCP packets between two fixed ends, one packet at a
//! time, as a serial line does. RFC 1144 was written for exactly that:
//! IPv4 and TCP over a point-to-point serial link, with per-connection
//! state at both ends and deltas of the TCP fields. IPHC compresses IPv6
//! headers only, and RFC 6282 defines next-header compression for UDP but
//! not for TCP, so on this link it would save nothing of the 40 bytes that
//! matter.
//!
//! Each direction has a [`Compressor`] at the sending end and a
//! [`Decompressor`] at the receiving one, each keeping up to
//! [`SLOTS`] connections. A packet leaves as one of three types (the type
//! rides in the link's own framing, as SLIP and PPP carry it):
//!
//! * `TYPE_IP` ([`PacketType::Ip`]): not TCP over IPv4, a fragment, or a
//!   segment with SYN, FIN or RST set or ACK clear; sent as it is.
//! * `UNCOMPRESSED_TCP`: the whole packet with the IP protocol byte replaced
//!   by the connection's slot number; it (re)sets both ends' state. Sent for
//!   a new connection, when a field the compressed form cannot express
//!   changed, and for a segment identical in its deltas to the previous one
//!   (a retransmission or repeated ACK), which is how the RFC resynchronises
//!   after a loss.
//! * `COMPRESSED_TCP`: a change mask (`C I P S A W U`), the slot number when
//!   it differs from the previous packet's (`C`), the TCP checksum, then the
//!   urgent pointer and the deltas of window, ACK, sequence number and IP
//!   ID, each in one byte (1–255) or three (0, then two bytes), then the
//!   data. Two masks that cannot occur otherwise stand for the common cases
//!   of the RFC: `S W U` (sequence and ACK both advance by the previous
//!   segment's data) and `S A W U` (the sequence number advances by it).
//!
//! Loss (RFC 1144 §4): a compressed packet is a delta from the previous
//! one, so after a lost packet the decompressor rebuilds the next one from
//! stale state and the TCP checksum, carried unchanged, no longer matches.
//! The decompressor checks it, discards the packet and then *tosses* every
//! `COMPRESSED_TCP` packet until one that carries its slot number (`C`) or
//! an `UNCOMPRESSED_TCP` packet refreshes its state. The sender's TCP
//! retransmits; a retransmission goes uncompressed (its sequence number
//! went back, or nothing changed), and the two ends are in step again.

use rtolab_wire::checksum;
use rtolab_wire::ipv4;
use rtolab_wire::tcp::{self, SeqNumber, TcpFlags};

/// Connection slots at each end (RFC 1144's 16).
pub const SLOTS: usize = 16;

/// How a packet crosses the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketType {
    /// `TYPE_IP`: the packet as it is.
    Ip,
    /// `UNCOMPRESSED_TCP`: the packet with its protocol byte replaced by
    /// the slot number.
    UncompressedTcp,
    /// `COMPRESSED_TCP`: the compressed header and the data.
    CompressedTcp,
}

/// A packet as it crosses the link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// Its type (carried by the link's framing).
    pub kind: PacketType,
    /// Its bytes on the link.
    pub bytes: Vec<u8>,
}

impl Encoded {
    /// Bytes on the link.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

// The change mask (first byte of a compressed header).
const NEW_C: u8 = 0x40;
const NEW_I: u8 = 0x20;
const TCP_PUSH: u8 = 0x10;
const NEW_S: u8 = 0x08;
const NEW_A: u8 = 0x04;
const NEW_W: u8 = 0x02;
const NEW_U: u8 = 0x01;
/// Echoed interactive traffic: sequence and ACK advance by the previous
/// segment's data.
const SPECIAL_I: u8 = NEW_S | NEW_W | NEW_U;
/// Unidirectional data: the sequence number advances by the previous
/// segment's data.
const SPECIAL_D: u8 = NEW_S | NEW_A | NEW_W | NEW_U;
const SPECIALS: u8 = NEW_S | NEW_A | NEW_W | NEW_U;

// Offsets in the IPv4 header.
const IP_PROTOCOL: usize = 9;
const IP_TOTAL_LEN: std::ops::Range<usize> = 2..4;
const IP_IDENT: std::ops::Range<usize> = 4..6;
const IP_CHECKSUM: std::ops::Range<usize> = 10..12;

/// A TCP/IPv4 header the compressed form can describe, read from a packet.
struct Headers<'a> {
    packet: &'a [u8],
    ip_len: usize,
    /// IP and TCP header bytes, options included.
    header_len: usize,
}

impl<'a> Headers<'a> {
    /// The headers of `packet` if it is a TCP segment over IPv4 that RFC
    /// 1144 compresses: no fragment, ACK set, no SYN, FIN or RST.
    fn compressible(packet: &'a [u8]) -> Option<Self> {
        let ip = ipv4::Packet::new_checked(packet).ok()?;
        if ip.version() != 4
            || ip.protocol() != ipv4::protocol::TCP
            || ip.more_fragments()
            || ip.frag_offset() != 0
        {
            return None;
        }
        let segment = tcp::Packet::new_checked(ip.payload()).ok()?;
        let flags = segment.flags();
        if flags.contains(TcpFlags::SYN)
            || flags.contains(TcpFlags::FIN)
            || flags.contains(TcpFlags::RST)
            || !flags.contains(TcpFlags::ACK)
        {
            return None;
        }
        Some(Headers {
            packet,
            ip_len: ip.header_len(),
            header_len: ip.header_len() + segment.header_len(),
        })
    }

    fn ip(&self) -> ipv4::Packet<&'a [u8]> {
        ipv4::Packet::new_unchecked(self.packet)
    }

    fn tcp(&self) -> tcp::Packet<&'a [u8]> {
        tcp::Packet::new_unchecked(&self.packet[self.ip_len..])
    }

    /// The connection: addresses and ports.
    fn connection(&self) -> ([u8; 8], [u8; 4]) {
        let mut addresses = [0; 8];
        addresses.copy_from_slice(&self.packet[12..20]);
        let mut ports = [0; 4];
        ports.copy_from_slice(&self.packet[self.ip_len..self.ip_len + 4]);
        (addresses, ports)
    }
}

/// Data bytes of a saved header's packet (its IP length minus headers).
fn data_len(header: &[u8]) -> u32 {
    let ip = ipv4::Packet::new_unchecked(header);
    let tcp_len = usize::from(header[ip.header_len() + 12] >> 4) * 4;
    u32::from(ip.total_len()).saturating_sub((ip.header_len() + tcp_len) as u32)
}

/// Appends `value` as RFC 1144 encodes a delta: one byte for 1-255, else a
/// zero byte and the value in two.
fn put_delta(out: &mut Vec<u8>, value: u16) {
    if (1..=255).contains(&value) {
        out.push(value as u8);
    } else {
        out.push(0);
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Bytes [`put_delta`] writes for `value`.
pub fn delta_len(value: u16) -> usize {
    if (1..=255).contains(&value) {
        1
    } else {
        3
    }
}

/// A connection's last header, as one end keeps it.
#[derive(Clone, Debug)]
struct Saved {
    /// Addresses and ports.
    connection: ([u8; 8], [u8; 4]),
    /// IP and TCP headers of its last packet (the IP total length is that
    /// packet's).
    header: Vec<u8>,
    /// IP header bytes.
    ip_len: usize,
}

impl Saved {
    fn of(headers: &Headers<'_>) -> Self {
        Saved {
            connection: headers.connection(),
            header: headers.packet[..headers.header_len].to_vec(),
            ip_len: headers.ip_len,
        }
    }

    fn ip(&self) -> ipv4::Packet<&[u8]> {
        ipv4::Packet::new_unchecked(&self.header[..])
    }

    fn tcp(&self) -> tcp::Packet<&[u8]> {
        tcp::Packet::new_unchecked(&self.header[self.ip_len..])
    }
}

/// One end's compressor: the last header sent on each connection slot.
#[derive(Clone, Debug, Default)]
pub struct Compressor {
    /// Saved headers, by slot.
    slots: Vec<Saved>,
    /// Slot numbers, most recently used first.
    recent: Vec<u8>,
    /// Slot of the last compressed or uncompressed TCP packet sent.
    last: Option<u8>,
}

impl Compressor {
    /// A compressor with no connection state.
    pub fn new() -> Self {
        Compressor::default()
    }

    /// Encodes `packet` for the link and remembers its header.
    pub fn compress(&mut self, packet: &[u8]) -> Encoded {
        let Some(headers) = Headers::compressible(packet) else {
            return Encoded {
                kind: PacketType::Ip,
                bytes: packet.to_vec(),
            };
        };
        let connection = headers.connection();
        let found = self
            .recent
            .iter()
            .position(|&s| self.slots[usize::from(s)].connection == connection);
        let slot = match found {
            Some(i) => self.recent.remove(i),
            None if self.slots.len() < SLOTS => {
                self.slots.push(Saved::of(&headers));
                (self.slots.len() - 1) as u8
            }
            // Reuse the least recently used slot.
            None => self.recent.pop().unwrap_or(0),
        };
        self.recent.insert(0, slot);
        let encoded = match found {
            Some(_) => self.delta(slot, &headers),
            None => None,
        };
        let encoded = encoded.unwrap_or_else(|| {
            let mut bytes = packet[..usize::from(headers.ip().total_len())].to_vec();
            bytes[IP_PROTOCOL] = slot;
            Encoded {
                kind: PacketType::UncompressedTcp,
                bytes,
            }
        });
        self.slots[usize::from(slot)] = Saved::of(&headers);
        self.last = Some(slot);
        encoded
    }

    /// The compressed form of `new` against the slot's saved header, or
    /// `None` when it must go uncompressed.
    fn delta(&self, slot: u8, new: &Headers<'_>) -> Option<Encoded> {
        let old = &self.slots[usize::from(slot)];
        let saved = &old.header;
        let (oip, nip) = (old.ip(), new.ip());
        let (otcp, ntcp) = (old.tcp(), new.tcp());
        // Everything but total length, ID and checksum must be unchanged in
        // the IP header (options included), and the TCP header length and
        // options too.
        let ip_same = old.ip_len == new.ip_len
            && saved[..2] == new.packet[..2]
            && saved[6..10] == new.packet[6..10]
            && saved[12..old.ip_len] == new.packet[12..new.ip_len];
        if !ip_same || otcp.header_len() != ntcp.header_len() || otcp.options() != ntcp.options() {
            return None;
        }
        // Flags other than PSH and URG, and the reserved bits, unchanged.
        let steady = !(TcpFlags::PSH | TcpFlags::URG).0;
        if otcp.flags().0 & steady != ntcp.flags().0 & steady
            || saved[old.ip_len + 12] & 0x0f != new.packet[new.ip_len + 12] & 0x0f
        {
            return None;
        }
        let mut changes = 0u8;
        let mut fields = Vec::with_capacity(16);
        if ntcp.flags().contains(TcpFlags::URG) {
            changes |= NEW_U;
            put_delta(&mut fields, ntcp.urgent_at());
        } else if ntcp.urgent_at() != otcp.urgent_at() {
            return None;
        }
        let window = ntcp.window_len().wrapping_sub(otcp.window_len());
        if window != 0 {
            changes |= NEW_W;
            put_delta(&mut fields, window);
        }
        let ack = ntcp.ack_number().0.wrapping_sub(otcp.ack_number().0);
        if ack != 0 {
            // A delta above 16 bits, or a step back, goes uncompressed.
            let ack = u16::try_from(ack).ok()?;
            changes |= NEW_A;
            put_delta(&mut fields, ack);
        }
        let seq = ntcp.seq_number().0.wrapping_sub(otcp.seq_number().0);
        if seq != 0 {
            let seq = u16::try_from(seq).ok()?;
            changes |= NEW_S;
            put_delta(&mut fields, seq);
        }
        let previous_data = data_len(saved);
        match changes {
            // Nothing changed: a data segment after a pure ACK is normal;
            // anything else is a retransmission or a repeated ACK, sent
            // uncompressed in case the far end missed the previous one.
            0 if nip.total_len() == oip.total_len() || previous_data != 0 => return None,
            // The real changes look like a special case: cannot be said.
            SPECIAL_I | SPECIAL_D => return None,
            c if c == NEW_S | NEW_A && seq == ack && seq == previous_data => {
                changes = SPECIAL_I;
                fields.clear();
            }
            NEW_S if seq == previous_data => {
                changes = SPECIAL_D;
                fields.clear();
            }
            _ => {}
        }
        let id = nip.ident().wrapping_sub(oip.ident());
        if id != 1 {
            changes |= NEW_I;
            put_delta(&mut fields, id);
        }
        if ntcp.flags().contains(TcpFlags::PSH) {
            changes |= TCP_PUSH;
        }
        let data = &new.packet[new.header_len..usize::from(nip.total_len())];
        let mut bytes = Vec::with_capacity(4 + fields.len() + data.len());
        if self.last != Some(slot) {
            changes |= NEW_C;
            bytes.push(changes);
            bytes.push(slot);
        } else {
            bytes.push(changes);
        }
        bytes.extend_from_slice(&ntcp.checksum().to_be_bytes());
        bytes.extend_from_slice(&fields);
        bytes.extend_from_slice(data);
        Some(Encoded {
            kind: PacketType::CompressedTcp,
            bytes,
        })
    }
}

/// Why the decompressor gave no packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    /// A compressed packet that arrived while tossing (after an error,
    /// before a packet that refreshes the state).
    Tossed,
    /// The rebuilt packet's TCP checksum does not match: an earlier packet
    /// was lost. Tossing starts.
    BadChecksum,
    /// The packet cannot be read (truncated, unknown slot).
    Malformed,
}

/// One end's decompressor: the last header received on each slot.
#[derive(Clone, Debug)]
pub struct Decompressor {
    slots: Vec<Option<Vec<u8>>>,
    /// Slot of the last TCP packet received.
    last: Option<u8>,
    /// Discarding compressed packets until state is refreshed.
    toss: bool,
}

impl Default for Decompressor {
    fn default() -> Self {
        Decompressor {
            slots: vec![None; SLOTS],
            last: None,
            toss: false,
        }
    }
}

impl Decompressor {
    /// A decompressor with no connection state.
    pub fn new() -> Self {
        Decompressor::default()
    }

    /// Whether it is discarding compressed packets.
    pub fn tossing(&self) -> bool {
        self.toss
    }

    /// The packet `encoded` stands for.
    pub fn decompress(&mut self, encoded: &Encoded) -> Result<Vec<u8>, Discard> {
        let result = match encoded.kind {
            PacketType::Ip => return Ok(encoded.bytes.clone()),
            PacketType::UncompressedTcp => self.uncompressed(&encoded.bytes),
            PacketType::CompressedTcp => self.compressed(&encoded.bytes),
        };
        if matches!(result, Err(Discard::BadChecksum | Discard::Malformed)) {
            self.toss = true;
        }
        result
    }

    fn uncompressed(&mut self, bytes: &[u8]) -> Result<Vec<u8>, Discard> {
        let slot = *bytes.get(IP_PROTOCOL).ok_or(Discard::Malformed)?;
        if usize::from(slot) >= SLOTS {
            return Err(Discard::Malformed);
        }
        let mut packet = bytes.to_vec();
        packet[IP_PROTOCOL] = ipv4::protocol::TCP;
        let headers = Headers::compressible(&packet).ok_or(Discard::Malformed)?;
        self.slots[usize::from(slot)] = Some(packet[..headers.header_len].to_vec());
        self.last = Some(slot);
        self.toss = false;
        Ok(packet)
    }

    fn compressed(&mut self, bytes: &[u8]) -> Result<Vec<u8>, Discard> {
        let mut at = 0usize;
        let mut next = |n: usize| -> Result<&[u8], Discard> {
            let field = bytes.get(at..at + n).ok_or(Discard::Malformed)?;
            at += n;
            Ok(field)
        };
        let changes = next(1)?[0];
        if changes & NEW_C != 0 {
            let slot = next(1)?[0];
            if usize::from(slot) >= SLOTS {
                return Err(Discard::Malformed);
            }
            self.last = Some(slot);
            self.toss = false;
        } else if self.toss {
            return Err(Discard::Tossed);
        }
        let slot = self.last.ok_or(Discard::Malformed)?;
        let mut header = self.slots[usize::from(slot)]
            .clone()
            .ok_or(Discard::Malformed)?;
        let checksum_field = next(2)?;
        let tcp_checksum = u16::from_be_bytes([checksum_field[0], checksum_field[1]]);
        let mut delta = || -> Result<u16, Discard> {
            let first = next(1)?[0];
            if first != 0 {
                return Ok(u16::from(first));
            }
            let two = next(2)?;
            Ok(u16::from_be_bytes([two[0], two[1]]))
        };
        let previous_data = data_len(&header);
        let ip_len = ipv4::Packet::new_unchecked(&header[..]).header_len();
        let (mut seq, mut ack) = (0u32, 0u32);
        let mut urgent = None;
        let mut window = 0u16;
        match changes & SPECIALS {
            SPECIAL_I => {
                seq = previous_data;
                ack = previous_data;
            }
            SPECIAL_D => seq = previous_data,
            _ => {
                if changes & NEW_U != 0 {
                    urgent = Some(delta()?);
                }
                if changes & NEW_W != 0 {
                    window = delta()?;
                }
                if changes & NEW_A != 0 {
                    ack = u32::from(delta()?);
                }
                if changes & NEW_S != 0 {
                    seq = u32::from(delta()?);
                }
            }
        }
        let id = if changes & NEW_I != 0 { delta()? } else { 1 };
        let data = &bytes[at..];
        {
            let mut t = tcp::Packet::new_unchecked(&mut header[ip_len..]);
            let mut flags = t.flags();
            flags.remove(TcpFlags::PSH | TcpFlags::URG);
            if changes & TCP_PUSH != 0 {
                flags.insert(TcpFlags::PSH);
            }
            if let Some(pointer) = urgent {
                flags.insert(TcpFlags::URG);
                t.set_urgent_at(pointer);
            }
            t.set_flags(flags);
            t.set_window_len(t.window_len().wrapping_add(window));
            t.set_ack_number(SeqNumber(t.ack_number().0.wrapping_add(ack)));
            t.set_seq_number(SeqNumber(t.seq_number().0.wrapping_add(seq)));
            t.set_checksum(tcp_checksum);
        }
        let total = u16::try_from(header.len() + data.len()).map_err(|_| Discard::Malformed)?;
        header[IP_TOTAL_LEN].copy_from_slice(&total.to_be_bytes());
        let ident = u16::from_be_bytes([header[IP_IDENT][0], header[IP_IDENT][1]]);
        header[IP_IDENT].copy_from_slice(&ident.wrapping_add(id).to_be_bytes());
        header[IP_CHECKSUM].copy_from_slice(&[0, 0]);
        let ip_sum = checksum::internet(&header[..ip_len]);
        header[IP_CHECKSUM].copy_from_slice(&ip_sum.to_be_bytes());
        let mut packet = header;
        packet.extend_from_slice(data);
        let ip = ipv4::Packet::new_unchecked(&packet[..]);
        let segment = tcp::Packet::new_unchecked(&packet[ip_len..]);
        if !segment.verify_checksum(ip.src_addr(), ip.dst_addr()) {
            // A packet rebuilt on the wrong state (possibly another
            // connection's, when the lost packet carried the slot number)
            // leaves every slot as it was.
            return Err(Discard::BadChecksum);
        }
        self.slots[usize::from(slot)] = Some(packet[..packet.len() - data.len()].to_vec());
        Ok(packet)
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use rtolab_wire::ipv4::Ipv4Repr;
    use rtolab_wire::packet;
    use rtolab_wire::tcp::{TcpOptions, TcpRepr};

    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 102);
    const B: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 202);
    const ACK: TcpFlags = TcpFlags::ACK;
    const PSH_ACK: TcpFlags = TcpFlags(TcpFlags::PSH.0 | TcpFlags::ACK.0);

    /// A segment of connection `port` (source port) with `len` data bytes.
    struct Seg {
        port: u16,
        seq: u32,
        ack: u32,
        id: u16,
        window: u16,
        flags: TcpFlags,
        urgent: u16,
        len: usize,
    }

    impl Seg {
        fn new(seq: u32, ack: u32, id: u16, len: usize) -> Self {
            Seg {
                port: 49153,
                seq,
                ack,
                id,
                window: 8096,
                flags: PSH_ACK,
                urgent: 0,
                len,
            }
        }

        fn bytes(&self) -> Vec<u8> {
            let ip = Ipv4Repr {
                src: A,
                dst: B,
                protocol: 0,
                ttl: 255,
                ident: self.id,
                dont_fragment: false,
                tos: 0,
                payload_len: 0,
            };
            let payload: Vec<u8> = (0..self.len)
                .map(|i| (i * 7 + self.seq as usize) as u8)
                .collect();
            let tcp = TcpRepr {
                src_port: self.port,
                dst_port: 7891,
                seq: SeqNumber(self.seq),
                ack: SeqNumber(self.ack),
                flags: self.flags,
                window: self.window,
                urgent: self.urgent,
                options: TcpOptions::default(),
                payload: &payload,
            };
            let mut out = Vec::new();
            packet::emit_tcp(&mut out, &ip, &tcp).expect("fits");
            out
        }
    }

    /// Compresses `seg`, checks the far end rebuilds it byte for byte, and
    /// returns its type and header bytes on the link (length minus data).
    fn across(c: &mut Compressor, d: &mut Decompressor, seg: &Seg) -> (PacketType, usize) {
        let original = seg.bytes();
        let encoded = c.compress(&original);
        assert_eq!(d.decompress(&encoded), Ok(original));
        (encoded.kind, encoded.len() - seg.len)
    }

    #[test]
    fn deltas_take_one_byte_or_three() {
        for (value, len) in [(1, 1), (255, 1), (256, 3), (0, 3), (65535, 3)] {
            let mut out = Vec::new();
            put_delta(&mut out, value);
            assert_eq!((out.len(), delta_len(value)), (len, len), "{value}");
        }
    }

    #[test]
    fn header_sizes_follow_the_rfc_rules() {
        use PacketType::*;
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        // A new connection: the whole 40-byte header once.
        assert_eq!(
            across(&mut c, &mut d, &Seg::new(1, 1, 10, 100)),
            (UncompressedTcp, 40)
        );
        // The next segment of a one-way stream: sequence advanced by the
        // previous data, ID by one: the mask and the checksum (SPECIAL_D).
        assert_eq!(
            across(&mut c, &mut d, &Seg::new(101, 1, 11, 100)),
            (CompressedTcp, 3)
        );
        // A pure ACK with the sequence advanced by the data and the ACK by
        // 300: mask, checksum, ACK delta in three bytes, sequence in one.
        assert_eq!(
            across(&mut c, &mut d, &Seg::new(201, 301, 12, 0)),
            (CompressedTcp, 7)
        );
        // Data after a pure ACK with nothing else changed: the mask alone.
        assert_eq!(
            across(&mut c, &mut d, &Seg::new(201, 301, 13, 50)),
            (CompressedTcp, 3)
        );
        // Echoed interactive traffic: sequence and ACK both advanced by the
        // previous data (SPECIAL_I).
        assert_eq!(
            across(&mut c, &mut d, &Seg::new(251, 351, 14, 50)),
            (CompressedTcp, 3)
        );
        // The window shrank by 1000 and the IP ID jumped by 5: three bytes
        // (the window delta is modulo 2^16) and one; with the window in
        // the mask, the sequence delta is written out (one byte).
        let mut seg = Seg::new(301, 351, 19, 50);
        seg.window = 7096;
        assert_eq!(across(&mut c, &mut d, &seg), (CompressedTcp, 3 + 3 + 1 + 1));
        // A retransmission: the sequence number goes back, sent whole.
        let mut seg = Seg::new(251, 351, 20, 50);
        seg.window = 7096;
        assert_eq!(across(&mut c, &mut d, &seg), (UncompressedTcp, 40));
        // The same segment again: nothing changed, sent whole.
        seg.id = 21;
        assert_eq!(across(&mut c, &mut d, &seg), (UncompressedTcp, 40));
        // A second connection, then back to the first: its compressed
        // packet carries the slot number, and the IP ID delta of 2 (the
        // host's counter also counted the other connection's packet).
        let mut other = Seg::new(5000, 1, 22, 10);
        other.port = 49154;
        assert_eq!(across(&mut c, &mut d, &other), (UncompressedTcp, 40));
        let mut seg = Seg::new(301, 351, 23, 50);
        seg.window = 7096;
        assert_eq!(across(&mut c, &mut d, &seg), (CompressedTcp, 5));
        // SYN, FIN and segments without ACK cross as plain IP.
        let mut fin = Seg::new(351, 351, 24, 0);
        fin.flags = TcpFlags::FIN | ACK;
        assert_eq!(across(&mut c, &mut d, &fin), (Ip, 40));
        let mut syn = Seg::new(0, 0, 25, 0);
        syn.flags = TcpFlags::SYN;
        assert_eq!(across(&mut c, &mut d, &syn), (Ip, 40));
    }

    #[test]
    fn changes_that_look_like_a_special_case_go_uncompressed() {
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        across(&mut c, &mut d, &Seg::new(1, 1, 1, 10));
        // Urgent data with the sequence number and window changed: the
        // mask S W U would read as SPECIAL_I.
        let mut seg = Seg::new(11, 1, 2, 10);
        seg.flags = PSH_ACK | TcpFlags::URG;
        seg.urgent = 5;
        seg.window = 100;
        assert_eq!(
            across(&mut c, &mut d, &seg),
            (PacketType::UncompressedTcp, 40)
        );
        // The urgent pointer changing without URG cannot be said either.
        let mut seg = Seg::new(21, 1, 3, 10);
        seg.urgent = 9;
        assert_eq!(across(&mut c, &mut d, &seg).0, PacketType::UncompressedTcp);
        // Nor can an ACK moving by more than 16 bits.
        assert_eq!(
            across(&mut c, &mut d, &Seg::new(31, 70_000, 4, 10)).0,
            PacketType::UncompressedTcp
        );
    }

    #[test]
    fn a_lost_compressed_packet_is_tossed_until_the_retransmission() {
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        let segs: Vec<Seg> = (0..4)
            .map(|k| Seg::new(1 + 100 * k, 1, k as u16, 100))
            .collect();
        across(&mut c, &mut d, &segs[0]);
        across(&mut c, &mut d, &segs[1]);
        // Segment 2 is compressed and lost on the way.
        assert_eq!(c.compress(&segs[2].bytes()).kind, PacketType::CompressedTcp);
        // Segment 3, rebuilt on stale state, fails the TCP checksum...
        let third = c.compress(&segs[3].bytes());
        assert_eq!(d.decompress(&third), Err(Discard::BadChecksum));
        assert!(d.tossing());
        // ...and so would every compressed packet after it: tossed.
        let ack = c.compress(&Seg::new(401, 1, 4, 0).bytes());
        assert_eq!(ack.kind, PacketType::CompressedTcp);
        assert_eq!(d.decompress(&ack), Err(Discard::Tossed));
        // The sender's TCP retransmits segment 2: its sequence number went
        // back, so it crosses uncompressed and refreshes the state.
        let resent = Seg::new(201, 1, 5, 100);
        assert_eq!(
            across(&mut c, &mut d, &resent).0,
            PacketType::UncompressedTcp
        );
        assert!(!d.tossing());
        // Compression resumes and the far end rebuilds packets exactly.
        assert_eq!(
            across(&mut c, &mut d, &Seg::new(301, 1, 6, 100)),
            (PacketType::CompressedTcp, 3)
        );
    }

    #[test]
    fn a_compressed_packet_with_its_slot_number_ends_tossing() {
        let (mut c, mut d) = (Compressor::new(), Decompressor::new());
        let mut other = Seg::new(9000, 1, 1, 10);
        other.port = 49154;
        across(&mut c, &mut d, &Seg::new(1, 1, 1, 10));
        across(&mut c, &mut d, &other);
        // Lost: the first connection's next segment (carrying C).
        c.compress(&Seg::new(11, 1, 2, 10).bytes());
        let next = c.compress(&Seg::new(21, 1, 3, 10).bytes());
        assert_eq!(d.decompress(&next), Err(Discard::BadChecksum));
        other.seq = 9010;
        other.id = 2;
        // The other connection's segment names its slot: tossing ends, and
        // its state was never touched by the loss.
        assert_eq!(
            across(&mut c, &mut d, &other),
            (PacketType::CompressedTcp, 4)
        );
        assert!(!d.tossing());
    }

    #[test]
    fn garbage_is_discarded_not_a_panic() {
        for bytes in [vec![], vec![0x40], vec![0x40, 99, 0, 0], vec![0x0f; 3]] {
            let mut d = Decompressor::new();
            let e = Encoded {
                kind: PacketType::CompressedTcp,
                bytes,
            };
            assert_eq!(d.decompress(&e), Err(Discard::Malformed));
        }
        let short = Encoded {
            kind: PacketType::UncompressedTcp,
            bytes: vec![0x45; 12],
        };
        let mut d = Decompressor::new();
        assert_eq!(d.decompress(&short), Err(Discard::Malformed));
    }
}
