//! The snoop middlebox at a base station: a fixed host sends over a wired
//! link to the base station and on over a lossy wireless hop to a mobile.
//! With snoop every byte still arrives intact, and the sender sees fewer of
//! the wireless losses (fewer fast retransmits and timeouts) because the
//! base station repairs them locally; and bad `[[middlebox]]` tables of
//! kind snoop are rejected naming the field.

use rtolab_sim::app::AppStats;
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario};

const BYTES: u64 = 500_000;

/// fixed -- wired -- base-station -- wireless (2 % loss each way) -- mobile.
fn topology(extra: &str) -> String {
    format!(
        r#"
name = "snoop"
duration = "30s"

[[host]]
name = "fixed"
profile = "linux"

[[host]]
name = "base-station"

[[host]]
name = "mobile"
profile = "linux"
[host.tcp]
recv_buffer = 65536

[[link]]
name = "wired"
kind = "point-to-point"
ends = [ {{ host = "fixed", address = "10.0.0.1/24" }}, {{ host = "base-station", address = "10.0.0.2/24" }} ]
rate = "10Mbps"
delay = "20ms"

[[link]]
name = "wireless"
kind = "point-to-point"
ends = [ {{ host = "base-station", address = "10.0.1.1/24" }}, {{ host = "mobile", address = "10.0.1.2/24" }} ]
rate = "2Mbps"
delay = "5ms"
loss = 0.02

[[route]]
host = "fixed"
destination = "default"
via = "10.0.0.2"

[[route]]
host = "mobile"
destination = "default"
via = "10.0.1.1"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "mobile"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "fixed"
peer = "10.0.1.2:5001"
bytes = {BYTES}
start = "100ms"
{extra}
"#
    )
}

const SNOOP: &str = r#"
[[middlebox]]
kind = "snoop"
name = "snoop"
host = "base-station"
mobile = "10.0.1.2"
"#;

fn run(extra: &str, seed: u64) -> RunReport {
    let scenario = Scenario::from_toml_str(&topology(extra))
        .unwrap_or_else(|e| panic!("scenario rejected: {e}"));
    let opts = RunOptions {
        seed: Some(seed),
        ..RunOptions::default()
    };
    run_scenario(&scenario, &opts).expect("runs")
}

/// (bytes received, corrupt bytes, connections finished) at the mobile.
fn delivered(report: &RunReport) -> (u64, u64, u64) {
    let app = report.apps.iter().find(|a| a.name == "sink").expect("sink");
    match &app.stats {
        AppStats::TcpSink(s) => (s.bytes_received, s.bytes_corrupt, s.connections_finished),
        other => panic!("not a tcp-sink: {other:?}"),
    }
}

/// The fixed host's loss recoveries: fast retransmits and timeouts.
fn sender_recoveries(report: &RunReport) -> u64 {
    report
        .flows
        .iter()
        .filter(|f| f.app.as_deref() == Some("bulk"))
        .map(|f| f.counts.retx_fast + f.counts.timeouts)
        .sum()
}

