"""The Python API: runs, determinism, validation errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import rtolab


def _app_metrics(result: rtolab.Result, name: str) -> dict:
    app = next(a for a in result.report["apps"] if a["name"] == name)
    return {**app, **app.get("stats", {})}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_run_writes_pcaps_traces_and_metrics(p2p_scenario: Path, tmp_path: Path) -> None:
    result = rtolab.run(p2p_scenario, out=tmp_path)
    names = sorted(p.name for p in result.pcaps)
    assert names == ["a-ab.pcap", "b-ab.pcap"]
    assert result.trace_file is not None and result.trace_file.stat().st_size > 0
    assert (tmp_path / "metrics.json").is_file()
    sink = _app_metrics(result, "sink")
    cbr = _app_metrics(result, "cbr")
    # 2 % random loss: the sink gets most but not all of what the source sent.
    assert 0 < sink["received_packets"] < cbr["sent_packets"]
    assert sink["lost"] == cbr["sent_packets"] - sink["received_packets"]


def test_same_seed_gives_identical_pcaps(p2p_scenario: Path, tmp_path: Path) -> None:
    first = rtolab.run(p2p_scenario, seed=11, out=tmp_path / "one")
    second = rtolab.run(p2p_scenario, seed=11, out=tmp_path / "two")
    for a, b in zip(sorted(first.pcaps), sorted(second.pcaps), strict=True):
        assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "one" / "metrics.json").read_bytes() == (
        tmp_path / "two" / "metrics.json"
    ).read_bytes()


def test_different_seeds_give_different_losses(p2p_scenario: Path, tmp_path: Path) -> None:
    first = rtolab.run(p2p_scenario, seed=1, out=tmp_path / "one")
    second = rtolab.run(p2p_scenario, seed=2, out=tmp_path / "two")
    received = {p.name: _digest(p) for p in first.pcaps if p.name == "b-ab.pcap"}
    other = {p.name: _digest(p) for p in second.pcaps if p.name == "b-ab.pcap"}
    assert received != other
    assert first.seed == 1 and second.seed == 2


def test_scenario_as_toml_text(p2p_scenario: Path) -> None:
    result = rtolab.run(p2p_scenario.read_text(), duration=0.5)
    assert result.out_dir is None
    assert result.report["duration_s"] == pytest.approx(0.5)


def test_every_shipped_scenario_validates(scenarios_dir: Path) -> None:
    files = sorted(scenarios_dir.glob("*.toml"))
    assert files, "no scenarios shipped"
    for f in files:
        summary = rtolab.validate(f)
        assert summary["hosts"] >= 1, f


def test_pcaps_open_in_tshark_without_warnings(
    p2p_scenario: Path, tmp_path: Path, tshark_expert
) -> None:
    result = rtolab.run(p2p_scenario, out=tmp_path)
    for pcap in result.pcaps:
        report = tshark_expert(pcap)
        assert "Malformed" not in report, report
        assert "Warning" not in report, report


def test_default_scenario_runs(tmp_path: Path) -> None:
    result = rtolab.run(rtolab.default_scenario(), out=tmp_path, duration=1.0)
    assert result.pcaps


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda t: t.replace('rate = "10Mbps"', 'rate = "10Mbps"\nbandwidth = 3'), "link[0]"),
        (lambda t: t.replace("queue = 50", 'queue = "fifty"'), "link[0].queue"),
        (lambda t: t.replace('rate = "10Mbps"', 'rate = "-5Mbps"'), "link[0].rate"),
        (lambda t: t.replace("loss = 0.02", "loss = 1.5"), "link[0].loss"),
    ],
)
def test_bad_scenarios_name_the_field(p2p_scenario: Path, change, field: str) -> None:
    text = change(p2p_scenario.read_text())
    with pytest.raises(rtolab.ScenarioError) as info:
        rtolab.validate(text)
    assert info.value.path.startswith(field), info.value
    assert "\n" not in str(info.value)


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(rtolab.ScenarioError, match="no such file"):
        rtolab.run(tmp_path / "absent.toml")
