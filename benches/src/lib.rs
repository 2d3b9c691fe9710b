//! What every benchmark binary does the same way: measure wall time and
//! peak memory, and build a simulator from a scenario it generated.

use std::time::Instant;

use rtolab_sim::run::build_simulator;
use rtolab_sim::{Scenario, Simulator};

/// Benchmarks measure elapsed wall time by definition; the ban on reading
/// the clock applies to the simulator, not to its stopwatch.
#[allow(clippy::disallowed_methods)]
pub fn stopwatch() -> Instant {
    Instant::now()
}

/// Peak resident set size of this process, in bytes (Linux), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The simulator of a scenario a benchmark wrote itself, or the error to
/// print (exit status 2: the benchmark's arguments made a bad scenario).
pub fn simulator_from_toml(text: &str, seed: u64) -> Result<Simulator, String> {
    let scenario = Scenario::from_toml_str(text)
        .map_err(|e| format!("the generated scenario does not validate: {e}"))?;
    build_simulator(&scenario, seed).map_err(|e| e.to_string())
}
