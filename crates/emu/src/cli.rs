//! The emulator's command line, as a library function so that both the
//! `rtolab-emu` binary and the Python extension (`rtolab emulate`) run the
//! same code: the installed Python package then needs no separate binary.
//!
//! ```text
//! rtolab-emu emulate SCENARIO.toml [--duration S] [--out DIR] [--json]
//!                                  [--seed N] [--keep-running]
//! rtolab-emu sweep
//! ```

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rtolab_time::SimDuration;

use crate::runtime::{EmuReport, HostSetup};
use crate::{emulate, netns, EmuOptions, EmuScenario, HostKind};

/// Exit status of a run that ended normally (also after Ctrl-C).
pub const EXIT_OK: u8 = 0;
/// Exit status of a run that failed after it started.
pub const EXIT_FAILED: u8 = 1;
/// Exit status of a usage error or an invalid scenario.
pub const EXIT_USAGE: u8 = 2;

const USAGE: &str = "\
usage: rtolab-emu emulate SCENARIO.toml [--duration S] [--out DIR] [--json] [--seed N] [--keep-running]
                           [--no-realtime]
       rtolab-emu sweep

emulate   run the scenario's links in real time between network namespaces
          (needs root and /dev/net/tun); prints how to run a program in each
          host, then a summary. The run ends when every app is done and the
          links are quiet, at the end of the duration, or on Ctrl-C.
  --duration S     wall-clock time to run: seconds, or with a unit (\"500ms\")
  --out DIR        write the captures and metrics.json there
  --json           print the summary as JSON on stdout (setup goes to stderr)
  --seed N         override the scenario's seed
  --keep-running   run for the whole duration even when the apps are done
  --no-realtime    do not schedule the engine thread as real-time (SCHED_FIFO)
sweep     remove namespaces left behind by emulator processes that died";

struct Args {
    scenario: PathBuf,
    duration: Option<SimDuration>,
    out: Option<PathBuf>,
    json: bool,
    seed: Option<u64>,
    keep_running: bool,
    no_realtime: bool,
}

enum Command {
    Emulate(Args),
    Sweep,
    Help,
}

fn parse_duration(text: &str) -> Result<SimDuration, String> {
    if let Ok(secs) = text.parse::<f64>() {
        if secs.is_finite() && secs > 0.0 {
            return Ok(SimDuration::from_secs_f64(secs));
        }
        return Err(format!("--duration: must be positive, got {text:?}"));
    }
    rtolab_sim::units::parse_duration(text).map_err(|e| format!("--duration: {e}"))
}

fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut command = None;
    let mut scenario = None;
    let mut args = Args {
        scenario: PathBuf::new(),
        duration: None,
        out: None,
        json: false,
        seed: None,
        keep_running: false,
        no_realtime: false,
    };
    let text = |v: std::ffi::OsString| {
        v.into_string()
            .map_err(|_| "arguments must be UTF-8".to_string())
    };
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Short('h') | Long("help") => return Ok(Command::Help),
            Long("duration") => {
                let v = text(parser.value().map_err(|e| e.to_string())?)?;
                args.duration = Some(parse_duration(&v)?);
            }
            Long("out") => args.out = Some(parser.value().map_err(|e| e.to_string())?.into()),
            Long("json") => args.json = true,
            Long("keep-running") => args.keep_running = true,
            Long("no-realtime") => args.no_realtime = true,
            Long("seed") => {
                let v = text(parser.value().map_err(|e| e.to_string())?)?;
                args.seed = Some(
                    v.parse()
                        .map_err(|_| format!("--seed: not a number: {v:?}"))?,
                );
            }
            Value(v) if command.is_none() => command = Some(text(v)?),
            Value(v) if scenario.is_none() => scenario = Some(PathBuf::from(v)),
            other => return Err(other.unexpected().to_string()),
        }
    }
    match command.as_deref() {
        Some("emulate") => {
            args.scenario = scenario.ok_or("emulate: missing SCENARIO.toml")?;
            Ok(Command::Emulate(args))
        }
        Some("sweep") if scenario.is_none() => Ok(Command::Sweep),
        Some("help") => Ok(Command::Help),
        Some(other) => Err(format!("unknown command {other:?}")),
        None => Err("missing command".to_string()),
    }
}

