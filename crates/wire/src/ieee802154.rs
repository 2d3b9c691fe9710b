//! IEEE 802.15.4 (2006) data and acknowledgment frames, their frame check
//! sequence, and their airtime on the 2.4 GHz O-QPSK PHY.
//!
//! The MAC header is laid out and read by the `smoltcp` crate's
//! `ieee802154` module; this module adds what rtolab needs around it and
//! smoltcp does not do: validation with byte offsets, the FCS (smoltcp
//! leaves it to the radio), the 127-byte PSDU limit on emission, ACK frames
//! (smoltcp's `Repr::buffer_len` assumes a destination PAN, which an ACK
//! lacks) and airtime. No smoltcp type appears in this API.
//!
//! A PSDU here is what the PHY carries after its length byte: MAC header,
//! MAC payload and the 2-byte FCS.

use smoltcp::wire::{
    Ieee802154Address as SmolAddress, Ieee802154Frame, Ieee802154FrameType, Ieee802154FrameVersion,
    Ieee802154Pan, Ieee802154Repr,
};

use crate::{Result, WireError, WireErrorKind};

/// Largest PSDU (aMaxPHYPacketSize, IEEE 802.15.4-2006 §6.4.1).
pub const MAX_PSDU_LEN: usize = 127;
/// Length of the frame check sequence (IEEE 802.15.4-2006 §7.2.1.9).
pub const FCS_LEN: usize = 2;
/// Length of an ACK frame's PSDU: frame control, sequence number, FCS
/// (IEEE 802.15.4-2006 §7.2.2.3).
pub const ACK_PSDU_LEN: usize = 5;
/// Broadcast short address (IEEE 802.15.4-2006 §7.2.1.6).
pub const BROADCAST: Address = Address::Short(0xffff);

/// Synchronisation header of the 2.4 GHz O-QPSK PHY: 4-byte preamble and
/// 1-byte start-of-frame delimiter (IEEE 802.15.4-2006 §6.3.1–6.3.2).
pub const SHR_LEN: usize = 5;
/// PHY header: the frame length byte (IEEE 802.15.4-2006 §6.3.3).
pub const PHR_LEN: usize = 1;
/// Time on air of one byte at 250 kbit/s: 2 symbols of 16 µs
/// (62.5 ksymbol/s, IEEE 802.15.4-2006 §6.5.1).
pub const BYTE_TIME_NS: u64 = 32_000;

/// Time on air, in nanoseconds, of a PHY frame carrying a PSDU of
/// `psdu_len` bytes (FCS included): preamble, SFD and PHR, then the PSDU.
pub const fn airtime_ns(psdu_len: usize) -> u64 {
    (SHR_LEN + PHR_LEN + psdu_len) as u64 * BYTE_TIME_NS
}

/// The FCS of IEEE 802.15.4-2006 §7.2.1.9: the ITU-T CRC-16 (generator
/// x^16 + x^12 + x^5 + 1) with a zero initial value, computed least
/// significant bit first; this parametrisation is catalogued as
/// CRC-16/KERMIT. It is sent low byte first.
pub fn fcs(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte);
        for _ in 0..8 {
            // 0x8408 is 0x1021 bit-reversed: the register shifts right
            // because bits go on the air least significant first.
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x8408
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// A short (16-bit) or extended (64-bit) MAC address.
///
/// Both are held in the order people write them (an extended address as its
/// EUI-64 bytes, most significant first); on the air they go least
/// significant byte first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Address {
    /// 16-bit short address, assigned by the PAN coordinator.
    Short(u16),
    /// 64-bit extended address (EUI-64).
    Extended([u8; 8]),
}

impl Address {
    /// Bytes of the field on the air.
    pub const fn wire_len(&self) -> usize {
        match self {
            Address::Short(_) => 2,
            Address::Extended(_) => 8,
        }
    }

    pub(crate) fn to_smol(self) -> SmolAddress {
        match self {
            Address::Short(a) => SmolAddress::Short(a.to_be_bytes()),
            Address::Extended(a) => SmolAddress::Extended(a),
        }
    }

