//! An rtolab host: the engine's [`Stack`] as a user-space host with its own
//! IP address, driven by the emulator's clock, and the scenario's apps on
//! top of it.
//!
//! Call order (the stack's own): hand it a datagram or a timeout, then
//! [`RtolabHost::drive`] collects every datagram to send and lets the apps
//! react to the connection events, until nothing more happens.

use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use rtolab_sim::app::pattern;
use rtolab_sim::app::REQUEST_HEADER_LEN;
use rtolab_sim::scenario::{AppKindSpec, AppSpec, ExchangeServerSpec, TcpSinkSpec};
use rtolab_sim::tcp::TcpCounts;
use rtolab_tcp::{Config, ConnId, Event, Stack, State};
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::WireError;
use sha2::{Digest, Sha256};

use super::{fill_request, hex_digest, parse_header, AppResult, CHUNK};

/// One of the scenario's apps on an rtolab host.
pub struct RtolabApp {
    /// The scenario's app name.
    pub name: String,
    kind: Kind,
    result: AppResult,
    latencies: Vec<u64>,
}

enum Kind {
    Bulk(Bulk),
    Sink(Sink),
    Exchange(Exchange),
    Server(Server),
    Series(Series),
}

struct Bulk {
    peer: SocketAddrV4,
    bytes: Option<u64>,
    start: Option<SimTime>,
    stop: Option<SimTime>,
    conn: Option<ConnId>,
    opened: SimTime,
    closing: bool,
    ended: bool,
    hasher: Option<Sha256>,
}

struct Sink {
    port: u16,
    conns: BTreeMap<ConnId, (u64, Sha256)>,
}

struct Exchange {
    peer: SocketAddrV4,
    request: u32,
    response: u32,
    count: u32,
    gap: SimDuration,
    /// Write the request only once the handshake completed.
    connect_first: bool,
    next_at: Option<SimTime>,
    started: u32,
    current: Option<Current>,
    /// Finished exchanges' connections, until their close completes.
    closing: Vec<ConnId>,
}

#[derive(Clone, Copy)]
struct Current {
    conn: ConnId,
    opened: SimTime,
    sent: u64,
    received: u64,
}

struct Server {
    port: u16,
    conns: BTreeMap<ConnId, ServerConn>,
}

struct ServerConn {
    header: [u8; REQUEST_HEADER_LEN],
    received: u64,
    lengths: Option<(u64, u64)>,
    sent: u64,
}

struct Series {
    peer: SocketAddrV4,
    sizes: Vec<u32>,
    gaps: Vec<SimDuration>,
    next_at: Option<SimTime>,
    conn: Option<ConnId>,
    released: usize,
    /// Stream offset up to which messages are released.
    queued: u64,
    sent: u64,
    /// (end offset, release time) of messages not yet acknowledged.
    unacked: VecDeque<(u64, SimTime)>,
    closing: bool,
    ended: bool,
}

impl RtolabApp {
    /// The app a scenario entry describes; `None` for kinds an rtolab host
    /// does not run (validation rejects them first).
    pub fn from_spec(spec: &AppSpec) -> Option<RtolabApp> {
        let at = |d: SimDuration| SimTime::ZERO + d;
        let kind = match &spec.kind {
            AppKindSpec::TcpBulk(b) => Kind::Bulk(Bulk {
                peer: b.peer,
                bytes: b.bytes,
                start: Some(at(b.start)),
                stop: b.stop.map(at),
                conn: None,
                opened: SimTime::ZERO,
                closing: false,
                ended: false,
                hasher: Some(Sha256::new()),
            }),
            AppKindSpec::TcpSink(TcpSinkSpec { port }) => Kind::Sink(Sink {
                port: *port,
                conns: BTreeMap::new(),
            }),
            AppKindSpec::Exchange(e) => Kind::Exchange(Exchange {
                peer: e.peer,
                request: e.request.max(REQUEST_HEADER_LEN as u32),
                response: e.response,
                count: e.count,
                gap: e.gap,
                connect_first: e.connect_first,
                next_at: (e.count > 0).then(|| at(e.start)),
                started: 0,
                current: None,
                closing: Vec::new(),
            }),
            AppKindSpec::ExchangeServer(ExchangeServerSpec { port }) => Kind::Server(Server {
                port: *port,
                conns: BTreeMap::new(),
            }),
            AppKindSpec::MessageSeries(m) => Kind::Series(Series {
                peer: m.peer,
                sizes: m.sizes.clone(),
                gaps: m.gaps.clone(),
                next_at: Some(at(m.start)),
                conn: None,
                released: 0,
                queued: 0,
                sent: 0,
                unacked: VecDeque::new(),
                closing: false,
                ended: false,
            }),
            _ => return None,
        };
        Some(RtolabApp {
            name: spec.name.clone(),
            kind,
            result: AppResult::default(),
            latencies: Vec::new(),
        })
    }