fn snoop_stat(report: &RunReport, field: &str) -> u64 {
    let row = &report.middleboxes[0];
    assert_eq!(row.kind, "snoop");
    row.stats[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {field}"))
}

#[test]
fn snoop_repairs_wireless_losses_locally_and_the_sender_sees_fewer() {
    let (mut plain, mut snooped, mut local) = (0, 0, 0);
    for seed in 1..=5 {
        let without = run("", seed);
        let with = run(SNOOP, seed);
        assert_eq!(delivered(&without), (BYTES, 0, 1), "seed {seed}");
        assert_eq!(delivered(&with), (BYTES, 0, 1), "seed {seed}");
        plain += sender_recoveries(&without);
        snooped += sender_recoveries(&with);
        local += snoop_stat(&with, "local_retransmissions");
        assert!(snoop_stat(&with, "segments_cached") > 0);
        assert_eq!(snoop_stat(&with, "connections"), 1);
    }
    assert!(
        plain > 0,
        "the wireless losses reach a sender without snoop"
    );
    assert!(local > 0, "snoop resent something itself");
    assert!(
        snooped < plain,
        "fast retransmits + timeouts at the sender: {snooped} with snoop, {plain} without"
    );
}

fn rejects(extra: &str) -> String {
    match Scenario::from_toml_str(&topology(extra)) {
        Ok(_) => panic!("accepted: {extra}"),
        Err(e) => e.to_string(),
    }
}

fn snoop_with(field: &str) -> String {
    format!("[[middlebox]]\nkind = \"snoop\"\nhost = \"base-station\"\nmobile = \"10.0.1.2\"\n{field}\n")
}

#[test]
fn bad_snoop_tables_name_the_field() {
    assert_eq!(
        rejects("[[middlebox]]\nkind = \"snoop\"\nhost = \"base-station\"\n"),
        "middlebox[0].mobile: required for snoop middleboxes"
    );
    assert_eq!(
        rejects(
            "[[middlebox]]\nkind = \"snoop\"\nhost = \"base-station\"\nmobile = \"10.9.9.9\"\n"
        ),
        "middlebox[0].mobile: no interface has address 10.9.9.9"
    );
    assert_eq!(
        rejects(
            "[[middlebox]]\nkind = \"snoop\"\nhost = \"base-station\"\nmobile = \"10.0.1.1\"\n"
        ),
        "middlebox[0].mobile: 10.0.1.1 is an address of \"base-station\" itself"
    );
    assert!(rejects(
        "[[middlebox]]\nkind = \"snoop\"\nhost = \"base-station\"\nmobile = \"mobile\"\n"
    )
    .starts_with("middlebox[0].mobile:"));
    assert_eq!(
        rejects(&snoop_with("cache_segments = 0")),
        "middlebox[0].cache_segments: must be at least 1"
    );
    assert!(rejects(&snoop_with("cache_segments = -3")).starts_with("middlebox[0].cache_segments:"));
    assert_eq!(
        rejects(&snoop_with("cache_bytes = 0")),
        "middlebox[0].cache_bytes: must be at least 1"
    );
    assert_eq!(
        rejects(&snoop_with("min_local_rto = \"0s\"")),
        "middlebox[0].min_local_rto: must be positive"
    );
    assert!(
        rejects(&snoop_with("min_local_rto = \"soon\"")).starts_with("middlebox[0].min_local_rto:")
    );
    assert_eq!(
        rejects(&snoop_with(
            "min_local_rto = \"100ms\"\nmax_local_rto = \"50ms\""
        )),
        "middlebox[0].max_local_rto: must be at least min_local_rto (100ms), got 50ms"
    );
    assert_eq!(
        rejects(&snoop_with("max_local_retransmissions = 0")),
        "middlebox[0].max_local_retransmissions: must be at least 1"
    );
    assert_eq!(
        rejects(&snoop_with("drop = [1]")),
        "middlebox[0].drop: not allowed for snoop middleboxes"
    );
    assert!(rejects(&snoop_with("cache = 10")).starts_with("middlebox[0].cache:"));
}

#[test]
fn snoop_is_not_for_a_bridge() {
    let text = r#"
name = "bridged"
duration = "1s"

[[host]]
name = "a"
[[host]]
name = "switch"
bridge = true
[[host]]
name = "b"

[[link]]
name = "left"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "switch" } ]
rate = "10Mbps"
delay = "1ms"

[[link]]
name = "right"
kind = "point-to-point"
ends = [ { host = "switch" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "10Mbps"
delay = "1ms"

[[middlebox]]
kind = "snoop"
host = "switch"
mobile = "10.0.0.2"
"#;
    let err = Scenario::from_toml_str(text).expect_err("a bridge routes nothing");
    assert_eq!(
        err.to_string(),
        "middlebox[0].host: \"switch\" is a bridge; snoop needs a host that routes its retransmissions"
    );
}

#[test]
fn snoop_accepts_its_optional_fields() {
    // A floor above the default ceiling raises the ceiling.
    let text = topology(&snoop_with("min_local_rto = \"2s\""));
    assert!(Scenario::from_toml_str(&text).is_ok());
    let text = topology(&snoop_with(
        "cache_segments = 64\ncache_bytes = 100000\nmin_local_rto = \"20ms\"\nmax_local_rto = \"400ms\"\nmax_local_retransmissions = 2",
    ));
    let scenario = Scenario::from_toml_str(&text).unwrap_or_else(|e| panic!("rejected: {e}"));
    assert_eq!(scenario.middleboxes.len(), 1);
}
