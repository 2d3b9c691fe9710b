"""Algorithm 1's variability term at work (bridge spec §3.3): the long
session of :mod:`rtolab.experiments.bridge` with power-control messages
sharing the NFC slots and a jittered Wi-Fi delay between the PTx and the
end-user device, run with Van Jacobson's estimator (lwIP's) and with
Algorithm 1 with and without its ratio ``r``.

Algorithm 1 scales each packet's theoretical RTT by ``r``, the ratio of the
last measured RTT to its theory; ``r < 1`` changes nothing (the NFC part
is never faster than theory, the Wi-Fi part never below its 1 s), so the
term acts only while the path is slower than the theory says.

``rtolab reproduce bridge/variability --out DIR`` writes, in ``DIR/bridge/``:

* ``variability.csv``: one row per run (condition, estimator, seed):
  spurious retransmissions from the captures, session time, and the ratios
  ``r`` of the appliance's RTT samples (from the ``rtt_sample`` traces: each
  unambiguous sample of a data segment over equation 5.1 for its size, as
  the policy computes it);
* ``variability_summary.csv``: per condition and estimator, n, mean, sd and
  95 % CI of spurious retransmissions and session time, and the spread of
  ``r``;
* ``variability_paired.csv``: per condition, Algorithm 1 with ``r`` minus
  without it, and minus VJ, paired by seed (the same slot phase and the
  same Wi-Fi draws).
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
    register,
    system_dir,
    write_table,
)
from rtolab.experiments import bridge as b
from rtolab.experiments.bridge_links import with_link_fields
from rtolab.experiments.stats import spread

if TYPE_CHECKING:
    from rtolab.api import Result

#: The power-control traffic of the NFC link: the link's defaults (10 bytes
#: each way every 100 ms; the study gives no numbers, docs/bridge.md).
POWER_CONTROL = "power_control = {}"


def wifi_jitter(mean_ms: int) -> str:
    """The Ethernet link's ``jitter``: an exponential extra delay of
    ``mean_ms`` per frame, each way (a phone on Wi-Fi, its MAC retrying and
    sleeping between beacons)."""
    return f'jitter = {{ distribution = "exponential", mean = "{mean_ms}ms" }}'


#: The conditions: name, the NFC link's extra fields, the Ethernet's.
CONDITIONS: tuple[tuple[str, str, str], ...] = (
    ("quiet", "", ""),
    ("power control", POWER_CONTROL, ""),
    ("power control + Wi-Fi 100 ms", POWER_CONTROL, wifi_jitter(100)),
    ("power control + Wi-Fi 300 ms", POWER_CONTROL, wifi_jitter(300)),
    ("power control + Wi-Fi 1000 ms", POWER_CONTROL, wifi_jitter(1000)),
)
#: The estimators: lwIP's VJ with the optimum initial RTO, Algorithm 1,
#: Algorithm 1 with ``r`` held at 1, and Algorithm 1 using the largest of
#: its last 8 ratios (the spec's optional window).
ESTIMATORS = ("vj", "algorithm1", "algorithm1-no-r", "algorithm1-window-8")
#: The Algorithm 1 variants' RTO tables.
ALGORITHM1_RTO = {
    "algorithm1": '{ policy = "bridge", window = 1 }',
    "algorithm1-no-r": '{ policy = "bridge", window = 1, ratio = false }',
    "algorithm1-window-8": '{ policy = "bridge", window = 8 }',
}
SEEDS = (1, 2, 3, 4, 5, 6, 7, 8)

ROW_COLUMNS = (
    "condition",
    "estimator",
    "seed",
    "data_packets",
    "retx_appliance",
    "spurious_retx",
    "dup_acks",
    "session_s",
    "power_control_slots",
    "r_samples",
    "r_mean",
    "r_max",
    "r_above_1",
)
SUMMARY_COLUMNS = (
    "condition",
    "estimator",
    "n",
    "spurious_retx",
    "spurious_retx_sd",
    "spurious_retx_ci95",
    "session_s",
    "session_sd_s",
    "session_ci95_s",
    "data_packets",
    "r_samples",
    "r_median",
    "r_p90",
    "r_max",
    "r_above_1_share",
)
PAIRED_COLUMNS = (
    "condition",
    "comparison",
    "n",
    "spurious_retx_change",
    "spurious_retx_change_sd",
    "spurious_retx_change_ci95",
    "session_change_s",
    "session_change_sd_s",
    "session_change_min_s",
    "session_change_max_s",
    "session_change_ci95_s",
)
#: The paired comparisons: Algorithm 1 against each other estimator.
COMPARISONS = (
    ("algorithm1", "algorithm1-no-r"),
    ("algorithm1-window-8", "algorithm1"),
    ("algorithm1", "vj"),
)


@dataclass(frozen=True)
class VariabilityCell:
    """One run: the long session under ``condition`` with ``estimator``."""

    condition: str
    estimator: str
    seed: int

    @property
    def label(self) -> str:
        name = self.condition.replace(" + ", "-").replace(" ", "-")
        return f"variability-{name}-{self.estimator}-seed{self.seed}"

    def scenario(self) -> str:
        nfc, eth = next((n, e) for c, n, e in CONDITIONS if c == self.condition)
        estimator = "vj" if self.estimator == "vj" else "algorithm1"
        text = b.long_session_scenario(estimator, False, b.long_session_shape())
        if estimator == "algorithm1":
            bridge_rto = ALGORITHM1_RTO["algorithm1"]
            if bridge_rto not in text:
                raise ValueError("the long session has no Algorithm 1 RTO to switch")
            text = text.replace(bridge_rto, ALGORITHM1_RTO[self.estimator])
        if nfc:
            text = with_link_fields(text, nfc)
        if eth:
            delay = f'delay = "{b.ETH_DELAY_S * 1e6:g}us"\n'
            if delay not in text:
                raise ValueError("the scenario has no Ethernet delay")
            text = text.replace(delay, delay + eth + "\n", 1)
        return text

    def run(self) -> ExperimentRun:
        return ExperimentRun(
            self.label,
            self.scenario(),
            self.seed,
            params={"condition": self.condition, "estimator": self.estimator},
        )


def variability_cells(reduced: bool | None = None) -> list[VariabilityCell]:
    """Every run: each condition, estimator and seed (the reduced plan: the
    quiet link and the slowest Wi-Fi, two seeds)."""
    reduced = b.quick() if reduced is None else reduced
    conditions = (CONDITIONS[0], CONDITIONS[-1]) if reduced else CONDITIONS
    seeds = SEEDS[:2] if reduced else SEEDS
    return [
        VariabilityCell(name, estimator, seed)
        for name, _, _ in conditions
        for estimator in ESTIMATORS
        for seed in seeds
    ]


def ratios(result: Result) -> pd.Series:
    """The ratio ``r`` of each unambiguous RTT sample of the appliance's data
    segments: the corrected RTT over equation 5.1 for the segment's size at
    11.2 kbps, as Algorithm 1 computes it (the FIN's sample, the session's
    last, times nothing after it)."""
    traces = result.traces
    needed = {"kind", "node_name", "corrected", "segment_len", "retransmitted"}
    if not needed <= set(traces.columns):
        return pd.Series(dtype=float)
    samples = traces[
        (traces["kind"] == "rtt_sample")
        & (traces["node_name"] == "appliance")
        & (traces["retransmitted"] == False)  # noqa: E712 (a column of booleans)
        & (traces["segment_len"] > 1)
    ]
    theory = (
        samples["segment_len"].astype(int).map(lambda n: b.theoretical_rtt(b.nfc_payload(n), 11.2))
    )
    return (samples["corrected"].astype(float) / 1e9 / theory).reset_index(drop=True)


def variability_row(result: Result, cell: VariabilityCell) -> dict[str, Any]:
    """One row of ``variability.csv``."""
    long = b.long_row(result, cell.estimator, False, cell.seed)
    r = ratios(result)
    return {
        "condition": cell.condition,
        "estimator": cell.estimator,
        "seed": cell.seed,
        "data_packets": long["data_packets"],
        "retx_appliance": long["retx_appliance"],
        "spurious_retx": long["spurious_retx"],
        "dup_acks": long["dup_acks"],
        "session_s": long["session_s"],
        "power_control_slots": int(b.nfc_stats(result).get("power_control_slots", 0)),
        "r_samples": len(r),
        "r_mean": float(r.mean()) if len(r) else math.nan,
        "r_max": float(r.max()) if len(r) else math.nan,
        "r_above_1": int((r > 1.0).sum()),
    }


def summary_table(table: pd.DataFrame, r_values: dict[tuple[str, str], pd.Series]) -> pd.DataFrame:
    """Per condition and estimator: spurious retransmissions and session time
    over seeds (n, mean, sd, 95 % CI) and the spread of ``r`` over all the
    group's samples."""
    rows = []
    for (condition, estimator), group in table.groupby(["condition", "estimator"], sort=False):
        spurious = spread(group["spurious_retx"])
        session = spread(group["session_s"])
        r = r_values.get((condition, estimator), pd.Series(dtype=float))
        rows.append(
            {
                "condition": condition,
                "estimator": estimator,
                "n": spurious["n"],
                "spurious_retx": spurious["mean"],
                "spurious_retx_sd": spurious["sd"],
                "spurious_retx_ci95": spurious["ci95"],
                "session_s": session["mean"],
                "session_sd_s": session["sd"],
                "session_ci95_s": session["ci95"],
                "data_packets": float(group["data_packets"].mean()),
                "r_samples": float(group["r_samples"].mean()),
                "r_median": float(r.median()) if len(r) else math.nan,
                "r_p90": float(r.quantile(0.9)) if len(r) else math.nan,
                "r_max": float(r.max()) if len(r) else math.nan,
                "r_above_1_share": float((r > 1.0).mean()) if len(r) else math.nan,
            }
        )
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def paired_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per condition: Algorithm 1 minus each other estimator, same seed."""
    rows = []
    for condition, group in table.groupby("condition", sort=False):
        by = {e: g.set_index("seed") for e, g in group.groupby("estimator")}
        for mine, other in COMPARISONS:
            if mine not in by or other not in by:
                continue
            seeds = by[mine].index.intersection(by[other].index)
            a, o = by[mine].loc[seeds], by[other].loc[seeds]
            spurious = spread(a["spurious_retx"] - o["spurious_retx"])
            session = spread(a["session_s"] - o["session_s"])
            rows.append(
                {
                    "condition": condition,
                    "comparison": f"{mine} - {other}",
                    "n": session["n"],
                    "spurious_retx_change": spurious["mean"],
                    "spurious_retx_change_sd": spurious["sd"],
                    "spurious_retx_change_ci95": spurious["ci95"],
                    "session_change_s": session["mean"],
                    "session_change_sd_s": session["sd"],
                    "session_change_min_s": session["min"],
                    "session_change_max_s": session["max"],
                    "session_change_ci95_s": session["ci95"],
                }
            )
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def variability_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes the three tables; checks what must hold and states the
    study's claim with our numbers."""
    cells = [c for c in variability_cells() if c.label in results]
    out = system_dir(results)
    if out is None or not cells:
        return [Check("runs completed", False, "no results")]
    rows, r_values = [], {}
    for cell in cells:
        result = results[cell.label]
        rows.append(variability_row(result, cell))
        key = (cell.condition, cell.estimator)
        r_values[key] = pd.concat([r_values.get(key, pd.Series(dtype=float)), ratios(result)])
    table = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    summary = summary_table(table, r_values)
    paired = paired_table(table)
    write_table(table, out / "variability.csv")
    write_table(summary, out / "variability_summary.csv")
    write_table(paired, out / "variability_paired.csv")

    quiet = table[table["condition"] == CONDITIONS[0][0]]
    algorithm1 = table[table["estimator"] == "algorithm1"]
    quiet_a1 = quiet[quiet["estimator"] == "algorithm1"].set_index("seed")
    quiet_no_r = quiet[quiet["estimator"] == "algorithm1-no-r"].set_index("seed")
    seeds = quiet_a1.index.intersection(quiet_no_r.index)
    same = bool(
        (quiet_a1.loc[seeds, "session_s"] == quiet_no_r.loc[seeds, "session_s"]).all()
        and (quiet_a1.loc[seeds, "spurious_retx"] == quiet_no_r.loc[seeds, "spurious_retx"]).all()
    )
    jittered = algorithm1[algorithm1["condition"].str.contains("Wi-Fi")]
    above, samples = int(jittered["r_above_1"].sum()), int(jittered["r_samples"].sum())
    a1_paired = paired[
        (paired["comparison"] == "algorithm1 - algorithm1-no-r")
        & paired["condition"].str.contains("Wi-Fi")
    ]
    fewer = (
        bool((a1_paired["spurious_retx_change"] <= 0).all())
        and bool((a1_paired["spurious_retx_change"] < 0).any())
        if len(a1_paired)
        else None
    )
    return [
        Check(
            "every session completed",
            b.nan_free(table, "session_s"),
            f"{int(table['session_s'].notna().sum())} of {len(table)}",
        ),
        Check(
            "on the quiet link Algorithm 1 runs the same with and without r",
            same,
            f"{len(seeds)} seeds; r above 1 in {int(quiet['r_above_1'].sum())} of "
            f"{int(quiet['r_samples'].sum())} samples (a recipe's later segments, queued "
            f"behind its first), largest {quiet['r_max'].max():.3f}",
        ),
        Check(
            "power-control traffic takes slots from the packets only when it is on",
            bool(
                (quiet["power_control_slots"] == 0).all()
                and (table[table["condition"] != CONDITIONS[0][0]]["power_control_slots"] > 0).all()
            ),
            f"{int(table['power_control_slots'].sum())} slots yielded in all",
        ),
        Claim(
            "r, the ratio of measured to theoretical RTT, keeps Algorithm 1's RTO above "
            "the round trip when delay varies (power control, a slow Wi-Fi side; "
            "bridge spec §3.3)",
            f"Algorithm 1's samples with r > 1 under Wi-Fi jitter: {above} of {samples}; "
            + "samples Algorithm 1 may use (unambiguous, Karn) per data packet: "
            + "; ".join(
                f"{c}: {g['r_samples'].sum() / g['data_packets'].sum():.0%}"
                for c, g in algorithm1.groupby("condition", sort=False)
            )
            + "; spurious retransmissions, Algorithm 1 with r minus without (paired by seed): "
            + "; ".join(
                f"{p.condition}: {p.spurious_retx_change:+.2f} ± {p.spurious_retx_change_ci95:.2f}"
                for p in a1_paired.itertuples()
            ),
            fewer,
        ),
    ]


