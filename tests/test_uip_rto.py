"""The uIP RTO study's experiment, reduced (2 seeds, 60 s of sending), end
to end through the CLI: tables with their documented columns, every run
counted, figures, the report, and the same bytes from the same seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rtolab.experiments import uip_rto

SEEDS = ["--seeds", "3"]
ARGS = ["--seeds", "2", "--duration", "60", "--json"]
FIGURES = (
    "goodput-vs-fairness.png",
    "cdf.png",
    "goodput-by-hops.png",
    "tree-classes.png",
    "trees-best-worst.png",
    "rto-over-time.png",
)


def reproduce(out: Path, *extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "reproduce", "uip-rto", "--out", str(out), *ARGS, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def reproduction(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uip-rto")
    reproduce(out)
    return out


def test_tables_have_their_columns_and_every_run(reproduction: Path) -> None:
    base = reproduction / "uip-rto"
    runs = pd.read_csv(base / "runs.csv")
    assert list(runs.columns) == list(uip_rto.RUN_COLUMNS)
    assert len(runs) == 2 * len(uip_rto.SCHEMES)
    assert list(dict.fromkeys(runs["scheme"])) == list(uip_rto.SCHEMES)
    assert (runs["status"] == "ok").all() and runs["complete"].all()
    assert (runs["bytes_corrupt"] == 0).all()
    assert runs["fairness"].between(0, 1).all()
    assert runs["tree_class"].isin(uip_rto.TREE_CLASSES).all()
    assert (runs["goodput_segments"] > 0).all()
    nodes = pd.read_csv(base / "per_node.csv")
    assert list(nodes.columns) == list(uip_rto.NODE_COLUMNS)
    assert len(nodes) == 15 * len(runs)
    # The clients' goodput adds up to what the server received.
    per_run = nodes.groupby(["scheme", "seed"], sort=False)["goodput_segments"].sum()
    assert per_run.tolist() == runs["goodput_segments"].tolist()
    assert (nodes["longest_stall_s"] <= 60 + 1e-6).all()
    summary = pd.read_csv(base / "summary.csv")
    assert summary["n"].tolist() == [2] * len(uip_rto.SCHEMES)
    assert summary["unfinished"].tolist() == [0] * len(uip_rto.SCHEMES)
    trees = pd.read_csv(base / "trees.csv")
    assert trees["n"].sum() == len(runs)


def test_figures_and_report(reproduction: Path) -> None:
    for name in FIGURES:
        assert (reproduction / "uip-rto" / "figures" / name).stat().st_size > 1000, name
    page = (reproduction / "report.html").read_text(encoding="utf-8")
    assert "Per scheme" in page and "Per tree class" in page
    assert page.index("Per scheme") < page.index("<details><summary>runs.csv")


def test_the_same_seeds_give_the_same_runs_table(reproduction: Path, tmp_path: Path) -> None:
    # In this process, without Dask, from scratch.
    reproduce(tmp_path, "--workers", "0", "--no-report")
    first = (reproduction / "uip-rto" / "runs.csv").read_bytes()
    assert (tmp_path / "uip-rto" / "runs.csv").read_bytes() == first


def test_an_option_no_chosen_experiment_takes_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "reproduce", "foundation", "--out", str(tmp_path), *SEEDS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "--seeds" in done.stderr + done.stdout
    assert not (tmp_path / "reproduce.json").exists()


def test_each_scheme_puts_its_timer_and_reconnect_on_the_clients() -> None:
    import tomllib

    for scheme, tcp in uip_rto.SCHEMES.items():
        data = tomllib.loads(uip_rto.scenario(scheme, sending=60))
        assert data["duration"] == "180s"
        assert "capture" not in data
        assert data["host_group"][0]["tcp"] == {"mss": 48, **tcp}
        clients = [a for a in data["app"] if a["kind"] == "tcp-bulk"]
        assert len(clients) == 15
        assert {a["reconnect"] for a in clients} == {uip_rto.RECONNECT}