    fn from_smol(a: SmolAddress) -> Option<Self> {
        match a {
            SmolAddress::Absent => None,
            SmolAddress::Short(b) => Some(Address::Short(u16::from_be_bytes(b))),
            SmolAddress::Extended(b) => Some(Address::Extended(b)),
        }
    }
}

/// Kind of frame (frame control bits 0–2). Beacons and MAC commands are not
/// modelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameType {
    /// Data frame: carries a MAC payload (here a 6LoWPAN packet).
    Data,
    /// Acknowledgment: frame control and sequence number only.
    Ack,
}

/// Frame version field (frame control bits 12–13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameVersion {
    /// 0: IEEE 802.15.4-2003.
    V2003,
    /// 1: IEEE 802.15.4-2006. Without security, data and ACK frames are
    /// laid out the same way as in 2003.
    V2006,
}

/// A data or ACK frame's MAC header fields as plain values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameRepr {
    /// Data or ACK.
    pub frame_type: FrameType,
    /// Frame version.
    pub version: FrameVersion,
    /// Frame pending bit.
    pub frame_pending: bool,
    /// Acknowledgment request bit (unicast data frames).
    pub ack_request: bool,
    /// Sequence number.
    pub seq: u8,
    /// Destination PAN ID (data frames; `None` in an ACK).
    pub dst_pan: Option<u16>,
    /// Destination address (data frames; `None` in an ACK).
    pub dst: Option<Address>,
    /// Source PAN ID, or `None` to set PAN ID compression (source in the
    /// destination's PAN, its PAN ID not repeated).
    pub src_pan: Option<u16>,
    /// Source address (data frames; `None` in an ACK).
    pub src: Option<Address>,
}

mod fc {
    pub const TYPE_MASK: u16 = 0b111;
    pub const TYPE_DATA: u16 = 1;
    pub const TYPE_ACK: u16 = 2;
    pub const SECURITY: u16 = 1 << 3;
    pub const PENDING: u16 = 1 << 4;
    pub const ACK_REQUEST: u16 = 1 << 5;
    pub const PAN_ID_COMPRESSION: u16 = 1 << 6;
    pub const DST_MODE_SHIFT: u16 = 10;
    pub const VERSION_SHIFT: u16 = 12;
    pub const SRC_MODE_SHIFT: u16 = 14;
    pub const MODE_ABSENT: u16 = 0;
    pub const MODE_SHORT: u16 = 2;
    pub const MODE_EXTENDED: u16 = 3;
}

/// Offset of the addressing fields: after frame control and sequence number.
const ADDRESSING_START: usize = 3;

impl FrameRepr {
    /// An ACK frame for sequence number `seq`.
    pub const fn ack(seq: u8, frame_pending: bool) -> Self {
        FrameRepr {
            frame_type: FrameType::Ack,
            version: FrameVersion::V2003,
            frame_pending,
            ack_request: false,
            seq,
            dst_pan: None,
            dst: None,
            src_pan: None,
            src: None,
        }
    }

    /// Length of the MAC header.
    pub fn header_len(&self) -> usize {
        match self.frame_type {
            FrameType::Ack => ADDRESSING_START,
            FrameType::Data => {
                ADDRESSING_START
                    + 2
                    + self.dst.map_or(0, |a| a.wire_len())
                    + self.src_pan.map_or(0, |_| 2)
                    + self.src.map_or(0, |a| a.wire_len())
            }
        }
    }

