"""The uIP study's schemes on a frozen tree (docs/uip-rto.md, "On a frozen
tree"): the timer's effect without the tree's.

In the ``schemes`` experiment every scheme of a seed starts sending on the
same tree, but RPL keeps choosing parents from what the traffic does to
its links, so the schemes end on different trees and a difference between
them mixes the timer's effect with the tree's. ``rtolab reproduce
uip-rto/frozen`` runs the same network, seeds and schemes with the tree
frozen when the clients start (the mesh link's ``rpl.freeze_tree_at``: a
node keeps its parent while that parent has a finite rank), and writes in
``DIR/uip-rto/``:

* ``frozen-runs.csv``: one row per run, the columns of ``runs.csv``;
* ``frozen-paired.csv``: the paired per-seed differences between schemes;
* ``frozen-claims.csv``: the study's claims judged on those differences.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import tomllib

from rtolab.experiments import (
    Check,
    Claim,
    Experiment,
    ExperimentRun,
    option,
    register,
    system_dir,
    write_table,
)
from rtolab.experiments import uip_rto as study
from rtolab.reports import table_sections

if TYPE_CHECKING:
    from rtolab.api import Result

#: Seeds per scheme unless ``--seeds`` says otherwise: fewer than the
#: ``schemes`` experiment's, since a shared tree narrows the paired spread.
DEFAULT_SEEDS = 30
#: The columns of ``frozen-claims.csv``.
CLAIM_COLUMNS = ("claim", "ours", "holds")


def scenario(scheme: str) -> str:
    """The ``schemes`` experiment's scenario of ``scheme`` with the mesh's
    tree frozen when the clients start."""
    from rtolab.scenario import toml_text

    data = tomllib.loads(study.scenario(scheme, name=f"{scheme}-frozen"))
    for link in data["link"]:
        if link["kind"] == "ieee802154":
            link["rpl"] = {**link.get("rpl", {}), "freeze_tree_at": f"{study.FORMATION_S:g}s"}
    return toml_text(data)


def runs() -> list[ExperimentRun]:
    """Every scheme with every seed, seed by seed."""
    texts = {scheme: scenario(scheme) for scheme in study.SCHEMES}
    n = int(option("seeds", DEFAULT_SEEDS))
    return [
        ExperimentRun(
            f"frozen-{scheme}-seed{seed}",
            texts[scheme],
            seed=seed,
            params={"scheme": scheme, "sending_s": study.sending_s()},
        )
        for seed in range(1, n + 1)
        for scheme in study.SCHEMES
    ]


def checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes the tables; the claims on the frozen tree, and checks that
    every run finished and that every scheme of a seed starts and ends on
    one tree (a parent lost during the run would break the second)."""
    out = system_dir(results)
    if out is None:
        return [Check("runs completed", False, "no results")]
    frame, _, _ = study.tables(results, runs())
    write_table(frame, out / "frozen-runs.csv")
    write_table(study.paired_table(frame), out / "frozen-paired.csv")
    verdicts = study.claim_verdicts(frame)
    rows = [{"claim": s, "ours": o, "holds": h} for s, o, h in verdicts]
    write_table(pd.DataFrame(rows, columns=list(CLAIM_COLUMNS)), out / "frozen-claims.csv")
    done = int((frame["status"].eq("ok") & frame["complete"].eq(True)).sum())
    started, seeds = study.same_start(frame)
    ok = frame[frame["status"].eq("ok")]
    ended = int((ok.groupby("seed")["end_tree"].nunique() == 1).sum()) if len(ok) else 0
    return [
        *(Claim(f"On a frozen tree: {s}", o, h) for s, o, h in verdicts),
        Check("every planned run completed", done == len(frame), f"{done} of {len(frame)}"),
        Check(
            "every scheme of a seed starts sending on the same tree",
            started == seeds,
            f"{started} of {seeds} seeds",
        ),
        Check(
            "every scheme of a seed ends on the tree it started on",
            ended == seeds and bool((ok["start_tree"] == ok["end_tree"]).all()),
            f"{ended} of {seeds} seeds end on one tree; "
            f"{int((ok['start_tree'] != ok['end_tree']).sum())} runs changed a parent",
        ),
    ]


def report_sections(directory: Path) -> list[str]:
    """The claims and the paired differences on the frozen tree."""
    return table_sections(
        directory / study.SYSTEM,
        [
            ("frozen-claims.csv", "The study's claims on a frozen tree (paired per seed)"),
            ("frozen-paired.csv", "Paired differences on a frozen tree (a minus b, per seed)"),
        ],
    )


register(
    Experiment(
        system=study.SYSTEM,
        name="frozen",
        title="The schemes on a tree frozen when the clients start, paired per seed",
        description=(
            "The schemes experiment with RPL's tree frozen at the end of formation, so the "
            "schemes of a seed share their routes as well as their start: the timer's effect "
            "without the tree's. Writes frozen-runs.csv, frozen-paired.csv and "
            "frozen-claims.csv."
        ),
        runs=runs,
        checks=checks,
        report=report_sections,
        options=("seeds", "duration"),
        parallel=True,
        analyse=study.analyse,
        trace_families=study.TRACE_FAMILIES,
        keep_captures=False,
        # Its tables come from each run's summary.
        keep_traces=False,
    )
)
