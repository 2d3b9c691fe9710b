//! Nothing a scenario says can hang or flood a run: degenerate timers and
//! rates are rejected when the file is read, a run whose time stops
//! advancing fails naming the culprit, and budgets and the stop flag end a
//! run early with every output valid and marked incomplete.

// These tests measure how soon a run stops in wall time.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rtolab_sim::{run_scenario, RunError, RunOptions, Scenario, SimDuration, Stop, StopFlag};

/// A 1 Mbit/s link from `a` to `b`, a bulk sender on `a` with `a_tcp` as
/// its `[host.tcp]` table, and a sink on `b` with `b_tcp`.
fn bulk(a_tcp: &str, b_tcp: &str, duration: &str) -> String {
    format!(
        r#"
name = "limits"
duration = "{duration}"

[[host]]
name = "a"
[host.tcp]
{a_tcp}

[[host]]
name = "b"
[host.tcp]
{b_tcp}

[[link]]
name = "ab"
kind = "point-to-point"
ends = [ {{ host = "a", address = "10.0.0.1/24" }}, {{ host = "b", address = "10.0.0.2/24" }} ]
rate = "1Mbps"
delay = "10ms"

[[capture]]
host = "a"
link = "ab"
file = "a.pcap"

[[app]]
kind = "tcp-sink"
host = "b"
port = 5001

[[app]]
kind = "tcp-bulk"
host = "a"
peer = "10.0.0.2:5001"
"#
    )
}

