"""A run report kept as the JSON text the core wrote, read on demand.

A report lists every node, link, app, middlebox and TCP connection of a
run; with hundreds of thousands of apps its text takes a hundred megabytes
and the same as Python objects ten times that. :class:`Report` is a
read-only mapping over the text: each top-level value is decoded on first
use, lists can be counted without being decoded, and the long metrics table
is built by the core as columns (:func:`metric_table`), without a Python
object per number.

Nothing here imports pandas: ``rtolab run`` writes ``metrics.parquet`` with
pyarrow alone.
"""

from __future__ import annotations

import ctypes
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from rtolab import _rtolab
from rtolab.errors import ResultError

if TYPE_CHECKING:
    import pyarrow as pa

#: Bytes of a report's text written out at a time by :meth:`Report.write_json`.
_COPY_BYTES = 1 << 20

#: Rows of the metrics table turned into flat keys at a time.
_FLAT_ROWS = 1 << 18

#: Columns of the long metrics table.
METRIC_COLUMNS: tuple[str, ...] = ("scope", "name", "kind", "part", "metric", "value")


class Report(Mapping[str, Any]):
    """A run report read from its JSON text (``bytes``): a mapping like the
    dict ``json.loads`` would give, whose values are decoded on first use.

    Raises ``ValueError`` when the text is not one JSON object."""

    def __init__(self, text: bytes) -> None:
        index = _rtolab.report_index(text)
        self._text = text
        self._spans = {key: (start, end) for key, start, end, _, _ in index}
        self._arrays = {key: (length, objects) for key, _, _, length, objects in index}
        self._values: dict[str, Any] = {}
        self._columns: dict[str, Any] | None = None
        self._table: pa.Table | None = None

    def __getitem__(self, key: str) -> Any:
        if key not in self._values:
            start, end = self._spans[key]
            self._values[key] = json.loads(self._text[start:end])
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)

    def __repr__(self) -> str:
        shown = {k: self[k] for k, (n, _) in self._arrays.items() if n is None}
        counts = ", ".join(f"{k}: {n}" for k, (n, _) in self._arrays.items() if n is not None)
        return f"<Report {shown!r} [{counts}]>"

    @property
    def text(self) -> bytes:
        """The JSON text."""
        return self._text

    def count(self, key: str) -> int | None:
        """How many elements the list under ``key`` has, without decoding it
        (``None`` when there is no such key or it is not a list)."""
        entry = self._arrays.get(key)
        return entry[0] if entry else None

    def lists_objects(self, key: str) -> bool:
        """Whether ``key`` holds a list of objects (the items of a scope)."""
        entry = self._arrays.get(key)
        return bool(entry and entry[1])

    def write_json(self, out: BinaryIO, **changes: Any) -> None:
        """Writes the report to ``out`` as one line of JSON (UTF-8), with
        the given keys replaced or added, copying the values' text rather
        than decoding it."""

        def dumps(value: Any) -> bytes:
            return json.dumps(value).encode("utf-8")

        out.write(b"{")
        for i, (key, (start, end)) in enumerate(self._spans.items()):
            out.write(b", " * bool(i) + dumps(key) + b": ")
            if key in changes:
                out.write(dumps(changes.pop(key)))
                continue
            view = memoryview(self._text)
            for at in range(start, end, _COPY_BYTES):
                out.write(view[at : min(at + _COPY_BYTES, end)])
        for key, value in changes.items():
            out.write(b", " + dumps(key) + b": " + dumps(value))
        out.write(b"}\n")

    def _metric_columns(self) -> dict[str, Any]:
        """The core's columns of the long metrics table (see
        :func:`metric_table`), computed once."""
        if self._columns is None:
            self._columns = _rtolab.metric_columns(self._text)
            release_freed_memory()
        return self._columns

    def metric_table(self) -> pa.Table:
        """:func:`metric_table` of this report, computed once."""
        if self._table is None:
            columns = self._metric_columns()
            self._table = _table(columns)
            # The table holds the rows now; the names stay for item_names.
            for key in ("scope", "name", "part", "metric", "value"):
                columns.pop(key)
        return self._table


