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


def test_run_json_is_machine_readable(p2p_scenario: Path, tmp_path: Path) -> None:
    done = rtolab("run", str(p2p_scenario), "--out", str(tmp_path), "--seed", "3", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["seed"] == 3
    assert {Path(f).name for f in report["files"]} >= {"a-ab.pcap", "b-ab.pcap", "metrics.json"}


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
