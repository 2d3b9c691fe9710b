//! IPv6 at the simulator's nodes: forwarding with the hop limit
//! decremented, delivery to a bound app, drops that name their reason, and
//! TCP between IPv6 hosts.

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use rtolab_sim::app::{AnyApp, App, AppContext, AppCx, AppStats, Binding};
use rtolab_sim::link::P2pConfig;
use rtolab_sim::tcp_layer::{FlowId, TcpEvent};
use rtolab_sim::trace::{DropReason, MemorySink, TraceEvent};
mod common;

use common::{Collect, Upload};
use rtolab_sim::{Ipv6Cidr, SimDuration, SimTime, Simulator};
use rtolab_wire::ipv6::{self, Ipv6Repr, Transport6};
use rtolab_wire::udp::UdpRepr;

fn v6(text: &str) -> Ipv6Addr {
    text.parse().unwrap()
}

fn cidr(text: &str) -> Ipv6Cidr {
    text.parse().unwrap()
}

fn p2p() -> P2pConfig {
    P2pConfig {
        rate_bps: 10_000_000,
        delay: SimDuration::from_millis(1),
        queue_capacity: 100,
        loss: 0.0,
    }
}

type Received = Arc<Mutex<Vec<(SimTime, Vec<u8>)>>>;

/// Sends one IPv6/UDP datagram to `dst` at start, and keeps what arrives
/// on UDP port 9000.
#[derive(Clone)]
struct Peer {
    src: Ipv6Addr,
    dst: Option<(Ipv6Addr, u8)>,
    got: Received,
}

impl Peer {
    fn sender(src: &str, dst: &str, hop_limit: u8) -> Self {
        Peer {
            src: v6(src),
            dst: Some((v6(dst), hop_limit)),
            got: Received::default(),
        }
    }
    fn receiver() -> Self {
        Peer {
            src: Ipv6Addr::UNSPECIFIED,
            dst: None,
            got: Received::default(),
        }
    }
}

impl App<AppContext<'_>> for Peer {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        let Some((dst, hop_limit)) = self.dst else {
            cx.bind(Binding {
                protocol: ipv6::next_header::UDP,
                port: Some(9000),
            })
            .unwrap();
            return;
        };
        let ip = Ipv6Repr {
            src: self.src,
            dst,
            next_header: ipv6::next_header::UDP,
            hop_limit,
            traffic_class: 0,
            flow_label: 0,
            payload_len: 0,
        };
        let udp = UdpRepr {
            src_port: 5000,
            dst_port: 9000,
            payload: b"over IPv6",
        };
        cx.send_with(|out| ipv6::emit_udp(out, &ip, &udp)).unwrap();
    }
    fn on_packet(&mut self, cx: &mut AppContext<'_>, datagram: &[u8]) {
        self.got.lock().unwrap().push((cx.now(), datagram.to_vec()));
    }
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::json!({ "received": self.got.lock().unwrap().len() }))
    }
}

/// a — r — b over two point-to-point links, IPv6 only.
fn line(seed: u64) -> (Simulator, [rtolab_sim::node::NodeId; 3], MemorySink) {
    let mut sim = Simulator::new(seed);
    let log = MemorySink::new();
    sim.set_trace_sink(Box::new(log.clone()));
    let (a, r, b) = (sim.add_node("a"), sim.add_node("r"), sim.add_node("b"));
    let l1 = sim.add_point_to_point("ar", p2p());
    let l2 = sim.add_point_to_point("rb", p2p());
    sim.attach_ipv6(a, l1, cidr("fd00:1::1/64"), None, None)
        .unwrap();
    sim.attach_ipv6(r, l1, cidr("fd00:1::2/64"), None, None)
        .unwrap();
    sim.attach_ipv6(r, l2, cidr("fd00:2::1/64"), None, None)
        .unwrap();
    sim.attach_ipv6(b, l2, cidr("fd00:2::2/64"), None, None)
        .unwrap();
    sim.add_route6(a, Ipv6Cidr::DEFAULT, v6("fd00:1::2"))
        .unwrap();
    sim.add_route6(b, cidr("fd00:1::/64"), v6("fd00:2::1"))
        .unwrap();
    (sim, [a, r, b], log)
}

