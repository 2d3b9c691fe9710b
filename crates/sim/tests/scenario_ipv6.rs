//! IPv6 in scenario files: link ends with `ipv6` addresses, IPv6 routes,
//! TCP apps whose peer is an IPv6 socket address, and the errors that name
//! the field when one of these is wrong.

use std::fs;
use std::path::{Path, PathBuf};

use rtolab_sim::app::AppStats;
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario, ScenarioError};

/// h1 -- r -- h2 over point-to-point links with IPv6 addresses only: the
/// hosts route through r by default, h1 sends 200 kB to a sink on h2.
const V6_ONLY: &str = r#"
name = "ipv6-only"
duration = "5s"

[[host]]
name = "h1"

[[host]]
name = "r"

[[host]]
name = "h2"

[[link]]
name = "left"
kind = "point-to-point"
ends = [
  { host = "h1", ipv6 = "fd00:1::1/64" },
  { host = "r", ipv6 = "fd00:1::2/64" },
]
rate = "10Mbps"
delay = "5ms"

[[link]]
name = "right"
kind = "point-to-point"
ends = [
  { host = "r", ipv6 = "fd00:2::1/64" },
  { host = "h2", ipv6 = "fd00:2::2/64" },
]
rate = "10Mbps"
delay = "5ms"

[[route]]
host = "h1"
destination = "default"
via = "fd00:1::2"

[[route]]
host = "h2"
destination = "fd00:1::/64"
via = "fd00:2::1"

[[capture]]
host = "h1"
interface = "fd00:1::1"
file = "h1.pcap"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "h2"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "h1"
peer = "[fd00:2::2]:5001"
bytes = 200_000
start = "10ms"
"#;

/// Where one test's outputs go.
fn out_dir_path(test: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("scenario_ipv6")
        .join(test)
}

/// A fresh, empty directory for one test's outputs.
fn out_dir(test: &str) -> PathBuf {
    let dir = out_dir_path(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(text: &str, test: &str) -> RunReport {
    let scenario = Scenario::from_toml_str(text).unwrap();
    let opts = RunOptions {
        out_dir: Some(out_dir(test)),
        ..RunOptions::default()
    };
    run_scenario(&scenario, &opts).unwrap()
}

fn app<'a>(report: &'a RunReport, name: &str) -> &'a AppStats {
    &report.apps.iter().find(|a| a.name == name).unwrap().stats
}

#[test]
fn tcp_crosses_a_router_over_ipv6_only() {
    let report = run(V6_ONLY, "v6-only");
    let AppStats::TcpBulk(bulk) = app(&report, "bulk") else {
        panic!("not a tcp-bulk");
    };
    assert!(bulk.completed, "{bulk:?}");
    assert_eq!(bulk.bytes_acked, 200_000);
    let AppStats::TcpSink(sink) = app(&report, "sink") else {
        panic!("not a tcp-sink");
    };
    assert_eq!(sink.bytes_received, 200_000);
    assert_eq!(sink.bytes_corrupt, 0);
    // Both ends of the one connection, as the report names them.
    let ends: Vec<(&str, &str, &str)> = report
        .flows
        .iter()
        .map(|f| (f.host.as_str(), f.local.as_str(), f.remote.as_str()))
        .collect();
    assert_eq!(ends.len(), 2, "{ends:?}");
    let (_, client, server) = ends.iter().find(|(h, _, _)| *h == "h1").unwrap();
    assert!(client.starts_with("[fd00:1::1]:"), "{client}");
    assert_eq!(*server, "[fd00:2::2]:5001");
    let (_, local, remote) = ends.iter().find(|(h, _, _)| *h == "h2").unwrap();
    assert_eq!((*local, *remote), ("[fd00:2::2]:5001", *client));
    // The router forwarded the data; the capture named by its IPv6
    // interface address holds it.
    let router = report.nodes.iter().find(|n| n.name == "r").unwrap();
    assert!(router.stats.forwarded > 100, "{:?}", router.stats);
    let pcap = fs::metadata(out_dir_path("v6-only").join("h1.pcap")).unwrap();
    assert!(pcap.len() > 200_000, "{} bytes captured", pcap.len());
}

/// The same hosts with both families on every end: TCP over IPv6 and a
/// CBR stream over IPv4 share the links.
fn dual_stack() -> String {
    V6_ONLY
        .replace(
            r#"{ host = "h1", ipv6 = "fd00:1::1/64" }"#,
            r#"{ host = "h1", address = "10.0.1.1/24", ipv6 = "fd00:1::1/64" }"#,
        )
        .replace(
            r#"{ host = "r", ipv6 = "fd00:1::2/64" }"#,
            r#"{ host = "r", address = "10.0.1.2/24", ipv6 = "fd00:1::2/64" }"#,
        )
        .replace(
            r#"{ host = "r", ipv6 = "fd00:2::1/64" }"#,
            r#"{ host = "r", address = "10.0.2.1/24", ipv6 = "fd00:2::1/64" }"#,
        )
        .replace(
            r#"{ host = "h2", ipv6 = "fd00:2::2/64" }"#,
            r#"{ host = "h2", address = "10.0.2.2/24", ipv6 = "fd00:2::2/64" }"#,
        )
        + r#"
[[route]]
host = "h1"
destination = "default"
via = "10.0.1.2"

[[app]]
kind = "sink"
name = "udp-sink"
host = "h2"
port = 9000

[[app]]
kind = "cbr"
name = "cbr"
host = "h1"
destination = "10.0.2.2:9000"
size = 500
rate = "200kbps"
start = "10ms"
stop = "1s"
"#
}

