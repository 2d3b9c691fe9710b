//! The vocabulary of TCP in a run (flows, app events, errors, counters)
//! and the state every host's stack shares: the configurations, the
//! report's flow table and the app events waiting to be delivered.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rtolab_tcp::trace::{RetransmitCause, TimerKind, TraceEvent as EngineTrace, TraceLevel};
use rtolab_tcp::{Config, ConnError, ConnId, ConnectionStats, Event, State};
use rtolab_time::SimTime;
use serde::Serialize;

use crate::node::{AppId, NodeId};

/// A TCP connection of a run: its index in the report's `flows` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub u32);

/// A TCP configuration registered with
/// [`crate::Simulator::add_tcp_config`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TcpConfigId(pub u32);

/// What a connection tells the app that owns it (the engine's
/// [`rtolab_tcp::Event`]s other than traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpEvent {
    /// The handshake completed. For a listening app this is the first event
    /// of a new flow.
    Connected,
    /// In-order data can be read with [`crate::app::AppCx::tcp_recv`].
    Readable,
    /// Send-buffer space was freed (data was acknowledged).
    Writable,
    /// The peer sent FIN: no more data will arrive.
    PeerClosed,
    /// The connection finished normally. Its last event.
    Closed,
    /// The peer reset the connection. Its last event.
    Reset,
    /// Retransmissions went unanswered and the connection was dropped. Its
    /// last event.
    TimedOut,
}

impl TcpEvent {
    /// Whether the flow is over after this event.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TcpEvent::Closed | TcpEvent::Reset | TcpEvent::TimedOut
        )
    }

    pub(crate) fn from_engine(event: Event) -> Option<TcpEvent> {
        Some(match event {
            Event::Connected => TcpEvent::Connected,
            Event::Readable => TcpEvent::Readable,
            Event::Writable => TcpEvent::Writable,
            Event::PeerClosed => TcpEvent::PeerClosed,
            Event::Closed => TcpEvent::Closed,
            Event::Reset => TcpEvent::Reset,
            Event::TimedOut => TcpEvent::TimedOut,
            Event::Trace(_) => return None,
        })
    }
}

/// A TCP call of an app that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TcpError {
    /// The flow does not exist, is over, or belongs to another app.
    #[error("flow {} is not an open connection of this app", .0 .0)]
    UnknownFlow(FlowId),
    /// Another app already listens on the port.
    #[error("TCP port {port} is already listened on by app {}", .owner.0)]
    PortInUse {
        /// The port.
        port: u16,
        /// The app listening on it.
        owner: AppId,
    },
    /// The host has no route to the peer.
    #[error("no route to {0}")]
    NoRoute(IpAddr),
    /// Every local port towards the peer is taken.
    #[error("no free local port towards {0}")]
    NoFreePort(SocketAddr),
    /// The engine refused the call.
    #[error(transparent)]
    Conn(#[from] ConnError),
}

/// Counters of one or more connections, computed from the engine's trace
/// events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TcpCounts {
    /// Retransmitted segments (data, SYN or FIN), whatever the cause, not
    /// counting window probes and keep-alives: `retx_timeout + retx_fast`.
    pub retransmissions: u64,
    /// Segments resent because the retransmission timer expired (including
    /// the go-back resends that follow the first one).
    pub retx_timeout: u64,
    /// Segments resent by fast retransmit or SACK-based loss recovery.
    pub retx_fast: u64,
    /// Zero-window probes sent.
    pub window_probes: u64,
    /// Keep-alive probes sent.
    pub keepalive_probes: u64,
    /// Expiries of the retransmission timer.
    pub timeouts: u64,
    /// Duplicate ACKs this end sent.
    pub dup_acks_sent: u64,
    /// Duplicate ACKs this end received.
    pub dup_acks_received: u64,
    /// Retransmissions found to have been unnecessary (Eifel or DSACK).
    pub spurious_retransmissions: u64,
    /// RTT samples taken.
    pub rtt_samples: u64,
}

impl TcpCounts {
    /// Counts one engine trace event.
    pub fn record(&mut self, event: &EngineTrace) {
        match event {
            EngineTrace::Retransmission { cause, .. } => match cause {
                RetransmitCause::Timeout => {
                    self.retx_timeout += 1;
                    self.retransmissions += 1;
                }
                RetransmitCause::FastRetransmit => {
                    self.retx_fast += 1;
                    self.retransmissions += 1;
                }
                RetransmitCause::Probe => self.window_probes += 1,
                RetransmitCause::KeepAlive => self.keepalive_probes += 1,
            },
            EngineTrace::TimerFired {
                timer: TimerKind::Retransmit,
            } => self.timeouts += 1,
            EngineTrace::DupAckSent { .. } => self.dup_acks_sent += 1,
            EngineTrace::DupAckReceived { .. } => self.dup_acks_received += 1,
            EngineTrace::SpuriousRetransmission { .. } => self.spurious_retransmissions += 1,
            EngineTrace::RttSample { .. } => self.rtt_samples += 1,
            _ => {}
        }
    }