fn print_setup(hosts: &[HostSetup], to_stderr: bool) {
    let mut lines = vec!["hosts are up; run a program inside one with:".to_string()];
    for h in hosts {
        let interfaces: Vec<String> = h
            .interfaces
            .iter()
            .map(|i| format!("{} {} ({})", i.device, i.address, i.link))
            .collect();
        match &h.exec {
            Some(exec) => lines.push(format!(
                "  {:<12} {:<7} {}    # {}",
                h.host,
                h.stack.name(),
                exec,
                interfaces.join(", ")
            )),
            None if h.stack == HostKind::Lwip => lines.push(format!(
                "  {:<12} {:<7} (lwIP program, fed by the emulator)    # {}",
                h.host,
                h.stack.name(),
                interfaces.join(", ")
            )),
            None => lines.push(format!(
                "  {:<12} {:<7} (inside the emulator)",
                h.host,
                h.stack.name()
            )),
        }
    }
    let text = lines.join("\n");
    if to_stderr {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
}

fn print_summary(r: &EmuReport) {
    println!(
        "{}: links ran {:.3} s (ended by {}), seed {}",
        r.name, r.duration_s, r.ended_by, r.seed
    );
    if !r.apps.is_empty() {
        println!("apps:");
    }
    for a in &r.apps {
        let mut facts = vec![if a.result.completed {
            "completed".to_string()
        } else {
            "not completed".to_string()
        }];
        facts.push(format!(
            "sent {} B, received {} B",
            a.result.bytes_sent, a.result.bytes_received
        ));
        if a.result.bytes_corrupt > 0 {
            facts.push(format!("{} B corrupt", a.result.bytes_corrupt));
        }
        if a.result.exchanges_completed > 0 {
            facts.push(format!("{} exchanges", a.result.exchanges_completed));
        }
        if let Some(ms) = a.result.latency_mean_ms {
            facts.push(format!("latency mean {ms:.1} ms"));
        }
        if let Some(ms) = a.result.completion_time_ms {
            facts.push(format!("completed in {ms:.1} ms"));
        }
        if let Some(f) = &a.result.failure {
            facts.push(format!("failure: {f}"));
        }
        println!(
            "  {:<14} {:<10} {:<7} {:<16} {}",
            a.name,
            a.host,
            a.stack.name(),
            a.kind,
            facts.join("; ")
        );
    }
    println!("hosts (as seen on the wire):");
    for h in &r.engine.hosts {
        println!(
            "  {:<12} {:<7} {} packets, {} segments, {} retransmissions, {} duplicate ACKs",
            h.name,
            h.stack.name(),
            h.wire.packets_sent,
            h.wire.segments_sent,
            h.wire.retransmissions,
            h.wire.dup_acks_sent
        );
    }
    if !r.engine.middleboxes.is_empty() {
        println!("middleboxes:");
    }
    for m in &r.engine.middleboxes {
        println!(
            "  {:<14} {:<10} {:<12} {} held, {} released, {} dropped, {} injected",
            m.name, m.host, m.kind, m.held, m.released, m.dropped, m.injected
        );
    }
    for i in &r.engine.indications {
        let detail = match (i.rtt_ns, i.expected_outage_ns) {
            (Some(rtt), Some(outage)) => format!(
                " (rtt {:.1} ms, expected outage {:.3} s)",
                rtt as f64 / 1e6,
                outage as f64 / 1e9
            ),
            _ => String::new(),
        };
        println!(
            "indication at {:.3} s: {} to {} on {}{detail}",
            i.at_ns as f64 / 1e9,
            i.indication,
            i.host,
            i.link
        );
    }
    let e = &r.engine.edges;
    println!(
        "edge: {} datagrams from TUN, {} to TUN, {} rejected, link drops {:?}",
        e.packets_from_tun,
        e.packets_to_tun,
        e.rejected_total(),
        e.link_drops
    );
    println!(
        "timing error of TUN writes (n={}): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        r.timing.samples, r.timing_error_p50_ms, r.timing_error_p99_ms, r.timing_error_max_ms
    );
    for f in &r.files {
        println!("wrote {}", f.display());
    }
}

/// Why a command failed, and so which exit status it gets.
enum Failure {
    Input(String),
    Run(String),
}

fn run(args: Args) -> Result<(), Failure> {
    let emu = EmuScenario::from_path(&args.scenario).map_err(|e| Failure::Input(e.to_string()))?;
    run_scenario(&emu, args).map_err(Failure::Run)
}

fn run_scenario(emu: &EmuScenario, args: Args) -> Result<(), String> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        // The first signal ends the run cleanly; a second one, while the
        // flag is still set, exits at once (the next run's sweep cleans up).
        signal_hook::flag::register_conditional_shutdown(signal, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
            .map_err(|e| format!("installing signal handlers: {e}"))?;
    }
    let opts = EmuOptions {
        seed: args.seed,
        duration: args.duration,
        out_dir: args.out.clone(),
        stop: Some(stop),
        stop_when_done: !args.keep_running,
        realtime: !args.no_realtime,
    };
    let json = args.json;
    let report =
        emulate(emu, &opts, |hosts| print_setup(hosts, json)).map_err(|e| e.to_string())?;
    if json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print_summary(&report);
    }
    Ok(())
}

/// Runs the emulator's command line: `args` are the arguments after the
/// program's name (`emulate SCENARIO.toml --json`, `sweep`), `program`
/// names it in messages. Returns the exit status: [`EXIT_OK`],
/// [`EXIT_FAILED`] or [`EXIT_USAGE`].
///
/// SIGINT, SIGTERM and SIGHUP end a run cleanly (namespaces removed,
/// outputs written); a second one exits the process at once with status
/// 130. The handlers stay installed after the call returns.
pub fn main(program: &str, args: impl IntoIterator<Item = OsString>) -> u8 {
    let command = match parse_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{program}: {e}\n{}", USAGE.replace("rtolab-emu", program));
            return EXIT_USAGE;
        }
    };
    let outcome = match command {
        Command::Help => {
            println!("{}", USAGE.replace("rtolab-emu", program));
            Ok(())
        }
        Command::Sweep => {
            for name in netns::sweep_stale() {
                println!("removed {name}");
            }
            Ok(())
        }
        Command::Emulate(args) => run(args),
    };
    match outcome {
        Ok(()) => EXIT_OK,
        Err(Failure::Input(e)) => {
            eprintln!("{program}: error: {e}");
            EXIT_USAGE
        }
        Err(Failure::Run(e)) => {
            eprintln!("{program}: error: {e}");
            EXIT_FAILED
        }
    }
}
