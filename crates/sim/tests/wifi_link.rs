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
    let (report, samples, _) = run_traced(text, tag);
    (report, samples)
}

/// As [`run`], with the `mac_attempt` trace events too: (attempts,
/// attempts beyond the first).
fn run_traced(text: &str, tag: &str) -> (Report, Vec<(u64, u64)>, (u64, u64)) {
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
    let attempts: Vec<u64> = traces
        .lines()
        .filter(|l| l.contains("\"mac_attempt\""))
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["attempt"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let retried = attempts.iter().filter(|&&a| a > 1).count() as u64;
    (report, samples, (attempts.len() as u64, retried))
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
    let (report, samples, (attempts, retried)) = run_traced(&scenario(20.0, true, true), "near");
    transfer_completed(&report);
    let w = wifi(&report);
    // Each data frame put on air is traced, retransmissions numbered.
    let data_attempts: u64 = w.members.iter().map(|m| m.dcf.data_attempts).sum();
    assert_eq!((attempts, retried), (data_attempts, w.retries));
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
fn a_packet_keeps_its_trace_id_across_the_bss() {
    let dir: PathBuf = std::env::temp_dir().join(format!("rtolab-wifi-ids-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scenario = Scenario::from_toml_str(&scenario(20.0, false, false)).unwrap();
    let options = RunOptions {
        write_traces: true,
        out_dir: Some(dir.clone()),
        ..Default::default()
    };
    let report = run_scenario(&scenario, &options).unwrap();
    transfer_completed(&report);
    let traces = std::fs::read_to_string(dir.join("traces.jsonl")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let events: Vec<serde_json::Value> = traces
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["link"] == 1)
        .collect();
    let ids = |kinds: &[&str]| -> std::collections::BTreeSet<u64> {
        events
            .iter()
            .filter(|e| kinds.iter().any(|k| e["event"] == *k))
            .map(|e| e["packet"].as_u64().unwrap())
            .collect()
    };
    // What a station handed the BSS is traced as sent once acknowledged,
    // or as dropped; what arrives is received under the same id.
    let handed = ids(&["packet_sent", "packet_dropped"]);
    let received = ids(&["packet_received"]);
    assert!(received.len() as u64 >= BYTES / 1440);
    let strangers: Vec<_> = received.difference(&handed).collect();
    assert!(
        strangers.is_empty(),
        "received under new ids: {strangers:?}"
    );
}

#[test]
fn the_ns2_preset_sends_at_1_mbps_with_rts_cts_before_every_frame() {
    let text = scenario(20.0, false, true).replace(
        "kind = \"wifi\"\n",
        "kind = \"wifi\"\nmac = { preset = \"ns2\" }\n",
    );
    let (report, _) = run(&text, "ns2-preset");
    transfer_completed(&report);
    let w = wifi(&report);
    let (ap, sink) = (&w.members[0], &w.members[1]);
    // An RTS before every data frame (more RTS than data frames: the AP's
    // and the sink's RTS frames collide now and then), and a data frame
    // only after a CTS.
    for m in [ap, sink] {
        assert!(m.dcf.rts_sent >= m.dcf.data_attempts, "{m:?}");
        assert!(m.dcf.data_attempts > 0);
    }
    assert!(sink.dcf.cts_sent >= ap.dcf.data_attempts);
    assert!(sink.dcf.cts_sent <= ap.dcf.rts_sent);
    assert!(ap.dcf.cts_sent >= sink.dcf.data_attempts);
    // At 1 Mbit/s, 1 MB takes more than 8 s of data frames alone; the
    // default 802.11b link moves it in about 1.5 s.
    let bulk = report.apps.iter().find(|a| a.name == "bulk").unwrap();
    let AppStats::TcpBulk(b) = &bulk.stats else {
        panic!("not a bulk sender")
    };
    assert!(b.completion_time_ns.unwrap() > 8_000_000_000, "{b:?}");
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
    let e = error(
        "kind = \"wifi\"",
        "kind = \"wifi\"\nmac = { preset = \"802.11g\" }",
    );
    assert!(e.contains("link[1].mac.preset"), "{e}");
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
    let e = error("address = \"10.0.2.2/24\", ", "");
    assert!(e.contains("link[1].stations[0].address: required"), "{e}");
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

/// The records of a nanosecond pcap: (time in ns, bytes).
fn pcap_records(pcap: &[u8]) -> Vec<(u64, Vec<u8>)> {
    let word = |at: usize| u64::from(u32::from_le_bytes(pcap[at..at + 4].try_into().unwrap()));
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let time = word(at) * 1_000_000_000 + word(at + 4);
        let len = word(at + 8) as usize;
        at += 16;
        out.push((time, pcap[at..at + len].to_vec()));
        at += len;
    }
    out
}

/// (transmitter's last address byte, (IP identification, TCP sequence
/// number), rets) of every data frame carrying a TCP segment with payload
/// and the timelost option.
fn captured_rets(pcap: &[u8]) -> Vec<(u8, (u16, u32), u32)> {
    pcap_records(pcap)
        .into_iter()
        .filter_map(|(_, frame)| {
            let radiotap = usize::from(u16::from_le_bytes([frame[2], frame[3]]));
            let mpdu = &frame[radiotap..];
            // Data frames only: 24-byte header, 8 of LLC/SNAP, then IPv4.
            if mpdu[0] != 0x08 {
                return None;
            }
            let ip = &mpdu[32..];
            let rets = rtolab_wire::timelost::read_rets(ip)?;
            let tcp = &ip[usize::from(ip[0] & 0x0f) * 4..];
            let header = usize::from(tcp[12] >> 4) * 4;
            (tcp.len() > header).then(|| {
                let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
                let ident = u16::from_be_bytes([ip[4], ip[5]]);
                (mpdu[15], (ident, seq), rets)
            })
        })
        .collect()
}

#[test]
fn two_wireless_hops_add_their_lost_time() {
    // sta1 ))) ap ))) sta2, both stations near the edge: every segment
    // crosses the BSS twice, relayed by the AP's host.
    let text = r#"
name = "wifi-two-hops"
seed = 5
duration = "30s"

[[host]]
name = "ap"

[[host]]
name = "sta1"
[host.tcp]
timelost = true

[[host]]
name = "sta2"
[host.tcp]
timelost = true

[[link]]
name = "wlan"
kind = "wifi"
ap = { host = "ap", address = "10.0.2.1/24", position = { x = 0.0, y = 0.0 } }
stations = [
  { host = "sta1", address = "10.0.2.2/24", position = { x = -500.0, y = 0.0 } },
  { host = "sta2", address = "10.0.2.3/24", position = { x = 500.0, y = 0.0 } },
]

[[capture]]
host = "ap"
link = "wlan"
file = "ap.pcap"

[[capture]]
host = "sta2"
link = "wlan"
file = "sta2.pcap"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "sta2"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "sta1"
peer = "10.0.2.3:5001"
bytes = 200000
"#;
    let dir = std::env::temp_dir().join(format!("rtolab-wifi-2hop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let scenario = Scenario::from_toml_str(text).unwrap();
    let options = RunOptions {
        out_dir: Some(dir.clone()),
        ..Default::default()
    };
    let report = run_scenario(&scenario, &options).unwrap();
    let find = |name: &str| &report.apps.iter().find(|a| a.name == name).unwrap().stats;
    let AppStats::TcpSink(sink) = find("sink") else {
        panic!("not a sink")
    };
    assert_eq!(sink.bytes_received, 200_000);
    let ap_pcap = std::fs::read(dir.join("ap.pcap")).unwrap();
    let sta2_pcap = std::fs::read(dir.join("sta2.pcap")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // Hop 1 as the AP heard it from sta1 (address ..:02), hop 2 as sta2
    // heard it from the AP (..:01), per datagram (a TCP retransmission is
    // a new one). The AP forwards the first copy it receives; values only
    // grow with later attempts.
    let mut first_hop = std::collections::BTreeMap::new();
    for (from, key, rets) in captured_rets(&ap_pcap) {
        if from == 2 {
            first_hop.entry(key).or_insert(rets);
        }
    }
    let second_hop: Vec<((u16, u32), u32)> = captured_rets(&sta2_pcap)
        .into_iter()
        .filter(|(from, ..)| *from == 1)
        .map(|(_, seq, rets)| (seq, rets))
        .collect();
    let mut compared = 0;
    let mut grew = 0;
    for (seq, rets) in &second_hop {
        if let Some(&before) = first_hop.get(seq) {
            compared += 1;
            assert!(
                *rets >= before,
                "{seq:?}: {rets} after the AP, {before} before"
            );
            grew += usize::from(*rets > before);
        }
    }
    assert!(compared > 50, "{compared}");
    // The AP retried some of them and added its own time.
    assert!(grew > 5, "{grew} of {compared}");
    // And some arrived at the AP already carrying sta1's time.
    assert!(first_hop.values().filter(|&&r| r > 0).count() > 5);
}

#[test]
fn ipv6_crosses_the_bss_with_the_option_accounted() {
    // The IPv4 scenario turned IPv6-only.
    let text = scenario(550.0, true, true)
        .replace("address = \"10.0.1.1/24\"", "ipv6 = \"fd00:1::1/64\"")
        .replace("address = \"10.0.1.2/24\"", "ipv6 = \"fd00:1::2/64\"")
        .replace("address = \"10.0.2.1/24\"", "ipv6 = \"fd00:2::1/64\"")
        .replace("address = \"10.0.2.2/24\"", "ipv6 = \"fd00:2::2/64\"")
        .replace("via = \"10.0.1.2\"", "via = \"fd00:1::2\"")
        .replace("peer = \"10.0.2.2:5001\"", "peer = \"[fd00:2::2]:5001\"");
    assert!(!text.contains("10.0."), "{text}");
    let (report, samples) = run(&text, "v6");
    transfer_completed(&report);
    let w = wifi(&report);
    assert!(w.members[0].dcf.retries > 100, "{w:?}");
    assert_eq!(w.members[0].timelost_rewrites, w.members[0].dcf.retries);
    assert!(samples.iter().filter(|(raw, c)| c < raw).count() > 50);
}
