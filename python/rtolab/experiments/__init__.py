"""Experiments that ``rtolab reproduce`` runs, registered per system.

Each system (``foundation`` for the simulator itself, later one per
published scheme) registers its experiments here: an :class:`Experiment`
names its runs (scenario, seed, label) and, optionally, checks that turn
the results into pass/fail verdicts, and the study's claims beside our
numbers (:class:`Claim`), which its report shows first. ``rtolab reproduce SYSTEM`` runs every
experiment of a system and writes a report; ``rtolab reproduce`` alone lists
what is registered.

A system adds its experiments with a module in this package that calls
:func:`register` at import (every module here is imported on first use), or
from another package through the ``rtolab.experiments`` entry-point group
(the entry point names a module to import)::

    from rtolab.experiments import Experiment, ExperimentRun, register

    register(Experiment(
        system="uip-rto",
        name="fixed-vs-adaptive",
        title="uIP's fixed RTO against RFC 6298",
        description="...",
        runs=lambda: [ExperimentRun("fixed", "uip-fixed.toml", seed=s) for s in (1, 2, 3)],
    ))
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import pkgutil
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtolab import outdir
from rtolab.errors import ExperimentError, ResultError, RtolabError, read_json_file

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from rtolab.api import Result, ScenarioSource

#: The manifest a reproduction writes at the top of its output directory.
MANIFEST = "reproduce.json"
#: Entry-point group through which other packages add experiments.
ENTRY_POINT_GROUP = "rtolab.experiments"
#: Written in a run's directory once the run (and its analysis) succeeded:
#: its key, so that a reproduction started again (after Ctrl-C, say) keeps
#: the runs already done with the same scenario, seed and options.
DONE_FILE = "reproduce-run.json"
#: The families the standard figures of a run draw (:func:`rtolab.plots.run_figures`),
#: which a reproduction's report shows for one run of each scenario.
RUN_FIGURE_FAMILIES = (
    "packet_received_bins",
    "packet_dropped",
    "tcp_state",
    "tcp_rtt_sample",
    "tcp_rto_armed",
    "tcp_cwnd",
    "tcp_ssthresh",
    "tcp_retransmission",
    "parent_changed",
)


@dataclass(frozen=True)
class Kept:
    """What a reproduction keeps of its runs beyond their reports and the
    tables and figures computed from them: every trace family
    (``rtolab reproduce --traces``) and the captures (``--capture``), of
    every run or of the runs with the ``seeds`` given (``--keep-seeds``)."""

    traces: bool = False
    captures: bool = False
    #: The seeds whose runs keep what ``traces`` and ``captures`` ask for
    #: (``None``: every run's).
    seeds: tuple[int, ...] | None = None

    def _chosen(self, seed: int | None) -> bool:
        return self.seeds is None or seed in self.seeds

    def families(
        self, experiment: Experiment, *, figures: bool = True, seed: int | None = None
    ) -> list[str] | None:
        """The trace families a run of an ``experiment`` records (``None``:
        all): those its analysis reads, and those of the standard figures
        when the report draws them from this run (``figures``)."""
        if (self.traces and self._chosen(seed)) or experiment.trace_families is None:
            return None
        return sorted({*experiment.trace_families, *(RUN_FIGURE_FAMILIES if figures else ())})

    def keeps_captures(self, experiment: Experiment, seed: int | None = None) -> bool:
        """Whether a run of ``experiment`` with ``seed`` keeps its captures
        once the checks have read them."""
        return experiment.keep_captures or (self.captures and self._chosen(seed))

    def keeps_traces(self, experiment: Experiment, seed: int | None = None) -> bool:
        """Whether a run of ``experiment`` with ``seed`` keeps its trace
        tables once the checks have read them."""
        return experiment.keep_traces or (self.traces and self._chosen(seed))

    def sentence(self) -> str:
        """What was kept, in words, for the reproduction's report."""
        which = (
            "every run"
            if self.seeds is None
            else "the runs with seed " + ", ".join(str(s) for s in self.seeds)
        )
        kept = " and ".join(
            word
            for word, on in (("every trace family", self.traces), ("its captures", self.captures))
            if on
        )
        more = f"; {which} kept {kept}" if kept else ""
        return (
            "Each run kept its report and the trace families its analysis reads (the "
            "standard figures' only in the run the report draws them from, and only that "
            "run's trace tables where the experiment's tables come from per-run summaries) "
            "and its captures unless its experiment's checks computed what they show from "
            f"them{more} (rtolab reproduce --traces, --capture and --keep-seeds keep more)."
        )


