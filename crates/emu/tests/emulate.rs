//! Real emulations between network namespaces. They need root and
//! /dev/net/tun; without them each test prints why and passes vacuously.
//! They run one at a time (namespaces, timing) and check that nothing is
//! left behind.

mod common;

use std::process::Command;

use common::{app, emulation_slot, scenario_path, shipped};
use rtolab_emu::runtime::EmuReport;
use rtolab_emu::{emulate, netns, EmuOptions, EmuScenario};
use rtolab_sim::run::RunOptions;

/// No emulator namespace, and no emulator TUN device in this namespace.
fn assert_nothing_left_behind() {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        !list.lines().any(|l| l.starts_with(netns::PREFIX)),
        "namespaces left behind:\n{list}"
    );
    let out = Command::new("ip")
        .args(["-o", "link", "show", "type", "tun"])
        .output()
        .unwrap();
    let links = String::from_utf8_lossy(&out.stdout);
    assert!(
        !links.lines().any(|l| l.contains(": rt") && l.contains('-')),
        "TUN devices left behind:\n{links}"
    );
}

fn run(emu: &EmuScenario) -> EmuReport {
    let opts = EmuOptions {
        stop_when_done: true,
        realtime: true,
        ..EmuOptions::default()
    };
    let mut hosts_seen = Vec::new();
    let report = emulate(emu, &opts, |hosts| {
        hosts_seen = hosts.to_vec();
        // The namespaces exist while the run is up.
        let names = netns::list();
        for h in hosts.iter().filter_map(|h| h.netns.as_ref()) {
            assert!(names.contains(h), "{h} missing from {names:?}");
        }
    })
    .unwrap();
    assert!(!hosts_seen.is_empty());
    assert_nothing_left_behind();
    println!(
        "{}: {:.2} s, timing error p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={}, realtime {})",
        report.name,
        report.duration_s,
        report.timing_error_p50_ms,
        report.timing_error_p99_ms,
        report.timing_error_max_ms,
        report.timing.samples,
        report.realtime
    );
    report
}

fn scenario_file(name: &str) -> EmuScenario {
    EmuScenario::from_path(&scenario_path(name)).unwrap()
}

#[test]
fn linux_hosts_move_1mb_intact_over_a_lossy_link() {
    let Some(_slot) = emulation_slot("linux_hosts_move_1mb_intact_over_a_lossy_link") else {
        return;
    };
    let emu = scenario_file("emu-p2p-bulk.toml");
    let report = run(&emu);
    assert_eq!(report.ended_by, "done");
    let bulk = app(&report, "bulk");
    let sink = app(&report, "sink");
    assert!(bulk.result.completed, "{bulk:?}");
    assert_eq!(bulk.result.bytes_sent, 1_000_000);
    assert_eq!(sink.result.bytes_received, 1_000_000);
    assert_eq!(sink.result.bytes_corrupt, 0);
    let sent = bulk.result.sha256_sent.clone().unwrap();
    assert_eq!(sink.result.sha256_received, [sent]);
    // The link did lose packets, and the kernels repaired the stream.
    let drops = report.engine.edges.link_drops.get("random_loss").copied();
    assert!(drops.unwrap_or(0) > 0, "{:?}", report.engine.edges);
    let client = report
        .engine
        .hosts
        .iter()
        .find(|h| h.name == "client")
        .unwrap();
    assert!(client.wire.retransmissions > 0, "{client:?}");
    assert_eq!(report.engine.edges.rejected_total(), 0);
    assert!(report.timing.samples > 500);
    assert!(report.timing_error_p99_ms >= report.timing_error_p50_ms);
    assert!(report.timing_error_max_ms.is_finite());
}

/// The simulator's bulk sender and sink on an rtolab host, against Linux
/// at the other end, each way: the stream arrives whole, and the digests
/// the rtolab host takes as bytes pass through its context match Linux's.
#[test]
fn rtolab_bulk_and_sink_hash_what_linux_receives_and_sends() {
    let Some(_slot) = emulation_slot("rtolab_bulk_and_sink_hash_what_linux_receives_and_sends")
    else {
        return;
    };
    let text = shipped("emu-p2p-bulk.toml");
    for host in ["client", "server"] {
        let one_rtolab = text.replace(
            &format!("name = \"{host}\"\nstack = \"linux\""),
            &format!("name = \"{host}\"\nstack = \"rtolab\""),
        );
        assert_ne!(one_rtolab, text);
        let report = run(&EmuScenario::from_toml_str(&one_rtolab).unwrap());
        let bulk = app(&report, "bulk");
        let sink = app(&report, "sink");
        assert!(bulk.result.completed, "{bulk:?}");
        assert_eq!(bulk.result.connections, 1);
        assert!(sink.result.completed, "{sink:?}");
        assert_eq!(sink.result.bytes_received, 1_000_000, "{sink:?}");
        assert_eq!(sink.result.bytes_corrupt, 0);
        let sent = bulk.result.sha256_sent.clone().unwrap();
        assert_eq!(sink.result.sha256_received, [sent], "rtolab {host}");
    }
}

