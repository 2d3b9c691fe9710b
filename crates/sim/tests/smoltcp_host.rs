//! smoltcp as a simulated host (`stack = "smoltcp"`): the bridge exchange
//! with smoltcp as the appliance, bulk transfers to and from it over a
//! lossy link, determinism, and the scenario errors of its fields.

use std::path::{Path, PathBuf};
use std::process::Command;

use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario};

fn scenario_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(format!("{name}.toml"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run(scenario: &Scenario, seed: u64, out_dir: Option<PathBuf>) -> RunReport {
    run_scenario(
        scenario,
        &RunOptions {
            seed: Some(seed),
            out_dir,
            ..RunOptions::default()
        },
    )
    .expect("run completes")
}

/// An app's report counter.
fn stat(report: &RunReport, app: &str, field: &str) -> u64 {
    let row = report
        .apps
        .iter()
        .find(|a| a.name == app)
        .unwrap_or_else(|| panic!("no app {app}"));
    serde_json::to_value(&row.stats).expect("serialises")[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{app}.{field} missing"))
}

/// A fresh directory for a run's files.
fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtolab-smoltcp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// tshark's one-line summaries of the packets of `pcap` matching `filter`,
/// with IP and TCP checksums checked.
fn tshark(pcap: &Path, filter: &str) -> Vec<String> {
    let out = Command::new("tshark")
        .args([
            "-n",
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
        ])
        .arg("-r")
        .arg(pcap)
        .args(["-Y", filter])
        .output()
        .expect("tshark runs (apt install tshark)");
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bridge_exchange_with_a_smoltcp_appliance_delivers_every_byte() {
    let scenario =
        Scenario::from_toml_str(&scenario_text("bridge-smoltcp")).expect("valid scenario");
    let dir = out_dir("bridge");
    let report = run(&scenario, 1, Some(dir.clone()));
    assert_eq!(stat(&report, "client", "exchanges_completed"), 1);
    assert_eq!(stat(&report, "client", "exchanges_failed"), 0);
    assert_eq!(stat(&report, "client", "bytes_sent"), 1024);
    assert_eq!(stat(&report, "client", "bytes_received"), 1024);
    assert_eq!(stat(&report, "client", "bytes_corrupt"), 0);
    assert_eq!(stat(&report, "server", "requests_served"), 1);
    assert_eq!(stat(&report, "server", "bytes_corrupt"), 0);
    for pcap in ["nfc.pcap", "ethernet.pcap"] {
        let path = dir.join(pcap);
        let all = tshark(&path, "tcp");
        // Handshake, request, answer, two FINs and their ACKs at least.
        assert!(all.len() >= 7, "{pcap}: {all:?}");
        let bad = tshark(
            &path,
            "_ws.malformed || _ws.expert.severity == error || ip.checksum.status == 0 \
             || tcp.checksum.status == 0",
        );
        assert!(bad.is_empty(), "{pcap}: {bad:?}");
        // smoltcp's SYN from the appliance's fixed source port.
        let syn = tshark(&path, "tcp.flags.syn == 1 && tcp.flags.ack == 0");
        assert!(syn.iter().all(|l| l.contains("49153")), "{pcap}: {syn:?}");
        assert!(!syn.is_empty(), "{pcap}: no SYN");
    }
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Two hosts on a lossy point-to-point link, one of them smoltcp, with a
/// bulk transfer from `sender` to the other.
fn bulk_scenario(smoltcp_sends: bool, loss: f64) -> Scenario {
    let (a_stack, b_stack) = if smoltcp_sends {
        (
            "stack = \"smoltcp\"\ntcp = { mtu = 576 }",
            "profile = \"rfc\"",
        )
    } else {
        (
            "profile = \"rfc\"",
            "stack = \"smoltcp\"\ntcp = { recv_buffer = 4096 }",
        )
    };
    let text = format!(
        r#"
name = "smoltcp-bulk"
duration = "600s"

[[host]]
name = "a"
{a_stack}

[[host]]
name = "b"
{b_stack}

[[link]]
name = "ab"
kind = "point-to-point"
ends = [
  {{ host = "a", address = "10.0.0.1/24" }},
  {{ host = "b", address = "10.0.0.2/24" }},
]
rate = "1Mbps"
delay = "20ms"
queue = 100
loss = {loss}

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "a"
peer = "10.0.0.2:5001"
bytes = 200_000
"#
    );
    Scenario::from_toml_str(&text).expect("valid scenario")
}

#[test]
fn bulk_transfers_to_and_from_smoltcp_survive_loss_and_are_deterministic() {
    for smoltcp_sends in [true, false] {
        for seed in 1..=3 {
            let scenario = bulk_scenario(smoltcp_sends, 0.05);
            let report = run(&scenario, seed, None);
            let cell = format!("smoltcp sends: {smoltcp_sends}, seed {seed}");
            assert_eq!(stat(&report, "sink", "bytes_received"), 200_000, "{cell}");
            assert_eq!(stat(&report, "sink", "bytes_corrupt"), 0, "{cell}");
            assert_eq!(stat(&report, "sink", "connections_finished"), 1, "{cell}");
            assert_eq!(stat(&report, "bulk", "bytes_acked"), 200_000, "{cell}");
            let again = run(&scenario, seed, None);
            assert_eq!(
                serde_json::to_string(&report.apps).expect("serialises"),
                serde_json::to_string(&again.apps).expect("serialises"),
                "{cell}: a second run differs"
            );
        }
    }
}

#[test]
fn smoltcp_host_fields_are_checked_and_errors_name_them() {
    let base = scenario_text("bridge-smoltcp");
    let err = |text: &str| {
        Scenario::from_toml_str(text)
            .expect_err("invalid scenario")
            .to_string()
    };
    let e = err(&base.replace("stack = \"smoltcp\"", "stack = \"picotcp\""));
    assert!(e.starts_with("host[0].stack"), "{e}");
    let e = err(&base.replace(
        "stack = \"smoltcp\"",
        "stack = \"smoltcp\"\nprofile = \"lwip\"",
    ));
    assert!(e.starts_with("host[0].profile"), "{e}");
    // One IPv4 interface: not none.
    let e = err(&base.replace(
        "  { host = \"appliance\", address = \"192.168.1.102/24\" },\n  { host = \"ptx\" },",
        "  { host = \"enduser\", address = \"192.168.1.203/24\" },\n  { host = \"ptx\" },",
    ));
    assert!(e.starts_with("host[0].stack"), "{e}");
    let e = err(&base.replace("mtu = 1500", "mtu = 40"));
    assert!(e.starts_with("host[0].tcp.mtu"), "{e}");
    let e = err(&base.replace("ack_delay = 10", "ack_delay = 900"));
    assert!(e.starts_with("host[0].tcp.ack_delay"), "{e}");
    let e = err(&base.replace("recv_buffer = 2048", "recv_buffer = 0"));
    assert!(e.starts_with("host[0].tcp.recv_buffer"), "{e}");
    let e = err(&base.replace("nagle = true", "nagle = true, sack = true"));
    assert!(e.starts_with("host[0].tcp"), "{e}");
    assert!(e.contains("sack"), "{e}");
    let e = err(&base.replace(
        "host = \"appliance\"\npeer",
        "host = \"appliance\"\nprofile = \"linux\"\npeer",
    ));
    assert!(e.starts_with("app[1].profile"), "{e}");
    let e = err(&base.replace(
        "kind = \"exchange\"\nname = \"client\"",
        "kind = \"message-series\"\nname = \"client\"",
    ));
    assert!(e.starts_with("app[1].kind"), "{e}");
}

/// What smoltcp shows of its connections reaches the trace (state changes,
/// under the smoltcp flow numbers) and the app's metrics (connections and
/// final state).
#[test]
fn smoltcp_state_changes_are_traced_and_reported() {
    use rtolab_sim::run::build_simulator;
    use rtolab_sim::smol::SMOLTCP_FLOW_BASE;
    use rtolab_sim::trace::{MemorySink, TraceEvent};
    use rtolab_sim::SimTime;
    use rtolab_tcp::State;

    let scenario =
        Scenario::from_toml_str(&scenario_text("bridge-smoltcp")).expect("valid scenario");
    let mut sim = build_simulator(&scenario, 1).expect("builds");
    let sink = MemorySink::new();
    sim.set_trace_sink(Box::new(sink.clone()));
    sim.run_until(SimTime::from_secs(60)).expect("runs");
    let states: Vec<(State, State)> = sink
        .events()
        .iter()
        .filter_map(|(_, e)| match e {
            TraceEvent::Tcp {
                node: 0,
                flow,
                detail,
                ..
            } if *flow >= SMOLTCP_FLOW_BASE => match detail.0 {
                rtolab_tcp::trace::TraceEvent::State { from, to } => Some((from, to)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    // The appliance opens, sends, closes first and waits in TIME-WAIT.
    assert_eq!(states.first(), Some(&(State::SynSent, State::Established)));
    assert!(
        states.contains(&(State::Established, State::FinWait1)),
        "{states:?}"
    );
    assert_eq!(
        states.last().map(|s| s.1),
        Some(State::TimeWait),
        "{states:?}"
    );
    let client = scenario
        .apps
        .iter()
        .position(|a| a.name == "client")
        .expect("client app");
    let metrics = sim
        .app_tcp_metrics(rtolab_sim::node::AppId(client as u32))
        .expect("a TCP app");
    assert_eq!(metrics.connections, 1);
    assert_eq!(metrics.final_state, Some(State::TimeWait));
}

/// Successive exchanges open a connection each from smoltcp's ephemeral
/// ports; every one completes and the sockets of finished ones are freed
/// without disturbing the others.
#[test]
fn successive_exchanges_from_smoltcp_each_complete() {
    let text = scenario_text("bridge-smoltcp")
        .replace("source_port = 49153\n", "")
        .replace("request = 1024", "request = 300\ncount = 5\ngap = \"15s\"")
        .replace("response = 1024", "response = 200")
        .replace("duration = \"120s\"", "duration = \"200s\"");
    let scenario = Scenario::from_toml_str(&text).expect("valid scenario");
    let report = run(&scenario, 2, None);
    assert_eq!(stat(&report, "client", "exchanges_completed"), 5);
    assert_eq!(stat(&report, "client", "bytes_received"), 5 * 200);
    assert_eq!(stat(&report, "client", "bytes_corrupt"), 0);
    assert_eq!(stat(&report, "server", "requests_served"), 5);
    let client = report
        .apps
        .iter()
        .find(|a| a.name == "client")
        .expect("client");
    assert_eq!(client.tcp.expect("TCP metrics").connections, 5);
}
