//! TCP apps on simulated hosts: every byte arrives intact with every
//! profile over a lossy link, hosts share one stack per profile, the
//! kernel wakes each host exactly at its TCP deadlines, and the counters
//! computed from traces agree with the engine's own.

use std::sync::{Arc, Mutex};

use rtolab_sim::app::{AnyApp, App, AppContext, AppCx, AppStats};
use rtolab_sim::node::NodeId;
use rtolab_sim::run::{build_simulator, report};
use rtolab_sim::tcp_layer::{FlowId, TcpEvent};
use rtolab_sim::trace::{MemorySink, TraceEvent};
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario, SimTime};
use rtolab_tcp::trace::{TimerKind, TraceEvent as EngineTrace};
use rtolab_tcp::State;

const BULK_BYTES: u64 = 60_000;
const MESSAGES: [u64; 5] = [100, 3000, 20_000, 1, 1460];

/// Two hosts on a lossy link running every TCP app kind, with `profile`
/// on both hosts (`extra` is appended to the file).
fn all_apps(profile: &str, loss: f64, extra: &str) -> String {
    format!(
        r#"
name = "tcp-apps-{profile}"
duration = "900s"

[[host]]
name = "a"
profile = "{profile}"

[[host]]
name = "b"
profile = "{profile}"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [
  {{ host = "a", address = "10.0.0.1/24" }},
  {{ host = "b", address = "10.0.0.2/24" }},
]
rate = "2Mbps"
delay = "10ms"
queue = 1000
loss = {loss}

[[app]]
kind = "tcp-sink"
name = "bulk-sink"
host = "b"
port = 5001

[[app]]
kind = "exchange-server"
name = "server"
host = "b"
port = 80

[[app]]
kind = "tcp-sink"
name = "series-sink"
host = "b"
port = 5002

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "a"
peer = "10.0.0.2:5001"
bytes = {BULK_BYTES}
start = "10ms"

[[app]]
kind = "exchange"
name = "client"
host = "a"
peer = "10.0.0.2:80"
request = 700
response = 5000
count = 3
gap = "100ms"
start = "20ms"

[[app]]
kind = "message-series"
name = "series"
host = "a"
peer = "10.0.0.2:5002"
sizes = [{sizes}]
gaps = ["50ms", "300ms"]
start = "30ms"
{extra}
"#,
        sizes = MESSAGES.map(|m| m.to_string()).join(", ")
    )
}

fn app<'a>(report: &'a RunReport, name: &str) -> &'a AppStats {
    &report.apps.iter().find(|a| a.name == name).unwrap().stats
}

#[track_caller]
fn assert_all_delivered(report: &RunReport) {
    let what = &report.name;
    let AppStats::TcpSink(sink) = app(report, "bulk-sink") else {
        panic!()
    };
    assert_eq!(sink.bytes_received, BULK_BYTES, "{what}: {sink:?}");
    assert_eq!(sink.bytes_corrupt, 0, "{what}");
    assert_eq!(sink.connections_finished, 1, "{what}");
    let AppStats::TcpBulk(bulk) = app(report, "bulk") else {
        panic!()
    };
    assert!(bulk.completed, "{what}: {bulk:?}");
    assert_eq!(bulk.bytes_acked, BULK_BYTES);
    assert!(bulk.completion_time_ns.is_some_and(|t| t > 0));

    let AppStats::Exchange(client) = app(report, "client") else {
        panic!()
    };
    assert_eq!(
        (client.exchanges_completed, client.exchanges_failed),
        (3, 0),
        "{what}: {client:?}"
    );
    assert_eq!(client.bytes_received, 3 * 5000);
    assert_eq!(client.bytes_corrupt, 0);
    assert!(client.latency_min_ns <= client.latency_max_ns);
    let AppStats::ExchangeServer(server) = app(report, "server") else {
        panic!()
    };
    assert_eq!(server.requests_served, 3, "{what}: {server:?}");
    assert_eq!(server.bytes_received, 3 * 700);
    assert_eq!((server.bytes_corrupt, server.bad_requests), (0, 0));

    let AppStats::MessageSeries(series) = app(report, "series") else {
        panic!()
    };
    assert_eq!(
        series.messages_acked,
        MESSAGES.len() as u64,
        "{what}: {series:?}"
    );
    let total: u64 = MESSAGES.iter().sum();
    assert_eq!(series.bytes_acked, total);
    let AppStats::TcpSink(sink) = app(report, "series-sink") else {
        panic!()
    };
    assert_eq!(
        (sink.bytes_received, sink.bytes_corrupt),
        (total, 0),
        "{what}"
    );

    // Every connection ended cleanly (the side that closed first may still
    // wait in TIME-WAIT).
    assert_eq!(report.flows.len(), 2 * (1 + 3 + 1), "{what}");
    for f in &report.flows {
        assert!(
            matches!(f.state, State::Closed | State::TimeWait),
            "{what}: {f:?}"
        );
    }
}

