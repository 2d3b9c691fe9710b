//! Transfers between two IPv6 stacks on the in-memory pair: bytes arrive
//! intact through loss, and every datagram on the wire is a well-formed
//! IPv6 datagram whose TCP checksum covers the RFC 8200 §8.1 pseudo header.

mod common;

use common::{pattern, Pair, Transfer, CLIENT_V6, SERVER_V6};
use rtolab_tcp::Profile;
use rtolab_time::SimDuration;
use rtolab_wire::ipv6::{self, Transport6};
use rtolab_wire::tcp::TcpFlags;
use smoltcp::wire::{Ipv6Packet, TcpPacket};

fn profile(name: &str) -> Profile {
    let mut p = Profile::named(name).expect("profile");
    // A profile's MSS is announced as set in either family; Linux's 1460
    // is Ethernet's 1500-byte MTU over IPv4, which leaves 1440 over IPv6.
    if name == "linux" {
        p.mss = 1500 - 40 - 20;
    }
    p.time_wait = SimDuration::from_secs(1);
    p.max_retransmissions = 40;
    p.max_syn_retransmissions = 40;
    p
}

/// Checks every logged datagram with our parser and smoltcp's reader;
/// returns how many there were.
fn check_wire(pair: &Pair) -> usize {
    let log = pair.wire_log.as_ref().expect("logging on");
    for (i, datagram) in log.iter().enumerate() {
        let parsed =
            ipv6::parse(datagram).unwrap_or_else(|e| panic!("datagram {i} does not parse: {e}"));
        let Transport6::Tcp(_) = parsed.transport else {
            panic!("datagram {i} is not TCP");
        };
        let ends = [parsed.ip.src, parsed.ip.dst];
        assert!(
            ends == [CLIENT_V6, SERVER_V6] || ends == [SERVER_V6, CLIENT_V6],
            "datagram {i}: {ends:?}"
        );
        let packet = Ipv6Packet::new_checked(&datagram[..]).expect("smoltcp reads the header");
        assert_eq!(usize::from(packet.payload_len()) + 40, datagram.len());
        let segment = TcpPacket::new_checked(packet.payload()).expect("smoltcp reads the segment");
        assert!(
            segment.verify_checksum(&packet.src_addr().into(), &packet.dst_addr().into()),
            "datagram {i}: smoltcp rejects the checksum"
        );
    }
    log.len()
}

#[test]
fn ipv6_transfers_arrive_intact_through_loss() {
    for (name, len) in [("linux", 200_000), ("lwip", 40_000), ("uip", 20_000)] {
        let mut pair = Pair::with_profile_v6(profile(name), 11);
        pair.faults.loss = 0.05;
        pair.wire_log = Some(Vec::new());
        let mut t = Transfer::start(&mut pair, pattern(len));
        assert!(t.run(&mut pair, 500_000), "{name}: transfer did not finish");
        assert_eq!(t.received, t.data, "{name}: bytes differ");
        let client = pair.client.conn(t.client).expect("client");
        assert!(client.local().is_ipv6() && client.remote().is_ipv6());
        assert!(
            client.stats().retransmissions > 0,
            "{name}: 5% loss should need retransmissions"
        );
        let n = check_wire(&pair);
        assert!(n as u64 > client.stats().segments_sent, "{name}: {n}");
    }
}

#[test]
fn ipv6_syn_announces_the_profile_mss_and_takes_the_peers() {
    let mut pair = Pair::with_profile_v6(profile("uip"), 3);
    pair.wire_log = Some(Vec::new());
    let mut t = Transfer::start(&mut pair, pattern(10));
    assert!(pair.drive_until(1000, |p| {
        t.pump(p);
        t.server.is_some()
    }));
    let log = pair.wire_log.as_ref().expect("logging on");
    let syns: Vec<_> = log
        .iter()
        .filter_map(|d| match ipv6::parse(d).ok()?.transport {
            Transport6::Tcp(tcp) if tcp.flags.contains(TcpFlags::SYN) => Some(tcp.options.mss),
            _ => None,
        })
        .collect();
    // SYN and SYN-ACK, each with uIP's MSS (UIP_BUFSIZE 1280 less 60).
    assert_eq!(syns, [Some(1220), Some(1220)]);
    let client = pair.client.conn(t.client).expect("client");
    assert_eq!(client.send_mss(), 1220);
}