    /// The port it accepts connections on, for servers.
    fn listen_port(&self) -> Option<u16> {
        match &self.kind {
            Kind::Sink(s) => Some(s.port),
            Kind::Server(s) => Some(s.port),
            _ => None,
        }
    }

    /// Whether it opens connections (and so can finish).
    pub fn is_client(&self) -> bool {
        self.listen_port().is_none()
    }

    fn next_timer(&self) -> Option<SimTime> {
        match &self.kind {
            Kind::Bulk(b) => match (b.start, b.stop.filter(|_| !b.closing && b.conn.is_some())) {
                (Some(a), _) => Some(a),
                (None, stop) => stop,
            },
            Kind::Exchange(e) => e.next_at,
            Kind::Series(s) => s.next_at,
            Kind::Sink(_) | Kind::Server(_) => None,
        }
    }

    /// Whether a client has finished, its connections closed down.
    fn is_done(&self, stack: &Stack) -> bool {
        let gone = |c: ConnId| {
            stack.conn(c).map_or(true, |c| {
                matches!(c.state(), State::Closed | State::TimeWait)
            })
        };
        match &self.kind {
            Kind::Bulk(b) => b.ended || (b.closing && b.conn.is_some_and(gone)),
            Kind::Exchange(e) => {
                e.started >= e.count && e.current.is_none() && e.closing.iter().all(|&c| gone(c))
            }
            Kind::Series(s) => s.ended || (s.closing && s.conn.is_some_and(gone)),
            Kind::Sink(s) => s.conns.is_empty(),
            Kind::Server(s) => s.conns.is_empty(),
        }
    }

    /// What it did so far.
    pub fn result(&self, stack: &Stack) -> AppResult {
        let mut r = self.result.clone();
        r.set_latencies(&self.latencies);
        r.completed = match &self.kind {
            Kind::Bulk(_) => r.completion_time_ms.is_some(),
            Kind::Exchange(e) => u64::from(e.count) == r.exchanges_completed,
            Kind::Series(s) => s.released == s.sizes.len() && s.unacked.is_empty() && s.closing,
            Kind::Sink(_) | Kind::Server(_) => self.is_done(stack) && r.failure.is_none(),
        };
        if let Kind::Bulk(b) = &self.kind {
            if let Some(h) = &b.hasher {
                r.sha256_sent = Some(hex_digest(h.clone()));
            }
        }
        r
    }
}

/// The rtolab engine as a host: one stack for the host's address, its
/// apps, and the engine's own counters.
pub struct RtolabHost {
    /// Host name.
    pub name: String,
    stack: Stack,
    apps: Vec<RtolabApp>,
    owners: BTreeMap<ConnId, usize>,
    buf: Vec<u8>,
    counts: TcpCounts,
}

impl RtolabHost {
    /// A host at `addr` running `apps` on a stack configured by `config`;
    /// `seed` makes its sequence numbers reproducible.
    pub fn new(
        name: &str,
        addr: Ipv4Addr,
        config: Arc<Config>,
        seed: u64,
        apps: Vec<RtolabApp>,
    ) -> RtolabHost {
        let mut stack = Stack::new(config, addr, seed);
        for app in &apps {
            if let Some(port) = app.listen_port() {
                stack.listen(port);
            }
        }
        RtolabHost {
            name: name.to_string(),
            stack,
            apps,
            owners: BTreeMap::new(),
            buf: vec![0; CHUNK],
            counts: TcpCounts::default(),
        }
    }

