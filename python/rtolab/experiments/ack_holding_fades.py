"""ACK holding on fades the base station must predict (docs/ack-holding.md,
"Fades predicted from the signal").

The study's outages are scripted and announced by an oracle. Here the radio
link's outages follow the received power of a mobile driving back and
forth through path loss, correlated shadowing and Rayleigh fading (the
fading link's ``signal`` defaults), and ``going_down`` comes from the base
station's predictor, which extrapolates the power's trend over a window
(``predictor``): it can warn late, not at all, or for a fade that never
comes, and it announces the mean of the outages seen so far as the
duration.

Per seed every scheme runs on the same channel (the link's stream depends
on the seed only), so the schemes are compared seed by seed:

* ``reno``, ``ack-holding`` (global minimum), ``freeze`` and ``snoop`` with
  the predictor (window 1 s, horizon 1 s);
* ``ack-holding`` and ``freeze`` with the oracle (a 500 ms warning and the
  true duration) on the same channel: what the prediction's errors cost;
* ``ack-holding`` and ``freeze`` with the predictor's horizon at 0.5 s and
  2 s, and with the predictor fitting the raw readings instead of their
  one-second mean: how the gain moves with the lead time and the false
  alarms.

Writes ``fades.csv`` (one row per run, with the predictor's errors over
that run), ``fades-predictions.csv`` (one row per fade and predictor
setting: its start, duration, warning, lead time and predicted duration),
``fades-paired.csv`` (per scheme and setting, the per-seed difference from
Reno: n, mean, sd, 95 % CI, min, max) and ``fades-by-error.csv`` (the same
differences with the seeds split by their predictor's error).
``--seeds`` (default 30) and ``--duration`` (default 120 s) set the plan;
``RTOLAB_ACK_HOLDING_QUICK=1`` runs one seed of 40 s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rtolab.experiments import (
    Check,
    Experiment,
    ExperimentRun,
    option,
    register,
    save_figure,
    system_dir,
    write_table,
)
from rtolab.experiments import ack_holding as study
from rtolab.experiments.stats import spread
from rtolab.reports import table_sections

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

DEFAULT_SEEDS = 30
DEFAULT_DURATION_S = 120.0
#: The predictor's settings: (window, horizon) in seconds; the first is
#: the main one.
MAIN_PREDICTOR = (1.0, 1.0)
SWEPT_HORIZONS = (0.5, 2.0)


@dataclass(frozen=True)
class FadeCell:
    """One run: a scheme on one seed's channel, warned by the predictor
    (with its window and horizon) or by the oracle."""

    scheme: str
    seed: int
    oracle: bool = False
    window_s: float = MAIN_PREDICTOR[0]
    horizon_s: float = MAIN_PREDICTOR[1]
    #: Whether the predictor fits the raw readings (``smooth = "0s"``)
    #: instead of their one-second mean.
    raw: bool = False

    @property
    def mode(self) -> str:
        return "oracle" if self.oracle else "predicted"

    @property
    def setting(self) -> str:
        """The prediction a run had, as the tables name it."""
        if self.oracle:
            return "oracle"
        tail = ", raw readings" if self.raw else ""
        return f"window {self.window_s:g} s, horizon {self.horizon_s:g} s{tail}"

    @property
    def label(self) -> str:
        tail = "oracle" if self.oracle else f"w{self.window_s:g}-h{self.horizon_s:g}"
        tail += "-raw" if self.raw else ""
        return f"F-{self.scheme}-{tail}-seed{self.seed}"

    def radio(self) -> str:
        warned = (
            'warning = "500ms"\n'
            if self.oracle
            else f'predictor = {{ window = "{self.window_s * 1000:.0f}ms", '
            f'horizon = "{self.horizon_s * 1000:.0f}ms"'
            + (', smooth = "0s"' if self.raw else "")
            + " }\n"
        )
        return 'kind = "fading"\nrate = "2Mbps"\ndelay = "10ms"\nsignal = {}\n' + warned

    @property
    def records_predictions(self) -> bool:
        """Whether its fades go to ``fades-predictions.csv``: the predictor
        reads the channel, not the traffic, so one run per seed and
        setting gives its record (Reno's for the main setting)."""
        if self.scheme == "reno":
            return True
        return self.scheme == "ack-holding" and (self.oracle or not self.main)

    @property
    def main(self) -> bool:
        """Whether it has the main predictor setting."""
        return (
            not self.oracle and not self.raw and (self.window_s, self.horizon_s) == MAIN_PREDICTOR
        )

    def run(self) -> ExperimentRun:
        text = study.scenario(
            "A", self.scheme, radio=self.radio(), duration_s=duration_s(), capture=False
        )
        params = {
            "scheme": self.scheme,
            "mode": self.mode,
            "window_s": self.window_s,
            "horizon_s": self.horizon_s,
            "raw": self.raw,
        }
        return ExperimentRun(self.label, text, seed=self.seed, params=params)


def seeds() -> list[int]:
    """Seeds: 1..N (``--seeds``; one in the quick plan)."""
    default = 1 if study.quick() else DEFAULT_SEEDS
    return list(range(1, int(option("seeds", default)) + 1))


def duration_s() -> float:
    """Simulated seconds of every run (``--duration``; 40 in the quick
    plan)."""
    return float(option("duration", 40.0 if study.quick() else DEFAULT_DURATION_S))


def cells() -> list[FadeCell]:
    """Per seed: the four schemes with the predictor, ACK holding and
    Freeze-TCP with the oracle, with the other horizons and with the raw
    readings (the quick plan: ACK holding with the oracle only)."""
    out: list[FadeCell] = []
    for seed in seeds():
        out += [FadeCell(s, seed) for s in ("reno", "ack-holding", "freeze", "snoop")]
        if study.quick():
            out.append(FadeCell("ack-holding", seed, oracle=True))
            continue
        out += [FadeCell(s, seed, oracle=True) for s in ("ack-holding", "freeze")]
        for horizon in SWEPT_HORIZONS:
            out += [FadeCell(s, seed, horizon_s=horizon) for s in ("ack-holding", "freeze")]
        out += [FadeCell(s, seed, raw=True) for s in ("ack-holding", "freeze")]
    return out


# ----- what a run shows -----


def radio_stats(result: Result) -> dict[str, Any]:
    """The radio link's counters from the run's report."""
    for link in result.report.get("links", []):
        if link.get("name") == "radio":
            return dict(link.get("stats") or {})
    return {}


def fade_rows(stats: dict[str, Any], cell: FadeCell) -> list[dict[str, Any]]:
    """One row per outage of the run: when, how long, and its warning."""
    rows = []
    for k, fade in enumerate(stats.get("fades") or []):
        start, end = fade["start_ns"] / 1e9, fade["end_ns"] / 1e9
        warned, predicted = fade.get("warned_ns"), fade.get("predicted_ns")
        duration = end - start
        rows.append(
            {
                "setting": cell.setting,
                "seed": cell.seed,
                "fade": k + 1,
                "start_s": start,
                "duration_s": duration,
                "warned": warned is not None,
                "lead_s": start - warned / 1e9 if warned is not None else np.nan,
                "predicted_s": predicted / 1e9 if predicted is not None else np.nan,
                "duration_error": (
                    predicted / 1e9 / duration - 1
                    if predicted is not None and duration > 0
                    else np.nan
                ),
            }
        )
    return rows


def prediction_summary(fades: list[dict[str, Any]], false_alarms: int) -> dict[str, Any]:
    """The predictor's errors over one run: fades, those missed, false
    alarms, the mean lead time and the mean absolute relative error of
    the announced durations."""
    frame = pd.DataFrame(fades, columns=["warned", "lead_s", "duration_error", "duration_s"])
    warned = frame[frame["warned"].astype(bool)]
    return {
        "fades": len(frame),
        "missed": int((~frame["warned"].astype(bool)).sum()),
        "false_alarms": false_alarms,
        "down_s": float(frame["duration_s"].sum()),
        "mean_lead_s": float(warned["lead_s"].mean()) if len(warned) else np.nan,
        "mean_abs_duration_error": (
            float(warned["duration_error"].abs().mean()) if len(warned) else np.nan
        ),
    }


RUN_COLUMNS = (
    "scheme",
    "mode",
    "setting",
    "window_s",
    "horizon_s",
    "seed",
    "packets_delivered",
    "rto_expirations",
    "retransmissions",
    "fades",
    "missed",
    "false_alarms",
    "down_s",
    "mean_lead_s",
    "mean_abs_duration_error",
)
FADE_COLUMNS = (
    "setting",
    "seed",
    "fade",
    "start_s",
    "duration_s",
    "warned",
    "lead_s",
    "predicted_s",
    "duration_error",
)
PAIRED_COLUMNS = (
    "scheme",
    "setting",
    "metric",
    "n",
    "mean",
    "sd",
    "ci95",
    "min",
    "max",
    "gain_pct",
)


def run_row(result: Result, cell: FadeCell) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    stats = radio_stats(result)
    fades = fade_rows(stats, cell)
    flow = study.flow_report(result, "bulk")
    row = {
        "scheme": cell.scheme,
        "mode": cell.mode,
        "setting": cell.setting,
        "window_s": cell.window_s,
        "horizon_s": cell.horizon_s,
        "seed": cell.seed,
        "packets_delivered": study.sink_bytes(result) // study.MSS,
        "rto_expirations": int(flow.get("timeouts", 0)),
        "retransmissions": int(flow.get("retransmissions", 0)),
        **prediction_summary(fades, len(stats.get("false_alarms") or [])),
    }
    return row, fades


def paired_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per scheme and prediction setting, its packets and timeouts minus
    Reno's on the same seed (Reno ignores the warnings, so one Reno run
    per seed serves every setting)."""
    reno = runs[runs["scheme"] == "reno"].set_index("seed")
    rows = []
    for (scheme, setting), group in runs[runs["scheme"] != "reno"].groupby(
        ["scheme", "setting"], sort=False
    ):
        g = group.set_index("seed")
        for metric in ("packets_delivered", "rto_expirations"):
            diff = (g[metric] - reno[metric]).dropna()
            s = spread(diff)
            base = float(reno.loc[diff.index, metric].mean()) if len(diff) else np.nan
            rows.append(
                {
                    "scheme": scheme,
                    "setting": setting,
                    "metric": metric,
                    **{k: s[k] for k in ("n", "mean", "sd", "ci95", "min", "max")},
                    "gain_pct": 100 * s["mean"] / base if base else np.nan,
                }
            )
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def by_error_table(runs: pd.DataFrame) -> pd.DataFrame:
    """ACK holding's and Freeze-TCP's packets minus Reno's per seed, with
    the seeds split at the median of their predictor's share of missed
    fades and at the median of its mean absolute duration error (main
    predictor setting)."""
    main = runs[runs["setting"] == FadeCell("reno", 1).setting]
    reno = main[main["scheme"] == "reno"].set_index("seed")
    errors = pd.DataFrame(
        {
            "missed_share": reno["missed"] / reno["fades"].replace(0, np.nan),
            "mean_abs_duration_error": reno["mean_abs_duration_error"],
        }
    )
    rows = []
    for measure in errors.columns:
        values = errors[measure].dropna()
        if values.empty:
            continue
        cut = float(values.median())
        for half, chosen in (("low", values[values <= cut]), ("high", values[values > cut])):
            for scheme in ("ack-holding", "freeze"):
                g = main[main["scheme"] == scheme].set_index("seed")
                diff = (g["packets_delivered"] - reno["packets_delivered"]).reindex(chosen.index)
                s = spread(diff)
                rows.append(
                    {
                        "error": measure,
                        "half": half,
                        "median": cut,
                        "error_mean": float(chosen.mean()) if len(chosen) else np.nan,
                        "scheme": scheme,
                        **{k: s[k] for k in ("n", "mean", "sd", "ci95")},
                    }
                )
    return pd.DataFrame(
        rows,
        columns=["error", "half", "median", "error_mean", "scheme", "n", "mean", "sd", "ci95"],
    )


def checks(results: dict[str, Result]) -> list[Check]:
    out = system_dir(results)
    plan = cells()
    done = [c for c in plan if c.label in results]
    if out is None or not done:
        return [Check("runs completed", False, "no results")]
    rows, fades = [], []
    for cell in done:
        row, fade_list = run_row(results[cell.label], cell)
        rows.append(row)
        if cell.records_predictions:
            fades += fade_list
    runs = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    predictions = pd.DataFrame(fades, columns=list(FADE_COLUMNS))
    paired = paired_table(runs)
    write_table(runs, out / "fades.csv")
    write_table(predictions, out / "fades-predictions.csv")
    write_table(paired, out / "fades-paired.csv")
    write_table(by_error_table(runs), out / "fades-by-error.csv")
    if len(paired):
        save_figure(gain_figure(paired), out / "figures" / "fades-gain.png")
    if len(predictions):
        save_figure(predictor_figure(predictions), out / "figures" / "fades-predictor.png")
    same_channel = runs.groupby("seed")["down_s"].nunique().max() == 1
    predicted = predictions[predictions["setting"] != "oracle"]
    return [
        Check("every planned run completed", len(done) == len(plan), f"{len(done)} of {len(plan)}"),
        Check(
            "every scheme of a seed met the same channel",
            bool(same_channel),
            "the seconds down per seed agree across runs",
        ),
        Check(
            "the channel fades",
            bool(len(predicted)),
            f"{len(predicted)} fades, median {predicted['duration_s'].median():.2f} s"
            if len(predicted)
            else "no fade",
        ),
    ]


def gain_figure(paired: pd.DataFrame) -> Figure:
    """Packets delivered minus Reno's per seed: mean and 95 % interval per
    scheme and prediction setting."""
    import matplotlib.pyplot as plt

    rows = paired[paired["metric"] == "packets_delivered"].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.2))
    y = np.arange(len(rows))
    ax.errorbar(rows["mean"], y, xerr=rows["ci95"].fillna(0), fmt="o", capsize=3)
    ax.set_yticks(y, [f"{s} ({t})" for s, t in zip(rows["scheme"], rows["setting"], strict=True)])
    ax.axvline(0, color="0.5", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("packets delivered minus Reno's, same seed (mean, 95 % CI)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def predictor_figure(predictions: pd.DataFrame) -> Figure:
    """Lead times and relative duration errors of the predictor's warnings
    (main setting), over every seed's fades."""
    import matplotlib.pyplot as plt

    main = predictions[predictions["setting"] == FadeCell("reno", 1).setting]
    warned = main[main["warned"].astype(bool)]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    a.hist(warned["lead_s"], bins=20)
    a.set_xlabel("lead time of going_down (s)")
    a.set_ylabel("fades")
    a.set_title(f"{len(warned)} of {len(main)} fades warned", fontsize="medium")
    b.hist(warned["duration_error"], bins=20)
    b.set_xlabel("predicted / true duration - 1")
    b.set_title("duration error", fontsize="medium")
    fig.tight_layout()
    return fig


