//! IEEE 802.15.4 captures carrying 6LoWPAN: what tshark decodes them to.
//!
//! Frames carry a compressed IPv6+TCP segment, a fragmented IPv6+TCP
//! segment, an RPL DIO and an ACK, written once with the FCS (LINKTYPE 195)
//! and once without (LINKTYPE 230). tshark must decode them down to TCP and
//! RPL with the addresses, ports and sequence numbers sent, find every FCS
//! and TCP checksum correct, and report nothing malformed. Skipped when
//! tshark is not installed.
//!
//! Wireshark needs no preference changed: its default FCS format for
//! 802.15.4 is the 2-byte ITU-T CRC-16 this crate writes (`wpan.fcs_format`),
//! and no 6LoWPAN context is used, so `6lowpan.context0..15` may stay empty.

use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use rtolab_wire::icmpv6::{push_rpl_option, rpl_option, Icmpv6Repr, RplOptions, RplRepr};
use rtolab_wire::ieee802154::{self, Address, FrameRepr, FrameType, FrameVersion, FCS_LEN};
use rtolab_wire::ipv6::{self, Ipv6Repr};
use rtolab_wire::pcap::{LinkType, PcapWriter};
use rtolab_wire::sixlowpan;
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr};

const PAN: u16 = 0xabcd;
/// Wireshark's checksum status for a verified, correct checksum (0 is
/// bad, 2 unverified).
const GOOD: &str = "1";
const NODE: Address = Address::Extended([0x00, 0x12, 0x4b, 0, 0, 0, 0, 0x02]);
const ROOT: Address = Address::Extended([0x00, 0x12, 0x4b, 0, 0, 0, 0, 0x01]);

fn node_ip() -> Ipv6Addr {
    "fd00::212:4b00:0:2".parse().unwrap()
}

fn server_ip() -> Ipv6Addr {
    "fd00::1".parse().unwrap()
}

fn data_frame(seq: u8, src: Address, dst: Address) -> FrameRepr {
    FrameRepr {
        frame_type: FrameType::Data,
        version: FrameVersion::V2006,
        frame_pending: false,
        ack_request: dst != ieee802154::BROADCAST,
        seq,
        dst_pan: Some(PAN),
        dst: Some(dst),
        src_pan: None,
        src: Some(src),
    }
}

fn tcp_datagram(seq: u32, payload: &[u8]) -> Vec<u8> {
    let ip = Ipv6Repr {
        src: node_ip(),
        dst: server_ip(),
        next_header: 0,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
        payload_len: 0,
    };
    let tcp = TcpRepr {
        src_port: 49152,
        dst_port: 80,
        seq: SeqNumber(seq),
        ack: SeqNumber(5000),
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 960,
        urgent: 0,
        options: TcpOptions::default(),
        payload,
    };
    let mut out = Vec::new();
    ipv6::emit_tcp(&mut out, &ip, &tcp).unwrap();
    out
}

fn dio_datagram() -> Vec<u8> {
    // A DODAG Configuration option (RFC 6550 §6.7.6) with the values RPL's
    // defaults give: DIOIntervalDoublings 20, DIOIntervalMin 3,
    // redundancy 10, MaxRankIncrease 7*256, MinHopRankIncrease 256, OCP 1
    // (MRHOF), default lifetime 0xff, lifetime unit 0xffff.
    let mut opts = Vec::new();
    push_rpl_option(
        &mut opts,
        rpl_option::DODAG_CONFIGURATION,
        &[
            0, 20, 3, 10, 0x07, 0x00, 0x01, 0x00, 0x00, 0x01, 0, 0xff, 0xff, 0xff,
        ],
    )
    .unwrap();
    let dio = Icmpv6Repr::Rpl(RplRepr::Dio {
        instance_id: 30,
        version: 240,
        rank: 256,
        grounded: true,
        mode_of_operation: 2,
        preference: 0,
        dtsn: 240,
        dodag_id: "fd00::212:4b00:0:1".parse().unwrap(),
        options: RplOptions::parse(&opts).unwrap(),
    });
    let ip = Ipv6Repr {
        src: "fe80::212:4b00:0:1".parse().unwrap(),
        dst: "ff02::1a".parse().unwrap(),
        next_header: 0,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
        payload_len: 0,
    };
    let mut out = Vec::new();
    ipv6::emit_icmpv6(&mut out, &ip, &dio).unwrap();
    out
}

