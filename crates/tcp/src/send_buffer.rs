//! The send buffer: the bytes an application handed over, from the oldest
//! unacknowledged one to the newest unsent one.
//!
//! Applications either copy bytes in ([`SendBuffer::push_copy`]), which
//! land in one ring, or hand over shared, immutable chunks
//! ([`SendBuffer::push_shared`]), which the buffer references without
//! copying, as `sendfile` or `MSG_ZEROCOPY` let a real socket do. Each
//! segment's payload is then read from wherever its bytes are. Both kinds
//! keep their order, and either may follow the other.

use std::collections::VecDeque;

use bytes::{Buf, Bytes};

/// A stretch of the buffer, in order. Offsets are absolute: counted from
/// the first byte ever queued, so they stay valid as the front is consumed
/// and a run is found by binary search.
#[derive(Debug)]
struct Run {
    /// Offset of its first byte.
    start: u64,
    held: Held,
}

/// Where a run's bytes are.
#[derive(Debug)]
enum Held {
    /// `len` copied bytes, the first at absolute ring offset `ring_start`.
    Copied { ring_start: u64, len: usize },
    /// A shared chunk; its front shrinks as bytes are acknowledged.
    Shared(Bytes),
}

impl Run {
    fn len(&self) -> usize {
        match &self.held {
            Held::Copied { len, .. } => *len,
            Held::Shared(b) => b.len(),
        }
    }

    fn end(&self) -> u64 {
        self.start + self.len() as u64
    }
}

#[derive(Debug, Default)]
pub(crate) struct SendBuffer {
    /// The copied bytes of every copied run, in order.
    ring: VecDeque<u8>,
    /// Absolute ring offset of `ring[0]`.
    ring_front: u64,
    runs: VecDeque<Run>,
    /// Absolute offset of the buffer's first byte.
    front: u64,
    len: usize,
}

impl SendBuffer {
    /// Bytes held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn back(&self) -> u64 {
        self.front + self.len as u64
    }

    /// Appends a copy of `data`.
    pub(crate) fn push_copy(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let ring_end = self.ring_front + self.ring.len() as u64;
        self.ring.extend(data);
        match self.runs.back_mut() {
            Some(Run {
                held: Held::Copied { len, .. },
                ..
            }) => *len += data.len(),
            _ => self.runs.push_back(Run {
                start: self.back(),
                held: Held::Copied {
                    ring_start: ring_end,
                    len: data.len(),
                },
            }),
        }
        self.len += data.len();
    }

    /// Appends a shared chunk without copying its bytes.
    pub(crate) fn push_shared(&mut self, data: Bytes) {
        if data.is_empty() {
            return;
        }
        self.runs.push_back(Run {
            start: self.back(),
            held: Held::Shared(data),
        });
        self.len += self.runs.back().map_or(0, Run::len);
    }

    /// Drops the oldest `n` bytes (at most all of them).
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.len -= n;
        self.front += n as u64;
        while let Some(run) = self.runs.front_mut() {
            if run.start >= self.front {
                break;
            }
            let take = (self.front - run.start).min(run.len() as u64) as usize;
            match &mut run.held {
                Held::Copied { ring_start, len } => {
                    if take == self.ring.len() {
                        // Start the ring over, so new bytes land in memory
                        // that was just used.
                        self.ring.clear();
                    } else {
                        self.ring.drain(..take);
                    }
                    self.ring_front += take as u64;
                    *ring_start += take as u64;
                    *len -= take;
                }
                Held::Shared(chunk) => chunk.advance(take),
            }
            run.start += take as u64;
            if run.len() == 0 {
                self.runs.pop_front();
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        self.consume(self.len);
    }

    /// Bytes `start..end` of the buffer. They are returned in place when
    /// they lie in one shared chunk or one contiguous stretch of the ring;
    /// otherwise they are gathered into `scratch`.
    ///
    /// # Panics
    ///
    /// If `start > end` or `end > len()`.
    pub(crate) fn range<'a>(
        &'a self,
        start: usize,
        end: usize,
        scratch: &'a mut Vec<u8>,
    ) -> &'a [u8] {
        assert!(
            start <= end && end <= self.len,
            "range {start}..{end} of {}",
            self.len
        );
        let want = end - start;
        let mut pieces = Pieces::at(self, self.front + start as u64);
        let first = pieces.take(want);
        if first.len() == want {
            return first;
        }
        scratch.clear();
        scratch.extend_from_slice(first);
        while scratch.len() < want {
            let piece = pieces.take(want - scratch.len());
            scratch.extend_from_slice(piece);
        }
        scratch
    }
}

