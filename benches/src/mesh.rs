//! The uIP study's mesh, timed: `--meshes` duty-cycled IEEE 802.15.4
//! meshes of `--rows` × `--cols` members 40 m apart (Cooja's unit disk,
//! 50 m range, 100 m interference), CSMA over ContikiMAC at `--rate-hz`
//! (or nullrdc with `--rdc nullrdc`), RPL with MRHOF; the top-left member
//! of each is its border router, wired by a 115 200-baud SLIP line to one
//! server. Every other member runs a uIP TCP client (one unacknowledged
//! 48-byte segment at a time) sending to the server for `--seconds` of
//! simulated time, after two minutes in which RPL forms its tree. The default is the study's network: one 4 × 4 mesh, 15
//! clients, 8 Hz, 600 s.
//!
//! The scenario is built from the same TOML a user would write, through
//! the scenario reader, so the benchmark times the path users take (no
//! traces or captures are written). Prints one JSON line: wall seconds of
//! the run alone (and of building it), events, simulated seconds per wall
//! second, the segments the server received, RPL's tree (members with a
//! parent) and the process's peak resident memory.

use rtolab_benches::{peak_rss_bytes, simulator_from_toml, stopwatch};
use std::fmt::Write as _;
use std::process::ExitCode;

use rtolab_sim::app::AppStats;
use rtolab_sim::link::LinkStats;
use rtolab_sim::node::LinkId;
use rtolab_sim::SimTime;
use serde_json::json;

/// Payload of every segment the clients send, as in the study.
const SEGMENT: u64 = 48;

/// Seconds before the clients start, for RPL to form its tree (as in
/// `scenarios/mesh-uip.toml`); the run lasts this much plus `--seconds`.
const FORMATION: u64 = 120;

struct Args {
    meshes: usize,
    rows: usize,
    cols: usize,
    seconds: u64,
    rate_hz: u32,
    rdc: String,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        meshes: 1,
        rows: 4,
        cols: 4,
        seconds: 600,
        rate_hz: 8,
        rdc: "contikimac".into(),
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag}: missing value"));
        let number = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--meshes" => args.meshes = number(value()?)? as usize,
            "--rows" => args.rows = number(value()?)? as usize,
            "--cols" => args.cols = number(value()?)? as usize,
            "--seconds" => args.seconds = number(value()?)?,
            "--rate-hz" => args.rate_hz = number(value()?)? as u32,
            "--seed" => args.seed = number(value()?)?,
            "--rdc" => args.rdc = value()?,
            "--help" | "-h" => {
                return Err(
                    "usage: mesh [--meshes N] [--rows R] [--cols C] [--seconds S] \
                     [--rate-hz HZ] [--rdc contikimac|nullrdc] [--seed N]"
                        .into(),
                )
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let members = args.rows * args.cols;
    if args.meshes == 0 || !(2..=255).contains(&members) || args.seconds == 0 {
        return Err("need at least one mesh of 2 to 255 members and --seconds > 0".into());
    }
    Ok(args)
}

/// The scenario file of the benchmark, as a user would write it.
fn scenario_toml(a: &Args) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "name = \"mesh-bench\"\nseed = {}\nduration = \"{}s\"\n",
        a.seed,
        FORMATION + a.seconds
    );
    let _ = writeln!(s, "[[host]]\nname = \"server\"\nprofile = \"linux\"\n");
    for m in 0..a.meshes {
        let group = format!("m{m}n");
        let _ = writeln!(
            s,
            "[[host_group]]\nprefix = \"{group}\"\nprofile = \"uip\"\n\
             grid = {{ rows = {}, cols = {}, spacing = \"40m\" }}\n\
             [host_group.tcp]\nmss = {SEGMENT}\n",
            a.rows, a.cols
        );
        let _ = writeln!(
            s,
            "[[link]]\nname = \"mesh{m}\"\nkind = \"ieee802154\"\nmembers = \"{group}*\"\n\
             root = \"{group}1\"\nprefix = \"fd00:{m}::/64\"\n\
             mac = {{ rdc = {{ kind = \"{}\", check_rate_hz = {} }} }}\n",
            a.rdc, a.rate_hz
        );
        let _ = writeln!(
            s,
            "[[link]]\nname = \"serial{m}\"\nkind = \"slip\"\n\
             ends = [ {{ host = \"{group}1\", ipv6 = \"fd01:{m}::1/64\" }}, \
             {{ host = \"server\", ipv6 = \"fd01:{m}::2/64\" }} ]\n"
        );
        let _ = writeln!(
            s,
            "[[route]]\nhost = \"server\"\ndestination = \"fd00:{m}::/64\"\nvia = \"fd01:{m}::1\"\n"
        );
        for n in 2..=a.rows * a.cols {
            let _ = writeln!(
                s,
                "[[app]]\nkind = \"tcp-bulk\"\nname = \"{group}{n}\"\nhost = \"{group}{n}\"\n\
                 peer = \"[fd01:{m}::2]:80\"\nstart = \"{FORMATION}s\"\n"
            );
        }
    }
    let _ = writeln!(
        s,
        "[[app]]\nkind = \"tcp-sink\"\nname = \"sink\"\nhost = \"server\"\nport = 80\n"
    );
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
    let started = stopwatch();
    let mut sim = match simulator_from_toml(&text, args.seed) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let build_seconds = started.elapsed().as_secs_f64();
    let started = stopwatch();
    if let Err(e) = sim.run_until(SimTime::from_secs(FORMATION + args.seconds)) {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    let wall = started.elapsed().as_secs_f64();

    let mut received = 0;
    for app in 0..sim.app_count() {
        if let AppStats::TcpSink(s) = sim.app_stats(rtolab_sim::app::AppId(app as u32)) {
            received += s.bytes_received;
        }
    }
    let mut joined = 0;
    let mut members = 0;
    for l in 0..sim.link_count() as u32 {
        if let LinkStats::Ieee802154(stats) = sim.link_stats(LinkId(l)) {
            members += stats.members.len();
            joined += stats.members.iter().filter(|m| m.parent.is_some()).count();
        }
    }
    println!(
        "{}",
        json!({
            "bench": "mesh",
            "meshes": args.meshes,
            "members": members,
            "clients": members - args.meshes,
            "rdc": args.rdc,
            "check_rate_hz": args.rate_hz,
            "simulated_seconds": FORMATION + args.seconds,
            "wall_seconds": wall,
            "build_seconds": build_seconds,
            "events": sim.events_processed(),
            "speedup": (FORMATION + args.seconds) as f64 / wall,
            "segments_received": received / SEGMENT,
            "members_with_parent": joined,
            "peak_rss_bytes": peak_rss_bytes(),
        })
    );
    ExitCode::SUCCESS
}