/// The PSDUs of the capture, FCS included, and how many frames the
/// fragmented segment took.
fn frames() -> (Vec<Vec<u8>>, usize) {
    let mut frames = Vec::new();
    let mut mac_seq = 1u8;
    let push = |repr: FrameRepr, payload: &[u8], frames: &mut Vec<Vec<u8>>| {
        let mut psdu = Vec::new();
        repr.emit(payload, &mut psdu).unwrap();
        frames.push(psdu);
    };
    // 1: a 48-byte segment, which fits one frame once compressed.
    let small = tcp_datagram(1000, &[b'a'; 48]);
    let repr = data_frame(mac_seq, NODE, ROOT);
    let packets = sixlowpan::fragment(&small, NODE, ROOT, 1, repr.max_payload_len()).unwrap();
    assert_eq!(packets.len(), 1);
    push(repr, &packets[0], &mut frames);
    // 2: its ACK.
    push(FrameRepr::ack(mac_seq, false), &[], &mut frames);
    mac_seq += 1;
    // 3..: a 300-byte segment in fragments.
    let big: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
    // The sequence number follows on from the first segment's.
    let big = tcp_datagram(1048, &big);
    let repr = data_frame(mac_seq, NODE, ROOT);
    let packets = sixlowpan::fragment(&big, NODE, ROOT, 7, repr.max_payload_len()).unwrap();
    assert!(packets.len() > 2);
    for p in &packets {
        push(data_frame(mac_seq, NODE, ROOT), p, &mut frames);
        mac_seq += 1;
    }
    // Last: a DIO broadcast by the root.
    let dio = dio_datagram();
    let repr = data_frame(mac_seq, ROOT, ieee802154::BROADCAST);
    let packets =
        sixlowpan::fragment(&dio, ROOT, ieee802154::BROADCAST, 0, repr.max_payload_len()).unwrap();
    assert_eq!(packets.len(), 1);
    push(repr, &packets[0], &mut frames);
    (frames, packets.len())
}

fn write(name: &str, link_type: LinkType) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut writer = PcapWriter::create_with(&path, link_type).unwrap();
    for (i, psdu) in frames().0.iter().enumerate() {
        let bytes = match link_type {
            LinkType::Ieee802154NoFcs => &psdu[..psdu.len() - FCS_LEN],
            _ => &psdu[..],
        };
        writer.write_packet(i as u64 * 10_000_000, bytes).unwrap();
    }
    writer.flush().unwrap();
    path
}

#[test]
fn header_records_the_link_type() {
    for (link_type, number) in [
        (LinkType::Ieee802154WithFcs, 195u32),
        (LinkType::Ieee802154NoFcs, 230),
    ] {
        assert_eq!(link_type.number(), number);
        let bytes = std::fs::read(write(&format!("lt{number}.pcap"), link_type)).unwrap();
        assert_eq!(&bytes[20..24], &number.to_le_bytes());
    }
}

/// tshark's fields for every frame, or `None` when tshark is absent.
fn tshark_fields(path: &Path, fields: &[&str]) -> Option<Vec<Vec<String>>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(path)
        .args(["-o", "tcp.check_checksum:TRUE"])
        .args(["-o", "tcp.analyze_sequence_numbers:FALSE"])
        .args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=a"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = match cmd.output() {
        Ok(out) => out,
        Err(_) => {
            println!("note: tshark not found on PATH; skipping the Wireshark check");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .map(|l| l.split('|').map(str::to_owned).collect())
            .collect(),
    )
}

