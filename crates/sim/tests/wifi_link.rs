//! The `wifi` link kind end to end: TCP across an access point bridging a
//! wired link and an 802.11 BSS, the timelost option accounted by the MAC
//! and corrected at the sender, and scenario errors that name the field.

use std::path::PathBuf;

use rtolab_sim::app::AppStats;
use rtolab_sim::link::{LinkStats, WifiStats};
use rtolab_sim::{run_scenario, RunOptions, RunReport as Report, Scenario};

const BYTES: u64 = 1_000_000;

/// source --wired-- ap ))) sink, the sink static at `distance` metres.
fn scenario(distance: f64, source_timelost: bool, link_timelost: bool) -> String {
    format!(
        r#"
name = "wifi-bulk"
seed = 3
duration = "30s"

[[host]]
name = "source"
[host.tcp]
timelost = {source_timelost}

[[host]]
name = "ap"

[[host]]
name = "sink"
[host.tcp]
timelost = true

[[link]]
name = "wired"
kind = "point-to-point"
ends = [
  {{ host = "source", address = "10.0.1.1/24" }},
  {{ host = "ap", address = "10.0.1.2/24" }},
]
rate = "100Mbps"
delay = "5ms"

[[link]]
name = "wlan"
kind = "wifi"
timelost = {link_timelost}
ap = {{ host = "ap", address = "10.0.2.1/24", position = {{ x = 0.0, y = 0.0 }} }}
stations = [ {{ host = "sink", address = "10.0.2.2/24", position = {{ x = {distance}, y = 0.0 }} }} ]

[[route]]
host = "source"
destination = "default"
via = "10.0.1.2"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "sink"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "source"
peer = "10.0.2.2:5001"
bytes = {BYTES}
"#
    )
}

/// Runs `text` with traces into a fresh directory; returns the report and
/// the sender's (raw, corrected) RTT samples in ns.
fn run(text: &str, tag: &str) -> (Report, Vec<(u64, u64)>) {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("rtolab-wifi-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scenario = Scenario::from_toml_str(text).unwrap();
    let options = RunOptions {
        write_traces: true,
        out_dir: Some(dir.clone()),
        ..Default::default()
    };
    let report = run_scenario(&scenario, &options).unwrap();
    let traces = std::fs::read_to_string(dir.join("traces.jsonl")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let samples = traces
        .lines()
        .filter(|l| l.contains("\"rtt_sample\""))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["node"] == 0)
        .map(|e| (e["raw"].as_u64().unwrap(), e["corrected"].as_u64().unwrap()))
        .collect();
    (report, samples)
}

fn wifi(report: &Report) -> &WifiStats {
    match &report.links[1].stats {
        LinkStats::Wifi(w) => w,
        other => panic!("not a wifi link: {other:?}"),
    }
}

fn transfer_completed(report: &Report) {
    let find = |name: &str| &report.apps.iter().find(|a| a.name == name).unwrap().stats;
    let AppStats::TcpBulk(bulk) = find("bulk") else {
        panic!("not a bulk sender")
    };
    let AppStats::TcpSink(sink) = find("sink") else {
        panic!("not a sink")
    };
    assert!(bulk.completed && bulk.failure.is_none(), "{bulk:?}");
    assert_eq!(sink.bytes_received, BYTES);
    assert_eq!(sink.bytes_corrupt, 0);
}

#[test]
fn tcp_crosses_the_access_point_intact() {
    let (report, samples) = run(&scenario(20.0, true, true), "near");
    transfer_completed(&report);
    let w = wifi(&report);
    let (ap, sink) = (&w.members[0], &w.members[1]);
    assert_eq!((ap.host.as_str(), sink.host.as_str()), ("ap", "sink"));
    // Every data frame is acknowledged or retried; nothing is dropped 20 m
    // from the access point.
    assert_eq!(w.drops, 0);
    assert_eq!(ap.dcf.data_attempts, ap.dcf.acked + ap.dcf.retries);
    assert_eq!(sink.dcf.received, ap.dcf.acked);
    assert_eq!(ap.dcf.received, sink.dcf.acked);
    // 1 MB of 1440-byte segments.
    assert!(ap.dcf.acked >= BYTES / 1440, "{ap:?}");
    // Retries here come from the sink's TCP ACKs and the AP's data
    // colliding: the two radios cannot hear each other while both send.
    assert_eq!(w.retries, ap.dcf.retries + sink.dcf.retries);
    // With timelost negotiated, only retried frames change the option, and
    // only their RTT samples are corrected, never upwards.
    assert_eq!(ap.timelost_rewrites, ap.dcf.retries);
    assert!(samples.iter().all(|&(raw, corrected)| corrected <= raw));
}

#[test]
fn retransmission_time_is_removed_from_the_sender_s_rtt_samples() {
    // 550 m: with ns-2's defaults a frame arrives with probability 0.73.
    let (report, samples) = run(&scenario(550.0, true, true), "edge");
    transfer_completed(&report);
    let w = wifi(&report);
    assert!(w.members[0].dcf.retries > 100, "{w:?}");
    assert!(w.members[0].timelost_rewrites > 0, "{w:?}");
    let corrected: Vec<u64> = samples
        .iter()
        .filter(|(raw, c)| c < raw)
        .map(|(raw, c)| raw - c)
        .collect();
    assert!(
        corrected.len() > 50,
        "{} corrected samples",
        corrected.len()
    );
    // Corrections are whole 20 µs slots, at least one retry's worth: an
    // ACK timeout (334 µs) and DIFS.
    for d in &corrected {
        assert_eq!(d % 20_000, 0, "{d}");
        assert!(*d >= 380_000, "{d}");
    }
    // A corrected sample keeps at least the wired round trip (10 ms).
    assert!(samples.iter().all(|&(_, c)| c >= 10_000_000));
}

#[test]
fn without_the_option_nothing_is_rewritten_or_corrected() {
    // The source does not offer timelost: the option never appears.
    let (report, samples) = run(&scenario(550.0, false, true), "off");
    transfer_completed(&report);
    let w = wifi(&report);
    assert!(w.retries > 100);
    assert!(w.members.iter().all(|m| m.timelost_rewrites == 0));
    assert!(samples.iter().all(|(raw, c)| raw == c));
    // The link does not account: the option stays 0, nothing corrected.
    let (report, samples) = run(&scenario(550.0, true, false), "link-off");
    transfer_completed(&report);
    assert!(wifi(&report).retries > 100);
    assert!(samples.iter().all(|(raw, c)| raw == c));
}

#[test]
fn scenario_errors_name_the_field() {
    let base = scenario(20.0, true, true);
    let error = |from: &str, to: &str| {
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "{from}");
        Scenario::from_toml_str(&text).unwrap_err().to_string()
    };
    let e = error(
        "kind = \"wifi\"",
        "kind = \"wifi\"\nmac = { data_rate = \"3Mbps\" }",
    );
    assert!(e.contains("link[1].mac.data_rate"), "{e}");
    let e = error("kind = \"wifi\"", "kind = \"wifi\"\nmac = { cw_min = 30 }");
    assert!(e.contains("link[1].mac.cw_min"), "{e}");
    let e = error(
        "kind = \"wifi\"",
        "kind = \"wifi\"\nmac = { short_retry_limit = 0 }",
    );
    assert!(e.contains("link[1].mac.short_retry_limit"), "{e}");
    let e = error(
        "kind = \"wifi\"",
        "kind = \"wifi\"\nradio = { propagation = { kind = \"shadowing\", std_db = -2 } }",
    );
    assert!(e.contains("link[1].radio.propagation.std_db"), "{e}");
    let e = error(", position = { x = 20, y = 0.0 }", "");
    assert!(e.contains("link[1].stations[0].position"), "{e}");
    let e = error(
        "position = { x = 20, y = 0.0 }",
        "position = { x = 20, y = 0.0 }, mobility = { waypoints = [ { at = \"1s\", x = 0, y = 0 }, { at = \"1s\", x = 1, y = 0 } ] }",
    );
    assert!(e.contains("link[1].stations[0].mobility"), "{e}");
    let e = error(
        "position = { x = 20, y = 0.0 } }",
        "position = { x = 20, y = 0.0 } }, { host = \"sink\", address = \"10.0.2.3/24\", position = { x = 1, y = 1 } }",
    );
    assert!(e.contains("link[1].stations[1].host"), "{e}");
    let e = error("ap = {", "apx = {");
    assert!(e.contains("link[1]"), "{e}");
    let e = error("10.0.2.2/24", "10.0.2.1/24");
    assert!(e.contains("link[1].stations[0].address"), "{e}");
}

