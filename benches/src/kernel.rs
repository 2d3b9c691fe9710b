//! Kernel benchmark: how many events per second the simulator handles on its
//! own, with no models (the event queue, then timers through the app layer),
//! and with the cheapest real traffic (UDP ping-pong and a saturating CBR
//! flow over a point-to-point link).
//!
//! Prints one JSON object per line. `--quick` runs a tenth of the work, for
//! smoke tests.

use rtolab_benches::stopwatch;
use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use rtolab_sim::app::{
    AnyApp, App, AppContext, AppCx, AppStats, Binding, CbrApp, CbrConfig, SinkApp, SinkConfig,
};
use rtolab_sim::link::P2pConfig;
use rtolab_sim::queue::EventQueue;
use rtolab_sim::{Ipv4Cidr, SimDuration, SimTime, Simulator};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::{self, Transport};
use rtolab_wire::udp::UdpRepr;
use serde_json::json;

fn report(bench: &str, events: u64, elapsed: Duration, extra: serde_json::Value) {
    let seconds = elapsed.as_secs_f64();
    let mut line = json!({
        "bench": bench,
        "events": events,
        "seconds": (seconds * 1e6).round() / 1e6,
        "events_per_sec": (events as f64 / seconds).round(),
        "ns_per_event": ((seconds * 1e9 / events as f64) * 100.0).round() / 100.0,
    });
    if let (Some(line), Some(extra)) = (line.as_object_mut(), extra.as_object()) {
        line.extend(extra.clone());
    }
    println!("{line}");
}

/// The classic "hold" model: `pending` events stay queued; each step pops
/// the earliest and schedules one a pseudo-random delay later.
fn queue_hold(pending: usize, steps: u64) {
    let mut queue = EventQueue::with_capacity(pending + 1);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next_delay = move || {
        // xorshift64: cheap and deterministic, good enough for delays.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        SimDuration::from_nanos(state % 1_000_000)
    };
    for i in 0..pending {
        queue.push(SimTime::ZERO + next_delay(), i as u64);
    }
    let start = stopwatch();
    for _ in 0..steps {
        let (now, event) = queue.pop().expect("the hold model never empties");
        queue.push(now + next_delay(), black_box(event));
    }
    let elapsed = start.elapsed();
    report(
        &format!("queue-hold-{pending}"),
        steps,
        elapsed,
        json!({ "pending": pending }),
    );
}

/// An app that re-arms one timer every `period` until it has fired `limit`
/// times.
struct Ticker {
    period: SimDuration,
    fired: u64,
    limit: u64,
}

impl App<AppContext<'_>> for Ticker {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        cx.set_timer(cx.now() + self.period, 0);
    }
    fn on_packet(&mut self, _: &mut AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, cx: &mut AppContext<'_>, token: u64) {
        self.fired += 1;
        if self.fired < self.limit {
            cx.set_timer(cx.now() + self.period, token);
        }
    }
    fn stats(&self) -> AppStats {
        AppStats::Custom(json!({ "fired": self.fired }))
    }
}

/// `apps` tickers with co-prime periods, each firing `per_app` times.
fn timers(apps: u64, per_app: u64) {
    let mut sim = Simulator::new(1);
    let node = sim.add_node("n");
    for i in 0..apps {
        let ticker = Ticker {
            period: SimDuration::from_nanos(1_000 + 7 * i),
            fired: 0,
            limit: per_app,
        };
        sim.add_app(node, &format!("t{i}"), AnyApp::Custom(Box::new(ticker)));
    }
    let start = stopwatch();
    sim.run_until(SimTime::MAX).expect("no outputs to fail");
    let elapsed = start.elapsed();
    report(
        &format!("timers-{apps}"),
        sim.events_processed(),
        elapsed,
        json!({ "apps": apps }),
    );
}

const PORT: u16 = 7;

fn udp_to(
    cx: &mut AppContext<'_>,
    src: Ipv4Addr,
    dst: SocketAddrV4,
    src_port: u16,
    payload: &[u8],
) {
    let ip = Ipv4Repr {
        src,
        dst: *dst.ip(),
        protocol: protocol::UDP,
        ttl: 64,
        ident: 0,
        dont_fragment: true,
        tos: 0,
        payload_len: 0,
    };
    let udp = UdpRepr {
        src_port,
        dst_port: dst.port(),
        payload,
    };
    cx.send_with(|buf| packet::emit_udp(buf, &ip, &udp))
        .expect("a 64-byte datagram always fits");
}

/// Sends `window` datagrams to the echo server and a new one for each reply
/// until `limit` replies have come back.
struct Pinger {
    local: Ipv4Addr,
    server: SocketAddrV4,
    window: u64,
    limit: u64,
    sent: u64,
    replies: u64,
    payload: [u8; 64],
}

impl App<AppContext<'_>> for Pinger {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        let binding = Binding {
            protocol: protocol::UDP,
            port: Some(PORT),
        };
        cx.bind(binding).expect("port is free");
        for _ in 0..self.window.min(self.limit) {
            self.sent += 1;
            udp_to(cx, self.local, self.server, PORT, &self.payload);
        }
    }
    fn on_packet(&mut self, cx: &mut AppContext<'_>, _datagram: &[u8]) {
        self.replies += 1;
        if self.sent < self.limit {
            self.sent += 1;
            udp_to(cx, self.local, self.server, PORT, &self.payload);
        }
    }
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn stats(&self) -> AppStats {
        AppStats::Custom(json!({ "replies": self.replies }))
    }
}

