//! Real Linux packets (see `fixtures/README.md`): parse, check known field
//! values, re-emit byte for byte, and survive truncation and corruption.

use rtolab_wire::ipv4::{self, protocol, Ipv4Repr};
use rtolab_wire::packet::{self, ParsedPacket, Transport};
use rtolab_wire::tcp::{SackBlock, SeqNumber, TcpFlags, TcpRepr, Timestamps};
use rtolab_wire::udp::UdpRepr;
use rtolab_wire::{Ipv4Addr, WireErrorKind};

const SYN: &[u8] = include_bytes!("fixtures/syn.bin");
const SYNACK: &[u8] = include_bytes!("fixtures/synack.bin");
const ACK: &[u8] = include_bytes!("fixtures/ack.bin");
const DATA: &[u8] = include_bytes!("fixtures/data.bin");
const FIN: &[u8] = include_bytes!("fixtures/fin.bin");
const UDP: &[u8] = include_bytes!("fixtures/udp.bin");
const SACK: &[u8] = include_bytes!("fixtures/sack.bin");

const ALL: [(&str, &[u8]); 7] = [
    ("syn", SYN),
    ("synack", SYNACK),
    ("ack", ACK),
    ("data", DATA),
    ("fin", FIN),
    ("udp", UDP),
    ("sack", SACK),
];

const CLIENT_PORT: u16 = 59884;
const SERVER_PORT: u16 = 50007;
const CLIENT_ISN: u32 = 4067267378;
const SERVER_ISN: u32 = 1887654919;

fn tcp(bytes: &[u8]) -> (Ipv4Repr, TcpRepr<'_>) {
    match packet::parse(bytes).expect("fixture parses") {
        ParsedPacket {
            ip,
            transport: Transport::Tcp(tcp),
        } => (ip, tcp),
        other => panic!("expected TCP, got {other:?}"),
    }
}

fn assert_loopback_ip(ip: &Ipv4Repr, ident: u16, payload_len: usize) {
    assert_eq!(ip.src, Ipv4Addr::LOCALHOST);
    assert_eq!(ip.dst, Ipv4Addr::LOCALHOST);
    assert_eq!(ip.ttl, 64);
    assert_eq!(ip.tos, 0);
    assert!(ip.dont_fragment);
    assert_eq!(ip.ident, ident);
    assert_eq!(ip.payload_len, payload_len);
}

#[test]
fn syn_fields() {
    let (ip, syn) = tcp(SYN);
    assert_loopback_ip(&ip, 33686, 40);
    assert_eq!(ip.protocol, protocol::TCP);
    assert_eq!((syn.src_port, syn.dst_port), (CLIENT_PORT, SERVER_PORT));
    assert_eq!(syn.flags, TcpFlags::SYN);
    assert_eq!(syn.seq, SeqNumber(CLIENT_ISN));
    assert_eq!(syn.window, 65495);
    assert_eq!(syn.options.mss, Some(65495));
    assert!(syn.options.sack_permitted);
    assert_eq!(
        syn.options.timestamps,
        Some(Timestamps {
            tsval: 3168203400,
            tsecr: 0
        })
    );
    assert_eq!(syn.options.window_scale, Some(10));
    assert_eq!(syn.options.sack_block_count(), 0);
    assert_eq!(syn.options.timelost, None);
    assert!(syn.payload.is_empty());
    assert_eq!(syn.segment_len(), 1);
}

#[test]
fn synack_fields() {
    let (ip, synack) = tcp(SYNACK);
    assert_loopback_ip(&ip, 0, 40);
    assert_eq!(
        (synack.src_port, synack.dst_port),
        (SERVER_PORT, CLIENT_PORT)
    );
    assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(synack.flags.to_string(), "SYN,ACK");
    assert_eq!(synack.seq, SeqNumber(SERVER_ISN));
    assert_eq!(synack.ack, SeqNumber(CLIENT_ISN) + 1usize);
    assert_eq!(synack.window, 65483);
    assert_eq!(synack.options.mss, Some(65495));
    assert!(synack.options.sack_permitted);
    assert_eq!(synack.options.window_scale, Some(10));
    assert_eq!(
        synack.options.timestamps,
        Some(Timestamps {
            tsval: 1191440107,
            tsecr: 3168203400
        })
    );
}

