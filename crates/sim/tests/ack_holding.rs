//! A fixed host sends to a mobile through a base station whose radio link
//! fades out for 10 s: what the fixed host's TCP sees with no help, with
//! the ACK-holding base station, and with Freeze-TCP at the mobile; and
//! the errors of bad fading-link and ACK-holding tables.

use rtolab_sim::run::{build_simulator, report};
use rtolab_sim::trace::{MemorySink, TraceEvent};
use rtolab_sim::{RunReport, Scenario, SimTime};

/// fixed -- bs -- mobile; Reno with timestamps; 40 s of bulk transfer.
fn scenario(outages: &str, extra: &str, mobile_tcp: &str) -> String {
    format!(
        r#"
name = "fade"
duration = "40s"

[[host]]
name = "fixed"
profile = "rfc"
[host.tcp]
cc = {{ policy = "reno" }}
timestamps = true
send_buffer = 262144

[[host]]
name = "bs"

[[host]]
name = "mobile"
profile = "rfc"
[host.tcp]
timestamps = true
{mobile_tcp}

[[link]]
name = "wired"
kind = "point-to-point"
ends = [ {{ host = "fixed", address = "10.0.0.1/24" }}, {{ host = "bs", address = "10.0.0.2/24" }} ]
rate = "10Mbps"
delay = "40ms"

[[link]]
name = "radio"
kind = "fading"
ends = [ {{ host = "bs", address = "10.0.1.1/24" }}, {{ host = "mobile", address = "10.0.1.2/24" }} ]
rate = "2Mbps"
delay = "10ms"
{outages}

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

{extra}
"#
    )
}

const ONE_OUTAGE: &str = r#"outages = [ { start = "10s", duration = "10s" } ]"#;
const TWO_OUTAGES: &str =
    r#"outages = [ { start = "8s", duration = "10s" }, { start = "24s", duration = "10s" } ]"#;
const HOLDING: &str =
    "[[middlebox]]\nkind = \"ack-holding\"\nhost = \"bs\"\nmobile = \"10.0.1.2\"\n";

fn run(text: &str) -> (RunReport, Vec<(SimTime, TraceEvent)>) {
    let scenario =
        Scenario::from_toml_str(text).unwrap_or_else(|e| panic!("scenario rejected: {e}"));
    let mut sim = build_simulator(&scenario, scenario.seed).expect("builds");
    let sink = MemorySink::new();
    sim.set_trace_sink(Box::new(sink.clone()));
    sim.run_until(SimTime::ZERO + scenario.duration)
        .expect("runs");
    (report(&sim, &scenario.name, Vec::new()), sink.events())
}

/// The fixed host's flow: (timeouts, fast retransmits, duplicate ACKs
/// received, bytes acknowledged).
fn fixed_host(report: &RunReport) -> (u64, u64, u64, u64) {
    let f = report
        .flows
        .iter()
        .find(|f| f.app.as_deref() == Some("bulk"))
        .expect("bulk flow");
    (
        f.counts.retx_timeout,
        f.counts.retx_fast,
        f.counts.dup_acks_received,
        f.bytes_acked,
    )
}

