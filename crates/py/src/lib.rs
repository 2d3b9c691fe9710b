//! Python bindings of rtolab, imported as `rtolab._rtolab`.
//!
//! This is the only crate that touches pyo3. It stays thin: every function
//! takes plain values (TOML text, numbers, paths), runs the Rust core with the
//! GIL released, and hands results back as JSON text that the Python package
//! turns into its own objects. Keeping the boundary to strings means the
//! Python side never holds Rust state and the core's types can change freely.
//! A run report, which grows with the apps and connections, stays text on
//! the Python side: [`report_index`] says where its values are and
//! [`metric_columns`] turns its numbers into the columns of a table.

mod capture;
mod metric_table;
mod report;

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rtolab_sim::middlebox::ack_schedule::{self, PacingError, PacingProblem, Search};
use rtolab_sim::run::{TraceFormat, TraceOptions};
use rtolab_sim::trace_table::{SelectionError, TraceLevel, TraceSelection};
use rtolab_sim::{run_scenario, RunError, RunOptions, Scenario, ScenarioError, StopFlag};
use rtolab_time::SimDuration;

create_exception!(
    _rtolab,
    NativeScenarioError,
    PyValueError,
    "A scenario failed validation; args are (field path, message)."
);
create_exception!(
    _rtolab,
    NativeRunError,
    PyOSError,
    "A run failed after it started; files written so far are kept."
);

create_exception!(
    _rtolab,
    NativeRunStopped,
    NativeRunError,
    "A limit stopped a run before its end; args are (limit, message). The \
     outputs are valid and metrics.json says \"complete\": false."
);

create_exception!(
    _rtolab,
    NativeCaptureError,
    PyValueError,
    "A capture file could not be read; args are (file path, message)."
);

mod shipped {
    include!(concat!(env!("OUT_DIR"), "/scenarios.rs"));
}

/// The scenario `rtolab run` uses when none is given.
const DEFAULT_SCENARIO: &str = include_str!("../../../scenarios/default.toml");

fn scenario_error(err: ScenarioError) -> PyErr {
    NativeScenarioError::new_err((err.path.clone(), err.message.clone()))
}

fn parse(text: &str) -> PyResult<Scenario> {
    Scenario::from_toml_str(text).map_err(scenario_error)
}

/// Checks a scenario given as TOML text; returns a JSON summary of it.
#[pyfunction]
fn validate_scenario(text: &str) -> PyResult<String> {
    let scenario = parse(text)?;
    serde_json::to_string(&scenario.summary())
        .map_err(|e| NativeRunError::new_err(format!("cannot encode summary: {e}")))
}

/// A duration as scenario files write it (`"20s"`, `"1.5ms"`), in
/// nanoseconds: the command line reads its durations with the same parser.
#[pyfunction]
fn parse_duration(text: &str) -> PyResult<u64> {
    rtolab_sim::units::parse_duration(text)
        .map(|d| d.as_nanos())
        .map_err(|message| NativeScenarioError::new_err(("duration".to_string(), message)))
}

fn positive_seconds(field: &str, value: Option<f64>) -> PyResult<Option<f64>> {
    match value {
        Some(s) if !(s.is_finite() && s > 0.0) => Err(NativeScenarioError::new_err((
            field.to_string(),
            format!("must be a positive number of seconds, got {s}"),
        ))),
        _ => Ok(value),
    }
}

/// How often a run waiting on its thread checks for signals: well within
/// the 100 ms a Ctrl-C may take, at no cost to the run.
const SIGNAL_POLL: Duration = Duration::from_millis(10);

/// Runs `work` on its own thread while this one, with the GIL released,
/// wakes every [`SIGNAL_POLL`] to run Python's signal handlers. When one
/// raises (Ctrl-C: `KeyboardInterrupt`), `stop` is raised, the run ends
/// cleanly (outputs flushed, metrics written) and the handler's exception
/// is returned.
fn interruptible<T: Send>(
    py: Python<'_>,
    stop: &StopFlag,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    std::thread::scope(|scope| {
        let (done, finished) = mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            // As large as a main thread's: the run happened there before.
            .stack_size(8 << 20)
            .spawn_scoped(scope, move || {
                let value = work();
                let _ = done.send(());
                value
            })
            .map_err(|e| NativeRunError::new_err(format!("cannot start the run: {e}")))?;
        let mut signalled = None;
        let mut finished = finished;
        loop {
            let (waited, rx) = py.detach(move || (finished.recv_timeout(SIGNAL_POLL), finished));
            finished = rx;
            if !matches!(waited, Err(RecvTimeoutError::Timeout)) {
                break;
            }
            if signalled.is_none() {
                if let Err(e) = py.check_signals() {
                    stop.raise();
                    signalled = Some(e);
                }
            }
        }
        let value = worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        match signalled {
            Some(e) => Err(e),
            None => Ok(value),
        }
    })
}

