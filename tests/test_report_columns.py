"""A run report stays text on the Python side and its numbers become
columns in the core: the tables must be those a plain reading of the JSON
gives, value for value, whatever the report holds."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

import rtolab
from rtolab import frames, runreport
from rtolab.runreport import Report

SCENARIOS = sorted(n for n in rtolab.shipped_scenarios() if not n.startswith("emu-"))


# ----- the reference: the report read as plain Python objects -----


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool | int | float):
        return float(value)
    return None


def _stat_rows(stats: Any, prefix: str = "", part: str | None = None) -> Iterable[tuple]:
    if not isinstance(stats, Mapping):
        return
    for key, value in stats.items():
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                sub = f"{key}[{i}]" if part is None else f"{part}.{key}[{i}]"
                yield from _stat_rows(item, prefix, sub)
        elif isinstance(value, Mapping):
            yield from _stat_rows(value, f"{prefix}{key}.", part)
        elif isinstance(value, list) and value and all(_numeric(v) is not None for v in value):
            for i, item in enumerate(value):
                yield part, f"{prefix}{key}[{i}]", _numeric(item)
        elif _numeric(value) is not None:
            yield part, f"{prefix}{key}", _numeric(value)
        elif value is None:
            yield part, f"{prefix}{key}", math.nan


def reference_rows(report: Mapping[str, Any]) -> list[tuple]:
    """The long metrics table of a report decoded by ``json``, row by row."""
    rows = []
    name = report.get("name", "")
    for key in ("duration_s", "events_processed"):
        if key in report and _numeric(report[key]) is not None:
            rows.append(("run", name, None, None, key, _numeric(report[key])))
    for scope, key in (
        ("node", "nodes"),
        ("link", "links"),
        ("app", "apps"),
        ("middlebox", "middleboxes"),
        ("flow", "flows"),
    ):
        for i, item in enumerate(report.get(key, [])):
            if not isinstance(item, Mapping):
                continue
            label = item.get("name", str(i))
            kind = item.get("kind")
            extra = {
                k: v
                for k, v in item.items()
                if k not in ("name", "kind", "host", "app", "stats", "interfaces")
            }
            for part, metric, value in [*_stat_rows(item.get("stats", {})), *_stat_rows(extra)]:
                rows.append((scope, label, kind, part, metric, value))
    return rows


def rows_of(frame: pd.DataFrame) -> list[tuple]:
    def plain(value: Any) -> Any:
        return None if isinstance(value, float) and math.isnan(value) else value

    return [
        (*(plain(v) for v in row[:5]), row[5])
        for row in frame[list(frames.METRIC_COLUMNS)].itertuples(index=False)
    ]


def same_rows(ours: list[tuple], theirs: list[tuple]) -> bool:
    return len(ours) == len(theirs) and all(
        a[:5] == b[:5] and (a[5] == b[5] or (math.isnan(a[5]) and math.isnan(b[5])))
        for a, b in zip(ours, theirs, strict=True)
    )


# ----- tests -----


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, rtolab.Result]:
    out = tmp_path_factory.mktemp("runs")
    return {
        name: rtolab.run(name, duration=2.0, out=out / name, trace_format="jsonl", plots=False)
        for name in SCENARIOS
    }


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_metrics_of_every_shipped_scenario_are_those_of_its_json(
    name: str, results: dict[str, rtolab.Result]
) -> None:
    result = results[name]
    plain = json.loads((result.out_dir / "metrics.json").read_text(encoding="utf-8"))
    assert isinstance(result.report, Report)
    assert dict(result.report).keys() == plain.keys()
    assert {k: result.report[k] for k in plain if k != "files"} == {
        k: v for k, v in plain.items() if k != "files"
    }
    assert same_rows(rows_of(result.metrics), reference_rows(plain))
    # The plain dict goes through the same core reading.
    assert_frame_equal(frames.metrics(plain), result.metrics)
    assert frames.flat_metrics(plain) == result.flat_metrics()
    # metrics.parquet, written by the core, reads back as the table.
    runreport.write_metrics_parquet(result.report, result.out_dir / "m.parquet")
    assert_frame_equal(pd.read_parquet(result.out_dir / "m.parquet"), result.metrics)


def test_odd_reports_read_as_json_reads_them() -> None:
    report = {
        "name": "odd",
        "duration_s": 1.5,
        "events_processed": True,
        "nodes": [{"name": "a", "stats": {"sent": 1, "note": "x", "gone": None}}, "junk"],
        "links": [
            {
                "name": "ab",
                "kind": "k",
                "stats": {
                    "directions": [
                        {"sent": 2, "bad": [1, 2.5, False], "deep": {"x": {"y": 3}}},
                        {"sent": 4, "inner": [{"q": 5}], "mixed": [1, "a"], "empty": []},
                    ]
                },
            }
        ],
        "apps": [{"kind": "sink", "lost": 7, "lost_again": 7, "host": "b", "app": 1}],
        "flows": {"not": "a list"},
        "extra": [1, 2],
    }
    ours = rows_of(frames.metrics(report))
    assert same_rows(ours, reference_rows(report)), ours
    # An unnamed item is named by its index; booleans count as 0 or 1.
    assert ("app", "0", "sink", None, "lost", 7.0) in ours
    assert ("run", "odd", None, None, "events_processed", 1.0) in ours
    # NaN or infinity in a dict (JSON has neither) reads as a missing number:
    # a NaN row for an item, none for the run.
    nan = frames.metrics({"name": "n", "duration_s": math.nan, "apps": [{"x": math.inf}]})
    assert rows_of(nan)[0][:5] == ("app", "0", None, None, "x") and len(nan) == 1
    assert math.isnan(nan["value"][0])


def test_a_repeated_key_reads_as_json_reads_it() -> None:
    text = b'{"name": "r", "duration_s": 1, "apps": [{"a": 1, "b": 2, "a": 3}], "duration_s": 2}'
    report = Report(text)
    assert dict(report) == json.loads(text)
    assert same_rows(rows_of(frames.metrics(report)), reference_rows(json.loads(text)))


def test_a_report_is_decoded_only_where_asked(results: dict[str, rtolab.Result]) -> None:
    report = results["default"].report
    fresh = Report(report.text)
    assert fresh.count("apps") == len(report["apps"]) and fresh.count("name") is None
    fresh.metric_table()
    assert "apps" not in fresh._values  # the table came from the text
    assert frames.traces(results["default"].trace_file, fresh)["app_name"].notna().any()
    assert "apps" not in fresh._values
    with pytest.raises(ValueError):
        Report(b"[1, 2]")
    with pytest.raises(ValueError):
        Report(b'{"a": 1} trailing')


def test_write_json_gives_the_report_with_changes(results: dict[str, rtolab.Result]) -> None:
    report = results["p2p-cbr"].report
    out = io.BytesIO()
    report.write_json(out, files=["x"], wall_s=1.5)
    written = json.loads(out.getvalue())
    assert written == {**dict(report), "files": ["x"], "wall_s": 1.5}
    assert list(written)[-1] == "wall_s" and out.getvalue().endswith(b"}\n")


def test_a_result_loaded_from_disk_keeps_its_report_as_text(
    results: dict[str, rtolab.Result],
) -> None:
    result = results["default"]
    loaded = rtolab.Result.load(result.out_dir)
    assert isinstance(loaded.report, Report)
    assert_frame_equal(loaded.metrics, result.metrics)
    assert_frame_equal(loaded.traces, result.traces)


@pytest.mark.parametrize("name", SCENARIOS)
def test_parquet_tables_hold_the_events_of_the_jsonl_trace(
    name: str, results: dict[str, rtolab.Result], tmp_path: Path
) -> None:
    jsonl = results[name].traces
    tables = rtolab.run(name, duration=2.0, out=tmp_path, trace_format="parquet", plots=False)
    assert tables.trace_dir is not None and tables.trace_file is None
    parquet = tables.traces
    assert len(parquet) == len(jsonl)
    key = ["t_ns", "kind", "node"]
    assert parquet["t_ns"].is_monotonic_increasing
    ours = parquet[key].astype("string").sort_values(key, ignore_index=True)
    theirs = jsonl[key].astype("string").sort_values(key, ignore_index=True)
    assert_frame_equal(ours, theirs)
    # Typed and named like the JSON-lines reading.
    assert {"t_s", "event", "kind"} <= set(parquet.columns)
    if "node" in jsonl:
        assert parquet["node_name"].notna().sum() == jsonl["node_name"].notna().sum()


def by_records(path: Path, report: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """:func:`frames.traces` reading the file event by event."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frames, "_trace_columns", lambda _: None)
        return frames.traces(path, report)


