//! A `tcp-bulk` client with `reconnect`: while its server is unreachable
//! (a fading link out for whole periods) its connections fail, by SYN
//! retries exhausted and by data retransmissions exhausted; after each
//! failure it opens a new one after the delay and, once the link is back,
//! delivers intact bytes on every connection.

use rtolab_sim::app::{AppStats, TcpBulkStats, TcpSinkStats};
use rtolab_sim::{run_scenario, RunOptions, RunReport, Scenario};

/// A uIP client on `a` sending to a sink on `b` over a link that is out
/// from 0 to 30 s and from 60 to 120 s. The client gives a connection up
/// after 2 SYN or 3 data retransmissions (uIP's 3 s RTO, doubled), so each
/// outage costs it connections. `extra` goes into the client's table.
fn scenario(extra: &str) -> String {
    format!(
        r#"
name = "reconnect"
duration = "200s"

[[host]]
name = "a"

[[host]]
name = "b"

[[link]]
name = "ab"
kind = "fading"
ends = [
  {{ host = "a", address = "10.0.0.1/24" }},
  {{ host = "b", address = "10.0.0.2/24" }},
]
rate = "250kbps"
delay = "20ms"
outages = [ {{ start = "0s", duration = "30s" }}, {{ start = "60s", duration = "60s" }} ]

[[app]]
kind = "tcp-sink"
name = "sink"
host = "b"
port = 80

[[app]]
kind = "tcp-bulk"
name = "client"
host = "a"
peer = "10.0.0.2:80"
profile = "uip"
{extra}
[app.tcp]
mss = 48
max_retransmissions = 3
max_syn_retransmissions = 2
"#
    )
}

fn run(text: &str, seed: u64) -> RunReport {
    let scenario = Scenario::from_toml_str(text).unwrap();
    let opts = RunOptions {
        seed: Some(seed),
        ..RunOptions::default()
    };
    run_scenario(&scenario, &opts).unwrap()
}

fn stats(report: &RunReport) -> (TcpBulkStats, TcpSinkStats) {
    let find = |name: &str| &report.apps.iter().find(|a| a.name == name).unwrap().stats;
    let AppStats::TcpBulk(client) = find("client") else {
        panic!("not a tcp-bulk client")
    };
    let AppStats::TcpSink(sink) = find("sink") else {
        panic!("not a sink")
    };
    (*client, *sink)
}

#[test]
fn a_client_that_reconnects_delivers_intact_bytes_after_its_connections_failed() {
    for seed in [1, 2] {
        let report = run(&scenario(r#"reconnect = "5s""#), seed);
        let (client, sink) = stats(&report);
        let what = format!("seed {seed}: {client:?} {sink:?}");
        let connections = client.connections_opened.expect("reported with reconnect");
        let failures = client.connections_failed.expect("reported with reconnect");
        // At least: the first SYNs into the first outage, the established
        // connection in the second, and a SYN sent into its remainder.
        assert!(failures >= 3, "{what}");
        // Every failure but none after the last connection.
        assert_eq!(connections, failures + 1, "{what}");
        assert!(client.failure.is_some(), "{what}");
        // The sink saw the connections that got through: one before the
        // second outage, one after.
        assert!(sink.connections_accepted >= 2, "{what}");
        assert_eq!(sink.bytes_corrupt, 0, "{what}");
        assert!(client.bytes_acked > 0, "{what}");
        assert!(sink.bytes_received >= client.bytes_acked, "{what}");
        // The last connection delivers after the second outage.
        let last = report
            .flows
            .iter()
            .rfind(|f| f.app.as_deref() == Some("client"))
            .unwrap();
        assert!(last.bytes_acked > 0, "{what}: {last:?}");
    }
}

#[test]
fn without_reconnect_the_client_gives_up_and_reports_no_counts() {
    let report = run(&scenario(""), 1);
    let (client, sink) = stats(&report);
    assert_eq!(client.connections_opened, None);
    assert_eq!(client.connections_failed, None);
    assert_eq!(client.failure, Some("timed_out"));
    assert_eq!(sink.connections_accepted, 0);
    let json = serde_json::to_value(client).unwrap();
    assert!(json.get("connections_opened").is_none(), "{json}");
    assert!(json.get("connections_failed").is_none(), "{json}");

    let with = serde_json::to_value(stats(&run(&scenario(r#"reconnect = "5s""#), 1)).0).unwrap();
    assert!(with.get("connections_opened").is_some(), "{with}");
}

#[test]
fn reconnect_must_be_at_least_a_millisecond() {
    for bad in [r#"reconnect = "0s""#, r#"reconnect = "500us""#] {
        let err = Scenario::from_toml_str(&scenario(bad)).unwrap_err();
        assert_eq!(err.path, "app[1].reconnect", "{err}");
        assert!(err.message.contains("at least 1ms"), "{err}");
    }
    assert!(Scenario::from_toml_str(&scenario(r#"reconnect = "1ms""#)).is_ok());
}
