"""Shared fixtures of the Python tests."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"


@pytest.fixture
def p2p_scenario() -> Path:
    """The lossy two-host UDP scenario shipped in scenarios/."""
    return SCENARIOS / "p2p-cbr.toml"


@pytest.fixture
def scenarios_dir() -> Path:
    """The folder of shipped scenario files."""
    return SCENARIOS


@pytest.fixture
def tshark_expert() -> Callable[[Path], str]:
    """A function giving tshark's expert-info summary of a capture."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (the test command installs it)")

    def expert(pcap: Path) -> str:
        done = subprocess.run(
            ["tshark", "-r", str(pcap), "-q", "-z", "expert"],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout + done.stderr

    return expert
