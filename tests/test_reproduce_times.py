"""What a reproduction took, per experiment and per system, in its manifest
and its report: wall and CPU time of the runs, their analysis and the
checks (worker processes' CPU included), and of the report's sections."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rtolab import experiments as registry
from rtolab.cli import app
from rtolab.experiments import Experiment, ExperimentRun

#: CPU seconds each run's analysis spends (on a worker), more than the
#: reproduction's own process spends meanwhile.
BURN_S = 0.75


def _reproduce(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(app, ["reproduce", *args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def test_manifest_and_report_record_each_experiment_s_time(tmp_path: Path) -> None:
    out = tmp_path / "repro"
    outcome = _reproduce("foundation/determinism", "--out", str(out))
    manifest = json.loads((out / registry.MANIFEST).read_text(encoding="utf-8"))
    # The report's time too: the manifest is written again after it.
    assert manifest["report"]["wall_s"] > 0 and outcome["report"] is not None
    timing = manifest["experiments"]["foundation/determinism"]
    runs = manifest["runs"]
    assert [r["reused"] for r in runs] == [False, False]
    assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 for r in runs)
    # Run here one after the other: the experiment took at least its runs.
    assert timing["wall_s"] >= sum(r["wall_s"] for r in runs)
    assert timing["cpu_s"] > 0 and timing["report_wall_s"] > 0
    system = manifest["systems"]["foundation"]
    assert system["runs"] == 2 and system["wall_s"] == timing["wall_s"]
    assert system["report_cpu_s"] == timing["report_cpu_s"]
    assert system["files"] > 0 and system["disk_bytes"] >= 4096 * system["files"] // 2
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Time and size" in page and "<td>determinism</td>" in page

    # Run again into the same directory: both runs are kept, and say so.
    again = _reproduce("foundation/determinism", "--out", str(out), "--no-report")
    assert [r["reused"] for r in again["runs"]] == [True, True]
    assert again["systems"]["foundation"]["reused"] == 2
    assert again["report"] is None


def burn(result: Any, params: dict[str, Any]) -> None:
    """An analysis that spends CPU time on the worker that runs it."""
    start = time.process_time()
    while time.process_time() - start < BURN_S:
        pass


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    registry.experiments()
    experiment = Experiment(
        system="timing-test",
        name="burn",
        title="runs whose analysis spends CPU time on a worker",
        description="",
        runs=lambda: [ExperimentRun(f"s{s}", "default", seed=s, duration=5.0) for s in (1, 2)],
        parallel=True,
        analyse=burn,
    )
    monkeypatch.setitem(registry._REGISTRY, experiment.key, experiment)
    yield experiment.key


def test_cpu_time_of_runs_on_worker_processes_counts(parallel: str, tmp_path: Path) -> None:
    outcome = registry.reproduce(parallel, tmp_path, workers=1)
    runs = outcome.runs
    assert all(r.status == "ok" and r.cpu_s >= BURN_S for r in runs), runs
    timing = outcome.times[parallel]
    # The runs' CPU time was spent in another process: counted all the same.
    assert timing.cpu_s >= sum(r.cpu_s for r in runs)
    assert outcome.cpu_s >= timing.cpu_s
    assert outcome.system_times()["timing-test"]["cpu_s"] == timing.cpu_s
