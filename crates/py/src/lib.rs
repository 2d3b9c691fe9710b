//! Python bindings of rtolab, imported as `rtolab._rtolab`.
//!
//! This is the only crate that touches pyo3. It stays thin: every function
//! takes plain values (TOML text, numbers, paths), runs the Rust core with the
//! GIL released, and hands results back as JSON text that the Python package
//! turns into its own objects. Keeping the boundary to strings means the
//! Python side never holds Rust state and the core's types can change freely.

mod capture;

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use rtolab_sim::{run_scenario, RunOptions, Scenario, ScenarioError};
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

/// Runs a scenario given as TOML text and returns the run report as JSON.
#[pyfunction]
#[pyo3(signature = (text, seed=None, out_dir=None, duration_s=None, write_traces=true))]
fn run(
    py: Python<'_>,
    text: &str,
    seed: Option<u64>,
    out_dir: Option<PathBuf>,
    duration_s: Option<f64>,
    write_traces: bool,
) -> PyResult<String> {
    let scenario = parse(text)?;
    if let Some(d) = duration_s {
        if !(d.is_finite() && d > 0.0) {
            return Err(NativeScenarioError::new_err((
                "duration".to_string(),
                format!("must be a positive number of seconds, got {d}"),
            )));
        }
    }
    let options = RunOptions {
        seed,
        out_dir,
        duration: duration_s.map(SimDuration::from_secs_f64),
        write_traces,
    };
    let report = py
        .detach(|| run_scenario(&scenario, &options))
        .map_err(|e| NativeRunError::new_err(e.to_string()))?;
    serde_json::to_string(&report)
        .map_err(|e| NativeRunError::new_err(format!("cannot encode report: {e}")))
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

#[pymodule]
fn _rtolab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ScenarioError", m.py().get_type::<NativeScenarioError>())?;
    m.add("RunError", m.py().get_type::<NativeRunError>())?;
    m.add("CaptureError", m.py().get_type::<NativeCaptureError>())?;
    m.add_function(wrap_pyfunction!(validate_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(default_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(read_capture, m)?)?;
    m.add_function(wrap_pyfunction!(shipped_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(policy_catalog, m)?)?;
    Ok(())
}
