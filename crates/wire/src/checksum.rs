//! The Internet checksum (RFC 1071) and the IPv4 and IPv6 pseudo headers.
//!
//! Sums are kept as `u32` holding an already folded 16-bit one's-complement
//! value, so partial sums of any number of pieces can be added without
//! overflow before [`finish`] complements them.

use std::net::{Ipv4Addr, Ipv6Addr};

/// One's-complement sum of `data` as big-endian 16-bit words (an odd final
/// byte is padded with zero), folded to 16 bits.
///
/// This is on every packet's path, twice per data segment (sender and
/// receiver), so it is written for speed on two facts of RFC 1071 §2:
/// one's-complement addition is associative, so 32-bit words may be summed
/// into wide accumulators and the carries folded once at the end; and it is
/// byte-order independent, so words are read in the machine's own order and
/// only the folded 16-bit result is swapped. Reading native 32-bit words
/// into four independent accumulators lets the compiler vectorise the loop
/// with no byte shuffles.
pub fn sum(data: &[u8]) -> u32 {
    // Each accumulator gains less than 2^32 per step, so it cannot overflow
    // below 2^32 steps (64 GiB per accumulator), far beyond any datagram.
    let mut lanes = [0u64; 4];
    let mut blocks = data.chunks_exact(16);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(4)) {
            *lane += u64::from(u32::from_ne_bytes([word[0], word[1], word[2], word[3]]));
        }
    }
    let mut acc: u64 = lanes.iter().sum();
    let mut words = blocks.remainder().chunks_exact(2);
    for word in &mut words {
        acc += u64::from(u16::from_ne_bytes([word[0], word[1]]));
    }
    if let [last] = words.remainder() {
        // Padding with a zero byte after `last`, read in native order.
        acc += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    // The folded native-order sum, put in network order.
    u32::from(u16::from_be(fold64(acc) as u16))
}

/// Adds folded sums together, folding again.
pub fn combine(sums: &[u32]) -> u32 {
    fold64(sums.iter().map(|&s| u64::from(s)).sum())
}

/// Complements a sum into the value that goes on the wire.
pub fn finish(sum: u32) -> u16 {
    !(fold64(u64::from(sum)) as u16)
}

/// The Internet checksum of `data` (RFC 1071): the complement of the
/// one's-complement sum. Over data that includes a correct checksum field,
/// the result is 0.
pub fn internet(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// Folded sum of the IPv4 pseudo header used by TCP and UDP checksums
/// (RFC 793 §3.1, RFC 768): source, destination, zero, protocol, length.
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, len: u16) -> u32 {
    let s = src.octets();
    let d = dst.octets();
    let acc = u64::from(u16::from_be_bytes([s[0], s[1]]))
        + u64::from(u16::from_be_bytes([s[2], s[3]]))
        + u64::from(u16::from_be_bytes([d[0], d[1]]))
        + u64::from(u16::from_be_bytes([d[2], d[3]]))
        + u64::from(protocol)
        + u64::from(len);
    fold64(acc)
}

/// Folded sum of the IPv6 pseudo header of RFC 8200 §8.1, used by TCP,
/// UDP and ICMPv6 checksums: source, destination, the 32-bit upper-layer
/// length, three zero bytes and the next header value.
///
/// Adding [`sum`] of the upper-layer packet (its checksum field zero) and
/// passing the result to [`finish`] gives the checksum to send.
pub fn pseudo_header_sum_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, len: u32) -> u32 {
    let mut acc: u64 = 0;
    for addr in [src, dst] {
        for word in addr.segments() {
            acc += u64::from(word);
        }
    }
    acc += u64::from(len >> 16) + u64::from(len & 0xffff) + u64::from(next_header);
    fold64(acc)
}

/// The checksum to send in a TCP, UDP or ICMPv6 packet `data` carried over
/// IPv6 (its checksum field must hold zero), pseudo header included. Over
/// a received packet, checksum field as received, it is zero when that
/// checksum is right.
pub fn upper_layer_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, data: &[u8]) -> u16 {
    // Upper-layer packets longer than u32::MAX do not exist (jumbograms
    // stop there too); saturating keeps this total.
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    finish(combine(&[
        pseudo_header_sum_v6(src, dst, next_header, len),
        sum(data),
    ]))
}

fn fold64(mut acc: u64) -> u32 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: these bytes sum to 0xddf2, checksum is its complement.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&data), 0xddf2);
        assert_eq!(internet(&data), !0xddf2);
    }

    /// The plain RFC 1071 loop over 16-bit words, to check the wide one.
    fn sum_by_words(data: &[u8]) -> u32 {
        let mut acc: u64 = 0;
        for word in data.chunks(2) {
            let high = u64::from(word[0]) << 8;
            acc += high + word.get(1).map_or(0, |&low| u64::from(low));
        }
        fold64(acc)
    }

    proptest::proptest! {
        #[test]
        fn wide_sum_equals_the_word_by_word_sum(data in proptest::collection::vec(proptest::num::u8::ANY, 0..2000)) {
            proptest::prop_assert_eq!(sum(&data), sum_by_words(&data));
        }
    }

    #[test]
    fn wide_sum_handles_carries_and_every_tail_length() {
        for len in 0..64 {
            let ones = vec![0xFF; len];
            assert_eq!(sum(&ones), sum_by_words(&ones), "len {len}");
        }
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(sum(&[0xab]), 0xab00);
    }

    #[test]
    fn carries_wrap_around() {
        assert_eq!(sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
        assert_eq!(sum(&[0xff, 0xff, 0xff, 0xff]), 0xffff);
    }

    #[test]
    fn sum_is_split_invariant_at_even_boundaries() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        assert_eq!(combine(&[sum(&data[..500]), sum(&data[500..])]), sum(&data));
    }

    #[test]
    fn data_with_its_checksum_verifies_to_zero() {
        let mut data = vec![0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0, 0];
        let c = internet(&data);
        data[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(internet(&data), 0);
    }

    #[test]
    fn v6_pseudo_header_matches_explicit_bytes() {
        let src: Ipv6Addr = "fe80::212:7401:1:101".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8::ff:fe00:1".parse().unwrap();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&70_000u32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 6]);
        assert_eq!(pseudo_header_sum_v6(src, dst, 6, 70_000), sum(&bytes));
    }

    #[test]
    fn pseudo_header_matches_explicit_bytes() {
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(192, 168, 200, 254);
        let bytes = [10, 0, 0, 1, 192, 168, 200, 254, 0, 6, 0x05, 0xdc];
        assert_eq!(pseudo_header_sum(src, dst, 6, 1500), sum(&bytes));
    }
}
