//! Request/response over TCP: the client connects, sends a request, reads
//! the response, and closes; the latency of each exchange is measured from
//! connecting to the last response byte.
//!
//! A request starts with an 8-byte header, the request length (header
//! included) and the response length, both u32 big-endian, so one server
//! answers clients of any sizes. The rest of the request, and the whole
//! response, is the stream of [`super::pattern`] (the request's from offset
//! 8, the response's from 0).

use std::collections::VecDeque;
use std::net::SocketAddr;

use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use super::tcp_bulk::CHUNK;
use super::{failure_name, pattern, App, AppCx, AppStats, Latency};
use crate::tcp_layer::{FlowId, TcpEvent};
use crate::trace::AppEvent;

/// Bytes of the request header: request length, then response length.
pub const REQUEST_HEADER_LEN: usize = 8;

/// Parameters of an [`ExchangeApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExchangeConfig {
    /// The server.
    pub peer: SocketAddr,
    /// Request bytes, header included (at least [`REQUEST_HEADER_LEN`]).
    pub request: u32,
    /// Response bytes asked for.
    pub response: u32,
    /// When the first exchange starts.
    pub start: SimTime,
    /// Exchanges to run, one connection each, one after the other.
    pub count: u32,
    /// Pause between the end of one exchange and the start of the next.
    pub gap: SimDuration,
    /// Local port of the first exchange's connection (later ones, and all
    /// without it, use ephemeral ports).
    pub source_port: Option<u16>,
    /// Write the request only once the handshake completed, as a client on
    /// a blocking socket API does (the stack then acknowledges the SYN-ACK
    /// on its own, before the request); otherwise the request is queued
    /// with the SYN and leaves with the handshake's ACK.
    pub connect_first: bool,
}

/// Counters of an [`ExchangeApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ExchangeStats {
    /// Exchanges whose whole response arrived.
    pub exchanges_completed: u64,
    /// Exchanges whose connection ended first.
    pub exchanges_failed: u64,
    /// Request bytes handed to TCP.
    pub bytes_sent: u64,
    /// Response bytes received.
    pub bytes_received: u64,
    /// Response bytes that differ from the stream sent (should be 0).
    pub bytes_corrupt: u64,
    /// Shortest exchange, ns.
    pub latency_min_ns: Option<u64>,
    /// Mean exchange, ns.
    pub latency_mean_ns: Option<f64>,
    /// Longest exchange, ns.
    pub latency_max_ns: Option<u64>,
    /// Why the last failed exchange failed.
    pub failure: Option<&'static str>,
}

/// The exchange in progress.
#[derive(Clone, Copy, Debug)]
struct Current {
    flow: FlowId,
    opened: SimTime,
    /// Request bytes queued so far.
    sent: u64,
    /// Response bytes received so far.
    received: u64,
}

/// Runs `count` request/response exchanges against an
/// [`ExchangeServerApp`].
pub struct ExchangeApp {
    config: ExchangeConfig,
    current: Option<Current>,
    started: u32,
    buf: Vec<u8>,
    latency: Latency,
    stats: ExchangeStats,
}

impl ExchangeApp {
    /// A client with `config` (a request shorter than the header is
    /// lengthened to it).
    pub fn new(config: ExchangeConfig) -> Self {
        ExchangeApp {
            config: ExchangeConfig {
                request: config.request.max(REQUEST_HEADER_LEN as u32),
                ..config
            },
            current: None,
            started: 0,
            buf: vec![0; CHUNK],
            latency: Latency::default(),
            stats: ExchangeStats::default(),
        }
    }

    fn begin<C: AppCx>(&mut self, cx: &mut C) {
        self.started += 1;
        let port = self.config.source_port.filter(|_| self.started == 1);
        match cx.tcp_connect_from(self.config.peer, port) {
            Ok(flow) => {
                self.current = Some(Current {
                    flow,
                    opened: cx.now(),
                    sent: 0,
                    received: 0,
                });
                if !self.config.connect_first {
                    self.push_request(cx);
                }
            }
            Err(_) => {
                self.stats.exchanges_failed += 1;
                self.stats.failure = Some("connect_failed");
                self.next(cx);
            }
        }
    }

    /// Schedules the next exchange, if any are left.
    fn next<C: AppCx>(&mut self, cx: &mut C) {
        if self.started < self.config.count {
            let at = cx.now() + self.config.gap;
            cx.set_timer(at, 0);
        } else {
            cx.trace(AppEvent::Stopped);
        }
    }

