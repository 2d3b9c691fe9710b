//! An rtolab host: a TCP stack behind the host-stack seam
//! ([`HostStack`]: our engine or smoltcp) as a user-space host with its own
//! IP address, driven by the emulator's clock, running the simulator's own
//! apps ([`rtolab_sim::app`], built by [`rtolab_sim::app::AppKindSpec::build`]).
//!
//! The apps see the host through [`HostCx`], its implementation of
//! [`AppCx`]: their TCP calls go to the stack, timers live in the
//! host until the engine reaches their time, each app draws from the
//! random stream the simulator would give it (`app/<name>`), and datagrams
//! the apps build leave through the host's link like TCP segments. The
//! context also hashes the bytes that bulk senders and TCP sinks pass
//! through it, for the report's SHA-256 digests.
//!
//! Call order (the stack's own): hand it a datagram or a timeout, then
//! [`RtolabHost::drive`] collects every datagram to send and lets the apps
//! react to the connection events, until nothing more happens.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use rtolab_sim::app::{AnyApp, App, AppCx, AppId, AppStats, BindError, Binding, Demux};
use rtolab_sim::node::NodeId;
use rtolab_sim::rng::{component_stream, SimRng};
use rtolab_sim::scenario::{AppKindSpec, AppSpec};
use rtolab_sim::smol::SmolHost;
use rtolab_sim::tcp_layer::{
    BadSegment, FlowId, HostStack, Route, StackCx, StackOutput, TcpCounts, TcpError, TcpEvent,
    TcpRun,
};
use rtolab_sim::trace::AppEvent;
use rtolab_tcp::{Bytes, Config, Connection};
use rtolab_time::SimTime;
use rtolab_wire::packet::{self, Transport};
use sha2::{Digest, Sha256};

use super::engine_host::EngineHost;
use super::{hex_digest, AppResult, EngineAppReport};

/// A timer an app set on an rtolab host, for cancelling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostTimer(u64);

/// The apps' timers of a host, fired in time order and, at one instant,
/// in the order they were set (as the simulator's event queue does).
#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// (when, sequence number) to (app, token).
    queue: BTreeMap<(SimTime, u64), (usize, u64)>,
    next: u64,
}

impl Timers {
    pub(crate) fn set(&mut self, at: SimTime, app: usize, token: u64) -> HostTimer {
        let id = self.next;
        self.next += 1;
        self.queue.insert((at, id), (app, token));
        HostTimer(id)
    }

    pub(crate) fn cancel(&mut self, timer: HostTimer) {
        // Apps rarely cancel and hold few timers: a scan is enough.
        self.queue.retain(|&(_, id), _| id != timer.0);
    }

    pub(crate) fn next_deadline(&self) -> Option<SimTime> {
        self.queue.keys().next().map(|&(at, _)| at)
    }

    /// Takes the earliest timer due at `now`: (app, token).
    pub(crate) fn pop_due(&mut self, now: SimTime) -> Option<(usize, u64)> {
        let entry = self.queue.first_entry().filter(|e| e.key().0 <= now)?;
        Some(entry.remove())
    }

    pub(crate) fn pending(&self, app: usize) -> bool {
        self.queue.values().any(|&(a, _)| a == app)
    }
}

/// The host's side of its apps' calls.
struct Net {
    name: String,
    /// The host's TCP (our engine or smoltcp), behind the seam.
    tcp: Box<dyn HostStack>,
    /// Its app events waiting to be delivered.
    run: TcpRun,
    /// Its next deadline, as of the last drive.
    tcp_deadline: Option<SimTime>,
    addr: Ipv4Addr,
    timers: Timers,
    demux: Demux,
    /// Datagrams apps built, to send; and emptied buffers for reuse.
    outbox: Vec<Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

/// A connection an app accepted.
struct Accepted {
    flow: FlowId,
    /// SHA-256 of what it delivered, for sinks.
    hasher: Option<Sha256>,
    /// The peer closed, or the connection ended.
    ended: bool,
}

/// What the context saw of one app's calls, for its report.
#[derive(Default)]
struct Record {
    connections: u64,
    accepted: Vec<Accepted>,
    /// Hash what accepted connections deliver (TCP sinks).
    hash_received: bool,
    /// The first connection opened and the SHA-256 of what was sent on it
    /// (bulk senders).
    sent: Option<(Option<FlowId>, Sha256)>,
    /// Digests of accepted connections, in the order they ended.
    received: Vec<String>,
    /// Why an accepted connection ended badly.
    failure: Option<&'static str>,
}

impl Record {
    /// Notes that accepted connection `flow` saw `event`, after the app did.
    fn accepted_event(&mut self, flow: FlowId, event: TcpEvent) {
        let Some(i) = self.accepted.iter().position(|a| a.flow == flow) else {
            return;
        };
        let a = &mut self.accepted[i];
        if !a.ended && (event == TcpEvent::PeerClosed || event.is_final()) {
            a.ended = true;
            if let Some(hasher) = a.hasher.take() {
                self.received.push(hex_digest(hasher));
            }
        }
        if matches!(event, TcpEvent::Reset | TcpEvent::TimedOut) {
            self.failure = Some(app_failure(event));
        }
        if event.is_final() {
            self.accepted.remove(i);
        }
    }
}

fn app_failure(event: TcpEvent) -> &'static str {
    match event {
        TcpEvent::Reset => "reset",
        TcpEvent::TimedOut => "timed_out",
        _ => "closed_early",
    }
}

