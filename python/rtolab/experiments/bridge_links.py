"""The bridge study's NFC-link recommendations (bridge spec §5), built and
measured on the bridge system of :mod:`rtolab.experiments.bridge`: TCP/IP
header compression (RFC 1144, the ``nfc`` link's ``header_compression``)
and the faster links (``uart_baud``, ``mcu = false``).

``rtolab reproduce bridge/compression --out DIR`` writes, in ``DIR/bridge/``:

* ``compression.csv``: the single exchange at both rates and the study's four
  sizes, with both fixes (``sensing+optimum_rto``) and in the original
  configuration, and the long session (both estimators, plain delayed ACK),
  each without and with header compression, same seeds (same slot phase);
* ``compression_paired.csv``: per cell, compression's change of latency and
  of NFC slots, paired by seed (n, mean, sd, min, max, 95 % CI), beside the
  theoretical minimum latency with and without compressed headers and
  equation 5.2 for a full segment with a 40-byte and a compressed header.

``rtolab reproduce bridge/faster_links --out DIR`` writes
``faster_links.csv`` and ``faster_links_summary.csv``: the single exchange
with both fixes for UART rates of 115 200 to 921 600 baud and without the
MCU, latency per size and rate.
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
from rtolab.experiments.stats import seed_table, spread

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

# ----- header compression: RFC 1144's sizes, for the theory -----

#: Bytes of a compressed TCP/IP header in RFC 1144's best case: the change
#: mask and the TCP checksum (the next segment of a one-way stream, or data
#: after a pure ACK).
COMPRESSED_HEADER = 3


def delta_len(value: int) -> int:
    """Bytes RFC 1144 spends on a field's delta: one for 1-255, else three."""
    return 1 if 1 <= value <= 255 else 3


def rtt_nfc_compressed(tcp_payload: int, rate_kbps: float) -> float:
    """Equation 5.2 for a segment of ``tcp_payload`` bytes whose 40 header
    bytes crossed as :data:`COMPRESSED_HEADER`, in seconds."""
    return b.rtt_nfc(tcp_payload + COMPRESSED_HEADER + b.FRAMING, rate_kbps)


def minimal_session_compressed(request: int, response: int) -> list[tuple[str, int]]:
    """:func:`bridge.minimal_session` with each packet at its length on a
    link with RFC 1144 compression: the SYNs and FINs cross as plain IP, the
    request and the response are the first compressible packets of their
    direction and cross whole (they set the state), and the last ACK is
    compressed against the request: mask, checksum, the ACK and sequence
    deltas (response + 1 and request + 1: the FINs count one) and the IP ID
    delta (2: the appliance's FIN came between)."""
    packets = b.minimal_session(request, response)
    last = 1 + 2 + delta_len(response + 1) + delta_len(request + 1) + delta_len(2)
    return [*packets[:-1], (packets[-1][0], last)]


def theoretical_min_latency(
    request: int, response: int, rate_kbps: float, phase: float, start: float, compressed: bool
) -> float:
    """:func:`bridge.theoretical_min_latency`, with each packet crossing the
    NFC link at its compressed length when ``compressed`` (the Ethernet
    carries it as it was sent)."""
    if not compressed:
        return b.theoretical_min_latency(request, response, rate_kbps, phase, start)
    t = start
    sent = b.minimal_session(request, response)
    on_link = minimal_session_compressed(request, response)
    for (direction, ip_len), (_, link_len) in zip(sent, on_link, strict=True):
        if direction == "up":
            t = b.ethernet_crossing(b.nfc_crossing(t, link_len, rate_kbps, phase), ip_len)
        else:
            t = b.nfc_crossing(b.ethernet_crossing(t, ip_len), link_len, rate_kbps, phase)
    return t - start


# ----- scenarios -----

#: The ``nfc`` link's field that turns compression on.
COMPRESSION_FIELD = 'header_compression = "rfc1144"'

#: The long session's estimators (plain delayed ACK).
LONG_ESTIMATORS = ("vj", "algorithm1")
EXCHANGE_CONFIGS = ("sensing+optimum_rto", "original")


