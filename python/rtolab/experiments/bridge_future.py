"""The bridge study's recommendations it did not test (bridge spec §5), built
and measured on the bridge system of :mod:`rtolab.experiments.bridge`.

``rtolab reproduce bridge/ptx_filter --out DIR`` writes, in ``DIR/bridge/``:

* ``ptx_filter.csv``: the single exchange in the original configuration
  (no sensing, 1 s RTO) and the long session (both estimators, plain
  delayed ACK), each without and with the PTx filter (the ``ptx-filter``
  middlebox on the PTx), same seeds;
* ``ptx_filter_paired.csv``: per cell, the change the filter makes to the
  latency and to what crosses the NFC link, paired by seed (the same slot
  phase and session).
"""

from __future__ import annotations

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
from rtolab.experiments.stats import seed_table, spread

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

#: The PTx filter as a ``[[middlebox]]`` table (crates/sim/src/middlebox/ptx_filter.rs).
PTX_FILTER = f'\n[[middlebox]]\nkind = "ptx-filter"\nhost = "ptx"\nappliance = "{b.APPLIANCE}"\n'

FILTER_COLUMNS = (
    "session",
    "rate_kbps",
    "nfc_payload_bytes",
    "filter",
    "seed",
    "latency_s",
    "retx_appliance",
    "retx_end_user",
    "spurious_retx",
    "nfc_packets",
    "nfc_slots",
    "filtered",
    "counts",
)
PAIRED_COLUMNS = (
    "session",
    "rate_kbps",
    "nfc_payload_bytes",
    "n",
    "latency_change_s",
    "latency_change_ci95_s",
    "nfc_slots_saved",
    "filtered",
)


@dataclass(frozen=True)
class FilterCell:
    """One run of the PTx filter experiment: the single exchange
    (``session = "exchange"``) or the long session (``"long-vj"``,
    ``"long-algorithm1"``)."""

    session: str
    rate_kbps: float
    nfc_bytes: int
    filtered: bool
    seed: int

    @property
    def label(self) -> str:
        return (
            f"{self.session}-{self.rate_kbps:g}kbps-{self.nfc_bytes}B-"
            f"{'filter' if self.filtered else 'nofilter'}-seed{self.seed}"
        )

    def scenario(self) -> str:
        if self.session == "exchange":
            text = b.exchange_scenario(self.rate_kbps, self.nfc_bytes, False, None)
        else:
            estimator = self.session.removeprefix("long-")
            text = b.long_session_scenario(estimator, False, b.long_session_shape())
        return text + (PTX_FILTER if self.filtered else "")

    def run(self) -> ExperimentRun:
        return ExperimentRun(
            self.label,
            self.scenario(),
            self.seed,
            params={"session": self.session, "filter": self.filtered},
        )


def filter_cells(reduced: bool | None = None) -> list[FilterCell]:
    """Every run: the exchange at both rates and every size, the long
    session for both estimators, each without and with the filter."""
    reduced = b.quick() if reduced is None else reduced
    sizes = (1080,) if reduced else b.SIZES
    seeds = b.SEEDS[:1] if reduced else b.SEEDS
    cells = [
        FilterCell("exchange", rate, size, filtered, seed)
        for rate in b.MODES
        for size in sizes
        for filtered in (False, True)
        for seed in seeds
    ]
    long_seeds = b.LONG_SEEDS[:1] if reduced else b.LONG_SEEDS
    for estimator in ("vj", "algorithm1"):
        for filtered in (False, True):
            for seed in long_seeds:
                cells.append(FilterCell(f"long-{estimator}", 11.2, 0, filtered, seed))
    return cells


def _filter_stats(result: Result) -> dict[str, Any]:
    for box in result.report.get("middleboxes", []):
        if box.get("kind") == "ptx-filter":
            return dict(box.get("stats", box))
    return {}


def filter_row(result: Result, cell: FilterCell) -> dict[str, Any]:
    """One row of ``ptx_filter.csv``."""
    session = b.Session.of(result)
    flows = b.flows_by_host(result)
    stats = b.nfc_stats(result)
    counts = b.tcp_analysis_counts(session.eth)
    box = _filter_stats(result)
    return {
        "session": cell.session,
        "rate_kbps": cell.rate_kbps,
        "nfc_payload_bytes": cell.nfc_bytes,
        "filter": cell.filtered,
        "seed": cell.seed,
        "latency_s": b.session_latency(result),
        "retx_appliance": int(flows.get("appliance", {}).get("retransmissions", 0)),
        "retx_end_user": int(flows.get("enduser", {}).get("retransmissions", 0)),
        "spurious_retx": b.spurious_retransmissions(session),
        "nfc_packets": sum(int(d["delivered_packets"]) for d in stats["directions"]),
        "nfc_slots": sum(int(d["slots"]) for d in stats["directions"]),
        "filtered": int(box.get("dropped_acknowledged", 0))
        + int(box.get("dropped_duplicate_acks", 0)),
        "counts": b.study_form(counts),
    }