    /// The host's engine stack.
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// Engine counters of all its connections, from their trace events.
    pub fn counts(&self) -> TcpCounts {
        self.counts
    }

    /// Its apps.
    pub fn apps(&self) -> &[RtolabApp] {
        &self.apps
    }

    /// Whether every client app has finished.
    pub fn clients_done(&self) -> bool {
        self.apps
            .iter()
            .filter(|a| a.is_client())
            .all(|a| a.is_done(&self.stack))
    }

    /// When [`RtolabHost::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<SimTime> {
        self.apps
            .iter()
            .filter_map(RtolabApp::next_timer)
            .chain(self.stack.poll_timeout())
            .min()
    }

    /// Hands the stack a datagram delivered to the host. Malformed ones are
    /// errors, and change nothing.
    pub fn handle_datagram(&mut self, now: SimTime, datagram: &[u8]) -> Result<(), WireError> {
        self.stack.handle_datagram(now, datagram)
    }

    /// Fires the apps' and the stack's timers due at `now`.
    pub fn handle_timeout(&mut self, now: SimTime) {
        for i in 0..self.apps.len() {
            if self.apps[i].next_timer().is_some_and(|t| t <= now) {
                self.on_timer(now, i);
            }
        }
        self.stack.handle_timeout(now);
    }

    /// Sends everything the stack has through `emit` and lets the apps
    /// react to connection events, until both are quiet.
    pub fn drive(&mut self, now: SimTime, mut emit: impl FnMut(&[u8])) {
        let mut datagram = Vec::with_capacity(1536);
        loop {
            while let Some(len) = self.stack.poll_transmit(now, &mut datagram) {
                emit(&datagram[..len.min(datagram.len())]);
            }
            let mut any = false;
            while let Some((conn, event)) = self.stack.poll_event() {
                any = true;
                self.on_event(now, conn, event);
            }
            if !any {
                break;
            }
        }
    }

    fn on_timer(&mut self, now: SimTime, i: usize) {
        let stack = &mut self.stack;
        let app = &mut self.apps[i];
        let mut opened = None;
        match &mut app.kind {
            Kind::Bulk(b) => {
                if b.start.is_some_and(|t| t <= now) {
                    b.start = None;
                    let conn = stack.connect(now, b.peer);
                    b.conn = Some(conn);
                    b.opened = now;
                    opened = Some(conn);
                    app.result.connections += 1;
                    bulk_fill(b, &mut app.result, stack, now, &mut self.buf);
                } else if b.stop.is_some_and(|t| t <= now) {
                    b.stop = None;
                    if let Some(conn) = b.conn.filter(|_| !b.closing) {
                        b.closing = true;
                        if let Some(c) = stack.conn_mut(conn) {
                            c.close(now);
                        }
                    }
                }
            }
            Kind::Exchange(e) => {
                e.next_at = None;
                e.started += 1;
                let conn = stack.connect(now, e.peer);
                opened = Some(conn);
                app.result.connections += 1;
                e.current = Some(Current {
                    conn,
                    opened: now,
                    sent: 0,
                    received: 0,
                });
                if !e.connect_first {
                    exchange_push(e, &mut app.result, stack, &mut self.buf);
                }
            }
            Kind::Series(s) => {
                if s.conn.is_none() {
                    let conn = stack.connect(now, s.peer);
                    s.conn = Some(conn);
                    opened = Some(conn);
                    app.result.connections += 1;
                }
                // Release every message due by now.
                while let Some(t) = s.next_at.filter(|&t| t <= now) {
                    let size = u64::from(s.sizes[s.released]);
                    s.queued += size;
                    s.unacked.push_back((s.queued, t));
                    app.result.messages_sent += 1;
                    s.released += 1;
                    s.next_at = (s.released < s.sizes.len()).then(|| {
                        let gap = if s.gaps.is_empty() {
                            SimDuration::ZERO
                        } else {
                            s.gaps[(s.released - 1) % s.gaps.len()]
                        };
                        t + gap
                    });
                }
                series_fill(s, &mut app.result, stack, now, &mut self.buf);
            }
            Kind::Sink(_) | Kind::Server(_) => {}
        }
        if let Some(conn) = opened {
            self.owners.insert(conn, i);
        }
    }

    fn on_event(&mut self, now: SimTime, conn: ConnId, event: Event) {
        if let Event::Trace(trace) = &event {
            self.counts.record(&trace.event);
            return;
        }
        let owner = match self.owners.get(&conn) {
            Some(&i) => i,
            None if event == Event::Connected => {
                // A passive open: hand it to the app listening on its port.
                let Some(port) = self.stack.conn(conn).map(|c| c.local().port()) else {
                    return;
                };
                let Some(i) = self.apps.iter().position(|a| a.listen_port() == Some(port)) else {
                    return;
                };
                // Keep the accept queue short: the connection is owned now.
                while self.stack.accept(port).is_some() {}
                self.owners.insert(conn, i);
                self.apps[i].result.connections += 1;
                match &mut self.apps[i].kind {
                    Kind::Sink(s) => {
                        s.conns.insert(conn, (0, Sha256::new()));
                    }
                    Kind::Server(s) => {
                        s.conns.insert(
                            conn,
                            ServerConn {
                                header: [0; REQUEST_HEADER_LEN],
                                received: 0,
                                lengths: None,
                                sent: 0,
                            },
                        );
                    }
                    _ => {}
                }
                i
            }
            None => return,
        };
        let finished = matches!(event, Event::Closed | Event::Reset | Event::TimedOut);
        let failure = match event {
            Event::Reset => Some("reset"),
            Event::TimedOut => Some("timed_out"),
            _ => None,
        };
        let stack = &mut self.stack;
        let buf = &mut self.buf;
        let app = &mut self.apps[owner];
        let result = &mut app.result;
        match &mut app.kind {
            Kind::Bulk(b) => {
                match event {
                    Event::Connected | Event::Writable => bulk_fill(b, result, stack, now, buf),
                    Event::Readable => drain(stack, conn, buf),
                    _ => {}
                }
                bulk_check_acked(b, result, stack, now);
                if finished {
                    b.ended = true;
                    if result.completion_time_ms.is_none() {
                        result.failure = Some(failure.unwrap_or("closed_early").to_string());
                    }
                }
            }
            Kind::Sink(s) => {
                if matches!(event, Event::Readable | Event::PeerClosed) {
                    if let Some((offset, hasher)) = s.conns.get_mut(&conn) {
                        read_checked(stack, conn, buf, offset, hasher, result);
                    }
                }
                if event == Event::PeerClosed {
                    if let Some(c) = stack.conn_mut(conn) {
                        c.close(now);
                    }
                }
                if finished || event == Event::PeerClosed {
                    if let Some((_, hasher)) = s.conns.remove(&conn) {
                        result.sha256_received.push(hex_digest(hasher));
                    }
                    if let Some(f) = failure {
                        result.failure = Some(f.to_string());
                    }
                }
            }
            Kind::Exchange(e) => {
                let current = e.current.filter(|c| c.conn == conn);
                if current.is_some() {
                    match event {
                        Event::Connected | Event::Writable => exchange_push(e, result, stack, buf),
                        Event::Readable | Event::PeerClosed => {
                            exchange_read(e, result, &mut app.latencies, stack, now, buf)
                        }
                        _ => {}
                    }
                    // Still current after reading: the exchange cannot finish.
                    let stuck = e.current.is_some_and(|c| c.conn == conn)
                        && (finished || event == Event::PeerClosed);
                    if stuck {
                        result.exchanges_failed += 1;
                        result.failure = Some(failure.unwrap_or("peer_closed_early").to_string());
                        if let Some(c) = stack.conn_mut(conn) {
                            c.close(now);
                        }
                        e.current = None;
                        e.closing.push(conn);
                        schedule_next(e, now);
                    }
                }
                if finished {
                    e.closing.retain(|&c| c != conn);
                }
            }
            Kind::Server(s) => {
                if let Some(sc) = s.conns.get_mut(&conn) {
                    match event {
                        Event::Connected | Event::Readable | Event::Writable => {
                            server_read(sc, result, stack, conn, buf);
                            server_respond(sc, result, stack, conn, buf);
                        }
                        Event::PeerClosed => {
                            server_read(sc, result, stack, conn, buf);
                            server_respond(sc, result, stack, conn, buf);
                            if let Some(c) = stack.conn_mut(conn) {
                                c.close(now);
                            }
                        }
                        _ => {}
                    }
                }
                if finished {
                    s.conns.remove(&conn);
                    if let Some(f) = failure {
                        result.failure = Some(f.to_string());
                    }
                }
            }
            Kind::Series(s) => {
                match event {
                    Event::Connected | Event::Writable => series_fill(s, result, stack, now, buf),
                    Event::Readable => drain(stack, conn, buf),
                    _ => {}
                }
                series_acked(s, &mut app.latencies, stack, now);
                if finished {
                    s.ended = true;
                    if !s.unacked.is_empty() || s.released < s.sizes.len() {
                        result.failure = Some(failure.unwrap_or("closed_early").to_string());
                    }
                }
            }
        }
        if finished {
            self.owners.remove(&conn);
        }
    }
}