@dataclass(frozen=True)
class ExperimentRun:
    """One run of an experiment: a scenario (file, TOML, shipped name or
    :class:`rtolab.Scenario`), a seed, and a label unique in the experiment."""

    label: str
    scenario: ScenarioSource
    seed: int
    duration: float | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """A verdict on an experiment's results."""

    name: str
    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Claim:
    """A claim of the study an experiment reproduces, beside our number.

    ``statement`` gives the claim with its source ("… (bridge spec §3.1)"),
    ``ours`` what our runs measured (computed from them, never typed in),
    ``holds`` whether our number agrees: ``True``, ``False``, or ``None``
    when the runs cannot tell. Unlike a :class:`Check`, a claim that does
    not hold is a finding about the study, not a failure of the
    reproduction. An experiment's ``checks`` function returns its claims
    among its checks."""

    statement: str
    ours: str
    holds: bool | None


@dataclass(frozen=True)
class Experiment:
    """A reproducible experiment of one system."""

    system: str
    name: str
    title: str
    description: str
    runs: Callable[[], Sequence[ExperimentRun]]
    #: Verdicts on the results: :class:`Check` objects, and the study's
    #: :class:`Claim` objects beside our numbers.
    checks: Callable[[dict[str, Result]], Sequence[Check | Claim]] | None = None
    #: HTML sections the reproduction report adds for this experiment,
    #: given the reproduction's output directory.
    report: Callable[[Path], Sequence[str]] | None = None
    #: Options of ``rtolab reproduce`` it reads through :func:`option`
    #: (e.g. ``seeds``, ``duration``).
    options: tuple[str, ...] = ()
    #: Whether its runs go to Dask worker processes, as a sweep's do.
    parallel: bool = False
    #: Work done on the worker right after each run, given the run's result
    #: and its :attr:`ExperimentRun.params` (for instance reading its traces
    #: into a small summary file in the run's directory); it must be a
    #: module-level function, so that workers can import it.
    analyse: Callable[[Result, dict[str, Any]], None] | None = None
    #: The trace families its ``analyse``, checks and report read
    #: (docs/traces.md). A reproduction records only these and
    #: :data:`RUN_FIGURE_FAMILIES` unless ``rtolab reproduce --traces``;
    #: ``None`` records every family.
    trace_families: tuple[str, ...] | None = None
    #: Whether its runs' captures stay once its checks have read them; when
    #: ``False`` (what it shows is computed from them by then) they are
    #: removed unless ``rtolab reproduce --capture``.
    keep_captures: bool = True
    #: Whether its runs' trace tables stay once its checks have run; when
    #: ``False`` (its tables come from summaries its ``analyse`` wrote)
    #: only the first run's stay, for the report's figures, and those of
    #: :attr:`traces_read`, unless ``rtolab reproduce --traces``.
    keep_traces: bool = True
    #: With ``keep_traces`` ``False``: the labels of the runs whose trace
    #: tables its checks read, given the results (chosen from the
    #: summaries: the best and worst run, say). They keep them; one kept
    #: from an earlier reproduction into the same directory without them
    #: runs again before the checks.
    traces_read: Callable[[dict[str, Result]], Iterable[str]] | None = None

    @property
    def key(self) -> str:
        """``system/name``."""
        return f"{self.system}/{self.name}"


_REGISTRY: dict[str, Experiment] = {}
_loaded = False
#: The options of the reproduction under way (see :func:`option`).
_OPTIONS: dict[str, Any] = {}
#: The output directory of the reproduction under way (``"out"``), which
#: its experiments' tables and figures are written below.
_ROOT: dict[str, Path] = {}


def option(name: str, default: Any) -> Any:
    """The value of ``rtolab reproduce --NAME`` for the reproduction under
    way, or ``default`` when it was not given."""
    value = _OPTIONS.get(name)
    return default if value is None else value


def system_dir(results: dict[str, Result]) -> Path | None:
    """A system's output directory, ``<out>/<system>``, from any of its
    experiment's runs (``<out>/<system>/<experiment>/<run>``)."""
    for result in results.values():
        if result.out_dir is not None:
            return result.out_dir.parent.parent
    return None


