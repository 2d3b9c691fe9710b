//! The scenario parser on arbitrary text, and a short run of whatever
//! validates.
//!
//! Two input forms:
//!
//! * plain text: parsed and validated as a scenario file;
//! * a first byte of 0xFF (never the start of UTF-8 text), then edits:
//!   one of the repository's scenarios, with values replaced, keys added or
//!   removed and array entries duplicated as the rest of the input says.
//!   Most random text fails in the TOML parser; edits of a valid scenario
//!   reach the validation of each field and the simulator.
//!
//! Parsing and validation must return a scenario or an error, never panic.
//! A scenario that validates is run for at most `MAX_RUN` of simulated time
//! and `MAX_EVENTS` events, and must not panic either; the simulator's own
//! budget and its guard against time standing still bound the run, so
//! settings that would freeze time are left to validation to reject.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use rtolab_sim::limits::RunLimits;
use rtolab_sim::run::build_simulator;
use rtolab_sim::{Scenario, SimDuration, SimError, SimTime};
use toml::Value;

/// Simulated time a validated scenario runs for, at most.
const MAX_RUN: SimDuration = SimDuration::from_secs(2);
/// Events a run may handle, enforced by the simulator itself.
const MAX_EVENTS: u64 = 200_000;
/// Scenarios bigger than this are validated but not run: a run's cost grows
/// with them, and small ones reach the same code.
const MAX_ITEMS: usize = 64;

/// Starting points of the structured form.
const BASES: &[&str] = &[
    include_str!("../../scenarios/default.toml"),
    include_str!("../../scenarios/p2p-cbr.toml"),
    include_str!("../../scenarios/p2p-bulk.toml"),
    include_str!("../../scenarios/bridge.toml"),
    include_str!("../../scenarios/bridge-sensing.toml"),
    include_str!("../../scenarios/exchange.toml"),
    include_str!("../../scenarios/hidden-terminal.toml"),
    include_str!("../../scenarios/three-hop.toml"),
];

fuzz_target!(|data: &[u8]| {
    let text = match data.split_first() {
        Some((0xFF, rest)) => match edited(rest) {
            Some(text) => text,
            None => return,
        },
        _ => match std::str::from_utf8(data) {
            Ok(text) => text.to_owned(),
            Err(_) => return,
        },
    };
    let Ok(scenario) = Scenario::from_toml_str(&text) else {
        return;
    };
    let _ = scenario.summary();
    if runnable(&scenario) {
        run(&scenario);
    }
});

fn run(scenario: &Scenario) {
    let Ok(mut sim) = build_simulator(scenario, scenario.seed) else {
        return;
    };
    sim.set_limits(RunLimits {
        max_events: Some(MAX_EVENTS),
        ..RunLimits::default()
    });
    let end = SimTime::ZERO + scenario.duration.min(MAX_RUN);
    match sim.run_until(end) {
        // Reaching the budget, or the guard against time standing still,
        // ends a run as designed.
        Ok(()) | Err(SimError::Stopped { .. }) => {}
        Err(e) => panic!("a run without outputs failed: {e}"),
    }
    let _ = rtolab_sim::run::report(&sim, &scenario.name, Vec::new());
}

/// Whether a short run of the scenario is worth its cost: big ones are only
/// validated.
fn runnable(scenario: &Scenario) -> bool {
    let items = scenario.hosts.len()
        + scenario.links.len()
        + scenario.routes.len()
        + scenario.apps.len()
        + scenario.middleboxes.len();
    items <= MAX_ITEMS
}

/// One of [`BASES`] with the edits the input describes, as TOML text.
fn edited(data: &[u8]) -> Option<String> {
    let mut u = Unstructured::new(data);
    let base = BASES[u.choose_index(BASES.len()).ok()?];
    let mut doc: Value = toml::from_str(base).expect("repository scenarios parse");
    let edits = u.int_in_range(1..=8u8).ok()?;
    for _ in 0..edits {
        if u.is_empty() {
            break;
        }
        let edit = Edit::arbitrary(&mut u).ok()?;
        apply(&mut doc, edit, &mut u);
    }
    toml::to_string(&doc).ok()
}

#[derive(Arbitrary, Debug)]
enum Edit {
    /// Replace the value at a path.
    Set,
    /// Add a key (a known field name) at a path.
    Insert,
    /// Remove the key at a path.
    Remove,
    /// Append a copy of an array element.
    Duplicate,
}

/// Field names of scenario tables: inserting them reaches each field's
/// validation, where arbitrary names only reach "unknown field".
const KEYS: &[&str] = &[
    "name",
    "seed",
    "duration",
    "host",
    "link",
    "route",
    "capture",
    "app",
    "middlebox",
    "profile",
    "tcp",
    "bridge",
    "position",
    "kind",
    "ends",
    "members",
    "rate",
    "delay",
    "queue",
    "loss",
    "address",
    "sensing",
    "slot_phase",
    "tx_range",
    "interference_range",
    "destination",
    "via",
    "interface",
    "file",
    "direction",
    "size",
    "start",
    "stop",
    "source_port",
    "port",
    "peer",
    "bytes",
    "request",
    "response",
    "count",
    "gap",
    "sizes",
    "gaps",
    "responses",
    "connect_first",
    "mss",
    "send_buffer",
    "recv_buffer",
    "rto",
    "rto_timer",
    "max_retransmissions",
    "max_syn_retransmissions",
    "cc",
    "ack",
    "nagle",
    "window_scale",
    "timestamps",
    "sack",
    "timelost",
    "rtt_correction",
    "window_update_threshold",
    "reset_with_ack",
    "timer_start",
    "keepalive",
    "time_wait",
    "persist_min",
    "persist_max",
    "ttl",
    "limited_transmit",
    "eifel_response",
    "initial",
    "min",
    "max",
    "policy",
    "idle",
    "interval",
    "probes",
    "x",
    "y",
];

