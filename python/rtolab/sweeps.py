"""Parameter sweeps on Dask, with results in one Parquet dataset.

A sweep file names a base scenario, values to set in it and a number of
seeds::

    # loss.toml
    name = "loss"                  # optional; default: the file's name
    scenario = "p2p-cbr.toml"      # a path (relative to this file) or a shipped name
    seeds = 3                      # seeds 1, 2, 3; or a list: seeds = [1, 7, 42]
    keep_files = false             # optional: keep each run's pcaps and traces

    [set]                          # optional: the same in every run
    duration = "1s"

    [grid]                         # every combination of these values
    "link.ab.loss" = [0.0, 0.01, 0.05]
    "app.cbr.rate" = ["1Mbps", "2Mbps"]

Grid keys are dotted paths into the scenario: the section (``link``,
``app``, ``host``, ``route``, ``capture``), an entry by index (``link.0``)
or name (``link.ab``), then the field. A path may name a table or field the
scenario leaves at its default (``"host_group.0.tcp.rto.policy"``) and a
value may be a whole table (``"host.a.tcp.rto" = [{ policy = "fixed",
rto = "3s" }, { policy = "lim2020" }]``). Each value is checked by the core
before anything runs; errors name the grid entry and the scenario field:
``grid."link.ab.loss"[2]: 1.5: link[0].loss: must be between 0 and 1, got 1.5``.

Every combination x seed is one run with a stable id (a hash of the
scenario text and seed). Runs go to a Dask cluster: a local one by default
(one single-threaded worker process per core), or an existing scheduler
(``scheduler="tcp://host:8786"``, e.g. one started by dask-jobqueue).

As each run finishes, its row is written to ``OUT/runs/<id>.parquet``:
parameters (``param.<path>``, as written; a table as its JSON text) and,
for parameters with units, their numbers (``param_s.<path>`` in seconds,
``param_bps.<path>`` in bit/s, ``param_m.<path>`` in metres), ``seed``, ``status`` (``ok`` or
``failed``), ``error``, ``wall_s`` and every metric of the run report under
its dotted key (``app.sink.received_packets``). The file's key-value
metadata holds the run's key (id, parameters and seed) and a SHA-256 of
the row's values. At the end the rows of the planned runs are gathered in
``OUT/results.parquet``, checked to hold exactly one row per planned run.

Running the same sweep into the same directory resumes it: finished runs
are skipped, failed ones are kept as they are unless ``retry_failed`` is
set. A result file is trusted only if it verifies: its key is the run's and
its checksum matches its values. Runs whose files do not verify (garbled,
edited, or another run's file) run again, and :class:`SweepOutcome` says
which and why (``redone``). Dask re-runs the tasks of a worker that dies,
and runs are deterministic, so nothing is lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import tomllib

from rtolab import api, frames, outdir
from rtolab.errors import (
    MAX_TOML_NESTING,
    RtolabError,
    ScenarioError,
    SweepError,
    read_file,
    toml_nesting,
)
from rtolab.scenario import set_path, toml_text

#: Keys a sweep file may have.
SWEEP_KEYS = ("name", "scenario", "seeds", "set", "grid", "keep_files")
#: Where each finished run's row goes inside the output directory.
RUNS_DIR = "runs"
#: All rows gathered at the end of a sweep.
RESULTS_FILE = "results.parquet"
#: The sweep's description, kept in its output directory.
SPEC_FILE = "sweep.json"
#: The base scenario's text, kept beside it.
BASE_FILE = "base.toml"
#: Where each run's own files go when the sweep keeps them.
FILES_DIR = "files"
#: Prefix of parameter columns.
PARAM_PREFIX = "param."
#: Prefixes of the numeric columns beside a parameter with units, by the
#: family of its unit: ``param_s.link.ab.delay`` is ``"50ms"`` as 0.05.
TYPED_PREFIXES = {"s": "param_s.", "bps": "param_bps.", "m": "param_m."}
#: Key-value metadata of a run's result file: the run's key (JSON of its id,
#: parameters and seed) and the SHA-256 of its row's values.
KEY_METADATA = b"rtolab.run_key"
DIGEST_METADATA = b"rtolab.row_sha256"
#: Environment variable naming a directory where every run execution leaves
#: a marker file (``<id>.<pid>.<ns>.start`` / ``.done``), to audit which runs
#: executed where and how often.
MARKERS_ENV = "RTOLAB_SWEEP_MARKERS"

_BASE_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("run_id", pa.string()),
    ("sweep", pa.string()),
    ("scenario", pa.string()),
    ("seed", pa.uint64()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("wall_s", pa.float64()),
    ("worker", pa.string()),
    ("finished_at", pa.timestamp("ms", tz="UTC")),
    ("out_dir", pa.string()),
)


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: a scenario text, a seed and the values that made it."""

    run_id: str
    params: dict[str, Any]
    seed: int
    scenario: str
    name: str


