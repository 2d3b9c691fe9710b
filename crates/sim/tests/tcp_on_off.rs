//! The on/off TCP sender: every byte of every burst arrives intact over
//! one connection, it sends the bursts it was asked for, and the sender
//! puts no data on the wire while it is idle. The apps are those of the
//! example in docs/extending.md, read from the document.

use std::io::Write;
use std::sync::{Arc, Mutex};

use rtolab_sim::app::AppStats;
use rtolab_sim::node::{IfaceId, NodeId};
use rtolab_sim::run::build_simulator;
use rtolab_sim::trace::{AppEvent, MemorySink, TraceEvent};
use rtolab_sim::{run_scenario, CaptureDirection, RunOptions, RunReport, Scenario, SimTime};
use rtolab_tcp::State;
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::pcap::PcapWriter;

const OFF_NS: u64 = 1_000_000_000;

/// Two hosts on a 2 Mbit/s link losing `loss` of the packets, then `apps`.
fn topology(loss: f64, apps: &str) -> String {
    format!(
        r#"
name = "on-off"
duration = "30s"

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
queue = 100
loss = {loss}

{apps}"#
    )
}

/// A sink on `b` (app 0) and an on/off sender on `a` (app 1); `sender`
/// holds the sender's fields besides `peer`.
fn scenario(loss: f64, sender: &str) -> String {
    let apps = format!(
        r#"[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001

[[app]]
kind = "tcp-on-off"
name = "sender"
host = "a"
peer = "10.0.0.2:5001"
{sender}
"#
    );
    topology(loss, &apps)
}

/// The apps of docs/extending.md, as the ```toml block after the
/// `scenario-fragment` marker naming this file shows them: the same sink
/// and a sender of four bursts of 200 ms, 1 s apart.
fn documented(loss: f64) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/extending.md");
    let doc = std::fs::read_to_string(path).expect("docs/extending.md");
    let marker = "<!-- scenario-fragment: crates/sim/tests/tcp_on_off.rs -->\n```toml\n";
    let start = doc.find(marker).expect("the fragment is marked") + marker.len();
    let len = doc[start..].find("```").expect("the block ends");
    topology(loss, &doc[start..start + len])
}

fn stats(
    report: &RunReport,
) -> (
    rtolab_sim::app::TcpOnOffStats,
    rtolab_sim::app::TcpSinkStats,
) {
    let find = |name: &str| &report.apps.iter().find(|a| a.name == name).unwrap().stats;
    let AppStats::TcpOnOff(sender) = find("sender") else {
        panic!("not an on/off sender")
    };
    let AppStats::TcpSink(sink) = find("sink") else {
        panic!("not a sink")
    };
    (*sender, *sink)
}

#[test]
fn every_burst_is_delivered_intact_over_one_connection() {
    let scenario = Scenario::from_toml_str(&documented(0.02)).unwrap();
    for seed in 1..=3 {
        let opts = RunOptions {
            seed: Some(seed),
            ..RunOptions::default()
        };
        let report = run_scenario(&scenario, &opts).unwrap();
        let (sender, sink) = stats(&report);
        let what = format!("seed {seed}: {sender:?} {sink:?}");
        assert_eq!(sender.bursts_started, 4, "{what}");
        assert_eq!(sender.bursts_completed, 4, "{what}");
        assert!(sender.completed, "{what}");
        assert_eq!(sender.failure, None, "{what}");
        // 200 ms at 2 Mbit/s is about 50 kB a burst, slow start aside.
        assert!(sender.bytes_acked > 4 * 20_000, "{what}");
        assert_eq!(sender.bytes_acked, sender.bytes_sent, "{what}");
        assert_eq!(sink.bytes_received, sender.bytes_acked, "{what}");
        assert_eq!(sink.bytes_corrupt, 0, "{what}");
        assert_eq!(
            (sink.connections_accepted, sink.connections_finished),
            (1, 1),
            "{what}"
        );
        for f in &report.flows {
            assert!(
                matches!(f.state, State::Closed | State::TimeWait),
                "{what}: {f:?}"
            );
        }
    }
}

/// A `Write` the test reads back after the run.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Times (ns) at which the sender's data segments started to leave, from
/// a nanosecond pcap of raw IPv4.
fn data_segment_times(pcap: &[u8]) -> Vec<u64> {
    let word = |at: usize| u64::from(u32::from_le_bytes(pcap[at..at + 4].try_into().unwrap()));
    let mut times = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let time = word(at) * 1_000_000_000 + word(at + 4);
        let len = word(at + 8) as usize;
        at += 16;
        let parsed = packet::parse(&pcap[at..at + len]).unwrap();
        if let Transport::Tcp(tcp) = parsed.transport {
            if !tcp.payload.is_empty() {
                times.push(time);
            }
        }
        at += len;
    }
    times
}