impl Net {
    /// Calls the host's stack at `now`.
    fn stack<R>(
        &mut self,
        now: SimTime,
        call: impl FnOnce(&mut dyn HostStack, &mut StackCx<'_>) -> R,
    ) -> R {
        // The emulator numbers no nodes: the host is the only one its
        // stack serves.
        let mut cx = StackCx::new(now, NodeId(0), &self.name, &mut self.run);
        call(&mut *self.tcp, &mut cx)
    }
}

/// An app's context on an rtolab host, for one hook call.
pub struct HostCx<'a> {
    now: SimTime,
    app: usize,
    net: &'a mut Net,
    rng: &'a mut SimRng,
    record: &'a mut Record,
}

impl AppCx for HostCx<'_> {
    type Timer = HostTimer;

    fn now(&self) -> SimTime {
        self.now
    }

    fn app_id(&self) -> AppId {
        AppId(self.app as u32)
    }

    fn addresses(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        std::iter::once(self.net.addr)
    }

    /// The host has one interface, and everything routes through it.
    fn source_address_for(&self, _dst: Ipv4Addr) -> Option<Ipv4Addr> {
        Some(self.net.addr)
    }

    fn send_with<E>(
        &mut self,
        build: impl FnOnce(&mut Vec<u8>) -> Result<usize, E>,
    ) -> Result<(), E> {
        let mut buf = self.net.spare.pop().unwrap_or_default();
        buf.clear();
        match build(&mut buf) {
            Ok(len) => {
                buf.truncate(len);
                self.net.outbox.push(buf);
                Ok(())
            }
            Err(e) => {
                self.net.spare.push(buf);
                Err(e)
            }
        }
    }

    fn bind(&mut self, binding: Binding) -> Result<(), BindError> {
        self.net.demux.bind(binding, AppId(self.app as u32))
    }

    fn set_timer(&mut self, at: SimTime, token: u64) -> HostTimer {
        self.net.timers.set(at.max(self.now), self.app, token)
    }

    fn cancel_timer(&mut self, timer: HostTimer) {
        self.net.timers.cancel(timer);
    }

    fn rng(&mut self) -> &mut SimRng {
        self.rng
    }

    /// The emulator writes no app traces.
    fn tracing(&self) -> bool {
        false
    }

    fn trace(&mut self, _detail: AppEvent) {}

    fn tcp_listen(&mut self, port: u16) -> Result<(), TcpError> {
        let app = self.app_id();
        self.net
            .stack(self.now, |stack, cx| stack.listen(cx, app, None, port))
    }

    fn tcp_connect_from(
        &mut self,
        remote: impl Into<SocketAddr>,
        port: Option<u16>,
    ) -> Result<FlowId, TcpError> {
        let remote = remote.into();
        let app = self.app_id();
        // The host's link layer is the real one, which tells the RTO
        // policy nothing about the path.
        let route = Route {
            local: Some(self.net.addr.into()),
            path: None,
        };
        let flow = self.net.stack(self.now, |stack, cx| {
            stack.connect(cx, app, None, remote, port, route)
        })?;
        self.record.connections += 1;
        if let Some((first @ None, _)) = &mut self.record.sent {
            *first = Some(flow);
        }
        Ok(flow)
    }

    fn tcp_send(&mut self, flow: FlowId, data: &[u8]) -> Result<usize, TcpError> {
        let app = self.app_id();
        let taken = self
            .net
            .stack(self.now, |stack, cx| stack.send(cx, app, flow, data))?;
        if let Some((Some(first), hasher)) = &mut self.record.sent {
            if *first == flow {
                hasher.update(&data[..taken]);
            }
        }
        Ok(taken)
    }

    fn tcp_send_shared(&mut self, flow: FlowId, data: Bytes) -> Result<usize, TcpError> {
        let app = self.app_id();
        let hashed = match &self.record.sent {
            Some((Some(first), _)) if *first == flow => Some(data.clone()),
            _ => None,
        };
        let taken = self
            .net
            .stack(self.now, |stack, cx| stack.send_shared(cx, app, flow, data))?;
        if let (Some(data), Some((_, hasher))) = (hashed, &mut self.record.sent) {
            hasher.update(&data[..taken]);
        }
        Ok(taken)
    }

    fn tcp_recv(&mut self, flow: FlowId, buf: &mut [u8]) -> Result<usize, TcpError> {
        let app = self.app_id();
        let n = self
            .net
            .stack(self.now, |stack, cx| stack.recv(cx, app, flow, buf))?;
        if self.record.hash_received && n > 0 {
            if let Some(hasher) = self
                .record
                .accepted
                .iter_mut()
                .find(|a| a.flow == flow)
                .and_then(|a| a.hasher.as_mut())
            {
                hasher.update(&buf[..n]);
            }
        }
        Ok(n)
    }

    fn tcp_close(&mut self, flow: FlowId) -> Result<(), TcpError> {
        let app = self.app_id();
        self.net
            .stack(self.now, |stack, cx| stack.close(cx, app, flow))
    }

    fn tcp_abort(&mut self, flow: FlowId) -> Result<(), TcpError> {
        let app = self.app_id();
        self.net
            .stack(self.now, |stack, cx| stack.abort(cx, app, flow))
    }

    fn tcp_connection(&self, flow: FlowId) -> Result<&Connection, TcpError> {
        self.net
            .tcp
            .connection(&self.net.run, Some(self.app_id()), flow)
            .ok_or(TcpError::UnknownFlow(flow))
    }

    fn tcp_send_capacity(&mut self, flow: FlowId) -> Result<usize, TcpError> {
        let app = self.app_id();
        self.net
            .stack(self.now, |stack, cx| stack.send_capacity(cx, app, flow))
    }

    fn tcp_bytes_acked(&mut self, flow: FlowId) -> Result<u64, TcpError> {
        let app = self.app_id();
        self.net
            .stack(self.now, |stack, cx| stack.bytes_acked(cx, app, flow))
    }
}

