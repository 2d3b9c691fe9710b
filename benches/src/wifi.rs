//! The 802.11 link, timed, in the cases `benches/vs-ns3-wifi/ns3_wifi.py`
//! runs in ns-3:
//!
//! * `--case study` (default): the timelost study's scenario as shipped
//!   (`scenarios/wifi-timelost.toml`: a wired Vegas source, an access
//!   point, a mobile sink moving to the edge of coverage until 150 s), for
//!   `--seconds` (default 300).
//! * `--case single --distance D`: one station D metres from the AP, one
//!   bulk TCP flow from the AP's host to it.
//! * `--case saturated --stations N`: N stations 5 m around the AP, each
//!   sending 1472-byte UDP datagrams to the AP's host faster than the
//!   channel carries them.
//!
//! Radio and MAC are the link's defaults (ns-2's shadowing model with its
//! defaults, 802.11b at 11 Mbit/s, control frames at 1 Mbit/s). The
//! scenario goes through the scenario reader like a user's file; no traces
//! or captures are written. Prints one JSON line: wall seconds of the run
//! alone, simulated seconds per wall second, goodput at the receivers,
//! MAC retries and the process's peak resident memory.

use rtolab_benches::{peak_rss_bytes, simulator_from_toml, stopwatch};
use std::fmt::Write as _;
use std::process::ExitCode;

use rtolab_sim::app::{AppId, AppStats};
use rtolab_sim::link::LinkStats;
use rtolab_sim::node::LinkId;
use rtolab_sim::SimTime;
use serde_json::json;

const STUDY: &str = include_str!("../../scenarios/wifi-timelost.toml");

struct Args {
    case: String,
    distance: f64,
    stations: usize,
    seconds: u64,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        case: "study".into(),
        distance: 10.0,
        stations: 20,
        seconds: 0,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag}: missing value"));
        match flag.as_str() {
            "--case" => args.case = value()?,
            "--distance" => {
                args.distance = value()?.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            "--stations" => {
                args.stations = value()?.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            "--seconds" => args.seconds = value()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--seed" => args.seed = value()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--help" | "-h" => {
                return Err(
                    "usage: wifi [--case study|single|saturated] [--distance M] \
                     [--stations N] [--seconds S] [--seed N]"
                        .into(),
                )
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if !["study", "single", "saturated"].contains(&args.case.as_str()) {
        return Err(format!(
            "--case: study, single or saturated, got {:?}",
            args.case
        ));
    }
    if !(args.distance.is_finite() && args.distance >= 0.0) {
        return Err("--distance: a distance in metres, at least 0".into());
    }
    if !(1..=200).contains(&args.stations) {
        return Err("--stations: 1 to 200".into());
    }
    if args.seconds == 0 {
        args.seconds = if args.case == "study" { 300 } else { 30 };
    }
    Ok(args)
}

/// The scenario of a case, as a user would write it.
fn scenario_toml(a: &Args) -> String {
    if a.case == "study" {
        return STUDY.replace(
            "duration = \"300s\"",
            &format!("duration = \"{}s\"", a.seconds),
        );
    }
    let stations = if a.case == "single" { 1 } else { a.stations };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "name = \"wifi-bench\"\nseed = {}\nduration = \"{}s\"\n\n[[host]]\nname = \"ap\"\n",
        a.seed, a.seconds
    );
    for i in 1..=stations {
        let _ = writeln!(s, "[[host]]\nname = \"s{i}\"\n");
    }
    let _ = writeln!(
        s,
        "[[link]]\nname = \"wlan\"\nkind = \"wifi\"\n\
         ap = {{ host = \"ap\", address = \"10.0.0.1/16\", position = {{ x = 0.0, y = 0.0 }} }}\n\
         mac = {{ data_rate = \"11Mbps\", basic_rate = \"1Mbps\", queue = 50 }}\nstations = ["
    );
    for i in 1..=stations {
        let (x, y) = if a.case == "single" {
            (a.distance, 0.0)
        } else {
            let angle = 2.0 * std::f64::consts::PI * (i - 1) as f64 / stations as f64;
            (5.0 * angle.cos(), 5.0 * angle.sin())
        };
        let _ = writeln!(
            s,
            "  {{ host = \"s{i}\", address = \"10.0.{}.{}/16\", position = {{ x = {x:.3}, y = {y:.3} }} }},",
            1 + i / 250,
            1 + i % 250
        );
    }
    let _ = writeln!(s, "]\n");
    if a.case == "single" {
        let _ = writeln!(
            s,
            "[[app]]\nkind = \"tcp-sink\"\nname = \"sink\"\nhost = \"s1\"\nport = 5001\n\n\
             [[app]]\nkind = \"tcp-bulk\"\nname = \"bulk\"\nhost = \"ap\"\n\
             peer = \"10.0.1.2:5001\"\nstart = \"1s\"\n"
        );
    } else {
        let _ = writeln!(
            s,
            "[[app]]\nkind = \"sink\"\nname = \"sink\"\nhost = \"ap\"\nport = 9000\n"
        );
        for i in 1..=stations {
            let _ = writeln!(
                s,
                "[[app]]\nkind = \"cbr\"\nname = \"c{i}\"\nhost = \"s{i}\"\n\
                 destination = \"10.0.0.1:9000\"\nsize = 1472\nrate = \"12Mbps\"\nstart = \"1s\"\n"
            );
        }
    }
    s
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let text = scenario_toml(&args);
    let mut sim = match simulator_from_toml(&text, args.seed) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let started = stopwatch();
    if let Err(e) = sim.run_until(SimTime::from_secs(args.seconds)) {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    let wall = started.elapsed().as_secs_f64();
    let mut received = 0u64;
    for app in 0..sim.app_count() {
        match sim.app_stats(AppId(app as u32)) {
            AppStats::TcpSink(s) => received += s.bytes_received,
            AppStats::Sink(s) => received += s.received_bytes,
            _ => {}
        }
    }
    let (mut retries, mut frames) = (0u64, 0u64);
    for l in 0..sim.link_count() as u32 {
        if let LinkStats::Wifi(stats) = sim.link_stats(LinkId(l)) {
            retries += stats.retries;
            frames += stats.frames;
        }
    }
    let start = if args.case == "study" { 5.0 } else { 1.0 };
    println!(
        "{}",
        json!({
            "bench": "wifi",
            "case": args.case,
            "distance_m": (args.case == "single").then_some(args.distance),
            "stations": (args.case == "saturated").then_some(args.stations),
            "simulated_seconds": args.seconds,
            "wall_seconds": wall,
            "sim_seconds_per_wall_second": args.seconds as f64 / wall,
            "events": sim.events_processed(),
            "bytes_delivered": received,
            "goodput_mbps": received as f64 * 8.0 / (args.seconds as f64 - start) / 1e6,
            "mac_frames": frames,
            "mac_retries": retries,
            "peak_rss_bytes": peak_rss_bytes(),
        })
    );
    ExitCode::SUCCESS
}
