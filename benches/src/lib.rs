//! What every benchmark binary measures the same way: wall time and peak
//! memory.

use std::time::Instant;

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