#[test]
fn handshake_ack_fields() {
    let (ip, ack) = tcp(ACK);
    assert_loopback_ip(&ip, 33687, 32);
    assert_eq!(ack.flags, TcpFlags::ACK);
    assert_eq!(ack.seq, SeqNumber(CLIENT_ISN + 1));
    assert_eq!(ack.ack, SeqNumber(SERVER_ISN + 1));
    assert_eq!(ack.window, 64);
    assert_eq!(ack.options.mss, None);
    assert!(!ack.options.sack_permitted);
    assert_eq!(
        ack.options.timestamps,
        Some(Timestamps {
            tsval: 3168203400,
            tsecr: 1191440107
        })
    );
    assert_eq!(ack.segment_len(), 0);
}

#[test]
fn data_fields() {
    let (ip, data) = tcp(DATA);
    assert_loopback_ip(&ip, 33688, 32 + 512);
    assert_eq!(data.flags, TcpFlags::PSH | TcpFlags::ACK);
    assert_eq!(data.seq, SeqNumber(CLIENT_ISN + 1));
    assert_eq!(data.ack, SeqNumber(SERVER_ISN + 1));
    assert_eq!(data.payload.len(), 512);
    // The client's first write was the bytes 0, 1, ..., 255, 0, 1, ..., 255.
    assert!(data
        .payload
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i % 256) as u8));
    assert_eq!(data.segment_len(), 512);
}

#[test]
fn fin_fields() {
    let (ip, fin) = tcp(FIN);
    assert_loopback_ip(&ip, 33692, 32);
    assert_eq!(fin.flags, TcpFlags::FIN | TcpFlags::ACK);
    // Four 512-byte writes after the SYN.
    assert_eq!(fin.seq, SeqNumber(CLIENT_ISN) + (1 + 4 * 512usize));
    assert_eq!(fin.ack, SeqNumber(SERVER_ISN + 1));
    assert_eq!(fin.segment_len(), 1);
}

#[test]
fn udp_fields() {
    let parsed = packet::parse(UDP).unwrap();
    assert_loopback_ip(&parsed.ip, 16470, 26);
    assert_eq!(parsed.ip.protocol, protocol::UDP);
    assert_eq!(
        parsed.transport,
        Transport::Udp(UdpRepr {
            src_port: 38973,
            dst_port: 50008,
            payload: b"rtolab udp fixture",
        })
    );
}

#[test]
fn sack_fields() {
    let (ip, ack) = tcp(SACK);
    assert_eq!(ip.src, Ipv4Addr::new(10, 0, 2, 2));
    assert_eq!(ip.dst, Ipv4Addr::new(10, 0, 1, 1));
    assert_eq!(ip.ident, 31302);
    assert_eq!((ack.src_port, ack.dst_port), (50009, 57856));
    assert_eq!(ack.flags, TcpFlags::ACK);
    assert_eq!(ack.ack, SeqNumber(2732886735));
    assert_eq!(ack.window, 77);
    assert_eq!(
        ack.options.timestamps,
        Some(Timestamps {
            tsval: 1514087179,
            tsecr: 1618385164
        })
    );
    let block = |left, right| SackBlock {
        left: SeqNumber(left),
        right: SeqNumber(right),
    };
    let blocks: Vec<SackBlock> = ack.options.sack_blocks().collect();
    assert_eq!(
        blocks,
        [
            block(2732891079, 2732892527),
            block(2732888183, 2732889631),
            block(2732893975, 2732898319),
        ]
    );
    assert_eq!(ack.options.sack_blocks[3], None);
    // Every SACKed byte lies above the cumulative ACK.
    assert!(blocks.iter().all(|b| b.left > ack.ack && b.right > b.left));
}

#[test]
fn every_fixture_reemits_byte_for_byte() {
    for (name, bytes) in ALL {
        let parsed = packet::parse(bytes).unwrap();
        let mut out = Vec::new();
        let len = match parsed.transport {
            Transport::Tcp(tcp) => packet::emit_tcp(&mut out, &parsed.ip, &tcp),
            Transport::Udp(udp) => packet::emit_udp(&mut out, &parsed.ip, &udp),
            Transport::Other { .. } => panic!("{name}: unexpected protocol"),
        }
        .unwrap();
        assert_eq!(len, bytes.len(), "{name}");
        assert_eq!(out, bytes, "{name}");
    }
}

#[test]
fn every_fixture_view_reads_the_same_header() {
    for (name, bytes) in ALL {
        let view = ipv4::Packet::new_checked(bytes).unwrap();
        assert_eq!(view.version(), 4, "{name}");
        assert_eq!(view.header_len(), ipv4::HEADER_LEN, "{name}");
        assert_eq!(usize::from(view.total_len()), bytes.len(), "{name}");
        assert!(view.verify_checksum(), "{name}");
        assert_eq!(view.payload().len(), bytes.len() - ipv4::HEADER_LEN);
    }
}