#[test]
fn every_app_delivers_intact_with_every_profile_over_a_lossy_link() {
    for profile in rtolab_tcp::Profile::NAMES {
        let scenario = Scenario::from_toml_str(&all_apps(profile, 0.05, "")).unwrap();
        let mut retransmissions = 0;
        for seed in 1..=3 {
            let opts = RunOptions {
                seed: Some(seed),
                ..RunOptions::default()
            };
            let report = run_scenario(&scenario, &opts).unwrap();
            assert_all_delivered(&report);
            retransmissions += report
                .apps
                .iter()
                .filter_map(|a| a.tcp)
                .map(|t| t.counts.retransmissions)
                .sum::<u64>();
            for f in &report.flows {
                assert_eq!(f.profile, profile);
            }
        }
        assert!(retransmissions > 0, "{profile}: the loss never bit");
    }
}

/// Runs a scenario in memory with an in-memory trace.
fn run_traced(text: &str, seed: u64) -> (rtolab_sim::Simulator, Vec<(SimTime, TraceEvent)>) {
    let scenario = Scenario::from_toml_str(text).unwrap();
    let mut sim = build_simulator(&scenario, seed).unwrap();
    let sink = MemorySink::new();
    sim.set_trace_sink(Box::new(sink.clone()));
    sim.run_until(SimTime::ZERO + scenario.duration).unwrap();
    (sim, sink.events())
}

#[test]
fn trace_counts_agree_with_the_engines_counters() {
    for profile in ["linux", "lwip"] {
        let (sim, events) = run_traced(&all_apps(profile, 0.05, ""), 4);
        for i in 0..sim.flow_count() {
            let f = sim.flow(FlowId(i as u32));
            let (c, s) = (f.counts, f.stats);
            let what = format!("{profile} flow {i}: {c:?} {s:?}");
            assert_eq!(c.retransmissions, s.retransmissions, "{what}");
            assert_eq!(c.timeouts, s.timeouts, "{what}");
            assert_eq!(c.dup_acks_sent, s.dup_acks_sent, "{what}");
            assert_eq!(c.dup_acks_received, s.dup_acks_received, "{what}");
            assert_eq!(
                c.spurious_retransmissions, s.spurious_retransmissions,
                "{what}"
            );
        }
        // The trace holds exactly the events the counters were made from.
        let traced = events
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    TraceEvent::Tcp { detail, .. }
                        if matches!(detail.0, EngineTrace::Retransmission { .. })
                )
            })
            .count() as u64;
        let report = report(&sim, "t", Vec::new());
        let counted: u64 = report
            .flows
            .iter()
            .map(|f| f.counts.retransmissions + f.counts.window_probes + f.counts.keepalive_probes)
            .sum();
        assert_eq!(traced, counted, "{profile}");
        assert!(counted > 0);
    }
}

#[test]
fn counters_and_flow_states_do_not_depend_on_a_trace_sink() {
    // Without a sink the engine records only the events counters are kept
    // from; the report must not change.
    for profile in ["linux", "lwip", "uip", "rfc"] {
        let text = all_apps(profile, 0.05, "");
        let (traced, _) = run_traced(&text, 4);
        let scenario = Scenario::from_toml_str(&text).unwrap();
        let mut quiet = build_simulator(&scenario, 4).unwrap();
        quiet.run_until(SimTime::ZERO + scenario.duration).unwrap();
        let mut with_sink = report(&traced, "t", Vec::new());
        let mut without = report(&quiet, "t", Vec::new());
        assert!(with_sink.flows.iter().any(|f| f.counts.rtt_samples > 0));
        // Only the work done differs: with nothing listening, links are
        // not woken to announce transmission starts.
        assert!(without.events_processed < with_sink.events_processed);
        with_sink.events_processed = 0;
        without.events_processed = 0;
        assert_eq!(with_sink, without, "{profile}");
    }
}

