//! The scenario's apps, on either kind of host, reported the same way
//! ([`AppResult`]):
//!
//! * [`rtolab`]: the simulator's own apps ([`rtolab_sim::app`]) on an
//!   rtolab host, through its implementation of the apps' context over the
//!   host's engine stack, on the emulator's clock, inside the engine loop;
//! * [`linux`]: real socket programs for the TCP apps, on a thread that
//!   entered the host's network namespace, so the namespace's kernel TCP
//!   carries them. They speak the simulator apps' byte streams.
//!
//! Either end of a connection can be either kind: an rtolab `exchange`
//! client talks to a Linux `exchange-server` and the other way round.

mod engine_host;
pub mod linux;
pub mod rtolab;

use rtolab_sim::app::AppStats;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Bytes handed to or taken from TCP per call by the Linux apps.
pub(crate) const CHUNK: usize = 16 * 1024;

/// What an app did, whichever stack ran it. Fields that do not apply to
/// the app's kind stay at zero or `null`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AppResult {
    /// Whether the app did everything it was configured to do (clients),
    /// or served every connection it accepted to its end (servers).
    pub completed: bool,
    /// Connections opened or accepted.
    pub connections: u64,
    /// Bytes handed to TCP (UDP payload bytes sent, for `cbr`).
    pub bytes_sent: u64,
    /// Bytes received (UDP payload bytes, for `sink`).
    pub bytes_received: u64,
    /// Received bytes that differ from the stream the peer should send.
    pub bytes_corrupt: u64,
    /// Request/response exchanges completed (exchange clients), requests
    /// answered (exchange servers) or responses received (message series
    /// with responses).
    pub exchanges_completed: u64,
    /// Exchanges whose connection ended first.
    pub exchanges_failed: u64,
    /// Messages released (message series) or datagrams sent (`cbr`).
    pub messages_sent: u64,
    /// Shortest latency (exchange: connect to last response byte; message
    /// series: release to acknowledgment, where the stack can tell), ms.
    pub latency_min_ms: Option<f64>,
    /// Mean latency, ms.
    pub latency_mean_ms: Option<f64>,
    /// Longest latency, ms.
    pub latency_max_ms: Option<f64>,
    /// Bulk senders: from connecting until every byte was acknowledged
    /// (rtolab) or the receiver closed in turn (Linux); message series on
    /// rtolab hosts: until the last message was acknowledged; ms.
    pub completion_time_ms: Option<f64>,
    /// SHA-256 of everything sent on the (first) connection, hex.
    pub sha256_sent: Option<String>,
    /// SHA-256 of what each accepted connection delivered, hex, in the
    /// order the connections finished.
    pub sha256_received: Vec<String>,
    /// Why the app stopped early.
    pub failure: Option<String>,
}

/// An app of an rtolab host in an [`EngineReport`](crate::engine::EngineReport).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineAppReport {
    /// App name.
    pub name: String,
    /// Host name.
    pub host: String,
    /// What it did.
    pub result: AppResult,
    /// The simulator app's own counters, as the simulator reports them.
    pub stats: AppStats,
}

impl AppResult {
    /// Fills the latency fields from samples in nanoseconds.
    pub(crate) fn set_latencies(&mut self, samples_ns: &[u64]) {
        if samples_ns.is_empty() {
            return;
        }
        let ms = |ns: u64| ns as f64 / 1e6;
        self.latency_min_ms = samples_ns.iter().copied().min().map(ms);
        self.latency_max_ms = samples_ns.iter().copied().max().map(ms);
        let sum: u128 = samples_ns.iter().map(|&n| u128::from(n)).sum();
        self.latency_mean_ms = Some(sum as f64 / samples_ns.len() as f64 / 1e6);
    }
}

/// Hex form of a finished SHA-256.
pub(crate) fn hex_digest(hasher: Sha256) -> String {
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The request an exchange client sends: the 8-byte header (request and
/// response lengths, big-endian) over the first bytes of the pattern
/// stream, so servers of either kind parse it.
pub(crate) fn fill_request(offset: u64, request: u32, response: u32, buf: &mut [u8]) {
    rtolab_sim::app::pattern::fill(offset, buf);
    let mut header = [0u8; rtolab_sim::app::REQUEST_HEADER_LEN];
    header[..4].copy_from_slice(&request.to_be_bytes());
    header[4..].copy_from_slice(&response.to_be_bytes());
    for (i, b) in buf.iter_mut().enumerate() {
        let at = offset as usize + i;
        if at >= header.len() {
            break;
        }
        *b = header[at];
    }
}

/// Parses the request header: `(request, response)` lengths.
pub(crate) fn parse_header(h: &[u8; rtolab_sim::app::REQUEST_HEADER_LEN]) -> (u64, u64) {
    (
        u64::from(u32::from_be_bytes([h[0], h[1], h[2], h[3]])),
        u64::from(u32::from_be_bytes([h[4], h[5], h[6], h[7]])),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_header_round_trips_across_chunk_boundaries() {
        let mut whole = vec![0u8; 100];
        fill_request(0, 100, 5000, &mut whole);
        let mut split = vec![0u8; 100];
        fill_request(0, 100, 5000, &mut split[..3]);
        fill_request(3, 100, 5000, &mut split[3..]);
        assert_eq!(whole, split);
        let header: [u8; 8] = whole[..8].try_into().unwrap();
        assert_eq!(parse_header(&header), (100, 5000));
        assert_eq!(rtolab_sim::app::pattern::mismatches(8, &whole[8..]), 0);
    }

    #[test]
    fn latency_summary() {
        let mut r = AppResult::default();
        r.set_latencies(&[1_000_000, 3_000_000]);
        assert_eq!(
            (r.latency_min_ms, r.latency_mean_ms, r.latency_max_ms),
            (Some(1.0), Some(2.0), Some(3.0))
        );
    }
}
