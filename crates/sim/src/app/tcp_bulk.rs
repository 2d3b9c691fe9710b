//! Bulk TCP transfer: a sender that pushes a number of bytes (or as much as
//! it can until a stop time) over one connection, and a sink that accepts
//! connections, counts what arrives and checks every byte.
//!
//! A sender with a `reconnect` delay does what Contiki's TCP client
//! applications do when their connection fails (reset, or timed out,
//! including a SYN that was never answered): it opens a new connection
//! after the delay and goes on sending. Each connection carries its own
//! pattern stream from offset 0, as the sink checks it.

use std::net::SocketAddr;

use rtolab_time::SimTime;
use serde::Serialize;

use rtolab_tcp::Bytes;

use super::{pattern, transfer_failed, App, AppCx, AppStats};
use crate::tcp_layer::{FlowId, TcpEvent};
use crate::trace::AppEvent;

/// Bytes written to or read from TCP per call; the apps' buffers are this
/// big and reused.
pub(crate) const CHUNK: usize = 16 * 1024;

const TOKEN_START: u64 = 0;
const TOKEN_STOP: u64 = 1;
const TOKEN_RECONNECT: u64 = 2;

/// Parameters of a [`TcpBulkApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpBulkConfig {
    /// Where to connect.
    pub peer: SocketAddr,
    /// Bytes to send, then close; `None` sends until `stop`.
    pub bytes: Option<u64>,
    /// When to connect.
    pub start: SimTime,
    /// When to stop queuing data and close (`None`: never, or when `bytes`
    /// are sent).
    pub stop: Option<SimTime>,
    /// After a failed connection, wait this long and open a new one
    /// (`None`: give up).
    pub reconnect: Option<SimDuration>,
}

/// Counters of a [`TcpBulkApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TcpBulkStats {
    /// Bytes handed to TCP.
    pub bytes_sent: u64,
    /// Bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// Whether the workload is done: with `bytes`, every byte acknowledged;
    /// without (a sender bounded by time), every byte acknowledged after it
    /// stopped, or the run reached its end with the connection up.
    pub completed: bool,
    /// From connecting to the last byte being acknowledged (for a sender
    /// bounded by time that was still sending: to the end of the run), ns.
    pub completion_time_ns: Option<u64>,
    /// `bytes_acked` over the completion time, bits per second.
    pub goodput_bps: Option<f64>,
    /// Why the connection ended early: `reset`, `timed_out`, or `null`;
    /// with `reconnect`, why the last failed connection ended.
    pub failure: Option<&'static str>,
    /// Connections opened (reported only with `reconnect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_opened: Option<u64>,
    /// Connections that failed: reset, timed out, or could not be opened
    /// (reported only with `reconnect`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_failed: Option<u64>,
}

