"""Turning a run's files into pandas DataFrames.

* :func:`packets`: one row per packet per capture point, decoded by the
  core's own wire parser (so Python and Rust agree on every field);
* :func:`traces`: one row per trace event, nested records flattened into
  dotted columns (``detail.kind``);
* :func:`metrics`: one row per number of the run report, in long form.

Every function copes with columns it does not know: new trace events and
new statistics appear as new columns or rows, never as errors.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from rtolab import _rtolab
from rtolab.errors import ResultError, native_errors

#: Columns of :func:`packets`, in order (more may follow when the core adds fields).
PACKET_COLUMNS: tuple[str, ...] = (
    "time_s",
    "time_ns",
    "capture",
    "host",
    "link",
    "direction",
    "index",
    "src",
    "dst",
    "protocol",
    "src_port",
    "dst_port",
    "seq",
    "ack",
    "flags",
    "window",
    "len",
    "payload_len",
    "segment_len",
    "ip_id",
    "ttl",
    "mss",
    "window_scale",
    "sack_permitted",
    "sack",
    "tsval",
    "tsecr",
    "timelost",
    "error",
)

_INT_COLUMNS = (
    "time_ns",
    "index",
    "src_port",
    "dst_port",
    "seq",
    "ack",
    "window",
    "len",
    "payload_len",
    "segment_len",
    "ip_id",
    "ttl",
    "mss",
    "window_scale",
    "tsval",
    "tsecr",
    "timelost",
)

#: Columns of :func:`metrics`.
METRIC_COLUMNS: tuple[str, ...] = ("scope", "name", "kind", "part", "metric", "value")


def read_capture(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Decodes one pcap file written by a run: one row per packet.

    Raises :class:`rtolab.CaptureError` when the file is not a raw-IPv4 pcap.
    A packet that does not parse (bad checksum, truncated) still gets a row,
    with the reason in ``error``.
    """
    with native_errors():
        columns: dict[str, list[Any]] = json.loads(_rtolab.read_capture(os.fspath(path)))
    frame = pd.DataFrame(columns)
    for name in _INT_COLUMNS:
        if name in frame:
            frame[name] = frame[name].astype("Int64")
    if "sack_permitted" in frame:
        frame["sack_permitted"] = frame["sack_permitted"].astype("boolean")
    frame["time_s"] = frame["time_ns"].astype("float64") / 1e9
    return frame


def packets(
    pcaps: Iterable[Path], captures: Mapping[str, Mapping[str, Any]] | None = None
) -> pd.DataFrame:
    """All capture files of a run in one table, ordered by time.

    ``captures`` maps a file name to its ``[[capture]]`` table, to fill the
    ``host``, ``link`` and ``direction`` columns.
    """
    captures = captures or {}
    frames = []
    for pcap in pcaps:
        frame = read_capture(pcap)
        spec = captures.get(pcap.name, {})
        frame["capture"] = pcap.stem
        frame["host"] = spec.get("host")
        frame["link"] = spec.get("link", spec.get("interface"))
        frame["direction"] = spec.get("direction", "both") if spec else None
        frames.append(frame)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in PACKET_COLUMNS})
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values("time_ns", kind="stable", ignore_index=True)
    ordered = [c for c in PACKET_COLUMNS if c in frame] + [
        c for c in frame.columns if c not in PACKET_COLUMNS
    ]
    return frame[ordered]


def flatten_record(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record as one level of dotted keys (lists are kept whole)."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_record(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _names(report: Mapping[str, Any], key: str) -> dict[int, str]:
    return {i: str(item.get("name", i)) for i, item in enumerate(report.get(key, []))}


def traces(trace_file: Path | None, report: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """A run's ``traces.jsonl`` as a DataFrame, one row per event.

    Columns: ``t_ns``, ``t_s``, ``event`` (the top-level event name), ``kind``
    (the most specific name: ``detail.kind`` of app events, ``tcp_event`` of
    TCP engine events, else ``event``), then every field, nested ones as
    dotted names (``detail.delay_ns``). With the run ``report``,
    ``node_name``, ``link_name`` and ``app_name`` translate the indices.
    """
    if trace_file is None or not Path(trace_file).is_file():
        return pd.DataFrame(
            {c: pd.Series(dtype="object") for c in ("t_ns", "t_s", "event", "kind")}
        )
    records = _trace_records(Path(trace_file))
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="object") for c in ("t_ns", "t_s", "event", "kind")}
        )
    for name in frame.columns:
        values = frame[name]
        # Integers missing from some events come back as floats; restore them.
        if values.dtype == "float64":
            present = values.dropna()
            if len(present) and (present % 1 == 0).all() and present.abs().max() < 2**53:
                frame[name] = values.astype("Int64")
    frame["t_s"] = frame["t_ns"].astype("float64") / 1e9
    kind = frame["event"].astype("object")
    # Deeper names win: "app" + detail.kind "datagram_received" is the latter.
    nested = sorted(
        (c for c in frame.columns if c != "event" and c.endswith(("event", ".kind"))),
        key=lambda c: c.count("."),
    )
    for column in nested:
        kind = frame[column].where(frame[column].notna(), kind)
    frame["kind"] = kind
    if report is not None:
        for column, key in (("node", "nodes"), ("link", "links"), ("app", "apps")):
            if column in frame:
                names = _names(report, key)
                frame[f"{column}_name"] = frame[column].map(
                    lambda i, names=names: names.get(int(i)) if _is_number(i) else None
                )
    first = ["t_s", "t_ns", "event", "kind"]
    return frame[first + [c for c in frame.columns if c not in first]]