/// The trace options of a run, errors naming the argument at fault.
fn trace_options(
    level: &str,
    families: Option<Vec<String>>,
    format: &str,
) -> PyResult<TraceOptions> {
    let level = TraceLevel::parse(level)
        .map_err(|e| NativeScenarioError::new_err(("traces".to_string(), e.to_string())))?;
    let selection = TraceSelection::new(level, families.unwrap_or_default()).map_err(|e| {
        let path = match &e {
            SelectionError::Family { index, .. } => format!("trace_families[{index}]"),
            _ => "trace_families".to_string(),
        };
        NativeScenarioError::new_err((path, e.to_string()))
    })?;
    let format = TraceFormat::parse(format).ok_or_else(|| {
        NativeScenarioError::new_err((
            "trace_format".to_string(),
            format!("expected jsonl or parquet, got {format:?}"),
        ))
    })?;
    Ok(TraceOptions { selection, format })
}

fn run_error(err: RunError) -> PyErr {
    match &err {
        RunError::Stopped { stop, .. } => {
            NativeRunStopped::new_err((stop.as_str().to_string(), err.to_string()))
        }
        _ => NativeRunError::new_err(err.to_string()),
    }
}

/// Runs a scenario given as TOML text and returns the run report as JSON
/// (UTF-8 bytes).
/// `max_events`, `max_wall_s` and `max_output` (bytes of captures and
/// traces) stop the run early; so does a signal whose handler raises
/// (Ctrl-C), whose exception is then raised here. `max_stall_events` sets
/// the guard against simulated time standing still (events in a row at one
/// instant; the core's default when `None`).
#[pyfunction]
#[pyo3(signature = (
    text, seed=None, out_dir=None, duration_s=None, write_traces=true,
    max_events=None, max_wall_s=None, max_output=None, max_stall_events=None,
    trace_level="full", trace_families=None, trace_format="jsonl",
))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    text: &str,
    seed: Option<u64>,
    out_dir: Option<PathBuf>,
    duration_s: Option<f64>,
    write_traces: bool,
    max_events: Option<u64>,
    max_wall_s: Option<f64>,
    max_output: Option<u64>,
    max_stall_events: Option<u64>,
    trace_level: &str,
    trace_families: Option<Vec<String>>,
    trace_format: &str,
) -> PyResult<Py<PyBytes>> {
    let traces = trace_options(trace_level, trace_families, trace_format)?;
    let scenario = parse(text)?;
    let duration_s = positive_seconds("duration", duration_s)?;
    let max_wall_s = positive_seconds("max_wall", max_wall_s)?;
    if max_stall_events == Some(0) {
        // At 0 the guard would stop a run at its first event.
        return Err(NativeScenarioError::new_err((
            "max_stall_events".to_string(),
            "must be a positive number of events, got 0".to_string(),
        )));
    }
    let stop = StopFlag::new();
    let options = RunOptions {
        seed,
        out_dir,
        duration: duration_s.map(SimDuration::from_secs_f64),
        write_traces,
        max_events,
        max_wall: max_wall_s.map(Duration::from_secs_f64),
        max_output,
        stop: Some(stop.clone()),
        stall_events: max_stall_events,
        traces,
    };
    let report =
        interruptible(py, &stop, || run_scenario(&scenario, &options))?.map_err(run_error)?;
    // A large scenario takes as much memory as its report: free it first.
    drop(scenario);
    let text = py
        .detach(|| serde_json::to_vec(&report))
        .map_err(|e| NativeRunError::new_err(format!("cannot encode report: {e}")))?;
    Ok(PyBytes::new(py, &text).unbind())
}