def _place(path: Path) -> tuple[Path, Path]:
    """The output directory ``path`` is written below and its name there:
    the reproduction under way's, else the file's own directory (see
    :mod:`rtolab.outdir`)."""
    root = _ROOT.get("out")
    if root is not None and path.is_relative_to(root):
        return root, path.relative_to(root)
    return outdir.open_root(path.parent), Path(path.name)


def write_table(frame: pd.DataFrame, path: Path) -> None:
    """Writes a results table as CSV, making its directory."""
    outdir.write_with(*_place(path), lambda file: frame.to_csv(file, index=False))


def save_figure(fig: Figure, path: Path) -> None:
    """Saves a figure as PNG, making its directory, and frees it."""
    import matplotlib.pyplot as plt

    outdir.save_figure(fig, *_place(path), dpi=110)
    plt.close(fig)


def figure_html(png: Path, directory: Path) -> str:
    """A report's ``<figure>`` for a PNG below the reproduction's
    ``directory``, embedded (the page stands alone, as run and sweep
    reports do) and captioned with its name and where the file is."""
    import base64
    import html

    rel = html.escape(png.relative_to(directory).as_posix())
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    caption = f"{html.escape(png.stem)} (<code>{rel}</code>)"
    return (
        f'<figure><img alt="{html.escape(png.stem)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{caption}</figcaption></figure>"
    )


def register(experiment: Experiment) -> Experiment:
    """Adds an experiment (replacing one with the same system and name)."""
    _REGISTRY[experiment.key] = experiment
    return experiment


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        entry.load()


def experiments(system: str | None = None) -> list[Experiment]:
    """Registered experiments, optionally of one system, sorted by key."""
    _load()
    found = [e for e in _REGISTRY.values() if system is None or e.system == system]
    return sorted(found, key=lambda e: e.key)


def systems() -> list[str]:
    """Systems with at least one registered experiment."""
    return sorted({e.system for e in experiments()})


def select(target: str) -> list[Experiment]:
    """The experiments ``target`` names: ``all``, a system, or ``system/name``."""
    if target == "all":
        chosen = experiments()
    elif "/" in target:
        _load()
        chosen = [_REGISTRY[target]] if target in _REGISTRY else []
    else:
        chosen = experiments(target)
    if not chosen:
        known = ", ".join(systems()) or "none"
        raise ExperimentError(
            f"no experiments registered for {target!r}; available: {known} (or all)"
        )
    return chosen


@dataclass
class RunRecord:
    """What a reproduction recorded for one run."""

    system: str
    experiment: str
    label: str
    scenario: str
    seed: int
    out_dir: str
    status: str
    error: str | None
    wall_s: float
    params: dict[str, Any] = field(default_factory=dict)
    #: CPU seconds of the run and its ``analyse`` (0 for a run kept from
    #: before, as its ``wall_s``).
    cpu_s: float = 0.0
    #: Whether it was kept from a reproduction before into the same
    #: directory rather than run (its times are then 0).
    reused: bool = False


