//! Header compression on the NFC link (bridge spec §5, the study's future
//! work) end to end: the bridge system with `header_compression =
//! "rfc1144"`.

use std::path::Path;

use rtolab_sim::link::{LinkStats, NfcDirectionStats};
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario};
use rtolab_tcp::State;

fn shipped(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    std::fs::read_to_string(path).expect("shipped scenario")
}

fn compressed(text: &str) -> String {
    text.replacen(
        "rate = \"11.2kbps\"",
        "rate = \"11.2kbps\"\nheader_compression = \"rfc1144\"",
        1,
    )
}

fn run(text: &str, seed: u64) -> RunReport {
    let scenario = Scenario::from_toml_str(text).expect("valid scenario");
    run_scenario(
        &scenario,
        &RunOptions {
            seed: Some(seed),
            ..RunOptions::default()
        },
    )
    .expect("run completes")
}

/// From the appliance's SYN to the end-user device's connection closing.
fn latency_ns(report: &RunReport) -> u64 {
    let flow = |host: &str| report.flows.iter().find(|f| f.host == host).unwrap();
    let enduser = flow("enduser");
    assert_eq!(enduser.state, State::Closed);
    enduser.closed_ns.unwrap() - flow("appliance").opened_ns
}

fn nfc(report: &RunReport) -> [NfcDirectionStats; 2] {
    report
        .links
        .iter()
        .find_map(|l| match &l.stats {
            LinkStats::Nfc(s) => Some(s.directions),
            _ => None,
        })
        .expect("an nfc link")
}

#[test]
fn compression_shortens_the_fixed_exchange_and_keeps_its_packets() {
    let base = shipped("bridge-fixed.toml");
    for seed in [1, 2] {
        let plain = run(&base, seed);
        let small = run(&compressed(&base), seed);
        // The same segments cross, each as the stack sent it.
        let segments = |r: &RunReport| r.flows.iter().map(|f| f.segments_sent).sum::<u64>();
        assert_eq!(segments(&plain), segments(&small));
        let (p, s) = (nfc(&plain), nfc(&small));
        for d in 0..2 {
            assert_eq!(p[d].delivered_bytes, s[d].delivered_bytes);
            assert_eq!(p[d].link_bytes, p[d].sent_bytes);
            assert!(s[d].link_bytes < s[d].sent_bytes);
            assert!(s[d].compressed_packets > 0);
            assert_eq!(s[d].dropped_decompression, 0);
        }
        let slots = |d: &[NfcDirectionStats; 2]| d.iter().map(|x| x.slots).sum::<u64>();
        assert!(slots(&s) < slots(&p));
        assert!(latency_ns(&small) < latency_ns(&plain));
    }
}

#[test]
fn the_original_configuration_recovers_its_drops_with_compression_on() {
    // No sensing, 1 s RTO: the MCUs drop packets, some of them compressed.
    let base = shipped("bridge.toml");
    for seed in 1..=3 {
        let report = run(&compressed(&base), seed);
        let d = nfc(&report);
        assert!(d.iter().map(|x| x.dropped_mcu_busy).sum::<u64>() > 0);
        latency_ns(&report);
    }
}

#[test]
fn a_bad_header_compression_is_named() {
    let text = shipped("bridge.toml").replacen(
        "rate = \"11.2kbps\"",
        "rate = \"11.2kbps\"\nheader_compression = \"rfc6282\"",
        1,
    );
    let error = Scenario::from_toml_str(&text)
        .expect_err("rejected")
        .to_string();
    assert_eq!(
        error,
        "link[0].header_compression: must be \"none\" or \"rfc1144\", got \"rfc6282\""
    );
}

#[test]
fn the_emulator_runs_the_link_with_and_without_compression() {
    // The emulator hands the link each packet's bytes, which compression
    // needs (crates/emu/tests/lwip.rs runs it against real lwIP).
    let on = Scenario::from_toml_str(&compressed(&shipped("bridge.toml"))).expect("valid");
    let off = Scenario::from_toml_str(&shipped("bridge.toml")).expect("valid");
    assert!(on.links[0].model.emulated());
    assert!(off.links[0].model.emulated());
}
