//! The simulator end to end, built programmatically: IP forwarding, drops
//! with reasons, the hidden terminal on the shared medium, half-duplex
//! busy/free notifications, timers and buffer reuse.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex};

use rtolab_sim::app::{
    AnyApp, App, AppContext, AppCx, AppStats, Binding, CbrApp, CbrConfig, SinkApp, SinkConfig,
    SinkStats,
};
use rtolab_sim::link::{BroadcastConfig, HalfDuplexConfig, P2pConfig, Position, RateDelay};
use rtolab_sim::node::{IfaceId, NodeId};
use rtolab_sim::trace::{DropReason, MemorySink, TraceEvent};
use rtolab_sim::{Ipv4Cidr, SimDuration, SimTime, Simulator};
use rtolab_wire::ipv4::protocol;
use rtolab_wire::packet::{self, Transport};

fn cidr(text: &str) -> Ipv4Cidr {
    text.parse().unwrap()
}

fn addr(text: &str) -> Ipv4Addr {
    text.parse().unwrap()
}

fn us(n: u64) -> SimTime {
    SimTime::from_micros(n)
}

/// A CBR source that sends exactly one datagram of `size` payload bytes at `at`.
fn one_shot(to: &str, at: SimTime, size: usize) -> AnyApp {
    AnyApp::Cbr(CbrApp::new(CbrConfig {
        destination: to.parse().unwrap(),
        source_port: 5000,
        payload_size: size,
        rate_bps: 1_000,
        start: at,
        stop: Some(at + SimDuration::from_nanos(1)),
    }))
}

fn sink(port: u16) -> AnyApp {
    AnyApp::Sink(SinkApp::new(SinkConfig { port }))
}

fn sink_stats(sim: &Simulator, app: rtolab_sim::app::AppId) -> SinkStats {
    match sim.app_stats(app) {
        AppStats::Sink(s) => s,
        other => panic!("not a sink: {other:?}"),
    }
}

fn p2p(rate_bps: u64, delay: SimDuration) -> P2pConfig {
    P2pConfig {
        rate_bps,
        delay,
        queue_capacity: 100,
        loss: 0.0,
    }
}

/// Datagrams with their arrival times, shared with the test.
type Received = Arc<Mutex<Vec<(SimTime, Vec<u8>)>>>;

/// Keeps every datagram it receives on a UDP port, with its arrival time.
#[derive(Clone, Default)]
struct Recorder {
    port: u16,
    got: Received,
}

impl App<AppContext<'_>> for Recorder {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        cx.bind(Binding {
            protocol: protocol::UDP,
            port: Some(self.port),
        })
        .unwrap();
    }
    fn on_packet(&mut self, cx: &mut AppContext<'_>, datagram: &[u8]) {
        self.got.lock().unwrap().push((cx.now(), datagram.to_vec()));
    }
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::json!({ "received": self.got.lock().unwrap().len() }))
    }
}

fn dropped(events: &[(SimTime, TraceEvent)], why: DropReason) -> Vec<(SimTime, u32)> {
    events
        .iter()
        .filter_map(|(t, e)| match e {
            TraceEvent::PacketDropped { node, reason, .. } if *reason == why => Some((*t, *node)),
            _ => None,
        })
        .collect()
}

#[test]
fn routers_forward_with_ttl_decrement_and_valid_checksums() {
    let mut sim = Simulator::new(1);
    let (a, r, b) = (sim.add_node("a"), sim.add_node("r"), sim.add_node("b"));
    let l1 = sim.add_point_to_point("ar", p2p(10_000_000, SimDuration::from_millis(1)));
    let l2 = sim.add_point_to_point("rb", p2p(10_000_000, SimDuration::from_millis(1)));
    sim.attach(a, l1, cidr("10.0.1.1/24")).unwrap();
    sim.attach(r, l1, cidr("10.0.1.2/24")).unwrap();
    sim.attach(r, l2, cidr("10.0.2.1/24")).unwrap();
    sim.attach(b, l2, cidr("10.0.2.2/24")).unwrap();
    sim.add_route(a, Ipv4Cidr::DEFAULT, addr("10.0.1.2"))
        .unwrap();
    sim.add_route(b, cidr("10.0.1.0/24"), addr("10.0.2.1"))
        .unwrap();
    let recorder = Recorder {
        port: 9000,
        ..Default::default()
    };
    sim.add_app(b, "rec", AnyApp::Custom(Box::new(recorder.clone())));
    sim.add_app(a, "src", one_shot("10.0.2.2:9000", SimTime::ZERO, 100));
    sim.run_until(SimTime::from_secs(1)).unwrap();

    let got = recorder.got.lock().unwrap();
    assert_eq!(got.len(), 1);
    let (arrival, bytes) = &got[0];
    // Two hops of 128 bytes at 10 Mbit/s (102.4 us) plus 1 ms each.
    assert_eq!(*arrival, SimTime::from_nanos(2 * (102_400 + 1_000_000)));
    let parsed = packet::parse(bytes).expect("checksums still valid after forwarding");
    assert_eq!(parsed.ip.ttl, 63);
    assert_eq!(parsed.ip.src, addr("10.0.1.1"));
    assert!(matches!(parsed.transport, Transport::Udp(u) if u.dst_port == 9000));
    assert_eq!(sim.node(r).stats.forwarded, 1);
    assert_eq!(sim.node(a).stats.originated, 1);
    assert_eq!(sim.packets_in_use(), 0);
}