    fn push_request<C: AppCx>(&mut self, cx: &mut C) {
        let Some(cur) = self.current.as_mut() else {
            return;
        };
        let total = u64::from(self.config.request);
        while cur.sent < total {
            let Ok(room) = cx.tcp_send_capacity(cur.flow) else {
                return;
            };
            let n = ((total - cur.sent).min(CHUNK as u64) as usize).min(room);
            if n == 0 {
                return;
            }
            let chunk = &mut self.buf[..n];
            pattern::fill(cur.sent, chunk);
            // The header overlays the pattern's first bytes.
            let mut header = [0u8; REQUEST_HEADER_LEN];
            header[..4].copy_from_slice(&self.config.request.to_be_bytes());
            header[4..].copy_from_slice(&self.config.response.to_be_bytes());
            for (i, b) in chunk.iter_mut().enumerate() {
                let offset = cur.sent as usize + i;
                if offset >= REQUEST_HEADER_LEN {
                    break;
                }
                *b = header[offset];
            }
            match cx.tcp_send(cur.flow, chunk) {
                Ok(k) => {
                    cur.sent += k as u64;
                    self.stats.bytes_sent += k as u64;
                    if k < n {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    }

    fn read_response<C: AppCx>(&mut self, cx: &mut C) {
        let Some(mut cur) = self.current else {
            return;
        };
        loop {
            let n = match cx.tcp_recv(cur.flow, &mut self.buf) {
                Ok(n) if n > 0 => n,
                _ => break,
            };
            let bad = pattern::mismatches(cur.received, &self.buf[..n]);
            if bad > 0 {
                self.stats.bytes_corrupt += bad;
                cx.trace(AppEvent::DataCorrupt {
                    flow: cur.flow.0,
                    offset: cur.received,
                    bytes: bad,
                });
            }
            cur.received += n as u64;
            self.stats.bytes_received += n as u64;
        }
        self.current = Some(cur);
        if cur.received >= u64::from(self.config.response) {
            let latency = cx.now().saturating_since(cur.opened).as_nanos();
            self.latency.add(latency);
            self.stats.exchanges_completed += 1;
            cx.trace(AppEvent::TransferCompleted {
                flow: cur.flow.0,
                bytes: cur.received,
                duration_ns: latency,
            });
            let _ = cx.tcp_close(cur.flow);
            self.current = None;
            self.next(cx);
        }
    }

    fn fail<C: AppCx>(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        let reason = failure_name(event);
        self.stats.exchanges_failed += 1;
        self.stats.failure = Some(reason);
        cx.trace(AppEvent::TransferFailed {
            flow: flow.0,
            reason,
        });
        self.current = None;
        self.next(cx);
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::Exchange(ExchangeStats {
            latency_min_ns: self.latency.min_ns(),
            latency_mean_ns: self.latency.mean_ns(),
            latency_max_ns: self.latency.max_ns(),
            ..self.stats
        })
    }
}

impl<C: AppCx> App<C> for ExchangeApp {
    fn on_start(&mut self, cx: &mut C) {
        cx.trace(AppEvent::Started);
        if self.config.count > 0 {
            cx.set_timer(self.config.start, 0);
        }
    }

    fn on_packet(&mut self, _cx: &mut C, _datagram: &[u8]) {}

    fn on_timer(&mut self, cx: &mut C, _token: u64) {
        self.begin(cx);
    }

    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        if self.current.map(|c| c.flow) != Some(flow) {
            // A finished exchange's connection closing down.
            return;
        }
        match event {
            TcpEvent::Connected | TcpEvent::Writable => self.push_request(cx),
            TcpEvent::Readable => self.read_response(cx),
            TcpEvent::PeerClosed => {
                self.read_response(cx);
                if self.current.is_some() {
                    let _ = cx.tcp_close(flow);
                    self.fail(cx, flow, event);
                }
            }
            TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut => self.fail(cx, flow, event),
        }
    }

    fn stats(&self) -> AppStats {
        ExchangeApp::stats(self)
    }
}

/// Parameters of an [`ExchangeServerApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExchangeServerConfig {
    /// Port to accept connections on.
    pub port: u16,
}

/// Counters of an [`ExchangeServerApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExchangeServerStats {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Requests received whole and answered.
    pub requests_served: u64,
    /// Request bytes received, headers included.
    pub bytes_received: u64,
    /// Response bytes handed to TCP.
    pub bytes_sent: u64,
    /// Request bytes that differ from the stream sent (should be 0).
    pub bytes_corrupt: u64,
    /// Requests whose header announced a length shorter than the header;
    /// their connections were reset.
    pub bad_requests: u64,
}

/// A connection of the server.
#[derive(Clone, Debug)]
struct ServerConn {
    flow: FlowId,
    header: [u8; REQUEST_HEADER_LEN],
    /// Bytes of the current request received, header included.
    received: u64,
    /// Request and response lengths of the current request, once its
    /// header is in.
    lengths: Option<(u64, u64)>,
    /// Response lengths of the requests received whole, oldest first; the
    /// first is being answered.
    answers: VecDeque<u64>,
    /// Bytes of the first answer queued.
    sent: u64,
}

/// Answers each request with the response length it asks for, then closes
/// once the client has. A connection may carry several requests one after
/// the other; each is answered in turn.
pub struct ExchangeServerApp {
    config: ExchangeServerConfig,
    conns: Vec<ServerConn>,
    buf: Vec<u8>,
    stats: ExchangeServerStats,
}

impl ExchangeServerApp {
    /// A server accepting on `config.port`.
    pub fn new(config: ExchangeServerConfig) -> Self {
        ExchangeServerApp {
            config,
            conns: Vec::new(),
            buf: vec![0; CHUNK],
            stats: ExchangeServerStats::default(),
        }
    }

