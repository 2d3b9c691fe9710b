//! The engine driven through virtual time, without devices or root: the
//! same link models and TCP engine as the simulator, behind the
//! emulator's edge.

use proptest::prelude::*;
use rtolab_emu::engine::{Egress, Engine, TunId};
use rtolab_emu::{Clock, EmuScenario, ManualClock};
use rtolab_sim::app::AppStats;
use rtolab_sim::run::RunOptions;
use rtolab_time::{SimDuration, SimTime};
use rtolab_wire::ipv4::{protocol, Ipv4Repr};
use rtolab_wire::packet::emit_udp;
use rtolab_wire::udp::UdpRepr;
use std::net::Ipv4Addr;

/// Collects what the engine writes to TUN devices.
#[derive(Default)]
struct Collect(Vec<(TunId, Vec<u8>, SimTime)>);

impl Egress for Collect {
    fn deliver(&mut self, tun: TunId, datagram: &[u8], due: SimTime) {
        self.0.push((tun, datagram.to_vec(), due));
    }
}

const TWO_LINUX: &str = r#"
name = "two"
duration = "5s"

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "8Mbps"
delay = "3ms"
"#;

fn udp_datagram(payload_len: usize) -> Vec<u8> {
    let payload = vec![7u8; payload_len];
    let udp = UdpRepr {
        src_port: 1000,
        dst_port: 2000,
        payload: &payload,
    };
    let ip = Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        protocol: protocol::UDP,
        ttl: 64,
        ident: 1,
        dont_fragment: true,
        tos: 0,
        payload_len: udp.buffer_len(),
    };
    let mut out = Vec::new();
    emit_udp(&mut out, &ip, &udp).unwrap();
    out
}

#[test]
fn a_datagram_crosses_at_the_models_time() {
    let emu = EmuScenario::from_toml_str(TWO_LINUX).unwrap();
    let mut engine = Engine::new(&emu, 1, None).unwrap();
    assert_eq!(engine.tun_ports().len(), 2);
    assert_eq!(engine.tun_ports()[1].device, "rt0-ab");
    let mut out = Collect::default();
    let sent = udp_datagram(972); // 1000 bytes: 1 ms at 8 Mbit/s
    let t0 = SimTime::from_millis(10);
    engine.advance(t0, &mut out);
    engine.ingress(t0, 0, &sent, &mut out);
    assert!(!engine.network_empty());
    let due = t0 + SimDuration::from_millis(4);
    assert_eq!(engine.poll_timeout(), Some(due));
    // A late driver replays the same history: the due time is the model's.
    engine.advance(due + SimDuration::from_millis(7), &mut out);
    assert_eq!(out.0, [(1, sent, due)]);
    assert!(engine.network_empty());
    let report = engine.report(due + SimDuration::from_millis(7));
    assert_eq!(report.edges.packets_from_tun, 1);
    assert_eq!(report.edges.packets_to_tun, 1);
    assert_eq!(report.hosts[0].wire.packets_sent, 1);
}

/// A fading link always has its next change of state due; once the
/// datagram has crossed, the network is empty all the same, so a run that
/// stops when its apps are done can end.
#[test]
fn a_fading_link_with_nothing_to_carry_is_empty_though_its_outages_go_on() {
    let text = TWO_LINUX.replace(
        "kind = \"point-to-point\"",
        "kind = \"fading\"\nfading = { mean_up = \"3s\", mean_down = \"300ms\" }",
    );
    let emu = EmuScenario::from_toml_str(&text).unwrap();
    let mut engine = Engine::new(&emu, 1, None).unwrap();
    let mut out = Collect::default();
    let t0 = SimTime::from_millis(10);
    engine.advance(t0, &mut out);
    engine.ingress(t0, 0, &udp_datagram(972), &mut out);
    assert!(!engine.network_empty());
    let later = t0 + SimDuration::from_millis(500);
    engine.advance(later, &mut out);
    assert_eq!(out.0.len(), 1, "the datagram crossed");
    assert!(engine.network_empty());
    assert!(
        engine.poll_timeout().is_some(),
        "the outage process goes on"
    );
}