@dataclass
class Timing:
    """Wall and CPU seconds an experiment took: its runs, their analysis
    and its checks (``wall_s``, ``cpu_s``), and the report's section on it
    (``report_wall_s``, ``report_cpu_s``, once ``rtolab reproduce`` wrote
    the report). CPU time adds this process's and that of the worker
    processes for the runs they did."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    report_wall_s: float | None = None
    report_cpu_s: float | None = None


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and by the child processes
    it has waited for (a capture reader, say)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class Reproduction:
    """The outcome of :func:`reproduce`: one record per run and the checks."""

    out_dir: Path
    runs: list[RunRecord] = field(default_factory=list)
    checks: dict[str, list[Check]] = field(default_factory=dict)
    #: The study's claims beside our numbers, per experiment.
    claims: dict[str, list[Claim]] = field(default_factory=dict)
    wall_s: float = 0.0
    #: What the runs kept besides their reports.
    kept: Kept = field(default_factory=Kept)
    #: CPU seconds of the whole reproduction, worker processes included.
    cpu_s: float = 0.0
    #: What each experiment took, by key.
    times: dict[str, Timing] = field(default_factory=dict)
    #: Disk space (bytes, in the file system's blocks, as ``du``) and
    #: files each system's directory holds once its checks are done.
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Wall and CPU seconds of writing the report, when it was written.
    report_s: tuple[float, float] | None = None

    def system_times(self) -> dict[str, dict[str, Any]]:
        """Per system: its experiments' times added up, its runs (and
        how many were kept from before), and its size on disk."""
        systems: dict[str, dict[str, Any]] = {}
        for record in self.runs:
            entry = systems.setdefault(
                record.system,
                {"runs": 0, "reused": 0, "wall_s": 0.0, "cpu_s": 0.0},
            )
            entry["runs"] += 1
            entry["reused"] += record.reused
        for key, timing in self.times.items():
            entry = systems.setdefault(
                key.split("/")[0], {"runs": 0, "reused": 0, "wall_s": 0.0, "cpu_s": 0.0}
            )
            entry["wall_s"] += timing.wall_s
            entry["cpu_s"] += timing.cpu_s
            if timing.report_wall_s is not None and timing.report_cpu_s is not None:
                entry["report_wall_s"] = entry.get("report_wall_s", 0.0) + timing.report_wall_s
                entry["report_cpu_s"] = entry.get("report_cpu_s", 0.0) + timing.report_cpu_s
        for system, (disk, files) in self.sizes.items():
            systems.setdefault(system, {}).update(disk_bytes=disk, files=files)
        return systems

    @property
    def failed(self) -> list[RunRecord]:
        """Runs that did not complete."""
        return [r for r in self.runs if r.status != "ok"]

    @property
    def failed_checks(self) -> list[tuple[str, Check]]:
        """Checks that did not pass, with their experiment's key."""
        return [(k, c) for k, cs in self.checks.items() for c in cs if not c.passed]

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON form."""
        return {
            "out_dir": str(self.out_dir),
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "report": (
                None
                if self.report_s is None
                else {"wall_s": self.report_s[0], "cpu_s": self.report_s[1]}
            ),
            "systems": self.system_times(),
            "kept": {
                "traces": self.kept.traces,
                "captures": self.kept.captures,
                "seeds": None if self.kept.seeds is None else list(self.kept.seeds),
            },
            "runs": [r.__dict__ for r in self.runs],
            "checks": {
                k: [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in cs]
                for k, cs in self.checks.items()
            },
            "claims": {
                k: [{"statement": c.statement, "ours": c.ours, "holds": c.holds} for c in cs]
                for k, cs in self.claims.items()
            },
            "experiments": {
                e.key: {
                    "title": e.title,
                    "description": e.description,
                    **self.times.get(e.key, Timing()).__dict__,
                }
                for e in experiments()
                if e.key in {f"{r.system}/{r.experiment}" for r in self.runs}
            },
        }

    def record_report(
        self, total: tuple[float, float], sections: dict[str, tuple[float, float]]
    ) -> None:
        """Records the wall and CPU seconds of writing the report, in all
        and of each experiment's section, and writes the manifest again."""
        self.report_s = total
        for key, (wall, cpu) in sections.items():
            timing = self.times.setdefault(key, Timing())
            timing.report_wall_s, timing.report_cpu_s = wall, cpu
        self.write()

    def write(self) -> Path:
        """Writes the manifest, :data:`MANIFEST`, into the output directory."""
        return outdir.write_text(
            self.out_dir, MANIFEST, json.dumps(self.to_dict(), indent=2, default=str) + "\n"
        )

    @classmethod
    def load(cls, directory: str | Path) -> Reproduction:
        """Reads a reproduction back from its output directory."""
        out = Path(directory)
        data = read_json_file(out / MANIFEST)
        try:
            return cls(
                out_dir=out,
                runs=[RunRecord(**r) for r in data.get("runs", [])],
                checks={k: [Check(**c) for c in cs] for k, cs in data.get("checks", {}).items()},
                claims={k: [Claim(**c) for c in cs] for k, cs in data.get("claims", {}).items()},
                wall_s=float(data.get("wall_s", 0.0)),
                # Written before outputs were reduced: everything was kept.
                kept=_kept_of(data.get("kept", {"traces": True, "captures": True})),
                cpu_s=float(data.get("cpu_s", 0.0)),
                # Written before times were recorded: none.
                times={
                    key: Timing(**{f.name: e.get(f.name) for f in fields(Timing)})
                    for key, e in data.get("experiments", {}).items()
                    if "wall_s" in e
                },
                sizes={
                    system: (int(entry["disk_bytes"]), int(entry["files"]))
                    for system, entry in data.get("systems", {}).items()
                    if "disk_bytes" in entry
                },
                report_s=(
                    None
                    if not data.get("report")
                    else (float(data["report"]["wall_s"]), float(data["report"]["cpu_s"]))
                ),
            )
        except (TypeError, ValueError, AttributeError):
            # Records of the wrong shape: the manifest was edited or damaged.
            raise ResultError(str(out / MANIFEST), "garbled: not a reproduction manifest") from None