/// One of the scenario's apps on an rtolab host: the simulator's app, its
/// random stream and what its context recorded.
pub struct RtolabApp {
    /// The scenario's app name.
    pub name: String,
    app: AnyApp,
    /// Whether it finishes on its own (see [`AppKindSpec::is_client`]).
    client: bool,
    rng: SimRng,
    record: Record,
    /// Exchanges asked for (exchange clients), for `completed`.
    exchanges: u64,
}

impl RtolabApp {
    /// The app a scenario entry describes, with the random stream the
    /// simulator gives it in a run seeded `seed`.
    pub fn new(spec: &AppSpec, seed: u64) -> RtolabApp {
        let exchanges = match &spec.kind {
            AppKindSpec::Exchange(e) => u64::from(e.count),
            _ => 0,
        };
        let record = Record {
            hash_received: matches!(spec.kind, AppKindSpec::TcpSink(_)),
            sent: matches!(spec.kind, AppKindSpec::TcpBulk(_)).then(|| (None, Sha256::new())),
            ..Record::default()
        };
        RtolabApp {
            name: spec.name.clone(),
            client: spec.kind.is_client(),
            app: spec.kind.build(),
            rng: component_stream(seed, &format!("app/{}", spec.name)),
            record,
            exchanges,
        }
    }

    /// Whether it opens connections or sends on its own (and so can
    /// finish), rather than serving.
    pub fn is_client(&self) -> bool {
        self.client
    }

    /// The simulator app's counters.
    pub fn stats(&self) -> AppStats {
        self.app.stats()
    }

