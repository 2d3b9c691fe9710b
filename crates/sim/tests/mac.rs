//! Channel access on a shared medium, as a user sees it: listening before
//! talking (CSMA-CA) avoids the collisions of ALOHA between senders that
//! hear each other, not between hidden terminals; a saturated channel makes
//! CSMA-CA give up on frames; bad `mac` tables name the field.

use rtolab_sim::link::LinkStats;
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario};

/// Two senders, `a` and `c`, send CBR traffic to `b`. `c` stands `c_x`
/// metres from `a` (b is in the middle); the interference range is 60 m.
fn scenario(c_x: f64, mac: &str) -> String {
    let b_x = c_x / 2.0;
    format!(
        r#"
name = "mac"
duration = "5s"

[[host]]
name = "a"
position = {{ x = 0, y = 0 }}
[[host]]
name = "b"
position = {{ x = {b_x}, y = 0 }}
[[host]]
name = "c"
position = {{ x = {c_x}, y = 0 }}

[[link]]
name = "air"
kind = "broadcast"
members = [
  {{ host = "a", address = "10.0.0.1/24" }},
  {{ host = "b", address = "10.0.0.2/24" }},
  {{ host = "c", address = "10.0.0.3/24" }},
]
rate = "250kbps"
tx_range = 50.0
interference_range = 60.0
{mac}

[[app]]
kind = "sink"
host = "b"
port = 9001
[[app]]
kind = "sink"
host = "b"
port = 9003
[[app]]
kind = "cbr"
host = "a"
destination = "10.0.0.2:9001"
size = 100
rate = "40kbps"
[[app]]
kind = "cbr"
host = "c"
destination = "10.0.0.2:9003"
size = 100
rate = "35kbps"
"#
    )
}

fn run(text: &str) -> RunReport {
    let s = Scenario::from_toml_str(text).unwrap_or_else(|e| panic!("rejected: {e}"));
    run_scenario(&s, &RunOptions::default()).expect("runs")
}

/// (collisions at b, delivered to b, busy channels, access failures).
fn at_b(report: &RunReport) -> (u64, u64, u64, u64) {
    let LinkStats::Broadcast(stats) = &report.links[0].stats else {
        panic!("a broadcast link")
    };
    let b = &stats.members[1];
    let busy = stats.members.iter().map(|m| m.busy_channels).sum();
    let failures = stats
        .members
        .iter()
        .map(|m| m.channel_access_failures)
        .sum();
    (b.collisions, b.delivered_packets, busy, failures)
}

const CSMA: &str = r#"mac = { kind = "csma-ca" }"#;

#[test]
fn csma_ca_avoids_collisions_between_senders_that_hear_each_other() {
    // a and c 40 m apart: each hears the other.
    let (aloha_collisions, aloha_delivered, aloha_busy, _) = at_b(&run(&scenario(40.0, "")));
    let (csma_collisions, csma_delivered, csma_busy, _) = at_b(&run(&scenario(40.0, CSMA)));
    assert!(aloha_collisions > 20, "ALOHA collides: {aloha_collisions}");
    assert_eq!(aloha_busy, 0, "ALOHA never senses");
    assert!(csma_busy > 0, "CSMA-CA found the channel busy");
    assert!(
        csma_collisions * 5 < aloha_collisions,
        "CSMA-CA {csma_collisions} vs ALOHA {aloha_collisions} collisions"
    );
    assert!(csma_delivered > aloha_delivered);
}

#[test]
fn csma_ca_cannot_hear_a_hidden_terminal() {
    // a and c 80 m apart, beyond the interference range: hidden from each
    // other, both in range of b.
    let (aloha_collisions, ..) = at_b(&run(&scenario(80.0, "")));
    let (csma_collisions, _, csma_busy, _) = at_b(&run(&scenario(80.0, CSMA)));
    assert!(aloha_collisions > 20);
    assert_eq!(csma_busy, 0, "neither sender ever hears the other");
    // Backoffs shift the collisions around but do not remove them.
    assert!(
        csma_collisions * 2 > aloha_collisions,
        "CSMA-CA {csma_collisions} vs ALOHA {aloha_collisions} collisions"
    );
}

/// Both senders offer far more than the channel's 250 kbit/s.
fn saturated(mac: &str) -> String {
    scenario(40.0, mac)
        .replace("rate = \"40kbps\"", "rate = \"200kbps\"")
        .replace("rate = \"35kbps\"", "rate = \"190kbps\"")
}

#[test]
fn a_saturated_channel_makes_csma_ca_give_up() {
    let (_, _, busy, failures) = at_b(&run(&saturated(
        r#"mac = { kind = "csma-ca", max_backoffs = 0 }"#,
    )));
    assert!(failures > 0, "frames were given up");
    assert_eq!(failures, busy, "no retry after one busy channel");
    let (_, _, busy, failures) = at_b(&run(&saturated(CSMA)));
    assert!(
        busy > failures,
        "with retries most busy channels are waited out"
    );
}

#[test]
fn without_random_backoff_saturated_senders_stay_in_step_and_always_collide() {
    // min_be = 0: no backoff, so two senders that became ready together
    // sense the channel at the same instant, find it clear, and collide,
    // frame after frame.
    let (collisions, delivered, busy, _) = at_b(&run(&saturated(
        r#"mac = { kind = "csma-ca", min_be = 0 }"#,
    )));
    assert_eq!((delivered, busy), (0, 0));
    assert!(collisions > 1000);
}

#[test]
fn the_same_seed_gives_the_same_backoffs() {
    let text = scenario(40.0, CSMA);
    assert_eq!(at_b(&run(&text)), at_b(&run(&text)));
}

fn rejects(mac: &str) -> String {
    match Scenario::from_toml_str(&scenario(40.0, mac)) {
        Ok(_) => panic!("accepted {mac}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_mac_tables_name_the_field() {
    assert!(rejects(r#"mac = { kind = "tdma" }"#)
        .starts_with("link[0].mac.kind: unknown MAC kind \"tdma\""));
    assert_eq!(
        rejects("mac = { min_be = 3 }"),
        "link[0].mac.kind: missing field"
    );
    assert_eq!(
        rejects(r#"mac = { kind = "csma-ca", max_be = 2 }"#),
        "link[0].mac.max_be: must be between 3 and 8, got 2"
    );
    assert_eq!(
        rejects(r#"mac = { kind = "aloha", min_be = 3 }"#),
        "link[0].mac.min_be: not allowed for aloha MACs"
    );
    // A MAC belongs to shared media only.
    let p2p = r#"
name = "p"
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
delay = "1ms"
mac = { kind = "csma-ca" }
"#;
    assert_eq!(
        Scenario::from_toml_str(p2p).unwrap_err().to_string(),
        "link[0].mac: not allowed for point-to-point links"
    );
}
