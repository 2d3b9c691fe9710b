"""ACK holding at the base station during fades (docs/spec/ack-holding.md).

``rtolab reproduce ack-holding`` runs the study's experiment: a fixed host
(FH) sends to a mobile with TCP Reno for 40 s through a wired link, a base
station and a radio link that fades out for 10 s (case A) or twice for
10 s (case B). Every scheme on the same engine:

* ``reno``: no help; packets and ACKs are lost during the outage;
* ``ack-holding``: the base station holds the mobile's ACKs and paces them
  (global minimum of the schedule);
* ``ack-holding-step-forward``: the same with the study's step-forward
  search;
* ``ack-holding-timeout-free``: the same, choosing among the schedules
  whose first paced ACK comes before the fixed host's timer would fire by
  the model (not in the study; see docs/ack-holding.md);
* ``freeze``: Freeze-TCP, the mobile advertises a zero window when its
  link layer warns;
* ``snoop``: local retransmission at the base station (for the random-loss
  case R, where it is meant to help; it cannot help during an outage).

Case R replaces the outages by independent random losses on the radio
link, over several seeds; cases A and B have nothing random, so one seed
each. A sensitivity sweep varies the outage prediction the base station
gets (duration too short or too long, shorter warning), which the study
recommends and never measured.

Writes ``DIR/ack-holding/runs.csv`` (one row per run), ``cwnd.csv`` (the
FH's congestion window over time), ``sensitivity.csv`` and figures in
``DIR/ack-holding/figures/``. ``RTOLAB_ACK_HOLDING_QUICK=1`` runs a
reduced plan.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rtolab.experiments import (
    Check,
    Claim,
    Experiment,
    ExperimentRun,
    figure_html,
    register,
    save_figure,
    system_dir,
    write_table,
)
from rtolab.experiments.stats import seed_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

SYSTEM = "ack-holding"
#: The trace families a run's rows read (:func:`run_row`, :func:`cwnd_rows`,
#: and the paths experiment's fixed-host RTOs).
TRACE_FAMILIES = ("link_indication", "packet_delivered", "tcp_rto_armed", "tcp_cwnd")
MOBILE = "10.0.1.2"
MSS = 1460
#: The study's transfer.
DURATION_S = 40
#: Outages of each case: (start, duration) in seconds.
CASES: dict[str, list[tuple[float, float]]] = {
    "A": [(10.0, 10.0)],
    "B": [(8.0, 10.0), (24.0, 10.0)],
}
#: Loss probability of the radio link in the random-loss case.
RANDOM_LOSS = 0.02
SCHEMES = (
    "reno",
    "ack-holding",
    "ack-holding-step-forward",
    "ack-holding-timeout-free",
    "freeze",
    "snoop",
)
#: The base station's search per ACK-holding scheme.
SEARCHES = {
    "ack-holding": "global-minimum",
    "ack-holding-step-forward": "step-forward",
    "ack-holding-timeout-free": "timeout-free",
}
RUN_COLUMNS = (
    "case",
    "scheme",
    "seed",
    "duration_error",
    "warning_s",
    "packets_delivered",
    "bytes_delivered",
    "rto_expirations",
    "retransmissions",
    "fast_retransmits",
    "largest_fixed_host_rto_s",
    "time_to_full_rate_s",
    "duplicate_acks_max",
)


def quick() -> bool:
    """Whether the reduced plan was asked for (``RTOLAB_ACK_HOLDING_QUICK=1``)."""
    return os.environ.get("RTOLAB_ACK_HOLDING_QUICK", "") not in ("", "0")


def seeds() -> tuple[int, ...]:
    """Seeds of the random-loss case."""
    return (1, 2) if quick() else (1, 2, 3, 4, 5)


def _radio(case: str, duration_error: float, warning: str) -> str:
    if case == "R":
        return f'kind = "point-to-point"\nrate = "2Mbps"\ndelay = "10ms"\nloss = {RANDOM_LOSS}\n'
    outages = ", ".join(f'{{ start = "{s:g}s", duration = "{d:g}s" }}' for s, d in CASES[case])
    return (
        'kind = "fading"\n'
        'rate = "2Mbps"\ndelay = "10ms"\n'
        f"outages = [ {outages} ]\n"
        f'warning = "{warning}"\n'
        f"duration_error = {duration_error}\n"
    )


def _base_station(scheme: str, holding: dict[str, str | int] | None = None) -> str:
    if scheme in SEARCHES:
        fields = {"search": SEARCHES[scheme], **(holding or {})}
        lines = "".join(
            f'{k} = "{v}"\n' if isinstance(v, str) else f"{k} = {v}\n" for k, v in fields.items()
        )
        return f'[[middlebox]]\nkind = "ack-holding"\nhost = "bs"\nmobile = "{MOBILE}"\n' + lines
    if scheme == "snoop":
        return f'[[middlebox]]\nkind = "snoop"\nhost = "bs"\nmobile = "{MOBILE}"\n'
    return ""


def scenario(
    case: str,
    scheme: str,
    *,
    duration_error: float = 0.0,
    warning: str = "500ms",
    holding: dict[str, str | int] | None = None,
    extra: str = "",
    radio: str | None = None,
    duration_s: float = DURATION_S,
    capture: bool = True,
) -> str:
    """The TOML of one run: fixed -- wired -- bs -- radio -- mobile.
    `holding` adds fields to the base station's table, `extra` tables to
    the end, `radio` replaces the radio link's kind and settings, and
    `capture` keeps the fixed host's capture."""
    if case not in (*CASES, "R"):
        raise ValueError(f"case: one of {', '.join([*CASES, 'R'])}, got {case!r}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: one of {', '.join(SCHEMES)}, got {scheme!r}")
    freeze = "freeze = true\n" if scheme == "freeze" else ""
    fixed_capture = (
        '[[capture]]\nhost = "fixed"\nlink = "wired"\nfile = "fixed.pcap"\n' if capture else ""
    )
    return f"""name = "ack-holding-{case.lower()}-{scheme}"
duration = "{duration_s:g}s"

[[host]]
name = "fixed"
profile = "rfc"
[host.tcp]
cc = {{ policy = "reno" }}
timestamps = true
send_buffer = 262144

[[host]]
name = "bs"

[[host]]
name = "mobile"
profile = "rfc"
[host.tcp]
timestamps = true
{freeze}
[[link]]
name = "wired"
kind = "point-to-point"
ends = [
  {{ host = "fixed", address = "10.0.0.1/24" }},
  {{ host = "bs", address = "10.0.0.2/24" }},
]
rate = "10Mbps"
delay = "40ms"

[[link]]
name = "radio"
ends = [
  {{ host = "bs", address = "10.0.1.1/24" }},
  {{ host = "mobile", address = "{MOBILE}/24" }},
]
{radio if radio is not None else _radio(case, duration_error, warning)}
[[route]]
host = "fixed"
destination = "default"
via = "10.0.0.2"

[[route]]
host = "mobile"
destination = "default"
via = "10.0.1.1"

{_base_station(scheme, holding)}
{fixed_capture}
[[app]]
kind = "tcp-sink"
name = "sink"
host = "mobile"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "fixed"
peer = "{MOBILE}:5001"
{extra}"""


