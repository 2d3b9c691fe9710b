"""Running a case in both simulators and writing its table."""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ns2check import cases, measure, ns2, setting

#: The simulators (and whether timelost is on) of a table's columns.
COLUMNS = (("ns-2", False), ("rtolab", False))
#: With ns-2 built with the timelost patch: both simulators with and without.
TIMELOST_COLUMNS = (("ns-2", False), ("rtolab", False), ("ns-2", True), ("rtolab", True))
#: rtolab's Vegas with NewReno's loss handling instead of ns-2's
#: (`vegas_ns2` with `fine_retransmit = false`).
NEWRENO_LOSS = "rtolab-newreno-loss"
#: Vegas's columns: both simulators and rtolab's Vegas without ns-2's loss
#: handling; with the patched ns-2, each with and without timelost.
VEGAS_COLUMNS = (*COLUMNS, (NEWRENO_LOSS, False))
VEGAS_TIMELOST_COLUMNS = (*TIMELOST_COLUMNS, (NEWRENO_LOSS, False), (NEWRENO_LOSS, True))


def column_name(simulator: str, timelost: bool) -> str:
    return f"{simulator}{' timelost' if timelost else ''}"


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
            column = column_name(simulator, timelost)
            for seed in range(1, seeds + 1):
                s = cases.with_seed(base, seed, timelost)
                if simulator == NEWRENO_LOSS:
                    s = replace(s, fine_retransmit=False)
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
    names = [column_name(sim, tl) for sim, tl in columns]
    lines = ["| " + " | ".join(["row", "measure", *names]) + " |", "|" + "---|" * (2 + len(names))]
    for label, _ in case.rows:
        rows = frame[frame["row"] == label]
        for name in dict.fromkeys(rows["measure"]):
            cells = [
                cell(rows[(rows["measure"] == name) & (rows["column"] == c)]["value"])
                for c in names
            ]
            lines.append("| " + " | ".join([label, name, *cells]) + " |")
    pairs = paired_differences(frame, columns)
    if pairs:
        lines += ["", *pairs]
    return "\n".join(lines) + "\n", ok


def paired_differences(frame: pd.DataFrame, columns: tuple[tuple[str, bool], ...]) -> list[str]:
    """Goodput differences between columns that share seeds (so the same
    mobility, shadowing draws where the simulator repeats them, and start):
    each simulator's timelost gain, and rtolab's ns-2 loss handling against
    NewReno's, each as mean ± 95 % CI half-width (normal approximation, as
    the experiments' tables), standard deviation and n over seeds. Empty
    when the columns make no pair."""
    from rtolab.experiments.stats import spread

    names = {column_name(s, t) for s, t in columns}
    pairs = [
        (f"{s}: timelost - without", column_name(s, True), column_name(s, False))
        for s, t in columns
        if t and column_name(s, False) in names
    ]
    for timelost in (False, True):
        ours, other = column_name("rtolab", timelost), column_name(NEWRENO_LOSS, timelost)
        if ours in names and other in names:
            label = f"{ours}: ns-2 loss - NewReno loss"
            pairs.append((label, ours, other))
    if not pairs or frame.empty:
        return []
    goodput = frame[frame["measure"].str.startswith("goodput")]
    lines = [
        "Paired differences of goodput (Mbit/s) over seeds: mean ± 95 % CI half-width (sd, n)",
        "",
        "| difference | row | measure | mean ± CI | sd | n |",
        "|---|---|---|---|---|---|",
    ]
    for label, a, b in pairs:
        for (row, name), rows in goodput.groupby(["row", "measure"], sort=False):
            wide = rows.pivot_table(index="seed", columns="column", values="value")
            if a not in wide or b not in wide:
                continue
            d = spread(wide[a] - wide[b])
            if d["n"] == 0:
                continue
            lines.append(
                f"| {label} | {row} | {name} | {d['mean']:+.4f} ± {d['ci95']:.4f} "
                f"| {d['sd']:.4f} | {d['n']} |"
            )
    return lines
