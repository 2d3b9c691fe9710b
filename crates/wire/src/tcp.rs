//! TCP (RFC 9293): sequence numbers, flags, options, a zero-copy header view
//! and a parsed representation.
//!
//! Options understood: MSS (RFC 9293), window scale and timestamps
//! (RFC 7323), SACK-permitted and SACK blocks (RFC 2018), and `timelost`, our
//! RFC 6994 experimental option (see [`TIMELOST_EXID`]). Other kinds are
//! skipped by their length.

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, BitAnd, BitOr, BitOrAssign, Sub, SubAssign};
use std::net::Ipv4Addr;

use crate::checksum;
use crate::ipv4::protocol;
use crate::{Result, WireError, WireErrorKind};

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Largest header: the data offset is 4 bits of 32-bit words.
pub const MAX_HEADER_LEN: usize = 60;
/// Room for options in the largest header.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;

/// Experiment identifier (RFC 6994) of the `timelost` option: ASCII "TL".
///
/// This is our own identifier, not one registered with IANA; a kind-253
/// option carrying any other ExID belongs to someone else and is ignored.
/// The option is kind 253, length 8: kind, length, ExID (2 bytes), then
/// `rets` (4 bytes, big endian), the time lost to MAC retransmissions in
/// units of the 802.11 slot time (20 µs).
pub const TIMELOST_EXID: u16 = 0x544C;

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod option_kind {
    /// End of option list.
    pub const END: u8 = 0;
    /// No-operation, used for alignment.
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
    /// RFC 6994 shared experimental option (the one `timelost` uses).
    pub const EXPERIMENTAL: u8 = 253;
}

/// TCP sequence number with wrapping (RFC 1982-style) comparison.
///
/// `a < b` means `b` is less than 2^31 ahead of `a`. This order is not
/// transitive over the whole space, so the type implements `PartialOrd` but
/// not `Ord`; compare only numbers within one window of each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// The later of two sequence numbers.
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self > other {
            self
        } else {
            other
        }
    }

    /// The earlier of two sequence numbers.
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self < other {
            self
        } else {
            other
        }
    }
}

impl PartialOrd for SeqNumber {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some((self.0.wrapping_sub(other.0) as i32).cmp(&0))
    }
}

impl Add<usize> for SeqNumber {
    type Output = SeqNumber;
    /// Advances by `rhs` bytes modulo 2^32.
    fn add(self, rhs: usize) -> SeqNumber {
        // Only the low 32 bits matter in modular arithmetic.
        SeqNumber(self.0.wrapping_add(rhs as u32))
    }
}

impl AddAssign<usize> for SeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl Add<u32> for SeqNumber {
    type Output = SeqNumber;
    fn add(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs))
    }
}

impl Sub<u32> for SeqNumber {
    type Output = SeqNumber;
    fn sub(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs))
    }
}

impl SubAssign<u32> for SeqNumber {
    fn sub_assign(&mut self, rhs: u32) {
        *self = *self - rhs;
    }
}