    fn read<C: AppCx>(&mut self, cx: &mut C, index: usize) {
        let flow = self.conns[index].flow;
        loop {
            let n = match cx.tcp_recv(flow, &mut self.buf) {
                Ok(n) if n > 0 => n,
                _ => break,
            };
            self.stats.bytes_received += n as u64;
            let conn = &mut self.conns[index];
            let mut data = &self.buf[..n];
            while !data.is_empty() {
                let Some((request, response)) = conn.lengths else {
                    conn.header[conn.received as usize] = data[0];
                    conn.received += 1;
                    data = &data[1..];
                    if conn.received == REQUEST_HEADER_LEN as u64 {
                        let h = conn.header;
                        let request = u64::from(u32::from_be_bytes([h[0], h[1], h[2], h[3]]));
                        let response = u64::from(u32::from_be_bytes([h[4], h[5], h[6], h[7]]));
                        if request < REQUEST_HEADER_LEN as u64 {
                            self.stats.bad_requests += 1;
                            let _ = cx.tcp_abort(flow);
                            return;
                        }
                        conn.lengths = Some((request, response));
                    }
                    continue;
                };
                let take = ((request - conn.received) as usize).min(data.len());
                let bad = pattern::mismatches(conn.received, &data[..take]);
                if bad > 0 {
                    self.stats.bytes_corrupt += bad;
                    cx.trace(AppEvent::DataCorrupt {
                        flow: flow.0,
                        offset: conn.received,
                        bytes: bad,
                    });
                }
                conn.received += take as u64;
                data = &data[take..];
                if conn.received >= request {
                    conn.answers.push_back(response);
                    conn.lengths = None;
                    conn.received = 0;
                }
            }
            // A request whose header announces only the header is whole
            // as soon as the header is.
            if let Some((request, response)) = conn.lengths {
                if conn.received >= request {
                    conn.answers.push_back(response);
                    conn.lengths = None;
                    conn.received = 0;
                }
            }
        }
        self.respond(cx, index);
    }

