"""Lim's timers under every reading the papers allow (docs/uip-rto.md,
"Readings"): each reading checked against the 2024 paper's Figure 1, and
the study's claims under every reading that check does not rule out.

Two experiments of ``rtolab reproduce uip-rto``:

* ``figure1``: the study's network (``scenarios/mesh-uip.toml``, as the
  ``schemes`` experiment runs it) with Lim 2020 under each reading, and per
  reading the time a client spends on one segment it retransmitted 5 and
  6 times, next to the paper's about 110 s and about 200 s;
  ``figure1.csv``, ``figures/figure1-waits.png``.
* ``readings``: stock uIP, Lim 2020 and Lim 2024 under every reading the
  Figure 1 check leaves (:data:`NOT_RULED_OUT`), the same seeds for every
  scheme and reading, and each claim judged on paired per-seed
  differences; ``readings-claims.csv``, ``readings-paired.csv``.

By default each reading is varied alone from the default readings;
``--full`` runs every combination (and more seeds), which takes about ten
times longer.
"""

from __future__ import annotations

import itertools
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
    option,
    register,
    save_figure,
    system_dir,
    write_table,
)
from rtolab.experiments import uip_rto as study
from rtolab.experiments.stats import family_half_width
from rtolab.reports import table_sections

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

#: Each reading of Lim's tables (docs/uip-rto.md, "Readings"): its options,
#: the default first, as fields of the ``lim2020``/``lim2024`` rto table.
READINGS: dict[str, dict[str, dict[str, Any]]] = {
    # The printed MDEV = 16: uIP's sv = 16 (500 ms pulses, four
    # deviations: 2 s), seconds, or CoCoA's initial RTO of 2 s with the
    # first sample setting MDEV = RTT/2.
    "mdev": {
        "uip_sv": {},
        "seconds": {"initial_mdev": "16s"},
        "cocoa": {"initial": "2s", "half_rtt_first_mdev": True},
    },
    "srtt": {"zero": {}, "first_sample": {"srtt_start": "first_sample"}},
    "err": {"absolute": {}, "signed": {"mdev_error": "signed"}},
    "weak": {"at_most_two": {}, "any": {"weak_samples": "any"}},
    "cap": {"backed_off": {}, "sampled_too": {"cap_sampled_timer": True}},
    "dither": {
        "as_printed": {},
        "inclusive": {"dither_ends": "inclusive"},
        "exclusive": {"dither_ends": "exclusive"},
    },
    # Lim 2024 only.
    "condition": {"timer": {}, "rto": {"subtract_compares": "rto"}},
    "count": {"before": {}, "including": {"subtract_counts_this_retransmission": True}},
}
#: Readings only the 2024 scheme reads.
ONLY_2024 = ("condition", "count")
#: Readings that Figure 1 can tell apart (the 2020 scheme's); the dithering
#: ends move a timer by at most 1 ms, so the full design varies them alone.
FIGURE1_AXES = ("mdev", "srtt", "err", "weak", "cap")
#: The paper's Figure 1: about 110 s on a segment sent 5 times more (a node
#: in range of the border router) and about 200 s on one sent 6 times more
#: (a node four hops away).
PAPER_WAITS = {5: 110.0, 6: 200.0}
PAPER_HOPS = {5: 1, 6: 4}
#: A reading is ruled out when a paper wait lies outside the central 90 %
#: of our waits with that many retransmissions, given at least this many.
MIN_SEGMENTS = 5
QUANTILES = (0.05, 0.95)
FIGURE1_SEEDS = 20
READINGS_SEEDS = 30
FULL_SEEDS = 60
FIGURE1_COLUMNS = (
    "reading",
    "retransmissions",
    "paper_s",
    "n",
    "unacked",
    "median_s",
    "p05_s",
    "p95_s",
    "min_s",
    "max_s",
    "median_at_paper_hops_s",
    "consistent",
)


def full() -> bool:
    """Whether ``--full`` asked for every combination."""
    return bool(option("full", False))