/// Where each top-level value of a run report (JSON bytes) is: a list of
/// `(key, start, end, length, objects)`, `length` and `objects` (whether
/// every element is an object) for arrays only, else `None`. A key given
/// twice keeps its first place and its last value. Raises `ValueError`
/// when the text is not one JSON object.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn report_index(
    py: Python<'_>,
    text: &[u8],
) -> PyResult<Vec<(String, usize, usize, Option<usize>, Option<bool>)>> {
    let entries = py
        .detach(|| report::index(text))
        .map_err(|e| PyValueError::new_err(report::describe(&e)))?;
    Ok(entries
        .into_iter()
        .map(|e| {
            let (length, objects) = e.array.unzip();
            (e.key, e.start, e.end, length, objects)
        })
        .collect())
}

/// Writes the long metrics table of a run report (JSON bytes) to `path` as
/// Parquet (`metrics.parquet`; the columns of `runreport.metric_table`).
/// Raises `ValueError` when the text is not one JSON object, `OSError` when
/// the file cannot be written.
#[pyfunction]
fn write_metric_table(py: Python<'_>, text: &[u8], path: PathBuf) -> PyResult<()> {
    use metric_table::MetricTableError;
    py.detach(|| metric_table::write_metric_table(text, &path))
        .map_err(|err| match err {
            MetricTableError::Report(_) => PyValueError::new_err(err.to_string()),
            MetricTableError::Io(io) => PyOSError::new_err(format!("{}: {io}", path.display())),
            other => PyOSError::new_err(format!("{}: {other}", path.display())),
        })
}

/// The long metrics table of a run report (JSON bytes) as columns, in a
/// dict: `scopes` (`run`, then each scope's name), `keys` (the report key
/// that lists each scope's items), `names` (the run's, then every item's), `kinds` (per
/// name), `items` (per scope: first index into `names` and count), `parts`
/// (index 0: none), `metrics` (the strings as buffers of Arrow arrays, see
/// [`arrow_strings`]), and per row, as little-endian arrays,
/// `scope` (u8: index into `scopes`),
/// `name`, `part`, `metric` (u32 indices) and `value` (f64). Raises
/// `ValueError` when the text is not one JSON object.
#[pyfunction]
fn metric_columns<'py>(py: Python<'py>, text: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let c = py
        .detach(|| report::metric_columns(text))
        .map_err(|e| PyValueError::new_err(report::describe(&e)))?;
    fn bytes<const N: usize, T: Copy>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| to(v)).collect()
    }
    let out = PyDict::new(py);
    let (scopes, keys): (Vec<&str>, Vec<&str>) = report::SCOPES.iter().copied().unzip();
    let scopes = ["run"]
        .into_iter()
        .chain(scopes)
        .map(Some)
        .collect::<Vec<_>>();
    out.set_item("scopes", arrow_strings(py, scopes.into_iter()))?;
    out.set_item("keys", keys)?;
    let names = c.names.iter().map(|n| Some(n.as_str()));
    out.set_item("names", arrow_strings(py, names))?;
    out.set_item(
        "kinds",
        arrow_strings(py, c.kinds.iter().map(Option::as_deref)),
    )?;
    out.set_item("items", c.items)?;
    let parts = c.parts.iter().enumerate();
    let parts = parts.map(|(i, p)| (i > 0).then_some(p.as_str()));
    out.set_item("parts", arrow_strings(py, parts))?;
    let metrics = c.metrics.iter().map(|m| Some(m.as_str()));
    out.set_item("metrics", arrow_strings(py, metrics))?;
    out.set_item("scope", PyBytes::new(py, &c.scope))?;
    out.set_item("name", PyBytes::new(py, &bytes(&c.name, u32::to_le_bytes)))?;
    out.set_item("part", PyBytes::new(py, &bytes(&c.part, u32::to_le_bytes)))?;
    out.set_item(
        "metric",
        PyBytes::new(py, &bytes(&c.metric, u32::to_le_bytes)),
    )?;
    out.set_item(
        "value",
        PyBytes::new(py, &bytes(&c.value, f64::to_le_bytes)),
    )?;
    Ok(out)
}

