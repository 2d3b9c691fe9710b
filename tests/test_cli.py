"""The ``rtolab`` command as a user runs it: exit codes, one-line errors, outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def rtolab(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rtolab", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


def test_run_without_scenario_uses_the_default(tmp_path: Path) -> None:
    done = rtolab("run", "--out", str(tmp_path), "--duration", "1")
    assert done.returncode == 0, done.stderr
    assert "pcaps:" in done.stdout and "traces:" in done.stdout and "plots:" in done.stdout
    assert list(tmp_path.glob("*.pcap"))
    assert list((tmp_path / "plots").glob("*.png"))


def test_duration_takes_the_units_of_scenario_files(tmp_path: Path) -> None:
    for given, seconds in (("1500ms", 1.5), ("2s", 2.0), ("1", 1.0)):
        done = rtolab("run", "p2p-cbr", "--out", str(tmp_path), "--duration", given, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["duration_s"] == seconds
    bad = rtolab("run", "p2p-cbr", "--out", str(tmp_path), "--duration", "5 min")
    assert bad.returncode == 2 and "unknown duration unit" in bad.stderr


def test_run_summary_is_in_human_units_with_whole_names(tmp_path: Path) -> None:
    done = rtolab("run", "--out", str(tmp_path), "--no-plot")
    assert done.returncode == 0, done.stderr
    # The exchange's mean latency, in ms, not raw ns in scientific notation.
    line = next(x for x in done.stdout.splitlines() if "latency_mean_ns" in x)
    assert " ms" in line and "e+" not in line, line
    assert "e+0" not in done.stdout and "…" not in done.stdout
    report = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))
    names = {k for a in report["links"] for d in a["stats"]["directions"] for k in d}
    assert all(name in done.stdout for name in names), names


def test_run_json_is_machine_readable(p2p_scenario: Path, tmp_path: Path) -> None:
    done = rtolab("run", str(p2p_scenario), "--out", str(tmp_path), "--seed", "3", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seed"] == 3
    assert {Path(f).name for f in report["files"]} >= {"a-ab.pcap", "b-ab.pcap", "metrics.json"}
    written = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))
    assert {k: v for k, v in report.items() if k not in ("files", "plots", "wall_s")} == {
        k: v for k, v in written.items() if k != "files"
    }


def test_validate_accepts_a_good_file(p2p_scenario: Path) -> None:
    done = rtolab("validate", str(p2p_scenario), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hosts"] == 2


BAD = {
    "unknown key": ('rate = "10Mbps"', 'rate = "10Mbps"\nspeed = 3', "link[0]"),
    "wrong type": ("queue = 50", 'queue = "fifty"', "link[0].queue"),
    "negative rate": ('rate = "10Mbps"', 'rate = "-5Mbps"', "link[0].rate"),
    "route to a missing host": (
        "[[capture]]",
        '[[route]]\nhost = "ghost"\ndestination = "default"\nvia = "10.0.0.2"\n\n[[capture]]',
        "route[0].host",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("command", ["validate", "run"])
def test_bad_scenario_gives_one_line_naming_the_field(
    case: str, command: str, p2p_scenario: Path, tmp_path: Path
) -> None:
    old, new, field = BAD[case]
    text = p2p_scenario.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    done = rtolab(command, str(bad))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert field in lines[0]
    assert "Traceback" not in done.stderr


def test_missing_scenario_file_exits_2(tmp_path: Path) -> None:
    done = rtolab("validate", str(tmp_path / "nope.toml"))
    assert done.returncode == 2
    assert "no such file" in done.stderr


def test_bad_flag_exits_2() -> None:
    done = rtolab("run", "--seed", "minus-one")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    done = rtolab("--debug", "validate", str(tmp_path / "nope.toml"))
    assert done.returncode != 0
    assert "Traceback" in done.stderr


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_run_a_shipped_scenario_by_name_with_a_report(tmp_path: Path) -> None:
    done = rtolab("run", "p2p-cbr", "--out", str(tmp_path), "--report", "--no-plot")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.html").is_file() and (tmp_path / "metrics.parquet").is_file()
    assert "report:" in done.stdout


SWEEP = """
scenario = "p2p-cbr"
seeds = 2
[set]
duration = "0.5s"
[grid]
"link.ab.loss" = [0.0, 0.05]
"""


def test_sweep_runs_resumes_and_reports(tmp_path: Path) -> None:
    spec = tmp_path / "loss.toml"
    spec.write_text(SWEEP)
    out = tmp_path / "out"
    done = rtolab("sweep", str(spec), "--out", str(out), "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert "4 runs" in done.stdout and "link.ab.loss" in done.stdout
    assert (out / "results.parquet").is_file() and (out / "report.html").is_file()
    again = rtolab("sweep", str(spec), "--out", str(out), "--workers", "0", "--json", "--no-report")
    assert again.returncode == 0, again.stderr
    outcome = json.loads(again.stdout)
    assert outcome["ran"] == [] and len(outcome["skipped"]) == 4


def test_validate_checks_a_sweep_file(tmp_path: Path) -> None:
    spec = tmp_path / "loss.toml"
    spec.write_text(SWEEP)
    done = rtolab("validate", str(spec), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 4


def test_validate_tells_large_files_apart(tmp_path: Path) -> None:
    # Files of a megabyte or more are read by the core first: a scenario is
    # summarised, a sweep (or a bad scenario) then read as before.
    padding = "# " + "x" * 1000 + "\n"
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP + padding * 1100)
    done = rtolab("validate", str(sweep), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 4
    scenario = tmp_path / "scenario.toml"
    text = (Path(__file__).parent.parent / "scenarios" / "p2p-cbr.toml").read_text()
    scenario.write_text(text + padding * 1100)
    done = rtolab("validate", str(scenario), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "p2p-cbr"
    scenario.write_text(text.replace("[[link]]", "[[link]]\nspeed = 1", 1) + padding * 1100)
    assert "link[0]" in one_line_error(rtolab("validate", str(scenario)))


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (SWEEP.replace("0.05]", "7.0]"), 'grid."link.ab.loss"[1]'),
        (SWEEP.replace("link.ab.loss", "link.ba.loss"), "no link named 'ba'"),
        ("workers = 3\n" + SWEEP, "workers: unknown field"),
    ],
)
@pytest.mark.parametrize("command", ["sweep", "validate"])
def test_bad_sweep_gives_one_line_naming_the_entry(
    body: str, needle: str, command: str, tmp_path: Path
) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text(body)
    args = [command, str(spec)] + (["--out", str(tmp_path / "out")] if command == "sweep" else [])
    assert needle in one_line_error(rtolab(*args))
    assert not (tmp_path / "out" / "runs").exists() or not list(
        (tmp_path / "out" / "runs").iterdir()
    )


def test_sweep_flags_are_checked(tmp_path: Path) -> None:
    spec = tmp_path / "loss.toml"
    spec.write_text(SWEEP)
    both = rtolab("sweep", str(spec), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert "not both" in one_line_error(both)
    assert "Traceback" not in rtolab("sweep", str(spec), "--workers", "-1").stderr
    assert rtolab("sweep", str(spec), "--workers", "-1").returncode == 2
    missing = rtolab("sweep", str(tmp_path / "absent.toml"))
    assert "no such file" in one_line_error(missing)


def test_sweep_on_an_unreachable_scheduler_is_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "loss.toml"
    spec.write_text(SWEEP)
    done = rtolab(
        "sweep", str(spec), "--out", str(tmp_path / "o"), "--scheduler", "tcp://127.0.0.1:9"
    )
    # Not a terminal: the plan comes first as a plain progress line, then
    # the error, in one line.
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "sweep loss: 4 runs to do", done.stderr
    assert done.returncode == 2 and len(lines) == 2, done.stderr
    assert lines[1].startswith("error: scheduler") and "Traceback" not in done.stderr


def test_reproduce_lists_runs_and_reports(tmp_path: Path) -> None:
    listing = rtolab("reproduce", "--json")
    assert listing.returncode == 0, listing.stderr
    registered = {(e["system"], e["name"]) for e in json.loads(listing.stdout)}
    assert ("foundation", "shipped-scenarios") in registered
    done = rtolab("reproduce", "foundation/determinism", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert [r["status"] for r in outcome["runs"]] == ["ok", "ok"]
    checks = outcome["checks"]["foundation/determinism"]
    assert checks and all(c["passed"] for c in checks)
    assert (tmp_path / "report.html").is_file() and (tmp_path / "reproduce.json").is_file()


def test_reproduce_prints_progress_lines_when_piped_and_resumes(tmp_path: Path) -> None:
    args = ("reproduce", "foundation/determinism", "--out", str(tmp_path), "--no-report")
    done = rtolab(*args)
    assert done.returncode == 0, done.stderr
    # Not a terminal: plain lines, the last one with every run counted.
    lines = [x for x in done.stderr.splitlines() if x.startswith("reproduce ")]
    assert lines[0].endswith("2 runs to do") and "2/2 runs done" in lines[-1], done.stderr
    markers = sorted(tmp_path.rglob("reproduce-run.json"))
    assert len(markers) == 2
    stamps = [m.stat().st_mtime_ns for m in tmp_path.rglob("*.pcap")]
    # One run's outputs lost (as by Ctrl-C during it): only that one runs again.
    markers[0].unlink()
    again = rtolab(*args, "--json")
    assert again.returncode == 0, again.stderr
    outcome = json.loads(again.stdout)
    assert [r["status"] for r in outcome["runs"]] == ["ok", "ok"]
    assert sum(r["wall_s"] == 0.0 for r in outcome["runs"]) == 1
    assert all(c["passed"] for c in outcome["checks"]["foundation/determinism"])
    assert len(set(stamps) & {m.stat().st_mtime_ns for m in tmp_path.rglob("*.pcap")}) > 0


def test_reproduce_of_an_unknown_system_lists_what_exists() -> None:
    line = one_line_error(rtolab("reproduce", "no-such-system"))
    assert "no-such-system" in line and "foundation" in line and "bridge" in line


def test_report_of_a_run_and_bad_directories(tmp_path: Path) -> None:
    run = rtolab("run", "p2p-cbr", "--out", str(tmp_path / "run"), "--no-plot")
    assert run.returncode == 0, run.stderr
    done = rtolab("report", str(tmp_path / "run"), "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["kind"] == "run" and Path(info["report"]).is_file()
    assert "no such directory" in one_line_error(rtolab("report", str(tmp_path / "absent")))
    (tmp_path / "empty").mkdir()
    assert "not the output" in one_line_error(rtolab("report", str(tmp_path / "empty")))


REPO = Path(__file__).resolve().parent.parent


def _installed_rtolab() -> str:
    """The ``rtolab`` command installed next to this interpreter: what a
    user runs after ``pip install .``."""
    command = Path(sys.executable).parent / "rtolab"
    if not command.is_file():
        pytest.skip(f"no rtolab command installed next to {sys.executable}")
    return str(command)


def _skip_unless_emulation_possible() -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("emulation needs root (network namespaces)")
    if not Path("/dev/net/tun").exists():
        pytest.skip("emulation needs /dev/net/tun")


def _rtolab_namespaces() -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in names.stdout.splitlines() if line.startswith("rtolab-")]


def test_emulate_a_missing_scenario_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [_installed_rtolab(), "emulate", "absent.toml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: scenario: no such file: absent.toml"]


def test_installed_emulate_runs_the_bridge_from_any_directory(tmp_path: Path) -> None:
    _skip_unless_emulation_possible()
    before = _rtolab_namespaces()
    scenario = tmp_path / "bridge.toml"
    scenario.write_text(
        (REPO / "scenarios" / "emu-bridge-fixed.toml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    # From a directory with no build tree: the emulator comes with the install.
    done = subprocess.run(
        [_installed_rtolab(), "emulate", "bridge.toml", "--out", "out", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ended_by"] == "done"
    client = next(a for a in report["apps"] if a["name"] == "client")
    assert client["completed"] and client["exchanges_completed"] == 1
    assert client["bytes_received"] == 1024 and client["bytes_corrupt"] == 0
    # The study's fix at work: the appliance never resends.
    appliance = next(h for h in report["engine"]["hosts"] if h["name"] == "appliance")
    assert appliance["wire"]["retransmissions"] == 0
    assert (tmp_path / "out" / "metrics.json").is_file()
    assert list((tmp_path / "out").glob("*.pcap"))
    assert _rtolab_namespaces() == before


def test_installed_emulate_ends_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    import signal
    import time

    _skip_unless_emulation_possible()
    child = subprocess.Popen(
        [
            _installed_rtolab(),
            "emulate",
            str(REPO / "scenarios" / "emu-bridge-linux.toml"),
            "--keep-running",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    prefix = f"rtolab-{child.pid}-"
    deadline = time.monotonic() + 30
    while not any(n.startswith(prefix) for n in _rtolab_namespaces()):
        assert time.monotonic() < deadline, "the emulator never set up its hosts"
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr
    assert json.loads(stdout)["ended_by"] == "stopped"
    assert not [n for n in _rtolab_namespaces() if n.startswith(prefix)]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--traces", "most"], "traces: must be one of none, summary, full"),
        (["--trace-families", "tcp,Bad-Name"], "trace_families[1]: must be a family's"),
        (["--trace-format", "csv"], "trace_format: expected jsonl or parquet"),
    ],
)
def test_bad_trace_options_name_the_option(args: list[str], field: str, tmp_path: Path) -> None:
    line = one_line_error(rtolab("run", "p2p-cbr", "--out", str(tmp_path), *args))
    assert field in line


def test_trace_levels_choose_the_tables(tmp_path: Path) -> None:
    """A summary leaves out per-packet tables and keeps the binned
    receptions the throughput figure draws; full has both; families choose."""
    for level in ("summary", "full"):
        done = rtolab("run", "p2p-bulk", "--out", str(tmp_path / level), "--traces", level)
        assert done.returncode == 0, done.stderr
    summary = {p.name for p in (tmp_path / "summary" / "traces").iterdir()}
    full = {p.name for p in (tmp_path / "full" / "traces").iterdir()}
    assert "packet_received.parquet" in full - summary
    assert {"packet_received_bins.parquet", "tcp_cwnd.parquet"} <= summary <= full
    assert (tmp_path / "summary" / "plots" / "throughput.png").is_file()
    assert (tmp_path / "summary" / "plots" / "cwnd.png").is_file()
    chosen = tmp_path / "chosen"
    done = rtolab(
        "run", "p2p-bulk", "--out", str(chosen), "--trace-families", "tcp_cwnd,packet_dropped"
    )
    assert done.returncode == 0, done.stderr
    assert {p.name for p in (chosen / "traces").iterdir()} == {
        "tcp_cwnd.parquet",
        "packet_dropped.parquet",
    }
    done = rtolab("run", "p2p-bulk", "--out", str(tmp_path / "none"), "--traces", "none")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "none" / "traces").exists()
    assert not (tmp_path / "none" / "plots").exists()
