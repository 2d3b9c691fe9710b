"""The ACK-holding release schedule (ack-holding spec §3) as Python sees it:
the core's answers agree with an estimator written out here, bad input
names its parameter, and the figures draw."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import TypeVar

import matplotlib.pyplot as plt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtolab.pacing import PacingResult, final_rto_figure, paced_gaps_figure, pacing

Number = TypeVar("Number", float, Fraction)


def estimator(mean: Number, deviation: Number, gaps: list[Number]) -> list[tuple[Number, Number]]:
    """Jacobson's estimator (gains 1/8 and 1/4) after each gap: (mean,
    deviation). Exact on Fractions; on floats, the same operations in the
    same order as the core's."""
    states = []
    for gap in gaps:
        delta = gap - mean
        mean += delta / 8
        deviation += (abs(delta) - deviation) / 4
        states.append((mean, deviation))
    return states


def rto(state: tuple[Number, Number]) -> Number:
    return state[0] + 4 * state[1]


def close(actual: float, expected: float, scale: float, within: float = 1e-9) -> bool:
    return abs(actual - expected) <= within * max(scale, 1e-12)


def exact_answers(result: PacingResult) -> tuple[list[Fraction], list[Fraction | None]]:
    """S(n) for every n < N and RTO_N(n) for the feasible n (else None),
    from the estimator run step by step in exact arithmetic. (In floats it
    loses digits when the deviation is far below the mean: x - mu cancels.)"""
    outage, acks = Fraction(result.outage), result.acks
    start = (Fraction(result.mean), Fraction(result.deviation))
    spans, states, elapsed = [], [start], Fraction(0)
    for _ in range(acks - 1):
        spans.append(elapsed)
        gap = rto(states[-1])
        elapsed += gap
        states += estimator(*states[-1], [gap])
    spans.append(elapsed)
    finals: list[Fraction | None] = []
    for n in range(acks):
        if spans[n] > outage:
            finals.append(None)
            continue
        theta = (outage - spans[n]) / (acks - n)
        finals.append(rto(estimator(*states[n], [theta] * (acks - n))[-1]))
    return spans, finals


def float_schedule(result: PacingResult, n: int) -> list[float]:
    """The gaps of the schedule stretching ``n`` ACKs. Like the core, it
    releases the stretched ACKs on the RTO of a float estimator, as a base
    station tracking the FH would."""
    gaps: list[float] = []
    state = (result.mean, result.deviation)
    for _ in range(n):
        gaps.append(rto(state))
        state = estimator(*state, [gaps[-1]])[0]
    theta = (result.outage - sum(gaps)) / (result.acks - n)
    return gaps + [theta] * (result.acks - n)


def first_late(result: PacingResult, gaps: list[float]) -> int | None:
    """The first ACK (from 1) whose gap exceeds the FH's RTO before it."""
    start = (result.mean, result.deviation)
    before = [start, *estimator(*start, gaps)]
    return next((i + 1 for i, gap in enumerate(gaps) if gap > rto(before[i])), None)


def check_against_estimator(result: PacingResult) -> None:
    outage, acks, mean, deviation = result.outage, result.acks, result.mean, result.deviation
    spans, finals = exact_answers(result)
    assert len(result.final_rto) == len(result.stretch_time) == acks
    for n in range(acks):
        assert close(result.stretch_time[n], float(spans[n]), outage + float(spans[n])), n
        value, exact = result.final_rto[n], finals[n]
        if exact is None:
            # Feasibility is decided on a float; allow a tie within rounding.
            assert value is None or close(float(spans[n]), outage, outage), n
            continue
        assert value is not None or close(float(spans[n]), outage, outage), n
        if value is not None:
            assert close(value, float(exact), outage + float(exact)), (n, value, float(exact))
    feasible = {n: v for n, v in enumerate(result.final_rto) if v is not None}
    assert 0 in feasible
    assert result.step_forward in feasible
    assert all(feasible[result.global_minimum] <= v for v in feasible.values())
    schedules = [(result.schedule, result.global_minimum)]
    schedules.append((result.step_forward_schedule, result.step_forward))
    if result.timeout_free_schedule is not None:
        schedules.append((result.timeout_free_schedule, result.timeout_free_minimum))
    for schedule, n in schedules:
        assert schedule.n == n
        gaps = float_schedule(result, n)
        assert len(schedule.gaps) == acks
        assert all(close(a, b, outage + b, 1e-12) for a, b in zip(schedule.gaps, gaps, strict=True))
        assert close(sum(schedule.gaps), outage, outage)
        after = [rto(s) for s in estimator(mean, deviation, schedule.gaps)]
        assert all(
            close(a, b, outage + b, 1e-12) for a, b in zip(schedule.rto_after, after, strict=True)
        )
        assert schedule.first_timeout == first_late(result, gaps)


