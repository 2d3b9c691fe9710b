"""Ctrl-C and SIGTERM end every command with one line and status 130: a
sweep's or a reproduction's Dask workers included (a terminal's Ctrl-C
reaches the whole process group), at any moment from the first import on.
A stopped sweep keeps its finished runs, and the same command resumes it."""

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

import pytest

import rtolab

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

#: Longest wait for a signalled command to end, and for it to get where it
#: is signalled: generous, as the test machine may be loaded.
WAIT_S = 60

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/status").exists(), reason="reads process state from /proc"
)

# Six runs of about 0.3 s each, so that a sweep is caught half-way.
SWEEP = """
scenario = "{scenario}"
seeds = 3
[set]
duration = "{duration}s"
[grid]
"link.core.rate" = ["2Mbps", "3Mbps"]
"""


def sweep_file(directory: Path) -> Path:
    started = time.perf_counter()
    rtolab.run_metrics(SCENARIOS / "three-hop.toml", duration=200)
    per_second = (time.perf_counter() - started) / 200
    path = directory / "sweep.toml"
    duration = max(200, int(0.3 / max(per_second, 1e-6)))
    path.write_text(SWEEP.format(scenario=SCENARIOS / "three-hop.toml", duration=duration))
    return path


class Command:
    """``rtolab ARGS`` in a session of its own, as a terminal runs it, with
    its stderr read as it comes."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rtolab", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        self.reader = threading.Thread(target=self._read, args=(self.proc.stderr,), daemon=True)
        self.reader.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.append(line)

    def wait_for(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not ready():  # type: ignore[operator]
            assert self.proc.poll() is None, f"ended before {what}: {''.join(self.lines)}"
            assert time.monotonic() < deadline, f"never {what}"
            time.sleep(0.01)

    def ended(self) -> tuple[int, str, str]:
        """Exit status, stdout and stderr, once it ended; and none of its
        processes (workers, the resource tracker) is left behind."""
        try:
            # Little on stdout, as nothing ended: it waits in the pipe.
            self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail(f"still running {WAIT_S} s after the signal")
        assert self.proc.stdout is not None and self.proc.stderr is not None
        with self.proc.stdout:
            stdout = self.proc.stdout.read()
        self.reader.join(WAIT_S)
        self.proc.stderr.close()
        deadline = time.monotonic() + WAIT_S
        while group_alive(self.proc.pid):
            assert time.monotonic() < deadline, "processes of the command outlived it"
            time.sleep(0.05)
        return self.proc.returncode, stdout, "".join(self.lines)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_stopped_cleanly(code: int, stderr: str) -> str:
    """Status 130, no traceback of any process, one line saying so last."""
    assert code == 130, stderr
    for noise in ("Traceback", "CommClosedError", "KeyboardInterrupt", "leaked", "Error"):
        assert noise not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("interrupted"), stderr
    return last


@pytest.mark.parametrize(
    ("signum", "whom"), [(signal.SIGINT, "group"), (signal.SIGTERM, "process")]
)
def test_a_stopped_sweep_keeps_its_finished_runs_and_resumes(
    signum: signal.Signals, whom: str, tmp_path: Path
) -> None:
    spec = sweep_file(tmp_path)
    out = tmp_path / "out"
    args = ["sweep", str(spec), "--out", str(out), "--workers", "2", "--no-report", "--json"]
    sweep = Command(*args)
    runs = out / "runs"
    sweep.wait_for(lambda: any(runs.glob("*.parquet")), "finished a run")
    # What a terminal's Ctrl-C does, what a batch system's stop does.
    if whom == "group":
        os.killpg(sweep.proc.pid, signum)
    else:
        os.kill(sweep.proc.pid, signum)
    code, _, stderr = sweep.ended()
    last = assert_stopped_cleanly(code, stderr)
    assert f"finished runs kept in {out}" in last and "resumes" in last
    finished = {p.stem: p.read_bytes() for p in runs.glob("*.parquet")}
    assert 1 <= len(finished) < 6, "stopped too late to tell"
    assert not list(runs.glob("*.tmp"))

    again = ["sweep", str(spec), "--out", str(out), "--workers", "0", "--no-report", "--json"]
    resumed = subprocess.run(
        [sys.executable, "-m", "rtolab", *again],
        capture_output=True,
        text=True,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert sorted(outcome["skipped"]) == sorted(finished)
    assert len(outcome["ran"]) == 6 - len(finished) and not outcome["failed"]
    for run_id, data in finished.items():
        assert (runs / f"{run_id}.parquet").read_bytes() == data
    assert len(rtolab.load_results(out)) == 6


def workers(pid: int) -> list[int]:
    """The processes ``pid`` started to be Dask workers (its children that
    multiprocessing spawned, but for its resource tracker)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in command:
                found.append(int(child))
    return found


@pytest.mark.parametrize("when", ["planned", "workers starting"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_sweep_stopped_while_its_workers_start_ends_cleanly(
    signum: signal.Signals, when: str, tmp_path: Path
) -> None:
    spec = sweep_file(tmp_path)
    out = tmp_path / "out"
    sweep = Command("sweep", str(spec), "--out", str(out), "--workers", "2", "--no-report")
    if when == "planned":
        # The plan is known: the local cluster starts now.
        sweep.wait_for(lambda: any("runs to do" in line for line in sweep.lines), "planned")
    else:
        # Worker processes exist, still importing and connecting.
        sweep.wait_for(lambda: workers(sweep.proc.pid), "started workers")
    os.killpg(sweep.proc.pid, signum)
    code, _, stderr = sweep.ended()
    assert_stopped_cleanly(code, stderr)


def test_a_reproduction_stops_on_sigterm_while_its_workers_start(tmp_path: Path) -> None:
    # Every run of this experiment goes to the local Dask workers.
    args = ["reproduce", "timelost", "--seeds", "1", "--duration", "5", "--workers", "2"]
    reproduction = Command(*args, "--out", str(tmp_path / "out"), "--no-report")
    reproduction.wait_for(
        lambda: any("runs to do" in line for line in reproduction.lines), "planned"
    )
    os.kill(reproduction.proc.pid, signal.SIGTERM)
    code, _, stderr = reproduction.ended()
    last = assert_stopped_cleanly(code, stderr)
    assert f"finished runs kept in {tmp_path / 'out'}" in last


def mapped(pid: int, name: str) -> bool:
    """Whether process ``pid`` has loaded a shared object named ``name``."""
    try:
        return name in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("later", [0.0, 0.1, 0.25])
def test_ctrl_c_while_rtolab_run_starts_is_one_line(later: float, tmp_path: Path) -> None:
    # A bulk transfer without end: the signal comes before the run is over.
    scenario = tmp_path / "endless.toml"
    text = (SCENARIOS / "p2p-bulk.toml").read_text()
    scenario.write_text(re.sub(r"(?m)^bytes = .*$", "", text))
    out = tmp_path / "out"
    run = Command("run", str(scenario), "--duration", "100000s", "--out", str(out), "--no-plot")
    # The extension module loads first among rtolab's imports: from then on
    # a fifth of a second or more of imports, then the scenario, then the run.
    run.wait_for(lambda: mapped(run.proc.pid, "_rtolab"), "imported rtolab")
    time.sleep(later)
    os.killpg(run.proc.pid, signal.SIGINT)
    code, _, stderr = run.ended()
    assert_stopped_cleanly(code, stderr)
    assert len(stderr.strip().splitlines()) == 1, stderr