@pytest.mark.parametrize("name", SCENARIOS)
def test_traces_read_as_columns_equal_the_event_by_event_reading(
    name: str, results: dict[str, rtolab.Result]
) -> None:
    result = results[name]
    assert frames._trace_columns(result.trace_file) is not None
    ours = frames.traces(result.trace_file, result.report)
    # The same columns and values; where a field first appears as null, its
    # column may come later than the event-by-event reading puts it.
    assert_frame_equal(ours, by_records(result.trace_file, result.report), check_like=True)
    assert list(ours.columns[:4]) == ["t_s", "t_ns", "event", "kind"]


def test_traces_with_lists_gaps_and_late_fields_read_as_records(tmp_path: Path) -> None:
    events = [
        {"t_ns": 1, "event": "a", "srtt": None, "flag": True},
        {"t_ns": 2, "event": "b", "detail": {"kind": "x"}, "blocks": [[1, 2], [3, 4]]},
        {"t_ns": 3, "event": "a", "srtt": 5, "detail": {"kind": "y", "late": 1.5}},
        {"t_ns": 2**60, "event": "c", "flag": False, "count": 3},
    ]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    assert frames._trace_columns(path) is not None
    traces = frames.traces(path)
    assert_frame_equal(traces, by_records(path), check_like=True)
    assert traces.loc[1, "blocks"] == [[1, 2], [3, 4]]
    assert list(traces["kind"]) == ["a", "x", "y", "c"]
    assert str(traces["count"].dtype) == "Int64"


def test_a_trace_file_the_column_reader_refuses_is_read_event_by_event(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    # A field whose type changes; then a garbled line, named as before.
    path.write_text('{"t_ns": 1, "event": "a", "x": 1}\n{"t_ns": 2, "event": "a", "x": "s"}\n')
    assert frames._trace_columns(path) is None
    assert list(frames.traces(path)["x"]) == [1, "s"]
    path.write_text('{"t_ns": 1, "event": "a"}\nnot json\n')
    with pytest.raises(rtolab.ResultError, match="line 2 is not an event"):
        frames.traces(path)