def release_freed_memory() -> None:
    """Hands memory the core freed back to the system. The C allocator
    (glibc) keeps freed heap pages for reuse, and a run of hundreds of
    thousands of apps frees hundreds of megabytes of them (its parsed
    scenario, its simulator, the work of reading its report) that the
    process would hold until it exits. A few microseconds when there is
    little; nothing where the C library has no ``malloc_trim``."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by ``None`` (JSON has
    neither; a report's ``null`` is a NaN in the table all the same)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _report_text(report: Mapping[str, Any]) -> bytes:
    """Any report mapping as the JSON text the core reads."""
    if isinstance(report, Report):
        return report._text
    try:
        text = json.dumps(report, default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(report), default=str)
    return text.encode("utf-8")


def _columns(report: Mapping[str, Any]) -> dict[str, Any]:
    """The core's metric columns of any report mapping."""
    if isinstance(report, Report):
        return report._metric_columns()
    try:
        return _rtolab.metric_columns(_report_text(report))
    except ValueError as err:
        raise ResultError("report", str(err)) from None


def metric_table(report: Mapping[str, Any]) -> pa.Table:
    """A run report as the long metrics table, in Arrow form: one row per
    number, ``scope`` (run, node, link, app, middlebox, flow), ``name``,
    ``kind``, ``part`` (e.g. ``directions[0]`` of a link, else null),
    ``metric`` and ``value`` (NaN where the core reported none)."""
    if isinstance(report, Report):
        return report.metric_table()
    return _table(_columns(report))


def _strings(buffers: tuple[int, bytes | None, bytes, bytes]) -> pa.Array:
    """An Arrow string array from the core's buffers (no object per string)."""
    import pyarrow as pa

    length, valid, offsets, data = buffers
    return pa.Array.from_buffers(
        pa.large_string(),
        length,
        [valid and pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)],
    )