@dataclass
class Sweep:
    """A parsed sweep file: base scenario (TOML text), fixed values, grid, seeds."""

    name: str
    base: str
    seeds: list[int]
    grid: dict[str, list[Any]] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)
    keep_files: bool = False
    source: Path | None = None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Sweep:
        """Reads and checks a sweep file."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SweepError("sweep", f"no such file: {file}") from None
        except (OSError, UnicodeDecodeError) as err:
            raise SweepError("sweep", f"cannot read {file}: {err}") from None
        return cls.from_toml(text, base_dir=file.parent, default_name=file.stem, source=file)

    @classmethod
    def from_toml(
        cls,
        text: str,
        *,
        base_dir: Path | None = None,
        default_name: str = "sweep",
        source: Path | None = None,
    ) -> Sweep:
        """Parses sweep TOML; scenario paths are relative to ``base_dir``."""
        nesting = toml_nesting(text)
        if nesting > MAX_TOML_NESTING:
            raise SweepError(
                "sweep", f"nested {nesting} levels deep, more than the {MAX_TOML_NESTING} read"
            )
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as err:
            raise SweepError("sweep", f"not valid TOML: {err}") from None
        return cls.from_dict(data, base_dir=base_dir, default_name=default_name, source=source)

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        base_dir: Path | None = None,
        default_name: str = "sweep",
        source: Path | None = None,
    ) -> Sweep:
        """Checks a sweep given as a dict (the TOML file's form)."""
        for key in data:
            if key not in SWEEP_KEYS:
                raise SweepError(key, f"unknown field (expected one of: {', '.join(SWEEP_KEYS)})")
        name = data.get("name", default_name)
        if not isinstance(name, str) or not name.strip():
            raise SweepError("name", "must be a non-empty string")
        if "scenario" not in data:
            raise SweepError("scenario", "missing field: the base scenario to vary")
        base = _base_scenario(data["scenario"], base_dir)
        seeds = _seeds(data.get("seeds", 1))
        fixed = data.get("set", {})
        if not isinstance(fixed, Mapping):
            raise SweepError("set", "must be a table of dotted path = value")
        grid = data.get("grid", {})
        if not isinstance(grid, Mapping):
            raise SweepError("grid", "must be a table of dotted path = [values]")
        keep_files = data.get("keep_files", False)
        if not isinstance(keep_files, bool):
            raise SweepError("keep_files", "must be true or false")
        checked_grid: dict[str, list[Any]] = {}
        for key, values in grid.items():
            where = f'grid."{key}"'
            if not isinstance(values, list) or not values:
                raise SweepError(where, "must be a non-empty array of values")
            if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
                raise SweepError(where, "values repeat")
            checked_grid[key] = _uniform(values)
        sweep = cls(
            name=name,
            base=base,
            seeds=seeds,
            grid=checked_grid,
            fixed=dict(fixed),
            keep_files=keep_files,
            source=source,
        )
        sweep.check()
        return sweep

    def _base_dict(self) -> dict[str, Any]:
        try:
            return tomllib.loads(self.base)
        except (tomllib.TOMLDecodeError, RecursionError) as err:
            raise SweepError("scenario", f"not valid TOML: {err}") from None

    def check(self) -> None:
        """Checks every path and value against the base scenario, in the core.

        Raises :class:`rtolab.SweepError` naming the sweep entry and the
        scenario field."""
        base = self._base_dict()
        try:
            api.validate(self.base)
        except ScenarioError as err:
            raise SweepError("scenario", str(err)) from None
        for key, value in self.fixed.items():
            self._check_value(base, key, value, f'set."{key}"')
        with_fixed = _applied(base, self.fixed, "set")
        for key, values in self.grid.items():
            for i, value in enumerate(values):
                self._check_value(with_fixed, key, value, f'grid."{key}"[{i}]')
        # Combinations can still clash (two values fine alone, not together).
        for combo in self.combinations():
            text = toml_text(_applied(with_fixed, combo, "grid"))
            try:
                api.validate(text)
            except ScenarioError as err:
                raise SweepError(f"grid {_describe(combo)}", str(err)) from None

    @staticmethod
    def _check_value(base: dict[str, Any], key: str, value: Any, where: str) -> None:
        data = json.loads(json.dumps(base))
        try:
            set_path(data, key, value)
        except ScenarioError as err:
            raise SweepError(where, err.message if err.path == key else str(err)) from None
        try:
            api.validate(toml_text(data))
        except ScenarioError as err:
            raise SweepError(where, f"{value!r}: {err}") from None

    def combinations(self) -> list[dict[str, Any]]:
        """Every combination of grid values, in file order (one empty dict without a grid)."""
        keys = list(self.grid)
        return [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*self.grid.values())
        ]

    def runs(self) -> list[RunSpec]:
        """Every run: each combination x each seed, with its stable id."""
        base = _applied(self._base_dict(), self.fixed, "set")
        specs = []
        for combo in self.combinations():
            data = _applied(base, combo, "grid")
            text = toml_text(data)
            for seed in self.seeds:
                specs.append(
                    RunSpec(
                        run_id=run_id(text, seed),
                        params=combo,
                        seed=seed,
                        scenario=text,
                        name=str(data.get("name", "")),
                    )
                )
        return specs

    def describe(self) -> dict[str, Any]:
        """What ``sweep.json`` records."""
        return {
            "name": self.name,
            "seeds": self.seeds,
            "set": self.fixed,
            "grid": self.grid,
            "keep_files": self.keep_files,
            "base_sha256": hashlib.sha256(self.base.encode()).hexdigest(),
            "source": str(self.source) if self.source else None,
        }


