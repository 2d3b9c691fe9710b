//! Middleboxes at a router: what a user sees of a drop list, a stall and a
//! middlebox written in code (retransmissions, bytes delivered intact,
//! hold times, injected packets), and the errors of bad `[[middlebox]]`
//! tables.

use rtolab_sim::app::AppStats;
use rtolab_sim::middlebox::{AnyMiddlebox, Held, Middlebox, MiddleboxCx};
use rtolab_sim::run::{build_simulator, report};
use rtolab_sim::trace::{DropReason, MemorySink, TraceEvent};
use rtolab_sim::{RunReport, Scenario, SimTime};

/// a -- r -- b; a sends 200 kB to b over TCP, or a CBR stream over UDP.
const BASE: &str = r#"
name = "middlebox"
duration = "20s"

[[host]]
name = "a"
[[host]]
name = "r"
[[host]]
name = "b"

[[link]]
name = "ar"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.1.1/24" }, { host = "r", address = "10.0.1.2/24" } ]
rate = "10Mbps"
delay = "5ms"

[[link]]
name = "rb"
kind = "point-to-point"
ends = [ { host = "r", address = "10.0.2.1/24" }, { host = "b", address = "10.0.2.2/24" } ]
rate = "10Mbps"
delay = "5ms"

[[route]]
host = "a"
destination = "default"
via = "10.0.1.2"

[[route]]
host = "b"
destination = "default"
via = "10.0.2.1"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "a"
peer = "10.0.2.2:5001"
bytes = 200_000
"#;

fn run(extra: &str) -> (RunReport, Vec<(SimTime, TraceEvent)>) {
    let scenario = Scenario::from_toml_str(&format!("{BASE}\n{extra}"))
        .unwrap_or_else(|e| panic!("scenario rejected: {e}"));
    let mut sim = build_simulator(&scenario, scenario.seed).expect("builds");
    let sink = MemorySink::new();
    sim.set_trace_sink(Box::new(sink.clone()));
    sim.run_until(SimTime::ZERO + scenario.duration)
        .expect("runs");
    (report(&sim, &scenario.name, Vec::new()), sink.events())
}

fn sink_stats(report: &RunReport) -> (u64, u64) {
    let app = report.apps.iter().find(|a| a.name == "sink").expect("sink");
    match &app.stats {
        AppStats::TcpSink(s) => (s.bytes_received, s.bytes_corrupt),
        other => panic!("not a tcp-sink: {other:?}"),
    }
}

fn sender_retransmissions(report: &RunReport) -> u64 {
    report
        .flows
        .iter()
        .filter(|f| f.app.as_deref() == Some("bulk"))
        .map(|f| f.counts.retransmissions)
        .sum()
}

fn middlebox_stat(report: &RunReport, field: &str) -> u64 {
    report.middleboxes[0].stats[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {field}"))
}

#[test]
fn without_middleboxes_nothing_is_lost_and_the_report_has_no_middlebox_rows() {
    let (report, _) = run("");
    assert_eq!(sink_stats(&report), (200_000, 0));
    assert_eq!(sender_retransmissions(&report), 0);
    assert!(report.middleboxes.is_empty());
    let json = serde_json::to_string(&report).expect("serialises");
    assert!(!json.contains("middleboxes"), "no empty column in reports");
}

#[test]
fn drop_list_drops_exactly_the_listed_data_segments_and_tcp_recovers() {
    let (report, events) = run(r#"
[[middlebox]]
kind = "drop-list"
name = "losses"
host = "r"
drop = [3, 40]
match = { protocol = "tcp", source = "10.0.1.1", payload = true }
"#);
    let row = &report.middleboxes[0];
    assert_eq!(
        (row.name.as_str(), row.host.as_str(), row.kind),
        ("losses", "r", "drop-list")
    );
    assert_eq!(middlebox_stat(&report, "dropped"), 2);
    assert!(middlebox_stat(&report, "matched") >= 40);
    assert!(middlebox_stat(&report, "seen") > middlebox_stat(&report, "matched"));
    // Every byte still arrives intact, after at least one resend per loss.
    assert_eq!(sink_stats(&report), (200_000, 0));
    assert!(sender_retransmissions(&report) >= 2);
    let drops = events
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                TraceEvent::PacketDropped {
                    node: 1,
                    reason: DropReason::Middlebox,
                    ..
                }
            )
        })
        .count();
    assert_eq!(drops, 2);
}