def _numbers(kind: pa.DataType, data: bytes) -> pa.Array:
    """An Arrow array of numbers from their little-endian bytes."""
    import pyarrow as pa

    return pa.Array.from_buffers(kind, len(data) // kind.byte_width, [None, pa.py_buffer(data)])


def _table(columns: dict[str, Any]) -> pa.Table:
    # Built from buffers only: converting Python or NumPy values would make
    # pyarrow import pandas, which ``rtolab run --no-plot`` does without.
    import pyarrow as pa

    names = _strings(columns["names"])
    name = _numbers(pa.uint32(), columns["name"])
    return pa.table(
        {
            "scope": _strings(columns["scopes"]).take(_numbers(pa.uint8(), columns["scope"])),
            "name": names.take(name),
            "kind": _strings(columns["kinds"]).take(name),
            "part": _strings(columns["parts"]).take(_numbers(pa.uint32(), columns["part"])),
            "metric": _strings(columns["metrics"]).take(_numbers(pa.uint32(), columns["metric"])),
            "value": _numbers(pa.float64(), columns["value"]),
        }
    )


def select(report: Mapping[str, Any], *, scope: str, metrics: list[str]) -> Any:
    """The rows of the long metrics table of one ``scope`` and some
    ``metrics``, as a pandas DataFrame (a few rows out of millions, without
    converting the others)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = metric_table(report)
    keep = pc.and_(pc.equal(table["scope"], scope), pc.is_in(table["metric"], pa.array(metrics)))
    return table.filter(keep).to_pandas()


def flat_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """Every number of a run report under one dotted key, e.g.
    ``app.sink.received_packets`` or ``link.ab.directions[0].delivered_bytes``
    (what a sweep stores per run)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flat: dict[str, float] = {}
    table = metric_table(report)
    dot = pa.scalar(".", pa.large_string())
    # A slice at a time: the keys of millions of rows as Arrow strings and
    # Python strings at once would double what the dict itself takes.
    for start in range(0, table.num_rows, _FLAT_ROWS):
        rows = table.slice(start, _FLAT_ROWS)
        # The run's own numbers go without its name; parts only where there is one.
        name = pc.if_else(pc.equal(rows["scope"], "run"), None, rows["name"])
        keys = pc.binary_join_element_wise(
            rows["scope"], name, rows["part"], rows["metric"], dot, null_handling="skip"
        )
        flat.update(zip(keys.to_pylist(), values(rows), strict=True))
    return flat


def values(table: pa.Table) -> list[float]:
    """The ``value`` column as floats, every NaN being ``math.nan`` itself,
    so that equal reports give equal dicts (NaN equals only itself)."""
    import numpy as np

    column = table["value"].to_numpy()
    out: list[float] = column.tolist()
    for i in np.flatnonzero(np.isnan(column)).tolist():
        out[i] = math.nan
    return out


def item_names(report: Mapping[str, Any], key: str) -> list[str]:
    """The names of the items listed under ``key`` (``nodes``, ``links``,
    ``apps``, ...), by index; an item without a name is named by its index."""
    if isinstance(report, Report):
        columns = report._metric_columns()
        if key in columns["keys"]:
            start, count = columns["items"][columns["keys"].index(key)]
            return _strings(columns["names"]).slice(start, count).to_pylist()
    items = report.get(key, [])
    return [
        str(item.get("name", i)) if isinstance(item, Mapping) else str(i)
        for i, item in enumerate(items if isinstance(items, list) else [])
    ]


def write_metrics_parquet(report: Mapping[str, Any], path: Path) -> None:
    """Writes :func:`metric_table` of ``report`` to ``path`` as Parquet
    (``metrics.parquet`` of ``rtolab run``; ``pandas.read_parquet`` reads it
    back as :func:`rtolab.frames.metrics`)."""
    # Written by the core: importing pyarrow would take ``rtolab run
    # --no-plot`` longer than writing the table.
    try:
        _rtolab.write_metric_table(_report_text(report), path)
    except ValueError as err:
        raise ResultError("report", str(err)) from None


# ----- numbers as people read them -----

#: Metric name endings that carry a unit, the unit's steps (largest first:
#: factor, symbol) and the symbol below the smallest step.
UNIT_STEPS: tuple[tuple[str, tuple[tuple[float, str], ...], str], ...] = (
    ("_ns", ((1e9, "s"), (1e6, "ms"), (1e3, "us")), "ns"),
    ("_us", ((1e6, "s"), (1e3, "ms")), "us"),
    ("_ms", ((1e3, "s"),), "ms"),
    ("_s", (), "s"),
    ("_bps", ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")), "bit/s"),
    ("_bytes", ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")), "B"),
)


def unit_of(name: str, magnitude: float) -> tuple[str, float, str]:
    """For a metric ``name`` and the size of its values: the name without
    its unit ending, what to divide values by, and the unit to show them in
    (``("latency_mean", 1e6, "ms")`` for ``latency_mean_ns`` around 2e8);
    ``(name, 1.0, "")`` for a name without a unit."""
    for ending, steps, base in UNIT_STEPS:
        if name.endswith(ending):
            for factor, symbol in steps:
                if abs(magnitude) >= factor:
                    return name.removesuffix(ending), factor, symbol
            return name.removesuffix(ending), 1.0, base
    return name, 1.0, ""


def plain_number(value: float, digits: int = 4) -> str:
    """A number with ``digits`` significant digits and thousands separators,
    never in scientific notation, without trailing zeros: ``211653000.0``
    is ``211,653,000``, ``0.0123456`` is ``0.01235``, ``12.50`` is ``12.5``."""
    if not math.isfinite(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    magnitude = math.floor(math.log10(abs(value))) if value else 0
    decimals = min(max(digits - 1 - magnitude, 0), 9)
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def human(name: str, value: Any) -> str:
    """A metric's value as a person reads it, in the unit its name ends in:
    ``latency_mean_ns`` 211653000.0 is ``211.7 ms``, ``goodput_bps``
    1.5e6 is ``1.5 Mbit/s``; counts with thousands separators; never
    scientific notation. Anything but a number is shown as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "" if value is None else str(value)
    if isinstance(value, float) and math.isnan(value):
        return ""
    _, factor, symbol = unit_of(name, value)
    shown = plain_number(value / factor)
    return f"{shown} {symbol}" if symbol else shown
