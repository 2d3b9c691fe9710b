//! Policies selected by name in a scenario file reach the engine: the
//! `fixed` RTO policy of docs/extending.md, written exactly as the document
//! shows it, arms the timers it promises.

use rtolab_sim::run::build_simulator;
use rtolab_sim::trace::{MemorySink, TraceEvent};
use rtolab_sim::{Scenario, SimDuration, SimTime};
use rtolab_tcp::profile::RtoChoice;
use rtolab_tcp::rto::FixedRtoConfig;
use rtolab_tcp::trace::TraceEvent as EngineTrace;

/// The ```toml block that follows the `scenario-fragment` marker naming
/// this file in docs/extending.md.
fn doc_fragment() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/extending.md");
    let doc = std::fs::read_to_string(path).expect("docs/extending.md");
    let marker = "<!-- scenario-fragment: crates/sim/tests/policies.rs -->\n```toml\n";
    let start = doc.find(marker).expect("the fragment is marked") + marker.len();
    let len = doc[start..].find("```").expect("the block ends");
    doc[start..start + len].to_string()
}

/// Host `a` from the document sends to `b` over a link that loses
/// everything, so only the retransmission timer drives the connection.
fn scenario() -> Scenario {
    let text = format!(
        r#"
name = "fixed-rto"
duration = "10s"

{host_a}
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
delay = "10ms"
loss = 1.0

[[app]]
kind = "tcp-sink"
host = "b"
port = 5001

[[app]]
kind = "tcp-bulk"
host = "a"
peer = "10.0.0.2:5001"
bytes = 1000
"#,
        host_a = doc_fragment()
    );
    Scenario::from_toml_str(&text).unwrap()
}

#[test]
fn the_documented_fragment_selects_the_fixed_policy() {
    let s = scenario();
    let profile = s.hosts[0].tcp.as_ref().expect("host a has TCP settings");
    assert_eq!(profile.name, "rfc");
    assert_eq!(
        profile.rto,
        RtoChoice::Fixed(FixedRtoConfig {
            rto: SimDuration::from_millis(300),
            backoff: 2,
            max: SimDuration::from_millis(1500),
        })
    );
}

#[test]
fn syn_timeouts_follow_the_fixed_schedule() {
    let s = scenario();
    let mut sim = build_simulator(&s, 1).unwrap();
    let sink = MemorySink::new();
    sim.set_trace_sink(Box::new(sink.clone()));
    sim.run_until(SimTime::ZERO + s.duration).unwrap();
    let armed: Vec<(SimTime, u64, &str)> = sink
        .events()
        .into_iter()
        .filter_map(|(t, e)| match e {
            TraceEvent::Tcp {
                node: 0, detail, ..
            } => match detail.0 {
                EngineTrace::RtoArmed {
                    rto,
                    deadline,
                    policy,
                    ..
                } => {
                    assert_eq!(deadline, t + rto, "a fine-grained timer fires on time");
                    Some((t, rto.as_millis(), policy))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    let timeouts: Vec<u64> = armed.iter().map(|&(_, rto, _)| rto).collect();
    // 300 ms doubled per expiry, capped at 1.5 s; the rfc profile gives up
    // after 6 SYN retransmissions.
    assert_eq!(timeouts, [300, 600, 1200, 1500, 1500, 1500, 1500]);
    assert!(armed.iter().all(|&(_, _, policy)| policy == "fixed"));
}

#[test]
fn a_zero_backoff_is_rejected_naming_the_setting() {
    let text = r#"
name = "fixed-rto"
duration = "1s"
[[host]]
name = "a"
[host.tcp]
rto = { policy = "fixed", backoff = 0 }
"#;
    let err = Scenario::from_toml_str(text).unwrap_err();
    assert!(err.path.starts_with("host[0].tcp"), "{err}");
    assert!(err.message.contains("backoff must be at least 1"), "{err}");
}

#[test]
fn lims_timers_select_on_the_uip_profile_and_bad_gains_are_named() {
    let host = |rto: &str| {
        format!(
            r#"
name = "lim-rto"
duration = "1s"
[[host]]
name = "a"
profile = "uip"
[host.tcp]
rto = {rto}
"#
        )
    };
    let s = Scenario::from_toml_str(&host(r#"{ policy = "lim2024" }"#)).unwrap();
    let profile = s.hosts[0].tcp.as_ref().expect("host a has TCP settings");
    assert_eq!(profile.name, "uip");
    let RtoChoice::Lim2024(c) = profile.rto else {
        panic!("{:?}", profile.rto)
    };
    assert!(c.0.modified_dithering);
    assert_eq!(c.0.initial, SimDuration::from_secs(3));
    let s = Scenario::from_toml_str(&host(r#"{ policy = "lim2020", max = "60s" }"#)).unwrap();
    let rto = s.hosts[0].tcp.as_ref().expect("tcp").rto;
    assert!(matches!(rto, RtoChoice::Lim2020(c) if !c.0.modified_dithering));
    let err =
        Scenario::from_toml_str(&host(r#"{ policy = "lim2020", mdev_gain = 0 }"#)).unwrap_err();
    assert!(err.to_string().contains("rto.mdev_gain"), "{err}");
}