def test_the_spec_example_agrees_with_the_estimator() -> None:
    result = pacing(outage=1000, acks=30, mean=1.0, deviation=0.3)
    check_against_estimator(result)
    # The rule stops at n = 0, whose first ACK comes T/N = 33.3 s in, long
    # after the FH's timer (mu0 + 4 sigma0 = 2.2 s) expired.
    assert result.step_forward == 0
    assert result.final_rto[0] < result.final_rto[1]
    assert result.step_forward_schedule.first_timeout == 1
    assert result.timeout_free[0] is False
    # The global minimum is further on, and on time.
    assert result.global_minimum > 0
    assert result.schedule.first_timeout is None
    assert result.timeout_free_minimum == result.global_minimum


def test_a_tiny_deviation_is_still_exact() -> None:
    """A case where a float estimator is off by 1e-9 of S(36) but the
    closed forms are not (found by the property test below)."""
    check_against_estimator(pacing(outage=0.0, acks=37, mean=1.0, deviation=1e-9))


@settings(max_examples=60, deadline=None)
@given(
    outage=st.floats(0, 5000),
    acks=st.integers(1, 40),
    mean=st.floats(0, 5),
    deviation=st.floats(0, 3),
)
def test_binding_agrees_with_a_step_by_step_estimator(
    outage: float, acks: int, mean: float, deviation: float
) -> None:
    check_against_estimator(pacing(outage, acks, mean, deviation))


def test_timeout_free_matches_the_schedule() -> None:
    seen = set()
    for outage, acks in ((77.3, 20), (500, 20), (250, 20), (1000, 30), (5000, 10)):
        result = pacing(outage, acks, 0.5, 0.1)
        check_against_estimator(result)
        for n, free in enumerate(result.timeout_free):
            if free is None:
                break
            assert free == (first_late(result, float_schedule(result, n)) is None), (outage, n)
            seen.add(free)
        # The best on-time schedule is on time, and no on-time n is better.
        on_time = [n for n, free in enumerate(result.timeout_free) if free]
        if on_time:
            best = min(on_time, key=lambda n: (result.final_rto[n], n))
            assert result.timeout_free_minimum == best
            assert result.timeout_free_schedule.first_timeout is None
        else:
            assert result.timeout_free_minimum is None
            assert result.timeout_free_schedule is None
    assert seen == {True, False}


@pytest.mark.parametrize(
    ("arguments", "parameter"),
    [
        ((-1.0, 5, 1.0, 0.2), "outage"),
        ((math.nan, 5, 1.0, 0.2), "outage"),
        ((math.inf, 5, 1.0, 0.2), "outage"),
        ((10.0, 0, 1.0, 0.2), "acks"),
        ((10.0, -3, 1.0, 0.2), "acks"),
        ((10.0, 2**70, 1.0, 0.2), "acks"),
        ((10.0, 2.5, 1.0, 0.2), "acks"),
        ((10.0, 100_001, 1.0, 0.2), "acks"),
        ((10.0, 5, -1e-9, 0.2), "mean"),
        ((10.0, 5, 1.0, math.inf), "deviation"),
        ((10.0, 5, 1.0, -0.5), "deviation"),
    ],
)
def test_invalid_input_names_the_parameter(arguments: tuple, parameter: str) -> None:
    with pytest.raises(ValueError, match=f"^{parameter}: "):
        pacing(*arguments)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def saved_png(fig: plt.Figure, path: Path) -> int:
    fig.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path.stat().st_size


def test_final_rto_figure_draws(tmp_path: Path) -> None:
    result = pacing(outage=1000, acks=30, mean=1.0, deviation=0.3)
    fig = final_rto_figure(result)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any(label.startswith(f"global minimum: n = {result.global_minimum}") for label in labels)
    assert any(label.startswith(f"step-forward: n = {result.step_forward}") for label in labels)
    assert saved_png(fig, tmp_path / "final-rto.png") > 10_000


def test_final_rto_figure_says_when_no_schedule_is_on_time(tmp_path: Path) -> None:
    # Ten ACKs stretched to the full extent span far less than 5000 s.
    result = pacing(outage=5000, acks=10, mean=0.5, deviation=0.1)
    assert result.timeout_free_minimum is None
    labels = final_rto_figure(result).axes[0].get_legend_handles_labels()[1]
    assert "lowest on time: no n keeps the FH from timing out" in labels


@pytest.mark.parametrize("search", ["global-minimum", "step-forward", "timeout-free"])
def test_paced_gaps_figure_draws(tmp_path: Path, search: str) -> None:
    results = {f"{t} s": pacing(outage=t, acks=20, mean=1.0, deviation=0.3) for t in (500, 250)}
    fig = paced_gaps_figure(results, search)  # type: ignore[arg-type]
    gaps_ax, rto_ax = fig.axes
    for ax in (gaps_ax, rto_ax):
        lines = [line for line in ax.lines if "θ =" in line.get_label()]
        assert len(lines) == 2
        assert all(len(line.get_xdata()) == 20 for line in lines)
    assert saved_png(fig, tmp_path / f"gaps-{search}.png") > 10_000