def _kept_of(data: dict[str, Any]) -> Kept:
    seeds = data.get("seeds")
    return Kept(
        traces=bool(data.get("traces", False)),
        captures=bool(data.get("captures", False)),
        seeds=None if seeds is None else tuple(int(s) for s in seeds),
    )


def check_options(chosen: Sequence[Experiment], options: dict[str, Any]) -> None:
    """Raises :class:`ExperimentError` for a given option that none of the
    ``chosen`` experiments reads."""
    taken = {name for e in chosen for name in e.options}
    unused = sorted(k for k, v in options.items() if v is not None and k not in taken)
    if unused:
        names = ", ".join(f"--{k}" for k in unused)
        raise ExperimentError(f"{names}: not an option of the experiments chosen")


def execute_run(
    scenario: ScenarioSource,
    seed: int,
    run_dir: str,
    duration: float | None,
    params: dict[str, Any],
    analyse: Callable[[Result, dict[str, Any]], None] | None = None,
    trace_families: Sequence[str] | None = None,
) -> tuple[str, str | None, str, float, float]:
    """Runs one experiment run into ``run_dir`` (in this process or on a
    Dask worker), recording the ``trace_families`` given (default: all;
    none: no trace), then ``analyse``; returns status, error, scenario
    name, wall time and CPU time (of this process: a worker runs one task
    at a time)."""
    from rtolab.api import run

    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        result = run(
            scenario,
            seed=seed,
            out=run_dir,
            duration=duration,
            # No family named records none (an empty list would record all).
            traces="none" if trace_families is not None and not trace_families else "full",
            trace_families=trace_families or None,
        )
        if analyse is not None:
            analyse(result, params)
        status, error, name = "ok", None, result.name
    except RtolabError as err:
        status, error, name = "failed", str(err), str(scenario)[:60]
    return status, error, name, time.perf_counter() - t0, time.process_time() - cpu0


def figure_runs(experiment: Experiment, specs: Sequence[ExperimentRun]) -> set[str]:
    """The labels of the runs whose standard figures a reproduction's report
    draws: the first run of an experiment with a report of its own, else
    the first run of each scenario."""
    if experiment.report is not None:
        return {specs[0].label} if specs else set()
    from rtolab.api import scenario_text

    first: dict[str, str] = {}
    for spec in specs:
        first.setdefault(scenario_text(spec.scenario), spec.label)
    return set(first.values())


