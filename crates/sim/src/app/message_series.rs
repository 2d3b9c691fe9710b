//! A series of messages over one TCP connection: message `i` is released
//! at a fixed time (the start plus the gaps before it) and handed to TCP as
//! the send buffer allows. Each message's latency runs from its release to
//! the acknowledgment of its last byte, as the sender sees it. The receiver
//! is a [`super::TcpSinkApp`], which checks the content.
//!
//! With `responses`, each message is instead a request to an
//! [`super::ExchangeServerApp`]: it starts with the exchange header (its
//! own length and the response length asked for), and the server answers
//! each in turn over the same connection. The connection closes once every
//! message is acknowledged and every response has arrived.

use std::net::SocketAddr;

use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use super::exchange::REQUEST_HEADER_LEN;
use super::tcp_bulk::CHUNK;
use super::{pattern, transfer_failed, App, AppCx, AppStats, Latency};
use crate::tcp_layer::{FlowId, TcpEvent};
use crate::trace::AppEvent;

/// Parameters of a [`MessageSeriesApp`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageSeriesConfig {
    /// Where to connect.
    pub peer: SocketAddr,
    /// Message sizes in bytes, in sending order.
    pub sizes: Vec<u32>,
    /// Pause after message `i` before the next one is released:
    /// `gaps[i % gaps.len()]`; none means all at once.
    pub gaps: Vec<SimDuration>,
    /// When to connect and release the first message.
    pub start: SimTime,
    /// Response sizes, one per message, when the peer is an exchange
    /// server; empty for a plain sink.
    pub responses: Vec<u32>,
    /// Local port of the connection (ephemeral if `None`).
    pub source_port: Option<u16>,
    /// Write only once the handshake completed (see
    /// [`super::ExchangeConfig::connect_first`]).
    pub connect_first: bool,
    /// Release each message the moment the previous one is acknowledged
    /// and, with responses, answered (instead of after `gaps`): messages
    /// back to back, each in its own segments, as an application that
    /// waits for its write to complete sends them.
    pub after_ack: bool,
}

/// Counters of a [`MessageSeriesApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MessageSeriesStats {
    /// Messages in the series.
    pub messages: u64,
    /// Messages released to the connection.
    pub messages_sent: u64,
    /// Messages whose last byte was acknowledged.
    pub messages_acked: u64,
    /// Bytes handed to TCP.
    pub bytes_sent: u64,
    /// Bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// Fastest message, release to acknowledgment, ns.
    pub latency_min_ns: Option<u64>,
    /// Mean message latency, ns.
    pub latency_mean_ns: Option<f64>,
    /// Slowest message, ns.
    pub latency_max_ns: Option<u64>,
    /// From connecting to the last message being acknowledged, ns.
    pub completion_time_ns: Option<u64>,
    /// Why the connection ended early.
    pub failure: Option<&'static str>,
    /// Responses received whole.
    pub responses_received: u64,
    /// Response bytes received.
    pub response_bytes: u64,
    /// Response bytes that differ from the stream sent (should be 0).
    pub bytes_corrupt: u64,
}

/// Sends a series of messages over one connection.
pub struct MessageSeriesApp {
    config: MessageSeriesConfig,
    /// Stream offset just past each message.
    ends: Vec<u64>,
    /// When each message was released.
    released_at: Vec<SimTime>,
    flow: Option<FlowId>,
    opened: SimTime,
    /// Stream offset up to which messages are released.
    released_to: u64,
    closing: bool,
    /// The handshake completed.
    connected: bool,
    /// Response being received and bytes of it received so far.
    response_at: (usize, u64),
    chunk: Vec<u8>,
    latency: Latency,
    stats: MessageSeriesStats,
}

impl MessageSeriesApp {
    /// A sender with `config`.
    pub fn new(config: MessageSeriesConfig) -> Self {
        let ends = config
            .sizes
            .iter()
            .scan(0u64, |end, &size| {
                *end += u64::from(size);
                Some(*end)
            })
            .collect();
        let n = config.sizes.len();
        MessageSeriesApp {
            ends,
            released_at: Vec::with_capacity(n),
            flow: None,
            opened: SimTime::ZERO,
            released_to: 0,
            closing: false,
            connected: false,
            response_at: (0, 0),
            chunk: vec![0; CHUNK],
            latency: Latency::default(),
            stats: MessageSeriesStats {
                messages: n as u64,
                ..MessageSeriesStats::default()
            },
            config,
        }
    }

