//! The bridge study's long session and its untested recommendations
//! (bridge spec §4.3, §5) end to end: the cooking session, the faster
//! links (UART rate, MCU removed) and the PTx filter.

use std::path::Path;

use rtolab_sim::app::AppStats;
use rtolab_sim::link::LinkStats;
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario};
use rtolab_tcp::State;

fn fixed() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/bridge-fixed.toml");
    std::fs::read_to_string(path).expect("shipped scenario")
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

fn nfc_payload_bytes(report: &RunReport) -> u64 {
    report
        .links
        .iter()
        .filter_map(|l| match &l.stats {
            LinkStats::Nfc(s) => Some(
                s.directions
                    .iter()
                    .map(|d| d.nfc_payload_bytes)
                    .sum::<u64>(),
            ),
            _ => None,
        })
        .sum()
}

fn with_link_fields(fields: &str) -> String {
    fixed().replacen(
        "rate = \"11.2kbps\"",
        &format!("rate = \"11.2kbps\"\n{fields}"),
        1,
    )
}

#[test]
fn a_faster_uart_and_no_mcu_shorten_the_exchange() {
    let seed = 2;
    let base = run(&fixed(), seed);
    let fast_uart = run(&with_link_fields("uart_baud = 921600"), seed);
    let no_mcu = run(&with_link_fields("mcu = false"), seed);
    // The same packets cross; without the MCU each is 8 bytes shorter.
    let packets = |r: &RunReport| r.flows.iter().map(|f| f.segments_sent).sum::<u64>();
    assert_eq!(packets(&base), packets(&no_mcu));
    let crossed = base
        .links
        .iter()
        .filter_map(|l| match &l.stats {
            LinkStats::Nfc(s) => Some(
                s.directions
                    .iter()
                    .map(|d| d.delivered_packets)
                    .sum::<u64>(),
            ),
            _ => None,
        })
        .sum::<u64>();
    assert_eq!(
        nfc_payload_bytes(&base) - nfc_payload_bytes(&no_mcu),
        8 * crossed
    );
    assert!(latency_ns(&fast_uart) < latency_ns(&base));
    assert!(latency_ns(&no_mcu) < latency_ns(&base));
}

#[test]
fn bad_uart_baud_is_named() {
    for (value, expected) in [
        (
            "0",
            "link[0].uart_baud: must be between 1200 and 100000000 baud, got 0",
        ),
        (
            "\"fast\"",
            "link[0].uart_baud: invalid type: string \"fast\", expected u64",
        ),
    ] {
        let text = with_link_fields(&format!("uart_baud = {value}"));
        let error = Scenario::from_toml_str(&text).expect_err(value).to_string();
        assert_eq!(error, expected);
    }
}

/// The study's long session on the fixed bridge: 11.2 kbps, sensing.
fn cooking(rto: &str, extra: &str) -> String {
    let app = "[[app]]\nkind = \"exchange\"";
    let head = fixed();
    let head = &head[..head.find(app).expect("the exchange app")];
    format!(
        "{}[[app]]\nkind = \"cooking-session\"\nname = \"client\"\nhost = \"appliance\"\n\
         peer = \"192.168.1.202:7891\"\nsource_port = 49153\nconnect_first = true\n{extra}",
        head.replace("duration = \"120s\"", "duration = \"600s\"")
            .replace("rto = { initial = \"3.5s\" }", rto)
    )
}

#[test]
fn the_cooking_session_sends_runs_of_small_messages_then_a_recipe() {
    let report = run(&cooking("rto = { initial = \"3.5s\" }", ""), 1);
    let app = report.apps.iter().find(|a| a.name == "client").unwrap();
    let AppStats::CookingSession(stats) = &app.stats else {
        panic!("{:?}", app.stats)
    };
    // Three rounds of 20 small messages and one recipe.
    assert_eq!(stats.messages, 63);
    assert_eq!(stats.messages_acked, 63);
    assert_eq!(stats.failure, None);
    let appliance = report.flows.iter().find(|f| f.host == "appliance").unwrap();
    assert_eq!(appliance.state, State::Closed);
    // Each message is written once the previous one is acknowledged, so
    // the recipes alone (1025-3072 bytes each) take several segments.
    assert!(appliance.bytes_acked > 3 * 1024 + 60 * 8);
}

#[test]
fn bad_cooking_session_fields_are_named() {
    for (extra, expected) in [
        (
            "small = [9, 8]",
            "app[1].small: must have lo <= hi, got [9, 8]",
        ),
        (
            "small = [2, 9]",
            "app[1].small: must be at least 8, got [2, 9]",
        ),
        (
            "large = [2000]",
            "app[1].large: must be a range [lo, hi], got 1 values",
        ),
        ("rounds = 0", "app[1].rounds: must be positive"),
    ] {
        let text = cooking("rto = { initial = \"3.5s\" }", extra);
        let error = Scenario::from_toml_str(&text).expect_err(extra).to_string();
        assert_eq!(error, expected);
    }
}