#[test]
fn every_prefix_is_rejected_without_panicking() {
    for (name, bytes) in ALL {
        for len in 0..bytes.len() {
            let err = packet::parse(&bytes[..len]).unwrap_err();
            // The IPv4 header announces the full length, so any prefix is
            // caught there, by name.
            assert!(err.field.starts_with("ipv4."), "{name}[..{len}]: {err}");
        }
    }
}

#[test]
fn every_prefix_of_a_segment_is_an_error_or_a_shorter_segment() {
    let mut checksum_collisions = Vec::new();
    for (name, bytes) in ALL {
        let view = ipv4::Packet::new_checked(bytes).unwrap();
        let (src, dst) = (view.src_addr(), view.dst_addr());
        let transport = view.payload();
        for len in 0..transport.len() {
            let prefix = &transport[..len];
            if view.protocol() == protocol::TCP {
                let header_len = usize::from(transport[12] >> 4) * 4;
                match TcpRepr::parse(prefix, src, dst, false) {
                    Ok(tcp) => {
                        assert!(len >= header_len, "{name}[..{len}] parsed");
                        assert_eq!(tcp.payload, &transport[header_len..len]);
                    }
                    Err(e) => {
                        assert!(len < header_len, "{name}[..{len}]: {e}");
                        assert!(e.field.starts_with("tcp."), "{name}: {e}");
                    }
                }
                if TcpRepr::parse(prefix, src, dst, true).is_ok() {
                    checksum_collisions.push((name, len));
                }
            } else {
                let err = UdpRepr::parse(prefix, src, dst, true).unwrap_err();
                assert!(err.field.starts_with("udp."), "{name}: {err}");
            }
        }
    }
    // With the checksum checked, truncation is caught except where the
    // 16-bit one's-complement sum cannot see it: cutting the last three
    // payload bytes fd fe ff turns words fcfd+feff into fc00 and shortens
    // the pseudo-header length by 3, a change of exactly 0xffff.
    assert_eq!(checksum_collisions, [("data", 541)]);
}

#[test]
fn every_byte_flip_is_caught_and_named() {
    for (name, bytes) in ALL {
        let header_len = ipv4::HEADER_LEN;
        let is_tcp = bytes[9] == protocol::TCP;
        let transport_header_len = if is_tcp {
            usize::from(bytes[header_len + 12] >> 4) * 4
        } else {
            8
        };
        for at in 0..bytes.len() {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut corrupt = bytes.to_vec();
                corrupt[at] ^= mask;
                let err = match packet::parse(&corrupt) {
                    Ok(p) => panic!("{name}: flip {mask:#x} at {at} accepted: {p:?}"),
                    Err(e) => e,
                };
                let expected_prefix = if at < header_len {
                    "ipv4."
                } else if is_tcp {
                    "tcp."
                } else {
                    "udp."
                };
                assert!(
                    err.field.starts_with(expected_prefix),
                    "{name}: flip {mask:#x} at {at}: {err}"
                );
                if at >= header_len + transport_header_len {
                    let field = if is_tcp {
                        "tcp.checksum"
                    } else {
                        "udp.checksum"
                    };
                    assert_eq!(err.field, field, "{name}: payload flip at {at}");
                    assert_eq!(err.kind, WireErrorKind::BadChecksum);
                    assert_eq!(err.offset, header_len + if is_tcp { 16 } else { 6 });
                }
            }
        }
    }
}

#[test]
fn flipped_bytes_never_panic_without_checksums() {
    // With checksums off, corrupted headers reach the option and length
    // parsers; they must answer with values, not panics.
    for (name, bytes) in ALL {
        let transport = &bytes[ipv4::HEADER_LEN..];
        let (src, dst) = (Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
        for at in 0..transport.len() {
            for value in [0x00, 0x01, 0x02, 0x05, 0x08, 0x0a, 0x7f, 0xfd, 0xff] {
                let mut corrupt = transport.to_vec();
                corrupt[at] = value;
                if bytes[9] == protocol::TCP {
                    if let Err(e) = TcpRepr::parse(&corrupt, src, dst, false) {
                        assert!(e.field.starts_with("tcp."), "{name}: {e}");
                        assert!(e.offset <= corrupt.len(), "{name}: {e}");
                    }
                } else if let Err(e) = UdpRepr::parse(&corrupt, src, dst, false) {
                    assert!(e.field.starts_with("udp."), "{name}: {e}");
                }
            }
        }
    }
}