#[test]
fn hosts_are_woken_only_at_tcp_deadlines() {
    for profile in ["linux", "lwip", "uip"] {
        let (sim, events) = run_traced(&all_apps(profile, 0.05, ""), 2);
        let fired = events
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    TraceEvent::Tcp { detail, .. } if matches!(detail.0, EngineTrace::TimerFired { .. })
                )
            })
            .count() as u64;
        let wakeups = sim.tcp_timer_wakeups();
        // Each wakeup fires at least one engine timer: no early, repeated
        // or leftover wakeups.
        assert!(wakeups > 0, "{profile}");
        assert!(
            wakeups <= fired,
            "{profile}: {wakeups} wakeups, {fired} timers fired"
        );
        // And nothing is left pending once every connection is gone.
        let retransmit_timers = events
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    TraceEvent::Tcp { detail, .. }
                        if detail.0 == (EngineTrace::TimerFired { timer: TimerKind::Retransmit })
                )
            })
            .count();
        assert!(
            retransmit_timers > 0,
            "{profile}: no retransmission timeout"
        );
    }
}

#[test]
fn an_app_can_run_its_own_profile_beside_the_hosts() {
    let text = all_apps(
        "linux",
        0.02,
        r#"
[[app]]
kind = "tcp-bulk"
name = "small"
host = "a"
peer = "10.0.0.2:5001"
bytes = 5000
start = "40ms"
profile = "lwip"

[app.tcp]
mss = 536
"#,
    );
    let report = run_scenario(
        &Scenario::from_toml_str(&text).unwrap(),
        &RunOptions::default(),
    )
    .unwrap();
    let AppStats::TcpBulk(small) = app(&report, "small") else {
        panic!()
    };
    assert!(small.completed, "{small:?}");
    let AppStats::TcpSink(sink) = app(&report, "bulk-sink") else {
        panic!()
    };
    assert_eq!(sink.connections_accepted, 2);
    assert_eq!(sink.bytes_received, BULK_BYTES + 5000);
    assert_eq!(sink.bytes_corrupt, 0);
    let small_flow = report
        .flows
        .iter()
        .find(|f| f.app.as_deref() == Some("small"))
        .unwrap();
    assert_eq!(small_flow.profile, "lwip");
    // The lwIP stack and the host's Linux stack share the address; each
    // picks ports from the same range, so the host must keep their 4-tuples
    // apart (both connections go to the same sink).
    let mut tuples: Vec<(&str, &str)> = report
        .flows
        .iter()
        .filter(|f| f.host == "a")
        .map(|f| (f.local.as_str(), f.remote.as_str()))
        .collect();
    let n = tuples.len();
    tuples.sort();
    tuples.dedup();
    assert_eq!(tuples.len(), n, "{tuples:?}");
    let bulk_flow = report
        .flows
        .iter()
        .find(|f| f.app.as_deref() == Some("bulk"))
        .unwrap();
    assert_eq!(bulk_flow.remote, small_flow.remote);
    assert_ne!(bulk_flow.local, small_flow.local);
    // The sink accepted it with its own (the host's) profile.
    let accepted = report
        .flows
        .iter()
        .find(|f| f.host == "b" && f.remote == small_flow.local)
        .unwrap();
    assert_eq!(accepted.profile, "linux");
}

/// A custom app that connects to `peer` and records what it hears.
struct Prober {
    peer: std::net::SocketAddrV4,
    heard: Arc<Mutex<Vec<TcpEvent>>>,
}

impl App<AppContext<'_>> for Prober {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        cx.tcp_connect(self.peer).unwrap();
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn on_tcp(&mut self, _: &mut AppContext<'_>, _: FlowId, event: TcpEvent) {
        self.heard.lock().unwrap().push(event);
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::Value::Null)
    }
}

