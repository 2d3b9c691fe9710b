//! A corrupted datagram is dropped where its corruption is first checked,
//! naming a bad header: an IPv4 header checksum at the first node it
//! enters (a router), a TCP checksum at the host whose stack reads it.

use std::net::Ipv4Addr;

use rtolab_sim::app::{AnyApp, App, AppContext, AppCx, AppStats};
use rtolab_sim::link::P2pConfig;
use rtolab_sim::trace::{DropReason, MemorySink, TraceEvent};
use rtolab_sim::{Ipv4Cidr, SimDuration, SimTime, Simulator};
use rtolab_tcp::{Config, Profile};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet;
use rtolab_wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);

/// Sends, at start, a TCP SYN to B:80 with one bit of it flipped at
/// `corrupt` (an offset into the datagram; none past its end).
struct Corrupt {
    corrupt: usize,
}

impl App<AppContext<'_>> for Corrupt {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        let corrupt = self.corrupt;
        cx.send_with(|buf| {
            let tcp = TcpRepr {
                src_port: 40000,
                dst_port: 80,
                seq: SeqNumber(1),
                ack: SeqNumber(0),
                flags: TcpFlags::SYN,
                window: 8000,
                urgent: 0,
                options: Default::default(),
                payload: &[],
            };
            let ip = Ipv4Repr {
                src: A,
                dst: B,
                protocol: protocol::TCP,
                ttl: 64,
                ident: 0,
                dont_fragment: true,
                tos: 0,
                payload_len: 0,
            };
            let len = packet::emit_tcp(buf, &ip, &tcp)?;
            if let Some(byte) = buf.get_mut(corrupt) {
                *byte ^= 0x01;
            }
            Ok::<_, rtolab_wire::WireError>(len)
        })
        .unwrap();
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::json!({}))
    }
}

/// Sends one SYN corrupted at `corrupt` from a through router r to b
/// (which runs the TCP engine); returns the simulator and the nodes (by
/// index) where a datagram was dropped as a bad header.
fn send_corrupted(corrupt: usize) -> (Simulator, Vec<u32>) {
    let mut sim = Simulator::new(1);
    let log = MemorySink::new();
    sim.set_trace_sink(Box::new(log.clone()));
    let (a, r, b) = (sim.add_node("a"), sim.add_node("r"), sim.add_node("b"));
    let link = || P2pConfig {
        rate_bps: 10_000_000,
        delay: SimDuration::from_millis(1),
        queue_capacity: 10,
        loss: 0.0,
    };
    let ar = sim.add_point_to_point("a-r", link());
    let rb = sim.add_point_to_point("r-b", link());
    let cidr = |text: &str| text.parse::<Ipv4Cidr>().unwrap();
    sim.attach(a, ar, cidr("10.0.0.1/24")).unwrap();
    sim.attach(r, ar, cidr("10.0.0.2/24")).unwrap();
    sim.attach(r, rb, cidr("10.0.1.1/24")).unwrap();
    sim.attach(b, rb, cidr("10.0.1.2/24")).unwrap();
    sim.add_route(a, Ipv4Cidr::DEFAULT, "10.0.0.2".parse().unwrap())
        .unwrap();
    sim.add_route(b, Ipv4Cidr::DEFAULT, "10.0.1.1".parse().unwrap())
        .unwrap();
    // b runs the TCP engine (it would answer a sound SYN with a reset).
    let config = sim.add_tcp_config(Config::from_profile(Profile::linux()));
    sim.set_host_tcp_config(b, config);
    sim.add_app(a, "corrupt", AnyApp::Custom(Box::new(Corrupt { corrupt })));
    sim.run_until(SimTime::from_secs(1)).unwrap();
    let at = log
        .events()
        .iter()
        .filter_map(|(_, e)| match e {
            TraceEvent::PacketDropped {
                node,
                reason: DropReason::BadHeader,
                ..
            } => Some(*node),
            _ => None,
        })
        .collect();
    (sim, at)
}

#[test]
fn a_bad_ipv4_header_checksum_is_dropped_by_the_first_node_it_enters() {
    // The sender does not verify its own header; the router does.
    let (sim, at) = send_corrupted(10);
    assert_eq!(at, [1]);
    assert_eq!(sim.nodes()[1].stats.dropped_bad_header, 1);
    assert_eq!(sim.nodes()[1].stats.forwarded, 0);
}

#[test]
fn a_bad_tcp_checksum_is_dropped_by_the_receiving_host() {
    // The TCP header's sequence number: the IP header stays sound, so the
    // router forwards it and b's stack refuses it (no reset is sent).
    let (sim, at) = send_corrupted(20 + 4);
    assert_eq!(at, [2]);
    assert_eq!(sim.nodes()[1].stats.forwarded, 1);
    assert_eq!(sim.nodes()[2].stats.dropped_bad_header, 1);
    assert_eq!(sim.nodes()[2].stats.originated, 0);
}

#[test]
fn a_sound_syn_gets_its_reset() {
    // The same SYN uncorrupted: b answers it with a reset, so the drops
    // above are the checksums'.
    let (sim, at) = send_corrupted(usize::MAX);
    assert!(at.is_empty());
    assert_eq!(sim.nodes()[2].stats.originated, 1);
}