impl Sub<SeqNumber> for SeqNumber {
    type Output = i64;
    /// Signed distance `self - rhs`, in (-2^31, 2^31].
    fn sub(self, rhs: SeqNumber) -> i64 {
        i64::from(self.0.wrapping_sub(rhs.0) as i32)
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The eight TCP flag bits (byte 13 of the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN echo.
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x80);

    const NAMES: [(TcpFlags, &'static str); 8] = [
        (Self::FIN, "FIN"),
        (Self::SYN, "SYN"),
        (Self::RST, "RST"),
        (Self::PSH, "PSH"),
        (Self::ACK, "ACK"),
        (Self::URG, "URG"),
        (Self::ECE, "ECE"),
        (Self::CWR, "CWR"),
    ];

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Sets the bits of `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the bits of `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl fmt::Display for TcpFlags {
    /// Names of the set flags in bit order, comma separated ("SYN,ACK");
    /// "none" when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let mut first = true;
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// One SACK block: the bytes `left..right` were received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: SeqNumber,
    /// Sequence number just after the block.
    pub right: SeqNumber,
}

/// The timestamps option (RFC 7323).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Timestamps {
    /// Sender's timestamp clock.
    pub tsval: u32,
    /// Echo of the peer's most recent TSval.
    pub tsecr: u32,
}

/// The options of one segment that this crate understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// Maximum segment size.
    pub mss: Option<u16>,
    /// Window scale shift count, as sent (values above 14 are not clamped
    /// here; RFC 7323 leaves that to the receiver).
    pub window_scale: Option<u8>,
    /// SACK permitted.
    pub sack_permitted: bool,
    /// SACK blocks in the order sent; the first `None` ends the list.
    pub sack_blocks: [Option<SackBlock>; 4],
    /// Timestamps.
    pub timestamps: Option<Timestamps>,
    /// `rets` of the timelost option (see [`TIMELOST_EXID`]).
    pub timelost: Option<u32>,
}

const MSS_LEN: usize = 4;
const WINDOW_SCALE_LEN: usize = 3;
const SACK_PERMITTED_LEN: usize = 2;
const TIMESTAMPS_LEN: usize = 10;
const SACK_BLOCK_LEN: usize = 8;
const TIMELOST_LEN: usize = 8;

impl TcpOptions {
    /// The SACK blocks up to the first `None`.
    pub fn sack_blocks(&self) -> impl Iterator<Item = SackBlock> + '_ {
        self.sack_blocks.iter().map_while(|b| *b)
    }

    /// Number of SACK blocks before the first `None`.
    pub fn sack_block_count(&self) -> usize {
        self.sack_blocks().count()
    }

    /// Bytes these options take when emitted, padding included (a multiple
    /// of 4; may exceed [`MAX_OPTIONS_LEN`], in which case emit fails).
    pub fn buffer_len(&self) -> usize {
        // Each group below is already a multiple of 4, as Linux lays them out.
        let mut len = 0;
        if self.mss.is_some() {
            len += MSS_LEN;
        }
        len += match (self.timestamps.is_some(), self.sack_permitted) {
            (true, _) => 2 + TIMESTAMPS_LEN,
            (false, true) => 2 + SACK_PERMITTED_LEN,
            (false, false) => 0,
        };
        if self.window_scale.is_some() {
            len += 1 + WINDOW_SCALE_LEN;
        }
        let blocks = self.sack_block_count();
        if blocks > 0 {
            len += 4 + SACK_BLOCK_LEN * blocks;
        }
        if self.timelost.is_some() {
            len += TIMELOST_LEN;
        }
        len
    }