def reading_name(choice: dict[str, str]) -> str:
    """``default`` or the non-default options, ``axis=option`` joined by
    commas, in :data:`READINGS` order."""
    parts = [
        f"{axis}={choice[axis]}"
        for axis, options in READINGS.items()
        if axis in choice and choice[axis] != next(iter(options))
    ]
    return ",".join(parts) or "default"


def parse_reading(name: str) -> dict[str, str]:
    """The options a :func:`reading_name` stands for (defaults left out);
    a ``ValueError`` names an unknown axis or option."""
    if name == "default":
        return {}
    choice: dict[str, str] = {}
    for part in name.split(","):
        axis, _, value = part.partition("=")
        if axis not in READINGS or value not in READINGS[axis]:
            raise ValueError(f"reading: unknown {part!r} (axes: {', '.join(READINGS)})")
        choice[axis] = value
    return choice


def rto_table(scheme: str, name: str) -> dict[str, Any]:
    """The ``rto`` table of ``scheme`` (``lim2020`` or ``lim2024``) under
    the reading ``name``."""
    table: dict[str, Any] = {"policy": scheme}
    for axis, value in parse_reading(name).items():
        if scheme == "lim2020" and axis in ONLY_2024:
            continue
        table.update(READINGS[axis][value])
    return table


def effective(scheme: str, name: str) -> str:
    """The reading ``scheme`` actually runs under ``name``: the 2020 scheme
    ignores the 2024 readings, so those share its runs."""
    if scheme != "lim2020":
        return name
    choice = {k: v for k, v in parse_reading(name).items() if k not in ONLY_2024}
    return reading_name(choice)


def one_at_a_time(axes: tuple[str, ...]) -> list[str]:
    """The default readings and each option of ``axes`` varied alone."""
    names = ["default"]
    for axis in axes:
        names += [reading_name({axis: o}) for o in list(READINGS[axis])[1:]]
    return names


#: Readings the Figure 1 check leaves (docs/uip-rto.md, its table): at 20
#: seeds it ruled out none of the readings it varies alone, so the claims
#: are judged under each of them. The ``readings`` experiment runs these,
#: and checks that this reproduction's own Figure 1 verdicts agree.
NOT_RULED_OUT: tuple[str, ...] = tuple(one_at_a_time((*FIGURE1_AXES, "dither")))


def combinations(axes: tuple[str, ...]) -> list[str]:
    """Every combination of the options of ``axes``."""
    return [
        reading_name(dict(zip(axes, values, strict=True)))
        for values in itertools.product(*(list(READINGS[a]) for a in axes))
    ]


def figure1_readings() -> list[str]:
    """Readings of the Figure 1 check: each 2020 reading alone, or (full)
    every combination of :data:`FIGURE1_AXES` and the dithering ends alone."""
    if full():
        extra = [reading_name({"dither": o}) for o in list(READINGS["dither"])[1:]]
        return combinations(FIGURE1_AXES) + extra
    return one_at_a_time((*FIGURE1_AXES, "dither"))


def claim_readings() -> list[str]:
    """Readings the claims are judged under: those of :data:`NOT_RULED_OUT`,
    and with each the 2024 readings alone (or, full, in every combination)."""
    names: list[str] = []
    for base in NOT_RULED_OUT:
        choice = parse_reading(base)
        if full():
            extra = [parse_reading(n) for n in combinations(ONLY_2024)]
        else:
            extra = [parse_reading(n) for n in one_at_a_time(ONLY_2024)]
        for more in extra:
            name = reading_name({**choice, **more})
            if name not in names:
                names.append(name)
    return names


def _seeds(default: int) -> list[int]:
    n = int(option("seeds", FULL_SEEDS if full() else default))
    return list(range(1, n + 1))


def _run(scheme: str, reading: str, seed: int, tcp: dict[str, Any]) -> ExperimentRun:
    # Labels name directories: "mdev=seconds,weak=any" becomes
    # "mdev-seconds+weak-any".
    key = f"{scheme}-{reading}".replace("=", "-").replace(",", "+")
    text = study.scenario(scheme, tcp=tcp, name=key)
    params = {"scheme": scheme, "reading": reading, "sending_s": study.sending_s()}
    return ExperimentRun(f"{key}-seed{seed}", text, seed=seed, params=params)