def with_link_fields(text: str, fields: str) -> str:
    """``text`` with ``fields`` added to its ``nfc`` link."""
    marker = 'kind = "nfc"\n'
    if marker not in text:
        raise ValueError("the scenario has no nfc link")
    return text.replace(marker, marker + fields + "\n", 1)


@dataclass(frozen=True)
class CompressionCell:
    """One run: the single exchange (``session = "exchange"``) in ``config``,
    or the long session (``"long-vj"``, ``"long-algorithm1"``)."""

    session: str
    config: str
    rate_kbps: float
    nfc_bytes: int
    compressed: bool
    seed: int

    @property
    def label(self) -> str:
        return (
            f"{self.session}-{self.config.replace('+', '_')}-{self.rate_kbps:g}kbps-"
            f"{self.nfc_bytes}B-{'rfc1144' if self.compressed else 'none'}-seed{self.seed}"
        )

    def scenario(self) -> str:
        if self.session == "exchange":
            cell = b.Cell(self.rate_kbps, self.nfc_bytes, self.config, self.seed)
            text = b.exchange_scenario(self.rate_kbps, self.nfc_bytes, cell.sensing, cell.rto())
        else:
            estimator = self.session.removeprefix("long-")
            text = b.long_session_scenario(estimator, False, b.long_session_shape())
        return with_link_fields(text, COMPRESSION_FIELD) if self.compressed else text

    def run(self) -> ExperimentRun:
        return ExperimentRun(
            self.label,
            self.scenario(),
            self.seed,
            params={
                "session": self.session,
                "config": self.config,
                "rate_kbps": self.rate_kbps,
                "nfc_payload_bytes": self.nfc_bytes,
                "header_compression": self.compressed,
            },
        )


def compression_cells(reduced: bool | None = None) -> list[CompressionCell]:
    """Every run: the exchange at both rates, every size, both
    configurations; the long session for both estimators; each without and
    with compression, for the same seeds."""
    reduced = b.quick() if reduced is None else reduced
    sizes = (1080,) if reduced else b.SIZES
    seeds = b.SEEDS[:2] if reduced else b.SEEDS
    configs = EXCHANGE_CONFIGS[:1] if reduced else EXCHANGE_CONFIGS
    cells = [
        CompressionCell("exchange", config, rate, size, compressed, seed)
        for config in configs
        for rate in b.MODES
        for size in sizes
        for compressed in (False, True)
        for seed in seeds
    ]
    estimators = LONG_ESTIMATORS[:1] if reduced else LONG_ESTIMATORS
    long_seeds = b.LONG_SEEDS[:1] if reduced else b.LONG_SEEDS
    for estimator in estimators:
        for compressed in (False, True):
            for seed in long_seeds:
                cells.append(
                    CompressionCell(f"long-{estimator}", "sensing", 11.2, 0, compressed, seed)
                )
    return cells


# ----- analysis -----

COMPRESSION_COLUMNS = (
    "session",
    "config",
    "rate_kbps",
    "nfc_payload_bytes",
    "compression",
    "seed",
    "latency_s",
    "theoretical_min_latency_s",
    "nfc_slots",
    "ip_bytes",
    "link_bytes",
    "compressed_packets",
    "uncompressed_tcp_packets",
    "dropped_decompression",
    "nfc_drops",
    "retx_appliance",
    "retx_end_user",
)
PAIRED_COLUMNS = (
    "session",
    "config",
    "rate_kbps",
    "nfc_payload_bytes",
    "n",
    "latency_without_s",
    "latency_change_s",
    "latency_change_sd_s",
    "latency_change_min_s",
    "latency_change_max_s",
    "latency_change_ci95_s",
    "latency_change_pct",
    "slots_saved",
    "slots_saved_ci95",
    "theoretical_min_without_s",
    "theoretical_min_with_s",
    "eq5_2_full_header_s",
    "eq5_2_compressed_header_s",
)


