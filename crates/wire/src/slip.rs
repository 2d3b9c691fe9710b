//! SLIP (RFC 1055): datagrams on a serial line, as between the mesh's
//! border router and the host it is wired to.
//!
//! A frame is the datagram with two bytes escaped, closed by [`END`]:
//! [`END`] becomes [`ESC`] [`ESC_END`] and [`ESC`] becomes [`ESC`]
//! [`ESC_ESC`]. [`encode`] also opens each frame with [`END`], as
//! Contiki's `slip.c` (`slip_send`, `slip_write`) does, so line noise
//! before a frame ends up in a frame of its own instead of in front of the
//! datagram.
//!
//! [`Decoder`] takes the line's bytes in any pieces and never panics. It
//! skips empty frames (the back-to-back `END`s the leading one makes). A
//! frame with an escape that is neither [`ESC_END`] nor [`ESC_ESC`], or
//! one longer than the decoder's limit, is reported once as an error
//! naming the byte where it broke, and the rest of it is dropped up to the
//! next [`END`], where decoding starts afresh.

use std::num::NonZeroU32;

use crate::{Result, WireError, WireErrorKind};

/// Ends a frame (and, as sent here, opens one).
pub const END: u8 = 0xC0;
/// Starts a two-byte escape.
pub const ESC: u8 = 0xDB;
/// After [`ESC`]: a data byte [`END`].
pub const ESC_END: u8 = 0xDC;
/// After [`ESC`]: a data byte [`ESC`].
pub const ESC_ESC: u8 = 0xDD;

/// Bits on the line per byte with 8N1 framing: a start bit, eight data
/// bits, a stop bit.
pub const BITS_PER_BYTE_8N1: u32 = 10;

/// Appends the frame of `datagram` to `out`: [`END`], the escaped bytes,
/// [`END`]. Returns how many bytes were appended, [`encoded_len`].
///
/// An empty datagram makes `END END`, which a decoder skips.
pub fn encode(datagram: &[u8], out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.reserve(encoded_len(datagram));
    out.push(END);
    for &byte in datagram {
        match byte {
            END => out.extend_from_slice(&[ESC, ESC_END]),
            ESC => out.extend_from_slice(&[ESC, ESC_ESC]),
            other => out.push(other),
        }
    }
    out.push(END);
    out.len() - start
}

/// Length of the frame [`encode`] makes of `datagram`: its bytes, one more
/// for each [`END`] or [`ESC`] among them, and the two [`END`]s. This is
/// what the serial line carries, for [`serial_time_ns`].
pub fn encoded_len(datagram: &[u8]) -> usize {
    let escaped = datagram.iter().filter(|&&b| b == END || b == ESC).count();
    datagram.len() + escaped + 2
}