    fn gap_after(&self, index: usize) -> SimDuration {
        match self.config.gaps.len() {
            0 => SimDuration::ZERO,
            n => self.config.gaps[index % n],
        }
    }

    fn release<C: AppCx>(&mut self, cx: &mut C) {
        let index = self.released_at.len();
        let Some(&end) = self.ends.get(index) else {
            return;
        };
        self.released_at.push(cx.now());
        self.released_to = end;
        self.stats.messages_sent += 1;
        if index + 1 < self.ends.len() && !self.config.after_ack {
            let at = cx.now() + self.gap_after(index);
            cx.set_timer(at, 0);
        }
    }

    /// Queues released bytes as the send buffer allows; closes after the
    /// last message.
    fn push<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        if self.config.connect_first && !self.connected {
            return;
        }
        while self.stats.bytes_sent < self.released_to {
            let Ok(room) = cx.tcp_connection(flow).map(|c| c.send_capacity()) else {
                return;
            };
            let left = self.released_to - self.stats.bytes_sent;
            let n = (left.min(CHUNK as u64) as usize).min(room);
            if n == 0 {
                return;
            }
            self.fill(self.stats.bytes_sent, n);
            match cx.tcp_send(flow, &self.chunk[..n]) {
                Ok(k) => {
                    self.stats.bytes_sent += k as u64;
                    if k < n {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        self.maybe_close(cx, flow);
    }

    /// Closes once everything is released and queued and, with responses,
    /// every response has arrived.
    fn maybe_close<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        self.skip_empty_responses();
        let all_released = self.released_at.len() == self.ends.len();
        let answered = self.stats.responses_received as usize >= self.config.responses.len();
        if all_released && self.stats.bytes_sent >= self.released_to && answered && !self.closing {
            self.closing = true;
            let _ = cx.tcp_close(flow);
        }
    }

    /// Writes the stream bytes from `offset` into the first `n` bytes of
    /// the chunk buffer: the plain stream, or with responses each message
    /// as a request (header, then the stream from the message's offset 8).
    fn fill(&mut self, offset: u64, n: usize) {
        if self.config.responses.is_empty() {
            pattern::fill(offset, &mut self.chunk[..n]);
            return;
        }
        let mut message = self.ends.partition_point(|&end| end <= offset);
        for (i, byte) in self.chunk[..n].iter_mut().enumerate() {
            let at = offset + i as u64;
            while self.ends.get(message).is_some_and(|&end| end <= at) {
                message += 1;
            }
            let start = message.checked_sub(1).map_or(0, |k| self.ends[k]);
            let within = at - start;
            *byte = if within < REQUEST_HEADER_LEN as u64 {
                let mut header = [0u8; REQUEST_HEADER_LEN];
                let size = self.config.sizes.get(message).copied().unwrap_or(0);
                let response = self.config.responses.get(message).copied().unwrap_or(0);
                header[..4].copy_from_slice(&size.to_be_bytes());
                header[4..].copy_from_slice(&response.to_be_bytes());
                header[within as usize]
            } else {
                pattern::byte_at(within)
            };
        }
    }

    /// Counts the empty responses due next as received: a request that
    /// asks for no answer gets none.
    fn skip_empty_responses(&mut self) {
        let (mut index, got) = self.response_at;
        while got == 0 && self.config.responses.get(index) == Some(&0) {
            self.stats.responses_received += 1;
            index += 1;
        }
        self.response_at = (index, got);
    }

    /// Reads and checks responses.
    fn read_responses<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        self.skip_empty_responses();
        loop {
            let n = match cx.tcp_recv(flow, &mut self.chunk) {
                Ok(n) if n > 0 => n,
                _ => break,
            };
            self.stats.response_bytes += n as u64;
            let mut data = &self.chunk[..n];
            while !data.is_empty() {
                let (index, got) = self.response_at;
                let Some(&size) = self.config.responses.get(index) else {
                    // More than was asked for.
                    self.stats.bytes_corrupt += data.len() as u64;
                    break;
                };
                let take = ((u64::from(size) - got) as usize).min(data.len());
                let bad = pattern::mismatches(got, &data[..take]);
                if bad > 0 {
                    self.stats.bytes_corrupt += bad;
                    cx.trace(AppEvent::DataCorrupt {
                        flow: flow.0,
                        offset: got,
                        bytes: bad,
                    });
                }
                data = &data[take..];
                self.response_at = (index, got + take as u64);
                if got + take as u64 >= u64::from(size) {
                    self.stats.responses_received += 1;
                    self.response_at = (index + 1, 0);
                }
            }
        }
        self.maybe_close(cx, flow);
    }

    fn update_acked<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        if let Ok(c) = cx.tcp_connection(flow) {
            self.stats.bytes_acked = c.stats().bytes_acked;
        }
        let now = cx.now();
        while let Some(&end) = self.ends.get(self.stats.messages_acked as usize) {
            let index = self.stats.messages_acked as usize;
            if self.stats.bytes_acked < end || index >= self.released_at.len() {
                break;
            }
            let latency = now.saturating_since(self.released_at[index]).as_nanos();
            self.latency.add(latency);
            self.stats.messages_acked += 1;
            cx.trace(AppEvent::MessageAcked {
                flow: flow.0,
                index: index as u32,
                len: self.config.sizes[index],
                latency_ns: latency,
            });
            if self.stats.messages_acked == self.stats.messages {
                self.stats.completion_time_ns = Some(now.saturating_since(self.opened).as_nanos());
            }
        }
    }