    /// What it did so far, in the emulator's terms; `timers_pending` says
    /// whether it still has a timer set.
    fn result(&self, timers_pending: bool) -> AppResult {
        let rec = &self.record;
        let served = rec.accepted.iter().all(|a| a.ended) && rec.failure.is_none();
        let mut r = AppResult {
            connections: rec.connections,
            sha256_sent: rec.sent.as_ref().map(|(_, h)| hex_digest(h.clone())),
            sha256_received: rec.received.clone(),
            failure: rec.failure.map(str::to_string),
            ..AppResult::default()
        };
        // Columns apps report under the same names, whatever their kind
        // (so an app added to the registry needs nothing here).
        let stats = self.app.stats();
        let columns = serde_json::to_value(&stats).unwrap_or_default();
        let count = |name: &str| columns[name].as_u64().unwrap_or(0);
        let ms_of = |name: &str| columns[name].as_f64().map(|ns| ns / 1e6);
        r.completed = columns["completed"].as_bool().unwrap_or(false);
        r.bytes_sent = count("bytes_sent");
        r.bytes_received = count("bytes_received");
        r.bytes_corrupt = count("bytes_corrupt");
        r.latency_min_ms = ms_of("latency_min_ns");
        r.latency_mean_ms = ms_of("latency_mean_ns");
        r.latency_max_ms = ms_of("latency_max_ns");
        r.completion_time_ms = ms_of("completion_time_ns");
        if let Some(failure) = columns["failure"].as_str() {
            r.failure = Some(failure.to_string());
        }
        // What a kind names otherwise, or what is derived.
        match stats {
            AppStats::TcpSink(_) => r.completed = served,
            AppStats::Exchange(s) => {
                r.completed = s.exchanges_completed == self.exchanges;
                r.exchanges_completed = s.exchanges_completed;
                r.exchanges_failed = s.exchanges_failed;
            }
            AppStats::ExchangeServer(s) => {
                r.completed = served;
                r.exchanges_completed = s.requests_served;
            }
            AppStats::MessageSeries(s) => {
                r.completed = s.messages_acked == s.messages;
                r.messages_sent = s.messages_sent;
                r.bytes_received = s.response_bytes;
                r.exchanges_completed = s.responses_received;
            }
            AppStats::Cbr(s) => {
                r.completed = !timers_pending;
                r.messages_sent = s.sent_packets;
                r.bytes_sent = s.sent_bytes;
            }
            AppStats::Sink(s) => {
                r.completed = served;
                r.bytes_received = s.received_bytes;
            }
            _ => {}
        }
        r
    }
}

/// The rtolab engine as a host: one stack for the host's address, its
/// apps, and the engine's own counters.
pub struct RtolabHost {
    /// Host name.
    pub name: String,
    net: Net,
    apps: Vec<RtolabApp>,
    started: bool,
    datagram: Vec<u8>,
}

impl RtolabHost {
    /// A host at `addr` running `apps` on a stack configured by `config`;
    /// `seed` makes its sequence numbers reproducible. The apps start at
    /// time zero.
    pub fn new(
        name: &str,
        addr: Ipv4Addr,
        config: Arc<Config>,
        seed: u64,
        apps: Vec<RtolabApp>,
    ) -> RtolabHost {
        let stack = EngineHost::new(addr, config, seed);
        RtolabHost::with_stack(name, addr, Box::new(stack), seed, apps)
    }

    /// A host at `addr/prefix_len` whose apps' TCP is smoltcp's, with
    /// `settings`; `seed` makes its sequence numbers and ports
    /// reproducible.
    pub fn new_smoltcp(
        name: &str,
        addr: Ipv4Addr,
        prefix_len: u8,
        settings: rtolab_smoltcp::Settings,
        seed: u64,
        apps: Vec<RtolabApp>,
    ) -> Result<RtolabHost, rtolab_smoltcp::SettingsError> {
        let smol = SmolHost::new(addr, prefix_len, None, settings, seed)?;
        Ok(RtolabHost::with_stack(
            name,
            addr,
            Box::new(smol),
            seed,
            apps,
        ))
    }

    fn with_stack(
        name: &str,
        addr: Ipv4Addr,
        tcp: Box<dyn HostStack>,
        seed: u64,
        apps: Vec<RtolabApp>,
    ) -> RtolabHost {
        RtolabHost {
            name: name.to_string(),
            net: Net {
                name: name.to_string(),
                tcp,
                run: TcpRun::new(seed),
                tcp_deadline: None,
                addr,
                timers: Timers::default(),
                demux: Demux::default(),
                outbox: Vec::new(),
                spare: Vec::new(),
            },
            apps,
            started: false,
            datagram: Vec::with_capacity(1536),
        }
    }