fn holding_stat(report: &RunReport, field: &str) -> u64 {
    report.middleboxes[0].stats[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {field}"))
}

#[test]
fn without_help_the_fixed_host_times_out_during_the_outage() {
    let (r, events) = run(&scenario(ONE_OUTAGE, "", ""));
    let (timeouts, ..) = fixed_host(&r);
    assert!(timeouts >= 2, "{timeouts} timeouts");
    // Both ends heard all three indications.
    let indications: Vec<&str> = events
        .iter()
        .filter_map(|(_, e)| match e {
            TraceEvent::LinkIndication { indication, .. } => Some(*indication),
            _ => None,
        })
        .collect();
    assert_eq!(
        indications,
        ["going_down", "going_down", "gone", "gone", "up", "up"]
    );
}

#[test]
fn a_correctly_predicted_outage_costs_the_fixed_host_no_timeout() {
    for outages in [ONE_OUTAGE, TWO_OUTAGES] {
        let (base, _) = run(&scenario(outages, "", ""));
        let (held, _) = run(&scenario(outages, HOLDING, ""));
        let (timeouts, fast, dups, acked) = fixed_host(&held);
        assert_eq!((timeouts, fast), (0, 0), "{outages}");
        assert!(dups <= 2, "{dups} duplicate ACKs");
        assert!(acked > fixed_host(&base).3, "{outages}");
        let outages_seen = held.middleboxes[0].stats["schedules"]
            .as_array()
            .expect("schedules")
            .len();
        assert_eq!(outages_seen, if outages == ONE_OUTAGE { 1 } else { 2 });
        assert!(holding_stat(&held, "acks_held") > 0);
        assert_eq!(holding_stat(&held, "cache_overflows"), 0);
        // Every byte the mobile got is intact.
        let sink = held.apps.iter().find(|a| a.name == "sink").expect("sink");
        let stats = serde_json::to_value(&sink.stats).expect("serialises");
        assert_eq!(stats["bytes_corrupt"], 0);
    }
}

#[test]
fn the_step_forward_search_is_available_and_reported() {
    let extra = format!("{HOLDING}search = \"step-forward\"\n");
    let (r, _) = run(&scenario(ONE_OUTAGE, &extra, ""));
    let record = &r.middleboxes[0].stats["schedules"][0];
    assert_eq!(record["n"], record["n_step_forward"]);
    assert!(record["n_global_minimum"].is_u64());
    assert_eq!(fixed_host(&r).0, 0);
}

#[test]
fn freeze_tcp_at_the_mobile_stops_the_sender_without_timeouts() {
    let (r, events) = run(&scenario(ONE_OUTAGE, "", "freeze = true"));
    let (timeouts, ..) = fixed_host(&r);
    assert_eq!(timeouts, 0);
    let probes = r
        .flows
        .iter()
        .find(|f| f.app.as_deref() == Some("bulk"))
        .expect("bulk")
        .counts
        .window_probes;
    assert!(probes > 0, "the sender probed the zero window");
    let freezes = events
        .iter()
        .filter(|(_, e)| serde_json::to_value(e).expect("serialises")["reason"] == "freeze")
        .count();
    assert_eq!(freezes, 1);
}

fn rejects(outages: &str, extra: &str) -> String {
    match Scenario::from_toml_str(&scenario(outages, extra, "")) {
        Ok(_) => panic!("accepted: {outages} {extra}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_tables_name_the_field() {
    assert_eq!(
        rejects("", ""),
        "link[1].outages: required for fading links (or fading = { mean_up, mean_down }, or signal = { .. })"
    );
    assert_eq!(
        rejects(&format!("{ONE_OUTAGE}\nsignal = {{}}"), ""),
        "link[1].signal: give one of outages, fading and signal"
    );
    assert_eq!(
        rejects(&format!("{ONE_OUTAGE}\npredictor = {{}}"), ""),
        "link[1].predictor: needs signal = { .. }: it reads the received power"
    );
    assert!(rejects("signal = {}\npredictor = {}\nwarning = \"1s\"", "")
        .starts_with("link[1].predictor: announces outages itself"));
    assert!(rejects("signal = { speed = 50.0 }", "")
        .starts_with("link[1].signal.speed: gives a Doppler frequency of 334 Hz"));
    assert_eq!(
        rejects("signal = { path = [500.0, -1.0] }", ""),
        "link[1].signal.path[1]: must be a positive distance in metres, got -1"
    );
    assert_eq!(
        rejects("signal = { decorrelation_distance = 0.0 }", ""),
        "link[1].signal.decorrelation_distance: must be positive, got 0"
    );
    assert_eq!(
        rejects("signal = { average = \"5ms\" }", ""),
        "link[1].signal.average: must be at least 10ms (the channel's step)"
    );
    assert_eq!(
        rejects("signal = {}\npredictor = { sample = \"15ms\" }", ""),
        "link[1].predictor.sample: must be a positive multiple of 10ms (the channel's step)"
    );
    assert_eq!(
        rejects("signal = {}\npredictor = { window = \"200ms\" }", ""),
        "link[1].predictor.window: must hold at least three samples for a fit"
    );
    assert_eq!(
        rejects(
            r#"outages = [ { start = "5s", duration = "10s" }, { start = "8s", duration = "1s" } ]"#,
            ""
        ),
        "link[1].outages[1].start: must not be before the end of the previous outage"
    );
    assert_eq!(
        rejects(r#"outages = [ { start = "5s", duration = "0s" } ]"#, ""),
        "link[1].outages[0].duration: must be positive"
    );
    assert_eq!(
        rejects(r#"fading = { mean_up = "10s", mean_down = "0ms" }"#, ""),
        "link[1].fading.mean_down: must be at least 1ms"
    );
    assert!(rejects(&format!("{ONE_OUTAGE}\nduration_error = -1.0"), "")
        .starts_with("link[1].duration_error: must be a number above -1"));
    assert_eq!(
        rejects(
            ONE_OUTAGE,
            "[[middlebox]]\nkind = \"ack-holding\"\nhost = \"bs\"\n"
        ),
        "middlebox[0].mobile: required for ack-holding middleboxes"
    );
    assert!(rejects(ONE_OUTAGE, &format!("{HOLDING}safety = 0.7\n"))
        .starts_with("middlebox[0].safety: must be at least 0 and below 0.5"));
    assert!(
        rejects(ONE_OUTAGE, &format!("{HOLDING}search = \"best\"\n"))
            .starts_with("middlebox[0].search:")
    );
    assert!(
        rejects(ONE_OUTAGE, &format!("{HOLDING}fixed_host = \"bsd\"\n")).contains("fixed_host")
    );
    assert!(rejects(ONE_OUTAGE, &format!("{HOLDING}duplicates = 3\n"))
        .starts_with("middlebox[0].duplicates: must be 0, 1 or 2"));
    assert!(
        rejects(ONE_OUTAGE, &format!("{HOLDING}min_rto = \"soon\"\n"))
            .starts_with("middlebox[0].min_rto: a duration like")
    );
    assert!(
        rejects(ONE_OUTAGE, &format!("{HOLDING}samples = \"acks\"\n"))
            .starts_with("middlebox[0].samples:")
    );
}

#[test]
fn the_base_station_estimates_the_fixed_host_s_round_trip_from_timestamps() {
    let (r, events) = run(&scenario(ONE_OUTAGE, HOLDING, ""));
    let warned = events
        .iter()
        .find(|(_, e)| matches!(e, TraceEvent::LinkIndication { .. }))
        .map(|(t, _)| *t)
        .expect("a warning");
    // The fixed host's own smoothed RTT when the warning came.
    let srtt_ns = events
        .iter()
        .filter(|(t, _)| *t <= warned)
        .rev()
        .find_map(|(_, e)| {
            let v = serde_json::to_value(e).expect("serialises");
            (v["event"] == "tcp" && v["node"] == 0 && v["tcp_event"] == "rto_armed")
                .then(|| v["srtt"].as_u64())
                .flatten()
        })
        .expect("the fixed host armed its timer with an estimate");
    let record = &r.middleboxes[0].stats["schedules"][0];
    let estimate = record["mean_s"].as_f64().expect("mean");
    let own = srtt_ns as f64 / 1e9;
    assert!(
        (estimate - own).abs() < 0.1 * own,
        "base station {estimate} s, fixed host {own} s"
    );
    assert!(holding_stat(&r, "rtt_samples") > 100);
}

fn schedule_field(report: &RunReport, outage: usize, field: &str) -> serde_json::Value {
    report.middleboxes[0].stats["schedules"][outage][field].clone()
}

#[test]
fn duplicates_of_held_acks_triple_the_releases_and_never_make_a_third() {
    let extra = format!("{HOLDING}duplicates = 2\n");
    let (r, _) = run(&scenario(ONE_OUTAGE, &extra, ""));
    let acks = schedule_field(&r, 0, "acks").as_u64().expect("acks");
    assert_eq!(schedule_field(&r, 0, "releases"), 3 * acks);
    // Two duplicates follow each paced ACK (the last ones may be cut by
    // the link's return).
    let sent = holding_stat(&r, "duplicates_sent");
    assert!(
        sent >= 2 * (acks - 1) && sent <= 2 * acks,
        "{sent} of {acks}"
    );
    let (timeouts, fast, dups, _) = fixed_host(&r);
    assert_eq!((timeouts, fast), (0, 0));
    assert!(dups >= sent, "the fixed host counted {dups} duplicates");
}

#[test]
fn the_schedule_counts_only_acks_of_new_data_against_the_fixed_host_s_timer() {
    // 5 held ACKs for 10 s, each released with two duplicates, against the
    // rfc profile's 1 s floor. A duplicate does not restart the fixed
    // host's timer, and the schedule knows it: a duplicate leaves the
    // modelled RTO alone, and the fixed host does not time out.
    let outages = format!("{ONE_OUTAGE}\nwarning = \"50ms\"");
    let extra = format!("{HOLDING}min_rto = \"1s\"\nsearch = \"timeout-free\"\nduplicates = 2\n");
    let (r, _) = run(&scenario(&outages, &extra, ""));
    let releases = schedule_field(&r, 0, "releases")
        .as_u64()
        .expect("releases") as usize;
    let gaps: Vec<f64> = serde_json::from_value(schedule_field(&r, 0, "gaps_s")).expect("gaps");
    let rto: Vec<f64> = serde_json::from_value(schedule_field(&r, 0, "model_rto_s")).expect("rtos");
    assert_eq!((gaps.len(), rto.len()), (releases, releases));
    // Every third release is an ACK of new data; the modelled RTO moves
    // only there. The duplicates of each stretched ACK share the time
    // until the next ACK of new data evenly with it; the paced releases
    // after them are evenly spaced.
    let n = schedule_field(&r, 0, "n").as_u64().expect("n") as usize;
    assert!(n > 0);
    let stretched = 1 + 3 * (n - 1);
    for (i, gap) in gaps.iter().enumerate() {
        if i % 3 != 0 {
            assert_eq!(rto[i], rto[i - 1], "a duplicate moved the RTO at {i}");
            continue;
        }
        if i > 0 && i < stretched {
            assert!(gaps[i - 2..=i].iter().all(|g| (g - gap).abs() < 1e-9));
        }
    }
    let paced = &gaps[stretched..];
    assert!(
        paced.iter().all(|g| (g - paced[0]).abs() < 1e-9),
        "{paced:?}"
    );
    assert_eq!(fixed_host(&r).0, 0, "the fixed host timed out");
    assert!(holding_stat(&r, "duplicates_sent") > 0);
}

#[test]
fn a_floor_aware_schedule_spares_the_fixed_host_a_timeout_with_few_acks() {
    // A 50 ms warning leaves 5 ACKs for 10 s: the spec's model paces them
    // 2 s apart, past the fixed host's 1 s RTO; knowing the floor, the
    // timeout-free search stretches the first ones from it instead.
    let outages = format!("{ONE_OUTAGE}\nwarning = \"50ms\"");
    let (spec, _) = run(&scenario(&outages, HOLDING, ""));
    assert!(fixed_host(&spec).0 > 0);
    let extra = format!("{HOLDING}min_rto = \"1s\"\nsearch = \"timeout-free\"\n");
    let (floored, _) = run(&scenario(&outages, &extra, ""));
    assert_eq!(schedule_field(&floored, 0, "min_rto_s"), 1.0);
    assert!(schedule_field(&floored, 0, "n").as_u64() > Some(0));
    let gaps = schedule_field(&floored, 0, "gaps_s");
    assert_eq!(gaps[0], 0.9, "the floor, 10 % early");
    // No timeout while the link is out.
    assert_eq!(fixed_host(&floored).0, 0);
}

#[test]
fn the_floor_is_inferred_from_a_timeout_of_the_fixed_host() {
    // The first outage is warned too late to hold anything useful, so the
    // fixed host times out; the second schedule knows its floor.
    let outages = r#"outages = [ { start = "8s", duration = "10s" }, { start = "24s", duration = "10s" } ]
warning = "50ms""#;
    let extra = format!("{HOLDING}min_rto = \"infer\"\n");
    let (r, _) = run(&scenario(outages, &extra, ""));
    assert_eq!(schedule_field(&r, 0, "min_rto_s"), serde_json::Value::Null);
    let inferred = schedule_field(&r, 1, "min_rto_s")
        .as_f64()
        .expect("inferred");
    // The rfc profile's floor is 1 s; the estimate is the RTO armed at the
    // first timeout, at least that.
    assert!((1.0..1.2).contains(&inferred), "{inferred}");
}

#[test]
fn duplicates_do_not_shorten_the_inferred_floor() {
    // Each held ACK goes out with two duplicates 0.67 s apart, so the
    // fixed host (1 s floor) times out between new ACKs, 0.3 s after a
    // duplicate. Its timer runs from the last ACK of new data (RFC 6298
    // 5.3), and so must the estimate.
    let outages = r#"outages = [ { start = "8s", duration = "10s" }, { start = "24s", duration = "10s" } ]
warning = "50ms""#;
    let extra = format!("{HOLDING}min_rto = \"infer\"\nduplicates = 2\n");
    let (r, _) = run(&scenario(outages, &extra, ""));
    assert!(fixed_host(&r).0 > 0);
    let inferred = r.middleboxes[0].stats["inferred_min_rto_s"]
        .as_f64()
        .expect("inferred");
    assert!((1.0..1.2).contains(&inferred), "{inferred}");
}

#[test]
fn a_predicted_fade_is_held_through_like_an_announced_one() {
    // A mobile driving away past the cell's edge and back, no shadowing or
    // fast fading: one long, slow fade that the trend foresees.
    let signal = "signal = { path = [1000.0, 1600.0], speed = 20.0, shadowing_sigma_db = 0.0, fast_fading = false }\npredictor = {}";
    let (r, events) = run(&scenario(signal, HOLDING, ""));
    let radio = r.links.iter().find(|l| l.name == "radio").expect("radio");
    let stats = serde_json::to_value(&radio.stats).expect("serialises");
    let fades = stats["fades"].as_array().expect("fades");
    assert_eq!(fades.len(), 1, "{stats}");
    let (start, warned) = (
        fades[0]["start_ns"].as_u64().unwrap(),
        fades[0]["warned_ns"].as_u64().expect("warned"),
    );
    // Warned ahead: the 1 s horizon of the trend, plus the lag of the
    // link's one-second mean behind the power the trend reads.
    assert!(
        start > warned && start - warned <= 2_000_000_000,
        "{start} {warned}"
    );
    // The base station held ACKs from the warning and paced them.
    assert!(holding_stat(&r, "acks_held") > 0);
    assert_eq!(
        r.middleboxes[0].stats["schedules"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let first = events
        .iter()
        .find_map(|(t, e)| match e {
            TraceEvent::LinkIndication { indication, .. } => Some((*t, *indication)),
            _ => None,
        })
        .expect("an indication");
    assert_eq!(first, (SimTime::from_nanos(warned), "going_down"));
}
