//! UDP (RFC 768): a zero-copy header view and a parsed representation.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::ipv4::protocol;
use crate::{Result, WireError, WireErrorKind};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

mod field {
    use core::ops::Range;

    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// A read/write view over the bytes of a UDP datagram.
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

    /// Checks that the header fits and the length field is between the
    /// header length and the buffer length. Bytes beyond the length field are
    /// ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(WireError::new("udp.header", len, WireErrorKind::Truncated));
        }
        let length = usize::from(self.len());
        if length < HEADER_LEN {
            return Err(WireError::new(
                "udp.length",
                field::LENGTH.start,
                WireErrorKind::BadLength,
            ));
        }
        if length > len {
            return Err(WireError::new(
                "udp.length",
                field::LENGTH.start,
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

    /// Length field: header plus payload.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Checksum field as stored (0 means none was computed).
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Whether the checksum is absent (0) or correct for these addresses.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let length = self.len();
        let data = &self.buffer.as_ref()[..usize::from(length)];
        let sum = checksum::combine(&[
            checksum::pseudo_header_sum(src, dst, protocol::UDP, length),
            checksum::sum(data),
        ]);
        checksum::finish(sum) == 0
    }

    /// The payload, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
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

    /// Sets the length field.
    pub fn set_len(&mut self, len: u16) {
        self.set_u16_at(field::LENGTH, len);
    }

    /// Sets the checksum field to a given value.
    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    /// Computes the checksum over the first `len()` bytes and stores it; a
    /// computed 0 is sent as 0xFFFF because 0 means "no checksum".
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let length = self.len();
        let data = &self.buffer.as_ref()[..usize::from(length)];
        let sum = checksum::combine(&[
            checksum::pseudo_header_sum(src, dst, protocol::UDP, length),
            checksum::sum(data),
        ]);
        let value = match checksum::finish(sum) {
            0 => 0xffff,
            c => c,
        };
        self.set_checksum(value);
    }

    /// The payload, mutable, up to the length field.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// A parsed UDP datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpRepr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload bytes.
    pub payload: &'a [u8],
}

impl<'a> UdpRepr<'a> {
    /// Parses a UDP datagram (the IPv4 payload) and, if `verify_checksum`,
    /// checks its checksum against the pseudo header (a zero checksum means
    /// none was sent and is accepted).
    pub fn parse(
        datagram: &'a [u8],
        src: Ipv4Addr,
        dst: Ipv4Addr,
        verify_checksum: bool,
    ) -> Result<Self> {
        let packet = Packet::new_checked(datagram)?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(WireError::new(
                "udp.checksum",
                field::CHECKSUM.start,
                WireErrorKind::BadChecksum,
            ));
        }
        let payload = &datagram[HEADER_LEN..usize::from(packet.len())];
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload,
        })
    }

    /// Header plus payload length.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Writes header, payload and checksum into `buf[..buffer_len()]` and
    /// returns that length.
    pub fn emit(&self, buf: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<usize> {
        let len = self.checked_len()?;
        if buf.len() < len {
            return Err(WireError::new(
                "udp",
                buf.len(),
                WireErrorKind::BufferTooSmall,
            ));
        }
        self.emit_header(&mut buf[..len])?;
        buf[HEADER_LEN..len].copy_from_slice(self.payload);
        Packet::new_unchecked(&mut buf[..len]).fill_checksum(src, dst);
        Ok(len)
    }

    /// The datagram's length, or the error [`UdpRepr::emit`] gives when it
    /// does not fit the length field.
    fn checked_len(&self) -> Result<usize> {
        let len = self.buffer_len();
        u16::try_from(len).map_err(|_| {
            WireError::new("udp.length", field::LENGTH.start, WireErrorKind::TooLong)
        })?;
        Ok(len)
    }

    /// Writes the 8-byte header (checksum zero) into the start of `buf`;
    /// the payload and checksum are the caller's.
    pub(crate) fn emit_header(&self, buf: &mut [u8]) -> Result<usize> {
        // Fits: checked_len bounds it by u16::MAX.
        let length = self.checked_len()? as u16;
        let mut packet = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(length);
        packet.set_checksum(0);
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    #[test]
    fn emit_then_parse() {
        let repr = UdpRepr {
            src_port: 5353,
            dst_port: 53,
            payload: b"hello",
        };
        let mut buf = [0u8; 13];
        assert_eq!(repr.emit(&mut buf, SRC, DST), Ok(13));
        assert_eq!(UdpRepr::parse(&buf, SRC, DST, true), Ok(repr));
        let err = UdpRepr::parse(&buf, SRC, Ipv4Addr::new(10, 0, 0, 3), true).unwrap_err();
        assert_eq!(err.field, "udp.checksum");
    }

    #[test]
    fn zero_checksum_means_none() {
        let mut buf = [0u8; 12];
        let repr = UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload: &[9, 9, 9, 9],
        };
        repr.emit(&mut buf, SRC, DST).unwrap();
        buf[6] = 0;
        buf[7] = 0;
        assert_eq!(UdpRepr::parse(&buf, SRC, DST, true), Ok(repr));
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Pick a payload word that makes the one's-complement sum 0xFFFF, so
        // the computed checksum is 0.
        let mut buf = [0u8; 10];
        let repr = UdpRepr {
            src_port: 0,
            dst_port: 0,
            payload: &[0, 0],
        };
        repr.emit(&mut buf, SRC, DST).unwrap();
        let partial = checksum::combine(&[
            checksum::pseudo_header_sum(SRC, DST, protocol::UDP, 10),
            checksum::sum(&[0, 0, 0, 0, 0, 10, 0, 0]),
        ]);
        let fill = (0xffff - partial as u16).to_be_bytes();
        let repr = UdpRepr {
            payload: &fill,
            ..repr
        };
        repr.emit(&mut buf, SRC, DST).unwrap();
        assert_eq!(&buf[6..8], &[0xff, 0xff]);
        assert_eq!(UdpRepr::parse(&buf, SRC, DST, true), Ok(repr));
    }

    #[test]
    fn bad_lengths_are_named() {
        let mut buf = [0u8; 12];
        UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload: &[1, 2, 3, 4],
        }
        .emit(&mut buf, SRC, DST)
        .unwrap();
        assert_eq!(
            UdpRepr::parse(&buf[..7], SRC, DST, true).unwrap_err().field,
            "udp.header"
        );
        let e = UdpRepr::parse(&buf[..11], SRC, DST, true).unwrap_err();
        assert_eq!((e.field, e.kind), ("udp.length", WireErrorKind::Truncated));
        buf[5] = 7;
        let e = UdpRepr::parse(&buf, SRC, DST, false).unwrap_err();
        assert_eq!((e.field, e.kind), ("udp.length", WireErrorKind::BadLength));
        let e = UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload: &[1, 2, 3, 4],
        }
        .emit(&mut buf[..11], SRC, DST)
        .unwrap_err();
        assert_eq!(e.kind, WireErrorKind::BufferTooSmall);
    }
}