    /// Writes the options into the start of `buf` in Linux's layout (MSS;
    /// SACK-permitted and timestamps; NOP and window scale; two NOPs and
    /// SACK blocks; then timelost) and returns the length written.
    ///
    /// Fails with `tcp.options: too long` beyond 40 bytes and
    /// `buffer too small` if `buf` is shorter than [`TcpOptions::buffer_len`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if len > MAX_OPTIONS_LEN {
            return Err(WireError::new(
                "tcp.options",
                HEADER_LEN,
                WireErrorKind::TooLong,
            ));
        }
        if buf.len() < len {
            return Err(WireError::new(
                "tcp.options",
                buf.len(),
                WireErrorKind::BufferTooSmall,
            ));
        }
        let mut w = Writer { buf, pos: 0 };
        if let Some(mss) = self.mss {
            w.put(&[option_kind::MSS, MSS_LEN as u8]);
            w.put(&mss.to_be_bytes());
        }
        match (self.timestamps, self.sack_permitted) {
            (Some(ts), sack_permitted) => {
                // SACK-permitted takes the place of the two NOPs that would
                // otherwise align the timestamps.
                if sack_permitted {
                    w.put(&[option_kind::SACK_PERMITTED, SACK_PERMITTED_LEN as u8]);
                } else {
                    w.put(&[option_kind::NOP, option_kind::NOP]);
                }
                w.put(&[option_kind::TIMESTAMPS, TIMESTAMPS_LEN as u8]);
                w.put(&ts.tsval.to_be_bytes());
                w.put(&ts.tsecr.to_be_bytes());
            }
            (None, true) => {
                w.put(&[option_kind::NOP, option_kind::NOP]);
                w.put(&[option_kind::SACK_PERMITTED, SACK_PERMITTED_LEN as u8]);
            }
            (None, false) => {}
        }
        if let Some(shift) = self.window_scale {
            w.put(&[option_kind::NOP, option_kind::WINDOW_SCALE]);
            w.put(&[WINDOW_SCALE_LEN as u8, shift]);
        }
        let blocks = self.sack_block_count();
        if blocks > 0 {
            let option_len = (2 + SACK_BLOCK_LEN * blocks) as u8;
            w.put(&[
                option_kind::NOP,
                option_kind::NOP,
                option_kind::SACK,
                option_len,
            ]);
            for block in self.sack_blocks() {
                w.put(&block.left.0.to_be_bytes());
                w.put(&block.right.0.to_be_bytes());
            }
        }
        if let Some(rets) = self.timelost {
            w.put(&[option_kind::EXPERIMENTAL, TIMELOST_LEN as u8]);
            w.put(&TIMELOST_EXID.to_be_bytes());
            w.put(&rets.to_be_bytes());
        }
        Ok(w.pos)
    }

    /// Parses an options area (the header bytes after the first 20). Error
    /// offsets count from the start of `bytes`.
    ///
    /// Parsing stops at End-of-List. Unknown kinds and kind-253 options with
    /// another ExID are skipped by their length. A repeated option replaces
    /// the earlier one.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let mut options = TcpOptions::default();
        let mut at = 0;
        while at < bytes.len() {
            let kind = bytes[at];
            match kind {
                option_kind::END => break,
                option_kind::NOP => {
                    at += 1;
                    continue;
                }
                _ => {}
            }
            let name = option_name(kind);
            let Some(&len) = bytes.get(at + 1) else {
                return Err(WireError::new(name, at, WireErrorKind::Truncated));
            };
            let len = usize::from(len);
            if len < 2 {
                return Err(WireError::new(name, at + 1, WireErrorKind::BadLength));
            }
            let Some(body) = bytes.get(at + 2..at + len) else {
                return Err(WireError::new(name, at, WireErrorKind::Truncated));
            };
            let bad_length = || WireError::new(name, at + 1, WireErrorKind::BadLength);
            match kind {
                option_kind::MSS => {
                    let [a, b] = *body else {
                        return Err(bad_length());
                    };
                    options.mss = Some(u16::from_be_bytes([a, b]));
                }
                option_kind::WINDOW_SCALE => {
                    let [shift] = *body else {
                        return Err(bad_length());
                    };
                    options.window_scale = Some(shift);
                }
                option_kind::SACK_PERMITTED => {
                    if !body.is_empty() {
                        return Err(bad_length());
                    }
                    options.sack_permitted = true;
                }
                option_kind::SACK => {
                    let count = body.len() / SACK_BLOCK_LEN;
                    if body.len() % SACK_BLOCK_LEN != 0 || !(1..=4).contains(&count) {
                        return Err(bad_length());
                    }
                    options.sack_blocks = [None; 4];
                    for (slot, block) in options
                        .sack_blocks
                        .iter_mut()
                        .zip(body.chunks_exact(SACK_BLOCK_LEN))
                    {
                        *slot = Some(SackBlock {
                            left: SeqNumber(be_u32(&block[..4])),
                            right: SeqNumber(be_u32(&block[4..])),
                        });
                    }
                }
                option_kind::TIMESTAMPS => {
                    if body.len() != TIMESTAMPS_LEN - 2 {
                        return Err(bad_length());
                    }
                    options.timestamps = Some(Timestamps {
                        tsval: be_u32(&body[..4]),
                        tsecr: be_u32(&body[4..]),
                    });
                }
                option_kind::EXPERIMENTAL => {
                    // Without a full ExID the option cannot be ours; skip it.
                    if let [hi, lo, rest @ ..] = body {
                        if u16::from_be_bytes([*hi, *lo]) == TIMELOST_EXID {
                            if rest.len() != 4 {
                                return Err(bad_length());
                            }
                            options.timelost = Some(be_u32(rest));
                        }
                    }
                }
                _ => {}
            }
            at += len;
        }
        Ok(options)
    }
}