def paired_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per session, rate and size: the filter's change of latency (mean over
    seeds of with minus without, same seed, and its 95 % CI), the NFC slots it
    saved on average, and the segments it dropped."""
    keys = ["session", "rate_kbps", "nfc_payload_bytes"]
    rows = []
    for key, group in table.groupby(keys, sort=False):
        off = group[~group["filter"]].set_index("seed")
        on = group[group["filter"]].set_index("seed")
        seeds = off.index.intersection(on.index)
        change = spread(on.loc[seeds, "latency_s"] - off.loc[seeds, "latency_s"])
        saved = (off.loc[seeds, "nfc_slots"] - on.loc[seeds, "nfc_slots"]).mean()
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": change["n"],
                "latency_change_s": change["mean"],
                "latency_change_ci95_s": change["ci95"],
                "nfc_slots_saved": saved,
                "filtered": on.loc[seeds, "filtered"].mean(),
            }
        )
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def filter_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Session latency without and with the filter, per cell (mean over
    seeds, error bars min..max)."""
    import matplotlib.pyplot as plt

    from rtolab.plots import PALETTE

    if table.empty:
        return []
    keys = ["session", "rate_kbps", "nfc_payload_bytes"]
    groups = list(table.groupby(keys, sort=False))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(groups)), 4.2), layout="constrained")
    width = 0.4
    for i, filtered in enumerate((False, True)):
        means, lows, highs = [], [], []
        for _, group in groups:
            x = group[group["filter"] == filtered]["latency_s"]
            means.append(x.mean())
            lows.append(x.mean() - x.min())
            highs.append(x.max() - x.mean())
        ax.bar(
            [k + (i - 0.5) * width for k in range(len(groups))],
            means,
            width,
            yerr=[lows, highs],
            capsize=2,
            color=PALETTE[i],
            label="with the PTx filter" if filtered else "without",
        )

    def name(key: tuple[Any, ...]) -> str:
        session, rate, size = key
        if session == "exchange":
            return f"{size} B\n{rate:g} kbps"
        return f"long\n{session.removeprefix('long-')}"

    ax.set_xticks(range(len(groups)), [name(k) for k, _ in groups], fontsize=8)
    ax.set_ylabel("session latency (s)")
    ax.set_title("Original configuration (no sensing, 1 s RTO) and long session")
    fig.legend(loc="outside lower center", ncols=2)
    return [("ptx-filter", fig)]


def filter_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``ptx_filter.csv``, ``ptx_filter_paired.csv`` and the figure."""
    done = b.write_comparison(
        results,
        filter_cells(),
        filter_row,
        FILTER_COLUMNS,
        "ptx_filter",
        paired_table,
        filter_figures,
    )
    if done is None:
        return [Check("runs completed", False, "no results")]
    table, paired = done.table, done.compared
    on = table[table["filter"]]
    saved = paired["nfc_slots_saved"].sum()
    return [
        Check(
            "every session completed",
            b.nan_free(table, "latency_s"),
            f"{int(table['latency_s'].notna().sum())} of {len(table)}",
        ),
        Claim(
            "A PTx that filters spurious retransmissions and duplicate ACKs saves the NFC "
            "link their crossings (bridge spec §5, untested by the study)",
            f"{int(on['filtered'].sum())} segments dropped in {len(on)} runs; "
            f"{saved:g} NFC slots saved over all cells (mean per seed, summed)",
            bool(saved > 0) if len(on) else None,
        ),
    ]


def filter_report(directory: Path) -> list[str]:
    """The paired table, the per-cell means and the figure."""
    from rtolab.reports import table_html

    bridge_dir = directory / b.SYSTEM
    parts: list[str] = []
    paired = bridge_dir / "ptx_filter_paired.csv"
    if paired.is_file():
        parts.append(
            "<h3>ptx_filter_paired.csv (with the filter minus without, same seed; "
            "latency change mean and 95 % CI)</h3>" + table_html(pd.read_csv(paired))
        )
    full = bridge_dir / "ptx_filter.csv"
    if full.is_file():
        shown = seed_table(
            pd.read_csv(full), ["session", "rate_kbps", "nfc_payload_bytes", "filter"]
        )
        parts.append(
            "<h3>ptx_filter.csv (n runs; mean over seeds, min..max where they differ)</h3>"
            + table_html(shown)
        )
    png = bridge_dir / "figures" / "ptx-filter.png"
    if png.is_file():
        parts.append(figure_html(png, directory))
    return parts


register(
    Experiment(
        system=b.SYSTEM,
        name="ptx_filter",
        title="The PTx filter (future work): spurious retransmissions and third duplicate "
        "ACKs dropped before the NFC link",
        description=(
            "The PTx drops segments to the appliance whose data the appliance has already "
            "acknowledged and duplicate ACKs from the third in a row on; the single exchange "
            "in the original configuration and the long session, without and with it, same "
            "seeds. Writes ptx_filter.csv and ptx_filter_paired.csv."
        ),
        runs=lambda: [c.run() for c in filter_cells()],
        checks=filter_checks,
        report=filter_report,
        trace_families=b.TRACE_FAMILIES,
    )
)