#[test]
fn routers_forward_ipv6_with_the_hop_limit_decremented() {
    let (mut sim, [a, r, b], _) = line(1);
    let receiver = Peer::receiver();
    sim.add_app(b, "rec", AnyApp::Custom(Box::new(receiver.clone())));
    sim.add_app(
        a,
        "src",
        AnyApp::Custom(Box::new(Peer::sender("fd00:1::1", "fd00:2::2", 64))),
    );
    sim.run_until(SimTime::from_secs(1)).unwrap();

    let got = receiver.got.lock().unwrap();
    assert_eq!(got.len(), 1);
    let (arrival, bytes) = &got[0];
    // Two hops of 57 bytes at 10 Mbit/s (45.6 us) plus 1 ms each.
    assert_eq!(bytes.len(), 40 + 8 + 9);
    assert_eq!(*arrival, SimTime::from_nanos(2 * (45_600 + 1_000_000)));
    let parsed = ipv6::parse(bytes).expect("the UDP checksum still holds after forwarding");
    assert_eq!(parsed.ip.hop_limit, 63);
    assert_eq!(parsed.ip.src, v6("fd00:1::1"));
    assert!(matches!(parsed.transport, Transport6::Udp(u) if u.payload == b"over IPv6"));
    assert_eq!(sim.node(r).stats.forwarded, 1);
    assert_eq!(sim.node(a).stats.originated, 1);
    assert_eq!(sim.node(b).stats.delivered, 1);
    assert_eq!(sim.packets_in_use(), 0);
}

#[test]
fn ipv6_drops_name_their_reason() {
    let (mut sim, [a, r, _], log) = line(2);
    // Hop limit 1 reaches r, which may not forward it.
    sim.add_app(
        a,
        "short",
        AnyApp::Custom(Box::new(Peer::sender("fd00:1::1", "fd00:2::2", 1))),
    );
    // r has no route to fd00:9::/64 (only its two on-link prefixes).
    sim.add_app(
        a,
        "nowhere",
        AnyApp::Custom(Box::new(Peer::sender("fd00:1::1", "fd00:9::1", 64))),
    );
    sim.run_until(SimTime::from_secs(1)).unwrap();
    let drops: Vec<(u32, DropReason)> = log
        .events()
        .iter()
        .filter_map(|(_, e)| match e {
            TraceEvent::PacketDropped { node, reason, .. } => Some((*node, *reason)),
            _ => None,
        })
        .collect();
    assert!(drops.contains(&(r.0, DropReason::TtlExpired)), "{drops:?}");
    assert!(drops.contains(&(r.0, DropReason::NoRoute)), "{drops:?}");
    assert_eq!(drops.len(), 2, "{drops:?}");
    assert_eq!(sim.packets_in_use(), 0);
}

#[test]
fn ipv6_routes_need_a_gateway_on_link() {
    let (mut sim, [a, _, _], _) = line(3);
    let err = sim
        .add_route6(a, cidr("fd00:9::/64"), v6("fd00:7::1"))
        .unwrap_err();
    assert!(err.to_string().contains("fd00:7::1"), "{err}");
    let err = sim
        .attach_ipv6(
            a,
            rtolab_sim::node::LinkId(0),
            cidr("fd00:2::2/64"),
            None,
            None,
        )
        .unwrap_err();
    assert!(err.to_string().contains("already assigned"), "{err}");
}

/// The line of [`line`], with random loss on the far link.
fn lossy_line(seed: u64, loss: f64) -> (Simulator, [rtolab_sim::node::NodeId; 3]) {
    let mut sim = Simulator::new(seed);
    let (a, r, b) = (sim.add_node("a"), sim.add_node("r"), sim.add_node("b"));
    let l1 = sim.add_point_to_point("ar", p2p());
    let l2 = sim.add_point_to_point("rb", P2pConfig { loss, ..p2p() });
    sim.attach_ipv6(a, l1, cidr("fd00:1::1/64"), None, None)
        .unwrap();
    sim.attach_ipv6(r, l1, cidr("fd00:1::2/64"), None, None)
        .unwrap();
    sim.attach_ipv6(r, l2, cidr("fd00:2::1/64"), None, None)
        .unwrap();
    sim.attach_ipv6(b, l2, cidr("fd00:2::2/64"), None, None)
        .unwrap();
    sim.add_route6(a, Ipv6Cidr::DEFAULT, v6("fd00:1::2"))
        .unwrap();
    sim.add_route6(b, cidr("fd00:1::/64"), v6("fd00:2::1"))
        .unwrap();
    (sim, [a, r, b])
}

