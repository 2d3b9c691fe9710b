//! The bridge system of the NFC study (bridge spec §1-§4) end to end: the
//! appliance, the time-slotted NFC link, the PTx bridge and the end-user
//! device, in the study's configurations.

use std::path::{Path, PathBuf};

use rtolab_sim::link::LinkStats;
use rtolab_sim::run::build_simulator;
use rtolab_sim::trace::{DropReason, MemorySink, TraceEvent};
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario, SimTime};
use rtolab_wire::packet::{self, Transport};

fn scenario_text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(format!("{name}.toml"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The single exchange for an NFC payload of `nfc_bytes` (TCP payload
/// `nfc_bytes - 56`) at `rate`, starting from the shipped fixed scenario.
fn exchange(rate: &str, nfc_bytes: u32, sensing: bool, rto: Option<&str>) -> Scenario {
    let mut text = scenario_text("bridge-fixed")
        .replace("rate = \"11.2kbps\"", &format!("rate = \"{rate}\""))
        .replace("request = 1024", &format!("request = {}", nfc_bytes - 56))
        .replace("response = 1024", &format!("response = {}", nfc_bytes - 56));
    text = match rto {
        Some(rto) => text.replace("initial = \"3.5s\"", &format!("initial = \"{rto}\"")),
        None => text.replace("tcp = { rto = { initial = \"3.5s\" } }\n", ""),
    };
    if !sensing {
        text = text.replace(", sensing = true", "");
    }
    Scenario::from_toml_str(&text).expect("valid scenario")
}

fn nfc_drops(report: &RunReport) -> u64 {
    report
        .links
        .iter()
        .filter_map(|l| match &l.stats {
            LinkStats::Nfc(s) => Some(s.directions.iter().map(|d| d.dropped_mcu_busy).sum::<u64>()),
            _ => None,
        })
        .sum()
}

fn run(scenario: &Scenario, seed: u64) -> RunReport {
    run_scenario(
        scenario,
        &RunOptions {
            seed: Some(seed),
            ..RunOptions::default()
        },
    )
    .expect("run completes")
}

#[test]
fn sensing_and_the_optimum_rto_leave_nothing_to_retransmit_in_any_cell() {
    for (rate, rto) in [("11.2kbps", "3.5s"), ("24kbps", "2.5s")] {
        for size in [250, 500, 1000, 1080] {
            let scenario = exchange(rate, size, true, Some(rto));
            for seed in 1..=4 {
                let report = run(&scenario, seed);
                let cell = format!("{rate} {size} B seed {seed}");
                assert_eq!(nfc_drops(&report), 0, "{cell}");
                for flow in &report.flows {
                    assert_eq!(flow.counts.retransmissions, 0, "{cell}: {}", flow.host);
                    assert_eq!(flow.counts.dup_acks_sent, 0, "{cell}: {}", flow.host);
                }
                let client = &report.apps[1];
                assert_eq!(client.name, "client");
                let completed = serde_json::to_value(&client.stats).expect("serialises")
                    ["exchanges_completed"]
                    .as_u64();
                assert_eq!(completed, Some(1), "{cell}");
            }
        }
    }
}

#[test]
fn without_sensing_the_first_data_segment_after_the_handshake_ack_is_dropped() {
    for rate in ["11.2kbps", "24kbps"] {
        for seed in 1..=3 {
            let scenario = exchange(rate, 1080, false, None);
            let mut sim = build_simulator(&scenario, seed).expect("builds");
            let sink = MemorySink::new();
            sim.set_trace_sink(Box::new(sink.clone()));
            sim.run_until(SimTime::from_secs(60)).expect("runs");
            let events = sink.events();
            // The appliance's own sends, in order: SYN, handshake ACK, data.
            let sent: Vec<u64> = events
                .iter()
                .filter_map(|(_, e)| match e {
                    TraceEvent::PacketSent {
                        node: 0, packet, ..
                    } => Some(*packet),
                    _ => None,
                })
                .collect();
            let dropped: Vec<(u64, u32)> = events
                .iter()
                .filter_map(|(_, e)| match e {
                    TraceEvent::PacketDropped {
                        node: 0,
                        packet,
                        len,
                        reason: DropReason::McuBusy,
                        ..
                    } => Some((*packet, *len)),
                    _ => None,
                })
                .collect();
            assert!(sent.len() >= 3, "{rate} seed {seed}");
            assert_eq!(
                dropped.first(),
                Some(&(sent[2], 1064)),
                "{rate} seed {seed}: the first data segment is dropped"
            );
            assert!(!dropped.iter().any(|d| d.0 == sent[1]), "the ACK crosses");
        }
    }
}

/// Packets of a pcap file (nanosecond format, raw IPv4), without timestamps.
fn pcap_packets(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).expect("pcap readable");
    let mut packets = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let caplen =
            u32::from_le_bytes(data[at + 8..at + 12].try_into().expect("4 bytes")) as usize;
        at += 16;
        packets.push(data[at..at + caplen].to_vec());
        at += caplen;
    }
    packets
}

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rtolab-bridge-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn the_ptx_forwards_packets_unchanged_and_the_ethernet_side_shows_the_two_hosts() {
    let scenario = Scenario::from_toml_str(&scenario_text("bridge")).expect("valid");
    let dir = out_dir("unchanged");
    let report = run_scenario(
        &scenario,
        &RunOptions {
            out_dir: Some(dir.clone()),
            ..RunOptions::default()
        },
    )
    .expect("runs");
    let nfc = pcap_packets(&dir.join("nfc.pcap"));
    let eth = pcap_packets(&dir.join("ethernet.pcap"));
    assert!(!eth.is_empty());
    let appliance = "192.168.1.102".parse().expect("address");
    let enduser = "192.168.1.202".parse().expect("address");
    for bytes in &eth {
        let parsed = packet::parse(bytes).expect("valid datagram");
        let ends = (parsed.ip.src, parsed.ip.dst);
        assert!(ends == (appliance, enduser) || ends == (enduser, appliance));
        let Transport::Tcp(tcp) = parsed.transport else {
            panic!("only TCP crosses")
        };
        assert!([7891, 49153].contains(&tcp.src_port));
        // What the appliance sent reaches the Ethernet byte for byte (TTL
        // included).
        if ends.0 == appliance {
            assert!(nfc.contains(bytes), "bridged packet changed");
        }
    }
    // And what reached the appliance left the end-user device unchanged
    // (others may have been dropped by the PTx's busy MCU).
    let from_enduser = nfc
        .iter()
        .filter(|b| packet::parse(b).is_ok_and(|p| p.ip.src == enduser))
        .collect::<Vec<_>>();
    assert!(!from_enduser.is_empty());
    assert!(from_enduser.iter().all(|b| eth.contains(b)));
    let ptx = report.nodes.iter().find(|n| n.name == "ptx").expect("ptx");
    assert_eq!(ptx.stats.forwarded, 0);
    assert!(ptx.stats.bridged > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shipped_bridge_scenarios_show_each_fix_at_work() {
    let original = run(
        &Scenario::from_toml_str(&scenario_text("bridge")).expect("valid"),
        1,
    );
    assert!(nfc_drops(&original) > 0);
    assert!(original.flows.iter().any(|f| f.counts.retransmissions > 0));
    let sensing = run(
        &Scenario::from_toml_str(&scenario_text("bridge-sensing")).expect("valid"),
        1,
    );
    assert_eq!(nfc_drops(&sensing), 0);
    for name in ["bridge-fixed", "bridge-24kbps"] {
        let report = run(
            &Scenario::from_toml_str(&scenario_text(name)).expect("valid"),
            1,
        );
        assert_eq!(nfc_drops(&report), 0, "{name}");
        assert!(
            report.flows.iter().all(|f| f.counts.retransmissions == 0),
            "{name}"
        );
    }
}

#[test]
fn nfc_and_bridge_mistakes_are_named() {
    let good = scenario_text("bridge");
    let rejects = |from: &str, to: &str| {
        assert!(good.contains(from), "{from}");
        Scenario::from_toml_str(&good.replacen(from, to, 1))
            .expect_err("rejected")
            .to_string()
    };
    assert_eq!(
        rejects("rate = \"11.2kbps\"", "rate = \"10kbps\""),
        "link[0].rate: an nfc link runs at \"11.2kbps\" or \"24kbps\", got 10000 bit/s"
    );
    assert!(rejects(
        "{ host = \"ptx\" },",
        "{ host = \"ptx\", address = \"192.168.1.1/24\" },"
    )
    .starts_with("link[0].ends[1].address: not allowed"));
    assert!(rejects(
        "{ host = \"enduser\", address = \"192.168.1.202/24\" },",
        "{ host = \"enduser\", address = \"192.168.1.202/24\", sensing = true },"
    )
    .starts_with("link[1].ends[1].sensing: not allowed for point-to-point links"));
    assert!(rejects(
        "{ host = \"enduser\", address = \"192.168.1.202/24\" },",
        "{ host = \"enduser\" },"
    )
    .starts_with("link[1].ends[1].address: missing field"));
    assert!(rejects("kind = \"nfc\"", "kind = \"nfc\"\ndelay = \"1ms\"")
        .starts_with("link[0].delay: not allowed"));
    assert!(rejects(
        "host = \"enduser\"\nport = 7891",
        "host = \"ptx\"\nport = 7891"
    )
    .starts_with("app[0].host: \"ptx\" is a bridge"));
    assert!(rejects(
        "name = \"ptx\"\nbridge = true",
        "name = \"ptx\"\nbridge = true\nprofile = \"lwip\""
    )
    .starts_with("host[1].profile: not allowed"));
}

#[test]
fn per_packet_policies_plug_in_from_the_scenario() {
    for (rto, rate) in [
        ("{ policy = \"bridge\" }", "11.2kbps"),
        (
            "{ policy = \"bridge\", window = 3, channel = { payload_per_slot = 26 } }",
            "24kbps",
        ),
        (
            "{ policy = \"per_byte\", overhead = 56, timer = \"500ms\" }",
            "11.2kbps",
        ),
    ] {
        let text = scenario_text("bridge-fixed")
            .replace("rto = { initial = \"3.5s\" }", &format!("rto = {rto}"))
            .replace("rate = \"11.2kbps\"", &format!("rate = \"{rate}\""));
        let scenario = Scenario::from_toml_str(&text).expect("valid scenario");
        let report = run(&scenario, 2);
        assert_eq!(nfc_drops(&report), 0, "{rto}");
        let client = serde_json::to_value(&report.apps[1].stats).expect("serialises");
        assert_eq!(client["exchanges_completed"].as_u64(), Some(1), "{rto}");
        if rto.contains("bridge") {
            // Algorithm 1 sizes each segment's RTO above its round trip.
            assert!(
                report.flows.iter().all(|f| f.counts.retransmissions == 0),
                "{rto}"
            );
        }
    }
}

#[test]
fn bad_mcu_buffer_and_uart_queue_are_named() {
    let good = scenario_text("bridge");
    let rejects = |setting: &str| {
        let text = good.replacen(
            "rate = \"11.2kbps\"",
            &format!("rate = \"11.2kbps\"\n{setting}"),
            1,
        );
        let line = Scenario::from_toml_str(&text)
            .expect_err(setting)
            .to_string();
        assert!(!line.contains('\n'), "{line:?}");
        line
    };
    for (setting, expected) in [
        (
            "mcu_buffer = 0",
            "link[0].mcu_buffer: must be at least 1 byte",
        ),
        (
            "mcu_buffer = -5",
            "link[0].mcu_buffer: invalid value: integer `-5`, expected u32",
        ),
        (
            "mcu_buffer = \"2kB\"",
            "link[0].mcu_buffer: invalid type: string \"2kB\", expected u32",
        ),
        (
            "uart_queue = [1]",
            "link[0].uart_queue: must list two packet counts, one per end, got 1",
        ),
        (
            "uart_queue = [0, 1, 2]",
            "link[0].uart_queue: must list two packet counts, one per end, got 3",
        ),
        (
            "uart_queue = [0, -1]",
            "link[0].uart_queue[1]: invalid value: integer `-1`, expected usize",
        ),
        (
            "uart_queue = [\"x\", 1]",
            "link[0].uart_queue[0]: invalid type: string \"x\", expected usize",
        ),
        (
            "uart_queue = 1",
            "link[0].uart_queue: invalid type: integer `1`, expected a sequence",
        ),
    ] {
        assert_eq!(rejects(setting), expected, "{setting}");
    }
    // The edges that are allowed: no queue at either end, a 1-byte buffer.
    let text = good.replacen(
        "rate = \"11.2kbps\"",
        "rate = \"11.2kbps\"\nuart_queue = [0, 0]\nmcu_buffer = 1",
        1,
    );
    Scenario::from_toml_str(&text).expect("valid");
}