/// Strings (or none) as the buffers of an Arrow `large_string` array:
/// `(length, validity bitmap or None, i64 offsets, data)`, so that Python
/// builds the array without an object per string.
fn arrow_strings<'a, 'py>(
    py: Python<'py>,
    values: impl ExactSizeIterator<Item = Option<&'a str>>,
) -> (
    usize,
    Option<Bound<'py, PyBytes>>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
) {
    let len = values.len();
    let mut valid = vec![0u8; len.div_ceil(8)];
    let mut offsets = Vec::with_capacity(8 * (len + 1));
    let mut data = Vec::new();
    let mut nulls = false;
    offsets.extend_from_slice(&0i64.to_le_bytes());
    for (i, value) in values.enumerate() {
        match value {
            Some(v) => {
                valid[i / 8] |= 1 << (i % 8);
                data.extend_from_slice(v.as_bytes());
            }
            None => nulls = true,
        }
        offsets.extend_from_slice(&(data.len() as i64).to_le_bytes());
    }
    (
        len,
        nulls.then(|| PyBytes::new(py, &valid)),
        PyBytes::new(py, &offsets),
        PyBytes::new(py, &data),
    )
}

/// Decodes a capture file written by a run; returns its packets as JSON
/// columns (`{"time_ns": [...], "src": [...], ...}`), one row per packet.
#[pyfunction]
fn read_capture(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let columns = py
        .detach(|| capture::read_capture(&path))
        .map_err(|e| NativeCaptureError::new_err((e.path, e.message)))?;
    serde_json::to_string(&columns)
        .map_err(|e| NativeRunError::new_err(format!("cannot encode capture: {e}")))
}

/// Decodes an 802.11 radiotap capture written by a run; returns its frames
/// as JSON columns (`time_ns`, `len`, `kind`, `retry`), one row per frame.
#[pyfunction]
fn read_wlan_capture(py: Python<'_>, path: PathBuf) -> PyResult<String> {
    let columns = py
        .detach(|| capture::read_wlan_capture(&path))
        .map_err(|e| NativeCaptureError::new_err((e.path, e.message)))?;
    serde_json::to_string(&columns)
        .map_err(|e| NativeRunError::new_err(format!("cannot encode capture: {e}")))
}

/// The scenario files shipped with rtolab, as (name, TOML text) pairs
/// sorted by name.
#[pyfunction]
fn shipped_scenarios() -> Vec<(&'static str, &'static str)> {
    shipped::SHIPPED.to_vec()
}

/// The TOML text of the embedded default scenario.
#[pyfunction]
fn default_scenario() -> &'static str {
    DEFAULT_SCENARIO
}

/// Every registered RTO, congestion-control and ACK policy as JSON: a list of
/// `{"family", "name", "description", "defaults"}` objects, `defaults`
/// holding each parameter as a scenario file writes it.
#[pyfunction]
fn policy_catalog() -> PyResult<String> {
    serde_json::to_string(&rtolab_tcp::policy_catalog())
        .map_err(|e| NativeRunError::new_err(format!("cannot encode the policy catalog: {e}")))
}

/// Every registered link, MAC, app and middlebox kind as JSON: a list of
/// `{"family", "kind", "description", "fields"}` objects, each field
/// `{"name", "type", "unit", "required", "default", "meaning"}`.
#[pyfunction]
fn kind_catalog() -> PyResult<String> {
    serde_json::to_string(&rtolab_sim::scenario::kind_catalog())
        .map_err(|e| NativeRunError::new_err(format!("cannot encode the kind catalog: {e}")))
}

/// `acks` as the whole number the schedule needs; anything else (a float,
/// a huge or negative int) is a `ValueError` naming the parameter.
fn held_acks(acks: &Bound<'_, PyAny>) -> PyResult<u32> {
    let value = acks.extract::<i64>().map_err(|_| {
        PyValueError::new_err(format!(
            "acks: must be a whole number from 1 to {}, got {acks}",
            ack_schedule::MAX_ACKS
        ))
    })?;
    u32::try_from(value).map_err(|_| PyValueError::new_err(PacingError::Acks { value }.to_string()))
}