fn tshark_count(file: &std::path::Path, filter: &str) -> usize {
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(file)
        .args(["-Y", filter, "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn radiotap_captures_decode_cleanly_and_show_the_retries_we_count() {
    if std::process::Command::new("tshark")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("tshark not installed: skipping the capture check");
        return;
    }
    let text = scenario(550.0, true, true).replace("bytes = 1000000", "bytes = 300000")
        + r#"
[[capture]]
host = "ap"
link = "wlan"
file = "ap.pcap"

[[capture]]
host = "sink"
link = "wlan"
file = "sink.pcap"
"#;
    let dir = std::env::temp_dir().join(format!("rtolab-wifi-pcap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scenario = Scenario::from_toml_str(&text).unwrap();
    let options = RunOptions {
        out_dir: Some(dir.clone()),
        ..Default::default()
    };
    let report = run_scenario(&scenario, &options).unwrap();
    let w = wifi(&report).clone();
    let (ap_pcap, sink_pcap) = (dir.join("ap.pcap"), dir.join("sink.pcap"));
    for file in [&ap_pcap, &sink_pcap] {
        assert!(tshark_count(file, "frame") > 500);
        assert_eq!(tshark_count(file, "_ws.malformed"), 0, "{}", file.display());
        // Data frames decode down to TCP through LLC/SNAP and IPv4.
        assert!(tshark_count(file, "wlan.fc.type_subtype == 0x0020 && tcp") > 100);
        assert!(tshark_count(file, "wlan.fc.type_subtype == 0x001d") > 100);
        // 11 Mbit/s data, 1 Mbit/s ACKs, in radiotap.
        assert_eq!(
            tshark_count(file, "wlan.fc.type == 2 && radiotap.datarate != 11"),
            0
        );
        assert_eq!(
            tshark_count(
                file,
                "wlan.fc.type_subtype == 0x001d && radiotap.datarate != 1"
            ),
            0
        );
    }
    // Each interface's capture shows its own retries: the frames it sent
    // with the Retry bit are those our counters call retries.
    let ap_sent = tshark_count(
        &ap_pcap,
        "wlan.fc.retry == 1 && wlan.ta == 02:00:00:00:00:01",
    );
    let sink_sent = tshark_count(
        &sink_pcap,
        "wlan.fc.retry == 1 && wlan.ta == 02:00:00:00:00:02",
    );
    assert!(ap_sent > 10, "{ap_sent}");
    assert_eq!(ap_sent as u64, w.members[0].dcf.retries);
    assert_eq!(sink_sent as u64, w.members[1].dcf.retries);
    assert_eq!((ap_sent + sink_sent) as u64, w.retries);
    std::fs::remove_dir_all(&dir).unwrap();
}