/// Reads and discards whatever arrived (senders' peers send nothing).
fn drain(stack: &mut Stack, conn: ConnId, buf: &mut [u8]) {
    if let Some(c) = stack.conn_mut(conn) {
        while c.recv(buf) > 0 {}
    }
}

/// Reads what arrived, checking it against the pattern stream.
fn read_checked(
    stack: &mut Stack,
    conn: ConnId,
    buf: &mut [u8],
    offset: &mut u64,
    hasher: &mut Sha256,
    result: &mut AppResult,
) {
    let Some(c) = stack.conn_mut(conn) else {
        return;
    };
    loop {
        let n = c.recv(buf);
        if n == 0 {
            break;
        }
        result.bytes_corrupt += pattern::mismatches(*offset, &buf[..n]);
        hasher.update(&buf[..n]);
        *offset += n as u64;
        result.bytes_received += n as u64;
    }
}

fn bulk_fill(
    b: &mut Bulk,
    result: &mut AppResult,
    stack: &mut Stack,
    now: SimTime,
    buf: &mut [u8],
) {
    let Some(conn) = b.conn else { return };
    let Some(c) = stack.conn_mut(conn) else {
        return;
    };
    while !b.closing {
        let remaining = b.bytes.map_or(u64::MAX, |n| n - result.bytes_sent.min(n));
        if remaining == 0 {
            b.closing = true;
            c.close(now);
            break;
        }
        let n = (remaining.min(CHUNK as u64) as usize).min(c.send_capacity());
        if n == 0 {
            break;
        }
        pattern::fill(result.bytes_sent, &mut buf[..n]);
        let Ok(k) = c.send(&buf[..n]) else { break };
        if let Some(h) = b.hasher.as_mut() {
            h.update(&buf[..k]);
        }
        result.bytes_sent += k as u64;
        if k < n {
            break;
        }
    }
}