const RTOLAB_CLIENT: &str = r#"
name = "rtolab-client"
duration = "20s"

[[host]]
name = "device"
stack = "rtolab"
profile = "lwip"

[[host]]
name = "server"
stack = "linux"

[[link]]
name = "wire"
kind = "point-to-point"
ends = [ { host = "device", address = "10.78.0.1/24" },
         { host = "server", address = "10.78.0.2/24" } ]
rate = "10Mbps"
delay = "5ms"

[[app]]
kind = "exchange-server"
name = "server"
host = "server"
port = 8080

[[app]]
kind = "exchange"
name = "client"
host = "device"
peer = "10.78.0.2:8080"
request = 3000
response = 20000
count = 2
gap = "50ms"
"#;

#[test]
fn rtolab_engine_exchanges_and_closes_with_a_linux_server() {
    let Some(_slot) = emulation_slot("rtolab_engine_exchanges_and_closes_with_a_linux_server")
    else {
        return;
    };
    let emu = EmuScenario::from_toml_str(RTOLAB_CLIENT).unwrap();
    let report = run(&emu);
    let client = app(&report, "client");
    let server = app(&report, "server");
    assert!(client.result.completed, "{client:?}");
    assert_eq!(client.result.exchanges_completed, 2);
    assert_eq!(client.result.bytes_received, 40_000);
    assert_eq!(client.result.bytes_corrupt, 0);
    assert_eq!(server.result.exchanges_completed, 2);
    assert_eq!(server.result.bytes_received, 6_000);
    assert_eq!(server.result.bytes_corrupt, 0);
    // "done" needs both client connections closed down (TIME-WAIT or
    // CLOSED): the Linux server's FINs arrived and were acknowledged.
    assert_eq!(report.ended_by, "done");
    assert!(server.result.completed, "{server:?}");
    let device = report
        .engine
        .hosts
        .iter()
        .find(|h| h.name == "device")
        .unwrap();
    assert_eq!(device.engine.unwrap().retransmissions, 0);
}

#[test]
fn bridge_with_sensing_and_per_packet_rto_matches_the_simulator() {
    let Some(_slot) =
        emulation_slot("bridge_with_sensing_and_per_packet_rto_matches_the_simulator")
    else {
        return;
    };
    // The shipped scenario in the 24 kbps mode, to keep the test short.
    let text = shipped("emu-bridge-fixed.toml")
        .replace("rate = \"11.2kbps\"", "rate = \"24kbps\"")
        .replace(
            "{ policy = \"bridge\", window = 1 }",
            "{ policy = \"bridge\", window = 1, channel = { payload_per_slot = 26 } }",
        )
        .replace("rto_min = \"3.5s\"", "rto_min = \"2.5s\"");
    let emu = EmuScenario::from_toml_str(&text).unwrap();
    let mut report = run(&emu);
    // Five writes make p99 the maximum, so one preemption of the machine's
    // vCPU (or a stall of its disk writeback) decides it: measure up to
    // three times before judging; a systematic error fails every one.
    for _ in 0..2 {
        if report.timing_error_p99_ms <= 1.0 {
            break;
        }
        println!(
            "timing error p99 {} ms: running again",
            report.timing_error_p99_ms
        );
        report = run(&emu);
    }
    let client = app(&report, "client");
    assert!(client.result.completed, "{client:?}");
    for host in &report.engine.hosts {
        assert_eq!(host.wire.retransmissions, 0, "{host:?}");
    }
    assert!(
        report.engine.edges.link_drops.is_empty(),
        "{:?}",
        report.engine.edges
    );
    let emulated = client.result.latency_mean_ms.unwrap();
    let sim =
        rtolab_sim::run_scenario(&emu.simulator_equivalent(), &RunOptions::default()).unwrap();
    let row = sim.apps.iter().find(|a| a.name == "client").unwrap();
    let simulated = serde_json::to_value(row).unwrap()["latency_mean_ns"]
        .as_f64()
        .unwrap()
        / 1e6;
    println!("bridge exchange latency: emulated {emulated:.1} ms, simulated {simulated:.1} ms");
    assert!(
        (emulated - simulated).abs() <= 0.10 * simulated,
        "emulated {emulated} ms vs simulated {simulated} ms"
    );
    assert!(
        report.timing_error_p99_ms <= 1.0,
        "timing error p99 {} ms",
        report.timing_error_p99_ms
    );
}

#[test]
fn a_crashed_runs_namespace_is_swept() {
    let Some(_slot) = emulation_slot("a_crashed_runs_namespace_is_swept") else {
        return;
    };
    // A namespace named after a process that no longer exists (pids are
    // below 2^22 on Linux).
    let stale = netns::namespace_name(4_194_304 + 7, 0, "ghost");
    netns::ip(&["netns", "add", &stale]).unwrap();
    let removed = netns::sweep_stale();
    assert!(removed.contains(&stale), "{removed:?}");
    assert_nothing_left_behind();
}