fn rejected(text: &str) -> String {
    match Scenario::from_toml_str(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_names(err: &str, field: &str) {
    assert!(err.starts_with(&format!("{field}: ")), "{err}");
}

#[test]
fn keepalive_that_fires_at_once_is_rejected() {
    let err = rejected(&bulk(
        r#"keepalive = { idle = "0s", interval = "1s", probes = 3 }"#,
        "",
        "10s",
    ));
    assert_names(&err, "host[0].tcp.keepalive.idle");
    assert!(err.contains("must be at least 1.000s"), "{err}");
    let err = rejected(&bulk(
        r#"keepalive = { idle = "10s", interval = "1ns", probes = 3 }"#,
        "",
        "10s",
    ));
    assert_names(&err, "host[0].tcp.keepalive.interval");
}

#[test]
fn persist_timer_that_loops_is_rejected() {
    let err = rejected(&bulk(r#"persist_max = "0s""#, "recv_buffer = 0", "10s"));
    assert_names(&err, "host[0].tcp.persist_max");
    let err = rejected(&bulk(r#"persist_max = "1ns""#, "", "10s"));
    assert_names(&err, "host[0].tcp.persist_max");
    let err = rejected(&bulk(r#"persist_min = "0s""#, "", "10s"));
    assert_names(&err, "host[0].tcp.persist_min");
}

#[test]
fn retransmission_timers_below_the_floor_are_rejected() {
    for (table, field) in [
        (r#"rto = { min = "0s" }"#, "rto.min"),
        (r#"rto = { initial = "1us" }"#, "rto.initial"),
        (r#"rto = { min = "2s", max = "1s" }"#, "rto.max"),
        (
            r#"rto = { policy = "fixed", rto = "1s", max = "0s" }"#,
            "rto.max",
        ),
        (r#"rto = { policy = "uip", pulse = "1ns" }"#, "rto.pulse"),
        (
            r#"rto = { policy = "lwip", initial = "100ms", slow_interval = "500ms" }"#,
            "rto.initial",
        ),
        (r#"rto = { policy = "bridge", timer = "0s" }"#, "rto.timer"),
    ] {
        let err = rejected(&bulk(table, "", "10s"));
        assert_names(&err, &format!("host[0].tcp.{field}"));
    }
    // One-shot timers may be zero: they do not re-arm themselves.
    let ok = bulk(r#"time_wait = "0s""#, "", "10s");
    Scenario::from_toml_str(&ok).unwrap();
}

/// A CBR source on `a` over the 1 Mbit/s link.
fn cbr(rate: &str, size: u32) -> String {
    format!(
        r#"
name = "cbr"
duration = "60s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
name = "ab"
kind = "point-to-point"
ends = [ {{ host = "a", address = "10.0.0.1/24" }}, {{ host = "b", address = "10.0.0.2/24" }} ]
rate = "1Mbps"
delay = "10ms"
[[app]]
kind = "cbr"
host = "a"
destination = "10.0.0.2:9000"
size = {size}
rate = "{rate}"
[[app]]
kind = "cbr"
host = "a"
destination = "10.0.0.2:9000"
size = {size}
rate = "{rate}"
[[app]]
kind = "sink"
host = "b"
port = 9000
"#
    )
}

#[test]
fn cbr_faster_than_any_link_can_carry_is_rejected() {
    // The reproducer: 1e14 bit/s, one datagram per nanosecond.
    let err = rejected(&cbr("100000000Mbps", 1000));
    assert_names(&err, "app[0].rate");
    assert!(err.contains("more often than once every 100ns"), "{err}");
    // Each source alone is within 100 times the link, both together not.
    let err = rejected(&cbr("60Mbps", 1000));
    assert_names(&err, "app[1].rate");
    assert!(
        err.contains("more than 100 times its fastest link"),
        "{err}"
    );
    // Saturating the link is a legitimate experiment.
    Scenario::from_toml_str(&cbr("50Mbps", 1000)).unwrap();
}

fn out_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("limits")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// Walks a pcap file record by record; panics unless it ends exactly after
/// a whole record. Returns the number of packets.
fn pcap_packets(path: &Path) -> usize {
    let bytes = fs::read(path).unwrap();
    assert!(bytes.len() >= 24, "{}: no header", path.display());
    assert_eq!(
        &bytes[..4],
        &0xa1b2_3c4d_u32.to_le_bytes(),
        "nanosecond pcap"
    );
    let mut at = 24;
    let mut packets = 0;
    while at < bytes.len() {
        assert!(at + 16 <= bytes.len(), "truncated record header");
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + len;
        assert!(at <= bytes.len(), "truncated record");
        packets += 1;
    }
    packets
}

fn metrics(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("metrics.json")).unwrap()).unwrap()
}

/// A long bulk transfer, for runs that a limit has to stop.
fn long_run() -> Scenario {
    Scenario::from_toml_str(&bulk("", "", "1000s")).unwrap()
}

/// Runs `scenario` into a fresh directory with `opts`; expects a stop and
/// checks the outputs: a valid pcap and metrics marked incomplete.
fn stopped(test: &str, scenario: &Scenario, opts: RunOptions) -> (Stop, serde_json::Value) {
    let dir = out_dir(test);
    let opts = RunOptions {
        out_dir: Some(dir.clone()),
        write_traces: true,
        ..opts
    };
    let err = run_scenario(scenario, &opts).unwrap_err();
    let RunError::Stopped { stop, at } = err else {
        panic!("not stopped by a limit: {err}")
    };
    pcap_packets(&dir.join("a.pcap"));
    let m = metrics(&dir);
    assert_eq!(m["complete"], false);
    assert_eq!(m["stopped_by"], stop.as_str());
    assert_eq!(m["duration_ns"], at.as_nanos());
    assert!(
        at.as_nanos() < scenario.duration.as_nanos(),
        "stopped early"
    );
    let error = m["error"].as_str().unwrap();
    assert!(error.contains(&format!("at t={at}")), "{error}");
    (stop, m)
}

#[test]
fn time_that_stops_advancing_fails_naming_the_timer() {
    // Validation keeps this out of scenario files; built directly, the
    // keep-alive timer of the sender fires forever at one instant.
    let mut scenario = long_run();
    // The bulk sender's profile is a copy of its host's, made when the
    // file was read.
    let sender = scenario.apps.iter_mut().find(|a| a.host == "a").unwrap();
    sender.tcp.as_mut().unwrap().keepalive = Some(rtolab_tcp::profile::KeepAlive {
        idle: SimDuration::ZERO,
        interval: SimDuration::from_secs(1),
        probes: 3,
    });
    let opts = RunOptions {
        stall_events: Some(10_000),
        ..RunOptions::default()
    };
    let (stop, m) = stopped("stall", &scenario, opts);
    assert_eq!(
        stop,
        Stop::Stalled {
            what: "tcp timer of host \"a\"".into(),
            count: 10_000
        }
    );
    let error = m["error"].as_str().unwrap();
    assert!(
        error.starts_with("tcp timer of host \"a\" fired 10000 times at t=0.")
            && error.ends_with("without time advancing"),
        "{error}"
    );
}

#[test]
fn a_complete_run_says_nothing_about_completeness() {
    let dir = out_dir("complete");
    let scenario = Scenario::from_toml_str(&bulk("", "", "1s")).unwrap();
    let opts = RunOptions {
        out_dir: Some(dir.clone()),
        max_events: Some(1_000_000),
        ..RunOptions::default()
    };
    run_scenario(&scenario, &opts).unwrap();
    let m = metrics(&dir);
    for key in ["complete", "stopped_by", "error"] {
        assert!(m.get(key).is_none(), "{key}");
    }
}

#[test]
fn max_events_stops_after_exactly_that_many_events() {
    let opts = RunOptions {
        max_events: Some(5_000),
        ..RunOptions::default()
    };
    let (stop, m) = stopped("max-events", &long_run(), opts);
    assert_eq!(stop, Stop::MaxEvents(5_000));
    assert_eq!(m["events_processed"], 5_000);
}

#[test]
fn max_output_stops_once_the_files_hold_that_much() {
    let opts = RunOptions {
        max_output: Some(4 << 20),
        ..RunOptions::default()
    };
    let dir = out_dir("max-output");
    let (stop, _) = stopped("max-output", &long_run(), opts);
    assert_eq!(stop, Stop::MaxOutput(4 << 20));
    let written: u64 = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "jsonl"))
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    // Past the cap by at most the buffers of the writers.
    assert!((4 << 20..7 << 20).contains(&written), "{written}");
}

#[test]
fn max_wall_stops_a_long_run() {
    let opts = RunOptions {
        max_wall: Some(Duration::from_millis(200)),
        ..RunOptions::default()
    };
    let started = Instant::now();
    let (stop, _) = stopped("max-wall", &long_run(), opts);
    assert_eq!(stop, Stop::MaxWall(Duration::from_millis(200)));
    // Generous: the point is that it stopped long before 1000 s of
    // simulated bulk transfer would have taken.
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn raising_the_stop_flag_from_another_thread_stops_the_run_soon() {
    let flag = StopFlag::new();
    let raiser = flag.clone();
    let raised = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        raiser.raise();
        Instant::now()
    });
    let opts = RunOptions {
        stop: Some(flag),
        ..RunOptions::default()
    };
    let (stop, _) = stopped("interrupted", &long_run(), opts);
    let latency = raised.join().unwrap().elapsed();
    assert_eq!(stop, Stop::Interrupted);
    // 100 ms is the promise; the slack is for a loaded machine running an
    // unoptimised build.
    assert!(latency < Duration::from_secs(2), "{latency:?}");
}

/// An app whose start never returns in useful time: what a loop no limit
/// reaches looks like from outside.
struct Stuck;

impl rtolab_sim::app::App<rtolab_sim::app::AppContext<'_>> for Stuck {
    fn on_start(&mut self, _: &mut rtolab_sim::app::AppContext<'_>) {
        std::thread::sleep(Duration::from_secs(30));
    }
    fn on_packet(&mut self, _: &mut rtolab_sim::app::AppContext<'_>, _: &[u8]) {}
    fn on_timer(&mut self, _: &mut rtolab_sim::app::AppContext<'_>, _: u64) {}
    fn stats(&self) -> rtolab_sim::app::AppStats {
        rtolab_sim::app::AppStats::Custom(serde_json::Value::Null)
    }
}

/// In debug builds (every `cargo test`), a handler that does not return
/// ends the test binary naming the event, instead of hanging it: run in a
/// child process of this test binary with the watchdog shortened to 300 ms.
#[cfg(debug_assertions)]
#[test]
fn the_debug_watchdog_names_an_event_that_never_returns() {
    const CHILD: &str = "RTOLAB_WATCHDOG_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let mut sim = rtolab_sim::Simulator::new(1);
        let a = sim.add_node("a");
        sim.add_app(a, "stuck", rtolab_sim::app::AnyApp::Custom(Box::new(Stuck)));
        let _ = sim.run_until(rtolab_sim::SimTime::from_secs(1));
        return;
    }
    let started = Instant::now();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_debug_watchdog_names_an_event_that_never_returns",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("RTOLAB_WATCHDOG_AFTER_MS", "300")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child was not stopped: {stderr}");
    assert!(
        stderr.contains("watchdog: AppStart { app: 0 } has been handled for 0.3s"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}