def report_sections(directory: Path) -> list[str]:
    """The per-run table (n, means over seeds), the paired differences and
    the split by prediction error, and the figures."""
    parts = study.report_sections(directory, "fades.csv", ("fades",), keys=("scheme", "setting"))
    return parts + table_sections(
        directory / study.SYSTEM,
        [
            (
                "fades-paired.csv",
                "fades-paired.csv (per-seed differences from Reno: n, mean, sd, 95 % CI)",
            ),
            (
                "fades-by-error.csv",
                "fades-by-error.csv (packets minus Reno's, seeds split by their predictor's error)",
            ),
        ],
    )


register(
    Experiment(
        system=study.SYSTEM,
        name="fades",
        title="ACK holding, Freeze-TCP and Snoop on fades predicted from the received power",
        description=(
            "A mobile driving through path loss, shadowing and Rayleigh fading; the base station "
            "predicts each fade from the power's trend. Every scheme on the same channel per seed, "
            "paired differences from Reno with intervals, the predictor's lead times, misses, "
            "false alarms and duration errors. Writes fades.csv, fades-predictions.csv, "
            "fades-paired.csv and fades-by-error.csv."
        ),
        runs=lambda: [c.run() for c in cells()],
        checks=checks,
        report=report_sections,
        options=("seeds", "duration"),
        parallel=True,
        trace_families=(),
        keep_captures=False,
    )
)
