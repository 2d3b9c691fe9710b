//! lwIP hosts: the real lwIP 2.1 (Debian's liblwip) in the emulator. The
//! emulations need root, /dev/net/tun and an emulator built with
//! liblwip-dev installed, the program on its own only the latter; without
//! them each test prints why and passes vacuously.

mod common;

use std::path::Path;
use std::process::Command;

use common::{app, emulation_slot, shipped};
use rtolab_emu::runtime::EmuReport;
use rtolab_emu::{emulate, EmuOptions, EmuScenario};

/// The emulation slot, or `None` (with the reason printed) when this
/// machine or this build cannot run lwIP hosts.
fn lwip_slot(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if let Err(reason) = rtolab_emu::lwip::available() {
        eprintln!("skipping {test}: {reason}");
        return None;
    }
    emulation_slot(test)
}

fn run(emu: &EmuScenario, out: Option<&Path>) -> EmuReport {
    let opts = EmuOptions {
        stop_when_done: true,
        realtime: true,
        out_dir: out.map(Path::to_path_buf),
        ..EmuOptions::default()
    };
    emulate(emu, &opts, |_| {}).unwrap()
}

/// A TCP packet as tshark decodes it: source address, flags, payload length.
type Decoded = (String, u16, usize);

/// Each TCP packet of a capture as tshark decodes it, and how many packets
/// tshark found malformed; `None` without tshark.
fn tshark_packets(pcap: &Path) -> Option<(Vec<Decoded>, usize)> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args([
            "-Y",
            "tcp",
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "tcp.flags",
        ])
        .args(["-e", "tcp.len"])
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packets = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let flags = u16::from_str_radix(f[1].trim_start_matches("0x"), 16).unwrap();
            (f[0].to_string(), flags, f[2].parse().unwrap())
        })
        .collect();
    let malformed = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-Y", "_ws.malformed || _ws.expert.severity >= error"])
        .output()
        .ok()?;
    let bad = String::from_utf8_lossy(&malformed.stdout).lines().count();
    Some((packets, bad))
}

const SYN: u16 = 0x02;
const FIN: u16 = 0x01;
const APPLIANCE: &str = "192.168.1.102";
const END_USER: &str = "192.168.1.202";

/// The bridge study's future work against the real lwIP: RFC 1144 header
/// compression on the NFC link (which reads the packets' bytes) and the
/// PTx filter on the bridge.
#[test]
fn lwip_hosts_run_the_bridge_with_header_compression_and_the_ptx_filter() {
    let Some(_slot) =
        lwip_slot("lwip_hosts_run_the_bridge_with_header_compression_and_the_ptx_filter")
    else {
        return;
    };
    let text = shipped("emu-bridge-lwip-real.toml").replacen(
        "rate = \"11.2kbps\"",
        "rate = \"11.2kbps\"\nheader_compression = \"rfc1144\"",
        1,
    )
        + "\n[[middlebox]]\nkind = \"ptx-filter\"\nhost = \"ptx\"\nappliance = \"192.168.1.102\"\n";
    let report = run(&EmuScenario::from_toml_str(&text).unwrap(), None);
    assert_eq!(report.ended_by, "done");
    let client = app(&report, "client");
    assert!(client.result.completed, "{client:?}");
    assert_eq!(client.result.bytes_received, 1024);
    assert_eq!(client.result.bytes_corrupt, 0);
    let nfc = &report.engine.links[0];
    let rtolab_sim::link::LinkStats::Nfc(stats) = &nfc.stats else {
        panic!("{nfc:?}");
    };
    let compressed: u64 = stats.directions.iter().map(|d| d.compressed_packets).sum();
    let on_link: u64 = stats.directions.iter().map(|d| d.link_bytes).sum();
    let sent: u64 = stats.directions.iter().map(|d| d.sent_bytes).sum();
    assert!(compressed > 0 && on_link < sent, "{stats:?}");
    let filter = &report.engine.middleboxes[0];
    assert_eq!(filter.kind, "ptx-filter");
    // It looked at the packets the bridge forwarded.
    assert!(filter.stats["seen"].as_u64() > Some(0), "{filter:?}");
}

