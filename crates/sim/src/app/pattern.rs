//! The byte stream every built-in TCP app sends: byte `i` of a stream is a
//! fixed function of `i`, so a receiver checks content knowing only how
//! many bytes came before. The bytes are a hash of the offset, so lost,
//! duplicated or shifted data shows up as mismatches.
//!
//! They are drawn from the 64 characters of URL-safe base64: binary bytes
//! would now and then look like the start of some protocol to Wireshark's
//! heuristic dissectors, which then report the rest of the stream as
//! malformed.

/// The characters the stream is made of.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Byte at stream offset `offset`.
#[inline]
pub fn byte_at(offset: u64) -> u8 {
    // SplitMix64's finaliser: every bit of the offset moves the top bits.
    let mut z = offset.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ALPHABET[(z >> 58) as usize]
}

/// Fills `buf` with the stream from `offset` on.
pub fn fill(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = byte_at(offset + i as u64);
    }
}

/// How many bytes of `data`, which starts at stream offset `offset`,
/// differ from the stream.
pub fn mismatches(offset: u64, data: &[u8]) -> u64 {
    data.iter()
        .enumerate()
        .filter(|&(i, &b)| b != byte_at(offset + i as u64))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_or_altered_data_mismatches() {
        let mut a = vec![0; 4096];
        fill(1000, &mut a);
        assert_eq!(mismatches(1000, &a), 0);
        // Off by one byte: nearly everything differs (1 in 64 agree by
        // chance).
        assert!(mismatches(1001, &a) > 3900);
        // Off by a whole segment too.
        assert!(mismatches(1000 + 1460, &a) > 3900);
        assert!(a.iter().all(u8::is_ascii_alphanumeric) || a.contains(&b'-'));
        a[17] ^= 1;
        assert_eq!(mismatches(1000, &a), 1);
    }
}