def _describe(combo: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k} = {v!r}" for k, v in combo.items()) + "}"


def _applied(base: Mapping[str, Any], values: Mapping[str, Any], section: str) -> dict[str, Any]:
    data = json.loads(json.dumps(base))
    for key, value in values.items():
        try:
            set_path(data, key, value)
        except ScenarioError as err:
            raise SweepError(f'{section}."{key}"', err.message) from None
    return data


def _base_scenario(value: Any, base_dir: Path | None) -> str:
    if not isinstance(value, str) or not value:
        raise SweepError("scenario", "must name a scenario file or a shipped scenario")
    candidate = Path(value)
    if not candidate.is_absolute() and base_dir is not None:
        candidate = base_dir / candidate
    if candidate.is_file():
        return candidate.read_text(encoding="utf-8")
    try:
        return api.scenario_text(value)
    except ScenarioError as err:
        raise SweepError("scenario", err.message) from None


def _seeds(value: Any) -> list[int]:
    if isinstance(value, bool):
        raise SweepError("seeds", "must be a count or a list of seeds")
    if isinstance(value, int):
        if value < 1:
            raise SweepError("seeds", f"must be at least 1, got {value}")
        return list(range(1, value + 1))
    if isinstance(value, list) and value:
        for i, seed in enumerate(value):
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
                raise SweepError(f"seeds[{i}]", f"must be an integer in [0, 2^64), got {seed!r}")
        if len(set(value)) != len(value):
            raise SweepError("seeds", "seeds repeat")
        return list(value)
    raise SweepError("seeds", f"must be a count or a non-empty list of seeds, got {value!r}")


def _uniform(values: list[Any]) -> list[Any]:
    """Mixed integers and floats become floats, so the column has one type."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if numbers and len(numbers) == len(values) and any(isinstance(v, float) for v in values):
        return [float(v) for v in values]
    return list(values)


def run_id(scenario_text: str, seed: int) -> str:
    """The stable id of a run: same scenario text and seed, same id (and result)."""
    digest = hashlib.sha256(f"{scenario_text}\n# seed = {seed}\n".encode())
    return digest.hexdigest()[:16]


def _marker(run: RunSpec, stage: str) -> None:
    directory = os.environ.get(MARKERS_ENV)
    if not directory:
        return
    with contextlib.suppress(OSError):
        Path(directory).mkdir(parents=True, exist_ok=True)
        name = f"{run.run_id}.{os.getpid()}.{time.time_ns()}.{stage}"
        (Path(directory) / name).touch()


def execute(run: RunSpec, files_dir: str | None = None) -> dict[str, Any]:
    """Runs one sweep run (on a Dask worker) and returns its result row.

    A scenario or run error is recorded in the row (``status = "failed"``)
    rather than raised: runs are deterministic, so retrying cannot help.
    """
    _marker(run, "start")
    started = time.perf_counter()
    row: dict[str, Any] = {
        "run_id": run.run_id,
        "scenario": run.name,
        "seed": run.seed,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "out_dir": None,
    }
    try:
        if files_dir is not None:
            out = outdir.make_dir(Path(files_dir), run.run_id)
            report = api.run(run.scenario, seed=run.seed, out=out).report
            row["out_dir"] = str(out)
        else:
            report = api.run_metrics(run.scenario, seed=run.seed)
        row["status"] = "ok"
        row["error"] = None
        row["metrics"] = frames.flat_metrics(report)
    except RtolabError as err:
        row.update(status="failed", error=str(err), metrics={})
    except Exception as err:  # a bug of ours must not sink the whole sweep
        row.update(status="failed", error=f"{type(err).__name__}: {err}", metrics={})
    row["wall_s"] = time.perf_counter() - started
    row["finished_at"] = datetime.now(timezone.utc)
    _marker(run, "done")
    return row


def _arrow_type(values: Sequence[Any]) -> pa.DataType:
    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, bool):
        return pa.bool_()
    if isinstance(sample, int):
        return pa.int64()
    if isinstance(sample, float):
        return pa.float64()
    return pa.string()


def row_table(row: Mapping[str, Any], sweep: Sweep) -> pa.Table:
    """One result row as a one-row Arrow table with a stable schema."""
    columns: dict[str, Any] = {}
    schema: list[pa.Field] = []
    for name, kind in _BASE_COLUMNS:
        value = sweep.name if name == "sweep" else row.get(name)
        columns[name] = [value]
        schema.append(pa.field(name, kind))
    params = row.get("params", {})
    for key, values in sweep.grid.items():
        name = PARAM_PREFIX + key
        columns[name] = [param_value(params.get(key))]
        schema.append(pa.field(name, _arrow_type([param_value(v) for v in values])))
        family = unit_family(values)
        if family is not None:
            typed = TYPED_PREFIXES[family] + key
            columns[typed] = [quantity_in(params.get(key), family)]
            schema.append(pa.field(typed, pa.float64()))
    for key, value in sorted(row.get("metrics", {}).items()):
        columns[key] = [value]
        schema.append(pa.field(key, pa.float64()))
    return pa.Table.from_pydict(columns, schema=pa.schema(schema))


def _write_atomically(table: pa.Table, root: Path, name: str) -> None:
    outdir.write_with(root, name, lambda file: pq.write_table(table, file))


def run_key(run_id: str, params: Mapping[str, Any], seed: int) -> str:
    """What identifies a run's result: its id, parameters and seed, as
    canonical JSON (the same run always gives the same text)."""
    return json.dumps(
        {"run_id": run_id, "params": dict(params), "seed": seed},
        sort_keys=True,
        separators=(",", ":"),
    )


def row_digest(table: pa.Table) -> str:
    """SHA-256 of a result table's column names, types and values, in a
    canonical text form: one changed bit in any value changes it."""
    text = json.dumps(
        [table.schema.names, [str(t) for t in table.schema.types], table.to_pylist()],
        sort_keys=True,
        separators=(",", ":"),
        default=str,  # timestamps
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _sealed(table: pa.Table, key: str) -> pa.Table:
    """The table with its run key and checksum in its metadata."""
    return table.replace_schema_metadata(
        {KEY_METADATA: key.encode(), DIGEST_METADATA: row_digest(table).encode()}
    )


def verify_file(path: Path, expected_key: str | None = None) -> tuple[pa.Table | None, str]:
    """Reads one run's result file and checks it: one row, a checksum that
    matches, a key naming the run of the file's name (and equal to
    ``expected_key`` when given). Returns ``(table, "")`` when it verifies,
    else ``(None, why)``."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        return None, f"unreadable ({type(err).__name__})"
    metadata = table.schema.metadata or {}
    key = metadata.get(KEY_METADATA, b"").decode(errors="replace")
    digest = metadata.get(DIGEST_METADATA, b"").decode(errors="replace")
    if not key or not digest:
        return None, "no run key or checksum"
    if table.num_rows != 1:
        return None, f"{table.num_rows} rows instead of 1"
    if row_digest(table.replace_schema_metadata(None)) != digest:
        return None, "checksum does not match the values"
    try:
        key_run = json.loads(key).get("run_id")
    except (ValueError, AttributeError):
        return None, "garbled run key"
    row_run = table.column("run_id")[0].as_py() if "run_id" in table.column_names else None
    if key_run != path.stem or row_run != path.stem:
        return None, f"holds the result of run {key_run}"
    if expected_key is not None and key != expected_key:
        return None, "run key differs from the planned run's (parameters or seed)"
    return table, ""