def run_key(
    spec: ExperimentRun,
    trace_families: Sequence[str] | None = None,
    captures_kept: bool = True,
) -> str:
    """What identifies a run's outputs: a hash of its scenario text, seed,
    duration and parameters (runs are deterministic), and of what it keeps
    when that is less than everything: the trace families it records, and
    whether its captures stay."""
    import hashlib

    from rtolab.api import scenario_text

    parts: list[Any] = [scenario_text(spec.scenario), spec.seed, spec.duration, spec.params]
    if trace_families is not None or not captures_kept:
        parts.append([None if trace_families is None else sorted(trace_families), captures_kept])
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _done_before(run_dir: Path, key: str) -> tuple[Any, ...] | None:
    """The recorded outcome of a run already done into ``run_dir`` with
    ``key``, as :func:`execute_run` returns it; ``None`` if there is none."""
    try:
        data = json.loads((run_dir / DONE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    # A run whose report was replaced (by a link, say) runs again.
    metrics = run_dir / "metrics.json"
    if metrics.is_symlink() or not metrics.is_file():
        return None
    # So does one whose captures were removed after its checks read them:
    # the checks of this reproduction read them again.
    from rtolab.api import Result

    try:
        files = Result.load(run_dir).files
    except ResultError:
        return None
    if any(f.suffix == ".pcap" and not f.is_file() for f in files):
        return None
    return ("ok", None, str(data.get("scenario", "")), 0.0, 0.0)


def disk_usage(directory: Path) -> tuple[int, int]:
    """The disk space ``directory`` takes, in bytes of the file system's
    blocks (as ``du`` counts it, directories included), and its files."""
    used, files = 0, 0
    for root, dirs, names in os.walk(directory):
        for name in (*dirs, *names):
            info = os.lstat(os.path.join(root, name))
            used += info.st_blocks * 512
            files += stat.S_ISREG(info.st_mode)
    return used, files


def _remove_captures(results: Iterable[Result]) -> None:
    """Removes the runs' captures (their checks have read them)."""
    for result in results:
        if result.out_dir is not None:
            for pcap in result.pcaps:
                outdir.remove(result.out_dir, pcap.name)


def _has_traces(result: Result) -> bool:
    """Whether a run still has the trace tables (or file) it wrote."""
    where = result.trace_dir or result.trace_file
    return where is not None and where.exists()


def _remove_traces(results: Iterable[Result]) -> None:
    """Removes the runs' trace tables (their summaries hold what the
    experiment's tables need)."""
    from rtolab.api import TRACES_DIR

    for result in results:
        if result.out_dir is not None:
            outdir.remove(result.out_dir, TRACES_DIR)


def reproduce(
    target: str,
    out: str | Path,
    *,
    on_start: Callable[[int], None] | None = None,
    on_result: Callable[[RunRecord], None] | None = None,
    options: dict[str, Any] | None = None,
    workers: int | None = None,
    kept: Kept | None = None,
) -> Reproduction:
    """Runs every experiment ``target`` names (see :func:`select`) into
    ``out/<system>/<experiment>/<label>/`` and writes ``out/reproduce.json``.

    Each run records the trace families its experiment reads and leaves
    its captures once the checks have read them, unless ``kept`` asks for
    every family or the captures (:class:`Kept`).

    ``options`` (``rtolab reproduce --seeds``, ``--duration``) go to the
    experiments that read them. The runs of experiments marked ``parallel``
    go to ``workers`` local Dask worker processes (default: one per core;
    ``0``: this process), the others run here in turn. Runs are
    deterministic; a run that fails is recorded with its error and the
    others go on. Runs done before into ``out`` with the same key
    (:func:`run_key`) are kept, not run again, so a reproduction stopped
    midway resumes where it stopped."""
    import contextlib

    from rtolab.api import Result

    started, cpu_started = time.perf_counter(), cpu_seconds()
    kept = Kept() if kept is None else kept
    chosen = select(target)
    given = {k: v for k, v in (options or {}).items() if v is not None}
    check_options(chosen, given)
    _OPTIONS.clear()
    _OPTIONS.update(given)
    out_dir = outdir.open_root(out)
    _ROOT["out"] = out_dir
    try:
        plan = [(e, r) for e in chosen for r in e.runs()]
        if on_start is not None:
            on_start(len(plan))
        outcome = Reproduction(out_dir=out_dir)
        results: dict[str, dict[str, Result]] = {e.key: {} for e in chosen}

        drawn = {e.key: figure_runs(e, [r for x, r in plan if x is e]) for e in chosen}
        families = {
            (e.key, r.label): kept.families(e, figures=r.label in drawn[e.key], seed=r.seed)
            for e, r in plan
        }
        keys = {
            (e.key, r.label): run_key(r, families[(e.key, r.label)], kept.keeps_captures(e, r.seed))
            for e, r in plan
        }

        def record(
            experiment: Experiment, spec: ExperimentRun, done: tuple[Any, ...], reused: bool
        ) -> None:
            status, error, name, wall, cpu = done
            run_dir = out_dir / experiment.system / experiment.name / spec.label
            if status == "ok":
                results[experiment.key][spec.label] = Result.load(run_dir)
                marker = {"key": keys[(experiment.key, spec.label)], "scenario": name}
                outdir.write_text(run_dir, DONE_FILE, json.dumps(marker) + "\n")
            rec = RunRecord(
                system=experiment.system,
                experiment=experiment.name,
                label=spec.label,
                scenario=name,
                seed=spec.seed,
                out_dir=str(run_dir.relative_to(out_dir)),
                status=status,
                error=error,
                wall_s=wall,
                params=dict(spec.params),
                cpu_s=cpu,
                reused=reused,
            )
            outcome.runs.append(rec)
            if on_result is not None:
                on_result(rec)

        def args(experiment: Experiment, spec: ExperimentRun) -> tuple[Any, ...]:
            # Made here, below the reproduction's directory, without
            # following a link on the way.
            run_dir = outdir.make_dir(
                out_dir, f"{experiment.system}/{experiment.name}/{spec.label}"
            )
            return (
                spec.scenario,
                spec.seed,
                str(run_dir),
                spec.duration,
                dict(spec.params),
                experiment.analyse,
                families[(experiment.key, spec.label)],
            )

        n_workers = (os.cpu_count() or 1) if workers is None else workers
        with contextlib.ExitStack() as pool:
            clients: list[Any] = []

            def client() -> Any:
                # One pool of workers for every parallel experiment,
                # started when the first needs it.
                if not clients:
                    from rtolab.sweeps import dask_client

                    clients.append(pool.enter_context(dask_client(n_workers, None)))
                return clients[0]

            # One experiment after another, each with its checks, so that
            # each one's time is its own.
            for experiment in chosen:
                t0, cpu0 = time.perf_counter(), cpu_seconds()
                worker_cpu = 0.0
                specs = [r for e, r in plan if e is experiment]
                todo = []
                for spec in specs:
                    run_dir = out_dir / experiment.system / experiment.name / spec.label
                    before = _done_before(run_dir, keys[(experiment.key, spec.label)])
                    if before is None:
                        todo.append(spec)
                    else:
                        record(experiment, spec, before, reused=True)
                if todo and experiment.parallel and n_workers > 0:
                    from distributed import as_completed

                    futures = {
                        client().submit(
                            execute_run,
                            *args(experiment, spec),
                            key=f"rtolab-{experiment.key}-{spec.label}",
                        ): spec
                        for spec in todo
                    }
                    for future in as_completed(list(futures)):
                        done = future.result()
                        worker_cpu += done[4]
                        record(experiment, futures[future], done, reused=False)
                else:
                    for spec in todo:
                        record(experiment, spec, execute_run(*args(experiment, spec)), False)
                ran = results[experiment.key]
                ordered = {r.label: ran[r.label] for r in specs if r.label in ran}
                read = (
                    set()
                    if experiment.traces_read is None
                    else set(experiment.traces_read(ordered))
                )
                for spec in specs:
                    if spec.label in read and not _has_traces(ordered[spec.label]):
                        # Its trace tables went after an earlier reproduction's checks.
                        outcome.runs = [
                            r
                            for r in outcome.runs
                            if (r.system, r.experiment, r.label)
                            != (experiment.system, experiment.name, spec.label)
                        ]
                        record(experiment, spec, execute_run(*args(experiment, spec)), False)
                        ordered[spec.label] = ran[spec.label]
                if experiment.checks is not None:
                    verdicts = list(experiment.checks(ordered))
                    outcome.checks[experiment.key] = [v for v in verdicts if isinstance(v, Check)]
                    claims = [v for v in verdicts if isinstance(v, Claim)]
                    if claims:
                        outcome.claims[experiment.key] = claims
                seed_of = {r.label: r.seed for r in specs}
                _remove_captures(
                    result
                    for label, result in ordered.items()
                    if not kept.keeps_captures(experiment, seed_of[label])
                )
                # The report draws its figures from the first run (in plan order).
                first = next(iter(ordered), None)
                _remove_traces(
                    result
                    for label, result in ordered.items()
                    if label != first
                    and label not in read
                    and not kept.keeps_traces(experiment, seed_of[label])
                )
                outcome.times[experiment.key] = Timing(
                    wall_s=time.perf_counter() - t0,
                    cpu_s=cpu_seconds() - cpu0 + worker_cpu,
                )
        # The manifest lists runs in plan order, whatever order they ended in.
        order = {(e.key, r.label): i for i, (e, r) in enumerate(plan)}
        outcome.runs.sort(key=lambda rec: order[(f"{rec.system}/{rec.experiment}", rec.label)])
        for system in dict.fromkeys(e.system for e in chosen):
            outcome.sizes[system] = disk_usage(out_dir / system)
    finally:
        _OPTIONS.clear()
        _ROOT.clear()
    outcome.wall_s = time.perf_counter() - started
    # The worker processes' own CPU time counts once they have ended.
    outcome.cpu_s = cpu_seconds() - cpu_started
    outcome.kept = kept
    outcome.write()
    return outcome