#[test]
fn dual_stack_ends_carry_both_families() {
    let report = run(&dual_stack(), "dual-stack");
    let AppStats::TcpSink(sink) = app(&report, "sink") else {
        panic!("not a tcp-sink");
    };
    assert_eq!(sink.bytes_received, 200_000);
    let AppStats::Sink(udp) = app(&report, "udp-sink") else {
        panic!("not a sink");
    };
    let AppStats::Cbr(cbr) = app(&report, "cbr") else {
        panic!("not a cbr");
    };
    assert!(cbr.sent_packets > 0);
    assert_eq!(udp.received_packets, cbr.sent_packets);
    let h1 = report.nodes.iter().find(|n| n.name == "h1").unwrap();
    assert_eq!(h1.interfaces[0].address.to_string(), "10.0.1.1/24");
}

#[track_caller]
fn rejects(text: &str) -> ScenarioError {
    match Scenario::from_toml_str(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            assert_eq!(e.to_string(), format!("{}: {}", e.path, e.message));
            e
        }
    }
}

#[track_caller]
fn broken(from: &str, to: &str) -> ScenarioError {
    assert!(V6_ONLY.contains(from), "{from:?} not in the template");
    rejects(&V6_ONLY.replacen(from, to, 1))
}

#[test]
fn the_template_is_valid() {
    let s = Scenario::from_toml_str(V6_ONLY).unwrap();
    assert_eq!(s.routes.len(), 2);
    Scenario::from_toml_str(&dual_stack()).unwrap();
}

#[test]
fn an_ipv6_via_must_be_a_neighbour_on_a_subnet_of_the_host() {
    let e = broken(r#"via = "fd00:1::2""#, r#"via = "fd00:9::2""#);
    assert_eq!(
        e.to_string(),
        "route[0].via: fd00:9::2 is not on a subnet of host \"h1\""
    );
    let e = broken(r#"via = "fd00:1::2""#, r#"via = "fd00:1::7""#);
    assert_eq!(e.path, "route[0].via");
    assert!(e.message.contains("no neighbour"), "{e}");
    let e = broken(r#"via = "fd00:1::2""#, r#"via = "fd00:1::1""#);
    assert_eq!(
        e.to_string(),
        "route[0].via: fd00:1::1 is an address of host \"h1\" itself"
    );
    // "default" with an IPv4 via on an IPv6-only host.
    let e = broken(r#"via = "fd00:1::2""#, r#"via = "10.0.1.2""#);
    assert_eq!(e.path, "route[0].via");
}

#[test]
fn a_route_keeps_to_one_family() {
    let e = broken(
        r#"destination = "fd00:1::/64""#,
        r#"destination = "10.0.1.0/24""#,
    );
    assert_eq!(e.path, "route[1].destination");
    assert!(e.message.contains("one family"), "{e}");
    let e = broken(
        r#"destination = "fd00:1::/64""#,
        r#"destination = "fd00:1::/129""#,
    );
    assert_eq!(e.path, "route[1].destination");
}

#[test]
fn ends_share_their_ipv6_prefix() {
    let e = broken(
        r#"{ host = "r", ipv6 = "fd00:1::2/64" }"#,
        r#"{ host = "r", ipv6 = "fd00:7::2/64" }"#,
    );
    assert_eq!(
        e.to_string(),
        "link[0].ends[1].ipv6: fd00:7::2/64 is not on the same subnet as the other end (fd00:1::1/64)"
    );
    let e = broken(
        r#"{ host = "r", ipv6 = "fd00:1::2/64" }"#,
        r#"{ host = "r", ipv6 = "fd00:1::1/64" }"#,
    );
    assert_eq!(e.path, "link[0].ends[1].ipv6");
    assert!(e.message.contains("already assigned"), "{e}");
    let e = broken(
        r#"{ host = "r", ipv6 = "fd00:1::2/64" }"#,
        r#"{ host = "r" }"#,
    );
    assert_eq!(e.path, "link[0].ends[1].address");
    let e = broken(
        r#"{ host = "r", ipv6 = "fd00:1::2/64" }"#,
        r#"{ host = "r", address = "10.0.1.2/24" }"#,
    );
    assert_eq!(e.path, "link[0].ends[1]");
    assert!(e.message.contains("no address family in common"), "{e}");
}

#[test]
fn peers_and_captures_must_name_addresses_of_the_scenario() {
    let e = broken(
        r#"peer = "[fd00:2::2]:5001""#,
        r#"peer = "[fd00:2::9]:5001""#,
    );
    assert_eq!(
        e.to_string(),
        "app[1].peer: no interface has address fd00:2::9"
    );
    let e = broken(
        r#"peer = "[fd00:2::2]:5001""#,
        r#"peer = "[fd00:2::2]:5002""#,
    );
    assert_eq!(
        e.to_string(),
        "app[1].peer: no tcp-sink app listens on port 5002 of host \"h2\""
    );
    let e = broken(r#"interface = "fd00:1::1""#, r#"interface = "fd00:2::2""#);
    assert_eq!(
        e.to_string(),
        "capture[0].interface: host \"h1\" has no interface with address fd00:2::2"
    );
}

#[test]
fn cbr_sends_over_ipv4_only() {
    let text = format!(
        "{V6_ONLY}\n[[app]]\nkind = \"cbr\"\nhost = \"h1\"\n\
         destination = \"[fd00:2::2]:9000\"\nsize = 100\nrate = \"1Mbps\"\n"
    );
    let e = rejects(&text);
    assert_eq!(
        e.to_string(),
        "app[2].destination: [fd00:2::2]:9000 is IPv6: cbr apps send UDP over IPv4 only"
    );
}
