//! The on/off TCP sender on rtolab hosts: the emulator's engine, driven
//! through virtual time, runs the simulator's app code and counts the same
//! bursts and bytes as the simulator.

use rtolab_emu::engine::{Egress, Engine, TunId};
use rtolab_emu::EmuScenario;
use rtolab_sim::app::AppStats;
use rtolab_sim::run::RunOptions;
use rtolab_time::SimTime;

/// Nothing reaches a TUN device: both hosts are rtolab hosts.
struct NoTun;

impl Egress for NoTun {
    fn deliver(&mut self, _tun: TunId, _datagram: &[u8], _due: SimTime) {
        panic!("no Linux host, nothing for TUN devices");
    }
}

const ON_OFF: &str = r#"
name = "on-off"
duration = "20s"

[[host]]
name = "a"
stack = "rtolab"

[[host]]
name = "b"
stack = "rtolab"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "2Mbps"
delay = "10ms"
queue = 100
loss = 0.02

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 5001

[[app]]
kind = "tcp-on-off"
name = "sender"
host = "a"
peer = "10.0.0.2:5001"
on = "200ms"
off = "1s"
bursts = 3
start = "10ms"
"#;

#[test]
fn an_rtolab_host_counts_the_bursts_and_bytes_the_simulator_counts() {
    let emu = EmuScenario::from_toml_str(ON_OFF).unwrap();
    let duration = SimTime::ZERO + emu.scenario.duration;
    let mut engine = Engine::new(&emu, emu.scenario.seed, None).unwrap();
    while let Some(t) = engine.poll_timeout().filter(|&t| t < duration) {
        engine.advance(t, &mut NoTun);
    }
    let report = engine.report(duration);
    let sim = rtolab_sim::run_scenario(&emu.scenario, &RunOptions::default()).unwrap();
    let stats = |name: &str| {
        let emulated = &report.apps.iter().find(|a| a.name == name).unwrap().stats;
        let simulated = &sim.apps.iter().find(|a| a.name == name).unwrap().stats;
        (emulated.clone(), simulated.clone())
    };

    let (AppStats::TcpOnOff(e), AppStats::TcpOnOff(s)) = stats("sender") else {
        panic!("not on/off senders")
    };
    assert_eq!((e.bursts_started, e.bursts_completed), (3, 3), "{e:?}");
    assert!(e.completed && e.bytes_acked > 0, "{e:?}");
    assert_eq!(e, s, "same engine, links and seed: same counts");

    let (AppStats::TcpSink(e_sink), AppStats::TcpSink(s_sink)) = stats("sink") else {
        panic!("not sinks")
    };
    assert_eq!(e_sink.bytes_received, e.bytes_acked);
    assert_eq!(e_sink.bytes_corrupt, 0);
    assert_eq!(e_sink, s_sink);

    // The emulator's own summary agrees.
    let row = report.apps.iter().find(|a| a.name == "sender").unwrap();
    assert!(row.result.completed, "{:?}", row.result);
    assert_eq!(row.result.bytes_sent, e.bytes_sent);
}