@dataclass
class Results:
    """The verified rows of a sweep's output and the files left out."""

    frame: pd.DataFrame
    #: File name (in ``runs/``) → why it was left out.
    rejected: dict[str, str] = field(default_factory=dict)


def _runs_dir(directory: str | os.PathLike[str]) -> Path:
    root = Path(directory)
    runs = root / RUNS_DIR if (root / RUNS_DIR).is_dir() else root
    if not runs.is_dir():
        raise SweepError("results", f"no such directory: {root}")
    return runs


def _frame(tables: list[pa.Table]) -> pd.DataFrame:
    if not tables:
        return pd.DataFrame({name: pd.Series(dtype="object") for name, _ in _BASE_COLUMNS})
    table = pa.concat_tables(
        [t.replace_schema_metadata(None) for t in tables], promote_options="permissive"
    )
    frame = table.to_pandas()
    order = [c for c in frame.columns if c.startswith(PARAM_PREFIX)] + ["seed"]
    return frame.sort_values(order, kind="stable", ignore_index=True, key=_sort_column)


# ----- values with units, in their numeric order -----

#: The unit words of scenario files (rates, durations, distances, as the core
#: reads them) and what one of each is worth in the family's base unit. Only
#: the order of values matters here, so a table of scales is all it takes.
_UNIT_SCALES: dict[str, float] = {
    "bps": 1,
    "bit/s": 1,
    "b/s": 1,
    "kbps": 1e3,
    "kbit/s": 1e3,
    "kb/s": 1e3,
    "mbps": 1e6,
    "mbit/s": 1e6,
    "mb/s": 1e6,
    "gbps": 1e9,
    "gbit/s": 1e9,
    "gb/s": 1e9,
    "ns": 1,
    "us": 1e3,
    "µs": 1e3,
    "ms": 1e6,
    "s": 1e9,
    "mm": 1,
    "cm": 10,
    "m": 1e3,
    "km": 1e6,
}
_QUANTITY = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\s\d.]*)\s*$")


