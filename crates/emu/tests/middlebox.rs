//! Middleboxes at a base station the emulator forwards for, acting on real
//! Linux TCP: a drop list whose losses the kernel repairs, and the
//! ACK-holding base station over a fading link. They need root and
//! /dev/net/tun; without them each test prints why and passes vacuously.

mod common;

use std::path::Path;

use common::{app, emulation_slot, shipped};
use rtolab_emu::runtime::EmuReport;
use rtolab_emu::{emulate, EmuOptions, EmuScenario};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::tcp::TcpFlags;

fn run(emu: &EmuScenario, out_dir: Option<&Path>) -> EmuReport {
    let opts = EmuOptions {
        stop_when_done: true,
        realtime: true,
        out_dir: out_dir.map(Path::to_path_buf),
        ..EmuOptions::default()
    };
    emulate(emu, &opts, |_| {}).unwrap()
}

/// The records of a pcap the emulator wrote (nanosecond stamps, raw
/// IPv4): (time in ns, datagram).
fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 0xa1b2_3c4d, "nanosecond pcap");
    let mut records = Vec::new();
    let mut i = 24;
    while i + 16 <= bytes.len() {
        let t = u64::from(u32_at(i)) * 1_000_000_000 + u64::from(u32_at(i + 4));
        let len = u32_at(i + 8) as usize;
        records.push((t, bytes[i + 16..i + 16 + len].to_vec()));
        i += 16 + len;
    }
    records
}

#[test]
fn a_drop_list_at_a_bridge_drops_linux_segments_and_the_kernel_repairs_them() {
    let Some(_slot) = emulation_slot("a_drop_list_at_a_bridge_drops_linux_segments") else {
        return;
    };
    // The shipped ACK-holding topology with a steady radio link, 200 kB,
    // and the 5th and 6th data segments from the fixed host dropped at the
    // base station.
    let text = shipped("emu-ack-holding-baseline.toml")
        .replace(
            "outages = [ { start = \"10s\", duration = \"10s\" } ]",
            "outages = []",
        )
        .replace("duration = \"45s\"", "duration = \"20s\"")
        .replace("stop = \"40s\"", "bytes = 200_000")
        + "\n[[middlebox]]\nname = \"drops\"\nkind = \"drop-list\"\nhost = \"bs\"\ndrop = [5, 6]\n\
           match = { protocol = \"tcp\", source = \"10.0.0.1\", payload = true }\n";
    let emu = EmuScenario::from_toml_str(&text).unwrap();
    let report = run(&emu, None);
    let mb = &report.engine.middleboxes[0];
    assert_eq!((mb.name.as_str(), mb.dropped), ("drops", 2), "{mb:?}");
    assert_eq!(report.engine.edges.middlebox_drops, 2);
    let fixed = report.engine.hosts.iter().find(|h| h.name == "fixed");
    assert!(fixed.unwrap().wire.retransmissions >= 2, "{:?}", fixed);
    let (bulk, sink) = (app(&report, "bulk"), app(&report, "sink"));
    assert!(bulk.result.completed, "{bulk:?}");
    assert_eq!(sink.result.bytes_received, 200_000);
    assert_eq!(
        sink.result.sha256_received,
        [bulk.result.sha256_sent.clone().unwrap()]
    );
}

#[test]
fn ack_holding_paces_held_acks_to_a_linux_sender_through_an_outage() {
    let Some(_slot) = emulation_slot("ack_holding_paces_held_acks_to_a_linux_sender") else {
        return;
    };
    // The shipped scenario, shortened: a 4 s outage from 3 s, warned at
    // 2.5 s.
    let text = shipped("emu-ack-holding.toml")
        .replace(
            "outages = [ { start = \"10s\", duration = \"10s\" } ]",
            "outages = [ { start = \"3s\", duration = \"4s\" } ]",
        )
        .replace("duration = \"45s\"", "duration = \"12s\"")
        .replace("stop = \"40s\"", "stop = \"10s\"");
    let emu = EmuScenario::from_toml_str(&text).unwrap();
    let dir = std::env::temp_dir().join(format!("rtolab-emu-ack-holding-{}", std::process::id()));
    let report = run(&emu, Some(&dir));
    let names: Vec<&str> = report
        .engine
        .indications
        .iter()
        .filter(|i| i.host == "bs")
        .map(|i| i.indication)
        .collect();
    assert_eq!(names, ["going_down", "gone", "up"]);
    let mb = &report.engine.middleboxes[0];
    let stat = |field: &str| mb.stats[field].as_u64().unwrap();
    // Everything held went out again: ACKs on the schedule or at `up`,
    // cached data at `up`.
    assert!(stat("acks_held") > 0, "{mb:?}");
    assert!(stat("acks_paced") > 0, "{mb:?}");
    assert_eq!(
        stat("acks_held"),
        stat("acks_paced") + stat("acks_released_at_up") + stat("duplicates_dropped")
    );
    assert_eq!(mb.held, mb.released + mb.dropped, "{mb:?}");

    // What the fixed host received from the mobile while the radio link
    // was out: the paced ACKs, spread over the outage rather than sent in
    // a burst, and never a third duplicate.
    let at = |name: &str| {
        let i = report
            .engine
            .indications
            .iter()
            .find(|i| i.host == "bs" && i.indication == name);
        i.unwrap().at_ns
    };
    let (gone, up) = (at("gone"), at("up"));
    let mut acks = Vec::new();
    for (t, datagram) in read_pcap(&dir.join("fixed-wired.pcap")) {
        let Ok(p) = packet::parse(&datagram) else {
            continue;
        };
        let Transport::Tcp(tcp) = p.transport else {
            continue;
        };
        let pure = tcp.payload.is_empty()
            && !tcp.flags.contains(TcpFlags::SYN)
            && !tcp.flags.contains(TcpFlags::FIN);
        if p.ip.src.octets() == [10, 0, 0, 2] && pure && t > gone && t < up {
            acks.push((t, tcp.ack.0, tcp.window));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(acks.len() >= 2, "{acks:?}");
    let first_gap = acks[1].0 - acks[0].0;
    assert!(first_gap > 100_000_000, "paced, not a burst: {acks:?}");
    let mut run_len = 1;
    for pair in acks.windows(2) {
        run_len = if (pair[1].1, pair[1].2) == (pair[0].1, pair[0].2) {
            run_len + 1
        } else {
            1
        };
        assert!(run_len <= 3, "a third duplicate: {acks:?}");
    }
    let fixed = report
        .engine
        .hosts
        .iter()
        .find(|h| h.name == "fixed")
        .unwrap();
    println!(
        "ack holding: {} ACKs held, {} paced, {} at up; the fixed host received {} ACKs during the outage and made {} retransmissions",
        stat("acks_held"),
        stat("acks_paced"),
        stat("acks_released_at_up"),
        acks.len(),
        fixed.wire.retransmissions
    );
}
