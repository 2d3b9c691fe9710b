//! IEEE 802.11 frames as captures record them: the MAC header of data,
//! ACK, RTS and CTS frames (IEEE 802.11-2016 §9.2-9.3), data carried with
//! an LLC/SNAP header (RFC 1042), behind a radiotap header
//! (<https://www.radiotap.org>) giving the frame's flags and rate, for
//! LINKTYPE_IEEE802_11_RADIOTAP captures. Frames are written without
//! their FCS (the radiotap Flags field says so).
//!
//! Written out here because the frames are few and fixed: the radiotap
//! header has two one-byte fields, and each MAC header a handful of fixed
//! fields.

/// A MAC address.
pub type MacAddr = [u8; 6];

/// A locally administered unicast address for station `index` of a
/// simulated BSS: 02:00:00:00:hi:lo, numbered from 1.
pub fn station_addr(index: u16) -> MacAddr {
    let [hi, lo] = (index + 1).to_be_bytes();
    [0x02, 0, 0, 0, hi, lo]
}

/// The frames the DCF sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A data frame (subtype Data).
    Data,
    /// An acknowledgement.
    Ack,
    /// Request to send.
    Rts,
    /// Clear to send.
    Cts,
}

/// Which way a data frame crosses the distribution system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ds {
    /// From a station to its access point (To DS).
    ToAp,
    /// From the access point to a station (From DS).
    FromAp,
}

/// The fields of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// What it is.
    pub kind: FrameKind,
    /// Receiver (Address 1).
    pub receiver: MacAddr,
    /// Transmitter (Address 2; RTS and data only).
    pub transmitter: MacAddr,
    /// The BSS's identifier, the access point's address (data only).
    pub bssid: MacAddr,
    /// Direction of a data frame.
    pub ds: Ds,
    /// The Duration/ID field, µs.
    pub duration_us: u16,
    /// Sequence number, modulo 4096 (data only).
    pub seq: u16,
    /// The Retry bit.
    pub retry: bool,
}

/// Frame control's first byte: protocol version 0, type, subtype.
fn frame_control_0(kind: FrameKind) -> u8 {
    // (subtype << 4) | (type << 2)
    match kind {
        FrameKind::Data => 0x08,
        FrameKind::Ack => 0xd4,
        FrameKind::Rts => 0xb4,
        FrameKind::Cts => 0xc4,
    }
}

/// Radiotap `it_present` bits of the Flags and Rate fields.
const RADIOTAP_PRESENT_FLAGS: u32 = 1 << 1;
const RADIOTAP_PRESENT_RATE: u32 = 1 << 2;
/// Radiotap header length: version, pad, length, present word, Flags,
/// Rate.
const RADIOTAP_LEN: u16 = 8 + 2;

/// LLC/SNAP header of an RFC 1042 encapsulation, before the EtherType.
const SNAP: [u8; 6] = [0xaa, 0xaa, 0x03, 0x00, 0x00, 0x00];

/// Appends `header` and, for a data frame, `payload` (an IP datagram,
/// after LLC/SNAP with the EtherType of its version) to `out`, behind a
/// radiotap header with the rate in 500 kbit/s units.
pub fn emit_radiotap(out: &mut Vec<u8>, header: &FrameHeader, rate_500kbps: u8, payload: &[u8]) {
    out.push(0); // it_version
    out.push(0); // it_pad
    out.extend_from_slice(&RADIOTAP_LEN.to_le_bytes());
    out.extend_from_slice(&(RADIOTAP_PRESENT_FLAGS | RADIOTAP_PRESENT_RATE).to_le_bytes());
    out.push(0); // Flags: long preamble, no FCS at the end
    out.push(rate_500kbps);
    emit_mpdu(out, header, payload);
}

/// Appends the MPDU alone (no FCS).
pub fn emit_mpdu(out: &mut Vec<u8>, header: &FrameHeader, payload: &[u8]) {
    out.push(frame_control_0(header.kind));
    let mut flags = 0u8;
    if header.kind == FrameKind::Data {
        flags |= match header.ds {
            Ds::ToAp => 0x01,
            Ds::FromAp => 0x02,
        };
    }
    if header.retry {
        flags |= 0x08;
    }
    out.push(flags);
    out.extend_from_slice(&header.duration_us.to_le_bytes());
    out.extend_from_slice(&header.receiver);
    match header.kind {
        FrameKind::Ack | FrameKind::Cts => {}
        FrameKind::Rts => out.extend_from_slice(&header.transmitter),
        FrameKind::Data => {
            out.extend_from_slice(&header.transmitter);
            // Address 3: the other end beyond the access point; the
            // simulated hosts have no MAC addresses there, so the BSSID.
            out.extend_from_slice(&header.bssid);
            out.extend_from_slice(&((header.seq % 4096) << 4).to_le_bytes());
            out.extend_from_slice(&SNAP);
            let ethertype: u16 = match payload.first().map(|b| b >> 4) {
                Some(6) => 0x86dd,
                _ => 0x0800,
            };
            out.extend_from_slice(&ethertype.to_be_bytes());
            out.extend_from_slice(payload);
        }
    }
}