    /// Adds another set of counters to this one.
    pub fn add(&mut self, other: &TcpCounts) {
        self.retransmissions += other.retransmissions;
        self.retx_timeout += other.retx_timeout;
        self.retx_fast += other.retx_fast;
        self.window_probes += other.window_probes;
        self.keepalive_probes += other.keepalive_probes;
        self.timeouts += other.timeouts;
        self.dup_acks_sent += other.dup_acks_sent;
        self.dup_acks_received += other.dup_acks_received;
        self.spurious_retransmissions += other.spurious_retransmissions;
        self.rtt_samples += other.rtt_samples;
    }
}

/// The TCP side of an app's report row: its connections' counters summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TcpAppMetrics {
    /// Connections the app opened or accepted.
    pub connections: u64,
    /// Connections the app asked for that its host could not open: no
    /// free local port towards the peer (a real stack's `EADDRNOTAVAIL`)
    /// or no route to it.
    pub connect_errors: u64,
    /// Their counters, summed.
    #[serde(flatten)]
    pub counts: TcpCounts,
    /// State of its most recent connection when the run ended.
    pub final_state: Option<State>,
}

/// One TCP connection of a run, as reported.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowInfo {
    /// The host.
    pub node: NodeId,
    /// The app that owns it (`None` for a connection nobody accepted).
    pub app: Option<AppId>,
    /// Local address and port.
    pub local: SocketAddr,
    /// Remote address and port.
    pub remote: SocketAddr,
    /// Name of the TCP profile it ran with.
    pub profile: String,
    /// Whether this end opened it.
    pub active_open: bool,
    /// State at the end of the run (or when it finished).
    pub state: State,
    /// When it was created.
    pub opened: SimTime,
    /// When it finished, if it did.
    pub closed: Option<SimTime>,
    /// Counters from the trace events.
    pub counts: TcpCounts,
    /// The engine's own counters (segments and bytes).
    pub stats: ConnectionStats,
}

/// A flow's bookkeeping.
pub(crate) struct Flow {
    pub(crate) node: NodeId,
    pub(crate) stack: u32,
    pub(crate) conn: ConnId,
    pub(crate) app: Option<AppId>,
    pub(crate) local: SocketAddr,
    pub(crate) remote: SocketAddr,
    pub(crate) config: TcpConfigId,
    pub(crate) active_open: bool,
    pub(crate) state: State,
    pub(crate) opened: SimTime,
    pub(crate) closed: Option<SimTime>,
    pub(crate) counts: TcpCounts,
    /// Snapshot of the engine's counters, taken when the flow is retired.
    pub(crate) stats: ConnectionStats,
    pub(crate) live: bool,
}

/// The run's TCP state that every host shares: the configurations, the
/// flow table of the report, and the app events waiting to be delivered.
#[derive(Default)]
pub struct TcpRun {
    pub(crate) seed: u64,
    pub(crate) configs: Vec<Arc<Config>>,
    /// The Linux-like profile, registered on first use by a host or app
    /// that was given no configuration.
    pub(crate) fallback: Option<TcpConfigId>,
    pub(crate) flows: Vec<Flow>,
    /// App events waiting to be delivered, in the order they happened.
    pub(crate) notes: VecDeque<(AppId, FlowId, TcpEvent)>,
    /// What the engine records: only what [`TcpCounts`] and flow states
    /// need, unless a trace sink wants everything.
    pub(crate) trace_level: TraceLevel,
    /// [`TcpAppMetrics::connect_errors`] of the apps that had any.
    pub(crate) connect_errors: BTreeMap<AppId, u64>,
}

impl TcpRun {
    /// The shared state of a run seeded `seed`, its stacks recording what
    /// the counters need.
    pub fn new(seed: u64) -> TcpRun {
        TcpRun {
            seed,
            trace_level: TraceLevel::Counters,
            ..TcpRun::default()
        }
    }

    /// Takes the oldest app event waiting to be delivered: (app, flow,
    /// event).
    pub fn next_note(&mut self) -> Option<(AppId, FlowId, TcpEvent)> {
        self.notes.pop_front()
    }

    /// Whether no app event waits.
    pub fn quiet(&self) -> bool {
        self.notes.is_empty()
    }

    pub(crate) fn add_config(&mut self, config: Config) -> TcpConfigId {
        self.configs.push(Arc::new(config));
        TcpConfigId((self.configs.len() - 1) as u32)
    }

    pub(crate) fn config(&self, id: TcpConfigId) -> &Arc<Config> {
        &self.configs[id.0 as usize]
    }

    /// The Linux-like profile, registered on first use.
    pub(crate) fn fallback(&mut self) -> TcpConfigId {
        match self.fallback {
            Some(id) => id,
            None => {
                let id = self.add_config(Config::from_profile(rtolab_tcp::Profile::linux()));
                self.fallback = Some(id);
                id
            }
        }
    }

    /// The open flow `flow` of `app` on `node`.
    pub(crate) fn owned(&self, node: NodeId, app: AppId, flow: FlowId) -> Result<&Flow, TcpError> {
        match self.flows.get(flow.0 as usize) {
            Some(f) if f.live && f.node == node && f.app == Some(app) => Ok(f),
            _ => Err(TcpError::UnknownFlow(flow)),
        }
    }

    /// Counts a connection `app` asked for that its host could not open.
    pub(crate) fn connect_failed(&mut self, app: AppId) {
        *self.connect_errors.entry(app).or_default() += 1;
    }
}