@dataclass(frozen=True)
class Cell:
    """One run of the plan."""

    case: str
    scheme: str
    seed: int = 1
    duration_error: float = 0.0
    warning: str = "500ms"

    @property
    def warning_s(self) -> float:
        return float(self.warning.removesuffix("ms")) / 1000

    @property
    def label(self) -> str:
        tail = ""
        if (self.duration_error, self.warning) != (0.0, "500ms"):
            tail = f"-err{self.duration_error:+g}-warn{self.warning}"
        return f"{self.case}-{self.scheme}-seed{self.seed}{tail}"

    def run(self) -> ExperimentRun:
        text = scenario(
            self.case, self.scheme, duration_error=self.duration_error, warning=self.warning
        )
        params = {
            "case": self.case,
            "scheme": self.scheme,
            "duration_error": self.duration_error,
            "warning_s": self.warning_s,
        }
        return ExperimentRun(self.label, text, seed=self.seed, params=params)


def main_cells() -> list[Cell]:
    """Cases A and B with every outage scheme; case R with every scheme."""
    cells = [
        Cell(case, scheme)
        for case in CASES
        for scheme in SCHEMES
        if scheme != "snoop" or not quick()
    ]
    cells += [Cell("R", scheme, seed) for scheme in ("reno", "snoop") for seed in seeds()]
    return cells