#[test]
fn nothing_is_sent_while_off_and_each_burst_starts_off_after_the_last_ack() {
    for seed in [1, 2] {
        let scenario = Scenario::from_toml_str(&documented(0.02)).unwrap();
        let mut sim = build_simulator(&scenario, seed).unwrap();
        let trace = MemorySink::new();
        sim.set_trace_sink(Box::new(trace.clone()));
        let pcap = Shared::default();
        let iface = IfaceId {
            node: NodeId(0),
            index: 0,
        };
        let writer = PcapWriter::from_writer(Box::new(pcap.clone())).unwrap();
        sim.add_capture(iface, CaptureDirection::Tx, "a-ab", writer);
        sim.run_until(SimTime::ZERO + scenario.duration).unwrap();
        // Dropping the simulator flushes the capture.
        drop(sim);

        // Each TransferCompleted marks a burst fully acknowledged: the
        // start of an OFF period (or, after the last, of closing).
        let bursts: Vec<(u64, u64)> = trace
            .events()
            .iter()
            .filter_map(|(t, e)| match e {
                TraceEvent::App {
                    detail: AppEvent::TransferCompleted { bytes, .. },
                    ..
                } => Some((t.as_nanos(), *bytes)),
                _ => None,
            })
            .collect();
        assert_eq!(bursts.len(), 4, "seed {seed}");
        assert!(bursts.iter().all(|&(_, bytes)| bytes > 0));

        let sent = data_segment_times(&pcap.0.lock().unwrap());
        assert!(!sent.is_empty());
        for &(acked, _) in &bursts[..3] {
            let off_end = acked + OFF_NS;
            let during_off: Vec<u64> = sent
                .iter()
                .copied()
                .filter(|&t| t >= acked && t < off_end)
                .collect();
            assert!(
                during_off.is_empty(),
                "seed {seed}: data sent while off at {during_off:?}"
            );
            // The link is idle, so the next burst's first segment leaves
            // exactly when the OFF period ends.
            assert_eq!(
                sent.iter().find(|&&t| t >= acked),
                Some(&off_end),
                "seed {seed}"
            );
        }
        // Nothing after the last burst either: only the FIN is left.
        let last = bursts[3].0;
        assert!(sent.iter().all(|&t| t < last), "seed {seed}");
    }
}

#[test]
fn without_a_burst_count_it_sends_until_stop() {
    let sender = "on = \"100ms\"\noff = \"500ms\"\nstop = \"5s\"";
    let scenario = Scenario::from_toml_str(&scenario(0.0, sender)).unwrap();
    let report = run_scenario(&scenario, &RunOptions::default()).unwrap();
    let (sender, sink) = stats(&report);
    // A cycle takes 600 ms plus draining what the send buffer holds when
    // the ON period ends (most of a second at 2 Mbit/s): a few in 5 s.
    assert!((2..=8).contains(&sender.bursts_started), "{sender:?}");
    assert_eq!(sender.bursts_completed, sender.bursts_started);
    assert!(sender.completed, "{sender:?}");
    assert_eq!(sink.bytes_received, sender.bytes_acked);
    assert_eq!(sink.bytes_corrupt, 0);
    assert_eq!(sink.connections_finished, 1);
}

#[test]
fn a_stop_during_an_on_period_drains_the_burst_and_closes() {
    let sender = "on = \"10s\"\noff = \"1s\"\nstop = \"2s\"";
    let scenario = Scenario::from_toml_str(&scenario(0.0, sender)).unwrap();
    let report = run_scenario(&scenario, &RunOptions::default()).unwrap();
    let (sender, sink) = stats(&report);
    assert_eq!(
        (sender.bursts_started, sender.bursts_completed),
        (1, 1),
        "{sender:?}"
    );
    assert!(sender.completed && sender.failure.is_none(), "{sender:?}");
    // About 2 s at 2 Mbit/s, plus what the send buffer held at the stop.
    assert!(sender.bytes_acked > 400_000, "{sender:?}");
    assert_eq!(sink.bytes_received, sender.bytes_acked);
    assert_eq!((sink.bytes_corrupt, sink.connections_finished), (0, 1));
}

#[track_caller]
fn rejected(sender: &str) -> String {
    match Scenario::from_toml_str(&scenario(0.0, sender)) {
        Ok(_) => panic!("accepted:\n{sender}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_fields_are_named() {
    assert!(Scenario::from_toml_str(&scenario(0.0, "on = \"1s\"\noff = \"1s\"")).is_ok());
    let cases = [
        ("off = \"1s\"", "app[1].on: required for tcp-on-off apps"),
        ("on = \"1s\"", "app[1].off: required for tcp-on-off apps"),
        ("on = \"1s\"\noff = \"0s\"", "app[1].off: must be positive"),
        ("on = \"0ms\"\noff = \"1s\"", "app[1].on: must be positive"),
        (
            "on = \"1s\"\noff = \"1s\"\nbursts = 0",
            "app[1].bursts: must be positive",
        ),
        (
            "on = \"1s\"\noff = \"1s\"\nstart = \"2s\"\nstop = \"1s\"",
            "app[1].stop: must be after start",
        ),
        (
            "on = \"1s\"\noff = \"1s\"\nbytes = 1000",
            "app[1].bytes: not allowed for tcp-on-off apps",
        ),
    ];
    for (sender, expected) in cases {
        assert_eq!(rejected(sender), expected, "{sender}");
    }
    // The peer must be a tcp-sink.
    let text = documented(0.0).replace("10.0.0.2:5001", "10.0.0.2:5009");
    let e = Scenario::from_toml_str(&text).unwrap_err().to_string();
    assert!(e.starts_with("app[1].peer"), "{e}");
}