#[test]
fn custom_apps_use_tcp_and_dead_ports_answer_with_a_reset() {
    let scenario = Scenario::from_toml_str(&all_apps("rfc", 0.0, "")).unwrap();
    let mut sim = build_simulator(&scenario, 1).unwrap();
    let a = NodeId(0);
    let mut connect = |port: u16| {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let prober = Prober {
            peer: format!("10.0.0.2:{port}").parse().unwrap(),
            heard: heard.clone(),
        };
        sim.add_app(
            a,
            &format!("prober-{port}"),
            AnyApp::Custom(Box::new(prober)),
        );
        heard
    };
    let open = connect(5001);
    let closed = connect(4999);
    sim.run_until(SimTime::from_secs(2)).unwrap();
    assert_eq!(open.lock().unwrap().first(), Some(&TcpEvent::Connected));
    assert_eq!(*closed.lock().unwrap(), [TcpEvent::Reset]);
    let flows: Vec<_> = (0..sim.flow_count() as u32)
        .map(|i| sim.flow(FlowId(i)))
        .filter(|f| f.remote.port() == 4999)
        .collect();
    assert_eq!(
        flows.len(),
        1,
        "the reset came from b's stack, not a connection"
    );
    assert_eq!(flows[0].state, State::Closed);
    assert!(flows[0].closed.is_some());
}

/// Sends `data` with `tcp_send_shared`, as slices of one shared chunk.
struct SharedSender {
    peer: std::net::SocketAddrV4,
    data: rtolab_tcp::Bytes,
    sent: usize,
}

impl SharedSender {
    fn fill(&mut self, cx: &mut AppContext<'_>, flow: FlowId) {
        while self.sent < self.data.len() {
            match cx.tcp_send_shared(flow, self.data.slice(self.sent..)) {
                Ok(n) if n > 0 => self.sent += n,
                _ => break,
            }
        }
        if self.sent == self.data.len() {
            let _ = cx.tcp_close(flow);
        }
    }
}

impl App<AppContext<'_>> for SharedSender {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        if let Ok(flow) = cx.tcp_connect(self.peer) {
            self.fill(cx, flow);
        }
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, event: TcpEvent) {
        if matches!(event, TcpEvent::Connected | TcpEvent::Writable) {
            self.fill(cx, flow);
        }
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::json!({ "sent": self.sent }))
    }
}

/// Collects every byte it receives.
struct Collector {
    received: Arc<Mutex<Vec<u8>>>,
}

impl App<AppContext<'_>> for Collector {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        cx.tcp_listen(7000).unwrap();
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn on_tcp(&mut self, cx: &mut AppContext<'_>, flow: FlowId, _: TcpEvent) {
        let mut buf = [0u8; 1000];
        while let Ok(n) = cx.tcp_recv(flow, &mut buf) {
            if n == 0 {
                break;
            }
            self.received.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        let finished = cx
            .tcp_connection(flow)
            .is_ok_and(|c| c.is_recv_finished() && c.state() == State::CloseWait);
        if finished {
            let _ = cx.tcp_close(flow);
        }
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::Value::Null)
    }
}

#[test]
fn shared_sends_arrive_intact_over_a_lossy_link() {
    use rtolab_sim::link::P2pConfig;
    use rtolab_sim::{Ipv4Cidr, SimDuration, Simulator};

    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let mut sim = Simulator::new(9);
    let (a, b) = (sim.add_node("a"), sim.add_node("b"));
    let link = sim.add_point_to_point(
        "ab",
        P2pConfig {
            rate_bps: 10_000_000,
            delay: SimDuration::from_millis(5),
            queue_capacity: 20,
            loss: 0.02,
        },
    );
    sim.attach(a, link, "10.0.0.1/24".parse::<Ipv4Cidr>().unwrap())
        .unwrap();
    sim.attach(b, link, "10.0.0.2/24".parse::<Ipv4Cidr>().unwrap())
        .unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    sim.add_app(
        b,
        "collector",
        AnyApp::Custom(Box::new(Collector {
            received: received.clone(),
        })),
    );
    sim.add_app(
        a,
        "sender",
        AnyApp::Custom(Box::new(SharedSender {
            peer: "10.0.0.2:7000".parse().unwrap(),
            data: rtolab_tcp::Bytes::from(data.clone()),
            sent: 0,
        })),
    );
    sim.run_until(SimTime::from_secs(120)).unwrap();
    let retransmitted: u64 = (0..sim.flow_count())
        .map(|i| sim.flow(FlowId(i as u32)).counts.retransmissions)
        .sum();
    assert!(retransmitted > 0, "the loss should force retransmissions");
    assert_eq!(received.lock().unwrap().as_slice(), &data[..]);
}