def figure1_runs() -> list[ExperimentRun]:
    """Lim 2020 under every reading of :func:`figure1_readings`, seed by
    seed (every reading of seed 1 first), so that the runs done first are
    a balanced design."""
    names = figure1_readings()
    return [
        _run("lim2020", name, seed, {"rto": rto_table("lim2020", name)})
        for seed in _seeds(FIGURE1_SEEDS)
        for name in names
    ]


def readings_runs() -> list[ExperimentRun]:
    """Stock uIP, and each Lim scheme under every reading of
    :func:`claim_readings` it reads differently, seed by seed."""
    configs: list[tuple[str, str, dict[str, Any]]] = [("uip", "default", study.SCHEMES["uip"])]
    for scheme in ("lim2020", "lim2024"):
        done: set[str] = set()
        for name in claim_readings():
            run_as = effective(scheme, name)
            if run_as not in done:
                done.add(run_as)
                configs.append((scheme, run_as, {"rto": rto_table(scheme, run_as)}))
    return [
        _run(scheme, name, seed, tcp)
        for seed in _seeds(READINGS_SEEDS)
        for scheme, name, tcp in configs
    ]


# ----- the Figure 1 check -----


def figure1_table(segments: pd.DataFrame, readings: list[str]) -> pd.DataFrame:
    """``figure1.csv``: per reading and for 5 and 6 retransmissions, the
    acknowledged segments' waits (n, median, 5th and 95th percentiles,
    min, max, the median at the paper's hop count), the segments never
    acknowledged, and whether the paper's wait lies within the central
    90 % (empty with fewer than :data:`MIN_SEGMENTS` segments)."""
    rows = []
    for name in readings:
        mine = segments[segments["reading"] == name]
        for k, paper in PAPER_WAITS.items():
            same = mine[mine["retransmissions"] == k]
            acked = same[same["acked"].astype(bool)]
            waits = acked["wait_s"].astype(float).to_numpy()
            at_hops = acked[acked["hops"] == PAPER_HOPS[k]]["wait_s"].astype(float)
            row: dict[str, Any] = {
                "reading": name,
                "retransmissions": k,
                "paper_s": paper,
                "n": len(waits),
                "unacked": len(same) - len(acked),
            }
            if len(waits):
                low, high = np.quantile(waits, QUANTILES)
                row.update(
                    median_s=round(float(np.median(waits)), 1),
                    p05_s=round(float(low), 1),
                    p95_s=round(float(high), 1),
                    min_s=round(float(waits.min()), 1),
                    max_s=round(float(waits.max()), 1),
                )
            if len(at_hops):
                row["median_at_paper_hops_s"] = round(float(at_hops.median()), 1)
            if len(waits) >= MIN_SEGMENTS:
                row["consistent"] = bool(row["p05_s"] <= paper <= row["p95_s"])
            rows.append(row)
    return pd.DataFrame(rows, columns=list(FIGURE1_COLUMNS))


def ruled_out(table: pd.DataFrame) -> dict[str, bool]:
    """Per reading: whether some paper wait lies outside the central 90 %
    of ours (with enough segments to say)."""
    verdict: dict[str, bool] = {}
    for name, group in table.groupby("reading", sort=False):
        verdict[str(name)] = bool((group["consistent"] == False).any())  # noqa: E712
    return verdict


