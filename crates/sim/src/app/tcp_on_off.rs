//! On/off TCP transfer: a sender that alternates bursts and silences over
//! one connection to a `tcp-sink`.
//!
//! During an ON period it queues data as fast as the connection takes it,
//! like `tcp-bulk`; when the period ends it stops queuing, waits until
//! every byte of the burst is acknowledged (what the send buffer still
//! holds drains first, so a burst outlasts `on` by about a buffer's worth
//! of transmission time), and then stays silent for the OFF period with
//! the connection left open. Because the OFF period only
//! starts once nothing is outstanding, the connection is genuinely idle
//! for `off`: the next burst is what exercises a sender's behaviour after
//! idle, such as the restart window of RFC 5681 §4.1, congestion window
//! validation (RFC 2861) and a retransmission timeout armed on a path
//! whose RTT estimate has gone stale.

use std::net::SocketAddr;

use rtolab_time::{SimDuration, SimTime};
use serde::Serialize;

use super::tcp_bulk::{discard_input, send_pattern};
use super::{transfer_failed, App, AppCx, AppStats};
use crate::tcp_layer::{FlowId, TcpEvent};
use crate::trace::AppEvent;

const TOKEN_START: u64 = 0;
const TOKEN_STOP: u64 = 1;
const TOKEN_ON_END: u64 = 2;
const TOKEN_OFF_END: u64 = 3;

/// Parameters of a [`TcpOnOffApp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpOnOffConfig {
    /// Where to connect.
    pub peer: SocketAddr,
    /// How long each burst queues data.
    pub on: SimDuration,
    /// Idle time between one burst being fully acknowledged and the next.
    pub off: SimDuration,
    /// Bursts to send, then close; `None` goes on until `stop`.
    pub bursts: Option<u64>,
    /// When to connect.
    pub start: SimTime,
    /// When to stop queuing data and close (`None`: never, or after the
    /// last burst).
    pub stop: Option<SimTime>,
}

/// Counters of a [`TcpOnOffApp`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TcpOnOffStats {
    /// ON periods begun.
    pub bursts_started: u64,
    /// Bursts whose every byte was acknowledged.
    pub bursts_completed: u64,
    /// Bytes handed to TCP.
    pub bytes_sent: u64,
    /// Bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// Whether the sender finished (last burst done, or stopped) with every
    /// byte acknowledged; without `bursts`, also when the run reached its
    /// end with the connection up.
    pub completed: bool,
    /// Why the connection ended early: `reset`, `timed_out`,
    /// `connect_failed`, or `null`.
    pub failure: Option<&'static str>,
}

/// Where the sender is in its cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not connected yet.
    Waiting,
    /// Queuing data.
    On,
    /// No more data queued; waiting for the burst to be acknowledged.
    Draining,
    /// Idle, connection open.
    Off,
    /// No more bursts.
    Done,
}

/// Sends bursts over one TCP connection, idle in between.
pub struct TcpOnOffApp {
    config: TcpOnOffConfig,
    flow: Option<FlowId>,
    phase: Phase,
    closing: bool,
    /// When the current burst started and its first stream offset.
    burst_start: SimTime,
    burst_offset: u64,
    stats: TcpOnOffStats,
}

impl TcpOnOffApp {
    /// A sender with `config`.
    pub fn new(config: TcpOnOffConfig) -> Self {
        TcpOnOffApp {
            config,
            flow: None,
            phase: Phase::Waiting,
            closing: false,
            burst_start: SimTime::ZERO,
            burst_offset: 0,
            stats: TcpOnOffStats::default(),
        }
    }

    fn begin_burst<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        self.phase = Phase::On;
        self.stats.bursts_started += 1;
        self.burst_start = cx.now();
        self.burst_offset = self.stats.bytes_sent;
        cx.set_timer(cx.now() + self.config.on, TOKEN_ON_END);
        self.fill(cx, flow);
    }

    /// Queues as much as the send buffer takes.
    fn fill<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        if self.phase == Phase::On {
            let sent = self.stats.bytes_sent;
            self.stats.bytes_sent += send_pattern(cx, flow, sent, u64::MAX);
        }
    }

    /// Stops queuing for good and closes the connection once.
    fn close<C: AppCx>(&mut self, cx: &mut C) {
        if self.closing {
            return;
        }
        self.closing = true;
        cx.trace(AppEvent::Stopped);
        if let Some(flow) = self.flow {
            let _ = cx.tcp_close(flow);
        }
    }

    fn update_acked<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        if let Ok(c) = cx.tcp_connection(flow) {
            self.stats.bytes_acked = c.stats().bytes_acked;
        }
        if self.stats.bytes_acked < self.stats.bytes_sent {
            return;
        }
        if self.phase == Phase::Draining {
            self.end_burst(cx, flow);
        }
        // Finished and nothing outstanding.
        if self.closing {
            self.stats.completed = true;
        }
    }

    /// The burst is fully acknowledged: idle, or finish.
    fn end_burst<C: AppCx>(&mut self, cx: &mut C, flow: FlowId) {
        self.stats.bursts_completed += 1;
        cx.trace(AppEvent::TransferCompleted {
            flow: flow.0,
            bytes: self.stats.bytes_sent - self.burst_offset,
            duration_ns: cx.now().saturating_since(self.burst_start).as_nanos(),
        });
        let last = self.config.bursts == Some(self.stats.bursts_completed);
        if self.closing || last {
            self.phase = Phase::Done;
            self.close(cx);
        } else {
            // Nothing is outstanding from here: the idle time is exact.
            self.phase = Phase::Off;
            cx.set_timer(cx.now() + self.config.off, TOKEN_OFF_END);
        }
    }

    /// A snapshot of the app's counters.
    pub fn stats(&self) -> AppStats {
        AppStats::TcpOnOff(self.stats)
    }
}

