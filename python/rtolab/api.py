"""The Python API: run and validate scenarios, get results as DataFrames."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib

from rtolab import _native, _rtolab, outdir, runreport
from rtolab.errors import (
    OutputError,
    ResultError,
    ScenarioError,
    json_field,
    native_errors,
    read_file,
    read_json_file,
)
from rtolab.runreport import Report, release_freed_memory
from rtolab.scenario import Scenario

if TYPE_CHECKING:
    # pandas is imported by the tables' own module when one is asked for:
    # running a scenario or writing its metrics does without it.
    import pandas as pd

#: What :func:`run` and :func:`validate` accept: a path to a TOML file, TOML
#: text, the name of a shipped scenario, or a :class:`rtolab.Scenario`.
ScenarioSource = str | os.PathLike[str] | Scenario

#: The copy of the scenario a run writes next to its results.
SCENARIO_FILE = "scenario.toml"
#: The report every run writes (same name as the core's).
METRICS_FILE = "metrics.json"
#: The directory of a run's Parquet trace tables.
TRACES_DIR = "traces"
#: Trace levels, from none to every event.
TRACE_LEVELS = ("none", "summary", "full")


def shipped_scenarios() -> dict[str, str]:
    """The scenarios shipped with rtolab: name → TOML text (``default``,
    ``p2p-cbr``, ...). :func:`run` accepts these names directly."""
    return _native.shipped_scenarios()


def scenario_text(scenario: ScenarioSource) -> str:
    """Return the TOML text of ``scenario``.

    A :class:`Scenario` is serialised; a string spanning several lines or
    containing ``=`` is TOML itself; any other string or path names a file,
    or failing that a shipped scenario (``"p2p-cbr"``).
    """
    if isinstance(scenario, Scenario):
        return scenario.to_toml()
    return _native.source_text(scenario)


def default_scenario() -> str:
    """The TOML text of the embedded default scenario (what ``rtolab run`` runs)."""
    return _rtolab.default_scenario()


def validate(scenario: ScenarioSource) -> dict[str, Any]:
    """Check a scenario without running it; returns a short summary of what it holds.

    Raises :class:`rtolab.ScenarioError` naming the offending field.
    """
    return _native.validate_text(scenario_text(scenario))


@dataclass(frozen=True, eq=False)
class Result:
    """What one run produced: its report, the files it wrote, and the same
    data as pandas DataFrames (read on first use).

    * :attr:`packets`: every packet at every capture point;
    * :attr:`traces`: every trace event, nested fields as dotted columns;
    * :attr:`metrics`: the run report in long form (scope, name, part,
      metric, value); :meth:`flat_metrics` gives the same as a dict.

    :attr:`report` reads like the dict of ``metrics.json``; it keeps the
    report's text and decodes a value (the list of apps, say) when it is
    first asked for.
    """

    report: Mapping[str, Any]
    out_dir: Path | None
    files: list[Path] = field(default_factory=list)
    scenario: str | None = None

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Result:
        """The result of an earlier run, read back from its output directory.

        Raises :class:`rtolab.ResultError` naming the file when
        ``metrics.json`` is missing or garbled."""
        out = Path(directory)
        metrics_path = out / METRICS_FILE
        if not metrics_path.is_file() and not metrics_path.is_symlink():
            raise ResultError(str(out), f"no {METRICS_FILE}: not the output of a run")
        report = _read_report(metrics_path)
        names = report.get("files", [])
        seed = report.get("seed")
        # The fields a Result relies on, checked here so that a garbled file
        # is named now rather than failing somewhere later.
        if not isinstance(names, list) or not all(isinstance(f, str) for f in names):
            raise ResultError(str(metrics_path), "garbled: files is not a list of names")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ResultError(str(metrics_path), "garbled: no integer seed")
        for key in ("nodes", "links", "apps", "flows"):
            if key not in report:
                continue
            if isinstance(report, Report):
                lists = report.lists_objects(key) or report.count(key) == 0
            else:
                items = report[key]
                lists = isinstance(items, list) and all(isinstance(i, dict) for i in items)
            if not lists:
                raise ResultError(str(metrics_path), f"garbled: {key} is not a list of objects")
        files = [out / f for f in names]
        scenario_path = out / SCENARIO_FILE
        scenario = None
        if scenario_path.is_file() or scenario_path.is_symlink():
            try:
                scenario = read_file(scenario_path, follow=False).decode("utf-8")
            except OSError as err:
                raise ResultError(str(scenario_path), f"cannot read: {err.strerror}") from None
            except UnicodeDecodeError:
                raise ResultError(str(scenario_path), "unreadable or not UTF-8 text") from None
        if scenario is not None and scenario_path not in files:
            files.append(scenario_path)
        return cls(report=report, out_dir=out, files=files, scenario=scenario)

    @property
    def name(self) -> str:
        """The scenario's name."""
        return str(self.report.get("name", ""))

    @property
    def seed(self) -> int:
        """The seed the run used (the scenario's, or the one given to :func:`run`)."""
        return int(self.report["seed"])

    @property
    def duration_s(self) -> float:
        """Simulated time covered, seconds."""
        return float(self.report.get("duration_s", 0.0))

    @property
    def pcaps(self) -> list[Path]:
        """Every pcap file the run wrote, one per capture point, but those
        removed since (a reproduction keeps captures only on request)."""
        return [f for f in self.files if f.suffix == ".pcap" and os.path.lexists(f)]

    @property
    def trace_file(self) -> Path | None:
        """The JSON-lines trace file, when traces were written as JSON lines."""
        return next((f for f in self.files if f.name == "traces.jsonl"), None)

    @property
    def trace_dir(self) -> Path | None:
        """The directory of Parquet trace tables (one per event family), when
        traces were written as tables (see :func:`rtolab.frames.trace_events`)."""
        return next((f for f in self.files if f.name == TRACES_DIR), None)

    @property
    def metrics_file(self) -> Path | None:
        """``metrics.json``, when the run wrote files."""
        return next((f for f in self.files if f.name == METRICS_FILE), None)

    @cached_property
    def capture_specs(self) -> dict[str, dict[str, Any]]:
        """The scenario's ``[[capture]]`` tables by file name."""
        if self.scenario is None:
            return {}
        try:
            data = tomllib.loads(self.scenario)
        except (tomllib.TOMLDecodeError, RecursionError):
            return {}
        return {
            str(c["file"]): dict(c)
            for c in data.get("capture", [])
            if isinstance(c, dict) and "file" in c
        }

    @cached_property
    def packets(self) -> pd.DataFrame:
        """One row per packet per capture point, ordered by time: ``time_s``,
        ``capture`` (file name without ``.pcap``), ``host``, ``link``,
        ``src``/``dst``, ``protocol``, ports, ``seq``/``ack``, ``flags``,
        ``window``, ``len`` (IP datagram bytes), ``payload_len``,
        ``segment_len`` and the TCP options. Decoded by the core's wire
        parser."""
        from rtolab import frames

        return frames.packets(self.pcaps, self.capture_specs)

    @cached_property
    def traces(self) -> pd.DataFrame:
        """One row per trace event (see :func:`rtolab.frames.traces`): the whole
        trace in memory; :func:`rtolab.frames.trace_events` reads one kind of
        event, only the columns asked for."""
        from rtolab import frames

        return frames.traces(self.trace_dir or self.trace_file, self.report)

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """The run report as a long table (see :func:`rtolab.frames.metrics`)."""
        from rtolab import frames

        return frames.metrics(self.report)

    def flat_metrics(self) -> dict[str, float]:
        """Every number of the report under a dotted key, e.g.
        ``app.sink.received_packets``."""
        return runreport.flat_metrics(self.report)