def figure1_figure(segments: pd.DataFrame, readings: list[str]) -> Figure:
    """Waits on segments retransmitted 5 and 6 times per reading (box: the
    central 90 %, line: median), the paper's waits dashed."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(readings) + 1.8), sharey=True)
    for ax, (k, paper) in zip(axes, PAPER_WAITS.items(), strict=True):
        data, labels = [], []
        for name in readings:
            same = segments[
                (segments["reading"] == name)
                & (segments["retransmissions"] == k)
                & segments["acked"].astype(bool)
            ]
            data.append(same["wait_s"].astype(float).to_numpy())
            labels.append(f"{name} (n = {len(same)})")
        shown = [d if len(d) else np.array([np.nan]) for d in data]
        ax.boxplot(shown, orientation="horizontal", whis=(5, 95), showfliers=False)
        ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=7)
        ax.axvline(paper, color="red", ls="--", label=f"paper: about {paper:g} s")
        ax.set_xlabel(f"time on one segment retransmitted {k} times (s)")
        ax.grid(alpha=0.3, axis="x")
        ax.legend(fontsize="small", loc="lower right")
    fig.suptitle("Figure 1 check: Lim 2020 under each reading (whiskers: 5th-95th percentile)")
    fig.tight_layout()
    return fig


def figure1_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``figure1.csv`` and its figure; checks that every run
    completed and that the readings it leaves include
    :data:`NOT_RULED_OUT` (the readings the claims are judged under)."""
    out = system_dir(results)
    if out is None:
        return [Check("runs completed", False, "no results")]
    plan = figure1_runs()
    frame, _, segments = study.tables(results, plan)
    names = figure1_readings()
    table = figure1_table(segments, names)
    write_table(segments, out / "figure1-segments.csv")
    write_table(table, out / "figure1.csv")
    save_figure(figure1_figure(segments, names), out / "figures" / "figure1-waits.png")
    verdict = ruled_out(table)
    left = [n for n in names if not verdict.get(n, False)]
    done = int((frame["status"].eq("ok") & frame["complete"].eq(True)).sum())
    expected = [n for n in NOT_RULED_OUT if n in names]
    return [
        Check("every planned run completed", done == len(frame), f"{done} of {len(frame)}"),
        Check(
            "the readings the claims are judged under are not ruled out by Figure 1",
            all(n in left for n in expected),
            f"left: {', '.join(left) or 'none'}; judged under: {', '.join(NOT_RULED_OUT)}",
        ),
    ]


# ----- the claims under each reading -----

#: ``holds``: judged at 95 % under that reading alone; ``holds_family``:
#: with intervals that hold together over every reading judged (so that
#: the verdicts of one run of the design are 95 % right together).
CLAIM_COLUMNS = ("reading", "claim", "ours", "holds", "holds_family")