def compression_row(result: Result, cell: CompressionCell) -> dict[str, Any]:
    """One row of ``compression.csv``."""
    flows = b.flows_by_host(result)
    stats = b.nfc_stats(result)
    directions = stats["directions"]
    latency = b.session_latency(result)
    theory = math.nan
    if cell.session == "exchange":
        payload = cell.nfc_bytes - b.HEADERS - b.FRAMING
        start = int(flows["appliance"]["opened_ns"]) / 1e9 if "appliance" in flows else 0.0
        phase = int(stats["slot_phase_ns"]) / 1e9
        theory = theoretical_min_latency(
            payload, payload, cell.rate_kbps, phase, start, cell.compressed
        )

    def total(key: str) -> int:
        return sum(int(d.get(key, 0)) for d in directions)

    return {
        "session": cell.session,
        "config": cell.config,
        "rate_kbps": cell.rate_kbps,
        "nfc_payload_bytes": cell.nfc_bytes,
        "compression": "rfc1144" if cell.compressed else "none",
        "seed": cell.seed,
        "latency_s": latency,
        "theoretical_min_latency_s": theory,
        "nfc_slots": total("slots"),
        "ip_bytes": total("sent_bytes"),
        "link_bytes": total("link_bytes"),
        "compressed_packets": total("compressed_packets"),
        "uncompressed_tcp_packets": total("uncompressed_tcp_packets"),
        "dropped_decompression": total("dropped_decompression"),
        "nfc_drops": total("dropped_mcu_busy"),
        "retx_appliance": int(flows.get("appliance", {}).get("retransmissions", 0)),
        "retx_end_user": int(flows.get("enduser", {}).get("retransmissions", 0)),
    }


