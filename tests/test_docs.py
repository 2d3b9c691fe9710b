"""The API reference builds from the docstrings and covers what users touch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_api_reference_builds(tmp_path: Path) -> None:
    pytest.importorskip("pdoc")
    done = subprocess.run(
        [sys.executable, "-W", "error", str(REPO / "docs" / "api" / "build.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    index = (tmp_path / "rtolab.html").read_text(encoding="utf-8")
    for name in ("run", "Result", "Scenario", "sweep", "report", "ScenarioError"):
        assert f'id="{name}"' in index, name
    api = (tmp_path / "rtolab" / "api.html").read_text(encoding="utf-8")
    assert "One row per packet per capture point" in api
    for page in ("sweeps", "plots", "reports", "scenario", "frames", "experiments"):
        assert (tmp_path / "rtolab" / f"{page}.html").is_file(), page


def test_quickstart_commands_exist() -> None:
    """Every ``rtolab`` subcommand the quick start shows is a real command."""
    text = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
    shown = {
        line.split()[1]
        for line in text.splitlines()
        if line.strip().startswith("rtolab ") and len(line.split()) > 1
    }
    assert shown >= {"run", "sweep", "report", "validate", "reproduce"}
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "--help"], capture_output=True, text=True, check=True
    )
    for command in shown:
        assert command in done.stdout, command
