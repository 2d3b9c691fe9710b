//! The one error type of the crate.

use core::fmt;

/// What went wrong with a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WireErrorKind {
    /// The buffer ends before the field does.
    Truncated,
    /// A length field is impossible (too small, or inconsistent with another).
    BadLength,
    /// A field holds a value this crate does not accept.
    BadValue,
    /// The IP version is not 4.
    BadVersion,
    /// The checksum does not match the data.
    BadChecksum,
    /// Valid on the wire but not handled here (IPv4 fragments).
    Unsupported,
    /// The output buffer given to `emit` is too short.
    BufferTooSmall,
    /// What should be emitted does not fit in its field (TCP options beyond
    /// 40 bytes, a datagram beyond 65535 bytes).
    TooLong,
}

impl fmt::Display for WireErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireErrorKind::Truncated => "truncated",
            WireErrorKind::BadLength => "bad length",
            WireErrorKind::BadValue => "bad value",
            WireErrorKind::BadVersion => "bad version",
            WireErrorKind::BadChecksum => "bad checksum",
            WireErrorKind::Unsupported => "unsupported",
            WireErrorKind::BufferTooSmall => "buffer too small",
            WireErrorKind::TooLong => "too long",
        })
    }
}

/// A malformed packet, or a packet that cannot be emitted.
///
/// `field` names the offending field with its protocol prefix
/// (`ipv4.total_len`, `tcp.options.sack`); `offset` is the byte where the
/// problem was found, counted from the start of the buffer handed to the
/// parser (for [`crate::packet::parse`], from the start of the IPv4 datagram).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{field}: {kind} at byte {offset}")]
pub struct WireError {
    /// Dotted name of the field, e.g. `tcp.options.mss`.
    pub field: &'static str,
    /// Byte offset of the problem.
    pub offset: usize,
    /// What is wrong.
    pub kind: WireErrorKind,
}

impl WireError {
    /// Builds an error.
    pub const fn new(field: &'static str, offset: usize, kind: WireErrorKind) -> Self {
        WireError {
            field,
            offset,
            kind,
        }
    }

    /// The same error with `offset` moved `by` bytes later, for errors found
    /// in an inner buffer (a TCP segment) reported against the outer one (the
    /// IPv4 datagram).
    pub const fn shifted(self, by: usize) -> Self {
        WireError {
            offset: self.offset.saturating_add(by),
            ..self
        }
    }
}