def quantity(value: Any) -> float | None:
    """A parameter value as a number for ordering: numbers as they are,
    ``"50ms"`` or ``"1.5 Mbit/s"`` in their family's base unit; ``None``
    for anything else (words, booleans)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(str(value))
    if not match:
        return None
    number, unit = float(match.group(1)), match.group(2).lower()
    if not unit:
        return number
    scale = _UNIT_SCALES.get(unit)
    return number * scale if scale is not None else None


#: The family of each unit word, for the typed parameter columns: rates in
#: bit/s, durations in seconds, distances in metres.
_FAMILIES: dict[str, str] = {
    **dict.fromkeys(
        ("bps", "bit/s", "b/s", "kbps", "kbit/s", "kb/s", "mbps", "mbit/s", "mb/s"), "bps"
    ),
    **dict.fromkeys(("gbps", "gbit/s", "gb/s"), "bps"),
    **dict.fromkeys(("ns", "us", "µs", "ms", "s"), "s"),
    **dict.fromkeys(("mm", "cm", "m", "km"), "m"),
}
#: A family's unit in the base unit :func:`quantity` gives (bit/s, ns, mm).
_FAMILY_UNIT = {"bps": 1.0, "s": 1e9, "m": 1e3}


def _family(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value)
    return _FAMILIES.get(match.group(2).lower()) if match else None


def unit_family(values: Sequence[Any]) -> str | None:
    """``"s"``, ``"bps"`` or ``"m"`` when every value is a quantity with a
    unit of that family (``["5ms", "1s"]``), else ``None``."""
    families = {_family(v) for v in values}
    return families.pop() if len(families) == 1 else None


def quantity_in(value: Any, family: str) -> float | None:
    """A value with a unit of ``family`` in the family's unit (seconds,
    bit/s, metres): ``"50ms"`` is 0.05."""
    number = quantity(value)
    if number is None or _family(value) != family:
        return None
    return number / _FAMILY_UNIT[family]


def param_value(value: Any) -> Any:
    """A parameter value as its column holds it: a table or an array as
    its JSON text, anything else as it is."""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(", ", ": "))
    return value


def _sort_column(column: pd.Series) -> pd.Series:
    """Sort key of a parameter column: its numeric value when every value
    has one ("5ms" before "50ms"), else the values as they are."""
    # Text columns are `object` or, from pandas 3 on, `str`: anything that
    # is not already a number is read for its quantity.
    if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return column
    numbers = column.map(quantity)
    if column.notna().sum() != numbers.notna().sum():
        return column.astype(str)
    return numbers.astype(float)


def ordered_values(values: Sequence[Any]) -> list[Any]:
    """Grid values in numeric order when all have one, else as given."""
    numbers = [quantity(v) for v in values]
    if any(n is None for n in numbers):
        return list(values)
    return [v for _, v in sorted(zip(numbers, values, strict=True), key=lambda p: p[0])]


# ----- what the runs of each cell of the grid add up to -----

#: Outcomes of a run in a summary: its workload done, not done by the end
#: of the run (an app reports ``completed = false``), or the run failed.
FINISHED = "finished"
UNFINISHED = "unfinished"
FAILED = "failed"


def unfinished_apps(frame: pd.DataFrame) -> pd.Series:
    """Per row, the apps of the run that report their workload not done
    (``app.NAME.completed`` = 0), comma-separated; empty when none."""
    flags = [c for c in frame.columns if str(c).startswith("app.") and c.endswith(".completed")]
    names = pd.Series([""] * len(frame), index=frame.index, dtype=object)
    for column in flags:
        app = column.removeprefix("app.").removesuffix(".completed")
        undone = frame[column] == 0
        names[undone] = names[undone].map(lambda n, a=app: f"{n}, {a}" if n else a)
    return names


def outcomes(frame: pd.DataFrame) -> pd.Series:
    """Per row: :data:`FINISHED`, :data:`UNFINISHED` or :data:`FAILED`."""
    result = pd.Series([FINISHED] * len(frame), index=frame.index, dtype=object)
    if not len(frame):
        return result
    result[unfinished_apps(frame) != ""] = UNFINISHED
    result[frame["status"] != "ok"] = FAILED
    return result


@dataclass(frozen=True)
class Aggregate:
    """One metric over the finished runs of a cell: how many runs have a
    value, their mean and range; ``why`` says why there is none."""

    n: int
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    why: str = ""


@dataclass
class Cell:
    """The runs of one combination of parameter values."""

    params: dict[str, Any]
    #: Runs the sweep plans for this combination (one per seed).
    planned: int
    #: Seeds of the runs that finished their workload.
    finished: list[int] = field(default_factory=list)
    #: Seed → apps whose workload was not done by the end of the run.
    unfinished: dict[int, str] = field(default_factory=dict)
    #: Seed → error of the runs that failed.
    failed: dict[int, str] = field(default_factory=dict)
    #: Metric → aggregate over the finished runs.
    metrics: dict[str, Aggregate] = field(default_factory=dict)

    @property
    def n(self) -> str:
        """Finished runs out of those planned, e.g. ``"2/3"``."""
        return f"{len(self.finished)}/{self.planned}"

    @property
    def missing(self) -> int:
        """Planned runs with no verified result (not run yet, or rejected)."""
        return self.planned - len(self.finished) - len(self.unfinished) - len(self.failed)


def _no_value_reason(cell: Cell) -> str:
    if cell.finished:
        return "not measured in the finished runs"
    parts = []
    if cell.unfinished:
        parts.append(f"{len(cell.unfinished)} unfinished")
    if cell.failed:
        parts.append(f"{len(cell.failed)} failed")
    if cell.missing:
        parts.append(f"{cell.missing} not run")
    return "no finished run (" + ", ".join(parts) + ")"


def summarize(
    frame: pd.DataFrame,
    metrics: Sequence[str],
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | None = None,
) -> list[Cell]:
    """The cells of a sweep's results: for every combination of parameter
    values (all of ``grid`` when given, else those in ``frame``), its runs
    by outcome and each of ``metrics`` over the runs that finished their
    workload, as mean and min..max. A run that failed or did not finish is
    counted and named in its cell, never averaged in; ``seeds`` (runs
    planned per cell) defaults to the most runs any cell has. Cells follow
    the numeric order of the parameter values."""
    params = [c for c in frame.columns if str(c).startswith(PARAM_PREFIX)]
    if grid is not None:
        params = [PARAM_PREFIX + k for k in grid]
    outcome = outcomes(frame)
    undone = unfinished_apps(frame)
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for index in frame.index:
        key = tuple(_plain(frame.at[index, p]) if p in frame else None for p in params)
        groups.setdefault(key, []).append(index)
    if grid is not None:
        ordered = [[param_value(v) for v in ordered_values(list(v))] for v in grid.values()]
        keys = [tuple(_plain(v) for v in combo) for combo in itertools.product(*ordered)]
        keys += [k for k in groups if k not in keys]
    else:
        keys = sorted(groups, key=lambda k: tuple(_order_key(v) for v in k))
    planned = seeds if seeds is not None else max((len(v) for v in groups.values()), default=0)
    cells = []
    for key in keys:
        rows = groups.get(key, [])
        cell = Cell(
            params=dict(zip([p.removeprefix(PARAM_PREFIX) for p in params], key, strict=True)),
            planned=max(planned, len(rows)),
        )
        for index in rows:
            seed = int(frame.at[index, "seed"])
            if outcome[index] == FAILED:
                cell.failed[seed] = str(frame.at[index, "error"] or "")
            elif outcome[index] == UNFINISHED:
                cell.unfinished[seed] = str(undone[index])
            else:
                cell.finished.append(seed)
        done = frame.loc[[i for i in rows if outcome[i] == FINISHED]]
        for metric in metrics:
            values = (
                pd.to_numeric(done[metric], errors="coerce").dropna()
                if metric in done
                else pd.Series(dtype=float)
            )
            if values.empty:
                cell.metrics[metric] = Aggregate(0, why=_no_value_reason(cell))
            else:
                cell.metrics[metric] = Aggregate(
                    len(values), float(values.mean()), float(values.min()), float(values.max())
                )
        cells.append(cell)
    return cells


#: Metrics a summary shows first, by the end of their dotted key: what a
#: transfer achieved, then what it cost.
SUMMARY_METRICS = (
    "goodput_bps",
    "completion_time_ns",
    "latency_mean_ns",
    "received_packets",
    "lost",
    "retransmissions",
    "timeouts",
    "delay_mean_ns",
)


def summary_metrics(frame: pd.DataFrame) -> list[str]:
    """The apps' metrics worth summarising, in :data:`SUMMARY_METRICS`
    order: those that have a value in some run and differ between runs (a
    metric equal everywhere says nothing about the parameters)."""
    chosen = []
    for ending in SUMMARY_METRICS:
        for column in frame.columns:
            name = str(column)
            if not (name.startswith("app.") and name.rsplit(".", 1)[-1] == ending):
                continue
            values = pd.to_numeric(frame[column], errors="coerce").dropna()
            if len(values) and values.nunique() > 1:
                chosen.append(name)
    return chosen


def _plain(value: Any) -> Any:
    """A cell key from a DataFrame value: NaN as None, NumPy scalars as Python."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _order_key(value: Any) -> tuple[int, float, str]:
    number = quantity(value)
    return (0, number, "") if number is not None else (1, 0.0, str(value))