#[test]
fn stall_holds_packets_for_its_window_and_releases_them_in_order() {
    let (report, events) = run(r#"
[[middlebox]]
kind = "stall"
host = "r"
start = "100ms"
end = "400ms"
"#);
    let held = middlebox_stat(&report, "held");
    assert!(held > 0, "something crossed during the stall");
    assert_eq!(middlebox_stat(&report, "released"), held);
    let longest = middlebox_stat(&report, "longest_hold_ns");
    assert!(longest > 0 && longest <= 300_000_000, "{longest}");
    assert_eq!(sink_stats(&report), (200_000, 0));

    let held_events: Vec<u64> = events
        .iter()
        .filter_map(|(_, e)| match e {
            TraceEvent::PacketHeld { packet, .. } => Some(*packet),
            _ => None,
        })
        .collect();
    let released: Vec<(SimTime, u64)> = events
        .iter()
        .filter_map(|(t, e)| match e {
            TraceEvent::PacketReleased { packet, .. } => Some((*t, *packet)),
            _ => None,
        })
        .collect();
    assert_eq!(held_events.len() as u64, held);
    // All at the end of the stall, in the order they were held.
    assert!(released
        .iter()
        .all(|(t, _)| *t == SimTime::from_millis(400)));
    assert_eq!(
        released.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        held_events
    );
}

/// A middlebox written in code: duplicates every UDP datagram it sees by
/// injecting a copy.
struct Duplicator {
    copies: u64,
}

impl Middlebox for Duplicator {
    type Stats = serde_json::Value;

    fn on_packet(&mut self, cx: &mut MiddleboxCx<'_>, packet: Held) -> Option<Held> {
        let datagram = cx.datagram(&packet).to_vec();
        if datagram.get(9) == Some(&17) {
            let injected = cx.inject(|buf| {
                buf.extend_from_slice(&datagram);
                Ok::<_, ()>(datagram.len())
            });
            if injected.is_ok() {
                self.copies += 1;
            }
        }
        Some(packet)
    }

    fn stats(&self) -> serde_json::Value {
        serde_json::json!({ "copies": self.copies })
    }
}

#[test]
fn injected_datagrams_are_routed_like_local_ones() {
    let scenario = Scenario::from_toml_str(&format!(
        "{BASE}\n{}",
        r#"
[[app]]
kind = "sink"
name = "udp-sink"
host = "b"
port = 9000

[[app]]
kind = "cbr"
name = "cbr"
host = "a"
destination = "10.0.2.2:9000"
size = 200
rate = "160kbps"
stop = "1s"
"#
    ))
    .expect("valid");
    let mut sim = build_simulator(&scenario, 1).expect("builds");
    let router = rtolab_sim::node::NodeId(1);
    sim.add_middlebox(
        router,
        "duplicator",
        AnyMiddlebox::Custom(Box::new(Duplicator { copies: 0 })),
    );
    let sink = MemorySink::new();
    sim.set_trace_sink(Box::new(sink.clone()));
    sim.run_until(SimTime::from_secs(3)).expect("runs");
    let report = report(&sim, "dup", Vec::new());

    let sent = report
        .apps
        .iter()
        .find_map(|a| match &a.stats {
            AppStats::Cbr(c) => Some(c.sent_packets),
            _ => None,
        })
        .expect("cbr row");
    let (received, duplicates) = report
        .apps
        .iter()
        .find_map(|a| match &a.stats {
            AppStats::Sink(s) => Some((s.received_packets, s.duplicates)),
            _ => None,
        })
        .expect("sink row");
    assert!(sent > 50);
    assert_eq!(received, 2 * sent);
    assert_eq!(duplicates, sent);
    assert_eq!(report.middleboxes[0].kind, "custom");
    assert_eq!(report.middleboxes[0].stats["copies"], sent);
    let injected = sink
        .events()
        .iter()
        .filter(|(_, e)| matches!(e, TraceEvent::PacketInjected { .. }))
        .count() as u64;
    assert_eq!(injected, sent);
}

fn rejects(extra: &str) -> String {
    match Scenario::from_toml_str(&format!("{BASE}\n{extra}")) {
        Ok(_) => panic!("accepted: {extra}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_middlebox_tables_name_the_field() {
    assert!(
        rejects("[[middlebox]]\nkind = \"firewall\"\nhost = \"r\"\n")
            .starts_with("middlebox[0].kind: unknown middlebox kind \"firewall\"")
    );
    assert_eq!(
        rejects("[[middlebox]]\nkind = \"drop-list\"\nhost = \"nowhere\"\ndrop = [1]\n"),
        "middlebox[0].host: no host named \"nowhere\""
    );
    assert_eq!(
        rejects("[[middlebox]]\nkind = \"drop-list\"\nhost = \"r\"\ndrop = [2, 0]\n"),
        "middlebox[0].drop[1]: positions start at 1"
    );
    assert_eq!(
        rejects("[[middlebox]]\nkind = \"drop-list\"\nhost = \"r\"\n"),
        "middlebox[0].drop: required for drop-list middleboxes"
    );
    assert_eq!(
        rejects("[[middlebox]]\nkind = \"stall\"\nhost = \"r\"\nstart = \"2s\"\nend = \"1s\"\n"),
        "middlebox[0].end: must be after start"
    );
    assert_eq!(
        rejects("[[middlebox]]\nkind = \"drop-list\"\nhost = \"r\"\ndrop = [1]\nstart = \"1s\"\n"),
        "middlebox[0].start: not allowed for drop-list middleboxes"
    );
    assert!(rejects(
        "[[middlebox]]\nkind = \"drop-list\"\nhost = \"r\"\ndrop = [1]\nmatch = { protocol = \"icmp\" }\n"
    )
    .starts_with("middlebox[0].match.protocol:"));
    assert!(rejects(
        "[[middlebox]]\nkind = \"stall\"\nname = \"s\"\nhost = \"r\"\nstart = \"1s\"\nend = \"2s\"\n\
         [[middlebox]]\nkind = \"stall\"\nname = \"s\"\nhost = \"r\"\nstart = \"1s\"\nend = \"2s\"\n"
    )
    .starts_with("middlebox[1].name: duplicate middlebox name \"s\""));
}
