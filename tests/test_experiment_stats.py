"""The statistics over seeds behind the experiments' tables: every mean
comes with the number of runs it stands on and their spread."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from rtolab.experiments.stats import family_half_width, mean_with_range, seed_table, spread


def test_spread_of_known_values() -> None:
    s = spread(pd.Series([1.0, 2.0, 3.0, None]))
    assert s["n"] == 3
    assert s["mean"] == 2.0 and s["median"] == 2.0
    assert s["min"] == 1.0 and s["max"] == 3.0
    assert s["sd"] == pytest.approx(1.0)
    assert s["ci95"] == pytest.approx(1.96 / math.sqrt(3))


def test_family_wise_intervals_widen_with_the_number_of_tests() -> None:
    s = spread(pd.Series([1.0, 2.0, 3.0, 4.0]))
    assert family_half_width(s, 1) == s["ci95"]
    # Bonferroni: each of 27 intervals at 1 - 0.05/27, z = 3.113 (two-sided).
    assert family_half_width(s, 27) == pytest.approx(3.1130 * s["sd"] / 2, rel=1e-4)
    assert family_half_width(s, 2) == pytest.approx(2.2414 * s["sd"] / 2, rel=1e-4)
    assert math.isnan(family_half_width(spread(pd.Series([1.0])), 27))


def test_spread_of_one_value_has_no_deviation_and_of_none_no_mean() -> None:
    one = spread(pd.Series([4.0]))
    assert one["n"] == 1 and one["mean"] == 4.0
    assert math.isnan(one["sd"]) and math.isnan(one["ci95"])
    empty = spread(pd.Series([], dtype=float))
    assert empty["n"] == 0 and math.isnan(empty["mean"])


def test_mean_with_range_shows_the_range_only_where_runs_differ() -> None:
    assert mean_with_range(pd.Series([1.0, 2.0, 4.5])) == "2.5 (1..4.5)"
    assert mean_with_range(pd.Series([3, 3, 3])) == "3"
    assert mean_with_range(pd.Series([1 / 3, 2 / 3]), digits=2) == "0.5 (0.33..0.67)"
    assert mean_with_range(pd.Series([None], dtype=float)) == "-"


def test_seed_table_counts_runs_per_group_so_a_missing_seed_shows() -> None:
    # Configuration "b" lost its seed 2: its mean stands on one run, and
    # the table says so instead of averaging silently.
    frame = pd.DataFrame(
        {
            "config": ["a", "a", "b"],
            "seed": [1, 2, 1],
            "latency_s": [1.0, 3.0, 2.0],
            "retx": [0, 2, 1],
            "label": ["x", "y", "z"],
        }
    )
    table = seed_table(frame, ["config"])
    assert list(table.columns) == ["config", "n", "latency_s", "retx"]
    rows = table.set_index("config")
    assert rows.loc["a", "n"] == 2 and rows.loc["b", "n"] == 1
    assert rows.loc["a", "latency_s"] == "2 (1..3)"
    assert rows.loc["b", "latency_s"] == "2"
    assert rows.loc["a", "retx"] == "1 (0..2)"


def test_seed_table_keeps_the_groups_in_first_seen_order() -> None:
    frame = pd.DataFrame({"k": [3, 1, 3, 2], "v": [1.0, 2.0, 3.0, 4.0]})
    assert seed_table(frame, ["k"], ["v"])["k"].tolist() == [3, 1, 2]