    /// Length of the PSDU carrying `payload_len` bytes: header, payload, FCS.
    pub fn psdu_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len + FCS_LEN
    }

    /// Most MAC payload bytes a frame with this header can carry.
    pub fn max_payload_len(&self) -> usize {
        MAX_PSDU_LEN.saturating_sub(self.header_len() + FCS_LEN)
    }

    /// Appends the PSDU (header, `payload`, FCS) to `out` and returns its
    /// length.
    ///
    /// A PSDU over [`MAX_PSDU_LEN`] is refused with `ieee802154.psdu`
    /// `TooLong`, the error's offset being the length the PSDU would have
    /// had. A data frame needs both addresses and a destination PAN; an ACK
    /// must have none of them and no payload (`ieee802154.frame_control`
    /// `BadValue`).
    pub fn emit(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<usize> {
        let len = self.psdu_len(payload.len());
        if len > MAX_PSDU_LEN {
            return Err(WireError::new(
                "ieee802154.psdu",
                len,
                WireErrorKind::TooLong,
            ));
        }
        let start = out.len();
        match self.frame_type {
            FrameType::Ack => {
                if self.dst.is_some() || self.src.is_some() || !payload.is_empty() {
                    return Err(WireError::new(
                        "ieee802154.frame_control",
                        0,
                        WireErrorKind::BadValue,
                    ));
                }
                let mut control = fc::TYPE_ACK | (self.version_bits() << fc::VERSION_SHIFT);
                if self.frame_pending {
                    control |= fc::PENDING;
                }
                out.extend_from_slice(&control.to_le_bytes());
                out.push(self.seq);
            }
            FrameType::Data => {
                let (Some(dst_pan), Some(dst), Some(src)) = (self.dst_pan, self.dst, self.src)
                else {
                    return Err(WireError::new(
                        "ieee802154.frame_control",
                        0,
                        WireErrorKind::BadValue,
                    ));
                };
                let repr = Ieee802154Repr {
                    frame_type: Ieee802154FrameType::Data,
                    security_enabled: false,
                    frame_pending: self.frame_pending,
                    ack_request: self.ack_request,
                    sequence_number: Some(self.seq),
                    pan_id_compression: self.src_pan.is_none(),
                    frame_version: match self.version {
                        FrameVersion::V2003 => Ieee802154FrameVersion::Ieee802154_2003,
                        FrameVersion::V2006 => Ieee802154FrameVersion::Ieee802154_2006,
                    },
                    dst_pan_id: Some(Ieee802154Pan(dst_pan)),
                    dst_addr: Some(dst.to_smol()),
                    src_pan_id: self.src_pan.map(Ieee802154Pan),
                    src_addr: Some(src.to_smol()),
                };
                out.resize(start + self.header_len(), 0);
                repr.emit(&mut Ieee802154Frame::new_unchecked(&mut out[start..]));
                out.extend_from_slice(payload);
            }
        }
        let crc = fcs(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(len)
    }

    fn version_bits(&self) -> u16 {
        match self.version {
            FrameVersion::V2003 => 0,
            FrameVersion::V2006 => 1,
        }
    }

    /// Parses a PSDU (FCS included), verifying the FCS, and returns the
    /// header and the MAC payload (empty for an ACK).
    ///
    /// Security-enabled frames, beacons, MAC commands and data frames
    /// without both addresses are `Unsupported`.
    pub fn parse(psdu: &[u8]) -> Result<(FrameRepr, &[u8])> {
        let len = psdu.len();
        if len > MAX_PSDU_LEN {
            return Err(WireError::new(
                "ieee802154.psdu",
                len,
                WireErrorKind::TooLong,
            ));
        }
        if len < ACK_PSDU_LEN {
            return Err(WireError::new(
                "ieee802154.header",
                len,
                WireErrorKind::Truncated,
            ));
        }
        let body = &psdu[..len - FCS_LEN];
        let sent = u16::from_le_bytes([psdu[len - 2], psdu[len - 1]]);
        if fcs(body) != sent {
            return Err(WireError::new(
                "ieee802154.fcs",
                len - FCS_LEN,
                WireErrorKind::BadChecksum,
            ));
        }
        let control = u16::from_le_bytes([body[0], body[1]]);
        let version = match (control >> fc::VERSION_SHIFT) & 0b11 {
            0 => FrameVersion::V2003,
            1 => FrameVersion::V2006,
            _ => {
                return Err(WireError::new(
                    "ieee802154.frame_control.version",
                    1,
                    WireErrorKind::Unsupported,
                ))
            }
        };
        if control & fc::SECURITY != 0 {
            return Err(WireError::new(
                "ieee802154.frame_control.security",
                0,
                WireErrorKind::Unsupported,
            ));
        }
        let dst_mode = (control >> fc::DST_MODE_SHIFT) & 0b11;
        let src_mode = (control >> fc::SRC_MODE_SHIFT) & 0b11;
        let frame_pending = control & fc::PENDING != 0;
        let ack_request = control & fc::ACK_REQUEST != 0;
        match control & fc::TYPE_MASK {
            fc::TYPE_ACK => {
                if dst_mode != fc::MODE_ABSENT || src_mode != fc::MODE_ABSENT || body.len() != 3 {
                    return Err(WireError::new(
                        "ieee802154.ack",
                        0,
                        WireErrorKind::BadLength,
                    ));
                }
                let mut repr = FrameRepr::ack(body[2], frame_pending);
                repr.version = version;
                Ok((repr, &[]))
            }
            fc::TYPE_DATA => {
                let mode_len = |mode: u16, offset: usize, field: &'static str| match mode {
                    fc::MODE_SHORT => Ok(2),
                    fc::MODE_EXTENDED => Ok(8),
                    _ => Err(WireError::new(field, offset, WireErrorKind::Unsupported)),
                };
                let dst_len = mode_len(dst_mode, 1, "ieee802154.frame_control.dst_mode")?;
                let src_len = mode_len(src_mode, 1, "ieee802154.frame_control.src_mode")?;
                let compressed = control & fc::PAN_ID_COMPRESSION != 0;
                let header_len =
                    ADDRESSING_START + 2 + dst_len + if compressed { 0 } else { 2 } + src_len;
                if header_len > body.len() {
                    return Err(WireError::new(
                        "ieee802154.addressing",
                        body.len(),
                        WireErrorKind::Truncated,
                    ));
                }
                // Validated above: every accessor used below finds its bytes.
                let frame = Ieee802154Frame::new_unchecked(body);
                let repr = FrameRepr {
                    frame_type: FrameType::Data,
                    version,
                    frame_pending,
                    ack_request,
                    seq: body[2],
                    dst_pan: frame.dst_pan_id().map(|p| p.0),
                    dst: frame.dst_addr().and_then(Address::from_smol),
                    src_pan: if compressed {
                        None
                    } else {
                        frame.src_pan_id().map(|p| p.0)
                    },
                    src: frame.src_addr().and_then(Address::from_smol),
                };
                Ok((repr, &body[header_len..]))
            }
            _ => Err(WireError::new(
                "ieee802154.frame_control.type",
                0,
                WireErrorKind::Unsupported,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fcs_is_crc16_kermit() {
        // The catalogue check value of CRC-16/KERMIT over "123456789".
        assert_eq!(fcs(b"123456789"), 0x2189);
        assert_eq!(fcs(&[]), 0);
        // A frame followed by its FCS (low byte first) leaves a zero
        // remainder, as a receiver checks it.
        let mut frame = vec![0x41, 0x88, 0x01, 0xcd, 0xab];
        let crc = fcs(&frame);
        frame.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(fcs(&frame), 0);
    }

    #[test]
    fn airtime_of_the_largest_frame_and_an_ack() {
        // 133 bytes on air (5 SHR + 1 PHR + 127) at 32 µs each.
        assert_eq!(airtime_ns(MAX_PSDU_LEN), 4_256_000);
        // An ACK: 11 bytes, 352 µs.
        assert_eq!(airtime_ns(ACK_PSDU_LEN), 352_000);
        assert_eq!(airtime_ns(0), 192_000);
    }

    fn data_frame() -> FrameRepr {
        FrameRepr {
            frame_type: FrameType::Data,
            version: FrameVersion::V2006,
            frame_pending: false,
            ack_request: true,
            seq: 42,
            dst_pan: Some(0xabcd),
            dst: Some(Address::Extended([0x00, 0x12, 0x4b, 0, 0, 0, 0, 2])),
            src_pan: None,
            src: Some(Address::Extended([0x00, 0x12, 0x4b, 0, 0, 0, 0, 1])),
        }
    }

    #[test]
    fn data_frame_layout_and_round_trip() {
        let repr = data_frame();
        let mut out = Vec::new();
        let len = repr.emit(b"hello", &mut out).unwrap();
        assert_eq!(len, 3 + 2 + 8 + 8 + 5 + 2);
        assert_eq!(out.len(), len);
        // Frame control: data, ack request, PAN ID compression, both
        // extended, version 2006: 0b11_01_11_000_1_1_0_0_001 = 0xdc61.
        assert_eq!(&out[..3], &[0x61, 0xdc, 42]);
        // PAN ID and addresses least significant byte first.
        assert_eq!(&out[3..5], &[0xcd, 0xab]);
        assert_eq!(&out[5..13], &[2, 0, 0, 0, 0, 0x4b, 0x12, 0x00]);
        let (parsed, payload) = FrameRepr::parse(&out).unwrap();
        assert_eq!(parsed, repr);
        assert_eq!(payload, b"hello");
        // smoltcp's own reader agrees on every field.
        let frame = Ieee802154Frame::new_checked(&out[..len - FCS_LEN]).unwrap();
        let smol = Ieee802154Repr::parse(&frame).unwrap();
        assert_eq!(smol.sequence_number, Some(42));
        assert_eq!(smol.dst_pan_id, Some(Ieee802154Pan(0xabcd)));
        assert_eq!(smol.dst_addr, repr.dst.map(Address::to_smol));
        assert_eq!(smol.src_addr, repr.src.map(Address::to_smol));
        assert!(smol.pan_id_compression && smol.ack_request);
        assert_eq!(frame.payload(), Some(&b"hello"[..]));
    }

    #[test]
    fn short_addresses_and_separate_pans() {
        let repr = FrameRepr {
            dst: Some(BROADCAST),
            src: Some(Address::Short(0x0102)),
            src_pan: Some(0x1234),
            ack_request: false,
            ..data_frame()
        };
        let mut out = Vec::new();
        repr.emit(&[1, 2, 3], &mut out).unwrap();
        assert_eq!(out.len(), 3 + 2 + 2 + 2 + 2 + 3 + 2);
        assert_eq!(&out[5..11], &[0xff, 0xff, 0x34, 0x12, 0x02, 0x01]);
        assert_eq!(FrameRepr::parse(&out).unwrap(), (repr, &[1u8, 2, 3][..]));
    }

    #[test]
    fn ack_round_trip() {
        let ack = FrameRepr::ack(7, true);
        let mut out = Vec::new();
        assert_eq!(ack.emit(&[], &mut out), Ok(ACK_PSDU_LEN));
        assert_eq!(&out[..3], &[0x12, 0x00, 7]);
        assert_eq!(FrameRepr::parse(&out).unwrap(), (ack, &[][..]));
        assert!(ack.emit(&[1], &mut Vec::new()).is_err());
    }

    #[test]
    fn length_limit_names_the_length() {
        let repr = data_frame();
        let room = repr.max_payload_len();
        assert_eq!(room, 127 - 21 - 2);
        let mut out = Vec::new();
        assert_eq!(repr.emit(&vec![0; room], &mut out), Ok(MAX_PSDU_LEN));
        let err = repr.emit(&vec![0; room + 3], &mut Vec::new()).unwrap_err();
        assert_eq!(err.to_string(), "ieee802154.psdu: too long at byte 130");
        let mut long = out.clone();
        long.push(0);
        assert_eq!(
            FrameRepr::parse(&long).unwrap_err().kind,
            WireErrorKind::TooLong
        );
    }

    #[test]
    fn bad_frames_are_named() {
        let mut out = Vec::new();
        data_frame().emit(b"xy", &mut out).unwrap();
        let mut flipped = out.clone();
        flipped[20] ^= 1;
        let e = FrameRepr::parse(&flipped).unwrap_err();
        assert_eq!((e.field, e.offset), ("ieee802154.fcs", out.len() - 2));
        let e = FrameRepr::parse(&out[..4]).unwrap_err();
        assert_eq!(e.kind, WireErrorKind::Truncated);
        // A header cut short, with a correct FCS over what is left.
        let mut cut = out[..10].to_vec();
        let crc = fcs(&cut);
        cut.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(
            FrameRepr::parse(&cut).unwrap_err().field,
            "ieee802154.addressing"
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..140)) {
            let _ = FrameRepr::parse(&bytes);
            // Also with a correct FCS, so the header checks are reached.
            if bytes.len() >= 2 {
                let mut fixed = bytes[..bytes.len() - 2].to_vec();
                let crc = fcs(&fixed);
                fixed.extend_from_slice(&crc.to_le_bytes());
                let _ = FrameRepr::parse(&fixed);
            }
        }
    }
}