/// Queues up to `limit` bytes of the pattern stream on `flow`, continuing
/// at stream offset `offset`, as far as the send buffer takes them; returns
/// how many it queued. The bytes are handed over as shared slices of the
/// pattern's table: nothing is generated or copied per byte.
pub(crate) fn send_pattern<C: AppCx>(cx: &mut C, flow: FlowId, offset: u64, limit: u64) -> u64 {
    let mut queued = 0;
    while queued < limit {
        let Ok(room) = cx.tcp_send_capacity(flow) else {
            break;
        };
        let n = ((limit - queued).min(CHUNK as u64) as usize).min(room);
        if n == 0 {
            break;
        }
        let data = Bytes::from_static(pattern::slice(offset + queued, n));
        match cx.tcp_send_shared(flow, data) {
            Ok(k) => {
                queued += k as u64;
                if k < n {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    queued
}

/// Reads and throws away whatever the peer sent on `flow` (a sink sends
/// nothing, but a sender must not let its receive buffer fill).
pub(crate) fn discard_input<C: AppCx>(cx: &mut C, flow: FlowId) {
    let mut scratch = [0u8; 256];
    while cx.tcp_recv(flow, &mut scratch).is_ok_and(|n| n > 0) {}
}

/// Sends a byte stream over one TCP connection.
pub struct TcpBulkApp {
    config: TcpBulkConfig,
    flow: Option<FlowId>,
    opened: SimTime,
    closing: bool,
    /// Bytes acknowledged on earlier connections.
    acked_before: u64,
    /// `bytes_sent` when the current connection was opened: its pattern
    /// stream starts there at offset 0.
    sent_before: u64,
    stats: TcpBulkStats,
}

impl TcpBulkApp {
    /// A sender with `config`.
    pub fn new(config: TcpBulkConfig) -> Self {
        TcpBulkApp {
            config,
            flow: None,
            opened: SimTime::ZERO,
            closing: false,
            acked_before: 0,
            sent_before: 0,
            stats: TcpBulkStats {
                connections_opened: config.reconnect.map(|_| 0),
                connections_failed: config.reconnect.map(|_| 0),
                ..TcpBulkStats::default()
            },
        }
    }

    /// Bytes queued on the current connection.
    fn sent_here(&self) -> u64 {
        self.stats.bytes_sent - self.sent_before
    }

    fn remaining(&self) -> u64 {
        // Bytes lost with a failed connection are sent again on the next.
        let delivered = self.acked_before + self.sent_here();
        self.config
            .bytes
            .map_or(u64::MAX, |b| b.saturating_sub(delivered))
    }

    /// Opens a connection to the peer; with `reconnect`, a connection that
    /// cannot be opened is tried again after the delay.
    fn connect<C: AppCx>(&mut self, cx: &mut C) {
        if let Some(n) = self.stats.connections_opened.as_mut() {
            *n += 1;
        }
        match cx.tcp_connect(self.config.peer) {
            Ok(flow) => {
                self.flow = Some(flow);
                if self.stats.connections_opened.unwrap_or(1) == 1 {
                    self.opened = cx.now();
                }
                self.sent_before = self.stats.bytes_sent;
                // Data queued now leaves right after the handshake.
                self.fill(cx, flow);
            }
            Err(_) => {
                self.stats.failure = Some("connect_failed");
                self.retry_later(cx);
            }
        }
    }

    /// Counts a failed connection and, with `reconnect`, arms the timer of
    /// the next one.
    fn retry_later<C: AppCx>(&mut self, cx: &mut C) {
        if let (Some(delay), Some(failures)) = (
            self.config.reconnect,
            self.stats.connections_failed.as_mut(),
        ) {
            *failures += 1;
            if !self.closing {
                cx.set_timer(cx.now() + delay, TOKEN_RECONNECT);
            }
        }
    }

    /// Queues as much as the send buffer takes; closes once everything is
    /// queued.
    fn fill<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        if self.closing {
            return;
        }
        let remaining = self.remaining();
        let queued = send_pattern(cx, flow, self.sent_here(), remaining);
        self.stats.bytes_sent += queued;
        if queued == remaining {
            self.closing = true;
            let _ = cx.tcp_close(flow);
        }
    }

    fn update_acked<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        if let Ok(acked) = cx.tcp_bytes_acked(flow) {
            self.stats.bytes_acked = self.acked_before + acked;
        }
        // Complete once nothing more will be queued and all of it is acked.
        let queued = self.acked_before + self.sent_here();
        if !self.stats.completed && self.closing && self.stats.bytes_acked == queued {
            self.complete(cx, flow);
        }
    }

    /// Marks the workload done now, with what was acknowledged so far.
    fn complete<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        let duration = cx.now().saturating_since(self.opened).as_nanos();
        self.stats.completed = true;
        self.stats.completion_time_ns = Some(duration);
        self.stats.goodput_bps =
            (duration > 0).then(|| self.stats.bytes_acked as f64 * 8e9 / duration as f64);
        cx.trace(AppEvent::TransferCompleted {
            flow: flow.0,
            bytes: self.stats.bytes_acked,
            duration_ns: duration,
        });
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::TcpBulk(self.stats)
    }
}

impl<C: AppCx> App<C> for TcpBulkApp {
    fn on_start(&mut self, cx: &mut C) {
        cx.trace(AppEvent::Started);
        cx.set_timer(self.config.start, TOKEN_START);
        if let Some(stop) = self.config.stop {
            cx.set_timer(stop, TOKEN_STOP);
        }
    }

    fn on_packet(&mut self, _cx: &mut C, _datagram: &[u8]) {}

    fn on_timer(&mut self, cx: &mut C, token: u64) {
        match token {
            TOKEN_START => self.connect(cx),
            TOKEN_RECONNECT => {
                if !self.closing && self.flow.is_none() {
                    self.connect(cx);
                }
            }
            _ => {
                cx.trace(AppEvent::Stopped);
                if let Some(flow) = self.flow.filter(|_| !self.closing) {
                    self.closing = true;
                    let _ = cx.tcp_close(flow);
                    self.update_acked(cx, flow);
                }
                // No new connection after the stop.
                self.closing = true;
            }
        }
    }

    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        if Some(flow) != self.flow {
            return;
        }
        match event {
            TcpEvent::Connected | TcpEvent::Writable => {
                self.fill(cx, flow);
                self.update_acked(cx, flow);
            }
            TcpEvent::Readable => {
                discard_input(cx, flow);
            }
            TcpEvent::PeerClosed => {}
            TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut => {
                self.update_acked(cx, flow);
                if !self.stats.completed {
                    self.stats.failure = Some(transfer_failed(cx, flow, event));
                }
                self.flow = None;
                if event != TcpEvent::Closed && !self.stats.completed {
                    // What the peer acknowledged stays delivered; the rest
                    // goes again on the next connection.
                    self.acked_before = self.stats.bytes_acked;
                    self.sent_before = self.stats.bytes_sent;
                    self.retry_later(cx);
                }
            }
        }
    }

    fn on_end(&mut self, cx: &mut C) {
        // Without `bytes` the workload is to send for the run: reaching its
        // end with the connection up is done, with the goodput so far. A
        // sender whose connection failed (and was not replaced) is not.
        if self.config.bytes.is_some() || self.stats.completed {
            return;
        }
        if let Some(flow) = self.flow {
            self.update_acked(cx, flow);
            if !self.stats.completed {
                self.complete(cx, flow);
            }
        }
    }

    fn stats(&self) -> AppStats {
        TcpBulkApp::stats(self)
    }
}