def paired_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per cell: compression's change of latency (with minus without, same
    seed) and the NFC slots it saved, with n, spread and 95 % CI; the
    theoretical minima and equation 5.2 beside them."""
    keys = ["session", "config", "rate_kbps", "nfc_payload_bytes"]
    rows = []
    for key, group in table.groupby(keys, sort=False):
        off = group[group["compression"] == "none"].set_index("seed")
        on = group[group["compression"] == "rfc1144"].set_index("seed")
        seeds = off.index.intersection(on.index)
        change = spread(on.loc[seeds, "latency_s"] - off.loc[seeds, "latency_s"])
        saved = spread(off.loc[seeds, "nfc_slots"] - on.loc[seeds, "nfc_slots"])
        without = float(off.loc[seeds, "latency_s"].mean())
        row = dict(zip(keys, key, strict=True))
        session, _, rate, size = key
        payload = size - b.HEADERS - b.FRAMING
        exchange = session == "exchange"
        rows.append(
            {
                **row,
                "n": change["n"],
                "latency_without_s": without,
                "latency_change_s": change["mean"],
                "latency_change_sd_s": change["sd"],
                "latency_change_min_s": change["min"],
                "latency_change_max_s": change["max"],
                "latency_change_ci95_s": change["ci95"],
                "latency_change_pct": 100 * change["mean"] / without if without else math.nan,
                "slots_saved": saved["mean"],
                "slots_saved_ci95": saved["ci95"],
                "theoretical_min_without_s": float(
                    off.loc[seeds, "theoretical_min_latency_s"].mean()
                ),
                "theoretical_min_with_s": float(on.loc[seeds, "theoretical_min_latency_s"].mean()),
                "eq5_2_full_header_s": b.rtt_nfc(size, rate) if exchange else math.nan,
                "eq5_2_compressed_header_s": (
                    rtt_nfc_compressed(payload, rate) if exchange else math.nan
                ),
            }
        )
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def compression_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Latency per size with and without compression, per rate (mean over
    seeds, error bars min..max), with the theoretical minima."""
    import matplotlib.pyplot as plt

    from rtolab.plots import PALETTE

    exchange = table[table["session"] == "exchange"]
    if exchange.empty:
        return []
    rates = sorted(exchange["rate_kbps"].unique())
    fig, axes = plt.subplots(
        1, len(rates), figsize=(5.2 * len(rates), 4.2), layout="constrained", squeeze=False
    )
    styles = {"none": "-", "rfc1144": "--"}
    for ax, rate in zip(axes[0], rates, strict=True):
        part = exchange[exchange["rate_kbps"] == rate]
        for i, config in enumerate(part["config"].unique()):
            for compression, style in styles.items():
                cell = part[(part["config"] == config) & (part["compression"] == compression)]
                stats = cell.groupby("nfc_payload_bytes")["latency_s"].agg(["mean", "min", "max"])
                ax.errorbar(
                    stats.index,
                    stats["mean"],
                    yerr=[stats["mean"] - stats["min"], stats["max"] - stats["mean"]],
                    color=PALETTE[i],
                    linestyle=style,
                    marker="o",
                    capsize=2,
                    label=f"{config}, {'RFC 1144' if compression == 'rfc1144' else 'no'} "
                    "compression",
                )
            if config == "sensing+optimum_rto":
                for compression, style in styles.items():
                    cell = part[(part["config"] == config) & (part["compression"] == compression)]
                    theory = cell.groupby("nfc_payload_bytes")["theoretical_min_latency_s"].mean()
                    ax.plot(
                        theory.index,
                        theory.values,
                        color="grey",
                        linestyle=style,
                        linewidth=1,
                        label="theoretical minimum"
                        + (", compressed" if compression == "rfc1144" else ""),
                    )
        ax.set_title(f"{rate:g} kbit/s")
        ax.set_xlabel("NFC payload without compression (bytes)")
        ax.set_ylabel("session latency (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle("Latency per size with and without header compression")
    return [("compression-latency", fig)]


def compression_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``compression.csv``, ``compression_paired.csv`` and the figure."""
    done = b.write_comparison(
        results,
        compression_cells(),
        compression_row,
        COMPRESSION_COLUMNS,
        "compression",
        paired_table,
        compression_figures,
    )
    if done is None:
        return [Check("runs completed", False, "no results")]
    table, paired = done.table, done.compared
    on = table[table["compression"] == "rfc1144"]
    off = table[table["compression"] == "none"]
    exchange = table[table["session"] == "exchange"]
    fixed = paired[(paired["session"] == "exchange") & (paired["config"] == "sensing+optimum_rto")]
    shorter = bool((fixed["latency_change_max_s"] < 0).all()) if len(fixed) else None
    return [
        Check(
            "every session completed",
            b.nan_free(table, "latency_s"),
            f"{int(table['latency_s'].notna().sum())} of {len(table)}",
        ),
        Check(
            "compression changes only what crosses the link: the same IP bytes are sent "
            "with fewer bytes on the link",
            bool(
                (on["link_bytes"] < on["ip_bytes"]).all()
                and (off["link_bytes"] == off["ip_bytes"]).all()
            ),
            f"{len(on)} runs with compression",
        ),
        Check(
            "no exchange beats its theoretical minimum",
            bool((exchange["latency_s"] >= exchange["theoretical_min_latency_s"] - 1e-9).all()),
            f"{len(exchange)} exchanges",
        ),
        Claim(
            "Compressing the TCP/IP headers on the NFC link shortens the exchange "
            "(bridge spec §5, untested by the study)",
            "with both fixes, latency change per cell (mean over paired seeds): "
            + ", ".join(
                f"{r.rate_kbps:g} kbps {r.nfc_payload_bytes} B {r.latency_change_s * 1e3:+.0f} ms"
                for r in fixed.itertuples()
            ),
            shorter,
        ),
    ]


def compression_report(directory: Path) -> list[str]:
    """The paired table, the per-cell means and the figure."""
    from rtolab.reports import table_html

    bridge_dir = directory / b.SYSTEM
    parts: list[str] = []
    paired = bridge_dir / "compression_paired.csv"
    if paired.is_file():
        parts.append(
            "<h3>compression_paired.csv (with RFC 1144 compression minus without, same "
            "seed: n, mean, sd, min, max and 95 % CI of the latency change; NFC slots "
            "saved; theoretical minima and equation 5.2)</h3>" + table_html(pd.read_csv(paired))
        )
    full = bridge_dir / "compression.csv"
    if full.is_file():
        shown = seed_table(
            pd.read_csv(full),
            ["session", "config", "rate_kbps", "nfc_payload_bytes", "compression"],
        )
        parts.append(
            "<h3>compression.csv (n runs; mean over seeds, min..max where they differ)</h3>"
            + table_html(shown)
        )
    png = bridge_dir / "figures" / "compression-latency.png"
    if png.is_file():
        parts.append(figure_html(png, directory))
    return parts


register(
    Experiment(
        system=b.SYSTEM,
        name="compression",
        title="Header compression on the NFC link (future work): RFC 1144 between the "
        "appliance and the PTx",
        description=(
            "The single exchange at both rates and the study's sizes, with both fixes and "
            "in the original configuration, and the long session, each without and with "
            "RFC 1144 TCP/IP header compression on the NFC link, same seeds (slot phase). "
            "Writes compression.csv and compression_paired.csv."
        ),
        runs=lambda: [c.run() for c in compression_cells()],
        checks=compression_checks,
        report=compression_report,
        trace_families=b.TRACE_FAMILIES,
    )
)


# ----- faster links -----

#: The link variants of the faster-links sweep: name and the ``nfc`` link's
#: fields (the study's link first).
LINK_VARIANTS: tuple[tuple[str, str], ...] = (
    ("115200 baud", ""),
    ("230400 baud", "uart_baud = 230400"),
    ("460800 baud", "uart_baud = 460800"),
    ("921600 baud", "uart_baud = 921600"),
    ("no MCU", "mcu = false"),
    ("921600 baud, no MCU", "uart_baud = 921600\nmcu = false"),
)
LINK_COLUMNS = ("link", "rate_kbps", "nfc_payload_bytes", "seed", "latency_s", "nfc_slots")
LINK_SUMMARY_COLUMNS = (
    "link",
    "rate_kbps",
    "nfc_payload_bytes",
    "n",
    "latency_s",
    "latency_sd_s",
    "latency_change_s",
    "latency_change_ci95_s",
    "latency_change_pct",
)


@dataclass(frozen=True)
class LinkCell:
    """One run of the faster-links sweep: the single exchange with both
    fixes on link variant ``link``."""

    link: str
    rate_kbps: float
    nfc_bytes: int
    seed: int

    @property
    def label(self) -> str:
        name = self.link.replace(" ", "").replace(",", "-")
        return f"{name}-{self.rate_kbps:g}kbps-{self.nfc_bytes}B-seed{self.seed}"

    def scenario(self) -> str:
        cell = b.Cell(self.rate_kbps, self.nfc_bytes, "sensing+optimum_rto", self.seed)
        text = b.exchange_scenario(self.rate_kbps, self.nfc_bytes, True, cell.rto())
        fields = dict(LINK_VARIANTS)[self.link]
        return with_link_fields(text, fields) if fields else text

    def run(self) -> ExperimentRun:
        return ExperimentRun(
            self.label,
            self.scenario(),
            self.seed,
            params={"link": self.link, "rate_kbps": self.rate_kbps, "nfc_bytes": self.nfc_bytes},
        )


def link_cells(reduced: bool | None = None) -> list[LinkCell]:
    """Every run of the faster-links sweep."""
    reduced = b.quick() if reduced is None else reduced
    sizes = (1080,) if reduced else b.SIZES
    seeds = b.SEEDS[:2] if reduced else b.SEEDS
    variants = (LINK_VARIANTS[0], LINK_VARIANTS[-1]) if reduced else LINK_VARIANTS
    return [
        LinkCell(name, rate, size, seed)
        for name, _ in variants
        for rate in b.MODES
        for size in sizes
        for seed in seeds
    ]


def link_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per variant, rate and size: latency over seeds and its change from
    the study's link (115 200 baud with the MCU), paired by seed."""
    base_name = LINK_VARIANTS[0][0]
    keys = ["rate_kbps", "nfc_payload_bytes"]
    rows = []
    for (name, rate, size), group in table.groupby(["link", *keys], sort=False):
        base = table[
            (table["link"] == base_name)
            & (table["rate_kbps"] == rate)
            & (table["nfc_payload_bytes"] == size)
        ].set_index("seed")
        mine = group.set_index("seed")
        seeds = base.index.intersection(mine.index)
        latency = spread(mine["latency_s"])
        change = spread(mine.loc[seeds, "latency_s"] - base.loc[seeds, "latency_s"])
        before = float(base.loc[seeds, "latency_s"].mean()) if len(seeds) else math.nan
        rows.append(
            {
                "link": name,
                "rate_kbps": rate,
                "nfc_payload_bytes": size,
                "n": latency["n"],
                "latency_s": latency["mean"],
                "latency_sd_s": latency["sd"],
                "latency_change_s": change["mean"],
                "latency_change_ci95_s": change["ci95"],
                "latency_change_pct": 100 * change["mean"] / before if before else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=list(LINK_SUMMARY_COLUMNS))


def link_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Latency per size for each link variant, per rate."""
    import matplotlib.pyplot as plt

    from rtolab.plots import PALETTE

    if table.empty:
        return []
    rates = sorted(table["rate_kbps"].unique())
    fig, axes = plt.subplots(
        1, len(rates), figsize=(5.2 * len(rates), 4.2), layout="constrained", squeeze=False
    )
    for ax, rate in zip(axes[0], rates, strict=True):
        part = table[table["rate_kbps"] == rate]
        for i, name in enumerate(part["link"].unique()):
            stats = (
                part[part["link"] == name]
                .groupby("nfc_payload_bytes")["latency_s"]
                .agg(["mean", "min", "max"])
            )
            ax.errorbar(
                stats.index,
                stats["mean"],
                yerr=[stats["mean"] - stats["min"], stats["max"] - stats["mean"]],
                color=PALETTE[i % len(PALETTE)],
                marker="o",
                capsize=2,
                label=name,
            )
        ax.set_title(f"{rate:g} kbit/s, both fixes")
        ax.set_xlabel("NFC payload (bytes)")
        ax.set_ylabel("session latency (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle("Latency per size on faster links (UART rate, MCU removed)")
    return [("faster-links-latency", fig)]


def link_row(result: Result, cell: LinkCell) -> dict[str, Any]:
    """One run of :func:`link_cells`: its session latency and NFC slots."""
    stats = b.nfc_stats(result)
    return {
        "link": cell.link,
        "rate_kbps": cell.rate_kbps,
        "nfc_payload_bytes": cell.nfc_bytes,
        "seed": cell.seed,
        "latency_s": b.session_latency(result),
        "nfc_slots": sum(int(d["slots"]) for d in stats["directions"]),
    }


def link_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``faster_links.csv``, ``faster_links_summary.csv`` and the figure."""
    done = b.write_comparison(
        results,
        link_cells(),
        link_row,
        LINK_COLUMNS,
        "faster_links",
        link_summary,
        link_figures,
        suffix="summary",
    )
    if done is None:
        return [Check("runs completed", False, "no results")]
    table, summary = done.table, done.compared
    faster = summary[summary["link"] != LINK_VARIANTS[0][0]]
    return [
        Check(
            "every session completed",
            b.nan_free(table, "latency_s"),
            f"{int(table['latency_s'].notna().sum())} of {len(table)}",
        ),
        Claim(
            "A faster UART and removing the MCU raise the bandwidth the stack sees "
            "(bridge spec §5, untested by the study)",
            "latency change against 115200 baud with the MCU, over sizes and rates: "
            + "; ".join(
                f"{name} {pct.min():+.1f}..{pct.max():+.1f} %"
                for name, pct in faster.groupby("link", sort=False)["latency_change_pct"]
            ),
            bool((faster["latency_change_s"] < 0).all()) if len(faster) else None,
        ),
    ]


def link_report(directory: Path) -> list[str]:
    """The summary table and the figure."""
    from rtolab.reports import table_html

    bridge_dir = directory / b.SYSTEM
    parts: list[str] = []
    summary = bridge_dir / "faster_links_summary.csv"
    if summary.is_file():
        parts.append(
            "<h3>faster_links_summary.csv (latency over seeds; change against 115200 baud "
            "with the MCU, same seed, mean and 95 % CI)</h3>" + table_html(pd.read_csv(summary))
        )
    png = bridge_dir / "figures" / "faster-links-latency.png"
    if png.is_file():
        parts.append(figure_html(png, directory))
    return parts


register(
    Experiment(
        system=b.SYSTEM,
        name="faster_links",
        title="Faster links (future work): UART rate and the MCU removed",
        description=(
            "The single exchange with both fixes at both rates and the study's sizes, on "
            "the study's link (115200 baud, MCU) and with a faster UART (230400 to 921600 "
            "baud), without the MCU, and both. Writes faster_links.csv and "
            "faster_links_summary.csv."
        ),
        runs=lambda: [c.run() for c in link_cells()],
        checks=link_checks,
        report=link_report,
        trace_families=b.TRACE_FAMILIES,
    )
)