#[test]
fn lwip_appliance_and_end_user_complete_the_bridge_exchange() {
    let Some(_slot) = lwip_slot("lwip_appliance_and_end_user_complete_the_bridge_exchange") else {
        return;
    };
    let emu = EmuScenario::from_toml_str(&shipped("emu-bridge-lwip-real.toml")).unwrap();
    let out = std::env::temp_dir().join(format!("rtolab-lwip-test-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let report = run(&emu, Some(&out));
    assert_eq!(report.ended_by, "done");
    let client = app(&report, "client");
    assert!(client.result.completed, "{client:?}");
    assert_eq!(client.result.exchanges_completed, 1);
    assert_eq!(client.result.bytes_sent, 1024);
    assert_eq!(client.result.bytes_received, 1024);
    assert_eq!(client.result.bytes_corrupt, 0);
    let server = app(&report, "server");
    assert!(server.result.completed, "{server:?}");
    assert_eq!(server.result.bytes_received, 1024);
    assert_eq!(server.result.bytes_corrupt, 0);
    // The study's first problem, with the real stack: lwIP sends its first
    // data segment right behind the handshake ACK, and the busy MCU drops it.
    assert!(
        report.engine.edges.link_drops.get("mcu_busy").copied() >= Some(1),
        "{:?}",
        report.engine.edges.link_drops
    );
    match tshark_packets(&out.join("ethernet.pcap")) {
        None => eprintln!("tshark not installed: capture not decoded"),
        Some((packets, malformed)) => {
            assert_eq!(malformed, 0, "tshark found malformed packets");
            let first = &packets[0];
            assert_eq!((first.0.as_str(), first.1 & SYN), (APPLIANCE, SYN));
            for host in [APPLIANCE, END_USER] {
                assert!(
                    packets.iter().any(|p| p.0 == host && p.2 == 1024),
                    "no 1024-byte segment from {host}: {packets:?}"
                );
                assert!(
                    packets.iter().any(|p| p.0 == host && p.1 & FIN != 0),
                    "no FIN from {host}: {packets:?}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}

const P2P: &str = r#"
name = "lwip-p2p"
seed = 3
duration = "30s"

[[host]]
name = "a"
stack = "lwip"

[[host]]
name = "b"
stack = "STACK_B"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "10Mbps"
delay = "5ms"
loss = 0.01

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "a"
peer = "10.0.0.2:5001"
bytes = 300000

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001

[[app]]
kind = "exchange-server"
name = "server"
host = "a"
port = 7891

[[app]]
kind = "exchange"
name = "client"
host = "b"
peer = "10.0.0.1:7891"
request = 3000
response = 5000
count = 2
"#;

#[test]
fn lwip_moves_bulk_data_and_serves_exchanges_over_a_lossy_link() {
    let Some(_slot) = lwip_slot("lwip_moves_bulk_data_and_serves_exchanges_over_a_lossy_link")
    else {
        return;
    };
    // lwIP against lwIP, and against Linux's TCP.
    for peer in ["lwip", "linux"] {
        let emu = EmuScenario::from_toml_str(&P2P.replace("STACK_B", peer)).unwrap();
        let report = run(&emu, None);
        assert_eq!(report.ended_by, "done", "peer {peer}");
        let bulk = app(&report, "bulk");
        let sink = app(&report, "sink");
        assert!(bulk.result.completed, "peer {peer}: {bulk:?}");
        assert_eq!(bulk.result.bytes_sent, 300_000);
        assert_eq!(sink.result.bytes_received, 300_000, "peer {peer}: {sink:?}");
        assert_eq!(sink.result.bytes_corrupt, 0);
        let client = app(&report, "client");
        assert!(client.result.completed, "peer {peer}: {client:?}");
        assert_eq!(client.result.exchanges_completed, 2);
        assert_eq!(client.result.bytes_received, 10_000);
        assert_eq!(client.result.bytes_corrupt, 0);
        let server = app(&report, "server");
        assert_eq!(
            server.result.exchanges_completed, 2,
            "peer {peer}: {server:?}"
        );
        assert_eq!(server.result.bytes_corrupt, 0);
        // The link lost packets and lwIP recovered them.
        let a = report.engine.hosts.iter().find(|h| h.name == "a").unwrap();
        assert!(a.wire.retransmissions > 0, "peer {peer}: {:?}", a.wire);
    }
}

/// The lwIP program on its own, fed by hand: datagrams far larger than
/// its MTU and announced MSS, overlapping fragments, truncated and random
/// bytes. Debian's build must keep serving (the emulator itself never
/// hands it such datagrams: links carry at most their MTU, and the engine
/// rejects malformed ones). No root needed.
#[test]
fn lwip_program_survives_oversized_fragmented_and_garbage_datagrams() {
    use rtolab_emu::lwip::LwipHost;
    use rtolab_emu::lwip_options::LwipOptions;
    use rtolab_wire::ipv4::Ipv4Repr;
    use rtolab_wire::packet::{self, Transport};
    use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};
    use std::net::Ipv4Addr;
    use std::time::Duration;

    if let Err(reason) = rtolab_emu::lwip::available() {
        eprintln!(
            "skipping lwip_program_survives_oversized_fragmented_and_garbage_datagrams: {reason}"
        );
        return;
    }
    let lwip = Ipv4Addr::new(10, 0, 0, 1);
    let peer = Ipv4Addr::new(10, 0, 0, 2);
    let emu = EmuScenario::from_toml_str(&P2P.replace("STACK_B", "lwip")).unwrap();
    let server = emu
        .scenario
        .apps
        .iter()
        .find(|a| a.name == "server")
        .unwrap();
    let host = LwipHost::spawn(
        "a",
        "10.0.0.1/24".parse().unwrap(),
        None,
        LwipOptions::default(),
        &[server],
    )
    .unwrap();
    let ip = |ident: u16| Ipv4Repr {
        src: peer,
        dst: lwip,
        protocol: 6,
        ttl: 64,
        ident,
        dont_fragment: false,
        tos: 0,
        payload_len: 0,
    };
    let segment = |seq: u32, ack: u32, flags: u8, payload: &[u8], ident: u16| {
        let mut out = Vec::new();
        let tcp = TcpRepr {
            src_port: 5555,
            dst_port: 7891,
            seq: SeqNumber(seq),
            ack: SeqNumber(ack),
            flags: TcpFlags(flags),
            window: 65535,
            urgent: 0,
            options: TcpOptions::default(),
            payload,
        };
        packet::emit_tcp(&mut out, &ip(ident), &tcp).unwrap();
        out
    };
    // Waits for lwIP's next TCP segment to us: (seq, ack, payload length).
    let answer = || -> Option<(u32, u32, usize)> {
        let mut buf = vec![0u8; 70_000];
        for _ in 0..200 {
            match host.recv(&mut buf) {
                Ok(n) => {
                    let parsed = packet::parse(&buf[..n]).unwrap();
                    if let Transport::Tcp(t) = parsed.transport {
                        return Some((t.seq.0, t.ack.0, t.payload.len()));
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        None
    };
    host.send(&segment(1000, 0, 0x02, &[], 1)).unwrap();
    let (isn, ack, _) = answer().expect("a SYN-ACK");
    assert_eq!(ack, 1001);
    host.send(&segment(1001, isn + 1, 0x10, &[], 2)).unwrap();
    // A request of 8 + 8000 + 60000 bytes, in two datagrams of 8 kB and
    // 60 kB (lwIP announced an MSS of 1460), asking for 100 bytes back.
    let mut first = Vec::from(68_008u32.to_be_bytes());
    first.extend(100u32.to_be_bytes());
    first.extend(vec![b'A'; 8000]);
    host.send(&segment(1001, isn + 1, 0x18, &first, 3)).unwrap();
    assert_eq!(answer().map(|a| a.1), Some(1001 + 8008));
    host.send(&segment(1001 + 8008, isn + 1, 0x18, &[b'A'; 60_000], 4))
        .unwrap();
    // The response (100 bytes) acknowledges everything, perhaps after a
    // bare ACK.
    let mut answered = false;
    while let Some((_, ack, len)) = answer() {
        assert_eq!(ack, 1001 + 68_008);
        if len == 100 {
            answered = true;
            break;
        }
    }
    assert!(answered, "no response to a 68 kB request");
    // Overlapping fragments of one more segment, then garbage.
    let whole = segment(1001 + 68_008, isn + 101, 0x18, &[b'B'; 3000], 9);
    let payload = &whole[20..];
    for (from, to, more) in [
        (0, 1480, true),
        (1000, 2480, true),
        (1480, payload.len(), false),
    ] {
        let mut frag = Vec::new();
        let header = Ipv4Repr {
            payload_len: to - from,
            ..ip(9)
        };
        frag.resize(20, 0);
        let mut view = rtolab_wire::ipv4::Packet::new_unchecked(&mut frag[..]);
        header.emit(&mut view);
        view.set_more_fragments(more);
        view.set_frag_offset(from as u16);
        view.fill_checksum();
        frag.extend_from_slice(&payload[from..to]);
        host.send(&frag).unwrap();
    }
    assert_eq!(answer().map(|a| a.1), Some(1001 + 68_008 + 3000));
    for junk in [&[0x45u8, 0, 0, 16][..], &[0u8; 3][..], &[0x45u8; 1500][..]] {
        host.send(junk).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let results = host.finish();
    let (_, served) = &results[0];
    assert!(served.completed, "{served:?}");
    assert_eq!(served.bytes_received, 68_008 + 3000);
    assert_eq!(served.bytes_sent, 100);
}