#[test]
fn drops_name_their_reason() {
    let mut sim = Simulator::new(1);
    let log = MemorySink::new();
    sim.set_trace_sink(Box::new(log.clone()));
    let (a, r1, r2) = (sim.add_node("a"), sim.add_node("r1"), sim.add_node("r2"));
    let la = sim.add_point_to_point("a-r1", p2p(100_000_000, SimDuration::from_micros(10)));
    let lr = sim.add_point_to_point("r1-r2", p2p(100_000_000, SimDuration::from_micros(10)));
    sim.attach(a, la, cidr("10.0.0.1/24")).unwrap();
    sim.attach(r1, la, cidr("10.0.0.2/24")).unwrap();
    sim.attach(r1, lr, cidr("10.0.1.1/24")).unwrap();
    sim.attach(r2, lr, cidr("10.0.1.2/24")).unwrap();
    // A routing loop between r1 and r2 for 10.9.0.0/16.
    sim.add_route(a, cidr("10.9.0.0/16"), addr("10.0.0.2"))
        .unwrap();
    sim.add_route(a, cidr("10.0.1.0/24"), addr("10.0.0.2"))
        .unwrap();
    sim.add_route(r1, cidr("10.9.0.0/16"), addr("10.0.1.2"))
        .unwrap();
    sim.add_route(r2, Ipv4Cidr::DEFAULT, addr("10.0.1.1"))
        .unwrap();
    sim.add_app(a, "loop", one_shot("10.9.9.9:1", SimTime::ZERO, 20));
    sim.add_app(a, "nowhere", one_shot("192.0.2.1:1", SimTime::ZERO, 20));
    sim.add_app(a, "closed-port", one_shot("10.0.1.2:7", SimTime::ZERO, 20));
    sim.run_until(SimTime::from_secs(1)).unwrap();

    let events = log.events();
    assert_eq!(
        dropped(&events, DropReason::NoRoute),
        [(SimTime::ZERO, a.0)]
    );
    assert_eq!(dropped(&events, DropReason::NoListener).len(), 1);
    assert_eq!(dropped(&events, DropReason::NoListener)[0].1, r2.0);
    let expired = dropped(&events, DropReason::TtlExpired);
    assert_eq!(expired.len(), 1);
    // Sent with TTL 64: 63 forwards, the 64th hop finds TTL 1 and drops it.
    let forwards = sim.node(r1).stats.forwarded + sim.node(r2).stats.forwarded;
    assert_eq!(forwards, 63 + 1, "63 for the loop, 1 for the closed port");
    assert_eq!(sim.node(a).stats.dropped_no_route, 1);
    assert_eq!(sim.packets_in_use(), 0);
}

/// A and C are each in range of B but not of each other.
struct HiddenTerminal {
    sim: Simulator,
    log: MemorySink,
    b: NodeId,
    sinks: [rtolab_sim::app::AppId; 2],
}