def reading_frame(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """The runs the claims under reading ``name`` stand on: stock uIP's, and
    each Lim scheme's under the reading it runs."""
    keep = (
        (frame["scheme"] == "uip")
        | ((frame["scheme"] == "lim2020") & (frame["reading"] == effective("lim2020", name)))
        | ((frame["scheme"] == "lim2024") & (frame["reading"] == name))
    )
    return frame[keep]


def readings_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``readings-claims.csv`` (every claim under every reading) and
    ``readings-paired.csv``; the claims shown are those under the default
    readings, with the readings each holds under."""
    out = system_dir(results)
    if out is None:
        return [Check("runs completed", False, "no results")]
    frame, _, _ = study.tables(results, readings_runs())
    rows, paired_rows = [], []
    names = claim_readings()
    tests = len(names)
    for name in names:
        sub = reading_frame(frame, name)
        alone = study.claim_verdicts(sub)
        together = study.claim_verdicts(sub, tests=tests)
        for (statement, ours, holds), (_, _, holds_family) in zip(alone, together, strict=True):
            rows.append(
                {
                    "reading": name,
                    "claim": statement,
                    "ours": ours,
                    "holds": holds,
                    "holds_family": holds_family,
                }
            )
        table = study.paired_table(sub, study.PAIRS[:3])
        table.insert(0, "reading", name)
        table["ci95_family"] = [
            round(family_half_width({"n": n, "sd": sd, "ci95": ci}, tests), 4)
            for n, sd, ci in zip(table["n"], table["sd"], table["ci95"], strict=True)
        ]
        paired_rows.append(table)
    claims = pd.DataFrame(rows, columns=list(CLAIM_COLUMNS))
    write_table(claims, out / "readings-claims.csv")
    write_table(frame, out / "readings-runs.csv")
    if paired_rows:
        write_table(pd.concat(paired_rows, ignore_index=True), out / "readings-paired.csv")
    verdicts: list[Check | Claim] = []
    for statement, group in claims.groupby("claim", sort=False):
        held = [r for r, h in zip(group["reading"], group["holds"], strict=True) if h is True]
        failed = [r for r, h in zip(group["reading"], group["holds"], strict=True) if h is False]
        family = group["holds_family"].tolist()
        default = group[group["reading"] == "default"]
        ours = str(default["ours"].iloc[0]) if len(default) else "-"
        holds = default["holds"].iloc[0] if len(default) else None
        verdicts.append(
            Claim(
                str(statement),
                f"default readings: {ours}; holds under {len(held)} of {len(group)} readings"
                f" ({', '.join(held) or 'none'}), does not under {len(failed)}; with"
                f" intervals family-wise over the {tests} readings, holds under"
                f" {family.count(True)}, does not under {family.count(False)}",
                None if holds is None or pd.isna(holds) else bool(holds),
            )
        )
    done = int((frame["status"].eq("ok") & frame["complete"].eq(True)).sum())
    same, seeds = study.same_start(frame)
    return [
        *verdicts,
        Check("every planned run completed", done == len(frame), f"{done} of {len(frame)}"),
        Check(
            "every scheme and reading of a seed starts sending on the same tree",
            same == seeds,
            f"{same} of {seeds} seeds",
        ),
    ]


def figure1_report(directory: Path) -> list[str]:
    """The Figure 1 table and figure."""
    from rtolab.reports import table_html

    base = directory / study.SYSTEM
    parts: list[str] = []
    path = base / "figure1.csv"
    if path.is_file():
        parts.append(
            "<h3>Figure 1 check: time on one segment retransmitted 5 and 6 times, per "
            "reading (Lim 2020), against the paper's about 110 s and 200 s</h3>"
            + table_html(pd.read_csv(path))
        )
    png = base / "figures" / "figure1-waits.png"
    if png.is_file():
        parts.append(figure_html(png, directory))
    return parts


def readings_report(directory: Path) -> list[str]:
    """The claims and the paired differences per reading."""
    return table_sections(
        directory / study.SYSTEM,
        [
            ("readings-claims.csv", "The study's claims under each reading (paired per seed)"),
            ("readings-paired.csv", "Paired differences under each reading"),
        ],
    )


register(
    Experiment(
        system=study.SYSTEM,
        name="figure1",
        title="Lim's timers under each reading against the 2024 paper's Figure 1",
        description=(
            "Lim 2020 on the study's network under each reading of the published tables; "
            "per reading, the time a client spends on one segment retransmitted 5 and 6 "
            "times, next to the paper's about 110 s and 200 s. Writes figure1.csv."
        ),
        runs=figure1_runs,
        checks=figure1_checks,
        report=figure1_report,
        options=("seeds", "duration", "full"),
        parallel=True,
        analyse=study.analyse,
        trace_families=study.TRACE_FAMILIES,
        keep_captures=False,
        # Its tables come from each run's summary.
        keep_traces=False,
    )
)

register(
    Experiment(
        system=study.SYSTEM,
        name="readings",
        title="The study's claims under every reading Figure 1 leaves, paired per seed",
        description=(
            "Stock uIP, Lim 2020 and Lim 2024 with the same seeds under each reading the "
            "Figure 1 check does not rule out; each claim judged on per-seed differences "
            "with 95 % intervals. Writes readings-claims.csv and readings-paired.csv."
        ),
        runs=readings_runs,
        checks=readings_checks,
        report=readings_report,
        options=("seeds", "duration", "full"),
        parallel=True,
        analyse=study.analyse,
        trace_families=study.TRACE_FAMILIES,
        keep_captures=False,
        # Its tables come from each run's summary.
        keep_traces=False,
    )
)