/// Time in nanoseconds to clock `encoded_len` bytes onto a serial line of
/// `baud` bits per second with `bits_per_byte` line bits per byte
/// ([`BITS_PER_BYTE_8N1`] for 8N1), rounded up to the next nanosecond so
/// that the last bit has left when the time is over. Saturates at
/// `u64::MAX`.
pub fn serial_time_ns(encoded_len: usize, baud: NonZeroU32, bits_per_byte: u32) -> u64 {
    let bits = encoded_len as u128 * u128::from(bits_per_byte);
    let ns = (bits * 1_000_000_000).div_ceil(u128::from(baud.get()));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Where a [`Decoder`] is within a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxState {
    /// Reading data bytes.
    Data,
    /// The last byte was [`ESC`].
    Escape,
    /// The frame broke; dropping bytes until the next [`END`].
    Discard,
}

/// A streaming SLIP decoder: bytes in, datagrams (or errors) out.
///
/// Error offsets count the bytes the decoder has been given since it was
/// made, the first being byte 0.
#[derive(Clone, Debug)]
pub struct Decoder {
    frame: Vec<u8>,
    max_len: usize,
    state: RxState,
    /// Stream offset of the next byte.
    offset: usize,
}

impl Decoder {
    /// A decoder for datagrams of at most `max_len` bytes (after
    /// unescaping); longer frames are errors. A border router sizes it to
    /// its IP buffer, e.g. [`crate::ipv6::MIN_MTU`].
    pub fn new(max_len: usize) -> Decoder {
        Decoder {
            frame: Vec::new(),
            max_len,
            state: RxState::Data,
            offset: 0,
        }
    }

    /// The largest datagram accepted.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// How many bytes have been given to the decoder.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Datagram bytes received of a frame not yet closed by [`END`].
    pub fn pending_len(&self) -> usize {
        self.frame.len()
    }

    /// Takes one byte from the line. Returns a datagram when the byte
    /// closes a non-empty frame, an error when the byte breaks the frame
    /// (the error is reported once; the rest of the frame is dropped), and
    /// `None` otherwise.
    pub fn push(&mut self, byte: u8) -> Option<Result<Vec<u8>>> {
        let at = self.offset;
        self.offset = self.offset.saturating_add(1);
        match (self.state, byte) {
            (RxState::Discard, END) => {
                self.state = RxState::Data;
                None
            }
            (RxState::Discard, _) => None,
            (RxState::Data, END) if self.frame.is_empty() => None,
            (RxState::Data, END) => Some(Ok(std::mem::take(&mut self.frame))),
            (RxState::Data, ESC) => {
                self.state = RxState::Escape;
                None
            }
            (RxState::Data, data) => self.add(data, at),
            (RxState::Escape, ESC_END) => {
                self.state = RxState::Data;
                self.add(END, at)
            }
            (RxState::Escape, ESC_ESC) => {
                self.state = RxState::Data;
                self.add(ESC, at)
            }
            // An END still closes the frame, so the next one is read
            // whole.
            (RxState::Escape, END) => {
                self.state = RxState::Data;
                self.fail("slip.escape", at, WireErrorKind::BadValue)
            }
            (RxState::Escape, _) => {
                self.state = RxState::Discard;
                self.fail("slip.escape", at, WireErrorKind::BadValue)
            }
        }
    }

    /// Takes the bytes of `line` in order, yielding what [`Decoder::push`]
    /// returns for each of them that completes or breaks a frame.
    pub fn decode<'a>(&'a mut self, line: &'a [u8]) -> Decode<'a> {
        Decode {
            decoder: self,
            line: line.iter(),
        }
    }

    fn add(&mut self, byte: u8, at: usize) -> Option<Result<Vec<u8>>> {
        if self.frame.len() >= self.max_len {
            self.state = RxState::Discard;
            return self.fail("slip.frame", at, WireErrorKind::TooLong);
        }
        self.frame.push(byte);
        None
    }

    fn fail(
        &mut self,
        field: &'static str,
        at: usize,
        kind: WireErrorKind,
    ) -> Option<Result<Vec<u8>>> {
        self.frame.clear();
        Some(Err(WireError::new(field, at, kind)))
    }
}

/// The frames and errors of a piece of line, from [`Decoder::decode`].
#[derive(Debug)]
pub struct Decode<'a> {
    decoder: &'a mut Decoder,
    line: std::slice::Iter<'a, u8>,
}