#[test]
fn malformed_datagrams_are_counted_and_dropped() {
    let emu = EmuScenario::from_toml_str(TWO_LINUX).unwrap();
    let mut engine = Engine::new(&emu, 1, None).unwrap();
    let mut out = Collect::default();
    let good = udp_datagram(100);
    let mut bad_checksum = good.clone();
    bad_checksum[10] ^= 0xff;
    let mut ipv6 = good.clone();
    ipv6[0] = 0x60;
    let truncated = good[..25].to_vec();
    for (i, d) in [bad_checksum, ipv6, truncated, Vec::new()]
        .iter()
        .enumerate()
    {
        engine.ingress(SimTime::from_millis(i as u64), 0, d, &mut out);
    }
    // An index no device has is ignored too.
    engine.ingress(SimTime::from_millis(5), 99, &good, &mut out);
    engine.advance(SimTime::from_secs(1), &mut out);
    assert!(out.0.is_empty());
    let edges = engine.report(SimTime::from_secs(1)).edges;
    assert_eq!(edges.rejected_total(), 4, "{:?}", edges.rejected);
    assert_eq!(edges.packets_from_tun, 0);
}

proptest! {
    #[test]
    fn hostile_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let emu = EmuScenario::from_toml_str(TWO_LINUX).unwrap();
        let mut engine = Engine::new(&emu, 1, None).unwrap();
        let mut out = Collect::default();
        engine.ingress(SimTime::ZERO, 0, &data, &mut out);
        engine.advance(SimTime::from_secs(1), &mut out);
        let edges = engine.report(SimTime::from_secs(1)).edges;
        prop_assert_eq!(edges.rejected_total() + edges.packets_from_tun, 1);
    }
}

/// Drives an engine with no TUN traffic through virtual time until its
/// rtolab clients are done; returns the end time.
fn run_virtual(engine: &mut Engine, limit: SimTime) -> SimTime {
    let clock = ManualClock::new();
    let mut out = Collect::default();
    while let Some(t) = engine.poll_timeout() {
        if t > limit || engine.rtolab_clients_done() {
            break;
        }
        clock.set(t);
        engine.advance(clock.now(), &mut out);
    }
    assert!(out.0.is_empty(), "no Linux host, nothing for TUN devices");
    clock.now()
}

fn mean_latency_ms(sim: &rtolab_sim::RunReport, app: &str) -> f64 {
    let row = sim.apps.iter().find(|a| a.name == app).unwrap();
    let value = serde_json::to_value(row).unwrap();
    value["latency_mean_ns"].as_f64().unwrap() / 1e6
}

/// Two rtolab hosts over the NFC bridge: the emulator's engine in virtual
/// time and the simulator tell the same story.
#[test]
fn rtolab_hosts_over_the_bridge_match_the_simulator() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/emu-bridge-fixed.toml"
    );
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace(
            "stack = \"linux\"",
            "stack = \"rtolab\"\nprofile = \"lwip\"",
        )
        .replace("linux = { rto_min = \"3.5s\" }", "");
    let emu = EmuScenario::from_toml_str(&text).unwrap();
    let mut engine = Engine::new(&emu, emu.scenario.seed, None).unwrap();
    run_virtual(&mut engine, SimTime::from_secs(60));
    let report = engine.report(SimTime::from_secs(60));
    let client = report.apps.iter().find(|a| a.name == "client").unwrap();
    assert!(client.result.completed, "{client:?}");
    let emulated = client.result.latency_mean_ms.unwrap();

    let sim = rtolab_sim::run_scenario(&emu.scenario, &RunOptions::default()).unwrap();
    let simulated = mean_latency_ms(&sim, "client");
    assert!(
        (emulated - simulated).abs() <= simulated * 0.01,
        "engine {emulated} ms, simulator {simulated} ms"
    );
    // And the same retransmissions, host by host.
    for host in report.hosts.iter().filter(|h| h.engine.is_some()) {
        let simulated: u64 = sim
            .flows
            .iter()
            .filter(|f| f.host == host.name)
            .map(|f| f.counts.retransmissions)
            .sum();
        let engine = host.engine.unwrap();
        assert_eq!(engine.retransmissions, simulated, "{}", host.name);
        assert_eq!(host.wire.retransmissions, simulated, "{}", host.name);
    }
}

