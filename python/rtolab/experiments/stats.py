"""Statistics over seeds shared by the experiments' tables and reports.

Every aggregate an experiment shows says how many runs it stands on and how
far they spread, so that a mean over two seeds never reads like one over
ten, and a run missing from a group is visible as a smaller n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import pandas as pd


def spread(values: pd.Series) -> dict[str, float]:
    """n, mean, median, standard deviation, min, max and the 95 % CI
    half-width of the mean (normal approximation) of the values that are not
    missing; NaN where too few values define them."""
    x = values.dropna().astype(float)
    n = len(x)
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    return {
        "n": n,
        "mean": float(x.mean()) if n else math.nan,
        "median": float(x.median()) if n else math.nan,
        "sd": sd,
        "min": float(x.min()) if n else math.nan,
        "max": float(x.max()) if n else math.nan,
        "ci95": 1.96 * sd / math.sqrt(n) if n > 1 else math.nan,
    }


def family_half_width(stats: dict[str, float], tests: int) -> float:
    """Half-width of the mean's interval when it is one of ``tests``
    intervals that hold together with 95 % confidence (Bonferroni, with
    :func:`spread`'s normal approximation); ``ci95`` for one test. Judging
    many readings at 95 % each finds some difference by chance alone."""
    if tests <= 1:
        return stats["ci95"]
    n = stats["n"]
    if n < 2:
        return math.nan
    z = NormalDist().inv_cdf(1 - 0.05 / (2 * tests))
    return z * stats["sd"] / math.sqrt(n)


def _number(value: float, digits: int) -> str:
    return f"{round(value, digits):g}"


def mean_with_range(values: pd.Series, digits: int = 3) -> str:
    """The mean of ``values`` and, when they differ, their min..max
    (as the sweep tables write it): ``"1.2 (1.1..1.4)"``; ``"-"`` when there is
    no value."""
    s = spread(values)
    if not s["n"]:
        return "-"
    mean = _number(s["mean"], digits)
    if s["min"] == s["max"]:
        return mean
    return f"{mean} ({_number(s['min'], digits)}..{_number(s['max'], digits)})"


def seed_table(
    frame: pd.DataFrame,
    keys: Sequence[str],
    columns: Sequence[str] | None = None,
    *,
    digits: int = 3,
) -> pd.DataFrame:
    """One row per group of ``keys``: ``n`` (the runs in the group) and, for
    each of ``columns`` (default: every numeric column but the keys and
    ``seed``), the mean over the group's runs with its min..max, as text for
    a report table."""
    if columns is None:
        columns = [
            c for c in frame.select_dtypes("number").columns if c not in keys and c != "seed"
        ]
    rows: list[dict[str, Any]] = []
    for key, group in frame.groupby(list(keys), sort=False):
        values = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(keys, values, strict=True))
        row["n"] = len(group)
        for column in columns:
            row[column] = mean_with_range(group[column], digits)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*keys, "n", *columns])