    /// The host's stack.
    pub fn stack(&self) -> &dyn HostStack {
        &*self.net.tcp
    }

    /// Counters of all its connections, from their trace events, when its
    /// stack keeps them (smoltcp keeps none).
    pub fn counts(&self) -> Option<TcpCounts> {
        self.net.tcp.counts()
    }

    /// Its apps.
    pub fn apps(&self) -> &[RtolabApp] {
        &self.apps
    }

    /// Its apps' reports.
    pub fn app_reports(&self) -> Vec<EngineAppReport> {
        self.apps
            .iter()
            .enumerate()
            .map(|(i, a)| EngineAppReport {
                name: a.name.clone(),
                host: self.name.clone(),
                result: a.result(self.net.timers.pending(i)),
                stats: a.stats(),
            })
            .collect()
    }

    /// Whether every client app has finished: started, no timer left, and
    /// its connections closed down (TIME-WAIT or CLOSED).
    pub fn clients_done(&self) -> bool {
        let flows_gone = |i: usize| {
            self.net
                .tcp
                .connections_over(&self.net.run, AppId(i as u32))
        };
        self.started
            && self
                .apps
                .iter()
                .enumerate()
                .all(|(i, a)| !a.is_client() || (!self.net.timers.pending(i) && flows_gone(i)))
    }