#[test]
fn the_ptx_filter_passes_everything_new_and_names_its_appliance() {
    let filter =
        "\n[[middlebox]]\nkind = \"ptx-filter\"\nhost = \"ptx\"\nappliance = \"192.168.1.102\"\n";
    let text = cooking("rto = { initial = \"3.5s\" }", "") + filter;
    let with = run(&text, 1);
    let without = run(&cooking("rto = { initial = \"3.5s\" }", ""), 1);
    let stats = &with.middleboxes[0].stats;
    assert!(stats["seen"].as_u64().unwrap() > 60, "{stats}");
    // With nothing spurious to drop, the session is the same packet for packet.
    if stats["dropped_acknowledged"] == 0 && stats["dropped_duplicate_acks"] == 0 {
        assert_eq!(latency_ns(&with), latency_ns(&without));
    }
    let bad = text.replace("appliance = \"192.168.1.102\"", "appliance = \"10.9.9.9\"");
    let error = Scenario::from_toml_str(&bad).expect_err("unknown address");
    assert!(
        error.to_string().starts_with("middlebox[0].appliance:"),
        "{error}"
    );
}

/// The long session on the fixed bridge with Algorithm 1 (`ratio`: with its
/// ratio term or without) and extra fields on the NFC link and the
/// Ethernet. Recipes of one segment: a segment sent behind others of its
/// own flight waits for them on the half-duplex link, which the theory of a
/// single packet leaves out, so its r exceeds 1 even on a quiet link.
fn long_session(ratio: bool, nfc: &str, eth: &str) -> String {
    let rto = format!("rto = {{ policy = \"bridge\", ratio = {ratio} }}");
    cooking(&rto, "large = [1000, 1000]\n")
        .replacen(
            "rate = \"11.2kbps\"",
            &format!("rate = \"11.2kbps\"\n{nfc}"),
            1,
        )
        .replacen("delay = \"100us\"", &format!("delay = \"100us\"\n{eth}"), 1)
}

/// The ratios `r` (measured over theoretical RTT) that the appliance's
/// Algorithm 1 took from the RTT samples of its data segments in `text`:
/// each unambiguous sample's corrected RTT over `NfcChannelModel::rtt` of
/// its segment, as the policy computes it. (The FIN's sample, the last of
/// the session, has nothing left to time.)
fn ratios(text: &str, seed: u64) -> Vec<f64> {
    use rtolab_sim::run::build_simulator;
    use rtolab_sim::trace::{MemorySink, TraceEvent};
    use rtolab_sim::SimTime;
    use rtolab_tcp::rto::bridge::NfcChannelModel;
    use rtolab_tcp::trace::TraceEvent as Tcp;

    let scenario = Scenario::from_toml_str(text).expect("valid scenario");
    let mut sim = build_simulator(&scenario, seed).expect("builds");
    let sink = MemorySink::new();
    sim.set_trace_sink(Box::new(sink.clone()));
    sim.run_until(SimTime::from_secs(600)).expect("runs");
    let channel = NfcChannelModel::rate_11_2kbps();
    sink.events()
        .iter()
        .filter_map(|(_, e)| match e {
            TraceEvent::Tcp {
                node: 0, detail, ..
            } => match detail.0 {
                Tcp::RttSample {
                    corrected,
                    segment_len,
                    retransmitted: false,
                    ..
                } if segment_len > 1 => {
                    let theory = channel.rtt(channel.nfc_payload(segment_len, false));
                    Some(corrected.as_nanos() as f64 / theory.as_nanos() as f64)
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn power_control_and_wifi_jitter_move_algorithm_1s_ratio_above_one() {
    let power = "power_control = { period = \"100ms\", bytes = 10 }";
    let wifi = "jitter = { distribution = \"exponential\", mean = \"300ms\" }";
    for seed in 1..=2 {
        // The quiet link: every data segment crosses faster than its theory
        // (whose Wi-Fi part is a whole second), so r stays below 1, and
        // Algorithm 1 runs the same with its ratio term and without.
        let quiet = ratios(&long_session(true, "", ""), seed);
        assert!(quiet.len() > 60, "{}", quiet.len());
        assert!(quiet.iter().all(|&r| r < 1.0), "{quiet:?}");
        let flows = |ratio| {
            serde_json::to_value(&run(&long_session(ratio, "", ""), seed).flows).expect("json")
        };
        assert_eq!(flows(true), flows(false));
        // Power control and a slow Wi-Fi side: some samples exceed theory.
        let busy = ratios(&long_session(true, power, wifi), seed);
        assert!(busy.iter().any(|&r| r > 1.0), "seed {seed}: {busy:?}");
    }
}