/// A message series from `a` to `b` over a lossy link; `apps` holds the
/// receiver's and the series' `[[app]]` tables.
fn series_scenario(apps: &str) -> String {
    format!(
        r#"
name = "series"
duration = "300s"

[[host]]
name = "a"
profile = "lwip"

[[host]]
name = "b"
profile = "lwip"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [
  {{ host = "a", address = "10.0.0.1/24" }},
  {{ host = "b", address = "10.0.0.2/24" }},
]
rate = "2Mbps"
delay = "10ms"
loss = 0.05
{apps}
"#
    )
}

/// Release and acknowledgment time of each message of the series, in
/// order, from the trace (a release is the acknowledgment less the
/// latency).
fn message_times(events: &[(SimTime, TraceEvent)]) -> Vec<(SimTime, SimTime)> {
    let mut out = Vec::new();
    for (at, e) in events {
        if let TraceEvent::App {
            detail:
                rtolab_sim::trace::AppEvent::MessageAcked {
                    index, latency_ns, ..
                },
            ..
        } = e
        {
            assert_eq!(
                *index as usize,
                out.len(),
                "messages are acknowledged in order"
            );
            let released = SimTime::from_nanos(at.as_nanos() - latency_ns);
            out.push((released, *at));
        }
    }
    out
}