fn hidden_terminal(a_at: SimTime, c_at: SimTime, d_at: Option<SimTime>) -> HiddenTerminal {
    let mut sim = Simulator::new(7);
    let log = MemorySink::new();
    sim.set_trace_sink(Box::new(log.clone()));
    let air = sim.add_broadcast(
        "air",
        BroadcastConfig {
            rate_bps: 250_000,
            tx_range: 50.0,
            interference_range: 60.0,
            queue_capacity: 10,
        },
    );
    let names = ["a", "b", "c", "d", "e"];
    let xs = [0.0, 40.0, 80.0, 200.0, 230.0];
    let mut nodes = Vec::new();
    for (i, (name, x)) in names.iter().zip(xs).enumerate() {
        let n = sim.add_node(name);
        sim.set_position(n, Position { x, y: 0.0 });
        sim.attach(n, air, cidr(&format!("10.0.0.{}/24", i + 1)))
            .unwrap();
        nodes.push(n);
    }
    let b = nodes[1];
    let sinks = [
        sim.add_app(b, "from-a", sink(1)),
        sim.add_app(b, "from-c", sink(2)),
    ];
    sim.add_app(nodes[4], "e-sink", sink(3));
    sim.add_app(nodes[0], "a", one_shot("10.0.0.2:1", a_at, 100));
    sim.add_app(nodes[2], "c", one_shot("10.0.0.2:2", c_at, 100));
    if let Some(at) = d_at {
        // D talks to E far away from B, at the same time as A.
        sim.add_app(nodes[3], "d", one_shot("10.0.0.5:3", at, 100));
    }
    sim.run_until(SimTime::from_secs(1)).unwrap();
    HiddenTerminal { sim, log, b, sinks }
}

#[test]
fn hidden_terminal_overlapping_transmissions_collide_at_b() {
    // 128-byte datagrams take 4.096 ms at 250 kbit/s; C starts 1 ms after A.
    let ht = hidden_terminal(SimTime::ZERO, SimTime::from_millis(1), None);
    let collisions = dropped(&ht.log.events(), DropReason::Collision);
    assert_eq!(collisions.len(), 2, "{collisions:?}");
    assert!(collisions.iter().all(|(_, node)| *node == ht.b.0));
    for s in ht.sinks {
        assert_eq!(sink_stats(&ht.sim, s).received_packets, 0);
    }
    assert_eq!(ht.sim.packets_in_use(), 0);
}

#[test]
fn hidden_terminal_separate_transmissions_both_arrive() {
    let ht = hidden_terminal(SimTime::ZERO, SimTime::from_millis(5), None);
    assert!(dropped(&ht.log.events(), DropReason::Collision).is_empty());
    for s in ht.sinks {
        assert_eq!(sink_stats(&ht.sim, s).received_packets, 1);
    }
}

#[test]
fn transmitter_outside_interference_range_does_not_disturb() {
    let ht = hidden_terminal(SimTime::ZERO, SimTime::from_millis(5), Some(SimTime::ZERO));
    assert!(dropped(&ht.log.events(), DropReason::Collision).is_empty());
    for s in ht.sinks {
        assert_eq!(sink_stats(&ht.sim, s).received_packets, 1);
    }
    let delivered_to_e = ht
        .log
        .events()
        .iter()
        .any(|(_, e)| matches!(e, TraceEvent::PacketDelivered { node: 4, .. }));
    assert!(delivered_to_e);
}

#[test]
fn carrier_sense_hears_only_within_interference_range() {
    let mut sim = Simulator::new(1);
    let air = sim.add_broadcast(
        "air",
        BroadcastConfig {
            rate_bps: 250_000,
            tx_range: 50.0,
            interference_range: 60.0,
            queue_capacity: 10,
        },
    );
    let mut ifaces = Vec::new();
    for (i, x) in [0.0, 40.0, 80.0].into_iter().enumerate() {
        let n = sim.add_node(&format!("n{i}"));
        ifaces.push(
            sim.attach_at(
                n,
                air,
                cidr(&format!("10.0.0.{}/24", i + 1)),
                Position { x, y: 0.0 },
            )
            .unwrap(),
        );
    }
    sim.add_app(NodeId(1), "sink", sink(1));
    sim.add_app(NodeId(0), "a", one_shot("10.0.0.2:1", SimTime::ZERO, 100));
    sim.run_until(us(1000)).unwrap();
    let sensed: Vec<bool> = ifaces.iter().map(|i| sim.carrier_sense(*i)).collect();
    assert_eq!(sensed, [true, true, false]);
    sim.run_until(SimTime::from_millis(10)).unwrap();
    assert!(ifaces.iter().all(|i| !sim.carrier_sense(*i)));
}