fn option_name(kind: u8) -> &'static str {
    match kind {
        option_kind::MSS => "tcp.options.mss",
        option_kind::WINDOW_SCALE => "tcp.options.window_scale",
        option_kind::SACK_PERMITTED => "tcp.options.sack_permitted",
        option_kind::SACK => "tcp.options.sack",
        option_kind::TIMESTAMPS => "tcp.options.timestamps",
        option_kind::EXPERIMENTAL => "tcp.options.experimental",
        _ => "tcp.options",
    }
}

/// Callers pass exactly four bytes.
fn be_u32(b: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(b);
    u32::from_be_bytes(word)
}

/// Sequential writer over a buffer whose length was checked beforehand.
struct Writer<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
        self.pos += bytes.len();
    }
}

mod field {
    use core::ops::Range;

    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// A read/write view over the bytes of a TCP segment.
///
/// After [`Packet::new_checked`] no accessor can panic; on a view from
/// [`Packet::new_unchecked`] they panic if the buffer is too short.
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

    /// Checks that the fixed header fits and the data offset lies between 20
    /// bytes and the end of the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::new("tcp.header", len, WireErrorKind::Truncated));
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(WireError::new(
                "tcp.data_offset",
                field::DATA_OFFSET,
                WireErrorKind::BadValue,
            ));
        }
        if header_len > len {
            return Err(WireError::new(
                "tcp.data_offset",
                field::DATA_OFFSET,
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

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> SeqNumber {
        SeqNumber(be_u32(&self.buffer.as_ref()[field::SEQ_NUM]))
    }

    /// Acknowledgment number.
    pub fn ack_number(&self) -> SeqNumber {
        SeqNumber(be_u32(&self.buffer.as_ref()[field::ACK_NUM]))
    }

    /// Header length in bytes (data offset × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    /// The eight flag bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }

    /// Window field (unscaled).
    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WINDOW)
    }

    /// Checksum field as stored.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT)
    }

    /// Raw options area.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Payload after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Whether the checksum over the whole buffer and the pseudo header is
    /// correct. A buffer longer than 65535 bytes never verifies.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let data = self.buffer.as_ref();
        let Ok(len) = u16::try_from(data.len()) else {
            return false;
        };
        let sum = checksum::combine(&[
            checksum::pseudo_header_sum(src, dst, protocol::TCP, len),
            checksum::sum(data),
        ]);
        checksum::finish(sum) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        self.set_u16_at(field::SRC_PORT, port);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        self.set_u16_at(field::DST_PORT, port);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, seq: SeqNumber) {
        self.buffer.as_mut()[field::SEQ_NUM].copy_from_slice(&seq.0.to_be_bytes());
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, ack: SeqNumber) {
        self.buffer.as_mut()[field::ACK_NUM].copy_from_slice(&ack.0.to_be_bytes());
    }

    /// Sets the header length in bytes (rounded down to a multiple of 4),
    /// clearing the reserved bits.
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::DATA_OFFSET] = ((len / 4) as u8 & 0x0f) << 4;
    }

    /// Sets the flag bits.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = flags.0;
    }

    /// Sets the window field.
    pub fn set_window_len(&mut self, window: u16) {
        self.set_u16_at(field::WINDOW, window);
    }

    /// Sets the checksum field to a given value.
    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, urgent: u16) {
        self.set_u16_at(field::URGENT, urgent);
    }

    /// Raw options area, mutable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Payload after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes the checksum over the whole buffer and the pseudo header
    /// and stores it.
    ///
    /// # Panics
    /// If the buffer is longer than 65535 bytes.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let data = self.buffer.as_ref();
        let len = u16::try_from(data.len()).expect("TCP segment longer than 65535 bytes");
        let sum = checksum::combine(&[
            checksum::pseudo_header_sum(src, dst, protocol::TCP, len),
            checksum::sum(data),
        ]);
        self.set_checksum(checksum::finish(sum));
    }
}