impl Iterator for Decode<'_> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Self::Item> {
        for &byte in self.line.by_ref() {
            if let Some(out) = self.decoder.push(byte) {
                return Some(out);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    fn decode_all(decoder: &mut Decoder, line: &[u8]) -> Vec<Result<Vec<u8>>> {
        decoder.decode(line).collect()
    }

    #[test]
    fn end_and_esc_are_escaped_and_the_frame_is_closed_at_both_ends() {
        let mut out = vec![0x55];
        let n = encode(&[1, END, 2, ESC, ESC_END, ESC_ESC], &mut out);
        assert_eq!(
            out,
            [0x55, END, 1, ESC, ESC_END, 2, ESC, ESC_ESC, ESC_END, ESC_ESC, END]
        );
        assert_eq!(n, 10);
        assert_eq!(encoded_len(&[1, END, 2, ESC, ESC_END, ESC_ESC]), 10);
        let mut empty = Vec::new();
        assert_eq!(encode(&[], &mut empty), 2);
        assert_eq!(empty, [END, END]);
        assert_eq!(decode_all(&mut Decoder::new(10), &empty), []);
    }

    #[test]
    fn frames_decode_whatever_pieces_the_line_comes_in() {
        let mut line = Vec::new();
        encode(&[END, ESC, 7], &mut line);
        encode(&[8, 9], &mut line);
        for cut in 0..=line.len() {
            let mut d = Decoder::new(64);
            let mut got = decode_all(&mut d, &line[..cut]);
            got.extend(decode_all(&mut d, &line[cut..]));
            assert_eq!(got, [Ok(vec![END, ESC, 7]), Ok(vec![8, 9])], "cut at {cut}");
            assert_eq!(d.offset(), line.len());
            assert_eq!(d.pending_len(), 0);
        }
    }

    #[test]
    fn a_bad_escape_is_named_with_its_offset_and_the_next_frame_survives() {
        // Byte 3 follows ESC and is no escape: the frame is dropped up to
        // the END at byte 5.
        let line = [END, 1, ESC, 0x41, 2, END, 3, END];
        let got = decode_all(&mut Decoder::new(64), &line);
        let e = WireError::new("slip.escape", 3, WireErrorKind::BadValue);
        assert_eq!(got, [Err(e), Ok(vec![3])]);
        assert_eq!(e.to_string(), "slip.escape: bad value at byte 3");
        // ESC then END: the END still closes the broken frame.
        let line = [END, 1, ESC, END, 4, END];
        let got = decode_all(&mut Decoder::new(64), &line);
        let e = WireError::new("slip.escape", 3, WireErrorKind::BadValue);
        assert_eq!(got, [Err(e), Ok(vec![4])]);
    }

    #[test]
    fn an_over_long_frame_is_refused_at_the_byte_past_the_limit() {
        let mut line = Vec::new();
        encode(&[1, 2, 3, 4, 5, 6], &mut line);
        // An escaped byte counts once against the limit.
        encode(&[1, 2, 3, END], &mut line);
        let got = decode_all(&mut Decoder::new(4), &line);
        let e = WireError::new("slip.frame", 5, WireErrorKind::TooLong);
        assert_eq!(got, [Err(e), Ok(vec![1, 2, 3, END])]);
    }

    #[test]
    fn serial_time_at_115200_baud() {
        let baud = NonZeroU32::new(115_200).unwrap();
        // 10 bits of 1/115200 s: 86.80555... us, rounded up.
        assert_eq!(serial_time_ns(1, baud, BITS_PER_BYTE_8N1), 86_806);
        // 11 520 bytes are 115 200 bits: one second exactly.
        assert_eq!(
            serial_time_ns(11_520, baud, BITS_PER_BYTE_8N1),
            1_000_000_000
        );
        // A 1280-byte datagram with nothing to escape.
        let frame = encoded_len(&[0u8; 1280]);
        assert_eq!(frame, 1282);
        assert_eq!(serial_time_ns(frame, baud, BITS_PER_BYTE_8N1), 111_284_723);
        assert_eq!(serial_time_ns(0, baud, BITS_PER_BYTE_8N1), 0);
        let slow = NonZeroU32::new(1).unwrap();
        assert_eq!(serial_time_ns(usize::MAX, slow, u32::MAX), u64::MAX);
    }

    proptest! {
        #[test]
        fn datagrams_round_trip(datagrams in vec(vec(any::<u8>(), 1..300), 1..5)) {
            let mut line = Vec::new();
            for d in &datagrams {
                let n = encode(d, &mut line);
                prop_assert_eq!(n, encoded_len(d));
            }
            // No END inside a frame: only the frame boundaries carry it.
            let ends = line.iter().filter(|&&b| b == END).count();
            prop_assert_eq!(ends, 2 * datagrams.len());
            let got: Vec<_> = Decoder::new(300).decode(&line).collect();
            let want: Vec<_> = datagrams.into_iter().map(Ok).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn decoding_resynchronises_after_garbage(
            garbage in vec(any::<u8>(), 0..200),
            datagrams in vec(vec(any::<u8>(), 1..100), 1..4),
        ) {
            // Garbage may run past the limit too.
            let mut d = Decoder::new(100);
            let _ = decode_all(&mut d, &garbage);
            let mut line = Vec::new();
            for datagram in &datagrams {
                encode(datagram, &mut line);
            }
            let got = decode_all(&mut d, &line);
            // At most one result for the garbage the leading END closes,
            // then every datagram intact.
            prop_assert!(got.len() == datagrams.len() || got.len() == datagrams.len() + 1);
            let tail = &got[got.len() - datagrams.len()..];
            for (got, want) in tail.iter().zip(&datagrams) {
                prop_assert_eq!(got.as_ref().ok(), Some(want));
            }
        }

        #[test]
        fn decoder_never_panics_and_errors_point_into_the_line(
            line in vec(prop_oneof![Just(END), Just(ESC), Just(ESC_END), Just(ESC_ESC), any::<u8>()], 0..400),
            max_len in 0usize..40,
        ) {
            let mut d = Decoder::new(max_len);
            for out in d.decode(&line) {
                match out {
                    Ok(frame) => prop_assert!(!frame.is_empty() && frame.len() <= max_len),
                    Err(e) => prop_assert!(e.offset < line.len()),
                }
            }
            prop_assert_eq!(d.offset(), line.len());
        }
    }
}
