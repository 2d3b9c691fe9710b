"""What a sweep's summary says: runs finished out of planned, unfinished runs
counted and named, a spread next to every mean, numeric order of values with
units, and a table that fits 80 columns, plain when piped."""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from rtolab import sweeps
from rtolab.cli import sweep_summary_renderables

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_values_with_units_sort_by_magnitude() -> None:
    assert sweeps.quantity("50ms") == 50e6 and sweeps.quantity("5ms") == 5e6
    assert sweeps.quantity("1.5 Mbit/s") == 1.5e6 and sweeps.quantity(0.05) == 0.05
    assert sweeps.quantity("fixed") is None and sweeps.quantity(True) is None
    assert sweeps.ordered_values(["50ms", "5ms", "1s", "500us"]) == ["500us", "5ms", "50ms", "1s"]
    assert sweeps.ordered_values(["10Mbps", "2Mbps", "500kbps"]) == ["500kbps", "2Mbps", "10Mbps"]
    # Words keep the order the sweep file gives them.
    assert sweeps.ordered_values(["reno", "cubic"]) == ["reno", "cubic"]


def _rows(delay: str, goodputs: list[float | None]) -> list[dict]:
    """One result row per seed; ``None`` is a run whose transfer did not
    finish (its goodput is then unknown, as the core reports it)."""
    return [
        {
            "param.link.ab.delay": delay,
            "seed": seed,
            "status": "ok",
            "error": None,
            "app.bulk.completed": 0.0 if g is None else 1.0,
            "app.bulk.goodput_bps": math.nan if g is None else g,
        }
        for seed, g in enumerate(goodputs, start=1)
    ]


def test_an_unfinished_run_is_counted_and_named_not_averaged_in() -> None:
    frame = pd.DataFrame(
        _rows("50ms", [1e6, None, 3e6]) + _rows("5ms", [None, None, None]) + _rows("1s", [2e6])
    )
    grid = {"link.ab.delay": ["50ms", "5ms", "1s"]}
    cells = sweeps.summarize(frame, ["app.bulk.goodput_bps"], grid=grid, seeds=3)
    assert [c.params["link.ab.delay"] for c in cells] == ["5ms", "50ms", "1s"]
    none_done, partly, one_run = cells
    assert partly.n == "2/3" and partly.unfinished == {2: "bulk"} and partly.finished == [1, 3]
    goodput = partly.metrics["app.bulk.goodput_bps"]
    assert (goodput.n, goodput.mean, goodput.low, goodput.high) == (2, 2e6, 1e6, 3e6)
    assert none_done.n == "0/3"
    assert none_done.metrics["app.bulk.goodput_bps"].why == "no finished run (3 unfinished)"
    # Two planned runs have no result yet: said so, not hidden.
    assert one_run.n == "1/3" and one_run.missing == 2


def test_a_failed_run_is_counted_apart_from_unfinished_ones() -> None:
    frame = pd.DataFrame(_rows("5ms", [1e6, None]))
    failed = {**_rows("5ms", [1e6])[0], "seed": 3, "status": "failed", "error": "boom"}
    frame = pd.concat([frame, pd.DataFrame([failed])], ignore_index=True)
    (cell,) = sweeps.summarize(frame, ["app.bulk.goodput_bps"])
    assert cell.n == "1/3" and cell.failed == {3: "boom"} and cell.unfinished == {2: "bulk"}
    assert list(sweeps.outcomes(frame)) == ["finished", "unfinished", "failed"]


def test_piped_summary_is_plain_fits_80_columns_and_shows_unfinished_runs(
    loss_delay_sweep: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    spec = loss_delay_sweep.parent / "sweep.toml"
    args = ["--out", str(loss_delay_sweep), "--workers", "0", "--no-report"]
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "sweep", str(spec), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, done.stdout
    assert not ANSI.search(done.stdout) and done.stdout.isascii()
    assert "nan" not in done.stdout.lower()
    rows = [line for line in lines if re.match(r"^\|\s+\d+ms \|", line)]
    assert [r.split("|")[1].strip() for r in rows] == ["5ms", "5ms", "50ms", "50ms"]
    # Each lossy cell: no run finished, both unfinished, and it says so.
    lossy = [r for r in rows if "| 0.05 |" in r]
    assert len(lossy) == 2 and all("0/2" in r and "none" in r for r in lossy)
    assert "delay=5ms, loss=0.05, seed 2: bulk not done" in done.stdout
    assert "delay = link.ab.delay" in done.stdout


@pytest.mark.parametrize("terminal", [True, False])
def test_summary_fits_80_columns_on_a_terminal_and_piped(
    loss_delay_sweep: Path, terminal: bool
) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=80, force_terminal=terminal, highlight=False)
    spec = {"grid": {"link.ab.delay": ["50ms", "5ms"], "link.ab.loss": [0.0, 0.05]}}
    spec["seeds"] = [1, 2]
    for renderable in sweep_summary_renderables(
        sweeps.load_results(loss_delay_sweep), spec, console
    ):
        console.print(renderable)
    text = ANSI.sub("", buffer.getvalue())
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "2/2" in text and "0/2" in text
    assert bool(ANSI.search(buffer.getvalue())) == terminal
    assert text.isascii() != terminal  # box drawing on a terminal, ASCII piped


def test_report_shows_n_spread_and_the_unfinished_runs(loss_delay_sweep: Path) -> None:
    from rtolab.reports import sweep_report

    page = sweep_report(loss_delay_sweep)
    assert "n (finished / planned)" in page and "min..max" in page
    assert "no finished run (2 unfinished)" in page
    assert "4 runs did not finish their workload" in page
    assert ">nan<" not in page
    assert page.index(">5ms<") < page.index(">50ms<")


def test_a_sender_bounded_by_time_finishes_and_is_averaged(tmp_path: Path) -> None:
    """A tcp-bulk without bytes sends for the run: a run that reaches its
    end did its workload, and its goodput is in the summary."""
    import rtolab

    text = (Path(__file__).resolve().parent.parent / "scenarios" / "p2p-bulk.toml").read_text()
    (tmp_path / "bulk.toml").write_text(text.replace("bytes = 2_000_000\n", ""))
    (tmp_path / "sweep.toml").write_text(
        'scenario = "bulk.toml"\nseeds = 2\n[set]\nduration = "1s"\n'
        '[grid]\n"link.ab.loss" = [0.0, 0.02]\n'
    )
    results = rtolab.sweep(tmp_path / "sweep.toml", tmp_path / "out", workers=0).results
    cells = sweeps.summarize(results, ["app.bulk.goodput_bps"])
    assert [c.n for c in cells] == ["2/2", "2/2"]
    for cell in cells:
        goodput = cell.metrics["app.bulk.goodput_bps"]
        # Sent from 100 ms to the end of the run over a 10 Mbit/s link.
        assert goodput.n == 2 and 0 < goodput.low <= goodput.high < 10e6
    assert (
        cells[0].metrics["app.bulk.goodput_bps"].mean
        > cells[1].metrics["app.bulk.goodput_bps"].mean
    )