impl<C: AppCx> App<C> for TcpOnOffApp {
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
            TOKEN_START => match cx.tcp_connect(self.config.peer) {
                // The first burst starts once connected, so the handshake
                // does not eat into its ON period.
                Ok(flow) => self.flow = Some(flow),
                Err(_) => self.stats.failure = Some("connect_failed"),
            },
            TOKEN_STOP => {
                self.close(cx);
                // Queued data still goes out; the burst ends when acked.
                self.phase = match self.phase {
                    Phase::On | Phase::Draining => Phase::Draining,
                    _ => Phase::Done,
                };
                if let Some(flow) = self.flow {
                    self.update_acked(cx, flow);
                }
            }
            // Timers of a phase already left (after a stop) do nothing.
            TOKEN_ON_END if self.phase == Phase::On => {
                self.phase = Phase::Draining;
                if let Some(flow) = self.flow {
                    self.update_acked(cx, flow);
                }
            }
            TOKEN_OFF_END if self.phase == Phase::Off => {
                if let Some(flow) = self.flow {
                    self.begin_burst(cx, flow);
                }
            }
            _ => {}
        }
    }

    fn on_tcp(&mut self, cx: &mut C, flow: FlowId, event: TcpEvent) {
        if Some(flow) != self.flow {
            return;
        }
        match event {
            TcpEvent::Connected => {
                if self.phase == Phase::Waiting {
                    self.begin_burst(cx, flow);
                }
                self.update_acked(cx, flow);
            }
            TcpEvent::Writable => {
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
                self.phase = Phase::Done;
                self.flow = None;
            }
        }
    }

    fn on_end(&mut self, _cx: &mut C) {
        // Without `bursts` the workload is to cycle for the run (see
        // `TcpBulkApp`'s `on_end`).
        if self.config.bursts.is_none() && self.flow.is_some() {
            self.stats.completed = true;
        }
    }

    fn stats(&self) -> AppStats {
        TcpOnOffApp::stats(self)
    }
}

// ----- scenario side: `kind = "tcp-on-off"` -----

use super::registry::{AppCheck, ScenarioApp};
use super::TcpSinkSpec;
use crate::config::{required, Duration, ScenarioError};

/// The `[[app]]` fields of an on/off TCP sender.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTcpOnOff {
    /// Address and port of the `tcp-sink` it connects to. Required.
    peer: Option<SocketAddr>,
    /// How long each burst queues data (as fast as TCP takes it) before draining. Required.
    on: Option<Duration>,
    /// Idle time, connection open, from the burst's last byte being acknowledged to the next
    /// burst. Required.
    off: Option<Duration>,
    /// Bursts to send, then close. Default: none (bursts until `stop` or the end of the run).
    bursts: Option<u64>,
    /// When it connects and the first burst starts. Default: `"0s"`.
    start: Option<Duration>,
    /// When it stops, after `start`. Default: the end of the run.
    stop: Option<Duration>,
}

/// `kind = "tcp-on-off"`: a TCP sender alternating bursts and idle
/// periods ([`TcpOnOffApp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TcpOnOffSpec {
    /// The receiver's address and port.
    pub peer: SocketAddr,
    /// Length of each ON period.
    pub on: SimDuration,
    /// Length of each OFF period.
    pub off: SimDuration,
    /// Bursts to send; `None` goes on until `stop` (or the end of the run).
    pub bursts: Option<u64>,
    /// When to connect.
    pub start: SimDuration,
    /// When to stop sending and close.
    pub stop: Option<SimDuration>,
}

/// A required duration that must be positive.
fn positive(
    value: &Option<Duration>,
    field: &str,
    cx: &AppCheck<'_>,
) -> Result<SimDuration, ScenarioError> {
    let d = required(value, cx.at(field), &cx.what)?.0;
    if d == SimDuration::ZERO {
        return Err(ScenarioError::new(cx.at(field), "must be positive"));
    }
    Ok(d)
}

impl ScenarioApp for TcpOnOffSpec {
    const KIND: &'static str = "tcp-on-off";
    const TCP: bool = true;
    type Raw = RawTcpOnOff;
    type App = TcpOnOffApp;
    type Stats = TcpOnOffStats;

    fn validate(raw: RawTcpOnOff, cx: &mut AppCheck<'_>) -> Result<Self, ScenarioError> {
        let (start, stop) = cx.start_stop(raw.start.map(|d| d.0), raw.stop.map(|d| d.0))?;
        let peer = required(&raw.peer, cx.at("peer"), &cx.what)?;
        let peer = cx.remote("peer", peer)?;
        let on = positive(&raw.on, "on", cx)?;
        let off = positive(&raw.off, "off", cx)?;
        if raw.bursts == Some(0) {
            return Err(ScenarioError::new(cx.at("bursts"), "must be positive"));
        }
        Ok(TcpOnOffSpec {
            peer,
            on,
            off,
            bursts: raw.bursts,
            start,
            stop,
        })
    }

    fn build(&self) -> TcpOnOffApp {
        TcpOnOffApp::new(TcpOnOffConfig {
            peer: self.peer,
            on: self.on,
            off: self.off,
            bursts: self.bursts,
            start: SimTime::ZERO + self.start,
            stop: self.stop.map(|stop| SimTime::ZERO + stop),
        })
    }

    fn server(&self) -> Option<(SocketAddr, &'static str)> {
        Some((self.peer, TcpSinkSpec::KIND))
    }
}