def _read_report(path: Path) -> Mapping[str, Any]:
    """The report in a ``metrics.json``, kept as text. What the core's
    reader does not take is refused naming the file: read as JSON for the
    error (not JSON, not an object), else a number no run writes."""
    try:
        return Report(read_file(path, follow=False))
    except OSError:
        return read_json_file(path)
    except ValueError as err:
        refused = str(err)
    found = json_field(read_json_file(path), _unwritable)
    if found is not None:
        where, value = found
        what = (
            f"an integer of {len(str(abs(value)))} digits, out of range"
            if isinstance(value, int)
            else f"{value}, not a finite number"
        )
        raise ResultError(str(path), f"garbled: field {where}: {what}")
    raise ResultError(str(path), f"garbled: {refused}")


def _unwritable(value: Any) -> bool:
    """A JSON number the core neither writes nor reads: NaN, an infinity,
    or an integer beyond a double's range."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and abs(value) > sys.float_info.max


def run(
    scenario: ScenarioSource,
    *,
    seed: int | None = None,
    out: str | os.PathLike[str] | None = None,
    duration: float | None = None,
    traces: bool | str = "full",
    trace_families: Sequence[str] | None = None,
    trace_format: str = "parquet",
    max_events: int | None = None,
    max_wall: float | None = None,
    max_output: int | None = None,
    max_stall_events: int | None = None,
) -> Result:
    """Run a scenario in the simulator.

    ``scenario`` is a path to a TOML file, TOML text, a shipped scenario's
    name or a :class:`rtolab.Scenario`. ``seed`` overrides the scenario's
    seed, ``duration`` (seconds) its duration. Pcaps, the trace,
    ``metrics.json`` and a copy of the scenario go to ``out``; without
    ``out`` they go to a temporary directory that is removed with the
    returned :class:`Result`. The GIL is released while the
    simulation runs.

    ``traces`` is the trace level: ``"full"`` (every event, the default),
    ``"summary"`` (no per-packet events; received bytes binned over time
    instead) or ``"none"`` (``True`` and ``False`` mean ``"full"`` and
    ``"none"``). ``trace_families`` records only the families named
    (``"tcp_cwnd"``) or prefixed (``"tcp"``). ``trace_format`` is
    ``"parquet"`` (one table per family in ``traces/``) or ``"jsonl"``
    (``traces.jsonl``). docs/traces.md lists the families.

    ``max_events``, ``max_wall`` (seconds of wall time) and ``max_output``
    (bytes of captures and traces) stop the run early, with
    :class:`rtolab.RunStopped`; Ctrl-C stops it within milliseconds with
    ``KeyboardInterrupt``. Either way the files written so far are valid and
    ``metrics.json`` says ``"complete": false``. ``max_stall_events`` (default
    one million) is how many events in a row may fire at one instant of
    simulated time before the run fails with :class:`rtolab.RunStopped`
    (``stopped_by`` ``"stalled"``), naming the component and the event.

    Raises :class:`rtolab.ScenarioError` (naming the field) for a bad
    scenario and :class:`rtolab.RunError` when the run fails.
    """
    text = scenario_text(scenario)
    if seed is not None and (isinstance(seed, bool) or not 0 <= seed < 2**64):
        raise ScenarioError("seed", f"must be an integer in [0, 2^64), got {seed}")
    for name, limit, least in (
        ("max_events", max_events, 0),
        ("max_output", max_output, 0),
        ("max_stall_events", max_stall_events, 1),
    ):
        if limit is not None and (isinstance(limit, bool) or not least <= limit < 2**64):
            raise ScenarioError(name, f"must be an integer in [{least}, 2^64), got {limit}")
    level = ("full" if traces else "none") if isinstance(traces, bool) else traces
    if level not in TRACE_LEVELS:
        raise ScenarioError("traces", f"must be one of {', '.join(TRACE_LEVELS)}, got {traces!r}")
    if isinstance(trace_families, str):
        # A lone string would be read letter by letter.
        trace_families = trace_families.split(",")
    temporary = out is None
    if out is None:
        out_dir = Path(tempfile.mkdtemp(prefix="rtolab-run-"))
    else:
        try:
            out_dir = outdir.open_root(out)
        except OutputError as err:
            raise ScenarioError("out", str(err)) from None
        prepare_out_dir(out_dir, text)
    # Written first: a directory with it is a run's, even one stopped
    # before its end, and what it captured can be found and cleared.
    scenario_path = outdir.write_text(out_dir, SCENARIO_FILE, text)
    try:
        with native_errors():
            report = Report(
                _rtolab.run(
                    text,
                    seed=seed,
                    out_dir=str(out_dir),
                    duration_s=duration,
                    write_traces=level != "none",
                    trace_level=level,
                    trace_families=list(trace_families) if trace_families is not None else None,
                    trace_format=trace_format,
                    max_events=max_events,
                    max_wall_s=max_wall,
                    max_output=max_output,
                    max_stall_events=max_stall_events,
                )
            )
    except BaseException as err:
        if temporary:
            shutil.rmtree(out_dir, ignore_errors=True)
        elif isinstance(err, ScenarioError):
            # Refused before it wrote anything: no copy of it either.
            outdir.remove(out_dir, SCENARIO_FILE)
        raise
    finally:
        release_freed_memory()
    files = [Path(f) for f in report.get("files", [])]
    files.append(scenario_path)
    result = Result(
        report=report,
        out_dir=None if temporary else out_dir,
        files=files,
        scenario=text,
    )
    if temporary:
        # The files go when the last reference to the result does.
        weakref.finalize(result, shutil.rmtree, str(out_dir), True)
    return result


def _capture_files(text: str) -> set[str]:
    """The capture file names of a scenario's TOML text (none when it cannot
    be read: the names only say what an earlier run may have left)."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return set()
    captures = data.get("capture", [])
    if not isinstance(captures, list):
        return set()
    return {
        c["file"]
        for c in captures
        if isinstance(c, dict) and isinstance(c.get("file"), str) and "/" not in c["file"]
    }