/// Parameters of a [`TcpSinkApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSinkConfig {
    /// Port to accept connections on.
    pub port: u16,
}

/// Counters of a [`TcpSinkApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TcpSinkStats {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connections whose peer closed after sending.
    pub connections_finished: u64,
    /// Bytes received, over all connections.
    pub bytes_received: u64,
    /// Received bytes that differ from the stream sent (should be 0).
    pub bytes_corrupt: u64,
    /// When the first byte arrived, ns.
    pub first_byte_ns: Option<u64>,
    /// When the last byte arrived, ns.
    pub last_byte_ns: Option<u64>,
    /// Bytes received between the first and last byte, bits per second.
    pub goodput_bps: Option<f64>,
}

/// Accepts TCP connections, reads everything and checks it against the
/// stream of [`pattern`].
pub struct TcpSinkApp {
    config: TcpSinkConfig,
    /// Open connections and the stream offset reached on each.
    conns: Vec<(FlowId, u64)>,
    buf: Vec<u8>,
    stats: TcpSinkStats,
}

impl TcpSinkApp {
    /// A sink accepting on `config.port`.
    pub fn new(config: TcpSinkConfig) -> Self {
        TcpSinkApp {
            config,
            conns: Vec::new(),
            buf: vec![0; CHUNK],
            stats: TcpSinkStats::default(),
        }
    }

    fn read<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        let Some(index) = self.conns.iter().position(|(f, _)| *f == flow) else {
            return;
        };
        loop {
            let n = match cx.tcp_recv(flow, &mut self.buf) {
                Ok(n) if n > 0 => n,
                _ => break,
            };
            let offset = self.conns[index].1;
            let bad = pattern::mismatches(offset, &self.buf[..n]);
            if bad > 0 {
                self.stats.bytes_corrupt += bad;
                cx.trace(AppEvent::DataCorrupt {
                    flow: flow.0,
                    offset,
                    bytes: bad,
                });
            }
            self.conns[index].1 += n as u64;
            let s = &mut self.stats;
            s.bytes_received += n as u64;
            let now = cx.now().as_nanos();
            let first = *s.first_byte_ns.get_or_insert(now);
            s.last_byte_ns = Some(now);
            s.goodput_bps =
                (now > first).then(|| s.bytes_received as f64 * 8e9 / (now - first) as f64);
        }
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::TcpSink(self.stats)
    }
}

impl<C: AppCx> App<C> for TcpSinkApp {
    fn on_start(&mut self, cx: &mut C) {
        // A clash was rejected when the scenario was validated.
        let _ = cx.tcp_listen(self.config.port);
        cx.trace(AppEvent::Started);
    }

    fn on_packet(&mut self, _cx: &mut C, _datagram: &[u8]) {}

    fn on_timer(&mut self, _cx: &mut C, _token: u64) {}

    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        match event {
            TcpEvent::Connected => {
                self.stats.connections_accepted += 1;
                self.conns.push((flow, 0));
                // Data may have come with the handshake's last ACK.
                self.read(cx, flow);
            }
            TcpEvent::Readable => self.read(cx, flow),
            TcpEvent::Writable => {}
            TcpEvent::PeerClosed => {
                self.read(cx, flow);
                self.stats.connections_finished += 1;
                let _ = cx.tcp_close(flow);
            }
            TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut => {
                self.conns.retain(|(f, _)| *f != flow);
            }
        }
    }

    fn stats(&self) -> AppStats {
        TcpSinkApp::stats(self)
    }
}

