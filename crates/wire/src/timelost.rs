//! The MAC side of the `timelost` TCP option (see [`crate::tcp::TIMELOST_EXID`]):
//! finding `rets` in an IP datagram and rewriting it in place, with the TCP
//! checksum updated to match.
//!
//! A wireless interface reads `rets` when it takes a packet to send
//! ([`read_rets`]), and on each attempt writes that value plus the time it
//! has lost since its own first attempt ([`write_rets`], with the time
//! converted by [`rets_from_nanos`]). A datagram without the option, or a
//! value that does not change, is left byte for byte as it was.
//!
//! Only the first (or only) fragment of a datagram carries the TCP header;
//! other fragments, non-TCP datagrams and IPv6 datagrams whose TCP header
//! sits behind extension headers are left alone.

use crate::checksum;

/// The unit of `rets`: the 802.11 DSSS slot time, 20 µs, in nanoseconds.
pub const RETS_UNIT_NS: u64 = 20_000;

const TCP: u8 = 6;
const OPTION_EXPERIMENTAL: u8 = crate::tcp::option_kind::EXPERIMENTAL;
const TIMELOST_LEN: usize = 8;
/// Offset of the checksum in the TCP header.
const TCP_CHECKSUM_AT: usize = 16;

/// Whole units of `rets` in `nanos` (rounded down: a partial slot was not
/// lost in full), saturating at `u32::MAX`.
pub fn rets_from_nanos(nanos: u64) -> u32 {
    u32::try_from(nanos / RETS_UNIT_NS).unwrap_or(u32::MAX)
}

/// The `rets` an interface writes on an attempt: what the packet brought
/// when the interface took it (`arrived`), plus the whole units lost since
/// its own first attempt. Over several wireless hops the values add up.
pub fn rets_on_attempt(arrived: u32, since_first_attempt_ns: u64) -> u32 {
    arrived.saturating_add(rets_from_nanos(since_first_attempt_ns))
}

/// Where a datagram's TCP segment starts and ends, if it carries the start
/// of one.
fn tcp_segment(datagram: &[u8]) -> Option<(usize, usize)> {
    match datagram.first()? >> 4 {
        4 => {
            let ihl = usize::from(datagram[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*datagram.get(2)?, *datagram.get(3)?]));
            let fragment = u16::from_be_bytes([*datagram.get(6)?, *datagram.get(7)?]) & 0x1fff;
            if ihl < 20 || *datagram.get(9)? != TCP || fragment != 0 {
                return None;
            }
            (ihl <= total && total <= datagram.len()).then_some((ihl, total))
        }
        6 => {
            let payload = usize::from(u16::from_be_bytes([*datagram.get(4)?, *datagram.get(5)?]));
            let end = 40 + payload;
            (*datagram.get(6)? == TCP && end <= datagram.len()).then_some((40, end))
        }
        _ => None,
    }
}

/// Offset in `datagram` of the timelost option's `rets` field, and of the
/// TCP header.
fn rets_offset(datagram: &[u8]) -> Option<(usize, usize)> {
    let (tcp, end) = tcp_segment(datagram)?;
    let segment = &datagram[tcp..end];
    let header_len = usize::from(*segment.get(12)? >> 4) * 4;
    if header_len < 20 || header_len > segment.len() {
        return None;
    }
    let options = &segment[20..header_len];
    let mut at = 0;
    while at < options.len() {
        match options[at] {
            0 => return None,
            1 => at += 1,
            kind => {
                let len = usize::from(*options.get(at + 1)?);
                if len < 2 || at + len > options.len() {
                    return None;
                }
                if kind == OPTION_EXPERIMENTAL
                    && len == TIMELOST_LEN
                    && u16::from_be_bytes([options[at + 2], options[at + 3]])
                        == crate::tcp::TIMELOST_EXID
                {
                    return Some((tcp + 20 + at + 4, tcp));
                }
                at += len;
            }
        }
    }
    None
}