def read_results(directory: str | os.PathLike[str]) -> Results:
    """Every result file of a sweep (its output directory, or its ``runs``
    folder) that verifies, as one DataFrame sorted by parameters and seed,
    with the files that do not verify and why."""
    tables = []
    rejected: dict[str, str] = {}
    for file in sorted(_runs_dir(directory).glob("*.parquet")):
        table, why = verify_file(file)
        if table is None:
            rejected[file.name] = why
        else:
            tables.append(table)
    return Results(_frame(tables), rejected)


def load_results(directory: str | os.PathLike[str]) -> pd.DataFrame:
    """All verified rows of a sweep (its output directory, or its ``runs``
    folder) as one DataFrame, sorted by parameters and seed; files that do
    not verify are left out (:func:`read_results` names them)."""
    return read_results(directory).frame


@dataclass
class SweepOutcome:
    """What :func:`sweep` did: how many runs it ran, skipped, and where the results are."""

    out_dir: Path
    total: int
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    #: Runs whose result file did not verify, and ran again: id → why.
    redone: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    workers: int = 0

    @property
    def results_file(self) -> Path:
        """``results.parquet``: every row of the sweep in one file."""
        return self.out_dir / RESULTS_FILE

    @property
    def results(self) -> pd.DataFrame:
        """Every row of the sweep (see :func:`load_results`)."""
        return load_results(self.out_dir)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "out_dir": str(self.out_dir),
            "total": self.total,
            "ran": self.ran,
            "skipped": self.skipped,
            "failed": self.failed,
            "redone": self.redone,
            "wall_s": self.wall_s,
            "workers": self.workers,
            "results": str(self.results_file),
        }


