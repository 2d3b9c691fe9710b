//! IPv4 (RFC 791): a zero-copy header view and a parsed representation.
//!
//! Options (IHL > 5) are accepted and skipped. Fragments are rejected: the
//! simulated links never fragment, and reassembly is not worth its risk here.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::{Result, WireError, WireErrorKind};

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// IP protocol numbers this crate understands.
pub mod protocol {
    /// Transmission Control Protocol.
    pub const TCP: u8 = 6;
    /// User Datagram Protocol.
    pub const UDP: u8 = 17;
}

mod field {
    use core::ops::Range;

    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A read/write view over the bytes of an IPv4 datagram.
///
/// Accessors index the buffer directly: on a view from
/// [`Packet::new_unchecked`] they panic if the buffer is too short. After
/// [`Packet::new_checked`] (or a successful [`Packet::check_len`]) none of
/// them can panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking anything.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps a buffer after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the header, its options and the `total_len` bytes the
    /// header announces are all inside the buffer. Bytes beyond `total_len`
    /// (link-layer padding) are allowed and ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::new("ipv4.header", len, WireErrorKind::Truncated));
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(WireError::new(
                "ipv4.ihl",
                field::VER_IHL,
                WireErrorKind::BadValue,
            ));
        }
        if header_len > len {
            return Err(WireError::new(
                "ipv4.options",
                len,
                WireErrorKind::Truncated,
            ));
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(WireError::new(
                "ipv4.total_len",
                field::TOTAL_LEN.start,
                WireErrorKind::BadLength,
            ));
        }
        if total_len > len {
            return Err(WireError::new(
                "ipv4.total_len",
                field::TOTAL_LEN.start,
                WireErrorKind::Truncated,
            ));
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, range: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[range];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Type-of-service byte (DSCP and ECN).
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// Total length of the datagram, header included.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::TOTAL_LEN)
    }

    /// Identification field.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// Don't Fragment flag.
    pub fn dont_fragment(&self) -> bool {
        self.u16_at(field::FLAGS_FRAG) & FLAG_DF != 0
    }

    /// More Fragments flag.
    pub fn more_fragments(&self) -> bool {
        self.u16_at(field::FLAGS_FRAG) & FLAG_MF != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLAGS_FRAG) & FRAG_OFFSET_MASK) << 3
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload (see [`protocol`]).
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum field as stored.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Header options (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Whether the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::internet(&self.buffer.as_ref()[..self.header_len()]) == 0
    }

    /// The payload: bytes from the end of the header to `total_len`.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the version field.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the header length in bytes (rounded down to a multiple of 4).
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the type-of-service byte.
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::TOS] = tos;
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        self.set_u16_at(field::TOTAL_LEN, len);
    }

    /// Sets the identification field.
    pub fn set_ident(&mut self, ident: u16) {
        self.set_u16_at(field::IDENT, ident);
    }

    /// Sets or clears Don't Fragment.
    pub fn set_dont_fragment(&mut self, value: bool) {
        let raw = self.u16_at(field::FLAGS_FRAG);
        let raw = if value { raw | FLAG_DF } else { raw & !FLAG_DF };
        self.set_u16_at(field::FLAGS_FRAG, raw);
    }

    /// Sets or clears More Fragments.
    pub fn set_more_fragments(&mut self, value: bool) {
        let raw = self.u16_at(field::FLAGS_FRAG);
        let raw = if value { raw | FLAG_MF } else { raw & !FLAG_MF };
        self.set_u16_at(field::FLAGS_FRAG, raw);
    }

    /// Sets the fragment offset in bytes (rounded down to a multiple of 8).
    pub fn set_frag_offset(&mut self, offset: u16) {
        let raw = self.u16_at(field::FLAGS_FRAG) & !FRAG_OFFSET_MASK;
        self.set_u16_at(field::FLAGS_FRAG, raw | (offset >> 3));
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, protocol: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol;
    }

    /// Sets the checksum field to a given value.
    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Computes the header checksum and stores it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::internet(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(sum);
    }

    /// The payload, mutable: bytes from the end of the header to `total_len`.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an IPv4 header that hosts and routers care about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol of the payload (see [`protocol`]).
    pub protocol: u8,
    /// Time to live.
    pub ttl: u8,
    /// Identification field.
    pub ident: u16,
    /// Don't Fragment flag.
    pub dont_fragment: bool,
    /// Type-of-service byte (DSCP and ECN).
    pub tos: u8,
    /// Length of the payload in bytes.
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// Validates a datagram (version, lengths, no fragmentation, header
    /// checksum) and extracts its fields. Options are skipped. Works on an
    /// unchecked view too: lengths are checked here.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        // Version first: an IPv6 packet should say so, not fail on IHL.
        if let Some(&first) = packet.buffer.as_ref().first() {
            if first >> 4 != 4 {
                return Err(WireError::new(
                    "ipv4.version",
                    field::VER_IHL,
                    WireErrorKind::BadVersion,
                ));
            }
        }
        packet.check_len()?;
        if packet.more_fragments() || packet.frag_offset() != 0 {
            return Err(WireError::new(
                "ipv4.fragment",
                field::FLAGS_FRAG.start,
                WireErrorKind::Unsupported,
            ));
        }
        if !packet.verify_checksum() {
            return Err(WireError::new(
                "ipv4.checksum",
                field::CHECKSUM.start,
                WireErrorKind::BadChecksum,
            ));
        }
        Ok(Ipv4Repr::fields(packet))
    }

    /// The header's fields as they stand, of a view whose lengths were
    /// checked (`Packet::new_checked`); nothing else is validated, for a
    /// caller that checks the rest itself or needs not.
    #[inline]
    pub fn fields<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
        Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            ttl: packet.ttl(),
            ident: packet.ident(),
            dont_fragment: packet.dont_fragment(),
            tos: packet.tos(),
            payload_len: packet.payload().len(),
        }
    }

    /// Length of the datagram this header describes (emitted without options).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header with its checksum into the start of the view.
    /// The payload is not touched.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`], or `payload_len` makes
    /// the total length exceed 65535 (the `packet` module checks both and
    /// returns errors instead).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let total_len =
            u16::try_from(self.buffer_len()).expect("IPv4 datagram longer than 65535 bytes");
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN);
        packet.set_tos(self.tos);
        packet.set_total_len(total_len);
        packet.set_ident(self.ident);
        packet.set_u16_at(field::FLAGS_FRAG, 0);
        packet.set_dont_fragment(self.dont_fragment);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A 60-byte SYN from 127.0.0.1 to 127.0.0.1 as Linux sends it; only the
    // IPv4 header matters here.
    static HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, 0x7f, 0x00, 0x00,
        0x01, 0x7f, 0x00, 0x00, 0x01,
    ];

    fn datagram() -> Vec<u8> {
        let mut bytes = HEADER.to_vec();
        bytes.resize(60, 0xaa);
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.fill_checksum();
        bytes
    }

    #[test]
    fn deconstruct() {
        let bytes = datagram();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 60);
        assert_eq!(p.ident(), 0x1c46);
        assert!(p.dont_fragment());
        assert!(!p.more_fragments());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), protocol::TCP);
        assert_eq!(p.src_addr(), Ipv4Addr::LOCALHOST);
        assert!(p.verify_checksum());
        assert_eq!(p.payload(), &[0xaa; 40][..]);
    }

    #[test]
    fn construct_matches_bytes() {
        let repr = Ipv4Repr::parse(&Packet::new_unchecked(&datagram()[..])).unwrap();
        let mut out = vec![0xaa; 60];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, datagram());
    }

    #[test]
    fn options_are_skipped() {
        let mut bytes = HEADER.to_vec();
        bytes[0] = 0x46;
        bytes.extend_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
        bytes.extend_from_slice(&[7; 8]);
        let total = bytes.len() as u16;
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        p.set_total_len(total);
        p.fill_checksum();
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[7; 8]);
        assert_eq!(Ipv4Repr::parse(&p).unwrap().payload_len, 8);
    }

    #[test]
    fn trailing_padding_is_ignored() {
        let mut bytes = datagram();
        bytes.extend_from_slice(&[0; 6]);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload().len(), 40);
    }

    fn parse_err(bytes: &[u8]) -> WireError {
        Ipv4Repr::parse(&Packet::new_unchecked(bytes)).unwrap_err()
    }

    #[test]
    fn rejects_each_bad_field_by_name() {
        assert_eq!(parse_err(&datagram()[..19]).field, "ipv4.header");
        assert_eq!(parse_err(&[]).field, "ipv4.header");

        let mut b = datagram();
        b[0] = 0x65;
        assert_eq!(parse_err(&b).kind, WireErrorKind::BadVersion);

        let mut b = datagram();
        b[0] = 0x44;
        assert_eq!(parse_err(&b).field, "ipv4.ihl");

        let mut b = datagram();
        b[0] = 0x4f; // 60-byte header in a 40-byte buffer
        assert_eq!(parse_err(&b[..40]).field, "ipv4.options");

        let mut b = datagram();
        b[3] = 19;
        assert_eq!(parse_err(&b).field, "ipv4.total_len");
        assert_eq!(parse_err(&datagram()[..59]).field, "ipv4.total_len");

        let mut b = datagram();
        Packet::new_unchecked(&mut b[..]).set_more_fragments(true);
        assert_eq!(parse_err(&b).field, "ipv4.fragment");
        let mut b = datagram();
        Packet::new_unchecked(&mut b[..]).set_frag_offset(1480);
        assert_eq!(parse_err(&b).field, "ipv4.fragment");

        let mut b = datagram();
        b[8] = 63;
        let e = parse_err(&b);
        assert_eq!(
            (e.field, e.offset, e.kind),
            ("ipv4.checksum", 10, WireErrorKind::BadChecksum)
        );
    }

    #[test]
    fn setters_round_trip() {
        let mut b = datagram();
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_frag_offset(8 * 100);
        p.set_more_fragments(true);
        p.set_dont_fragment(false);
        assert_eq!(p.frag_offset(), 800);
        assert!(p.more_fragments());
        assert!(!p.dont_fragment());
        p.set_tos(0xb8);
        assert_eq!(p.tos(), 0xb8);
        p.set_dst_addr(Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 1, 2, 3));
        p.payload_mut()[0] = 1;
        assert_eq!(p.payload()[0], 1);
    }
}