/// Values chosen to sit on the edges validation checks.
fn value(u: &mut Unstructured) -> Value {
    const STRINGS: &[&str] = &[
        "",
        "0s",
        "1ns",
        "1ms",
        "100ms",
        "1s",
        "10s",
        "1e9s",
        "-1s",
        "1Mbps",
        "10Mbps",
        "1bps",
        "0bps",
        "1e14bps",
        "11.2kbps",
        "24kbps",
        "default",
        "10.0.0.1",
        "10.0.0.2:9000",
        "10.0.0.1/24",
        "10.0.1.0/24",
        "a",
        "b",
        "linux",
        "lwip",
        "uip",
        "rfc",
        "zero",
        "first_connection",
        "point-to-point",
        "half-duplex",
        "nfc",
        "broadcast",
        "cbr",
        "sink",
        "tcp-bulk",
        "tcp-sink",
        "exchange",
        "exchange-server",
        "message-series",
        "both",
        "tx",
        "rx",
        "x.pcap",
        "../x",
        "fixed",
        "bridge",
        "per-byte",
        "newreno",
        "delayed",
    ];
    let kind = u.int_in_range(0..=6u8).unwrap_or(0);
    match kind {
        0 => Value::String(STRINGS[u.choose_index(STRINGS.len()).unwrap_or(0)].into()),
        1 => {
            const INTS: &[i64] = &[0, 1, -1, 2, 16, 100, 1460, 65535, 65536, i64::MAX, i64::MIN];
            Value::Integer(INTS[u.choose_index(INTS.len()).unwrap_or(0)])
        }
        2 => Value::Integer(i64::arbitrary(u).unwrap_or(0)),
        3 => {
            const FLOATS: &[f64] = &[
                0.0,
                -0.0,
                0.5,
                1.0,
                1.5,
                -1.0,
                1e308,
                f64::NAN,
                f64::INFINITY,
            ];
            Value::Float(FLOATS[u.choose_index(FLOATS.len()).unwrap_or(0)])
        }
        4 => Value::Boolean(bool::arbitrary(u).unwrap_or(false)),
        5 => Value::String(String::arbitrary(u).unwrap_or_default()),
        _ => Value::Array(Vec::new()),
    }
}

/// Walks from the root into tables and arrays as the input says, then
/// applies the edit at the place it stopped.
fn apply(doc: &mut Value, edit: Edit, u: &mut Unstructured) {
    let depth = u.int_in_range(0..=4u8).unwrap_or(0);
    let at = descend(doc, depth, u);
    match (edit, at) {
        (Edit::Set, Value::Table(t)) if !t.is_empty() => {
            let i = u.choose_index(t.len()).unwrap_or(0);
            if let Some(key) = t.keys().nth(i).cloned() {
                t.insert(key, value(u));
            }
        }
        (Edit::Set, Value::Array(a)) if !a.is_empty() => {
            let i = u.choose_index(a.len()).unwrap_or(0);
            a[i] = value(u);
        }
        (Edit::Insert, Value::Table(t)) => {
            let key = KEYS[u.choose_index(KEYS.len()).unwrap_or(0)];
            t.insert(key.into(), value(u));
        }
        (Edit::Insert, Value::Array(a)) => a.push(value(u)),
        (Edit::Remove, Value::Table(t)) if !t.is_empty() => {
            let i = u.choose_index(t.len()).unwrap_or(0);
            if let Some(key) = t.keys().nth(i).cloned() {
                t.remove(&key);
            }
        }
        (Edit::Remove, Value::Array(a)) if !a.is_empty() => {
            let i = u.choose_index(a.len()).unwrap_or(0);
            a.remove(i);
        }
        (Edit::Duplicate, Value::Array(a)) if !a.is_empty() && a.len() < 16 => {
            let i = u.choose_index(a.len()).unwrap_or(0);
            let copy = a[i].clone();
            a.push(copy);
        }
        _ => {}
    }
}

enum Step {
    Key(String),
    Position(usize),
}

/// Up to `depth` steps down from `v`, into tables and arrays only (edits
/// apply to a container).
fn descend<'v>(v: &'v mut Value, depth: u8, u: &mut Unstructured) -> &'v mut Value {
    if depth == 0 {
        return v;
    }
    let container = |c: &Value| c.is_table() || c.is_array();
    let step = match &*v {
        Value::Table(t) if !t.is_empty() => {
            let i = u.choose_index(t.len()).unwrap_or(0);
            t.iter()
                .nth(i)
                .filter(|(_, c)| container(c))
                .map(|(k, _)| Step::Key(k.clone()))
        }
        Value::Array(a) if !a.is_empty() => {
            let i = u.choose_index(a.len()).unwrap_or(0);
            container(&a[i]).then_some(Step::Position(i))
        }
        _ => None,
    };
    match step {
        Some(Step::Key(k)) => match v {
            Value::Table(t) => descend(t.get_mut(&k).expect("key just seen"), depth - 1, u),
            _ => unreachable!(),
        },
        Some(Step::Position(i)) => match v {
            Value::Array(a) => descend(&mut a[i], depth - 1, u),
            _ => unreachable!(),
        },
        None => v,
    }
}
