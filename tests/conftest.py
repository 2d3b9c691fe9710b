"""Shared fixtures of the Python tests."""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"

# A test run started as a background job of a non-interactive shell inherits
# SIGINT ignored, and so would every run the tests start; the tests that
# send SIGINT need it delivered as a terminal delivers Ctrl-C. Python's own
# handler is reset to the default in the children it starts.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def p2p_scenario() -> Path:
    """The lossy two-host UDP scenario shipped in scenarios/."""
    return SCENARIOS / "p2p-cbr.toml"


@pytest.fixture
def bulk_scenario() -> Path:
    """The lossy two-host TCP bulk-transfer scenario shipped in scenarios/."""
    path = SCENARIOS / "p2p-bulk.toml"
    if not path.is_file():
        pytest.skip("scenarios/p2p-bulk.toml is not shipped")
    return path


@pytest.fixture(scope="session")
def bulk_result(tmp_path_factory: pytest.TempPathFactory):
    """One run of the TCP bulk scenario, shared by the tests that only read it."""
    import rtolab

    path = SCENARIOS / "p2p-bulk.toml"
    if not path.is_file():
        pytest.skip("scenarios/p2p-bulk.toml is not shipped")
    return rtolab.run(path, seed=1, out=tmp_path_factory.mktemp("bulk"))


@pytest.fixture(scope="session")
def cbr_result(tmp_path_factory: pytest.TempPathFactory):
    """One run of the UDP scenario, shared by the tests that only read it."""
    import rtolab

    return rtolab.run(SCENARIOS / "p2p-cbr.toml", seed=1, out=tmp_path_factory.mktemp("cbr"))


@pytest.fixture(scope="session")
def loss_delay_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of a loss x delay sweep of a 2 MB transfer in
    3 s, 2 seeds (with 5 % loss it does not finish in time), shared by the
    tests that only read it; its spec is ``sweep.toml`` beside it."""
    import rtolab

    root = tmp_path_factory.mktemp("sweep")
    (root / "sweep.toml").write_text(
        'scenario = "p2p-bulk"\nseeds = 2\n[set]\nduration = "3s"\n[grid]\n'
        '"link.ab.delay" = ["50ms", "5ms"]\n"link.ab.loss" = [0.0, 0.05]\n'
    )
    rtolab.sweep(root / "sweep.toml", root / "out", workers=0)
    return root / "out"


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