/// What a capture reader needs of one radiotap-framed 802.11 frame: its
/// kind and its Retry bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapturedFrame {
    /// The kind, `None` for a type or subtype the DCF does not send.
    pub kind: Option<FrameKind>,
    /// The Retry bit.
    pub retry: bool,
}

/// Reads the frame control of a frame behind a radiotap header of any
/// length (its `it_len`); `None` when the record is too short for both.
pub fn parse_radiotap(record: &[u8]) -> Option<CapturedFrame> {
    let radiotap_len = usize::from(u16::from_le_bytes([*record.get(2)?, *record.get(3)?]));
    let control = record.get(radiotap_len..radiotap_len + 2)?;
    let kind = [
        FrameKind::Data,
        FrameKind::Ack,
        FrameKind::Rts,
        FrameKind::Cts,
    ]
    .into_iter()
    .find(|&k| frame_control_0(k) == control[0]);
    Some(CapturedFrame {
        kind,
        retry: control[1] & 0x08 != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: FrameKind) -> FrameHeader {
        FrameHeader {
            kind,
            receiver: station_addr(0),
            transmitter: station_addr(1),
            bssid: station_addr(0),
            ds: Ds::ToAp,
            duration_us: 314,
            seq: 4097,
            retry: true,
        }
    }

    #[test]
    fn radiotap_frames_read_back_their_kind_and_retry_bit() {
        for kind in [
            FrameKind::Data,
            FrameKind::Ack,
            FrameKind::Rts,
            FrameKind::Cts,
        ] {
            for retry in [false, true] {
                let mut out = Vec::new();
                let h = FrameHeader {
                    retry,
                    ..header(kind)
                };
                emit_radiotap(&mut out, &h, 22, &[0x45; 20]);
                let read = parse_radiotap(&out).expect("parses");
                assert_eq!(
                    read,
                    CapturedFrame {
                        kind: Some(kind),
                        retry
                    }
                );
            }
        }
        // A longer radiotap header (another writer's) is skipped by its length.
        let mut out = vec![0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        emit_mpdu(&mut out, &header(FrameKind::Data), &[]);
        assert_eq!(parse_radiotap(&out).unwrap().kind, Some(FrameKind::Data));
        // Management frames are none of ours; truncated records give None.
        assert_eq!(parse_radiotap(&[0, 0, 4, 0, 0x80, 0]).unwrap().kind, None);
        assert_eq!(parse_radiotap(&[0, 0, 10, 0, 0]), None);
        assert_eq!(parse_radiotap(&[0, 0]), None);
    }

    #[test]
    fn control_frames_have_the_standard_lengths() {
        // Without FCS: ACK and CTS 10 bytes, RTS 16.
        for (kind, len) in [
            (FrameKind::Ack, 10),
            (FrameKind::Cts, 10),
            (FrameKind::Rts, 16),
        ] {
            let mut out = Vec::new();
            emit_mpdu(&mut out, &header(kind), &[]);
            assert_eq!(out.len(), len, "{kind:?}");
        }
        let mut ack = Vec::new();
        emit_mpdu(&mut ack, &header(FrameKind::Ack), &[]);
        assert_eq!(ack[..4], [0xd4, 0x08, 0x3a, 0x01]);
        assert_eq!(ack[4..10], [2, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn data_frames_carry_llc_snap_and_the_sequence_number() {
        let mut out = Vec::new();
        emit_radiotap(&mut out, &header(FrameKind::Data), 22, &[0x45, 1, 2]);
        assert_eq!(out[..10], [0, 0, 10, 0, 6, 0, 0, 0, 0, 22]);
        let mpdu = &out[10..];
        // To DS and Retry.
        assert_eq!(mpdu[..2], [0x08, 0x09]);
        // Sequence 4097 mod 4096 = 1, fragment 0.
        assert_eq!(mpdu[22..24], [0x10, 0x00]);
        assert_eq!(mpdu[24..32], [0xaa, 0xaa, 3, 0, 0, 0, 0x08, 0x00]);
        assert_eq!(mpdu[32..], [0x45, 1, 2]);
        assert_eq!(mpdu.len(), 24 + 8 + 3);
    }
}
