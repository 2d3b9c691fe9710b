//! A datagram's IP header is parsed once where it enters a node, and a
//! mesh member parses only what it gets from the radio.

use crate::run::build_simulator;
use crate::Scenario;
use crate::SimTime;

use super::parse_count;

/// Runs `scenario` to `end` and checks that the nodes parsed exactly one
/// IP header per datagram they sent and one per datagram that entered
/// them; returns the parse counts ([`parse_count::get`]) of the run.
fn run_counting(scenario: &str, end: SimTime) -> (u64, u64, u64) {
    let scenario = Scenario::from_toml_str(scenario).unwrap();
    let mut sim = build_simulator(&scenario, 1).unwrap();
    let before = parse_count::get();
    sim.run_until(end).unwrap();
    let after = parse_count::get();
    let counts = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    let mut sent = 0;
    let mut entered = 0;
    for node in sim.nodes() {
        let s = &node.stats;
        // Every datagram sent or entering is delivered or forwarded: the
        // count below holds only without drops at nodes.
        let drops = s.dropped_no_route
            + s.dropped_neighbour_unknown
            + s.dropped_ttl_expired
            + s.dropped_bad_header
            + s.dropped_no_listener;
        assert_eq!(drops, 0, "{}: {s:?}", node.name);
        sent += s.originated;
        entered += s.delivered + s.forwarded;
    }
    assert!(
        sent > 100 && entered > 100,
        "{sent} sent, {entered} entered"
    );
    assert_eq!(counts.0, sent + entered, "node parses");
    counts
}

#[test]
fn a_node_parses_a_point_to_point_datagram_once() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/p2p-bulk.toml"
    ))
    .unwrap();
    let (_, member, _) = run_counting(&text, SimTime::from_secs(10));
    assert_eq!(member, 0);
}

#[test]
fn the_mesh_parses_only_what_members_get_from_the_radio() {
    // n3 is two radio hops from the root n1, where the sink is.
    let text = r#"
name = "mesh-parse"
seed = 1
duration = "300s"

[[host_group]]
prefix = "n"
grid = { rows = 1, cols = 3, spacing = "40m" }
profile = "uip"
[host_group.tcp]
mss = 48

[[link]]
name = "mesh"
kind = "ieee802154"
members = "n*"
root = "n1"
prefix = "fd00::/64"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "n1"
port = 80

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "n3"
peer = "[fd00::212:7401:1:101]:80"
bytes = 3000
start = "120s"
"#;
    let (_, member, from_radio) = run_counting(text, SimTime::from_secs(300));
    // The first member routes on the header its node parsed.
    assert!(from_radio > 0);
    assert_eq!(member, from_radio);
}