def variability_report(directory: Path) -> list[str]:
    """The summary and paired tables."""
    from rtolab.reports import table_html

    bridge_dir = directory / b.SYSTEM
    parts: list[str] = []
    for name, heading in (
        (
            "variability_summary.csv",
            "per condition and estimator: n runs, spurious retransmissions and session "
            "time (mean, sd, 95 % CI), and r over all samples",
        ),
        (
            "variability_paired.csv",
            "Algorithm 1 minus Algorithm 1 without r, and minus VJ, same seed",
        ),
    ):
        path = bridge_dir / name
        if path.is_file():
            parts.append(f"<h3>{name} ({heading})</h3>" + table_html(pd.read_csv(path)))
    return parts


register(
    Experiment(
        system=b.SYSTEM,
        name="variability",
        title="Algorithm 1's variability term: power-control traffic and Wi-Fi jitter",
        description=(
            "The long session with power-control messages sharing the NFC slots and an "
            "exponentially jittered Wi-Fi delay (mean 100 or 300 ms each way), run with "
            "lwIP's VJ estimator and Algorithm 1 with and without its ratio r, paired by "
            "seed. Writes variability.csv, variability_summary.csv and "
            "variability_paired.csv."
        ),
        runs=lambda: [c.run() for c in variability_cells()],
        checks=variability_checks,
        report=variability_report,
        trace_families=(*b.TRACE_FAMILIES, "tcp_rtt_sample"),
    )
)
