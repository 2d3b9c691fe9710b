"""scripts/lwip-check builds the scenarios it compares correctly: the real
lwIP side has lwIP hosts with the cell's settings and nothing of the
profile, and the simulated side starts its client where asked with
Debian's build and leaves lwIP's timer grids to the profile. (The
comparison itself needs root and the emulator; docs/lwip.md shows its
output.)"""

from __future__ import annotations

import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

import rtolab

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def check() -> ModuleType:
    loader = SourceFileLoader("lwip_check", str(REPO / "scripts" / "lwip-check"))
    spec = spec_from_loader("lwip_check", loader)
    assert spec is not None
    module = module_from_spec(spec)
    # Its dataclasses look their module up while being defined.
    sys.modules["lwip_check"] = module
    loader.exec_module(module)
    return module


def hosts(text: str) -> dict[str, dict]:
    return {h["name"]: h for h in tomllib.loads(text)["host"]}


def test_emulated_side_runs_lwip_at_both_ends_with_the_cells_settings(check: ModuleType) -> None:
    cell = check.Cell(11.2, 1080, "sensing+optimum_rto")
    h = hosts(check.emulated_scenario(cell))
    for name in ("appliance", "enduser"):
        assert h[name]["stack"] == "lwip"
        assert h[name]["lwip"] == {"mss": 1024, "initial_rto": "3.5s"}
        assert "tcp" not in h[name] and "profile" not in h[name]
    links = {link["name"]: link for link in tomllib.loads(check.emulated_scenario(cell))["link"]}
    assert all(end.get("sensing") for end in links["nfc"]["ends"])
    original = hosts(check.emulated_scenario(check.Cell(24.0, 250, "original")))
    assert original["appliance"]["lwip"]["initial_rto"] == "1s"


def test_simulated_side_starts_the_client_where_asked_with_debians_build(
    check: ModuleType, tmp_path: Path
) -> None:
    cell = check.Cell(24.0, 250, "original")
    text = check.aligned_scenario(cell, 0.3)
    h = hosts(text)
    for name in ("appliance", "enduser"):
        tcp = h[name]["tcp"]
        assert (tcp["window_scale"], tcp["recv_buffer"], tcp["window_update_threshold"]) == (
            1,
            65535,
            5840,
        )
        # The profile starts each host's timer grid with its first
        # connection: nothing of the timers is set here.
        assert "rto_timer" not in tcp and "ack" not in tcp
    # The simulator takes it, and the capture's first packet (the SYN) is
    # stamped at the client's start.
    rtolab.run(text, out=tmp_path, traces=False)
    assert check.first_packet_time(tmp_path / "nfc.pcap") == pytest.approx(0.3, abs=1e-6)
    assert check.first_packet_time(tmp_path / "ethernet.pcap") > 0.3