def sensitivity_cells() -> list[Cell]:
    """Case A with ACK holding (global minimum and timeout-free searches)
    under wrong predictions."""
    errors = (-0.5, 0.0, 0.5) if quick() else (-0.5, -0.3, -0.1, 0.0, 0.2, 0.5, 1.0)
    warnings = ("100ms",) if quick() else ("300ms", "100ms", "50ms")
    cells = []
    for scheme in ("ack-holding", "ack-holding-timeout-free"):
        cells += [Cell("A", scheme, duration_error=e) for e in errors]
        cells += [Cell("A", scheme, warning=w) for w in warnings]
    return cells


# ----- what a run shows -----


def flow_report(result: Result, app: str) -> dict[str, Any]:
    for flow in result.report.get("flows", []):
        if flow.get("app") == app:
            return dict(flow)
    return {}


def sink_bytes(result: Result) -> int:
    for app in result.report.get("apps", []):
        if app.get("name") == "sink":
            return int(app.get("bytes_received", 0))
    return 0


def _outage_ends(result: Result) -> list[float]:
    traces = result.traces
    if "indication" not in traces:
        return []
    ups = traces[(traces["event"] == "link_indication") & (traces["indication"] == "up")]
    return sorted(set(ups["t_s"].round(9)))


def _delivered_over_time(result: Result) -> pd.Series:
    """Bytes delivered to the mobile's TCP per 100 ms bin."""
    traces = result.traces
    rows = traces[(traces["event"] == "packet_delivered") & (traces["node_name"] == "mobile")]
    bins = (rows["t_s"] // 0.1).astype("int64")
    return rows.groupby(bins)["len"].sum()


def time_to_full_rate(result: Result) -> float | None:
    """Seconds from the first LINK_UP until the mobile receives, over one
    second, at least 90 % of what it received per second in the 5 s
    before the first outage's warning; ``None`` if it never does."""
    ups = _outage_ends(result)
    if not ups:
        return None
    start = CASES["A"][0][0] if len(ups) == 1 else CASES["B"][0][0]
    per_bin = _delivered_over_time(result)
    before = per_bin[(per_bin.index >= (start - 5.5) * 10) & (per_bin.index < (start - 0.5) * 10)]
    full = before.sum() / 5.0
    if full <= 0:
        return None
    first_up = ups[0]
    # Every one-second window of ten bins at once, from a running total.
    bins = DURATION_S * 10
    inside = per_bin[(per_bin.index >= 0) & (per_bin.index < bins)]
    counts = np.zeros(bins, dtype=np.int64)
    counts[inside.index.to_numpy()] = inside.to_numpy(dtype=np.int64)
    total = np.concatenate(([0], np.cumsum(counts)))
    first = int(first_up * 10)
    windows = total[first + 10 :] - total[first:-10]
    reached = np.flatnonzero(windows >= 0.9 * full)
    if not len(reached):
        return None
    t = first + int(reached[0])
    return max(0.0, (t + 10) / 10 - first_up)


def largest_rto(result: Result) -> float:
    """The largest retransmission timeout the FH armed, seconds."""
    traces = result.traces
    armed = traces[(traces["kind"] == "rto_armed") & (traces["node_name"] == "fixed")]
    return float(armed["rto"].max()) / 1e9 if len(armed) else float("nan")


def duplicate_acks_max(result: Result) -> int:
    """The longest run of identical pure ACKs (same number and window) the
    FH received, counted as duplicates (a run of three is two)."""
    packets = result.packets
    if packets.empty:
        return 0
    acks = packets[(packets["src"] == MOBILE) & (packets["segment_len"] == 0)]
    longest = run = 0
    previous = None
    for key in zip(acks["ack"], acks["window"], strict=True):
        run = run + 1 if key == previous else 0
        previous = key
        longest = max(longest, run)
    return longest


def run_row(result: Result, cell: Cell) -> dict[str, Any]:
    """One row of ``runs.csv``."""
    flow = flow_report(result, "bulk")
    delivered = sink_bytes(result)
    return {
        "case": cell.case,
        "scheme": cell.scheme,
        "seed": cell.seed,
        "duration_error": cell.duration_error,
        "warning_s": cell.warning_s,
        "packets_delivered": delivered // MSS,
        "bytes_delivered": delivered,
        "rto_expirations": int(flow.get("timeouts", 0)),
        "retransmissions": int(flow.get("retransmissions", 0)),
        "fast_retransmits": int(flow.get("retx_fast", 0)),
        "largest_fixed_host_rto_s": largest_rto(result),
        "time_to_full_rate_s": time_to_full_rate(result) if cell.case != "R" else None,
        "duplicate_acks_max": duplicate_acks_max(result),
    }


def cwnd_rows(result: Result, cell: Cell) -> list[dict[str, Any]]:
    """The FH's congestion window over time."""
    traces = result.traces
    changes = traces[(traces["kind"] == "cwnd") & (traces["node_name"] == "fixed")]
    return [
        {"case": cell.case, "scheme": cell.scheme, "seed": cell.seed, "t_s": t, "cwnd_bytes": w}
        for t, w in zip(changes["t_s"], changes["new"], strict=True)
    ]


# ----- tables, figures, checks -----


def identical_series(rows: pd.DataFrame, key: str, columns: list[str]) -> list[list[str]]:
    """Groups the values of `key` whose rows are the same in `columns`, in
    order of first appearance: schemes whose curves would hide each other."""
    groups: list[tuple[tuple[Any, ...], list[str]]] = []
    for name, group in rows.groupby(key, sort=False):
        signature = tuple(map(tuple, group[columns].to_numpy().tolist()))
        for seen, names in groups:
            if seen == signature:
                names.append(str(name))
                break
        else:
            groups.append((signature, [str(name)]))
    return [names for _, names in groups]


def cwnd_figure(cwnd: pd.DataFrame) -> Figure:
    """The FH's congestion window over time per scheme, cases A and B, with
    the outages shaded, on a log scale so that a window cut to one segment
    shows beside one grown to megabytes. Schemes with identical curves
    share one line and one legend entry; the others differ in colour, dash
    and width (wider drawn first), so that a curve lying on another still
    shows. One legend for both panels, below them."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True)
    dashes = ["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1))]
    styles: dict[str, dict[str, Any]] = {}
    for ax, case in zip(axes, CASES, strict=True):
        rows = cwnd[(cwnd["case"] == case) & (cwnd["seed"] == 1)]
        for names in identical_series(rows, "scheme", ["t_s", "cwnd_bytes"]):
            label = " = ".join(names)
            if label not in styles:
                i = len(styles)
                styles[label] = {
                    "color": f"C{i}",
                    "linestyle": dashes[i % len(dashes)],
                    "linewidth": max(1.0, 3.4 - 0.6 * i),
                    "zorder": 2 + i,
                }
            group = rows[rows["scheme"] == names[0]]
            ax.step(
                group["t_s"],
                group["cwnd_bytes"] / 1000,
                where="post",
                label=label,
                **styles[label],
            )
        for start, duration in CASES[case]:
            ax.axvspan(start, start + duration, color="0.88", zorder=0)
            ax.axvline(start - 0.5, color="0.5", linestyle=":", linewidth=1, zorder=1)
        ax.set_ylabel("FH cwnd (kB, log scale)")
        ax.set_yscale("log")
        ax.set_title(f"case {case}: outages shaded, LINK_GOING_DOWN dotted", fontsize="medium")
        ax.grid(alpha=0.3, which="both")
    axes[-1].set_xlabel("time (s)")
    handles = [
        plt.Line2D([], [], **{k: v for k, v in style.items() if k != "zorder"})
        for style in styles.values()
    ]
    fig.legend(
        handles,
        list(styles),
        title="scheme (a = b: identical curves, drawn once)",
        loc="lower center",
        ncol=2,
        fontsize="small",
        title_fontsize="small",
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def sensitivity_figure(table: pd.DataFrame, reference: float | None) -> Figure:
    """Packets delivered against the prediction error and the warning."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for scheme, rows in table.groupby("scheme", sort=False):
        by_error = rows[rows["warning_s"] == 0.5].sort_values("duration_error")
        left.plot(
            by_error["duration_error"], by_error["packets_delivered"], marker="o", label=scheme
        )
        by_warning = rows[rows["duration_error"] == 0.0].sort_values("warning_s")
        right.plot(
            by_warning["warning_s"] * 1000,
            by_warning["packets_delivered"],
            marker="o",
            label=scheme,
        )
    left.set_xlabel("relative error of the predicted outage duration")
    left.set_ylabel("packets delivered")
    right.set_xlabel("LINK_GOING_DOWN lead time (ms)")
    for ax in (left, right):
        if reference is not None:
            ax.axhline(reference, color="0.4", linestyle="--", label="plain Reno")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    fig.suptitle("ACK holding, case A: a wrong prediction")
    fig.tight_layout()
    return fig


def _rows(results: dict[str, Result], cells: Iterable[Cell]) -> pd.DataFrame:
    rows = [run_row(results[c.label], c) for c in cells if c.label in results]
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def schedule_figures() -> list[tuple[str, Figure]]:
    """The schedule alone: RTO_N against n for the spec's example, and 20
    ACKs paced over 500 s and over 250 s."""
    from rtolab import pacing

    example = pacing.pacing(outage=1000.0, acks=30, mean=1.0, deviation=0.3)
    paced = {
        f"T = {t:g} s": pacing.pacing(outage=t, acks=20, mean=1.0, deviation=0.3)
        for t in (500.0, 250.0)
    }
    return [
        ("schedule-final-rto", pacing.final_rto_figure(example)),
        ("schedule-paced-gaps", pacing.paced_gaps_figure(paced)),
    ]


def main_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``runs.csv``, ``cwnd.csv`` and the figures; checks what the
    mechanism promises."""
    out = system_dir(results)
    cells = [c for c in main_cells() if c.label in results]
    if out is None or not cells:
        return [Check("runs completed", False, "no results")]
    table = _rows(results, cells)
    write_table(table, out / "runs.csv")
    cwnd = pd.DataFrame(
        [row for c in cells if c.case in CASES for row in cwnd_rows(results[c.label], c)],
        columns=["case", "scheme", "seed", "t_s", "cwnd_bytes"],
    )
    write_table(cwnd, out / "cwnd.csv")
    save_figure(cwnd_figure(cwnd), out / "figures" / "cwnd.png")
    for name, fig in schedule_figures():
        save_figure(fig, out / "figures" / f"{name}.png")
    checks: list[Check | Claim] = [
        Check(
            "every planned run completed",
            len(table) == len(main_cells()),
            f"{len(table)} of {len(main_cells())}",
        )
    ]
    checks += main_claims(table)
    for case in CASES:
        rows = table[table["case"] == case].set_index("scheme")
        if not {"reno", "ack-holding"} <= set(rows.index):
            continue
        held, plain = rows.loc["ack-holding"], rows.loc["reno"]
        checks += [
            Check(
                f"case {case}: plain Reno times out during the outage",
                int(plain["rto_expirations"]) > 0,
                f"{int(plain['rto_expirations'])} RTO expirations",
            ),
            Check(
                f"case {case}: no FH timeout with ACK holding",
                int(held["rto_expirations"]) == 0,
                f"{int(held['rto_expirations'])} RTO expirations",
            ),
            Check(
                f"case {case}: ACK holding delivers more than plain Reno",
                int(held["packets_delivered"]) > int(plain["packets_delivered"]),
                f"{int(held['packets_delivered'])} against {int(plain['packets_delivered'])}",
            ),
        ]
    # Only the base station's releases are bounded; a lossy link makes the
    # mobile send as many duplicates as it must.
    holding = table[table["scheme"].isin(list(SEARCHES))]
    most = int(holding["duplicate_acks_max"].max())
    checks.append(
        Check(
            "no ACK-holding capture shows a third duplicate ACK",
            most <= 2,
            f"longest run of duplicates: {most}",
        )
    )
    return checks


def main_claims(table: pd.DataFrame) -> list[Claim]:
    """The study's claims (ack-holding spec §1, §2, §4) beside the numbers
    of ``runs.csv``: per case, plain Reno against ACK holding."""
    claims = []
    for case in CASES:
        rows = table[table["case"] == case].set_index("scheme")
        if not {"reno", "ack-holding"} <= set(rows.index):
            continue
        held, plain = rows.loc["ack-holding"], rows.loc["reno"]
        plain_rto, held_rto = int(plain["rto_expirations"]), int(held["rto_expirations"])
        plain_n, held_n = int(plain["packets_delivered"]), int(held["packets_delivered"])
        claims += [
            Claim(
                f"Case {case}: without help the fixed host times out during the outage, "
                "and with ACK holding it never does (ack-holding spec §1)",
                f"FH RTO expirations: {plain_rto} with plain Reno, {held_rto} with ACK holding",
                plain_rto > 0 and held_rto == 0,
            ),
            Claim(
                f"Case {case}: holding ACKs maintains throughput: more packets delivered "
                "than plain Reno (ack-holding spec §1, ack-holding spec §4)",
                f"{held_n} packets with ACK holding, {plain_n} with plain Reno",
                held_n > plain_n,
            ),
        ]
    holding = table[table["scheme"].isin(list(SEARCHES))]
    if len(holding):
        most = int(holding["duplicate_acks_max"].max())
        claims.append(
            Claim(
                "The base station sends at most two duplicates of an ACK, so the fixed "
                "host never fast-retransmits (ack-holding spec §2)",
                f"longest run of duplicate ACKs in the captures: {most}",
                most <= 2,
            )
        )
    return claims


def sensitivity_checks(results: dict[str, Result]) -> list[Check]:
    """Writes ``sensitivity.csv`` and its figure."""
    out = system_dir(results)
    cells = [c for c in sensitivity_cells() if c.label in results]
    if out is None or not cells:
        return [Check("runs completed", False, "no results")]
    table = _rows(results, cells)
    write_table(table, out / "sensitivity.csv")
    reference = None
    runs = out / "runs.csv"
    if runs.is_file():
        main = pd.read_csv(runs)
        plain = main[(main["case"] == "A") & (main["scheme"] == "reno")]
        reference = float(plain["packets_delivered"].mean()) if len(plain) else None
    save_figure(sensitivity_figure(table, reference), out / "figures" / "sensitivity.png")
    exact = table[
        (table["duration_error"] == 0.0)
        & (table["warning_s"] == 0.5)
        & (table["scheme"] == "ack-holding")
    ]
    return [
        Check(
            "every planned run completed",
            len(table) == len(sensitivity_cells()),
            f"{len(table)} of {len(sensitivity_cells())}",
        ),
        Check(
            "an exact prediction costs no timeout",
            len(exact) == 1 and int(exact["rto_expirations"].iloc[0]) == 0,
            f"{exact['rto_expirations'].tolist()}",
        ),
    ]


def report_sections(
    directory: Path,
    csv: str,
    prefixes: tuple[str, ...],
    keys: tuple[str, ...] = ("case", "scheme", "duration_error", "warning_s"),
) -> list[str]:
    """HTML for the reproduction report: a table (n, means over seeds and
    their min..max) and figures."""
    from rtolab.reports import table_html

    base = directory / SYSTEM
    parts: list[str] = []
    path = base / csv
    if path.is_file():
        frame = pd.read_csv(path)
        shown = seed_table(frame, list(keys))
        parts.append(
            f"<h3>{csv} (n runs; mean over seeds, min..max where they differ)</h3>"
            + table_html(shown)
        )
    for png in sorted((base / "figures").glob("*.png")):
        if png.stem.startswith(prefixes):
            parts.append(figure_html(png, directory))
    return parts


register(
    Experiment(
        system=SYSTEM,
        name="outages",
        title="Reno through one or two 10 s outages: no help, ACK holding, Freeze-TCP, Snoop",
        description=(
            "A fixed host sends to a mobile with TCP Reno for 40 s through a base station "
            "whose radio link fades out for 10 s (case A) or twice (case B), with every "
            "scheme; case R has random losses instead, over several seeds. Writes runs.csv "
            "and cwnd.csv."
        ),
        runs=lambda: [c.run() for c in main_cells()],
        checks=main_checks,
        report=lambda directory: report_sections(directory, "runs.csv", ("cwnd", "schedule")),
        trace_families=TRACE_FAMILIES,
        keep_captures=False,
    )
)

register(
    Experiment(
        system=SYSTEM,
        name="sensitivity",
        title="ACK holding with a wrong outage prediction",
        description=(
            "Case A with ACK holding when the predicted outage is shorter or longer than "
            "the real one, and when LINK_GOING_DOWN comes later. Writes sensitivity.csv."
        ),
        runs=lambda: [c.run() for c in sensitivity_cells()],
        checks=sensitivity_checks,
        report=lambda directory: report_sections(directory, "sensitivity.csv", ("sensitivity",)),
        trace_families=TRACE_FAMILIES,
        keep_captures=False,
    )
)