#: Called as each run finishes: (row, runs finished so far, runs to do).
ProgressCallback = Callable[[dict[str, Any], int, int], None]


def _prepare_out(sweep: Sweep, out: Path) -> None:
    outdir.make_dir(out, RUNS_DIR)
    # Runs killed while writing left their temporaries; no run writes now.
    outdir.remove_temporaries(out, RUNS_DIR)
    outdir.remove_temporaries(out)
    spec_path = out / SPEC_FILE
    description = sweep.describe()
    if spec_path.is_file():
        try:
            earlier = json.loads(read_file(spec_path, follow=False))
        except (OSError, ValueError, RecursionError):
            earlier = {}
        if isinstance(earlier, dict) and earlier.get("base_sha256") not in (
            None,
            description["base_sha256"],
        ):
            raise SweepError(
                "out",
                f"{out} holds a sweep of another base scenario; choose another output directory",
            )
    outdir.write_text(out, SPEC_FILE, json.dumps(description, indent=2, default=str) + "\n")
    outdir.write_text(out, BASE_FILE, sweep.base)


def _finished(out: Path, plan: Sequence[RunSpec]) -> tuple[dict[str, str], dict[str, str]]:
    """For the planned runs with a result file: run id → status of those
    whose file verifies, and run id → why of those whose file does not."""
    done: dict[str, str] = {}
    rejected: dict[str, str] = {}
    for run in plan:
        path = out / RUNS_DIR / f"{run.run_id}.parquet"
        if not path.exists():
            continue
        table, why = verify_file(path, run_key(run.run_id, run.params, run.seed))
        if table is None:
            rejected[run.run_id] = why
        else:
            done[run.run_id] = str(table.column("status")[0].as_py())
    return done, rejected


def _unguarded_main() -> tuple[str, int] | None:
    """The script and line that start local workers at the top level of the
    script, outside ``if __name__ == "__main__":``, if they do. Worker
    processes start by importing the script again (Python's "spawn"), which
    would start the sweep again in each of them."""
    import ast

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    # `python -m package` mains are not imported again; notebooks have no file.
    if main is None or path is None or (spec is not None and spec.name.endswith("__main__")):
        return None
    frame = sys._getframe()
    while frame is not None and not (
        frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"
    ):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return None
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and "__name__" in ast.unparse(node.test)
            and "__main__" in ast.unparse(node.test)
            and node.lineno <= line <= (node.end_lineno or node.lineno)
        ):
            return None
    return path, line


@contextlib.contextmanager
def dask_client(workers: int, scheduler: str | None) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="5s")
        except (OSError, TimeoutError) as err:
            raise SweepError("scheduler", f"cannot reach {scheduler}: {err}") from None
        with client:
            yield client
        return
    unguarded = _unguarded_main()
    if unguarded is not None:
        script, line = unguarded
        raise SweepError(
            "workers",
            f"{script}:{line} starts local worker processes, which import the script "
            'again: put that code under `if __name__ == "__main__":` (or use workers=0)',
        )
    with _closed_quietly() as stack:
        with _stops_held():
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                # Without a dashboard the scheduler still serves a few HTTP
                # routes, on port 8787 unless told otherwise: any free port,
                # so that two sweeps (or another Dask program) can run side
                # by side.
                scheduler_kwargs={"dashboard_address": ":0"},
                silence_logs=logging.ERROR,
                # Quiet once they close: see rtolab._worker.
                preload=["rtolab._worker"],
            )
            stack.enter_context(cluster)
            client = stack.enter_context(Client(cluster))
        # Every worker takes part from the first task on.
        client.wait_for_workers(workers, timeout=60)
        yield client


#: Signals that stop a sweep (the command maps SIGTERM to Ctrl-C's stop).
_STOPS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _stops_held() -> Iterator[None]:
    """Local workers start with Ctrl-C blocked, and a stop asked for
    meanwhile is acted on once they are up.

    A terminal sends Ctrl-C to every process of its foreground group,
    worker processes included, where it raised tracebacks mid-task. The
    threads Dask starts here to spawn workers inherit this thread's signal
    mask, and the workers too (a mask survives fork and exec), for as long
    as they live: Ctrl-C reaches only this process, which stops the sweep
    and closes the cluster. Stopping Dask's start-up half-way left objects
    that its exit handler then failed on, so SIGINT and SIGTERM are held
    until it ends, and raised again then."""
    # Started first: starting it unblocks SIGINT in the thread that does.
    resource_tracker.ensure_running()
    held: list[int] = []
    previous: dict[int, Any] = {}
    # Python runs signal handlers, and lets them be set, in the main thread only.
    if threading.current_thread() is threading.main_thread():
        for signum in _STOPS:
            if signal.getsignal(signum) is not None:
                previous[signum] = signal.signal(signum, lambda s, _: held.append(s))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        # A SIGINT that came while blocked is handled (held) as it is unblocked.
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


