"""The bridge study's buffer and MTU exchange (bridge spec §5), built and
measured on the bridge system of :mod:`rtolab.experiments.bridge`: the two
NFC ends advertise their packet buffers at link set-up and the appliance's
MSS follows from the smaller (the ``nfc`` link's ``buffers`` table with
``exchange = true``), against the same buffers with the hosts' fixed MSS of
1024 (``exchange = false``).

``rtolab reproduce bridge/buffers --out DIR`` writes, in ``DIR/bridge/``:

* ``buffers.csv``: the single exchange with both fixes, for two buffer
  layouts, both rates and six message sizes, with the fixed and the
  negotiated MSS, same seeds (same slot phase): latency, goodput, the
  largest segment on the NFC capture, packets lost to a buffer too small;
* ``buffers_paired.csv``: per layout, rate and size, how many sessions
  completed with each MSS, latency and goodput of each, and the negotiated
  MSS's change of latency, paired by seed (n, mean, sd, min, max, 95 % CI),
  against the fixed MSS and against the spec's 2 kB MCUs (what the small
  buffers cost once negotiated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rtolab.experiments import (
    Check,
    Claim,
    Experiment,
    ExperimentRun,
    figure_html,
    register,
)
from rtolab.experiments import bridge as b
from rtolab.experiments.bridge_links import with_link_fields
from rtolab.experiments.stats import seed_table, spread

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

#: The buffer layouts: name, the ``nfc`` link's ``bytes`` and ``pbuf`` per
#: end (appliance first) and the MSS the exchange gives (crates/sim/src/link/nfc_buffers.rs).
LAYOUTS: dict[str, tuple[str, int]] = {
    # The appliance keeps packets in lwIP's pbuf pool: 1024 bytes of
    # 256-byte pbufs hold three (16 + 256 bytes each), 768 bytes of NFC
    # payload; the PTx's MCU the spec's 2 kB.
    "appliance 1024 B of 256-B pbufs": ("bytes = [1024, 2048], pbuf = [256, 0]", 712),
    # A PTx module with half a kilobyte: the appliance's full segments
    # cross the air and are lost on arrival.
    "PTx 512 B": ("bytes = [2048, 512], pbuf = [0, 0]", 456),
}
#: The hosts' own MSS (the lwip profile), what the fixed case keeps.
FIXED_MSS = 1024
#: Request and response sizes (TCP payload bytes): the study's four NFC
#: payloads (250, 500, 1000, 1080 bytes) and two messages of several segments.
MESSAGES = (194, 444, 944, 1024, 2048, 4096)
#: ``fixed``: the layout's buffers, the hosts' MSS; ``negotiated``: the same
#: buffers exchanged; ``unconstrained``: the spec's 2 kB MCUs at both ends
#: (no ``buffers`` table), what the small buffers cost once negotiated.
MSS_MODES = ("fixed", "negotiated", "unconstrained")

BUFFER_COLUMNS = (
    "layout",
    "rate_kbps",
    "message_bytes",
    "mss_mode",
    "seed",
    "mss",
    "completed",
    "latency_s",
    "goodput_kbps",
    "largest_segment_bytes",
    "nfc_packets_sent",
    "overflow_drops",
    "nfc_slots",
    "retx_appliance",
    "retx_end_user",
)
PAIRED_COLUMNS = (
    "layout",
    "rate_kbps",
    "message_bytes",
    "negotiated_mss",
    "n",
    "completed_fixed",
    "completed_negotiated",
    "overflow_drops_fixed",
    "latency_fixed_s",
    "latency_negotiated_s",
    "latency_negotiated_sd_s",
    "goodput_fixed_kbps",
    "goodput_negotiated_kbps",
    "latency_change_n",
    "latency_change_s",
    "latency_change_sd_s",
    "latency_change_min_s",
    "latency_change_max_s",
    "latency_change_ci95_s",
    "latency_unconstrained_s",
    "cost_change_n",
    "cost_change_s",
    "cost_change_sd_s",
    "cost_change_ci95_s",
)


@dataclass(frozen=True)
class BufferCell:
    """One run: the single exchange with both fixes, messages of
    ``message`` bytes each way, buffers of ``layout``, MSS ``mode``."""

    layout: str
    rate_kbps: float
    message: int
    mode: str
    seed: int

    @property
    def label(self) -> str:
        name = self.layout.split()[0].lower()
        return f"{name}-{self.rate_kbps:g}kbps-{self.message}B-{self.mode}-seed{self.seed}"

    def scenario(self) -> str:
        cell = b.Cell(self.rate_kbps, 1080, "sensing+optimum_rto", self.seed)
        nfc_bytes = self.message + b.HEADERS + b.FRAMING
        text = b.exchange_scenario(self.rate_kbps, nfc_bytes, True, cell.rto())
        if self.mode == "unconstrained":
            return text
        fields, _ = LAYOUTS[self.layout]
        exchange = "true" if self.mode == "negotiated" else "false"
        return with_link_fields(text, f"buffers = {{ {fields}, exchange = {exchange} }}")

    def run(self) -> ExperimentRun:
        return ExperimentRun(
            self.label,
            self.scenario(),
            self.seed,
            params={
                "layout": self.layout,
                "rate_kbps": self.rate_kbps,
                "message_bytes": self.message,
                "mss_mode": self.mode,
            },
        )


def buffer_cells(reduced: bool | None = None) -> list[BufferCell]:
    """Every run: each layout, rate and message size with both MSS modes,
    for the same seeds."""
    reduced = b.quick() if reduced is None else reduced
    messages = (444, 1024) if reduced else MESSAGES
    seeds = b.SEEDS[:2] if reduced else b.SEEDS
    layouts = list(LAYOUTS)[:1] if reduced else list(LAYOUTS)
    return [
        BufferCell(layout, rate, message, mode, seed)
        for layout in layouts
        for rate in b.MODES
        for message in messages
        for mode in MSS_MODES
        for seed in seeds
    ]


def buffer_row(result: Result, cell: BufferCell) -> dict[str, Any]:
    """One row of ``buffers.csv``."""
    flows = b.flows_by_host(result)
    directions = b.nfc_stats(result)["directions"]
    session = b.Session.of(result)
    tcp = session.nfc[session.nfc["protocol"] == "tcp"]
    latency = b.session_latency(result)
    completed = not math.isnan(latency)

    def total(key: str) -> int:
        return sum(int(d.get(key, 0)) for d in directions)

    return {
        "layout": cell.layout,
        "rate_kbps": cell.rate_kbps,
        "message_bytes": cell.message,
        "mss_mode": cell.mode,
        "seed": cell.seed,
        "mss": LAYOUTS[cell.layout][1] if cell.mode == "negotiated" else FIXED_MSS,
        "completed": completed,
        "latency_s": latency,
        "goodput_kbps": 2 * cell.message * 8 / latency / 1e3 if completed else math.nan,
        "largest_segment_bytes": int(tcp["payload_len"].max()) if len(tcp) else 0,
        "nfc_packets_sent": total("sent_packets"),
        "overflow_drops": total("dropped_buffer_overflow"),
        "nfc_slots": total("slots"),
        "retx_appliance": int(flows.get("appliance", {}).get("retransmissions", 0)),
        "retx_end_user": int(flows.get("enduser", {}).get("retransmissions", 0)),
    }


def paired_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per layout, rate and size: completions, latency and goodput with each
    MSS, and the negotiated MSS's change of latency over the seeds where
    both completed (negotiated minus fixed); beside it, what the small
    buffers cost once negotiated (negotiated minus the spec's 2 kB MCUs with
    the hosts' MSS, same seed)."""
    keys = ["layout", "rate_kbps", "message_bytes"]
    rows = []
    for key, group in table.groupby(keys, sort=False):
        fixed = group[group["mss_mode"] == "fixed"].set_index("seed")
        neg = group[group["mss_mode"] == "negotiated"].set_index("seed")
        big = group[group["mss_mode"] == "unconstrained"].set_index("seed")
        seeds = fixed.index.intersection(neg.index)
        change = spread(neg.loc[seeds, "latency_s"] - fixed.loc[seeds, "latency_s"])
        both = big.index.intersection(neg.index)
        cost = spread(neg.loc[both, "latency_s"] - big.loc[both, "latency_s"])
        latency_neg = spread(neg["latency_s"])
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "negotiated_mss": LAYOUTS[key[0]][1],
                "n": len(seeds),
                "completed_fixed": int(fixed["completed"].sum()),
                "completed_negotiated": int(neg["completed"].sum()),
                "overflow_drops_fixed": float(fixed["overflow_drops"].mean()),
                "latency_fixed_s": float(fixed["latency_s"].mean()),
                "latency_negotiated_s": latency_neg["mean"],
                "latency_negotiated_sd_s": latency_neg["sd"],
                "goodput_fixed_kbps": float(fixed["goodput_kbps"].mean()),
                "goodput_negotiated_kbps": float(neg["goodput_kbps"].mean()),
                "latency_change_n": change["n"],
                "latency_change_s": change["mean"],
                "latency_change_sd_s": change["sd"],
                "latency_change_min_s": change["min"],
                "latency_change_max_s": change["max"],
                "latency_change_ci95_s": change["ci95"],
                "latency_unconstrained_s": float(big["latency_s"].mean()),
                "cost_change_n": cost["n"],
                "cost_change_s": cost["mean"],
                "cost_change_sd_s": cost["sd"],
                "cost_change_ci95_s": cost["ci95"],
            }
        )
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def buffer_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Goodput per message size with the fixed and the negotiated MSS, per
    layout and rate (mean over the seeds that completed; a size where no
    session completed has no point)."""
    import matplotlib.pyplot as plt

    from rtolab.plots import PALETTE

    if table.empty:
        return []
    layouts = list(table["layout"].unique())
    fig, axes = plt.subplots(
        1, len(layouts), figsize=(5.2 * len(layouts), 4.2), layout="constrained", squeeze=False
    )
    styles = {"fixed": "--", "negotiated": "-", "unconstrained": ":"}
    for ax, layout in zip(axes[0], layouts, strict=True):
        part = table[table["layout"] == layout]
        for i, rate in enumerate(sorted(part["rate_kbps"].unique())):
            for mode, style in styles.items():
                cell = part[(part["rate_kbps"] == rate) & (part["mss_mode"] == mode)]
                stats = cell.groupby("message_bytes")["goodput_kbps"].agg(["mean", "min", "max"])
                ax.errorbar(
                    stats.index,
                    stats["mean"],
                    yerr=[stats["mean"] - stats["min"], stats["max"] - stats["mean"]],
                    color=PALETTE[i],
                    linestyle=style,
                    marker="o",
                    capsize=2,
                    label=f"{rate:g} kbps, {mode}",
                )
        ax.set_title(layout)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message each way (bytes)")
        ax.set_ylabel("goodput (kbit/s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8)
    fig.suptitle("Goodput per message size with the fixed and the negotiated MSS")
    return [("buffers-goodput", fig)]


def buffer_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``buffers.csv``, ``buffers_paired.csv`` and the figure."""
    done = b.write_comparison(
        results, buffer_cells(), buffer_row, BUFFER_COLUMNS, "buffers", paired_table, buffer_figures
    )
    if done is None:
        return [Check("runs completed", False, "no results")]
    table = done.table
    neg = table[table["mss_mode"] == "negotiated"]
    fixed = table[table["mss_mode"] == "fixed"]
    too_big = fixed[fixed["message_bytes"] > fixed["layout"].map(lambda n: LAYOUTS[n][1])]
    return [
        Check(
            "with the negotiated MSS every session completed, no segment on the NFC capture "
            "exceeded it and no packet was lost to a buffer",
            bool(
                neg["completed"].all()
                and (neg["largest_segment_bytes"] <= neg["mss"]).all()
                and (neg["overflow_drops"] == 0).all()
            ),
            f"{int(neg['completed'].sum())} of {len(neg)} completed",
        ),
        Claim(
            "Negotiating the MSS from the NFC ends' buffers keeps every segment within what "
            "the modules hold; a fixed MSS above it loses every full segment "
            "(bridge spec §5, untested by the study)",
            f"fixed MSS, messages above the negotiated MSS: {int(too_big['completed'].sum())} "
            f"of {len(too_big)} sessions completed, "
            f"{too_big['overflow_drops'].mean():.1f} packets lost to a buffer per run",
            bool(len(too_big)) and not bool(too_big["completed"].any()),
        ),
    ]


