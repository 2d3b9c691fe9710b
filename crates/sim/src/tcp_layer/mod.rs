//! TCP on simulated hosts: every node's [`HostStack`], the run's shared
//! TCP state, and our engine's implementation of the seam.
//!
//! A node runs our engine ([`EngineHost`]) unless it was given another
//! stack. The engine host gets one [`Stack`] per local address and TCP
//! configuration it uses (usually exactly one). The kernel hands the host's
//! stack every TCP datagram addressed to the host that no raw app has
//! bound, and the time; drains its transmissions into pooled packet
//! buffers; turns its events into [`crate::app::App::on_tcp`] calls and
//! trace records; and keeps a single timer event per host at the stack's
//! next deadline, replaced whenever that deadline moves.
//!
//! Every connection is a *flow* ([`FlowId`]), numbered in the order flows
//! appear in the run: the report's `flows` table and the `flow` field of
//! TCP trace events use that number. Per-flow counters ([`TcpCounts`]) are
//! computed from the engine's typed trace events, whether or not a trace
//! sink is installed, so reports and trace files always agree.

mod engine;
mod flows;
mod seam;

pub use engine::EngineHost;
pub use flows::{
    FlowId, FlowInfo, TcpAppMetrics, TcpConfigId, TcpCounts, TcpError, TcpEvent, TcpRun,
};
pub use seam::{BadSegment, HostStack, Route, StackCx, StackOutput};

use rtolab_tcp::trace::TraceLevel;
use rtolab_tcp::Connection;
use rtolab_time::SimTime;

use crate::node::{AppId, NodeId};

/// The kernel's side of one host: its stack and the single timer event
/// it keeps.
pub(crate) struct HostSlot {
    pub(crate) stack: Box<dyn HostStack>,
    /// The instant of the pending timer event, if any.
    pub(crate) timer_at: Option<SimTime>,
    /// Identifies the pending timer event; older ones are stale.
    pub(crate) generation: u32,
    /// Timer events handled (stale ones excluded).
    pub(crate) wakeups: u64,
    /// The stack may have output or events to collect.
    dirty: bool,
    /// On the kernel's list of hosts to flush (or being flushed).
    listed: bool,
}

/// Every host's stack, the run's shared TCP state, and which hosts need
/// collecting.
pub(crate) struct TcpLayer {
    pub(crate) run: TcpRun,
    pub(crate) hosts: Vec<HostSlot>,
    dirty: Vec<u32>,
    /// Transmit buffer, swapped with pooled packet buffers so no datagram
    /// is copied or allocated.
    pub(crate) buf: Vec<u8>,
}

impl TcpLayer {
    pub(crate) fn new(seed: u64) -> Self {
        TcpLayer {
            run: TcpRun::new(seed),
            hosts: Vec::new(),
            dirty: Vec::new(),
            buf: Vec::with_capacity(1536),
        }
    }

    /// Sets what every stack's connections record, now and later.
    pub(crate) fn set_trace_level(&mut self, level: TraceLevel) {
        self.run.trace_level = level;
        for host in &mut self.hosts {
            host.stack.set_trace_level(level);
        }
    }

    /// Adds a node, running our engine.
    pub(crate) fn add_node(&mut self) {
        self.hosts.push(HostSlot {
            stack: Box::<EngineHost>::default(),
            timer_at: None,
            generation: 0,
            wakeups: 0,
            dirty: false,
            listed: false,
        });
    }

    /// Makes `node` run `stack` instead.
    pub(crate) fn set_stack(&mut self, node: NodeId, mut stack: Box<dyn HostStack>) {
        stack.set_trace_level(self.run.trace_level);
        self.hosts[node.0 as usize].stack = stack;
    }

