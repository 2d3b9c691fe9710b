//! A duration means the same wherever a scenario file holds it: a link
//! delay and a TCP setting in `[host.tcp]` go through one parser.

use rtolab_sim::scenario::LinkModelSpec;
use rtolab_sim::{Scenario, SimDuration};

/// `(link delay, host a's time_wait)` read from a file that writes both
/// as `text`.
fn both_ways(text: &str) -> (SimDuration, SimDuration) {
    let file = format!(
        r#"
name = "units"
duration = "1s"

[[host]]
name = "a"
profile = "linux"
[host.tcp]
time_wait = "{text}"

[[host]]
name = "b"

[[link]]
name = "ab"
kind = "point-to-point"
ends = [
  {{ host = "a", address = "10.0.0.1/24" }},
  {{ host = "b", address = "10.0.0.2/24" }},
]
rate = "1Mbps"
delay = "{text}"
"#
    );
    let s = Scenario::from_toml_str(&file).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    let LinkModelSpec::PointToPoint(link) = &s.links[0].model else {
        panic!("a point-to-point link")
    };
    let tcp = s.hosts[0].tcp.as_ref().expect("host a has TCP settings");
    (link.0.delay, tcp.time_wait)
}

#[test]
fn link_delays_and_tcp_settings_read_the_same_text_identically() {
    for (text, nanos) in [
        ("250µs", 250_000),
        ("250 us", 250_000),
        ("1.5ms", 1_500_000),
        ("0.0000000015s", 2),
        ("2s", 2_000_000_000),
    ] {
        let expected = SimDuration::from_nanos(nanos);
        assert_eq!(both_ways(text), (expected, expected), "{text:?}");
    }
}

#[test]
fn a_bad_duration_is_rejected_with_the_same_message_in_both_places() {
    let link = Scenario::from_toml_str(
        r#"
name = "units"
duration = "1s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "1Mbps"
delay = "5 min"
"#,
    )
    .unwrap_err();
    let tcp = Scenario::from_toml_str(
        r#"
name = "units"
duration = "1s"
[[host]]
name = "a"
[host.tcp]
persist_min = "5 min"
"#,
    )
    .unwrap_err();
    let expected = "unknown duration unit \"min\" (use ns, us, ms or s), got \"5 min\"";
    assert!(link.message.contains(expected), "{link}");
    assert!(tcp.message.contains(expected), "{tcp}");
}