fn bulk_check_acked(b: &Bulk, result: &mut AppResult, stack: &Stack, now: SimTime) {
    let Some(c) = b.conn.and_then(|id| stack.conn(id)) else {
        return;
    };
    if result.completion_time_ms.is_none()
        && b.closing
        && c.stats().bytes_acked >= result.bytes_sent
    {
        result.completion_time_ms = Some(now.saturating_since(b.opened).as_nanos() as f64 / 1e6);
    }
}

fn schedule_next(e: &mut Exchange, now: SimTime) {
    if e.started < e.count {
        e.next_at = Some(now + e.gap);
    }
}

fn exchange_push(e: &mut Exchange, result: &mut AppResult, stack: &mut Stack, buf: &mut [u8]) {
    let Some(cur) = e.current.as_mut() else {
        return;
    };
    let Some(c) = stack.conn_mut(cur.conn) else {
        return;
    };
    let total = u64::from(e.request);
    while cur.sent < total {
        let n = ((total - cur.sent).min(CHUNK as u64) as usize).min(c.send_capacity());
        if n == 0 {
            return;
        }
        fill_request(cur.sent, e.request, e.response, &mut buf[..n]);
        let Ok(k) = c.send(&buf[..n]) else { return };
        cur.sent += k as u64;
        result.bytes_sent += k as u64;
        if k < n {
            return;
        }
    }
}

