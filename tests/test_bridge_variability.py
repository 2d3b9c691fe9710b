"""Algorithm 1's variability term: the long session with power-control
traffic and Wi-Fi jitter (``rtolab reproduce bridge/variability``)."""

from __future__ import annotations

from pathlib import Path

import rtolab
from rtolab.experiments import bridge_variability as v


def test_every_run_is_a_valid_scenario_with_its_conditions_fields() -> None:
    cells = v.variability_cells(reduced=False)
    assert len(cells) == len(v.CONDITIONS) * len(v.ESTIMATORS) * len(v.SEEDS)
    for cell in v.variability_cells(reduced=True):
        text = cell.scenario()
        assert rtolab.validate(text)["hosts"] == 3
        assert ("ratio = false" in text) == (cell.estimator == "algorithm1-no-r")
        assert ("window = 8" in text) == (cell.estimator == "algorithm1-window-8")
        assert ('policy = "bridge"' in text) == cell.estimator.startswith("algorithm1")
        assert ("power_control" in text) == (cell.condition != "quiet")
        assert ("jitter" in text) == ("Wi-Fi" in cell.condition)


def test_power_control_and_wifi_jitter_move_r_above_one(tmp_path: Path) -> None:
    rows = {}
    for condition in ("quiet", "power control + Wi-Fi 300 ms"):
        cell = v.VariabilityCell(condition, "algorithm1", 1)
        result = rtolab.run(
            cell.scenario(), seed=1, out=tmp_path / cell.label, trace_families=["tcp_rtt_sample"]
        )
        rows[condition] = v.variability_row(result, cell)
    quiet, busy = rows["quiet"], rows["power control + Wi-Fi 300 ms"]
    assert quiet["r_samples"] > 50 and busy["r_samples"] > 50
    # On the quiet link only a recipe's later segments, queued behind the
    # earlier ones of their flight, cross slower than their theory.
    assert quiet["power_control_slots"] == 0 < busy["power_control_slots"]
    assert busy["r_above_1"] > 2 * quiet["r_above_1"]
    assert busy["session_s"] > quiet["session_s"]