/// The release schedule of ACK holding for an outage of `outage` seconds,
/// `acks` held ACKs and the fixed host's estimator (`mean`, `deviation`,
/// seconds), as JSON: both searches' choice of n; for every n < N, RTO_N(n)
/// and whether the FH stays clear of a timeout (null where n is not
/// feasible) and S(n) (null where it overflows); and the schedules of both
/// searches and of the best timeout-free n (null when there is none). An
/// invalid parameter raises `ValueError` whose message starts with its name.
#[pyfunction]
fn ack_pacing(outage: f64, acks: &Bound<'_, PyAny>, mean: f64, deviation: f64) -> PyResult<String> {
    let invalid = |e: PacingError| PyValueError::new_err(e.to_string());
    let problem = PacingProblem {
        outage,
        acks: held_acks(acks)?,
        mean,
        deviation,
    };
    problem.validate().map_err(invalid)?;
    let every_n = || 0..problem.acks;
    let final_rto: Vec<_> = every_n()
        .map(|n| ack_schedule::final_rto(&problem, n))
        .collect();
    let stretch_time: Vec<_> = every_n()
        .map(|n| ack_schedule::stretch_time(&problem, n))
        .collect();
    let timeout_free: Vec<_> = every_n()
        .map(|n| ack_schedule::timeout_free(&problem, n))
        .collect();
    let global = ack_schedule::schedule(&problem, Search::GlobalMinimum).map_err(invalid)?;
    let forward = ack_schedule::schedule(&problem, Search::StepForward).map_err(invalid)?;
    // The only error left for a valid problem: no n is timeout-free.
    let on_time = ack_schedule::schedule(&problem, Search::TimeoutFree).ok();
    let value = serde_json::json!({
        "step_forward": ack_schedule::step_forward(&problem),
        "global_minimum": ack_schedule::global_minimum(&problem),
        "final_rto": final_rto,
        "stretch_time": stretch_time,
        "timeout_free": timeout_free,
        "schedule": global,
        "step_forward_schedule": forward,
        "timeout_free_minimum": ack_schedule::timeout_free_minimum(&problem),
        "timeout_free_schedule": on_time,
    });
    serde_json::to_string(&value)
        .map_err(|e| NativeRunError::new_err(format!("cannot encode the schedule: {e}")))
}

/// Runs the emulator's command line in this process (`args` as after
/// `rtolab-emu`: `["emulate", "SCENARIO.toml", "--json"]`) and returns its
/// exit status. The GIL is released for the whole run. The emulator takes
/// over SIGINT, SIGTERM and SIGHUP: the first ends the run cleanly, a
/// second exits the process with status 130.
#[pyfunction]
fn emulate_main(py: Python<'_>, args: Vec<String>) -> u8 {
    let code = py.detach(|| rtolab_emu::cli::main("rtolab", args.into_iter().map(Into::into)));
    // The emulator has handled a Ctrl-C already (the run ended cleanly);
    // Python's own handler, chained behind it, would raise
    // KeyboardInterrupt on return. Run it now and drop that exception.
    let _ = py.check_signals();
    code
}

#[pymodule]
fn _rtolab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DEFAULT_STALL_EVENTS",
        rtolab_sim::limits::DEFAULT_STALL_EVENTS,
    )?;
    m.add(
        "OUTPUT_NAMES",
        rtolab_sim::scenario::OUTPUT_NAMES
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>(),
    )?;
    m.add("ScenarioError", m.py().get_type::<NativeScenarioError>())?;
    m.add("RunError", m.py().get_type::<NativeRunError>())?;
    m.add("RunStopped", m.py().get_type::<NativeRunStopped>())?;
    m.add("CaptureError", m.py().get_type::<NativeCaptureError>())?;
    m.add_function(wrap_pyfunction!(validate_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(report_index, m)?)?;
    m.add_function(wrap_pyfunction!(metric_columns, m)?)?;
    m.add_function(wrap_pyfunction!(write_metric_table, m)?)?;
    m.add_function(wrap_pyfunction!(default_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(read_capture, m)?)?;
    m.add_function(wrap_pyfunction!(read_wlan_capture, m)?)?;
    m.add_function(wrap_pyfunction!(capture::read_tcp_segments, m)?)?;
    m.add_function(wrap_pyfunction!(shipped_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(policy_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(kind_catalog, m)?)?;
    m.add_function(wrap_pyfunction!(ack_pacing, m)?)?;
    m.add_function(wrap_pyfunction!(emulate_main, m)?)?;
    Ok(())
}
