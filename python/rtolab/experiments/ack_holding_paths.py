"""ACK holding on a path whose delay varies (docs/ack-holding.md, "A
variable path").

On the study's steady path the base station's estimate of the fixed host's
round-trip deviation is about 1e-16 s, so every search stretches nothing
and the schedule's first phase never runs. Here the fixed host's wired link
also carries an on/off TCP transfer from the fixed host to the base station
(cross traffic through the same drop-tail queue), so the fixed host's round
trip varies by tens of milliseconds and the base station's mu0 and sigma0, from
timestamps, are not trivial. Each seed draws the cross traffic's start and
its on and off times.

Case A's outage (10 s from 10 s, warned 500 ms ahead) with plain Reno, the
three searches on the spec's model, and the timeout-free search on a model
that knows the fixed host's 1 s minimum RTO and that each held ACK samples
its hold (``samples = "hold"``). Writes ``paths.csv`` (one row per run: the
base station's mu0, sigma0, N, the n of every search and the one used, the fixed
host's timeouts, packets delivered) and ``paths-acks.csv`` (per released
ACK: the planned gap, the gap at the fixed host, the model's RTO after it
and the fixed host's), and ``figures/paths-rto.png``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rtolab.experiments import (
    Check,
    Experiment,
    ExperimentRun,
    register,
    save_figure,
    system_dir,
    write_table,
)
from rtolab.experiments import ack_holding as study

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

#: Variant → (scheme, extra base-station fields).
VARIANTS: dict[str, tuple[str, dict[str, str | int]]] = {
    "reno": ("reno", {}),
    "global-minimum": ("ack-holding", {}),
    "step-forward": ("ack-holding-step-forward", {}),
    "timeout-free": ("ack-holding-timeout-free", {}),
    "timeout-free-hold": (
        "ack-holding-timeout-free",
        {"min_rto": "1s", "samples": "hold"},
    ),
}
CROSS_PORT = 6001
RUN_COLUMNS = (
    "variant",
    "seed",
    "cross_on_s",
    "cross_off_s",
    "mean_s",
    "deviation_s",
    "acks",
    "n_step_forward",
    "n_global_minimum",
    "n_timeout_free",
    "n",
    "model_final_rto_s",
    "fixed_host_largest_rto_s",
    "rto_expirations",
    "packets_delivered",
)
ACK_COLUMNS = (
    "variant",
    "seed",
    "ack",
    "planned_gap_s",
    "gap_at_fixed_host_s",
    "model_rto_s",
    "fixed_host_rto_s",
)


def seeds() -> tuple[int, ...]:
    return (1,) if study.quick() else (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Cross:
    """The cross traffic of one seed."""

    start_s: float
    on_s: float
    off_s: float

    @classmethod
    def draw(cls, seed: int) -> Cross:
        r = random.Random(seed)
        return cls(
            round(r.uniform(0, 1), 3), round(r.uniform(0.2, 0.8), 3), round(r.uniform(0.2, 0.8), 3)
        )

    def toml(self) -> str:
        return f"""
[[app]]
kind = "tcp-sink"
name = "cross-sink"
host = "bs"
port = {CROSS_PORT}
[app.tcp]
recv_buffer = 1048576

[[app]]
kind = "tcp-on-off"
name = "cross"
host = "fixed"
peer = "10.0.0.2:{CROSS_PORT}"
on = "{self.on_s * 1000:.0f}ms"
off = "{self.off_s * 1000:.0f}ms"
start = "{self.start_s * 1000:.0f}ms"
[app.tcp]
send_buffer = 1048576
"""


@dataclass(frozen=True)
class PathCell:
    variant: str
    seed: int

    @property
    def label(self) -> str:
        return f"V-{self.variant}-seed{self.seed}"

    def run(self) -> ExperimentRun:
        scheme, holding = VARIANTS[self.variant]
        text = study.scenario("A", scheme, holding=holding, extra=Cross.draw(self.seed).toml())
        return ExperimentRun(self.label, text, seed=self.seed, params={"variant": self.variant})


def cells() -> list[PathCell]:
    return [PathCell(v, s) for s in seeds() for v in VARIANTS]


def schedule_record(result: Result) -> dict[str, Any] | None:
    """The base station's first schedule, as its report gives it."""
    for box in result.report.get("middleboxes", []):
        schedules = box.get("schedules") or []
        if schedules:
            return dict(schedules[0])
    return None


def fixed_host_rtos(result: Result) -> pd.DataFrame:
    """The RTO the fixed host armed at each instant it did, seconds."""
    traces = result.traces
    armed = traces[(traces["kind"] == "rto_armed") & (traces["node_name"] == "fixed")]
    return pd.DataFrame({"t_s": armed["t_s"].to_numpy(), "rto_s": armed["rto"].to_numpy() / 1e9})