fn exchange_read(
    e: &mut Exchange,
    result: &mut AppResult,
    latencies: &mut Vec<u64>,
    stack: &mut Stack,
    now: SimTime,
    buf: &mut [u8],
) {
    let Some(mut cur) = e.current else { return };
    let Some(c) = stack.conn_mut(cur.conn) else {
        return;
    };
    loop {
        let n = c.recv(buf);
        if n == 0 {
            break;
        }
        result.bytes_corrupt += pattern::mismatches(cur.received, &buf[..n]);
        cur.received += n as u64;
        result.bytes_received += n as u64;
    }
    e.current = Some(cur);
    if cur.received >= u64::from(e.response) {
        latencies.push(now.saturating_since(cur.opened).as_nanos());
        result.exchanges_completed += 1;
        c.close(now);
        e.current = None;
        e.closing.push(cur.conn);
        schedule_next(e, now);
    }
}

fn server_read(
    sc: &mut ServerConn,
    result: &mut AppResult,
    stack: &mut Stack,
    conn: ConnId,
    buf: &mut [u8],
) {
    let Some(c) = stack.conn_mut(conn) else {
        return;
    };
    loop {
        let n = c.recv(buf);
        if n == 0 {
            break;
        }
        result.bytes_received += n as u64;
        let mut data = &buf[..n];
        while sc.received < REQUEST_HEADER_LEN as u64 && !data.is_empty() {
            sc.header[sc.received as usize] = data[0];
            sc.received += 1;
            data = &data[1..];
        }
        if sc.lengths.is_none() && sc.received == REQUEST_HEADER_LEN as u64 {
            sc.lengths = Some(parse_header(&sc.header));
        }
        if !data.is_empty() {
            result.bytes_corrupt += pattern::mismatches(sc.received, data);
            sc.received += data.len() as u64;
        }
    }
}

fn server_respond(
    sc: &mut ServerConn,
    result: &mut AppResult,
    stack: &mut Stack,
    conn: ConnId,
    buf: &mut [u8],
) {
    let Some((request, response)) = sc.lengths else {
        return;
    };
    if sc.received < request || sc.sent >= response {
        return;
    }
    let Some(c) = stack.conn_mut(conn) else {
        return;
    };
    while sc.sent < response {
        let n = ((response - sc.sent).min(CHUNK as u64) as usize).min(c.send_capacity());
        if n == 0 {
            return;
        }
        pattern::fill(sc.sent, &mut buf[..n]);
        let Ok(k) = c.send(&buf[..n]) else { return };
        sc.sent += k as u64;
        result.bytes_sent += k as u64;
        if sc.sent == response {
            result.exchanges_completed += 1;
        }
        if k < n {
            return;
        }
    }
}

fn series_fill(
    s: &mut Series,
    result: &mut AppResult,
    stack: &mut Stack,
    now: SimTime,
    buf: &mut [u8],
) {
    let Some(c) = s.conn.and_then(|id| stack.conn_mut(id)) else {
        return;
    };
    while s.sent < s.queued {
        let n = ((s.queued - s.sent).min(CHUNK as u64) as usize).min(c.send_capacity());
        if n == 0 {
            return;
        }
        pattern::fill(s.sent, &mut buf[..n]);
        let Ok(k) = c.send(&buf[..n]) else { return };
        s.sent += k as u64;
        result.bytes_sent += k as u64;
        if k < n {
            return;
        }
    }
    if s.released == s.sizes.len() && !s.closing {
        s.closing = true;
        c.close(now);
    }
}

fn series_acked(s: &mut Series, latencies: &mut Vec<u64>, stack: &Stack, now: SimTime) {
    let Some(c) = s.conn.and_then(|id| stack.conn(id)) else {
        return;
    };
    let acked = c.stats().bytes_acked;
    while let Some(&(end, released)) = s.unacked.front() {
        if acked < end {
            break;
        }
        latencies.push(now.saturating_since(released).as_nanos());
        s.unacked.pop_front();
    }
}
