"""Figures drawn from a run's traces (matplotlib, readable on screen and in print)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # files only: runs happen on headless machines and in workers
import matplotlib.pyplot as plt
import pandas as pd

if TYPE_CHECKING:
    from rtolab.api import Result

BINS = 50


def load_traces(trace_file: Path) -> pd.DataFrame:
    """Read a ``traces.jsonl`` file into a DataFrame, one row per event."""
    frame = pd.read_json(trace_file, lines=True)
    if frame.empty:
        return frame
    frame["t_s"] = frame["t_ns"] / 1e9
    return frame


def _names(report: dict[str, Any], key: str) -> dict[int, str]:
    return {i: item.get("name", str(i)) for i, item in enumerate(report.get(key, []))}


def throughput_over_time(
    traces: pd.DataFrame, report: dict[str, Any], ax: plt.Axes | None = None
) -> plt.Axes:
    """Bytes received per link and receiving node over time, in kbit/s."""
    ax = ax if ax is not None else plt.figure(figsize=(8, 4)).gca()
    duration = float(report.get("duration_s", 0.0)) or float(traces["t_s"].max() or 1.0)
    width = duration / BINS
    received = traces[traces["event"] == "packet_received"]
    links, nodes = _names(report, "links"), _names(report, "nodes")
    for (link, node), group in received.groupby(["link", "node"]):
        bins = (group["t_s"] // width).astype(int)
        kbps = group.groupby(bins)["len"].sum() * 8 / width / 1e3
        kbps = kbps.reindex(range(BINS), fill_value=0)
        ax.step(
            kbps.index * width,
            kbps.to_numpy(),
            where="post",
            label=f"{links.get(int(link), link)} → {nodes.get(int(node), node)}",
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel("received (kbit/s)")
    ax.set_title("Throughput per link and receiver")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    return ax


def drops_over_time(
    traces: pd.DataFrame, report: dict[str, Any], ax: plt.Axes | None = None
) -> plt.Axes:
    """Cumulative packet drops over time, one line per reason."""
    ax = ax if ax is not None else plt.figure(figsize=(8, 4)).gca()
    drops = traces[traces["event"] == "packet_dropped"]
    for reason, group in drops.groupby("reason"):
        times = group["t_s"].sort_values().to_numpy()
        ax.step(times, range(1, len(times) + 1), where="post", label=str(reason))
    ax.set_xlim(0, float(report.get("duration_s", 0.0)) or None)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("packets dropped (cumulative)")
    ax.set_title("Drops by reason")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no drops", transform=ax.transAxes, ha="center", va="center")
    return ax


def plot_run(result: Result) -> list[Path]:
    """Draw the standard figures of a run into ``OUT/plots``; returns the files."""
    if result.trace_file is None or result.out_dir is None:
        return []
    traces = load_traces(result.trace_file)
    if traces.empty:
        return []
    out = result.out_dir / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in (("throughput", throughput_over_time), ("drops", drops_over_time)):
        fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
        draw(traces, result.report, ax)
        path = out / f"{name}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written