fn check(path: &Path, with_fcs: bool) {
    let fields = [
        "wpan.frame_type",
        "wpan.seq_no",
        "wpan.fcs_ok",
        "ipv6.src",
        "ipv6.dst",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.seq_raw",
        "tcp.len",
        "tcp.checksum.status",
        "icmpv6.checksum.status",
        "icmpv6.type",
        "icmpv6.code",
        "icmpv6.rpl.dio.rank",
        "icmpv6.rpl.dio.dagid",
        "_ws.malformed",
        "_ws.expert.message",
    ];
    let Some(rows) = tshark_fields(path, &fields) else {
        return;
    };
    let (frames, _) = frames();
    assert_eq!(rows.len(), frames.len());
    let col = |row: &Vec<String>, name: &str| {
        row[fields.iter().position(|f| *f == name).unwrap()].clone()
    };
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(col(row, "_ws.malformed"), "", "frame {}: {row:?}", i + 1);
        let expert = col(row, "_ws.expert.message");
        for bad in ["Malformed", "Bad", "incorrect", "exception", "Error"] {
            assert!(!expert.contains(bad), "frame {}: {expert}", i + 1);
        }
        if with_fcs {
            assert_eq!(col(row, "wpan.fcs_ok"), "1", "frame {}", i + 1);
        }
    }
    // Frame 1: one compressed segment.
    let first = &rows[0];
    assert_eq!(col(first, "wpan.frame_type"), "0x0001");
    assert_eq!(col(first, "ipv6.src"), node_ip().to_string());
    assert_eq!(col(first, "ipv6.dst"), server_ip().to_string());
    assert_eq!(
        (col(first, "tcp.srcport"), col(first, "tcp.dstport")),
        ("49152".into(), "80".into())
    );
    assert_eq!(col(first, "tcp.seq_raw"), "1000");
    assert_eq!(col(first, "tcp.len"), "48");
    assert_eq!(col(first, "tcp.checksum.status"), GOOD);
    assert_eq!(col(first, "wpan.seq_no"), "1");
    // Frame 2: the ACK, with the sequence number it acknowledges.
    assert_eq!(col(&rows[1], "wpan.frame_type"), "0x0002");
    assert_eq!(col(&rows[1], "wpan.seq_no"), "1");
    // The fragments: tshark reassembles them and decodes the segment at
    // the last one.
    let last_frag = &rows[rows.len() - 2];
    assert_eq!(col(last_frag, "ipv6.src"), node_ip().to_string());
    assert_eq!(col(last_frag, "tcp.seq_raw"), "1048");
    assert_eq!(col(last_frag, "tcp.len"), "300");
    assert_eq!(col(last_frag, "tcp.checksum.status"), GOOD);
    for row in &rows[2..rows.len() - 2] {
        assert_eq!(col(row, "tcp.seq_raw"), "", "{row:?}");
    }
    // The DIO.
    let dio = &rows[rows.len() - 1];
    assert_eq!(col(dio, "ipv6.src"), "fe80::212:4b00:0:1");
    assert_eq!(col(dio, "ipv6.dst"), "ff02::1a");
    assert_eq!(
        (col(dio, "icmpv6.type"), col(dio, "icmpv6.code")),
        ("155".into(), "1".into())
    );
    assert_eq!(col(dio, "icmpv6.checksum.status"), GOOD);
    assert_eq!(col(dio, "icmpv6.rpl.dio.rank"), "256");
    assert_eq!(col(dio, "icmpv6.rpl.dio.dagid"), "fd00::212:4b00:0:1");
}

#[test]
fn tshark_decodes_frames_with_fcs() {
    check(&write("mesh195.pcap", LinkType::Ieee802154WithFcs), true);
}

#[test]
fn tshark_decodes_frames_without_fcs() {
    check(&write("mesh230.pcap", LinkType::Ieee802154NoFcs), false);
}
