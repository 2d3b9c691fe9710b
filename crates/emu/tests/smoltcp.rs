//! smoltcp as an emulated host (`stack = "smoltcp"`): the bridge exchange
//! in real time with a smoltcp appliance and a Linux end-user device. It
//! needs root and /dev/net/tun; without them it prints why and passes
//! vacuously, like the other emulations.

mod common;

use common::{app, emulation_slot, scenario_path, shipped};
use rtolab_emu::{emulate, EmuOptions, EmuScenario};

#[test]
fn smoltcp_appliance_exchanges_with_a_linux_server_over_the_nfc_bridge() {
    let Some(_slot) =
        emulation_slot("smoltcp_appliance_exchanges_with_a_linux_server_over_the_nfc_bridge")
    else {
        return;
    };
    let emu = EmuScenario::from_path(&scenario_path("emu-bridge-smoltcp.toml")).unwrap();
    let opts = EmuOptions {
        stop_when_done: true,
        realtime: true,
        ..EmuOptions::default()
    };
    let report = emulate(&emu, &opts, |_| {}).unwrap();
    let client = app(&report, "client");
    let server = app(&report, "server");
    assert!(client.result.completed, "{client:?}");
    assert_eq!(client.result.exchanges_completed, 1, "{client:?}");
    assert_eq!(client.result.bytes_sent, 1024, "{client:?}");
    assert_eq!(client.result.bytes_received, 1024, "{client:?}");
    assert_eq!(client.result.bytes_corrupt, 0, "{client:?}");
    assert_eq!(server.result.exchanges_completed, 1, "{server:?}");
    assert_eq!(server.result.bytes_corrupt, 0, "{server:?}");
    // "done": smoltcp's connection reached TIME-WAIT after the Linux
    // server's FIN.
    assert_eq!(report.ended_by, "done");
    let appliance = report
        .engine
        .hosts
        .iter()
        .find(|h| h.name == "appliance")
        .unwrap();
    assert_eq!(appliance.stack.name(), "smoltcp");
    // smoltcp keeps no retransmission counters to report.
    assert!(appliance.engine.is_none());
    // What it sent is read off the wire instead.
    assert!(appliance.wire.payload_bytes_sent >= 1024, "{appliance:?}");
}

#[test]
fn smoltcp_hosts_take_smoltcp_settings_and_refuse_profiles() {
    let text = shipped("emu-bridge-smoltcp.toml");
    let emu = EmuScenario::from_toml_str(&text).unwrap();
    assert_eq!(emu.kind_of("appliance").map(|k| k.name()), Some("smoltcp"));
    let err = |t: &str| EmuScenario::from_toml_str(t).unwrap_err().to_string();
    let e = err(&text.replace("mtu = 1500", "mtu = 20"));
    assert!(e.starts_with("host[0].tcp.mtu"), "{e}");
    let e = err(&text.replace(
        "stack = \"smoltcp\"",
        "stack = \"smoltcp\"\nprofile = \"lwip\"",
    ));
    assert!(e.starts_with("host[0].profile"), "{e}");
}