/// Sends every datagram it receives back to where it came from.
struct Echo;

impl App<AppContext<'_>> for Echo {
    fn on_start(&mut self, cx: &mut AppContext<'_>) {
        let binding = Binding {
            protocol: protocol::UDP,
            port: Some(PORT),
        };
        cx.bind(binding).expect("port is free");
    }
    fn on_packet(&mut self, cx: &mut AppContext<'_>, datagram: &[u8]) {
        let Ok(parsed) = packet::parse(datagram) else {
            return;
        };
        let Transport::Udp(udp) = parsed.transport else {
            return;
        };
        let back = SocketAddrV4::new(parsed.ip.src, udp.src_port);
        udp_to(cx, parsed.ip.dst, back, udp.dst_port, udp.payload);
    }
    fn on_timer(&mut self, _: &mut AppContext<'_>, _: u64) {}
    fn stats(&self) -> AppStats {
        AppStats::Custom(serde_json::Value::Null)
    }
}

fn two_hosts(config: P2pConfig) -> (Simulator, [rtolab_sim::node::NodeId; 2]) {
    let mut sim = Simulator::new(1);
    let a = sim.add_node("a");
    let b = sim.add_node("b");
    let link = sim.add_point_to_point("ab", config);
    let cidr = |text: &str| text.parse::<Ipv4Cidr>().expect("valid literal");
    sim.attach(a, link, cidr("10.0.0.1/24")).expect("free port");
    sim.attach(b, link, cidr("10.0.0.2/24")).expect("free port");
    (sim, [a, b])
}

/// UDP ping-pong over a 1 Gbit/s, 10 us link with `window` pings in flight.
fn ping_pong(window: u64, round_trips: u64) {
    let (mut sim, [a, b]) = two_hosts(P2pConfig {
        rate_bps: 1_000_000_000,
        delay: SimDuration::from_micros(10),
        queue_capacity: 1000,
        loss: 0.0,
    });
    sim.add_app(b, "echo", AnyApp::Custom(Box::new(Echo)));
    let pinger = Pinger {
        local: Ipv4Addr::new(10, 0, 0, 1),
        server: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), PORT),
        window,
        limit: round_trips,
        sent: 0,
        replies: 0,
        payload: [0; 64],
    };
    sim.add_app(a, "ping", AnyApp::Custom(Box::new(pinger)));
    let start = stopwatch();
    sim.run_until(SimTime::MAX).expect("no outputs to fail");
    let elapsed = start.elapsed();
    let delivered = 2 * round_trips;
    report(
        &format!("p2p-ping-pong-w{window}"),
        sim.events_processed(),
        elapsed,
        json!({
            "window": window,
            "delivered_packets": delivered,
            "ns_per_delivered_packet": ((elapsed.as_secs_f64() * 1e9 / delivered as f64) * 100.0).round() / 100.0,
            "simulated_s": sim.now().as_secs_f64(),
            "packet_buffers": sim.packet_buffers(),
        }),
    );
}

/// A CBR source at 90 % of a 100 Mbit/s link into a sink, the built-in apps.
fn cbr_stream(simulated: SimDuration) {
    let (mut sim, [a, b]) = two_hosts(P2pConfig {
        rate_bps: 100_000_000,
        delay: SimDuration::from_millis(5),
        queue_capacity: 100,
        loss: 0.0,
    });
    let sink = sim.add_app(
        b,
        "sink",
        AnyApp::Sink(SinkApp::new(SinkConfig { port: PORT })),
    );
    let cbr = CbrApp::new(CbrConfig {
        destination: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), PORT),
        source_port: PORT,
        payload_size: 1000,
        rate_bps: 90_000_000,
        start: SimTime::ZERO,
        stop: None,
    });
    sim.add_app(a, "cbr", AnyApp::Cbr(cbr));
    let start = stopwatch();
    sim.run_until(SimTime::ZERO + simulated)
        .expect("no outputs to fail");
    let elapsed = start.elapsed();
    let AppStats::Sink(got) = sim.app_stats(sink) else {
        unreachable!("the sink app reports sink stats")
    };
    let delivered = got.received_packets;
    report(
        "p2p-cbr-90mbps",
        sim.events_processed(),
        elapsed,
        json!({
            "delivered_packets": delivered,
            "ns_per_delivered_packet": ((elapsed.as_secs_f64() * 1e9 / delivered as f64) * 100.0).round() / 100.0,
            "simulated_s": simulated.as_secs_f64(),
            "packet_buffers": sim.packet_buffers(),
        }),
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 1 } else { 10 };
    queue_hold(1_000, 2_000_000 * scale);
    queue_hold(100_000, 1_000_000 * scale);
    timers(1, 1_000_000 * scale);
    timers(1_000, 1_000 * scale);
    ping_pong(1, 200_000 * scale);
    ping_pong(64, 200_000 * scale);
    cbr_stream(SimDuration::from_secs(10 * scale));
}