    /// With `after_ack`, releases the next message once every released
    /// one is acknowledged and answered.
    fn release_next<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        self.skip_empty_responses();
        let released = self.released_at.len();
        if !self.config.after_ack || released == 0 || released >= self.ends.len() {
            return;
        }
        let answered =
            self.config.responses.is_empty() || self.stats.responses_received as usize >= released;
        if self.stats.messages_acked as usize >= released && answered {
            self.release(cx);
            self.push(cx, flow);
        }
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::MessageSeries(MessageSeriesStats {
            latency_min_ns: self.latency.min_ns(),
            latency_mean_ns: self.latency.mean_ns(),
            latency_max_ns: self.latency.max_ns(),
            ..self.stats
        })
    }
}

impl<C: AppCx> App<C> for MessageSeriesApp {
    fn on_start(&mut self, cx: &mut C) {
        cx.trace(AppEvent::Started);
        if !self.ends.is_empty() {
            cx.set_timer(self.config.start, 0);
        }
    }

    fn on_packet(&mut self, _cx: &mut C, _datagram: &[u8]) {}

    fn on_timer(&mut self, cx: &mut C, _token: u64) {
        if self.flow.is_none() && self.released_at.is_empty() {
            match cx.tcp_connect_from(self.config.peer, self.config.source_port) {
                Ok(flow) => {
                    self.flow = Some(flow);
                    self.opened = cx.now();
                }
                Err(_) => {
                    self.stats.failure = Some("connect_failed");
                    return;
                }
            }
        }
        self.release(cx);
        if let Some(flow) = self.flow {
            self.push(cx, flow);
        }
    }

    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        if Some(flow) != self.flow {
            return;
        }
        match event {
            TcpEvent::Connected | TcpEvent::Writable => {
                self.connected = true;
                self.push(cx, flow);
                self.update_acked(cx, flow);
                self.release_next(cx, flow);
            }
            TcpEvent::Readable => {
                if self.config.responses.is_empty() {
                    let mut scratch = [0u8; 256];
                    while cx.tcp_recv(flow, &mut scratch).is_ok_and(|n| n > 0) {}
                } else {
                    self.read_responses(cx, flow);
                    self.update_acked(cx, flow);
                    self.release_next(cx, flow);
                }
            }
            TcpEvent::PeerClosed => {}
            TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut => {
                self.update_acked(cx, flow);
                if self.stats.messages_acked < self.stats.messages {
                    self.stats.failure = Some(transfer_failed(cx, flow, event));
                }
                self.flow = None;
            }
        }
    }

    fn stats(&self) -> AppStats {
        MessageSeriesApp::stats(self)
    }
}

// ----- scenario side: `kind = "message-series"` -----

use super::exchange::ExchangeServerSpec;
use super::registry::{AppCheck, ScenarioApp};
use super::tcp_bulk::TcpSinkSpec;
use crate::config::{required, Duration, ScenarioError};