@contextlib.contextmanager
def _closed_quietly() -> Iterator[contextlib.ExitStack]:
    """An exit stack for a cluster and its client that closes them without
    a word when a sweep is stopped: workers cut off mid-task make Dask log
    errors and ``CommClosedError`` tracebacks, which say nothing to whoever
    pressed Ctrl-C."""
    with contextlib.ExitStack() as stack:
        try:
            yield stack
        except BaseException:
            before = logging.root.manager.disable
            logging.disable(logging.CRITICAL)
            try:
                stack.close()
            finally:
                logging.disable(before)
            raise


def sweep(
    spec: Sweep | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    retry_failed: bool = False,
    on_result: ProgressCallback | None = None,
    on_start: Callable[[int, int], None] | None = None,
) -> SweepOutcome:
    """Runs a sweep (a :class:`Sweep` or a sweep file) into ``out``.

    ``workers`` local worker processes (default: one per core); ``0`` runs
    everything in this process without Dask. ``scheduler`` connects to an
    existing Dask scheduler instead. Finished runs already in ``out`` are
    skipped; failed ones too, unless ``retry_failed``. ``on_start(todo,
    total)`` is called once the plan is known, ``on_result(row, done, todo)``
    after each run.
    """
    started = time.perf_counter()
    if not isinstance(spec, Sweep):
        spec = Sweep.load(spec)
    if workers is not None and workers < 0:
        raise SweepError("workers", f"must be 0 or more, got {workers}")
    out_dir = outdir.open_root(out)
    _prepare_out(spec, out_dir)
    plan = spec.runs()
    finished, rejected = _finished(out_dir, plan)
    todo: list[RunSpec] = []
    outcome = SweepOutcome(out_dir=out_dir, total=len(plan), redone=rejected)
    for run in plan:
        status = finished.get(run.run_id)
        if status == "ok" or (status is not None and not retry_failed):
            outcome.skipped.append(run.run_id)
        else:
            todo.append(run)
    if on_start is not None:
        on_start(len(todo), len(plan))
    files_dir = str(outdir.make_dir(out_dir, FILES_DIR)) if spec.keep_files else None
    planned = {run.run_id: run for run in todo}

    def record(row: dict[str, Any]) -> None:
        run = planned[row["run_id"]]
        row["params"] = run.params
        table = _sealed(row_table(row, spec), run_key(run.run_id, run.params, run.seed))
        _write_atomically(table, out_dir, f"{RUNS_DIR}/{row['run_id']}.parquet")
        outcome.ran.append(row["run_id"])
        if row["status"] != "ok":
            outcome.failed.append(row["run_id"])
        if on_result is not None:
            on_result(row, len(outcome.ran), len(todo))

    n_workers = (os.cpu_count() or 1) if workers is None else workers
    if todo and n_workers == 0 and scheduler is None:
        outcome.workers = 0
        for run in todo:
            record(execute(run, files_dir))
    elif todo:
        from distributed import as_completed

        with dask_client(max(n_workers, 1), scheduler) as client:
            outcome.workers = len(client.scheduler_info().get("workers", {}))
            futures = [
                client.submit(execute, run, files_dir, key=f"rtolab-run-{run.run_id}", retries=2)
                for run in todo
            ]
            for future in as_completed(futures):
                record(future.result())
    _gather(out_dir, plan)
    outcome.wall_s = time.perf_counter() - started
    return outcome


def _gather(out_dir: Path, plan: Sequence[RunSpec]) -> None:
    """Writes ``results.parquet`` from the planned runs' verified files;
    raises :class:`SweepError` naming the runs without exactly one row."""
    tables = []
    missing = []
    for run in plan:
        path = out_dir / RUNS_DIR / f"{run.run_id}.parquet"
        table, why = verify_file(path, run_key(run.run_id, run.params, run.seed))
        if table is None:
            missing.append(f"{run.run_id} ({why})")
        else:
            tables.append(table.replace_schema_metadata(None))
    if missing:
        found = f"{len(missing)} planned runs have no verified row: {_few(missing)}"
        raise SweepError("results", found)
    if not tables:
        return
    combined = pa.concat_tables(tables, promote_options="permissive")
    # Each file verified as its own run's, so a repeat means the plan holds
    # one run twice; checked all the same, as the promise is one row per run.
    counts = Counter(combined.column("run_id").to_pylist())
    repeated = sorted(i for i, n in counts.items() if n > 1)
    if repeated:
        raise SweepError("results", f"runs with more than one row: {_few(repeated)}")
    _write_atomically(combined, out_dir, RESULTS_FILE)


def _few(items: Sequence[str], limit: int = 5) -> str:
    """The first ``limit`` items and how many more, for a one-line message."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