/// A shipped scenario with every host an rtolab host, run through the
/// engine in virtual time and through the simulator: the apps are the same
/// code, so they count the same.
fn same_apps_in_both(file: &str, duration: SimTime) -> Vec<(String, AppStats, AppStats)> {
    let path = format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("[[host]]", "[[host]]\nstack = \"rtolab\"");
    let emu = EmuScenario::from_toml_str(&text).unwrap();
    let mut engine = Engine::new(&emu, emu.scenario.seed, None).unwrap();
    // The whole run, as the simulator's: datagrams still on the link when
    // the clients are done arrive too.
    let mut out = Collect::default();
    while let Some(t) = engine.poll_timeout().filter(|&t| t < duration) {
        engine.advance(t, &mut out);
    }
    let report = engine.report(duration);
    let sim = rtolab_sim::run_scenario(&emu.scenario, &RunOptions::default()).unwrap();
    sim.apps
        .iter()
        .map(|row| {
            let emulated = report.apps.iter().find(|a| a.name == row.name).unwrap();
            (row.name.clone(), emulated.stats.clone(), row.stats.clone())
        })
        .collect()
}

#[test]
fn an_rtolab_exchange_counts_what_the_simulator_counts() {
    let apps = same_apps_in_both("exchange.toml", SimTime::from_secs(30));
    for (name, emulated, simulated) in &apps {
        match (emulated, simulated) {
            (AppStats::Exchange(e), AppStats::Exchange(s)) => {
                assert_eq!(e.exchanges_completed, 10, "{name}");
                assert_eq!(
                    (e.exchanges_completed, e.exchanges_failed),
                    (s.exchanges_completed, s.exchanges_failed)
                );
                assert_eq!(
                    (e.bytes_sent, e.bytes_received),
                    (s.bytes_sent, s.bytes_received)
                );
                assert_eq!(e.bytes_corrupt, 0);
            }
            (AppStats::ExchangeServer(e), AppStats::ExchangeServer(s)) => {
                assert_eq!(e.requests_served, s.requests_served, "{name}");
                assert_eq!(
                    (e.bytes_sent, e.bytes_received),
                    (s.bytes_sent, s.bytes_received)
                );
            }
            other => panic!("{name}: {other:?}"),
        }
        println!("{name}: emulated {emulated:?}\n{name}: simulated {simulated:?}");
    }
    let client = &apps.iter().find(|(n, ..)| n == "client").unwrap();
    assert_eq!(
        client.1, client.2,
        "same engine, links and seeds: same latencies too"
    );
}

#[test]
fn rtolab_hosts_run_the_simulators_udp_apps() {
    let apps = same_apps_in_both("p2p-cbr.toml", SimTime::from_secs(2));
    for (name, emulated, simulated) in &apps {
        println!("{name}: emulated {emulated:?}\n{name}: simulated {simulated:?}");
        match (emulated, simulated) {
            (AppStats::Cbr(e), AppStats::Cbr(s)) => {
                assert!(e.sent_packets > 400, "{name}");
                assert_eq!(e, s);
            }
            (AppStats::Sink(e), AppStats::Sink(s)) => {
                assert!(e.lost > 0, "the link loses 2 %");
                assert_eq!(e, s);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