/// The half-duplex link tells both interfaces when it turns busy and free,
/// and carries one datagram at a time in either direction.
#[test]
fn half_duplex_busy_free_notifications() {
    let mut sim = Simulator::new(1);
    let log = MemorySink::new();
    sim.set_trace_sink(Box::new(log.clone()));
    let (a, b) = (sim.add_node("a"), sim.add_node("b"));
    // 128-byte datagrams take exactly 1 ms at 1.024 Mbit/s, plus 100 us.
    let link = sim.add_half_duplex(
        "nfc",
        RateDelay {
            rate_bps: 1_024_000,
            delay: SimDuration::from_micros(100),
        },
        HalfDuplexConfig {
            queue_capacity: 4,
            loss: 0.0,
        },
    );
    let ia = sim.attach(a, link, cidr("10.0.0.1/24")).unwrap();
    let ib = sim.attach(b, link, cidr("10.0.0.2/24")).unwrap();
    sim.add_app(b, "sink-b", sink(9));
    sim.add_app(a, "sink-a", sink(9));
    sim.add_app(a, "a-to-b", one_shot("10.0.0.2:9", SimTime::ZERO, 100));
    sim.add_app(b, "b-to-a", one_shot("10.0.0.1:9", SimTime::ZERO, 100));
    sim.run_until(us(500)).unwrap();
    assert!(sim.node(a).interfaces[0].medium_busy);
    assert!(sim.carrier_sense(ib));
    sim.run_until(SimTime::from_secs(1)).unwrap();
    assert!(!sim.node(a).interfaces[0].medium_busy && !sim.carrier_sense(ia));

    #[derive(Debug, PartialEq)]
    enum Seen {
        Busy(u32, u64),
        Free(u32),
        Sent(u32),
        Received(u32),
    }
    let seen: Vec<(SimTime, Seen)> = log
        .events()
        .into_iter()
        .filter_map(|(t, e)| {
            let s = match e {
                TraceEvent::LinkBusy { node, until_ns, .. } => Seen::Busy(node, until_ns),
                TraceEvent::LinkFree { node, .. } => Seen::Free(node),
                TraceEvent::PacketSent { node, .. } => Seen::Sent(node),
                TraceEvent::PacketReceived { node, .. } => Seen::Received(node),
                _ => return None,
            };
            Some((t, s))
        })
        .collect();
    use Seen::*;
    assert_eq!(
        seen,
        [
            (us(0), Busy(0, 1_100_000)),
            (us(0), Busy(1, 1_100_000)),
            (us(0), Sent(0)),
            (us(1100), Received(1)),
            (us(1100), Free(0)),
            (us(1100), Free(1)),
            (us(1100), Busy(0, 2_200_000)),
            (us(1100), Busy(1, 2_200_000)),
            (us(1100), Sent(1)),
            (us(2200), Received(0)),
            (us(2200), Free(0)),
            (us(2200), Free(1)),
        ]
    );
}

/// Records timer tokens as they fire; cancels token 3.
struct TimerProbe {
    fired: Arc<Mutex<Vec<(SimTime, u64)>>>,
}

impl App<AppContext<'_>> for TimerProbe {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        let at = SimTime::from_millis(5);
        for token in 1..=5 {
            let id = cx.set_timer(at, token);
            if token == 3 {
                cx.cancel_timer(id);
            }
        }
        cx.set_timer(SimTime::from_millis(1), 0);
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, cx: &mut AppContext<'_>, token: u64) {
        self.fired.lock().unwrap().push((cx.now(), token));
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::Value::Null)
    }
}

#[test]
fn timers_fire_in_time_then_insertion_order_and_cancel() {
    let mut sim = Simulator::new(1);
    let n = sim.add_node("n");
    let fired = Arc::new(Mutex::new(Vec::new()));
    sim.add_app(
        n,
        "probe",
        AnyApp::Custom(Box::new(TimerProbe {
            fired: fired.clone(),
        })),
    );
    sim.run_until(SimTime::from_secs(1)).unwrap();
    let ms = SimTime::from_millis;
    assert_eq!(
        *fired.lock().unwrap(),
        [(ms(1), 0), (ms(5), 1), (ms(5), 2), (ms(5), 4), (ms(5), 5)]
    );
}