/// A cursor over the buffer's bytes as contiguous pieces.
struct Pieces<'a> {
    buffer: &'a SendBuffer,
    /// Absolute offset of the next byte.
    offset: u64,
    /// Index of the run holding it.
    run: usize,
}

impl<'a> Pieces<'a> {
    fn at(buffer: &'a SendBuffer, offset: u64) -> Pieces<'a> {
        let run = buffer.runs.partition_point(|r| r.end() <= offset);
        Pieces {
            buffer,
            offset,
            run,
        }
    }

    /// The longest contiguous piece from the cursor, at most `max` bytes
    /// (empty at the end of the buffer); moves past it.
    fn take(&mut self, max: usize) -> &'a [u8] {
        let Some(run) = self.buffer.runs.get(self.run) else {
            return &[];
        };
        let within = (self.offset - run.start) as usize;
        let want = max.min(run.len() - within);
        let piece: &'a [u8] = match &run.held {
            Held::Shared(chunk) => &chunk[within..within + want],
            Held::Copied { ring_start, .. } => {
                let (front, back) = self.buffer.ring.as_slices();
                let at = (ring_start - self.buffer.ring_front) as usize + within;
                if at < front.len() {
                    &front[at..at + want.min(front.len() - at)]
                } else {
                    let at = at - front.len();
                    &back[at..at + want]
                }
            }
        };
        self.offset += piece.len() as u64;
        if self.offset == run.end() {
            self.run += 1;
        }
        piece
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Copy(Vec<u8>),
        Share(Vec<u8>, usize),
        Consume(usize),
        Read(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let bytes = proptest::collection::vec(any::<u8>(), 0..300);
        prop_oneof![
            bytes.clone().prop_map(Op::Copy),
            (bytes, 0usize..50).prop_map(|(b, skip)| Op::Share(b, skip)),
            (0usize..400).prop_map(Op::Consume),
            (0usize..2000, 0usize..2000).prop_map(|(a, b)| Op::Read(a, b)),
        ]
    }

    proptest! {
        /// Any mix of copies, shared chunks (themselves slices of larger
        /// chunks), acknowledgements and reads behaves as one byte vector.
        #[test]
        fn behaves_as_a_byte_vector(ops in proptest::collection::vec(op(), 1..60)) {
            let mut buffer = SendBuffer::default();
            let mut model: VecDeque<u8> = VecDeque::new();
            let mut scratch = Vec::new();
            for op in ops {
                match op {
                    Op::Copy(data) => {
                        buffer.push_copy(&data);
                        model.extend(&data);
                    }
                    Op::Share(data, skip) => {
                        let skip = skip.min(data.len());
                        let chunk = Bytes::from(data).slice(skip..);
                        model.extend(&chunk[..]);
                        buffer.push_shared(chunk);
                    }
                    Op::Consume(n) => {
                        buffer.consume(n);
                        model.drain(..n.min(model.len()));
                    }
                    Op::Read(a, b) => {
                        let (start, end) = (a.min(b).min(model.len()), a.max(b).min(model.len()));
                        let expected: Vec<u8> = model.range(start..end).copied().collect();
                        prop_assert_eq!(buffer.range(start, end, &mut scratch), &expected[..]);
                    }
                }
                prop_assert_eq!(buffer.len(), model.len());
                prop_assert_eq!(buffer.is_empty(), model.is_empty());
            }
            let all: Vec<u8> = model.iter().copied().collect();
            prop_assert_eq!(buffer.range(0, model.len(), &mut scratch), &all[..]);
        }
    }

    #[test]
    fn a_read_within_one_shared_chunk_is_not_copied() {
        let chunk = Bytes::from_static(&[7; 4096]);
        let mut buffer = SendBuffer::default();
        buffer.push_copy(&[1, 2, 3]);
        buffer.push_shared(chunk.clone());
        let mut scratch = Vec::new();
        let piece = buffer.range(3 + 100, 3 + 1548, &mut scratch);
        assert_eq!(piece.as_ptr(), chunk[100..].as_ptr());
        assert!(scratch.is_empty());
        // Across the boundary the bytes are gathered.
        assert_eq!(buffer.range(1, 5, &mut scratch), &[2, 3, 7, 7]);
    }
}
