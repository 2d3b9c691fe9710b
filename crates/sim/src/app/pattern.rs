//! The byte stream every built-in TCP app sends: byte `i` of a stream is a
//! fixed function of `i`, so a receiver checks content knowing only how
//! many bytes came before. The bytes are a hash of the offset modulo a
//! prime period of about a megabyte, so lost, duplicated or shifted data
//! shows up as mismatches (a shift by a whole number of periods would not,
//! but no segment size divides a prime).
//!
//! The period is computed once and kept: sending is then handing TCP a
//! shared slice of it (no copy, no hashing per byte) and checking is a
//! memory comparison. Hashing every byte sent and received cost a 16-flow
//! 100 Mbit/s run more time than simulating it (docs/performance.md).
//!
//! They are drawn from the 64 characters of URL-safe base64: binary bytes
//! would now and then look like the start of some protocol to Wireshark's
//! heuristic dissectors, which then report the rest of the stream as
//! malformed.

use std::sync::OnceLock;

/// The characters the stream is made of.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Bytes after which the stream repeats: the largest prime below 2^20.
pub const PERIOD: usize = 1_048_573;

/// Byte at stream offset `offset` within the period, hashed.
fn hashed(offset: u64) -> u8 {
    // SplitMix64's finaliser: every bit of the offset moves the top bits.
    let mut z = offset.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ALPHABET[(z >> 58) as usize]
}

/// One period of the stream followed by as many of its first bytes again,
/// so that any run of up to [`PERIOD`] bytes is one contiguous slice.
fn table() -> &'static [u8] {
    static TABLE: OnceLock<Box<[u8]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..2 * PERIOD as u64)
            .map(|i| hashed(i % PERIOD as u64))
            .collect()
    })
}

/// Up to `len` bytes of the stream from `offset` on, as one static slice
/// (shorter when `len` exceeds [`PERIOD`]).
pub fn slice(offset: u64, len: usize) -> &'static [u8] {
    let start = (offset % PERIOD as u64) as usize;
    &table()[start..start + len.min(PERIOD)]
}

/// Byte at stream offset `offset`.
#[inline]
pub fn byte_at(offset: u64) -> u8 {
    table()[(offset % PERIOD as u64) as usize]
}

/// Fills `buf` with the stream from `offset` on.
pub fn fill(offset: u64, buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let part = slice(offset + done as u64, buf.len() - done);
        buf[done..done + part.len()].copy_from_slice(part);
        done += part.len();
    }
}

/// How many bytes of `data`, which starts at stream offset `offset`,
/// differ from the stream.
pub fn mismatches(offset: u64, data: &[u8]) -> u64 {
    let mut bad = 0;
    let mut done = 0;
    while done < data.len() {
        let want = slice(offset + done as u64, data.len() - done);
        let got = &data[done..done + want.len()];
        // Intact data, the usual case, is one memory comparison.
        if got != want {
            bad += got.iter().zip(want).filter(|(a, b)| a != b).count() as u64;
        }
        done += want.len();
    }
    bad
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
        assert!(a
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_'));
        a[17] ^= 1;
        assert_eq!(mismatches(1000, &a), 1);
    }

    #[test]
    fn the_stream_is_the_hash_of_the_offset_across_the_period_boundary() {
        let start = PERIOD as u64 - 10;
        let mut a = vec![0; 30];
        fill(start, &mut a);
        for (i, &b) in a.iter().enumerate() {
            let offset = start + i as u64;
            assert_eq!(b, hashed(offset % PERIOD as u64));
            assert_eq!(b, byte_at(offset));
        }
        assert_eq!(mismatches(start, &a), 0);
        // A buffer longer than a period is filled and checked whole.
        let mut long = vec![0; PERIOD + 100];
        fill(7, &mut long);
        assert_eq!(mismatches(7, &long), 0);
        assert_eq!(slice(7, PERIOD + 100).len(), PERIOD);
    }
}
