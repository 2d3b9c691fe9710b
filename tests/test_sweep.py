"""Sweeps: the sweep file's checks, a real Dask cluster, resume after a kill."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rtolab
from rtolab import sweeps
from rtolab.errors import RunError

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def write_sweep(directory: Path, body: str, name: str = "sweep.toml") -> Path:
    path = directory / name
    path.write_text(body)
    return path


SMALL = """
scenario = "{scenario}"
seeds = 2
[set]
duration = "1s"
[grid]
"link.ab.loss" = [0.0, 0.05]
"app.cbr.rate" = ["1Mbps", "2Mbps"]
"""

# Runs of roughly a second each, so a sweep can be caught mid-way.
SLOW = """
scenario = "{scenario}"
seeds = {seeds}
[set]
duration = "{duration}s"
[grid]
"link.core.rate" = ["2Mbps", "3Mbps"]
"""


def slow_duration() -> int:
    """Simulated seconds of three-hop that take about 0.7 s of wall time here."""
    started = time.perf_counter()
    rtolab.run_metrics(SCENARIOS / "three-hop.toml", duration=200)
    per_second = (time.perf_counter() - started) / 200
    return max(200, int(0.7 / max(per_second, 1e-6)))


def test_plan_is_grid_times_seeds_with_stable_ids(tmp_path: Path) -> None:
    spec = sweeps.Sweep.load(
        write_sweep(tmp_path, SMALL.format(scenario=SCENARIOS / "p2p-cbr.toml"))
    )
    runs = spec.runs()
    assert len(runs) == 4 * 2
    assert len({r.run_id for r in runs}) == 8
    assert [r.run_id for r in spec.runs()] == [r.run_id for r in runs]
    first = runs[0]
    assert first.params == {"link.ab.loss": 0.0, "app.cbr.rate": "1Mbps"} and first.seed == 1
    assert "loss = 0.0" in first.scenario and 'duration = "1s"' in first.scenario


def test_scenario_path_is_relative_to_the_sweep_file(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text((SCENARIOS / "p2p-cbr.toml").read_text())
    spec = sweeps.Sweep.load(write_sweep(tmp_path, SMALL.format(scenario="base.toml")))
    assert spec.name == "sweep" and len(spec.runs()) == 8


BAD_SWEEPS = {
    "unknown key": ('scenario = "p2p-cbr"\nseed = 3\n', "seed", "unknown field"),
    "no scenario": ("seeds = 3\n", "scenario", "missing"),
    "missing scenario file": ('scenario = "nowhere.toml"\n', "scenario", "no such file"),
    "zero seeds": ('scenario = "p2p-cbr"\nseeds = 0\n', "seeds", "at least 1"),
    "negative seed": ('scenario = "p2p-cbr"\nseeds = [1, -2]\n', "seeds[1]", "integer"),
    "grid not a list": (
        'scenario = "p2p-cbr"\n[grid]\n"link.ab.loss" = 0.1\n',
        'grid."link.ab.loss"',
        "non-empty array",
    ),
    "grid path to nothing": (
        'scenario = "p2p-cbr"\n[grid]\n"link.9.loss" = [0.1]\n',
        'grid."link.9.loss"[0]',
        "no index 9",
    ),
    "grid unknown link": (
        'scenario = "p2p-cbr"\n[grid]\n"link.wifi.loss" = [0.1]\n',
        'grid."link.wifi.loss"[0]',
        "no link named 'wifi'",
    ),
    "grid value the core rejects": (
        'scenario = "p2p-cbr"\n[grid]\n"link.ab.loss" = [0.1, 1.5]\n',
        'grid."link.ab.loss"[1]',
        "link[0].loss",
    ),
    "grid field the core does not know": (
        'scenario = "p2p-cbr"\n[grid]\n"link.ab.speed" = [3]\n',
        'grid."link.ab.speed"[0]',
        "unknown field",
    ),
    "bad fixed value": (
        'scenario = "p2p-cbr"\n[set]\nduration = "soon"\n',
        'set."duration"',
        "duration",
    ),
    "not toml": ("scenario = \n", "sweep", "not valid TOML"),
}


@pytest.mark.parametrize("case", sorted(BAD_SWEEPS))
def test_bad_sweeps_name_the_entry(case: str, tmp_path: Path) -> None:
    body, path, message = BAD_SWEEPS[case]
    with pytest.raises(rtolab.SweepError) as info:
        sweeps.Sweep.load(write_sweep(tmp_path, body))
    assert info.value.path == path, info.value
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_sweep_sets_fields_left_at_their_defaults_and_whole_tables(tmp_path: Path) -> None:
    # The shipped mesh has no rto table: the policy is uIP's default.
    spec = sweeps.Sweep.load(
        write_sweep(
            tmp_path,
            'scenario = "mesh-uip"\n[grid]\n'
            '"host_group.0.tcp.rto.policy" = ["uip", "lim2020"]\n'
            '"host.server.tcp" = [{ rto = { policy = "fixed", rto = "3s" } }, {}]\n',
        )
    )
    runs = spec.runs()
    assert len(runs) == 4
    assert 'policy = "lim2020"' in runs[2].scenario
    assert 'rto = "3s"' in runs[0].scenario
    # A misspelt field along the path is still named, by the core.
    with pytest.raises(rtolab.SweepError, match="rtoo"):
        sweeps.Sweep.load(
            write_sweep(
                tmp_path,
                'scenario = "mesh-uip"\n[grid]\n"host_group.0.tcp.rtoo.policy" = ["uip"]\n',
            )
        )


def test_parameters_with_units_get_numeric_columns(tmp_path: Path) -> None:
    spec = write_sweep(
        tmp_path,
        'scenario = "p2p-cbr"\n[set]\nduration = "200ms"\n[grid]\n'
        '"link.ab.delay" = ["50ms", "5ms"]\n"link.ab.rate" = ["10Mbps", "1.5Mbit/s"]\n'
        '"host.a.tcp" = [{ rto = { policy = "fixed" } }]\n',
    )
    results = rtolab.sweep(spec, tmp_path / "out", workers=0).results
    # Text as written, ordered by value ("5ms" before "50ms"), numbers beside.
    assert list(results["param.link.ab.delay"].unique()) == ["5ms", "50ms"]
    assert list(results["param_s.link.ab.delay"].unique()) == [0.005, 0.05]
    assert sorted(results["param_bps.link.ab.rate"].unique()) == [1.5e6, 1e7]
    assert results["param_bps.link.ab.rate"].dtype == "float64"
    assert set(results["param.host.a.tcp"]) == {'{"rto": {"policy": "fixed"}}'}
    assert "param_s.host.a.tcp" not in results
    cells = sweeps.summarize(
        results, ["app.sink.received_packets"], grid=sweeps.Sweep.load(spec).grid
    )
    assert [c.params["link.ab.delay"] for c in cells] == ["5ms", "5ms", "50ms", "50ms"]


def test_a_script_without_a_main_guard_is_told_what_to_do_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import rtolab\n"
        f"rtolab.sweep({str(write_sweep(tmp_path, SMALL.format(scenario='p2p-cbr')))!r},\n"
        f"             {str(tmp_path / 'out')!r}, workers=1)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"{script}:2" in last and 'if __name__ == "__main__":' in last, done.stderr
    assert "Nanny" not in done.stderr
    # Under the guard, the same call runs.
    guarded = script.read_text().replace(
        "rtolab.sweep(", 'if __name__ == "__main__":\n    rtolab.sweep('
    )
    guarded = guarded.replace("\n             ", "\n                 ")
    script.write_text(guarded)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "results.parquet").is_file()


def test_two_worker_local_cluster_sweep_writes_one_parquet_row_per_run(tmp_path: Path) -> None:
    spec = write_sweep(tmp_path, SMALL.format(scenario=SCENARIOS / "p2p-cbr.toml"))
    done: list[int] = []
    outcome = rtolab.sweep(
        spec, tmp_path / "out", workers=2, on_result=lambda row, n, total: done.append(n)
    )
    assert outcome.workers == 2
    assert len(outcome.ran) == 8 and not outcome.failed and done == list(range(1, 9))
    files = sorted((tmp_path / "out" / "runs").glob("*.parquet"))
    assert [f.stem for f in files] == sorted(outcome.ran)
    results = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert len(results) == 8 and set(results["status"]) == {"ok"}
    assert results["worker"].nunique() == 2  # both processes took runs
    # Each row carries its parameters, seed and the run's metrics; they match a direct run.
    row = results[(results["param.link.ab.loss"] == 0.05) & (results["seed"] == 2)]
    row = row[row["param.app.cbr.rate"] == "2Mbps"].iloc[0]
    base = rtolab.Scenario.load(SCENARIOS / "p2p-cbr.toml")
    direct = rtolab.run_metrics(
        base.with_values({"duration": "1s", "link.ab.loss": 0.05, "app.cbr.rate": "2Mbps"}), seed=2
    )
    sink = next(a for a in direct["apps"] if a["name"] == "sink")
    stats = sink.get("stats", sink)
    assert row["app.sink.received_packets"] == stats["received_packets"]
    # More loss, fewer packets: the parameter reached the core.
    means = results.groupby("param.link.ab.loss")["app.sink.lost"].mean()
    assert means[0.0] == 0 and means[0.05] > 0


def test_failed_runs_are_kept_and_retried_only_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_sweep(tmp_path, SMALL.format(scenario=SCENARIOS / "p2p-cbr.toml"))
    real = rtolab.api.run_metrics

    def flaky(scenario, *, seed=None, duration=None):
        if seed == 2:
            raise RunError("disk on fire")
        return real(scenario, seed=seed, duration=duration)

    monkeypatch.setattr(rtolab.api, "run_metrics", flaky)
    first = rtolab.sweep(spec, tmp_path / "out", workers=0)
    assert len(first.failed) == 4 and len(first.ran) == 8
    results = rtolab.load_results(tmp_path / "out")
    failed = results[results["status"] == "failed"]
    assert set(failed["seed"]) == {2} and set(failed["error"]) == {"disk on fire"}

    monkeypatch.setattr(rtolab.api, "run_metrics", real)
    again = rtolab.sweep(spec, tmp_path / "out", workers=0)
    assert again.ran == [] and len(again.skipped) == 8
    retried = rtolab.sweep(spec, tmp_path / "out", workers=0, retry_failed=True)
    assert sorted(retried.ran) == sorted(first.failed) and not retried.failed
    assert set(rtolab.load_results(tmp_path / "out")["status"]) == {"ok"}


def test_grid_can_grow_and_only_new_runs_execute(tmp_path: Path) -> None:
    body = SMALL.format(scenario=SCENARIOS / "p2p-cbr.toml")
    first = rtolab.sweep(write_sweep(tmp_path, body), tmp_path / "out", workers=0)
    grown = body.replace("[0.0, 0.05]", "[0.0, 0.05, 0.1]")
    second = rtolab.sweep(write_sweep(tmp_path, grown), tmp_path / "out", workers=0)
    assert len(second.skipped) == 8 and len(second.ran) == 4
    assert not set(second.ran) & set(first.ran)


def test_output_of_another_base_scenario_is_refused(tmp_path: Path) -> None:
    rtolab.sweep(write_sweep(tmp_path, 'scenario = "p2p-cbr"\n'), tmp_path / "out", workers=0)
    other = write_sweep(tmp_path, 'scenario = "three-hop"\n', "other.toml")
    with pytest.raises(rtolab.SweepError, match="another base scenario"):
        rtolab.sweep(other, tmp_path / "out", workers=0)


def markers(directory: Path, stage: str) -> list[str]:
    """Run ids of the marker files of one stage (start or done), one per execution."""
    return [p.name.split(".")[0] for p in directory.glob(f"*.{stage}")]


def test_killed_sweep_resumes_without_losing_or_repeating_runs(tmp_path: Path) -> None:
    seeds = 6
    spec = write_sweep(
        tmp_path,
        SLOW.format(scenario=SCENARIOS / "three-hop.toml", seeds=seeds, duration=slow_duration()),
    )
    out = tmp_path / "out"
    runs_dir = out / "runs"
    first_markers = tmp_path / "markers-first"
    command = [sys.executable, "-m", "rtolab", "sweep", str(spec), "--out", str(out)]
    command += ["--workers", "2", "--no-report", "--json"]
    env = {**os.environ, sweeps.MARKERS_ENV: str(first_markers)}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(list(runs_dir.glob("*.parquet"))) < 3:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    finished_before = {p.stem: p.read_bytes() for p in runs_dir.glob("*.parquet")}
    total = 2 * seeds
    assert 3 <= len(finished_before) < total, "killed too late to test resuming"
    assert set(finished_before) <= set(markers(first_markers, "done"))

    second_markers = tmp_path / "markers-second"
    env = {**os.environ, sweeps.MARKERS_ENV: str(second_markers)}
    resumed = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    started_again = markers(second_markers, "start")
    # No finished run ran again, every other run ran exactly once, none is missing.
    assert not set(started_again) & set(finished_before)
    assert len(started_again) == len(set(started_again)) == total - len(finished_before)
    assert sorted(outcome["skipped"]) == sorted(finished_before)
    assert sorted(outcome["ran"]) == sorted(started_again)
    for run_id, data in finished_before.items():
        assert (runs_dir / f"{run_id}.parquet").read_bytes() == data
    results = rtolab.load_results(out)
    assert len(results) == total and results["run_id"].is_unique
    assert set(results["status"]) == {"ok"}


def test_a_worker_that_dies_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_sweep(
        tmp_path,
        SLOW.format(scenario=SCENARIOS / "three-hop.toml", seeds=2, duration=slow_duration()),
    )
    marker_dir = tmp_path / "markers"
    monkeypatch.setenv(sweeps.MARKERS_ENV, str(marker_dir))
    killed: list[int] = []

    def kill_first_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            started = list(marker_dir.glob("*.start"))
            if started:
                pid = int(started[0].name.split(".")[1])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_first_worker)
    killer.start()
    outcome = rtolab.sweep(spec, tmp_path / "out", workers=2)
    killer.join()
    assert killed, "no worker was killed"
    assert len(outcome.ran) == 4 and not outcome.failed
    results = rtolab.load_results(tmp_path / "out")
    assert len(results) == 4 and set(results["status"]) == {"ok"}
    assert str(killed[0]) not in " ".join(results["worker"])


# ----- verified results -----

QUICK = """
scenario = "p2p-cbr"
seeds = 2
[set]
duration = "0.5s"
[grid]
"link.ab.loss" = [0.0, 0.05]
"""


def quick_sweep(tmp_path: Path) -> tuple[Path, Path, list[sweeps.RunSpec]]:
    """A finished 4-run sweep: its file, its output directory and its plan."""
    spec = write_sweep(tmp_path, QUICK)
    out = tmp_path / "out"
    outcome = rtolab.sweep(spec, out, workers=0)
    assert len(outcome.ran) == 4 and not outcome.failed
    return spec, out, sweeps.Sweep.load(spec).runs()


def assert_one_row_per_planned_run(out: Path, plan: list[sweeps.RunSpec]) -> pd.DataFrame:
    results = pd.read_parquet(out / "results.parquet")
    assert sorted(results["run_id"]) == sorted(r.run_id for r in plan)
    return results


def test_each_result_file_carries_its_run_key_and_checksum(tmp_path: Path) -> None:
    _, out, plan = quick_sweep(tmp_path)
    for run in plan:
        metadata = pq.read_schema(out / "runs" / f"{run.run_id}.parquet").metadata
        key = json.loads(metadata[sweeps.KEY_METADATA])
        assert key == {"run_id": run.run_id, "params": run.params, "seed": run.seed}
        assert len(metadata[sweeps.DIGEST_METADATA]) == 64


def test_another_runs_file_in_place_of_a_run_is_redone(tmp_path: Path) -> None:
    spec, out, plan = quick_sweep(tmp_path)
    victim, other = plan[0].run_id, plan[1].run_id
    runs = out / "runs"
    (runs / f"{victim}.parquet").write_bytes((runs / f"{other}.parquet").read_bytes())
    again = rtolab.sweep(spec, out, workers=0)
    assert again.ran == [victim]
    assert again.redone == {victim: f"holds the result of run {other}"}
    results = assert_one_row_per_planned_run(out, plan)
    assert results["run_id"].is_unique


def test_a_flipped_value_is_caught_and_the_run_redone(tmp_path: Path) -> None:
    spec, out, plan = quick_sweep(tmp_path)
    path = out / "runs" / f"{plan[0].run_id}.parquet"
    table = pq.read_table(path)
    column = "app.sink.received_packets"
    good = table.column(column)[0].as_py()
    # Change one value but keep the file's metadata (key and old checksum).
    flipped = table.set_column(
        table.schema.get_field_index(column), column, pa.array([86.3], pa.float64())
    ).replace_schema_metadata(table.schema.metadata)
    pq.write_table(flipped, path)
    again = rtolab.sweep(spec, out, workers=0)
    assert again.redone == {plan[0].run_id: "checksum does not match the values"}
    results = assert_one_row_per_planned_run(out, plan)
    assert results.set_index("run_id").loc[plan[0].run_id, column] == good


def test_result_files_without_key_or_checksum_are_redone(tmp_path: Path) -> None:
    spec, out, plan = quick_sweep(tmp_path)
    path = out / "runs" / f"{plan[3].run_id}.parquet"
    pq.write_table(pq.read_table(path).replace_schema_metadata(None), path)
    (out / "runs" / f"{plan[2].run_id}.parquet").write_bytes(b"PAR1 garbage")
    again = rtolab.sweep(spec, out, workers=0)
    assert sorted(again.ran) == sorted([plan[2].run_id, plan[3].run_id])
    assert again.redone[plan[3].run_id] == "no run key or checksum"
    assert again.redone[plan[2].run_id].startswith("unreadable")
    assert_one_row_per_planned_run(out, plan)


def test_results_without_a_row_for_a_planned_run_are_refused(tmp_path: Path) -> None:
    _, out, plan = quick_sweep(tmp_path)
    (out / "runs" / f"{plan[1].run_id}.parquet").unlink()
    expected = f"1 planned runs have no verified row: {plan[1].run_id}"
    with pytest.raises(rtolab.SweepError, match=expected):
        sweeps._gather(out, plan)


def test_cli_resume_names_the_runs_it_redid(tmp_path: Path) -> None:
    spec, out, plan = quick_sweep(tmp_path)
    (out / "runs" / f"{plan[0].run_id}.parquet").write_bytes(b"not parquet")
    command = [sys.executable, "-m", "rtolab", "sweep", str(spec), "--out", str(out)]
    done = subprocess.run(
        [*command, "--workers", "0", "--no-report"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    # Not a terminal: plain progress lines ("sweep <name>: ...") beside the warning.
    warning = [x for x in done.stderr.strip().splitlines() if not x.startswith("sweep ")]
    expected = f"warning: 1 result files did not verify, their runs ran again: {plan[0].run_id}"
    assert len(warning) == 1 and warning[0].startswith(expected + " (unreadable")
    assert "4 runs: 1 ran (0 failed), 3 already done" in done.stdout
    # Means come with the runs they stand on and their spread over seeds.
    # The range is printed as "low.." over "high" in its cell.
    assert "2/2" in done.stdout and re.search(r"\d\.\. +\|", done.stdout)


def test_report_counts_unverified_files_apart_and_warns(tmp_path: Path) -> None:
    _, out, plan = quick_sweep(tmp_path)
    (out / "runs" / f"{plan[0].run_id}.parquet").write_bytes(b"\xff" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "report", str(out), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().startswith(
        f"warning: 1 result files did not verify, left out of the report: {plan[0].run_id}"
    )
    assert list(json.loads(done.stdout)["rejected"]) == [f"{plan[0].run_id}.parquet"]
    page = (out / "report.html").read_text()
    assert "3 runs (3 ok, 0 failed)" in page
    assert "1 result files did not verify" in page and plan[0].run_id in page
    assert "1 of 4 planned runs have no verified result" in page
    # Means come with the number of runs behind them, out of those planned.
    assert "n (finished / planned)" in page and ">1/2<" in page