def _trace_records(path: Path) -> list[dict[str, Any]]:
    """The flattened events of a trace file; raises :class:`rtolab.ResultError`
    naming the file and line when it is garbled."""
    records = []
    number = 0
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                number += 1  # counted by hand: the error messages need it
                if line.strip():
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise ValueError("not a JSON object")
                    records.append(flatten_record(record))
    except OSError as err:
        raise ResultError(str(path), f"cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ResultError(str(path), f"garbled: not UTF-8 text after line {number}") from None
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise ResultError(str(path), f"garbled: line {number} is not an event") from None
    return records


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value))


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def _stat_rows(
    stats: Any, prefix: str = "", part: str | None = None
) -> Iterable[tuple[str | None, str, float]]:
    """(part, metric, value) for every number in a stats record. A list of
    records (a link's directions, an app's connections) gives a ``part`` per
    element, named ``<key>[<i>]``."""
    if isinstance(stats, Mapping):
        for key, value in stats.items():
            if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
                for i, item in enumerate(value):
                    sub = f"{key}[{i}]" if part is None else f"{part}.{key}[{i}]"
                    yield from _stat_rows(item, prefix, sub)
            elif isinstance(value, Mapping):
                yield from _stat_rows(value, f"{prefix}{key}.", part)
            elif isinstance(value, list) and value and all(_numeric(v) is not None for v in value):
                # Per-port counters such as a link's ``bad_spells``.
                for i, item in enumerate(value):
                    yield part, f"{prefix}{key}[{i}]", float(_numeric(item) or 0.0)
            else:
                number = _numeric(value)
                if number is not None:
                    yield part, f"{prefix}{key}", number
                elif value is None:
                    yield part, f"{prefix}{key}", math.nan


def metric_records(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of :func:`metrics` as dicts."""
    rows: list[dict[str, Any]] = []
    for key in ("duration_s", "events_processed"):
        if key in report:
            number = _numeric(report[key])
            if number is not None:
                rows.append(
                    {
                        "scope": "run",
                        "name": str(report.get("name", "")),
                        "kind": None,
                        "part": None,
                        "metric": key,
                        "value": number,
                    }
                )
    scopes = (
        ("node", "nodes"),
        ("link", "links"),
        ("app", "apps"),
        ("middlebox", "middleboxes"),
        ("flow", "flows"),
    )
    for scope, key in scopes:
        for i, item in enumerate(report.get(key, [])):
            if not isinstance(item, Mapping):
                continue
            # Flows have no name: their index is the `flow` of trace events.
            name = str(item.get("name", i))
            stats = item.get("stats", {})
            # Numbers stored beside "stats" (rather than in it) count too.
            extra = {
                k: v
                for k, v in item.items()
                if k not in ("name", "kind", "host", "app", "stats", "interfaces")
            }
            for part, metric, value in [*_stat_rows(stats), *_stat_rows(extra)]:
                rows.append(
                    {
                        "scope": scope,
                        "name": name,
                        "kind": item.get("kind"),
                        "part": part,
                        "metric": metric,
                        "value": value,
                    }
                )
    return rows


def metrics(report: Mapping[str, Any]) -> pd.DataFrame:
    """A run report as a long table: ``scope`` (run, node, link, app),
    ``name``, ``kind``, ``part`` (e.g. ``directions[0]`` of a link, else
    empty), ``metric`` and ``value`` (float; NaN where the core reported
    none)."""
    rows = metric_records(report)
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in METRIC_COLUMNS})
    return pd.DataFrame.from_records(rows, columns=list(METRIC_COLUMNS))


def flat_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """Every number of a run report under one dotted key, e.g.
    ``app.sink.received_packets`` or ``link.ab.directions[0].delivered_bytes``
    (what a sweep stores per run)."""
    flat: dict[str, float] = {}
    for row in metric_records(report):
        parts = [row["scope"]]
        if row["scope"] != "run":
            parts.append(row["name"])
        if row["part"]:
            parts.append(row["part"])
        parts.append(row["metric"])
        flat[".".join(parts)] = row["value"]
    return flat