    fn respond<C: AppCx>(&mut self, cx: &mut C, index: usize) {
        let conn = &mut self.conns[index];
        while let Some(&response) = conn.answers.front() {
            while conn.sent < response {
                let Ok(room) = cx.tcp_send_capacity(conn.flow) else {
                    return;
                };
                let n = ((response - conn.sent).min(CHUNK as u64) as usize).min(room);
                if n == 0 {
                    return;
                }
                pattern::fill(conn.sent, &mut self.buf[..n]);
                match cx.tcp_send(conn.flow, &self.buf[..n]) {
                    Ok(k) => {
                        conn.sent += k as u64;
                        self.stats.bytes_sent += k as u64;
                        if k < n {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
            self.stats.requests_served += 1;
            conn.answers.pop_front();
            conn.sent = 0;
        }
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::ExchangeServer(self.stats)
    }
}

impl<C: AppCx> App<C> for ExchangeServerApp {
    fn on_start(&mut self, cx: &mut C) {
        // A clash was rejected when the scenario was validated.
        let _ = cx.tcp_listen(self.config.port);
        cx.trace(AppEvent::Started);
    }

    fn on_packet(&mut self, _cx: &mut C, _datagram: &[u8]) {}

    fn on_timer(&mut self, _cx: &mut C, _token: u64) {}

    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        if event == TcpEvent::Connected {
            self.stats.connections_accepted += 1;
            self.conns.push(ServerConn {
                flow,
                header: [0; REQUEST_HEADER_LEN],
                received: 0,
                lengths: None,
                answers: VecDeque::new(),
                sent: 0,
            });
        }
        let Some(index) = self.conns.iter().position(|c| c.flow == flow) else {
            return;
        };
        match event {
            TcpEvent::Connected | TcpEvent::Readable => self.read(cx, index),
            TcpEvent::Writable => self.respond(cx, index),
            TcpEvent::PeerClosed => {
                self.read(cx, index);
                let _ = cx.tcp_close(flow);
            }
            TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut => {
                self.conns.swap_remove(index);
            }
        }
    }

    fn stats(&self) -> AppStats {
        ExchangeServerApp::stats(self)
    }
}

// ----- scenario side: `kind = "exchange"` and `kind = "exchange-server"` -----

use super::registry::{AppCheck, ScenarioApp};
use super::tcp_bulk::RawListener;
use crate::config::{required, Duration, ScenarioError};

/// The `[[app]]` fields of a request/response client.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExchange {
    /// Address and port of the `exchange-server` it connects to. Required.
    peer: Option<SocketAddr>,
    /// Request size, its 8-byte header included. Unit: bytes. Required.
    request: Option<u32>,
    /// Response size the server is asked for. Unit: bytes. Required.
    response: Option<u32>,
    /// When the first exchange starts. Default: `"0s"`.
    start: Option<Duration>,
    /// Exchanges to run, one connection each, one after the other. Default: 1.
    count: Option<u32>,
    /// Pause between the end of one exchange and the start of the next. Default: `"0s"`.
    gap: Option<Duration>,
    /// Local port of the first exchange's connection (later ones use ephemeral ports). Default:
    /// an ephemeral port.
    source_port: Option<u16>,
    /// Write the request only once the handshake completed, as a client on a blocking socket
    /// API does; otherwise it leaves with the handshake's ACK. Default: false.
    connect_first: Option<bool>,
}

/// `kind = "exchange"`: a request/response client ([`ExchangeApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ExchangeSpec {
    /// The server's address and port.
    pub peer: SocketAddr,
    /// Request bytes, its 8-byte header included.
    pub request: u32,
    /// Response bytes.
    pub response: u32,
    /// When the first exchange starts.
    pub start: SimDuration,
    /// Exchanges, one connection each, one after the other.
    pub count: u32,
    /// Pause between the end of one exchange and the start of the next.
    pub gap: SimDuration,
    /// Local port of the first connection.
    pub source_port: Option<u16>,
    /// Write the request only after the handshake.
    pub connect_first: bool,
}

impl ScenarioApp for ExchangeSpec {
    const KIND: &'static str = "exchange";
    const TCP: bool = true;
    type Raw = RawExchange;
    type App = ExchangeApp;
    type Stats = ExchangeStats;

    fn validate(raw: RawExchange, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        let (start, _) = cx.start_stop(raw.start.map(|d| d.0), None)?;
        let peer = required(&raw.peer, cx.at("peer"), &cx.what)?;
        let peer = cx.remote("peer", peer)?;
        let header = REQUEST_HEADER_LEN as u32;
        let request = required(&raw.request, cx.at("request"), &cx.what)?;
        if request < header {
            return Err(ScenarioError::new(
                cx.at("request"),
                format!("must be at least {header} bytes (the request header), got {request}"),
            ));
        }
        let response = required(&raw.response, cx.at("response"), &cx.what)?;
        if response == 0 {
            return Err(ScenarioError::new(cx.at("response"), "must be positive"));
        }
        let count = raw.count.unwrap_or(1);
        if count == 0 {
            return Err(ScenarioError::new(cx.at("count"), "must be positive"));
        }
        Ok(ExchangeSpec {
            peer,
            request,
            response,
            start,
            count,
            gap: raw.gap.map_or(SimDuration::ZERO, |d| d.0),
            source_port: raw
                .source_port
                .map(|p| cx.port("source_port", p))
                .transpose()?,
            connect_first: raw.connect_first.unwrap_or(false),
        })
    }

    fn build(&self) -> ExchangeApp {
        ExchangeApp::new(ExchangeConfig {
            peer: self.peer,
            request: self.request,
            response: self.response,
            start: SimTime::ZERO + self.start,
            count: self.count,
            gap: self.gap,
            source_port: self.source_port,
            connect_first: self.connect_first,
        })
    }

    fn server(&self) -> Option<(SocketAddr, &'static str)> {
        Some((self.peer, ExchangeServerSpec::KIND))
    }
}

/// `kind = "exchange-server"`: a request/response server
/// ([`ExchangeServerApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ExchangeServerSpec {
    /// Port it accepts connections on.
    pub port: u16,
}

impl ScenarioApp for ExchangeServerSpec {
    const KIND: &'static str = "exchange-server";
    const TCP: bool = true;
    type Raw = RawListener;
    type App = ExchangeServerApp;
    type Stats = ExchangeServerStats;

    fn validate(raw: RawListener, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        Ok(ExchangeServerSpec {
            port: raw.port(cx)?,
        })
    }

    fn build(&self) -> ExchangeServerApp {
        ExchangeServerApp::new(ExchangeServerConfig { port: self.port })
    }

    fn listen_port(&self) -> Option<u16> {
        Some(self.port)
    }
}