    /// Calls `call` on `node`'s stack and notes that the host needs
    /// collecting if the stack asked for it.
    pub(crate) fn with_host<R>(
        &mut self,
        now: SimTime,
        node: NodeId,
        node_name: &str,
        call: impl FnOnce(&mut dyn HostStack, &mut StackCx<'_>) -> R,
    ) -> R {
        let mut cx = StackCx::new(now, node, node_name, &mut self.run);
        let out = call(&mut *self.hosts[node.0 as usize].stack, &mut cx);
        if cx.wake {
            self.mark(node);
        }
        out
    }

    /// The next item of `node`'s stack's output, its datagrams written
    /// into [`TcpLayer::buf`].
    pub(crate) fn poll_output(
        &mut self,
        now: SimTime,
        node: NodeId,
        node_name: &str,
    ) -> Option<StackOutput> {
        let mut cx = StackCx::new(now, node, node_name, &mut self.run);
        self.hosts[node.0 as usize]
            .stack
            .poll_output(&mut cx, &mut self.buf)
    }

    /// Notes that `node`'s stack needs collecting.
    pub(crate) fn mark(&mut self, node: NodeId) {
        let host = &mut self.hosts[node.0 as usize];
        host.dirty = true;
        if !host.listed {
            host.listed = true;
            self.dirty.push(node.0);
        }
    }

    /// A host waiting to be flushed; it stays listed until
    /// [`TcpLayer::end_flush`].
    /// Whether a host waits to be flushed.
    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    pub(crate) fn next_dirty(&mut self) -> Option<NodeId> {
        self.dirty.pop().map(NodeId)
    }

    /// Takes the host's dirty flag.
    pub(crate) fn take_dirty(&mut self, node: NodeId) -> bool {
        std::mem::take(&mut self.hosts[node.0 as usize].dirty)
    }

    pub(crate) fn end_flush(&mut self, node: NodeId) {
        self.hosts[node.0 as usize].listed = false;
    }

    /// The open engine connection `flow` of `app` on `node`.
    pub(crate) fn conn(
        &self,
        node: NodeId,
        app: AppId,
        flow: FlowId,
    ) -> Result<&Connection, TcpError> {
        self.run.owned(node, app, flow)?;
        self.hosts[node.0 as usize]
            .stack
            .connection(&self.run, Some(app), flow)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    pub(crate) fn timer_wakeups(&self) -> u64 {
        self.hosts.iter().map(|h| h.wakeups).sum()
    }

    pub(crate) fn flow_count(&self) -> usize {
        self.run.flows.len()
    }

    pub(crate) fn flow_info(&self, flow: FlowId) -> FlowInfo {
        let f = &self.run.flows[flow.0 as usize];
        let live = self.connection(flow);
        FlowInfo {
            node: f.node,
            app: f.app,
            local: f.local,
            remote: f.remote,
            profile: self.run.configs[f.config.0 as usize].profile.name.clone(),
            active_open: f.active_open,
            state: live.map_or(f.state, Connection::state),
            opened: f.opened,
            closed: f.closed,
            counts: f.counts,
            stats: live.map_or(f.stats, Connection::stats),
        }
    }

    /// The connection behind a flow, while it is open.
    pub(crate) fn connection(&self, flow: FlowId) -> Option<&Connection> {
        let f = self.run.flows.get(flow.0 as usize)?;
        if !f.live {
            return None;
        }
        self.hosts[f.node.0 as usize]
            .stack
            .connection(&self.run, None, flow)
    }

    /// The counters of `app`'s flows on `node`, summed.
    pub(crate) fn app_metrics(&self, node: NodeId, app: AppId) -> TcpAppMetrics {
        let mut m = TcpAppMetrics {
            connect_errors: self.run.connect_errors.get(&app).copied().unwrap_or(0),
            ..TcpAppMetrics::default()
        };
        for (i, f) in self.run.flows.iter().enumerate() {
            if f.app == Some(app) {
                m.connections += 1;
                m.counts.add(&f.counts);
                m.final_state = Some(self.flow_info(FlowId(i as u32)).state);
            }
        }
        self.hosts[node.0 as usize].stack.app_metrics(app, &mut m);
        m
    }
}