    /// When [`RtolabHost::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        if !self.started {
            return Some(SimTime::ZERO);
        }
        [self.net.timers.next_deadline(), self.net.tcp_deadline]
            .into_iter()
            .flatten()
            .min()
    }

    /// Runs `hook` on app `i` with its context at `now`.
    fn call(&mut self, i: usize, now: SimTime, hook: impl FnOnce(&mut AnyApp, &mut HostCx<'_>)) {
        let app = &mut self.apps[i];
        let mut cx = HostCx {
            now,
            app: i,
            net: &mut self.net,
            rng: &mut app.rng,
            record: &mut app.record,
        };
        hook(&mut app.app, &mut cx);
    }

    /// Hands the host a datagram delivered to it: to the app bound to its
    /// protocol and port, else to the stack. Malformed ones are errors, and
    /// change nothing.
    pub fn handle_datagram(&mut self, now: SimTime, datagram: &[u8]) -> Result<(), BadSegment> {
        if !self.net.demux.is_empty() {
            let parsed = packet::parse(datagram)?;
            let port = match &parsed.transport {
                Transport::Tcp(t) => Some(t.dst_port),
                Transport::Udp(u) => Some(u.dst_port),
                Transport::Other { .. } => None,
            };
            let bound = (parsed.ip.dst == self.net.addr)
                .then(|| self.net.demux.lookup(parsed.ip.protocol, port))
                .flatten();
            if let Some(app) = bound {
                self.call(app.0 as usize, now, |a, cx| a.on_packet(cx, datagram));
                return Ok(());
            }
        }
        self.net
            .stack(now, |stack, cx| stack.input(cx, datagram))
            .map(|_| ())
    }

    /// Starts the apps (the first time), then fires the apps' and the
    /// stack's timers due at `now`.
    pub fn handle_timeout(&mut self, now: SimTime) {
        if !self.started {
            self.started = true;
            for i in 0..self.apps.len() {
                self.call(i, now, |a, cx| a.on_start(cx));
            }
        }
        while let Some((app, token)) = self.net.timers.pop_due(now) {
            self.call(app, now, |a, cx| a.on_timer(cx, token));
        }
        self.net.stack(now, |stack, cx| stack.timeout(cx));
    }

    /// Sends everything the apps and the stack have through `emit` and
    /// lets the apps react to connection events, until all are quiet.
    pub fn drive(&mut self, now: SimTime, mut emit: impl FnMut(&[u8])) {
        loop {
            let mut outbox = std::mem::take(&mut self.net.outbox);
            for datagram in outbox.drain(..) {
                emit(&datagram);
                self.net.spare.push(datagram);
            }
            self.net.outbox = outbox;
            let datagram = &mut self.datagram;
            // The emulator writes no TCP traces.
            while let Some(output) = self
                .net
                .stack(now, |stack, cx| stack.poll_output(cx, datagram))
            {
                if let StackOutput::Datagram = output {
                    emit(datagram);
                }
            }
            if self.net.run.quiet() && self.net.outbox.is_empty() {
                break;
            }
            while let Some((app, flow, event)) = self.net.run.next_note() {
                self.deliver(now, app.0 as usize, flow, event);
            }
        }
        self.net.tcp_deadline = self.net.tcp.next_deadline(now);
    }

    /// Hands app `owner` an event of its flow, noting what the report
    /// needs of accepted connections.
    fn deliver(&mut self, now: SimTime, owner: usize, flow: FlowId, event: TcpEvent) {
        if event == TcpEvent::Connected && self.net.tcp.accepted(&self.net.run, flow) {
            let record = &mut self.apps[owner].record;
            record.connections += 1;
            record.accepted.push(Accepted {
                flow,
                hasher: record.hash_received.then(Sha256::new),
                ended: false,
            });
        }
        self.call(owner, now, |a, cx| a.on_tcp(cx, flow, event));
        self.apps[owner].record.accepted_event(flow, event);
        if event.is_final() {
            self.net.stack(now, |stack, cx| stack.finished(cx, flow));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddrV4;

    fn net() -> Net {
        let config = Arc::new(Config::from_profile(rtolab_tcp::Profile::linux()));
        let addr = Ipv4Addr::new(10, 0, 0, 1);
        Net {
            name: "h".to_string(),
            tcp: Box::new(EngineHost::new(addr, config, 1)),
            run: TcpRun::new(1),
            tcp_deadline: None,
            addr,
            timers: Timers::default(),
            demux: Demux::default(),
            outbox: Vec::new(),
            spare: Vec::new(),
        }
    }

    #[test]
    fn the_context_maps_an_apps_calls_onto_the_stack() {
        let mut net = net();
        let (mut rng, mut record) = (component_stream(1, "app/x"), Record::default());
        let now = SimTime::from_millis(10);
        let peer = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80);
        let mut cx = HostCx {
            now,
            app: 1,
            net: &mut net,
            rng: &mut rng,
            record: &mut record,
        };
        // A chosen source port, on the stack's connection of the new flow.
        let flow = cx.tcp_connect_from(peer, Some(49_200)).unwrap();
        assert_eq!(flow, FlowId(0));
        assert_eq!(cx.tcp_connection(flow).unwrap().local().port(), 49_200);
        assert_eq!(cx.tcp_send(flow, b"hello"), Ok(5));
        cx.tcp_listen(80).unwrap();
        // Timers in the past fire now.
        cx.set_timer(SimTime::ZERO, 9);
        assert_eq!(cx.net.timers.pop_due(now), Some((1, 9)));
        // Another app neither sees the flow nor gets the port.
        let mut other = HostCx { app: 0, ..cx };
        assert_eq!(other.tcp_send(flow, b"x"), Err(TcpError::UnknownFlow(flow)));
        assert_eq!(
            other.tcp_listen(80),
            Err(TcpError::PortInUse {
                port: 80,
                owner: AppId(1)
            })
        );
        assert_eq!(record.connections, 1);
        let engine = net.tcp.as_any().downcast_ref::<EngineHost>().unwrap();
        let (conn, app) = engine.flows.slots[0].unwrap();
        assert_eq!((engine.flows.of_conn(conn), app), (Some((flow, 1)), 1));
        assert_eq!(engine.stack.conn(conn).unwrap().send_queue_len(), 5);
    }

    #[test]
    fn timers_fire_in_time_then_setting_order_and_cancel() {
        let mut timers = Timers::default();
        let t = |ms| SimTime::ZERO + rtolab_time::SimDuration::from_millis(ms);
        timers.set(t(5), 0, 1);
        let cancelled = timers.set(t(3), 1, 2);
        timers.set(t(3), 0, 3);
        timers.set(t(3), 1, 4);
        timers.cancel(cancelled);
        assert_eq!(timers.next_deadline(), Some(t(3)));
        assert!(timers.pending(1));
        assert_eq!(timers.pop_due(t(2)), None);
        assert_eq!(timers.pop_due(t(4)), Some((0, 3)));
        assert_eq!(timers.pop_due(t(4)), Some((1, 4)));
        assert_eq!(timers.pop_due(t(4)), None);
        assert!(!timers.pending(1));
        assert_eq!(timers.pop_due(t(5)), Some((0, 1)));
        assert_eq!(timers.next_deadline(), None);
    }
}