def buffer_report(directory: Path) -> list[str]:
    """The paired table, the per-cell means and the figure."""
    from rtolab.reports import table_html

    bridge_dir = directory / b.SYSTEM
    parts: list[str] = []
    paired = bridge_dir / "buffers_paired.csv"
    if paired.is_file():
        parts.append(
            "<h3>buffers_paired.csv (sessions completed with the fixed and the negotiated "
            "MSS; latency and goodput of each; the negotiated MSS's change of latency, same "
            "seed, n, mean, sd, min, max and 95 % CI, over the seeds where both "
            "completed; cost: negotiated minus the spec's 2 kB MCUs, same seed)</h3>"
            + table_html(pd.read_csv(paired))
        )
    full = bridge_dir / "buffers.csv"
    if full.is_file():
        shown = seed_table(
            pd.read_csv(full), ["layout", "rate_kbps", "message_bytes", "mss_mode", "mss"]
        )
        parts.append(
            "<h3>buffers.csv (n runs; mean over seeds, min..max where they differ)</h3>"
            + table_html(shown)
        )
    png = bridge_dir / "figures" / "buffers-goodput.png"
    if png.is_file():
        parts.append(figure_html(png, directory))
    return parts


register(
    Experiment(
        system=b.SYSTEM,
        name="buffers",
        title="Buffer and MTU exchange (future work): the MSS follows the NFC ends' buffers",
        description=(
            "The single exchange with both fixes, for two buffer layouts of the NFC ends "
            "(the appliance's lwIP pbuf pool, a small PTx module), both rates and six "
            "message sizes, with the hosts' fixed MSS of 1024, with the MSS negotiated "
            "from the buffers at link set-up, and on the spec's 2 kB MCUs, same seeds. "
            "Writes buffers.csv and "
            "buffers_paired.csv."
        ),
        runs=lambda: [c.run() for c in buffer_cells()],
        checks=buffer_checks,
        report=buffer_report,
        trace_families=b.TRACE_FAMILIES,
    )
)
