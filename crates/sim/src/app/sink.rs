//! UDP sink: counts what arrives and measures loss, one-way delay,
//! duplicates and reordering from the sequence numbers and send times that
//! [`super::CbrApp`] puts in its payloads.

use rtolab_wire::ipv4::protocol;
use rtolab_wire::packet::{self, Transport};
use serde::Serialize;

use super::{App, AppCx, AppStats, Binding, PAYLOAD_HEADER_LEN};
use crate::trace::AppEvent;

/// How far (in 64-datagram words) a sequence number may jump ahead of the
/// highest seen: a million datagrams.
const MAX_SEQ_JUMP_WORDS: usize = 1 << 14;

/// Parameters of a [`SinkApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkConfig {
    /// UDP port to listen on.
    pub port: u16,
}

/// Counters of a [`SinkApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SinkStats {
    /// Datagrams received, duplicates included.
    pub received_packets: u64,
    /// Payload bytes received, duplicates included.
    pub received_bytes: u64,
    /// Distinct sequence numbers received.
    pub unique_packets: u64,
    /// Datagrams whose sequence number had already arrived.
    pub duplicates: u64,
    /// Datagrams that arrived after a higher sequence number.
    pub reordered: u64,
    /// Sequence numbers below the highest one received that never arrived
    /// (datagrams lost after the last arrival cannot be seen here; compare
    /// with the source's `sent_packets` for those).
    pub lost: u64,
    /// Highest sequence number received.
    pub max_seq: Option<u64>,
    /// Datagrams too short to carry a sequence number, or with a bad
    /// checksum.
    pub malformed: u64,
    /// Smallest one-way delay, ns.
    pub delay_min_ns: Option<u64>,
    /// Mean one-way delay, ns.
    pub delay_mean_ns: Option<f64>,
    /// Largest one-way delay, ns.
    pub delay_max_ns: Option<u64>,
}

/// Receives datagrams on a UDP port.
pub struct SinkApp {
    config: SinkConfig,
    /// One bit per sequence number seen, for duplicate detection.
    seen: Vec<u64>,
    delay_sum_ns: u128,
    stats: SinkStats,
}

impl SinkApp {
    /// A sink listening on `config.port`.
    pub fn new(config: SinkConfig) -> Self {
        SinkApp {
            config,
            seen: Vec::new(),
            delay_sum_ns: 0,
            stats: SinkStats::default(),
        }
    }

    /// Marks `seq` seen; returns whether it was already.
    fn mark(&mut self, seq: u64) -> bool {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        let was = self.seen[word] & (1 << bit) != 0;
        self.seen[word] |= 1 << bit;
        was
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::Sink(self.stats)
    }
}

impl<C: AppCx> App<C> for SinkApp {
    fn on_start(&mut self, cx: &mut C) {
        let binding = Binding {
            protocol: protocol::UDP,
            port: Some(self.config.port),
        };
        // A clash was rejected when the scenario was validated; a custom
        // setup that binds twice sees the sink receive nothing.
        let _ = cx.bind(binding);
        cx.trace(AppEvent::Started);
    }

    fn on_packet(&mut self, cx: &mut C, datagram: &[u8]) {
        let payload = match packet::parse(datagram) {
            Ok(packet::ParsedPacket {
                transport: Transport::Udp(udp),
                ..
            }) if udp.payload.len() >= PAYLOAD_HEADER_LEN => udp.payload,
            _ => {
                self.stats.malformed += 1;
                return;
            }
        };
        let mut word = [0u8; 8];
        word.copy_from_slice(&payload[..8]);
        let seq = u64::from_be_bytes(word);
        word.copy_from_slice(&payload[8..16]);
        let sent_ns = u64::from_be_bytes(word);
        let delay_ns = cx.now().as_nanos().saturating_sub(sent_ns);

        // A sequence number far beyond anything seen is garbage, not a
        // reason to grow the duplicate bitmap without bound.
        if seq / 64 > (self.seen.len() + MAX_SEQ_JUMP_WORDS) as u64 {
            self.stats.malformed += 1;
            return;
        }
        let duplicate = self.mark(seq);
        let s = &mut self.stats;
        s.received_packets += 1;
        s.received_bytes += payload.len() as u64;
        if duplicate {
            s.duplicates += 1;
        } else {
            s.unique_packets += 1;
            if s.max_seq.is_some_and(|max| seq < max) {
                s.reordered += 1;
            }
            s.max_seq = Some(s.max_seq.map_or(seq, |max| max.max(seq)));
            s.lost = s.max_seq.map_or(0, |max| max + 1 - s.unique_packets);
            self.delay_sum_ns += u128::from(delay_ns);
            s.delay_min_ns = Some(s.delay_min_ns.map_or(delay_ns, |d| d.min(delay_ns)));
            s.delay_max_ns = Some(s.delay_max_ns.map_or(delay_ns, |d| d.max(delay_ns)));
            s.delay_mean_ns = Some(self.delay_sum_ns as f64 / s.unique_packets as f64);
        }
        cx.trace(AppEvent::DatagramReceived {
            seq,
            len: payload.len() as u32,
            delay_ns,
            duplicate,
        });
    }

    fn on_timer(&mut self, _cx: &mut C, _token: u64) {}

    fn stats(&self) -> AppStats {
        SinkApp::stats(self)
    }
}

// ----- scenario side: `kind = "sink"` -----

use super::registry::{AppCheck, ScenarioApp};
use crate::config::{required, ScenarioError};

/// The `[[app]]` fields of a UDP sink.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSink {
    /// The UDP port it receives on. Required.
    port: Option<u16>,
}

/// `kind = "sink"`: a UDP sink ([`SinkApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SinkSpec {
    /// Port it listens on.
    pub port: u16,
}

impl ScenarioApp for SinkSpec {
    const KIND: &'static str = "sink";
    const TCP: bool = false;
    type Raw = RawSink;
    type App = SinkApp;
    type Stats = SinkStats;

    fn validate(raw: RawSink, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        let port = required(&raw.port, cx.at("port"), &cx.what)?;
        Ok(SinkSpec {
            port: cx.bind_udp(port)?,
        })
    }

    fn build(&self) -> SinkApp {
        SinkApp::new(SinkConfig { port: self.port })
    }
}