/// The `[[app]]` fields of a message series.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMessageSeries {
    /// Address and port of the `tcp-sink` (or, with `responses`, the `exchange-server`) it
    /// connects to. Required.
    peer: Option<SocketAddr>,
    /// Message sizes, sent in order over one connection. Unit: bytes. Required.
    sizes: Option<Vec<u32>>,
    /// Pause after each message before the next is released, used in turn; not with
    /// `after_ack`. Default: none (all at once).
    gaps: Option<Vec<Duration>>,
    /// When it connects and releases the first message. Default: `"0s"`.
    start: Option<Duration>,
    /// Response sizes asked of an exchange server, one per message (each message then starts
    /// with the 8-byte request header). Unit: bytes. Default: none (a `tcp-sink` peer).
    responses: Option<Vec<u32>>,
    /// Local port of its connection. Default: an ephemeral port.
    source_port: Option<u16>,
    /// Write only once the handshake completed. Default: false.
    connect_first: Option<bool>,
    /// Release each message the moment the previous one is acknowledged (and answered), instead
    /// of after `gaps`. Default: false.
    after_ack: Option<bool>,
}

/// `kind = "message-series"`: a TCP sender of a message series
/// ([`MessageSeriesApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MessageSeriesSpec {
    /// The receiver's address and port.
    pub peer: SocketAddr,
    /// Message sizes in bytes.
    pub sizes: Vec<u32>,
    /// Pauses between messages, used in turn.
    pub gaps: Vec<SimDuration>,
    /// When to connect and send the first message.
    pub start: SimDuration,
    /// Response sizes asked of an exchange server, one per message; empty
    /// for a tcp-sink peer.
    pub responses: Vec<u32>,
    /// Local port of the connection.
    pub source_port: Option<u16>,
    /// Write only after the handshake.
    pub connect_first: bool,
    /// Release each message when the previous one is acknowledged (and
    /// answered).
    pub after_ack: bool,
}

impl ScenarioApp for MessageSeriesSpec {
    const KIND: &'static str = "message-series";
    const TCP: bool = true;
    type Raw = RawMessageSeries;
    type App = MessageSeriesApp;
    type Stats = MessageSeriesStats;

    fn validate(raw: RawMessageSeries, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        let (start, _) = cx.start_stop(raw.start.map(|d| d.0), None)?;
        let peer = required(&raw.peer, cx.at("peer"), &cx.what)?;
        let peer = cx.remote("peer", peer)?;
        let sizes = required(&raw.sizes, cx.at("sizes"), &cx.what)?;
        if sizes.is_empty() {
            return Err(ScenarioError::new(cx.at("sizes"), "must not be empty"));
        }
        if let Some(k) = sizes.iter().position(|&s| s == 0) {
            return Err(ScenarioError::new(
                format!("app[{}].sizes[{k}]", cx.index),
                "must be positive",
            ));
        }
        let responses = raw.responses.clone().unwrap_or_default();
        if raw.responses.is_some() {
            if responses.len() != sizes.len() {
                return Err(ScenarioError::new(
                    cx.at("responses"),
                    format!(
                        "needs one size per message ({}), got {}",
                        sizes.len(),
                        responses.len()
                    ),
                ));
            }
            let header = REQUEST_HEADER_LEN as u32;
            if let Some(k) = sizes.iter().position(|&s| s < header) {
                return Err(ScenarioError::new(
                    format!("app[{}].sizes[{k}]", cx.index),
                    format!("must be at least {header} bytes (the request header) with responses"),
                ));
            }
        }
        if raw.after_ack == Some(true) && raw.gaps.is_some() {
            return Err(ScenarioError::new(
                cx.at("gaps"),
                "has no use with after_ack = true, which releases each message when the \
                 previous one is acknowledged",
            ));
        }
        Ok(MessageSeriesSpec {
            peer,
            sizes,
            gaps: raw
                .gaps
                .as_ref()
                .map_or_else(Vec::new, |g| g.iter().map(|d| d.0).collect()),
            start,
            responses,
            source_port: raw
                .source_port
                .map(|p| cx.port("source_port", p))
                .transpose()?,
            connect_first: raw.connect_first.unwrap_or(false),
            after_ack: raw.after_ack.unwrap_or(false),
        })
    }

    fn build(&self) -> MessageSeriesApp {
        MessageSeriesApp::new(MessageSeriesConfig {
            peer: self.peer,
            sizes: self.sizes.clone(),
            gaps: self.gaps.clone(),
            start: SimTime::ZERO + self.start,
            responses: self.responses.clone(),
            source_port: self.source_port,
            connect_first: self.connect_first,
            after_ack: self.after_ack,
        })
    }

    fn server(&self) -> Option<(SocketAddr, &'static str)> {
        // With responses each message is a request to an exchange server.
        let kind = if self.responses.is_empty() {
            TcpSinkSpec::KIND
        } else {
            ExchangeServerSpec::KIND
        };
        Some((self.peer, kind))
    }
}