const SINK_AND_SERIES: &str = r#"
[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5002

[[app]]
kind = "message-series"
name = "series"
host = "a"
peer = "10.0.0.2:5002"
sizes = [3000, 1, 20000, 700]
start = "30ms"
"#;

#[test]
fn after_ack_releases_each_message_when_the_previous_one_is_acknowledged() {
    let start = SimTime::from_millis(30);
    let mut seeds_with_loss = 0;
    for seed in 1..=3 {
        let text = series_scenario(&format!("{SINK_AND_SERIES}after_ack = true\n"));
        let (sim, events) = run_traced(&text, seed);
        let times = message_times(&events);
        assert_eq!(times.len(), 4, "seed {seed}: every message acknowledged");
        assert_eq!(times[0].0, start);
        for i in 1..times.len() {
            // Released at the very instant the previous one was
            // acknowledged, never before.
            assert_eq!(times[i].0, times[i - 1].1, "seed {seed}, message {i}");
        }
        let report = report(&sim, "t", Vec::new());
        let AppStats::TcpSink(sink) = app(&report, "sink") else {
            panic!()
        };
        assert_eq!((sink.bytes_received, sink.bytes_corrupt), (23_701, 0));
        let retransmissions: u64 = report.flows.iter().map(|f| f.counts.retransmissions).sum();
        if retransmissions > 0 {
            seeds_with_loss += 1;
        }

        // Without it (and without gaps) every message is released at once.
        let (_, events) = run_traced(&series_scenario(SINK_AND_SERIES), seed);
        let times = message_times(&events);
        assert_eq!(times.len(), 4);
        assert!(times.iter().all(|&(released, _)| released == start));
    }
    // 5 % loss on a few dozen packets need not hit every seed's data.
    assert!(
        seeds_with_loss >= 2,
        "the loss bit in {seeds_with_loss} of 3 seeds"
    );
}

#[test]
fn a_request_may_ask_for_no_answer() {
    let apps = r#"
[[app]]
kind = "exchange-server"
name = "server"
host = "b"
port = 80

[[app]]
kind = "message-series"
name = "series"
host = "a"
peer = "10.0.0.2:80"
sizes = [100, 50, 2000, 8]
responses = [10, 0, 20, 0]
start = "30ms"
after_ack = true
"#;
    for seed in 1..=3 {
        let (sim, events) = run_traced(&series_scenario(apps), seed);
        let report = report(&sim, "t", Vec::new());
        let AppStats::MessageSeries(series) = app(&report, "series") else {
            panic!()
        };
        let what = format!("seed {seed}: {series:?}");
        assert_eq!(series.messages_acked, 4, "{what}");
        // The empty answers count as received, with no bytes.
        assert_eq!(series.responses_received, 4, "{what}");
        assert_eq!(
            (series.response_bytes, series.bytes_corrupt),
            (30, 0),
            "{what}"
        );
        assert_eq!(series.failure, None, "{what}");
        let AppStats::ExchangeServer(server) = app(&report, "server") else {
            panic!()
        };
        assert_eq!(server.requests_served, 4, "seed {seed}: {server:?}");
        assert_eq!((server.bytes_received, server.bytes_sent), (2158, 30));
        assert_eq!((server.bytes_corrupt, server.bad_requests), (0, 0));

        // Message 2 follows the unanswered message 1 once it is
        // acknowledged; message 1 waited for the answer to message 0.
        let times = message_times(&events);
        assert_eq!(times.len(), 4);
        assert_eq!(times[2].0, times[1].1, "seed {seed}");
        assert!(times[1].0 >= times[0].1, "seed {seed}");
        // The series closed after its last, unanswered request.
        assert_eq!(report.flows.len(), 2);
        for f in &report.flows {
            assert!(
                matches!(f.state, State::Closed | State::TimeWait),
                "seed {seed}: {f:?}"
            );
        }
    }
}

/// Two hosts on a clean 2 Mbit/s link, `apps` appended.
fn bounded_by_time(apps: &str) -> String {
    format!(
        r#"
name = "bounded-by-time"
duration = "2s"

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [
  {{ host = "a", address = "10.0.0.1/24" }},
  {{ host = "b", address = "10.0.0.2/24" }},
]
rate = "2Mbps"
delay = "10ms"
queue = 1000

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001
{apps}
"#
    )
}

#[test]
fn a_sender_bounded_by_time_is_done_when_the_run_reaches_its_end() {
    let text = bounded_by_time(
        r#"
[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "a"
peer = "10.0.0.2:5001"
start = "500ms"

[[app]]
kind = "tcp-on-off"
name = "onoff"
host = "a"
peer = "10.0.0.2:5001"
on = "100ms"
off = "100ms"
start = "500ms"

"#,
    );
    let report = run_scenario(
        &Scenario::from_toml_str(&text).unwrap(),
        &RunOptions::default(),
    )
    .unwrap();
    let AppStats::TcpBulk(bulk) = app(&report, "bulk") else {
        panic!()
    };
    assert!(bulk.completed && bulk.failure.is_none(), "{bulk:?}");
    // Sent from its start to the end of the run: 1.5 s of a 2 Mbit/s link
    // shared with the on-off sender.
    assert_eq!(bulk.completion_time_ns, Some(1_500_000_000));
    let goodput = bulk.goodput_bps.unwrap();
    assert_eq!(goodput, bulk.bytes_acked as f64 * 8.0 / 1.5);
    assert!(goodput > 0.5e6 && goodput < 2e6, "{goodput}");
    let AppStats::TcpOnOff(onoff) = app(&report, "onoff") else {
        panic!()
    };
    assert!(onoff.completed, "{onoff:?}");
}

#[test]
fn a_sender_bounded_by_time_is_not_done_when_the_run_is_stopped_early() {
    let text = bounded_by_time(
        r#"
[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "a"
peer = "10.0.0.2:5001"
"#,
    );
    let scenario = Scenario::from_toml_str(&text).unwrap();
    let mut sim = build_simulator(&scenario, 1).unwrap();
    // Stopped halfway, as a limit or an interrupt stops it: no end of run.
    sim.run_until(SimTime::from_millis(1000)).unwrap();
    let stopped = report(&sim, "stopped", vec![]);
    let AppStats::TcpBulk(bulk) = app(&stopped, "bulk") else {
        panic!()
    };
    assert!(!bulk.completed && bulk.bytes_acked > 0, "{bulk:?}");
}
