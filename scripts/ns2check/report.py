"""Running a case in both simulators and writing its table."""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ns2check import cases, measure, ns2, setting

#: The simulators (and whether timelost is on) of a table's columns.
COLUMNS = (("ns-2", False), ("rtolab", False))
#: With ns-2 built with the timelost patch: both simulators with and without.
TIMELOST_COLUMNS = (("ns-2", False), ("rtolab", False), ("ns-2", True), ("rtolab", True))

#: rtolab's trace families the measures read.
FAMILIES = [
    "mac_attempt",
    "packet_dropped",
    "tcp_rtt_sample",
    "tcp_rto_armed",
    "app_datagram_received",
]


def run_one(s: setting.Setting, simulator: str, work: Path, binary: str) -> measure.Measured:
    """One run of `s` in `simulator`; its script or scenario is kept in
    `work`, its traces only while they are measured."""
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ns2check-") as tmp:
        if simulator.startswith("ns-2"):
            trace = ns2.run(setting.tcl(s), Path(tmp), binary)
            shutil.copy(Path(tmp) / "ns2.tcl", work / "ns2.tcl")
            return measure.from_ns2(trace, s)
        import rtolab

        text = setting.toml(s)
        (work / "rtolab.toml").write_text(text, encoding="utf-8")
        result = rtolab.run(text, out=Path(tmp) / "run", trace_families=FAMILIES)
        return measure.from_rtolab(result.report, result.traces, s)


def _quantile(values: list[float], q: float) -> float:
    return float(np.quantile(values, q)) if values else math.nan


def scalars(m: measure.Measured, s: setting.Setting) -> dict[str, float]:
    """One run's numbers, by measure name."""
    out: dict[str, float] = {}
    directions = [("down", m.down), ("up", m.up)] if s.traffic == "tcp" else [("up", m.up)]
    for name, d in directions:
        out[f"{name}: delivery per attempt"] = d.delivery
        out[f"{name}: attempts per frame"] = d.attempts_per_packet
        out[f"{name}: RTS/CTS exchanges per frame"] = d.cts / d.packets if d.packets else math.nan
        out[f"{name}: RTS per frame"] = d.rts / d.packets if d.packets else math.nan
        out[f"{name}: drops at retry limit"] = float(d.retry_drops)
        out[f"{name}: first attempt to success, mean (ms)"] = (
            float(np.mean(d.spans_ms)) if d.spans_ms else math.nan
        )
        out[f"{name}: first attempt to success, p90 (ms)"] = _quantile(d.spans_ms, 0.9)
        out[f"{name}: first attempt to success, max (ms)"] = (
            float(np.max(d.spans_ms)) if d.spans_ms else math.nan
        )
    for phase, value in m.goodput.items():
        out[f"goodput {phase} (Mbit/s)"] = value
    if s.traffic == "tcp":
        out["RTT samples"] = float(len(m.rtt_ms))
        for q in (0.1, 0.5, 0.9):
            out[f"RTT p{int(q * 100)} (ms)"] = _quantile(m.rtt_ms, q)
    return out


def cell(values: pd.Series) -> str:
    """mean ± 95 % CI half-width (normal approximation), or the value when
    there is one seed."""
    x = values.dropna().astype(float)
    if x.empty:
        return "-"
    mean = x.mean()
    digits = 3 if abs(mean) < 100 else 0
    if len(x) < 2:
        return f"{mean:.{digits}f}"
    half = 1.96 * x.std(ddof=1) / math.sqrt(len(x))
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def run_case(
    case: cases.Case,
    out: Path,
    seeds: int,
    binary: str,
    columns: tuple[tuple[str, bool], ...] = COLUMNS,
    progress: Callable[[str], None] = print,
    patched: str | None = None,
) -> tuple[str, bool]:
    """Every row of `case` with seeds 1..`seeds` in each column's
    simulator (ns-2 with timelost: the `patched` binary); returns the
    Markdown table (rows: measures, grouped by the case's rows) and whether
    every run completed."""
    records = []
    ok = True
    for label, base in case.rows:
        for simulator, timelost in columns:
            column = f"{simulator}{' timelost' if timelost else ''}"
            for seed in range(1, seeds + 1):
                s = cases.with_seed(base, seed, timelost)
                work = out / base.name / column.replace(" ", "-") / f"seed{seed}"
                ns = patched if timelost and patched else binary
                try:
                    if simulator == "ns-2" and timelost and not patched:
                        raise RuntimeError("ns-2 with timelost needs the patched build")
                    m = run_one(s, simulator, work, ns)
                except Exception as e:  # a failed run is a row, not a crash
                    progress(f"{case.name}: {label}: {column} seed {seed} failed: {e}")
                    ok = False
                    continue
                for name, value in scalars(m, s).items():
                    records.append((label, column, seed, name, value))
            progress(f"{case.name}: {label}: {column} done")
    frame = pd.DataFrame(records, columns=["row", "column", "seed", "measure", "value"])
    frame.to_csv(out / "runs.csv", index=False)
    names = [f"{sim}{' timelost' if tl else ''}" for sim, tl in columns]
    lines = ["| " + " | ".join(["row", "measure", *names]) + " |", "|" + "---|" * (2 + len(names))]
    for label, _ in case.rows:
        rows = frame[frame["row"] == label]
        for name in dict.fromkeys(rows["measure"]):
            cells = [
                cell(rows[(rows["measure"] == name) & (rows["column"] == c)]["value"])
                for c in names
            ]
            lines.append("| " + " | ".join([label, name, *cells]) + " |")
    return "\n".join(lines) + "\n", ok
