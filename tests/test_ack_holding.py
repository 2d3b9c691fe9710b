"""ACK holding: the study's experiment, reduced, end to end; its scenario
builder's errors; and tshark's view of the captures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from rtolab.experiments import ack_holding

QUICK = {"RTOLAB_ACK_HOLDING_QUICK": "1"}


def planned(cells: Callable[[], list[ack_holding.Cell]]) -> int:
    """How many runs the reduced plan has."""
    saved = os.environ.get("RTOLAB_ACK_HOLDING_QUICK")
    os.environ.update(QUICK)
    try:
        return len(cells())
    finally:
        if saved is None:
            del os.environ["RTOLAB_ACK_HOLDING_QUICK"]
        else:
            os.environ["RTOLAB_ACK_HOLDING_QUICK"] = saved


@pytest.fixture(scope="module")
def reproduction(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reproduce")
    done = subprocess.run(
        # With the captures, which tshark reads below.
        [
            sys.executable,
            "-m",
            "rtolab",
            "reproduce",
            "ack-holding",
            "--out",
            str(out),
            "--capture",
            "--json",
        ],
        env={**os.environ, **QUICK},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_runs_table_has_every_planned_run_and_the_mechanism_shows(reproduction: Path) -> None:
    runs = pd.read_csv(reproduction / "ack-holding" / "runs.csv")
    assert len(runs) == planned(ack_holding.main_cells)
    assert list(runs.columns) == list(ack_holding.RUN_COLUMNS)
    for case in ack_holding.CASES:
        rows = runs[runs["case"] == case].set_index("scheme")
        assert rows.loc["reno", "rto_expirations"] > 0
        assert rows.loc["ack-holding", "rto_expirations"] == 0
        assert rows.loc["ack-holding", "fast_retransmits"] == 0
        assert rows.loc["ack-holding", "packets_delivered"] > rows.loc["reno", "packets_delivered"]
        # The mobile comes back to full rate in a bounded time.
        assert rows.loc["ack-holding", "time_to_full_rate_s"] < 10
    holding = runs[runs["scheme"].isin(list(ack_holding.SEARCHES))]
    assert holding["duplicate_acks_max"].max() <= 2


def test_cwnd_and_figures_are_written(reproduction: Path) -> None:
    base = reproduction / "ack-holding"
    cwnd = pd.read_csv(base / "cwnd.csv")
    assert set(cwnd["case"]) == set(ack_holding.CASES)
    assert {"reno", "ack-holding", "freeze"} <= set(cwnd["scheme"])
    # Plain Reno's window collapses to one segment after a timeout.
    reno = cwnd[(cwnd["case"] == "A") & (cwnd["scheme"] == "reno")]
    assert reno["cwnd_bytes"].min() <= 1460
    for name in ("cwnd", "schedule-final-rto", "schedule-paced-gaps", "sensitivity"):
        png = base / "figures" / f"{name}.png"
        assert png.stat().st_size > 10_000, name
    manifest = json.loads((reproduction / "reproduce.json").read_text())
    failed = [c for cs in manifest["checks"].values() for c in cs if not c["passed"]]
    assert not failed
    report = (reproduction / "report.html").read_text()
    assert "runs.csv" in report and "sensitivity.csv" in report


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_tshark_sees_no_third_duplicate_ack_with_ack_holding(reproduction: Path) -> None:
    pcaps = sorted((reproduction / "ack-holding" / "outages").glob("*ack-holding*/fixed.pcap"))
    assert pcaps
    for pcap in pcaps:
        done = subprocess.run(
            [
                "tshark",
                "-r",
                str(pcap),
                "-Y",
                "ip.src == 10.0.1.2 && tcp.analysis.duplicate_ack_num",
                "-T",
                "fields",
                "-e",
                "tcp.analysis.duplicate_ack_num",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        numbers = [int(x) for x in done.stdout.split()]
        assert max(numbers, default=0) <= 2, pcap
        malformed = subprocess.run(
            ["tshark", "-r", str(pcap), "-Y", "_ws.malformed"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert malformed.stdout.strip() == "", pcap


def test_sensitivity_table(reproduction: Path) -> None:
    table = pd.read_csv(reproduction / "ack-holding" / "sensitivity.csv")
    assert len(table) == planned(ack_holding.sensitivity_cells)
    exact = table[
        (table["duration_error"] == 0)
        & (table["warning_s"] == 0.5)
        & (table["scheme"] == "ack-holding")
    ]
    assert int(exact["rto_expirations"].iloc[0]) == 0


def test_scenario_builder_names_bad_arguments() -> None:
    with pytest.raises(ValueError, match="case"):
        ack_holding.scenario("C", "reno")
    with pytest.raises(ValueError, match="scheme"):
        ack_holding.scenario("A", "vegas")


def _ns2check() -> Any:
    """scripts/ns2check/ack_holding.py as a module."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "scripts" / "ns2check" / "ack_holding.py"
    spec = importlib.util.spec_from_file_location("ns2check_ack_holding", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reno_through_one_outage_agrees_with_ns2(tmp_path: Path) -> None:
    """The study's baseline in ns-2.35 and in rtolab with ns-2's TCP
    defaults and window growth: the same timeouts, backoff and idle time
    after the link returns, and packets delivered within 0.5 %
    (docs/ack-holding.md)."""
    check = _ns2check()
    theirs = check.run_ns2("A", 1, tmp_path / "ns2")
    ours = check.run_rtolab("A", 1, tmp_path / "rtolab")
    assert ours["timeouts"] == theirs["timeouts"] > 0
    assert ours["backoff_max"] == theirs["backoff_max"]
    assert abs(ours["idle_after_up_s"] - theirs["idle_after_up_s"]) < 0.05
    assert abs(ours["packets_delivered"] / theirs["packets_delivered"] - 1) < 0.005


def test_a_variable_path_runs_the_stretching_phase(reproduction: Path) -> None:
    """With cross traffic on the wired link the timeout-free search
    stretches ACKs, and the fixed host sees the planned gaps from the third
    release on (docs/ack-holding.md, "A variable path")."""
    from rtolab.experiments import ack_holding_paths as paths

    runs = pd.read_csv(reproduction / "ack-holding" / "paths.csv")
    # Every variant on every seed of the plan the reproduction ran (the
    # quick plan runs one seed).
    assert len(runs) == len(paths.VARIANTS) * runs["seed"].nunique()
    assert set(runs["variant"]) == set(paths.VARIANTS) and 1 in set(runs["seed"])
    held = runs[runs["variant"] != "reno"]
    assert (held["deviation_s"] > 1e-5).all()
    stretched = runs.set_index(["variant", "seed"]).loc[("timeout-free", 1)]
    assert stretched["n"] > 0
    acks = pd.read_csv(reproduction / "ack-holding" / "paths-acks.csv")
    rows = acks[(acks["variant"] == "timeout-free") & (acks["seed"] == 1)].dropna()
    later = rows[rows["ack"] >= 3]
    assert len(later) > 5
    assert ((later["gap_at_fixed_host_s"] - later["planned_gap_s"]).abs() < 0.03).all()
    # The fixed host's RTO is above the model's: its floor and hold samples.
    assert (later["fixed_host_rto_s"] > later["model_rto_s"]).all()


def test_predicted_fades_compare_the_schemes_on_one_channel(reproduction: Path) -> None:
    """Every scheme of a seed meets the same fades, the predictor's record
    of each fade is consistent, and the paired differences stand on the
    seeds run (docs/ack-holding.md, "Fades predicted from the signal")."""
    from rtolab.experiments import ack_holding_fades as fades

    base = reproduction / "ack-holding"
    runs = pd.read_csv(base / "fades.csv")
    assert list(runs.columns) == list(fades.RUN_COLUMNS)
    assert len(runs) == planned(fades.cells)
    assert {"reno", "ack-holding", "freeze", "snoop"} <= set(runs["scheme"])
    # The channel is the seed's: the same fades under every scheme.
    assert (runs.groupby("seed")["down_s"].nunique() == 1).all()
    assert (runs.groupby("seed")["fades"].nunique() == 1).all()
    assert (runs["fades"] > 0).all()
    predictions = pd.read_csv(base / "fades-predictions.csv")
    warned = predictions[predictions["warned"]]
    assert (warned["lead_s"] > 0).all()
    oracle = predictions[predictions["setting"] == "oracle"]
    # The oracle warns 500 ms ahead (later only when an outage follows the
    # last one sooner) with the true duration.
    assert oracle["warned"].all()
    assert (oracle["lead_s"] <= 0.5 + 1e-9).all()
    assert (oracle["duration_error"].abs() < 1e-6).all()
    paired = pd.read_csv(base / "fades-paired.csv")
    assert set(paired["scheme"]) == {"ack-holding", "freeze", "snoop"}
    assert (paired["n"] == runs["seed"].nunique()).all()
    assert (base / "figures" / "fades-gain.png").stat().st_size > 10_000