#[test]
fn tcp_moves_a_megabyte_intact_between_ipv6_hosts_through_loss() {
    let (mut sim, [a, r, b]) = lossy_line(7, 0.02);
    // Bytes that differ from one position to the next, so a misplaced or
    // repeated segment cannot go unnoticed.
    let data: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let got = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::new(Mutex::new(Vec::new()));
    sim.add_app(
        b,
        "collect",
        AnyApp::Custom(Box::new(Collect {
            port: 80,
            got: got.clone(),
        })),
    );
    sim.add_app(
        a,
        "upload",
        AnyApp::Custom(Box::new(Upload {
            peer: "[fd00:2::2]:80".parse().unwrap(),
            data: data.clone(),
            sent: 0,
            heard: heard.clone(),
        })),
    );
    sim.run_until(SimTime::from_secs(120)).unwrap();

    let got = got.lock().unwrap();
    assert_eq!(got.len(), data.len());
    assert!(*got == data, "the received bytes differ from those sent");
    assert_eq!(heard.lock().unwrap().last(), Some(&TcpEvent::Closed));
    let flows: Vec<_> = (0..sim.flow_count() as u32)
        .map(|i| sim.flow(FlowId(i)))
        .collect();
    assert_eq!(flows.len(), 2, "{flows:?}");
    let sender = flows.iter().find(|f| f.node == a).unwrap();
    let receiver = flows.iter().find(|f| f.node == b).unwrap();
    // The source address is that of the interface towards the peer.
    assert_eq!(sender.local.ip(), v6("fd00:1::1"));
    assert_eq!(sender.remote.to_string(), "[fd00:2::2]:80");
    assert_eq!(
        (receiver.local, receiver.remote),
        (sender.remote, sender.local)
    );
    assert!(
        sender.counts.retransmissions > 0,
        "the lossy link should force resends: {:?}",
        sender.counts
    );
    assert!(sim.node(r).stats.forwarded > 0);
    assert_eq!(sim.packets_in_use(), 0);
}

#[test]
fn a_syn_to_a_closed_ipv6_port_is_reset() {
    let (mut sim, [a, _, b]) = lossy_line(8, 0.0);
    // b takes part in TCP (it listens on 80); nobody listens on 81.
    sim.add_app(
        b,
        "collect",
        AnyApp::Custom(Box::new(Collect {
            port: 80,
            got: Arc::default(),
        })),
    );
    let heard = Arc::new(Mutex::new(Vec::new()));
    sim.add_app(
        a,
        "probe",
        AnyApp::Custom(Box::new(Upload {
            peer: "[fd00:2::2]:81".parse().unwrap(),
            data: Vec::new(),
            sent: 0,
            heard: heard.clone(),
        })),
    );
    sim.run_until(SimTime::from_secs(2)).unwrap();
    assert_eq!(*heard.lock().unwrap(), [TcpEvent::Reset]);
    let probe = sim.flow(FlowId(0));
    assert_eq!(probe.remote.to_string(), "[fd00:2::2]:81");
    assert_eq!(probe.counts.retransmissions, 0);
}

#[test]
fn tcp_to_an_unroutable_ipv6_peer_names_it() {
    let (mut sim, [_, r, _]) = lossy_line(9, 0.0);
    // r has IPv6 addresses but no route to fd00:9::/64.
    struct Nowhere(Arc<Mutex<Option<String>>>);
    impl App<AppContext<'_>> for Nowhere {
        fn on_start(&mut self, cx: &mut AppContext<'_>) {
            let peer: SocketAddr = "[fd00:9::1]:80".parse().unwrap();
            *self.0.lock().unwrap() = cx.tcp_connect(peer).err().map(|e| e.to_string());
        }
        fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
        fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
        fn stats(&self) -> AppStats {
            AppStats::Custom(serde_json::Value::Null)
        }
    }
    let err = Arc::new(Mutex::new(None));
    sim.add_app(r, "nowhere", AnyApp::Custom(Box::new(Nowhere(err.clone()))));
    sim.run_until(SimTime::from_millis(10)).unwrap();
    assert_eq!(
        err.lock().unwrap().as_deref(),
        Some("no route to fd00:9::1")
    );
}