// ----- scenario side: `kind = "tcp-bulk"` and `kind = "tcp-sink"` -----

use rtolab_time::SimDuration;

use super::registry::{AppCheck, ScenarioApp};
use crate::config::{required, Duration, ScenarioError};

/// The `[[app]]` fields of a TCP bulk sender.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTcpBulk {
    /// Address and port of the `tcp-sink` it connects to, like `"10.0.0.2:5001"`. Required.
    peer: Option<SocketAddr>,
    /// Bytes to send, then close. Unit: bytes. Default: none (sends until `stop` or the end of
    /// the run).
    bytes: Option<u64>,
    /// When it opens its connection. Default: `"0s"`.
    start: Option<Duration>,
    /// When it stops sending, after `start`. Default: the end of the run.
    stop: Option<Duration>,
    /// After a reset or a timed-out connection, open a new one this long after (at least 1 ms).
    /// Default: none (no new connection).
    reconnect: Option<Duration>,
}

/// The shortest `reconnect` delay.
pub const MIN_RECONNECT: SimDuration = SimDuration::from_millis(1);

/// `kind = "tcp-bulk"`: a TCP bulk sender ([`TcpBulkApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TcpBulkSpec {
    /// The receiver's address and port.
    pub peer: SocketAddr,
    /// Bytes to send; `None` sends until `stop` (or the end of the run).
    pub bytes: Option<u64>,
    /// When to connect.
    pub start: SimDuration,
    /// When to stop sending and close.
    pub stop: Option<SimDuration>,
    /// Delay before a new connection replaces a failed one (`None`: no new
    /// connection).
    pub reconnect: Option<SimDuration>,
}

impl ScenarioApp for TcpBulkSpec {
    const KIND: &'static str = "tcp-bulk";
    const TCP: bool = true;
    type Raw = RawTcpBulk;
    type App = TcpBulkApp;
    type Stats = TcpBulkStats;

    fn validate(raw: RawTcpBulk, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        let (start, stop) = cx.start_stop(raw.start.map(|d| d.0), raw.stop.map(|d| d.0))?;
        let peer = required(&raw.peer, cx.at("peer"), &cx.what)?;
        let peer = cx.remote("peer", peer)?;
        if raw.bytes == Some(0) {
            return Err(ScenarioError::new(cx.at("bytes"), "must be positive"));
        }
        let reconnect = raw.reconnect.map(|d| d.0);
        if reconnect.is_some_and(|d| d < MIN_RECONNECT) {
            return Err(ScenarioError::new(
                cx.at("reconnect"),
                "must be at least 1ms (a timer re-armed after every failed connection)",
            ));
        }
        Ok(TcpBulkSpec {
            peer,
            bytes: raw.bytes,
            start,
            stop,
            reconnect,
        })
    }

    fn build(&self) -> TcpBulkApp {
        TcpBulkApp::new(TcpBulkConfig {
            peer: self.peer,
            bytes: self.bytes,
            start: SimTime::ZERO + self.start,
            stop: self.stop.map(|stop| SimTime::ZERO + stop),
            reconnect: self.reconnect,
        })
    }

    fn server(&self) -> Option<(SocketAddr, &'static str)> {
        Some((self.peer, TcpSinkSpec::KIND))
    }
}

/// The `[[app]]` fields of a TCP listener (`tcp-sink`, `exchange-server`).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListener {
    /// The TCP port it listens on. Required.
    port: Option<u16>,
}

impl RawListener {
    /// Claims the port for listening.
    pub(crate) fn port(&self, cx: &mut AppCheck<'_>) -> Result<u16, ScenarioError> {
        let port = required(&self.port, cx.at("port"), &cx.what)?;
        cx.listen_tcp(port)
    }
}

/// `kind = "tcp-sink"`: a TCP receiver that counts and checks bytes
/// ([`TcpSinkApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TcpSinkSpec {
    /// Port it accepts connections on.
    pub port: u16,
}

impl ScenarioApp for TcpSinkSpec {
    const KIND: &'static str = "tcp-sink";
    const TCP: bool = true;
    type Raw = RawListener;
    type App = TcpSinkApp;
    type Stats = TcpSinkStats;

    fn validate(raw: RawListener, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        Ok(TcpSinkSpec {
            port: raw.port(cx)?,
        })
    }

    fn build(&self) -> TcpSinkApp {
        TcpSinkApp::new(TcpSinkConfig { port: self.port })
    }

    fn listen_port(&self) -> Option<u16> {
        Some(self.port)
    }
}