#[test]
fn datagrams_to_own_address_loop_back() {
    let mut sim = Simulator::new(1);
    let n = sim.add_node("n");
    let other = sim.add_node("m");
    let l = sim.add_point_to_point("l", p2p(1_000_000, SimDuration::from_millis(1)));
    sim.attach(n, l, cidr("10.0.0.1/24")).unwrap();
    sim.attach(other, l, cidr("10.0.0.2/24")).unwrap();
    let s = sim.add_app(n, "sink", sink(4));
    sim.add_app(
        n,
        "self",
        one_shot("10.0.0.1:4", SimTime::from_millis(3), 64),
    );
    sim.run_until(SimTime::from_secs(1)).unwrap();
    let stats = sink_stats(&sim, s);
    assert_eq!(stats.received_packets, 1);
    assert_eq!(stats.delay_max_ns, Some(0));
    assert_eq!(
        sim.link_stats(l),
        rtolab_sim::link::LinkStats::PointToPoint(rtolab_sim::link::P2pStats {
            directions: Default::default()
        })
    );
}

#[test]
fn buffers_are_reused_and_nothing_leaks() {
    let mut sim = Simulator::new(1);
    let (a, b) = (sim.add_node("a"), sim.add_node("b"));
    let l = sim.add_point_to_point(
        "ab",
        P2pConfig {
            loss: 0.1,
            ..p2p(10_000_000, SimDuration::from_millis(5))
        },
    );
    sim.attach(a, l, cidr("10.0.0.1/24")).unwrap();
    sim.attach(b, l, cidr("10.0.0.2/24")).unwrap();
    let s = sim.add_app(b, "sink", sink(9));
    let src = sim.add_app(
        a,
        "cbr",
        AnyApp::Cbr(CbrApp::new(CbrConfig {
            destination: SocketAddrV4::new(addr("10.0.0.2"), 9),
            source_port: 1,
            payload_size: 1000,
            rate_bps: 5_000_000,
            start: SimTime::ZERO,
            stop: Some(SimTime::from_secs(2)),
        })),
    );
    sim.run_until(SimTime::from_secs(3)).unwrap();
    let AppStats::Cbr(sent) = sim.app_stats(src) else {
        panic!()
    };
    let got = sink_stats(&sim, s);
    assert_eq!(sent.sent_packets, 1250);
    assert!(
        got.received_packets > 1000 && got.received_packets < 1250,
        "{got:?}"
    );
    assert_eq!(got.lost, got.max_seq.unwrap() + 1 - got.unique_packets);
    assert_eq!(got.duplicates + got.reordered, 0);
    assert_eq!(got.delay_min_ns, Some(5_000_000 + 822_400));
    assert_eq!(sim.packets_in_use(), 0);
    // At 5 of 10 Mbit/s at most one datagram waits, and the delay-bandwidth
    // product is about 6 datagrams: the pool never needs more than a few.
    assert!(
        sim.packet_buffers() <= 10,
        "{} buffers",
        sim.packet_buffers()
    );
}

#[test]
fn interfaces_report_their_link_and_port() {
    let mut sim = Simulator::new(1);
    let (a, b) = (sim.add_node("a"), sim.add_node("b"));
    let l = sim.add_point_to_point("ab", p2p(1_000_000, SimDuration::ZERO));
    let ia = sim.attach(a, l, cidr("10.0.0.1/24")).unwrap();
    let ib = sim.attach(b, l, cidr("10.0.0.2/24")).unwrap();
    assert_eq!(sim.link_ports(l), [ia, ib]);
    assert_eq!(ib, IfaceId { node: b, index: 0 });
    let c = sim.add_node("c");
    let err = sim.attach(c, l, cidr("10.0.0.3/24")).unwrap_err();
    assert_eq!(err.to_string(), "link \"ab\" takes at most 2 interfaces");
    let err = sim.attach(c, l, cidr("10.0.0.1/24")).unwrap_err();
    assert!(err.to_string().contains("already assigned"));
    let err = sim
        .add_route(a, Ipv4Cidr::DEFAULT, addr("192.168.0.1"))
        .unwrap_err();
    assert!(err.to_string().contains("not on a subnet"));
}

/// Sweeps and bindings run simulations on worker threads.
#[test]
fn simulations_can_move_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<Simulator>();
    assert_send::<rtolab_sim::Scenario>();
    assert_send::<rtolab_sim::RunReport>();
    let sim = Simulator::new(3);
    let seed = std::thread::spawn(move || sim.seed()).join().unwrap();
    assert_eq!(seed, 3);
}
