//! Capture files: header layout, records read back with pcap-file, and
//! (when tshark is installed) Wireshark's own verdict.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use pcap_file::pcap::PcapReader;
use pcap_file::{DataLink, TsResolution};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet;
use rtolab_wire::pcap::PcapWriter;
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use rtolab_wire::Ipv4Addr;

const FIXTURES: [&[u8]; 7] = [
    include_bytes!("fixtures/syn.bin"),
    include_bytes!("fixtures/synack.bin"),
    include_bytes!("fixtures/ack.bin"),
    include_bytes!("fixtures/data.bin"),
    include_bytes!("fixtures/fin.bin"),
    include_bytes!("fixtures/udp.bin"),
    include_bytes!("fixtures/sack.bin"),
];

/// A segment carrying the timelost option, which no real capture has.
fn timelost_datagram() -> Vec<u8> {
    let ip = Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        protocol: protocol::TCP,
        ttl: 64,
        ident: 1,
        dont_fragment: true,
        tos: 0,
        payload_len: 0,
    };
    let tcp = TcpRepr {
        src_port: 40001,
        dst_port: 8080,
        seq: SeqNumber(100),
        ack: SeqNumber(200),
        flags: TcpFlags::PSH | TcpFlags::ACK,
        window: 500,
        urgent: 0,
        options: TcpOptions {
            timestamps: Some(Timestamps { tsval: 1, tsecr: 2 }),
            timelost: Some(1234),
            ..Default::default()
        },
        payload: b"hello",
    };
    let mut out = Vec::new();
    packet::emit_tcp(&mut out, &ip, &tcp).unwrap();
    out
}

fn packets() -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> = FIXTURES.iter().map(|f| f.to_vec()).collect();
    all.push(timelost_datagram());
    all
}

fn write_capture(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut writer = PcapWriter::create(&path).unwrap();
    for (i, p) in packets().iter().enumerate() {
        // 1.5 s apart plus a sub-microsecond part that only nanosecond
        // resolution keeps.
        let time_ns = i as u64 * 1_500_000_000 + 7;
        writer.write_packet(time_ns, p).unwrap();
    }
    assert_eq!(writer.snaplen(), 65535);
    writer.flush().unwrap();
    path
}

#[test]
fn header_is_nanosecond_raw_ip() {
    let path = write_capture("header.pcap");
    let bytes = fs::read(&path).unwrap();
    assert_eq!(&bytes[0..4], &0xa1b2_3c4du32.to_le_bytes());
    assert_eq!(&bytes[4..8], &[2, 0, 4, 0]);
    assert_eq!(&bytes[16..20], &65535u32.to_le_bytes());
    assert_eq!(&bytes[20..24], &101u32.to_le_bytes());
}

#[test]
fn records_read_back_with_times_and_bytes() {
    let path = write_capture("readback.pcap");
    let mut reader = PcapReader::new(fs::File::open(&path).unwrap()).unwrap();
    assert_eq!(reader.header().datalink, DataLink::RAW);
    assert_eq!(reader.header().ts_resolution, TsResolution::NanoSecond);
    let expected = packets();
    let mut n = 0;
    while let Some(record) = reader.next_packet() {
        let record = record.unwrap();
        assert_eq!(record.timestamp.as_nanos(), n as u128 * 1_500_000_000 + 7);
        assert_eq!(record.orig_len as usize, expected[n].len());
        assert_eq!(&record.data[..], &expected[n][..]);
        n += 1;
    }
    assert_eq!(n, expected.len());
}

#[test]
fn oversized_packets_are_refused_and_the_file_stays_valid() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("oversized.pcap");
    let mut writer = PcapWriter::create(&path).unwrap();
    let err = writer.write_packet(0, &vec![0x45; 65536]).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    writer.write_packet(1, &vec![0x45; 65535]).unwrap();
    writer.flush().unwrap();
    let mut reader = PcapReader::new(fs::File::open(&path).unwrap()).unwrap();
    let record = reader.next_packet().unwrap().unwrap();
    assert_eq!((record.data.len(), record.orig_len), (65535, 65535));
    assert!(reader.next_packet().is_none());
}

#[test]
fn same_packets_give_identical_files() {
    let a = fs::read(write_capture("same-a.pcap")).unwrap();
    let b = fs::read(write_capture("same-b.pcap")).unwrap();
    assert_eq!(a, b);
}

#[test]
fn tshark_reads_the_capture_without_complaint() {
    let path = write_capture("tshark.pcap");
    let run = |args: &[&str]| {
        Command::new("tshark")
            .arg("-r")
            .arg(&path)
            .args(["-o", "tcp.check_checksum:TRUE"])
            .args(["-o", "udp.check_checksum:TRUE"])
            .args(["-o", "ip.check_checksum:TRUE"])
            .args(args)
            .output()
    };
    let fields = match run(&[
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-e",
        "ip.src",
        "-e",
        "tcp.srcport",
        "-e",
        "tcp.dstport",
        "-e",
        "udp.srcport",
        "-e",
        "udp.dstport",
        "-e",
        "tcp.len",
        "-e",
        "_ws.expert.message",
    ]) {
        Ok(out) if out.status.success() => String::from_utf8(out.stdout).unwrap(),
        Ok(out) => panic!("tshark failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => {
            println!("note: tshark not found on PATH; skipping the Wireshark check");
            return;
        }
    };
    let rows: Vec<Vec<&str>> = fields.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), packets().len(), "{fields}");
    for row in &rows {
        let expert = row[6];
        for bad in [
            "Malformed",
            "Bad checksum",
            "incorrect",
            "Bogus",
            "exception",
        ] {
            assert!(!expert.contains(bad), "tshark complained: {expert}");
        }
    }
    let ports: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r[0], r[1], r[2])).collect();
    assert_eq!(ports[0], ("127.0.0.1", "59884", "50007"));
    assert_eq!(ports[1], ("127.0.0.1", "50007", "59884"));
    assert_eq!(ports[6], ("10.0.2.2", "50009", "57856"));
    assert_eq!(ports[7], ("10.0.0.1", "40001", "8080"));
    assert_eq!((rows[5][3], rows[5][4]), ("38973", "50008"));
    assert_eq!(rows[3][5], "512");

    // The expert summary has no error-level entries either.
    let out = run(&["-q", "-z", "expert,error"]).unwrap();
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(!summary.contains("Malformed"), "{summary}");
}