/// A parsed TCP segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: SeqNumber,
    /// Acknowledgment number (meaningful when ACK is set).
    pub ack: SeqNumber,
    /// Flag bits.
    pub flags: TcpFlags,
    /// Window field as sent (unscaled).
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
    /// Payload bytes.
    pub payload: &'a [u8],
}

impl<'a> TcpRepr<'a> {
    /// Parses and (if `verify_checksum`) checks the checksum with the pseudo header.
    ///
    /// `segment` is the whole IPv4 payload. The checksum is checked before
    /// the options so that corruption is reported as such.
    pub fn parse(
        segment: &'a [u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        verify_checksum: bool,
    ) -> Result<Self> {
        let packet = Packet::new_checked(segment)?;
        if segment.len() > usize::from(u16::MAX) {
            return Err(WireError::new("tcp", 0, WireErrorKind::TooLong));
        }
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(WireError::new(
                "tcp.checksum",
                field::CHECKSUM.start,
                WireErrorKind::BadChecksum,
            ));
        }
        let options = TcpOptions::parse(packet.options()).map_err(|e| e.shifted(HEADER_LEN))?;
        Ok(TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq: packet.seq_number(),
            ack: packet.ack_number(),
            flags: packet.flags(),
            window: packet.window_len(),
            urgent: packet.urgent_at(),
            options,
            payload: &segment[packet.header_len()..],
        })
    }

    /// 20 + options padded to 4.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options.buffer_len()
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Writes header+options+payload and the checksum into buf[..buffer_len()].
    ///
    /// Returns the length written, or an error if the options exceed 40
    /// bytes, the segment exceeds 65535 bytes or `buf` is too short.
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<usize> {
        let len = self.checked_len()?;
        if buf.len() < len {
            return Err(WireError::new(
                "tcp",
                buf.len(),
                WireErrorKind::BufferTooSmall,
            ));
        }
        let header_len = self.emit_header(&mut buf[..len])?;
        buf[header_len..len].copy_from_slice(self.payload);
        Packet::new_unchecked(&mut buf[..len]).fill_checksum(src, dst);
        Ok(len)
    }

    /// The segment's length, or the error [`TcpRepr::emit`] gives when the
    /// header or the segment is too long.
    fn checked_len(&self) -> Result<usize> {
        self.checked_header_len()?;
        let len = self.buffer_len();
        if len > usize::from(u16::MAX) {
            return Err(WireError::new("tcp", 0, WireErrorKind::TooLong));
        }
        Ok(len)
    }

    /// The header's length, or an error if the options exceed 40 bytes.
    fn checked_header_len(&self) -> Result<usize> {
        let header_len = self.header_len();
        if header_len > MAX_HEADER_LEN {
            return Err(WireError::new(
                "tcp.options",
                HEADER_LEN,
                WireErrorKind::TooLong,
            ));
        }
        Ok(header_len)
    }

    /// Writes every byte of the header and options (padding included, the
    /// checksum field zero) into the start of `buf`, which must hold at
    /// least [`TcpRepr::header_len`] bytes; returns that length. The
    /// payload and checksum are the caller's.
    pub(crate) fn emit_header(&self, buf: &mut [u8]) -> Result<usize> {
        let header_len = self.checked_header_len()?;
        let mut packet = Packet::new_unchecked(&mut buf[..header_len]);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq);
        packet.set_ack_number(self.ack);
        packet.set_header_len(header_len);
        packet.set_flags(self.flags);
        packet.set_window_len(self.window);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent);
        let options = packet.options_mut();
        let written = self.options.emit(options)?;
        // End-of-List padding up to the 4-byte boundary.
        options[written..].fill(0);
        Ok(header_len)
    }

    /// Sequence space the segment occupies: payload + SYN + FIN.
    pub fn segment_len(&self) -> usize {
        self.payload.len()
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 10);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 20);

    const TEMPLATE: TcpRepr<'static> = TcpRepr {
        src_port: 49152,
        dst_port: 80,
        seq: SeqNumber(0x0102_0304),
        ack: SeqNumber(0),
        flags: TcpFlags::SYN,
        window: 64240,
        urgent: 0,
        options: TcpOptions {
            mss: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: [None; 4],
            timestamps: None,
            timelost: None,
        },
        payload: &[],
    };

    #[test]
    fn seq_number_compares_across_wraparound() {
        let before = SeqNumber(u32::MAX - 10);
        let after = before + 20usize;
        assert_eq!(after, SeqNumber(9));
        assert!(before < after);
        assert!(after > before);
        assert_eq!(after - before, 20);
        assert_eq!(before - after, -20);
        assert_eq!(before.max(after), after);
        assert_eq!(after.min(before), before);
        assert_eq!(after - 20u32, before);
        assert_eq!(before + 20u32, after);
        let mut s = before;
        s += 11usize;
        assert_eq!(s, SeqNumber(0));
        s -= 1u32;
        assert_eq!(s, SeqNumber(u32::MAX));
    }

    #[test]
    fn seq_number_distance_is_signed_half_space() {
        let a = SeqNumber(0);
        assert_eq!(SeqNumber(0x7fff_ffff) - a, i64::from(i32::MAX));
        // Exactly half the space away reads as "behind" (negative).
        assert_eq!(SeqNumber(0x8000_0000) - a, i64::from(i32::MIN));
        assert!(SeqNumber(0x8000_0001) < a);
        assert_eq!(a.partial_cmp(&a), Some(Ordering::Equal));
    }

    #[test]
    fn flags_display_and_set_operations() {
        assert_eq!((TcpFlags::SYN | TcpFlags::ACK).to_string(), "SYN,ACK");
        assert_eq!((TcpFlags::ACK | TcpFlags::FIN).to_string(), "FIN,ACK");
        assert_eq!(
            TcpFlags(0xff).to_string(),
            "FIN,SYN,RST,PSH,ACK,URG,ECE,CWR"
        );
        assert_eq!(TcpFlags::default().to_string(), "none");
        let mut f = TcpFlags::PSH;
        f.insert(TcpFlags::ACK);
        assert!(f.contains(TcpFlags::ACK | TcpFlags::PSH));
        assert!(!f.contains(TcpFlags::SYN | TcpFlags::ACK));
        f.remove(TcpFlags::PSH);
        assert_eq!(f, TcpFlags::ACK);
        assert_eq!(f & TcpFlags::SYN, TcpFlags::default());
    }

    #[test]
    fn segment_len_counts_syn_and_fin() {
        assert_eq!(TEMPLATE.segment_len(), 1);
        let fin = TcpRepr {
            flags: TcpFlags::FIN | TcpFlags::ACK,
            payload: b"abc",
            ..TEMPLATE
        };
        assert_eq!(fin.segment_len(), 4);
    }

    fn options_bytes(options: &TcpOptions) -> Vec<u8> {
        let mut buf = vec![0u8; options.buffer_len()];
        let n = options.emit(&mut buf).unwrap();
        assert_eq!(n, buf.len());
        buf
    }

    #[test]
    fn emits_linux_layouts() {
        let syn = TcpOptions {
            mss: Some(1460),
            sack_permitted: true,
            timestamps: Some(Timestamps {
                tsval: 0x0a0b0c0d,
                tsecr: 0,
            }),
            window_scale: Some(7),
            ..Default::default()
        };
        assert_eq!(
            options_bytes(&syn),
            [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 0, 1, 3, 3, 7]
        );
        let no_ts = TcpOptions {
            mss: Some(536),
            sack_permitted: true,
            window_scale: Some(0),
            ..Default::default()
        };
        assert_eq!(
            options_bytes(&no_ts),
            [2, 4, 0x02, 0x18, 1, 1, 4, 2, 1, 3, 3, 0]
        );
        let ts_only = TcpOptions {
            timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
            ..Default::default()
        };
        assert_eq!(
            options_bytes(&ts_only),
            [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]
        );
        let timelost = TcpOptions {
            timelost: Some(0x01020304),
            ..Default::default()
        };
        assert_eq!(options_bytes(&timelost), [253, 8, 0x54, 0x4c, 1, 2, 3, 4]);
    }

    #[test]
    fn options_round_trip_every_field() {
        let block = |l: u32, r: u32| {
            Some(SackBlock {
                left: SeqNumber(l),
                right: SeqNumber(r),
            })
        };
        let options = TcpOptions {
            timestamps: Some(Timestamps { tsval: 5, tsecr: 6 }),
            sack_blocks: [block(10, 20), block(30, 40), None, None],
            timelost: Some(77),
            ..Default::default()
        };
        let bytes = options_bytes(&options);
        assert_eq!(bytes.len(), 12 + 20 + 8);
        assert_eq!(TcpOptions::parse(&bytes), Ok(options));
        assert_eq!(options.sack_block_count(), 2);
    }

    #[test]
    fn too_many_options_fail_to_emit() {
        let block = Some(SackBlock::default());
        let options = TcpOptions {
            timestamps: Some(Timestamps::default()),
            sack_blocks: [block; 4],
            ..Default::default()
        };
        let err = TcpRepr {
            options,
            ..TEMPLATE
        }
        .emit(&mut [0u8; 100], SRC, DST)
        .unwrap_err();
        assert_eq!(
            (err.field, err.kind),
            ("tcp.options", WireErrorKind::TooLong)
        );
    }

    #[test]
    fn skips_unknown_and_foreign_experimental_options() {
        let bytes = [
            30, 4, 0xde, 0xad, // unknown kind 30 (MPTCP), skipped by length
            253, 6, 0xf9, 0x89, 0, 0, // kind 253 with another ExID
            253, 2, // kind 253 too short to carry an ExID
            2, 4, 0x05, 0xb4, 0, 0xff, 0xff, // EOL ends parsing
        ];
        let options = TcpOptions::parse(&bytes).unwrap();
        assert_eq!(
            options,
            TcpOptions {
                mss: Some(1460),
                ..Default::default()
            }
        );
    }

    #[test]
    fn malformed_options_name_field_and_offset() {
        let cases: &[(&[u8], &str, usize, WireErrorKind)] = &[
            (
                &[1, 2, 3, 4, 5, 0],
                "tcp.options.mss",
                2,
                WireErrorKind::BadLength,
            ),
            (&[1, 1, 2], "tcp.options.mss", 2, WireErrorKind::Truncated),
            (&[2, 4, 5], "tcp.options.mss", 0, WireErrorKind::Truncated),
            (
                &[3, 4, 7, 0],
                "tcp.options.window_scale",
                1,
                WireErrorKind::BadLength,
            ),
            (
                &[4, 3, 0, 0],
                "tcp.options.sack_permitted",
                1,
                WireErrorKind::BadLength,
            ),
            (
                &[8, 8, 0, 0, 0, 0, 0, 0],
                "tcp.options.timestamps",
                1,
                WireErrorKind::BadLength,
            ),
            (
                &[1, 1, 5, 2],
                "tcp.options.sack",
                3,
                WireErrorKind::BadLength,
            ),
            (
                &[5, 6, 0, 0, 0, 0],
                "tcp.options.sack",
                1,
                WireErrorKind::BadLength,
            ),
            (
                &[5, 10, 0, 0, 0, 0, 0, 0, 0],
                "tcp.options.sack",
                0,
                WireErrorKind::Truncated,
            ),
            (
                &[253, 6, 0x54, 0x4c, 0, 0],
                "tcp.options.experimental",
                1,
                WireErrorKind::BadLength,
            ),
            (&[99, 1], "tcp.options", 1, WireErrorKind::BadLength),
            (&[99, 0], "tcp.options", 1, WireErrorKind::BadLength),
        ];
        for &(bytes, field, offset, kind) in cases {
            let err = TcpOptions::parse(bytes).unwrap_err();
            assert_eq!(
                (err.field, err.offset, err.kind),
                (field, offset, kind),
                "{bytes:?}"
            );
        }
        // A SACK option with five blocks (42 bytes) cannot be legal.
        let mut five = vec![5, 42];
        five.resize(42, 0);
        assert_eq!(
            TcpOptions::parse(&five).unwrap_err().field,
            "tcp.options.sack"
        );
    }

    #[test]
    fn repr_reports_option_offsets_within_the_segment() {
        let mut buf = [0u8; 24];
        TcpRepr {
            options: TcpOptions {
                mss: Some(1),
                ..Default::default()
            },
            ..TEMPLATE
        }
        .emit(&mut buf, SRC, DST)
        .unwrap();
        buf[21] = 5; // MSS length 5
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        packet.fill_checksum(SRC, DST);
        let err = TcpRepr::parse(&buf, SRC, DST, true).unwrap_err();
        assert_eq!(err.to_string(), "tcp.options.mss: truncated at byte 20");
    }

    #[test]
    fn header_errors() {
        let mut buf = [0u8; 40];
        let n = TcpRepr {
            payload: &[1; 20],
            ..TEMPLATE
        }
        .emit(&mut buf, SRC, DST)
        .unwrap();
        assert_eq!(n, 40);
        let parsed = TcpRepr::parse(&buf, SRC, DST, true).unwrap();
        assert_eq!(parsed.payload, &[1; 20]);

        let err = TcpRepr::parse(&buf[..19], SRC, DST, false).unwrap_err();
        assert_eq!((err.field, err.offset), ("tcp.header", 19));

        let mut bad = buf;
        bad[12] = 4 << 4;
        let err = TcpRepr::parse(&bad, SRC, DST, false).unwrap_err();
        assert_eq!(
            (err.field, err.kind),
            ("tcp.data_offset", WireErrorKind::BadValue)
        );
        bad[12] = 15 << 4; // 60-byte header in a 40-byte segment
        let err = TcpRepr::parse(&bad, SRC, DST, false).unwrap_err();
        assert_eq!(
            (err.field, err.kind),
            ("tcp.data_offset", WireErrorKind::Truncated)
        );

        let err = TcpRepr::parse(&buf, SRC, Ipv4Addr::new(1, 2, 3, 4), true).unwrap_err();
        assert_eq!((err.field, err.offset), ("tcp.checksum", 16));

        let err = TEMPLATE.emit(&mut [0u8; 19], SRC, DST).unwrap_err();
        assert_eq!(err.kind, WireErrorKind::BufferTooSmall);
    }

    #[test]
    fn packet_view_accessors_and_setters() {
        let mut buf = [0u8; 20];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_header_len(20);
        p.set_src_port(1);
        p.set_dst_port(2);
        p.set_seq_number(SeqNumber(3));
        p.set_ack_number(SeqNumber(4));
        p.set_flags(TcpFlags::RST);
        p.set_window_len(5);
        p.set_urgent_at(6);
        p.fill_checksum(SRC, DST);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()),
            (1, 2, SeqNumber(3), SeqNumber(4))
        );
        assert_eq!(
            (p.flags(), p.window_len(), p.urgent_at()),
            (TcpFlags::RST, 5, 6)
        );
        assert!(p.options().is_empty() && p.payload().is_empty());
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(DST, Ipv4Addr::new(0, 0, 0, 1)));
    }
}