def held_ack_rows(result: Result, cell: PathCell, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Per ACK released on the schedule: planned gap, the gap the fixed host
    saw, the model's RTO after it and the fixed host's."""
    start = record["start_ns"] / 1e9
    gaps = list(record.get("gaps_s") or [])
    model = list(record.get("model_rto_s") or [])
    up = study.CASES["A"][0][0] + study.CASES["A"][0][1]
    packets = result.packets
    acks = packets[
        (packets["capture"] == "fixed")
        & (packets["src"] == study.MOBILE)
        & (packets["segment_len"] == 0)
        # Released from the first planned release on: ACKs forwarded
        # before the hold may still be on the wire after the start.
        & (packets["time_s"] >= start + (gaps[0] if gaps else 0.0))
        & (packets["time_s"] < up)
    ]
    arrivals = acks["time_s"].to_numpy()
    rtos = fixed_host_rtos(result)
    rows = []
    previous = None
    for k, gap in enumerate(gaps):
        t = arrivals[k] if k < len(arrivals) else np.nan
        fh = np.nan
        if not np.isnan(t):
            at = rtos[(rtos["t_s"] >= t - 1e-9) & (rtos["t_s"] <= t + 1e-6)]
            fh = float(at["rto_s"].iloc[-1]) if len(at) else np.nan
        seen = np.nan if np.isnan(t) else t - (previous if previous is not None else start)
        previous = t if not np.isnan(t) else previous
        rows.append(
            {
                "variant": cell.variant,
                "seed": cell.seed,
                "ack": k + 1,
                "planned_gap_s": gap,
                "gap_at_fixed_host_s": seen,
                "model_rto_s": model[k] if k < len(model) else np.nan,
                "fixed_host_rto_s": fh,
            }
        )
    return rows


def run_row(result: Result, cell: PathCell, record: dict[str, Any] | None) -> dict[str, Any]:
    flow = study.flow_report(result, "bulk")
    cross = Cross.draw(cell.seed)
    rtos = fixed_host_rtos(result)
    up = study.CASES["A"][0][0] + study.CASES["A"][0][1]
    before_up = rtos[rtos["t_s"] < up]
    rec = record or {}
    return {
        "variant": cell.variant,
        "seed": cell.seed,
        "cross_on_s": cross.on_s,
        "cross_off_s": cross.off_s,
        "mean_s": rec.get("mean_s"),
        "deviation_s": rec.get("deviation_s"),
        "acks": rec.get("acks"),
        "n_step_forward": rec.get("n_step_forward"),
        "n_global_minimum": rec.get("n_global_minimum"),
        "n_timeout_free": rec.get("n_timeout_free"),
        "n": rec.get("n"),
        "model_final_rto_s": rec.get("final_rto_s"),
        "fixed_host_largest_rto_s": float(before_up["rto_s"].max()) if len(before_up) else None,
        "rto_expirations": int(flow.get("timeouts", 0)),
        "packets_delivered": study.sink_bytes(result) // study.MSS,
    }


def rto_figure(acks: pd.DataFrame) -> Figure:
    """The model's RTO and the fixed host's after each released ACK, seed 1,
    one panel per variant."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    variants = [v for v in VARIANTS if v in set(acks["variant"])]
    fig, axes = plt.subplots(
        1, len(variants), figsize=(3.2 * len(variants) + 1.5, 3.6), sharey=True
    )
    axes = np.atleast_1d(axes)
    for ax, variant in zip(axes, variants, strict=True):
        rows = acks[(acks["variant"] == variant) & (acks["seed"] == acks["seed"].min())]
        ax.plot(rows["ack"], rows["model_rto_s"], marker="o", label="model (base station)")
        ax.plot(
            rows["ack"],
            rows["fixed_host_rto_s"],
            marker="s",
            linestyle="--",
            label="fixed host (packets)",
        )
        ax.plot(
            rows["ack"],
            rows["planned_gap_s"],
            marker=".",
            linestyle=":",
            color="0.4",
            label="gap before the ACK",
        )
        ax.set_title(variant, fontsize="medium")
        ax.set_xlabel("released ACK")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("seconds")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles, labels, loc="upper center", ncol=3, frameon=False, bbox_to_anchor=(0.5, 1.0)
    )
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def checks(results: dict[str, Result]) -> list[Check]:
    out = system_dir(results)
    done = [c for c in cells() if c.label in results]
    if out is None or not done:
        return [Check("runs completed", False, "no results")]
    rows, ack_rows = [], []
    for cell in done:
        result = results[cell.label]
        record = schedule_record(result)
        rows.append(run_row(result, cell, record))
        if record is not None:
            ack_rows += held_ack_rows(result, cell, record)
    table = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    acks = pd.DataFrame(ack_rows, columns=list(ACK_COLUMNS))
    write_table(table, out / "paths.csv")
    write_table(acks, out / "paths-acks.csv")
    if len(acks):
        save_figure(rto_figure(acks), out / "figures" / "paths-rto.png")
    held = table[table["variant"] != "reno"]
    stretched = held["n"].fillna(0)
    return [
        Check(
            "every planned run completed",
            len(done) == len(cells()),
            f"{len(done)} of {len(cells())}",
        ),
        Check(
            "the base station's deviation estimate is above the steady path's rounding",
            bool((held["deviation_s"] > 1e-5).all()),
            f"sigma0 from {held['deviation_s'].min():.4g} to {held['deviation_s'].max():.4g} s",
        ),
        Check(
            "some search stretches ACKs (n > 0)",
            bool((stretched > 0).any()),
            f"n per run: {stretched.astype(int).tolist()}",
        ),
    ]


register(
    Experiment(
        system=study.SYSTEM,
        name="paths",
        title="ACK holding on a path with cross traffic: the schedule's stretching phase, run",
        description=(
            "Case A with an on/off TCP transfer sharing the fixed host's wired link, several "
            "seeds: the base station's mu0 and sigma0, the n each search picks, and per released "
            "ACK the model's RTO next to the fixed host's. Writes paths.csv and paths-acks.csv."
        ),
        runs=lambda: [c.run() for c in cells()],
        checks=checks,
        report=lambda directory: study.report_sections(
            directory, "paths.csv", ("paths",), keys=("variant",)
        ),
        trace_families=study.TRACE_FAMILIES,
        keep_captures=False,
    )
)