/// `rets` of the timelost option of the TCP segment in `datagram` (IPv4 or
/// IPv6), `None` when there is none.
pub fn read_rets(datagram: &[u8]) -> Option<u32> {
    let (at, _) = rets_offset(datagram)?;
    let bytes = datagram.get(at..at + 4)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Writes `rets` into the timelost option of the TCP segment in
/// `datagram` and updates the TCP checksum incrementally (RFC 1624, eqn.
/// 3), so a segment whose checksum was wrong stays wrong. Returns whether
/// the option is there; without it nothing changes.
pub fn write_rets(datagram: &mut [u8], rets: u32) -> bool {
    let Some((at, tcp)) = rets_offset(datagram) else {
        return false;
    };
    // The 16-bit words of the checksum are aligned on the segment's start;
    // the field may not be (options can be NOP-padded anyhow), so the
    // update covers the aligned words around it.
    let start = at - (at - tcp) % 2;
    let end = (at + 4 + (at + 4 - tcp) % 2).min(datagram.len());
    let old = checksum::sum(&datagram[start..end]);
    datagram[at..at + 4].copy_from_slice(&rets.to_be_bytes());
    let new = checksum::sum(&datagram[start..end]);
    if old == new {
        return true;
    }
    let sum_at = tcp + TCP_CHECKSUM_AT;
    let stored = u16::from_be_bytes([datagram[sum_at], datagram[sum_at + 1]]);
    // HC' = ~(~HC + ~m + m'), with m and m' the old and new words' sums.
    let updated = checksum::finish(checksum::combine(&[
        u32::from(!stored),
        u32::from(!(old as u16)),
        new,
    ]));
    datagram[sum_at..sum_at + 2].copy_from_slice(&updated.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use proptest::prelude::*;

    use super::*;
    use crate::ipv4::{protocol, Ipv4Repr};
    use crate::ipv6::Ipv6Repr;
    use crate::packet::{self, Transport};
    use crate::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

    fn tcp(timelost: Option<u32>, payload: &[u8]) -> TcpRepr<'_> {
        TcpRepr {
            src_port: 5001,
            dst_port: 40000,
            seq: SeqNumber(1000),
            ack: SeqNumber(77),
            flags: TcpFlags::ACK,
            window: 8192,
            urgent: 0,
            options: TcpOptions {
                timelost,
                mss: Some(1460),
                ..TcpOptions::default()
            },
            payload,
        }
    }

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);

    fn v4(timelost: Option<u32>, payload: &[u8]) -> Vec<u8> {
        let ip = Ipv4Repr {
            src: SRC,
            dst: DST,
            protocol: protocol::TCP,
            ttl: 64,
            ident: 9,
            dont_fragment: true,
            tos: 0,
            payload_len: 0,
        };
        let mut out = Vec::new();
        packet::emit_tcp(&mut out, &ip, &tcp(timelost, payload)).unwrap();
        out
    }

    fn v6(timelost: Option<u32>, payload: &[u8]) -> Vec<u8> {
        let ip = Ipv6Repr {
            src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 2),
            next_header: 6,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        };
        let mut out = Vec::new();
        crate::ipv6::emit_tcp(&mut out, &ip, &tcp(timelost, payload)).unwrap();
        out
    }

    /// The timelost value of a datagram as a receiver parses it, checksum
    /// checked.
    fn parsed_v4(datagram: &[u8]) -> Option<u32> {
        match packet::parse(datagram)
            .expect("checksum and fields sound")
            .transport
        {
            Transport::Tcp(t) => t.options.timelost,
            other => panic!("not TCP: {other:?}"),
        }
    }

    fn parsed_v6(datagram: &[u8]) -> Option<u32> {
        match crate::ipv6::parse(datagram)
            .expect("checksum and fields sound")
            .transport
        {
            crate::ipv6::Transport6::Tcp(t) => t.options.timelost,
            other => panic!("not TCP: {other:?}"),
        }
    }

    #[test]
    fn rets_count_whole_slots() {
        assert_eq!(rets_from_nanos(0), 0);
        assert_eq!(rets_from_nanos(19_999), 0);
        assert_eq!(rets_from_nanos(20_000), 1);
        assert_eq!(rets_from_nanos(1_000_000), 50);
        assert_eq!(rets_from_nanos(u64::MAX), u32::MAX);
    }

    #[test]
    fn rets_add_up_over_one_and_two_wireless_hops() {
        // Hop 1 (the mobile): the source sent 0; attempts at 0, 1.3 ms and
        // 2.71 ms after the first, the last one acknowledged.
        let mut d = v4(Some(0), b"segment");
        let arrived = read_rets(&d).unwrap();
        let mut written = Vec::new();
        for since in [0, 1_300_000, 2_710_000] {
            write_rets(&mut d, rets_on_attempt(arrived, since));
            written.push(read_rets(&d).unwrap());
        }
        // 1.3 ms is 65 slots; 2.71 ms is 135.5, counted 135.
        assert_eq!(written, [0, 65, 135]);
        // Hop 2 (the access point) takes the packet with 135 and needs two
        // attempts, 0.5 ms apart: the receiver reads 135 + 25.
        let arrived = read_rets(&d).unwrap();
        for since in [0, 500_000] {
            write_rets(&mut d, rets_on_attempt(arrived, since));
        }
        assert_eq!(parsed_v4(&d), Some(160));
        // A hop without retransmissions adds nothing and changes no byte.
        let before = d.clone();
        let arrived = read_rets(&d).unwrap();
        write_rets(&mut d, rets_on_attempt(arrived, 0));
        assert_eq!(d, before);
        // Saturates rather than wraps.
        assert_eq!(rets_on_attempt(u32::MAX - 1, 1_000_000), u32::MAX);
    }

    #[test]
    fn rewriting_keeps_the_checksum_right_over_ipv4_and_ipv6() {
        for payload in [&b""[..], b"x", b"hello, world"] {
            let mut d = v4(Some(0), payload);
            assert_eq!(read_rets(&d), Some(0));
            assert!(write_rets(&mut d, 123_456));
            assert_eq!(read_rets(&d), Some(123_456));
            assert_eq!(parsed_v4(&d), Some(123_456));
            // The same bytes as a sender writing the value itself.
            assert_eq!(d, v4(Some(123_456), payload));

            let mut d = v6(Some(5), payload);
            assert!(write_rets(&mut d, 0xfedc_ba98));
            assert_eq!(parsed_v6(&d), Some(0xfedc_ba98));
            assert_eq!(d, v6(Some(0xfedc_ba98), payload));
        }
    }

    #[test]
    fn absent_option_or_unchanged_value_changes_nothing() {
        for d in [v4(None, b"data"), v6(None, b"data")] {
            let mut copy = d.clone();
            assert_eq!(read_rets(&copy), None);
            assert!(!write_rets(&mut copy, 99));
            assert_eq!(copy, d);
        }
        let d = v4(Some(0), b"data");
        let mut copy = d.clone();
        assert!(write_rets(&mut copy, 0));
        assert_eq!(copy, d);
    }

    #[test]
    fn an_option_at_an_odd_offset_is_rewritten_with_a_sound_checksum() {
        // Options: NOP, timelost, END padding: `rets` starts at an odd
        // offset of the segment, straddling checksum words.
        let mut d = v4(None, b"odd");
        let header = 20;
        let options = [1, 253, 8, 0x54, 0x4c, 0, 0, 0, 7, 0, 0, 0];
        let mut segment = d[header..header + 20].to_vec();
        segment[12] = (((20 + options.len()) / 4) << 4) as u8;
        segment.extend_from_slice(&options);
        segment.extend_from_slice(b"odd");
        d.truncate(header);
        d.extend_from_slice(&segment);
        let total = d.len() as u16;
        let mut ip = crate::ipv4::Packet::new_unchecked(&mut d[..]);
        ip.set_total_len(total);
        ip.fill_checksum();
        crate::tcp::Packet::new_unchecked(&mut d[header..]).fill_checksum(SRC, DST);
        assert_eq!(parsed_v4(&d), Some(7));
        assert!(write_rets(&mut d, 0x0102_0304));
        assert_eq!(parsed_v4(&d), Some(0x0102_0304));
    }

    #[test]
    fn other_datagrams_are_left_alone() {
        // A later fragment carries no TCP header.
        let mut d = v4(Some(1), b"data");
        d[6] = 0x00;
        d[7] = 0x10;
        assert_eq!(read_rets(&d), None);
        // UDP, garbage, truncated.
        let mut d = v4(Some(1), b"data");
        d[9] = 17;
        assert!(!write_rets(&mut d, 3));
        assert_eq!(read_rets(&[]), None);
        assert_eq!(read_rets(&[0x45, 0, 0]), None);
        let d = v4(Some(1), b"data");
        assert_eq!(read_rets(&d[..30]), None);
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..80), rets: u32) {
            let _ = read_rets(&bytes);
            let _ = write_rets(&mut bytes, rets);
        }

        #[test]
        fn any_value_round_trips_with_a_sound_checksum(first: u32, second: u32, payload in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut d = v4(Some(first), &payload);
            prop_assert!(write_rets(&mut d, second));
            prop_assert_eq!(parsed_v4(&d), Some(second));
            let mut d = v6(Some(first), &payload);
            prop_assert!(write_rets(&mut d, second));
            prop_assert_eq!(parsed_v6(&d), Some(second));
        }
    }
}