def prepare_out_dir(out: Path, text: str, *, simulated: bool = True) -> None:
    """Readies the output directory ``out`` for a run of the scenario
    ``text``: what a run owns there goes, so that nothing of an earlier run
    is read as this one's, and nothing else is touched.

    A run owns the names it writes (``scenario.toml``, ``metrics.json``,
    ``metrics.parquet``, ``traces/``, ``traces.jsonl``, ``plots/``,
    ``report.html`` and its captures). In the directory of an earlier run
    (one with ``scenario.toml`` or ``metrics.json``) it also owns that run's
    captures, and temporary files a killed run left. Elsewhere, a name the
    run would write that something already holds is refused with
    :class:`rtolab.OutputError`, rather than removed. An earlier run is
    cleared only for a scenario the simulator validates (unless not
    ``simulated``: an emulation's scenario, which the emulator checks)."""
    try:
        entries = set(os.listdir(out))
    except OSError as err:
        raise OutputError(str(out), f"cannot list: {err.strerror}") from None
    owned = set(_rtolab.OUTPUT_NAMES) | _capture_files(text)
    earlier = [
        n
        for n in (SCENARIO_FILE, METRICS_FILE)
        if n in entries and (out / n).is_file() and not (out / n).is_symlink()
    ]
    if not earlier:
        taken = sorted(owned & entries)
        if taken:
            raise OutputError(
                str(out),
                f"holds {', '.join(taken)}, which no run wrote here (no {SCENARIO_FILE} or "
                f"{METRICS_FILE}); choose an empty or new directory, or remove them",
            )
        return
    if SCENARIO_FILE in earlier:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            owned |= _capture_files((out / SCENARIO_FILE).read_text(encoding="utf-8"))
    if METRICS_FILE in earlier:
        with contextlib.suppress(OSError, ValueError, RecursionError):
            listed = json.loads((out / METRICS_FILE).read_text(encoding="utf-8")).get("files")
            if isinstance(listed, list):
                owned |= {f for f in listed if isinstance(f, str) and "/" not in f}
    clear = sorted(n for n in owned & entries if n not in ("", ".", ".."))
    if clear and simulated:
        # An earlier run is not cleared away for a scenario that cannot run.
        validate(text)
    for name in clear:
        outdir.remove(out, name)
    outdir.remove_temporaries(out)


def run_metrics(
    scenario: ScenarioSource, *, seed: int | None = None, duration: float | None = None
) -> Mapping[str, Any]:
    """Run a scenario without writing any file; returns the run report only
    (read like a dict, see :class:`Result`).

    The fastest way to get numbers (what sweeps use)."""
    text = scenario_text(scenario)
    try:
        with native_errors():
            return Report(
                _rtolab.run(text, seed=seed, out_dir=None, duration_s=duration, write_traces=False)
            )
    finally:
        release_freed_memory()
