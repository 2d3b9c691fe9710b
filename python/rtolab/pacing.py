"""The release schedule of ACK holding (ack-holding spec §3), computed by the
core, and its figures.

A base station holding ``acks`` ACKs through an outage of ``outage``
seconds releases the first n of them each when the fixed host's (FH's)
retransmission timer is due, which stretches the FH's RTO, and the others
at a constant gap θ, which pulls it back down. :func:`pacing` returns the
spec's two searches' choice of n (the publication's step-forward rule and
the global minimum) with their schedules, and a third that the spec does
not have: the lowest final RTO among the n whose schedule keeps the FH from
timing out, which neither of the spec's searches checks.
:func:`final_rto_figure` and :func:`paced_gaps_figure` draw the spec's
figures of the schedule.

>>> result = pacing(outage=1000, acks=30, mean=1.0, deviation=0.3)
>>> result.step_forward, result.global_minimum, result.timeout_free_minimum
(0, 9, 9)

Durations are seconds. An invalid parameter raises :class:`ValueError`
whose message starts with the parameter's name.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")  # files only: runs happen on headless machines and in workers
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from rtolab import _rtolab
from rtolab.plots import PALETTE


@dataclass(frozen=True)
class Schedule:
    """When each held ACK goes out."""

    #: How many ACKs are released when the FH's timer is due.
    n: int
    #: The constant gap of the other ACKs.
    theta: float
    #: The gap before each ACK, the first from the start of the outage;
    #: they add up to the outage.
    gaps: list[float]
    #: The FH's RTO just after each ACK (its estimator run step by step).
    rto_after: list[float]
    #: The first ACK (numbered from 1) that would come after the FH timed
    #: out, or ``None`` when every ACK is on time.
    first_timeout: int | None

    @classmethod
    def _from(cls, raw: dict[str, Any] | None) -> Schedule | None:
        if raw is None:
            return None
        return cls(
            n=raw["n"],
            theta=raw["theta"],
            gaps=raw["gaps"],
            rto_after=raw["rto_after"],
            first_timeout=raw["first_timeout"],
        )


@dataclass(frozen=True)
class PacingResult:
    """Every search's answer for one outage, and the values they compare."""

    outage: float
    acks: int
    mean: float
    deviation: float
    #: n chosen by the publication's step-forward rule.
    step_forward: int
    #: n with the smallest final RTO.
    global_minimum: int
    #: n with the smallest final RTO among those whose schedule keeps the
    #: FH from timing out; ``None`` when every schedule has a late ACK.
    timeout_free_minimum: int | None
    #: RTO_N(n), the FH's RTO when the mobile is back, for n = 0 … N-1;
    #: ``None`` where n is not feasible (its stretched ACKs outlast the outage).
    final_rto: list[float | None]
    #: S(n), how long the first n stretched ACKs take; ``None`` where it
    #: is too large for a float.
    stretch_time: list[float | None]
    #: Whether stretching n ACKs keeps the FH from timing out (the first
    #: paced gap is no longer than the RTO the stretching left); ``None``
    #: where n is not feasible. The searches do not look at it.
    timeout_free: list[bool | None]
    #: The schedule of the global minimum.
    schedule: Schedule
    #: The schedule of the step-forward rule.
    step_forward_schedule: Schedule
    #: The schedule of ``timeout_free_minimum``, if there is one.
    timeout_free_schedule: Schedule | None

    def chosen(self, search: Search) -> Schedule | None:
        """The schedule ``search`` picks (``None``: no timeout-free one)."""
        return {
            "global-minimum": self.schedule,
            "step-forward": self.step_forward_schedule,
            "timeout-free": self.timeout_free_schedule,
        }[search]


#: How n is chosen: the spec's two searches, or the lowest final RTO among
#: the n that keep the FH from timing out.
Search = Literal["global-minimum", "step-forward", "timeout-free"]


def pacing(outage: float, acks: int, mean: float, deviation: float) -> PacingResult:
    """The release schedule of ``acks`` ACKs held through ``outage``
    seconds when the FH's estimator stands at ``mean`` and ``deviation``
    (its smoothed RTT and RTT deviation, seconds)."""
    raw = json.loads(_rtolab.ack_pacing(outage, acks, mean, deviation))
    schedule = Schedule._from(raw["schedule"])
    step_forward_schedule = Schedule._from(raw["step_forward_schedule"])
    # Both always exist for a valid problem: n = 0 is always feasible.
    assert schedule is not None and step_forward_schedule is not None
    return PacingResult(
        outage=float(outage),
        acks=int(acks),
        mean=float(mean),
        deviation=float(deviation),
        step_forward=raw["step_forward"],
        global_minimum=raw["global_minimum"],
        timeout_free_minimum=raw["timeout_free_minimum"],
        final_rto=raw["final_rto"],
        stretch_time=raw["stretch_time"],
        timeout_free=raw["timeout_free"],
        schedule=schedule,
        step_forward_schedule=step_forward_schedule,
        timeout_free_schedule=Schedule._from(raw["timeout_free_schedule"]),
    )


def _problem(result: PacingResult) -> str:
    return (
        f"T = {result.outage:g} s, N = {result.acks}, "
        rf"$\mu_0$ = {result.mean:g} s, $\sigma_0$ = {result.deviation:g} s"
    )


def final_rto_figure(result: PacingResult) -> Figure:
    """RTO_N against n over the feasible n, with the three searches'
    choices marked. Hollow points are the n whose schedule lets the FH time
    out."""
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    feasible = [(n, v) for n, v in enumerate(result.final_rto) if v is not None]
    ns = [n for n, _ in feasible]
    values = [v for _, v in feasible]
    ax.plot(ns, values, "-", color=PALETTE[0], lw=1, label="$RTO_N(n)$")
    safe = [(n, v) for n, v in feasible if result.timeout_free[n]]
    unsafe = [(n, v) for n, v in feasible if not result.timeout_free[n]]
    if safe:
        ax.plot(*zip(*safe, strict=True), "o", color=PALETTE[0], ms=5, label="FH never times out")
    if unsafe:
        ax.plot(
            *zip(*unsafe, strict=True),
            "o",
            mfc="none",
            color=PALETTE[0],
            ms=5,
            label="FH times out",
        )
    for n, name, marker, colour in (
        (result.step_forward, "step-forward", "v", PALETTE[1]),
        (result.global_minimum, "global minimum", "*", PALETTE[2]),
        (result.timeout_free_minimum, "lowest on time", "s", PALETTE[4]),
    ):
        if n is None:
            ax.plot([], [], " ", label=f"{name}: no n keeps the FH from timing out")
            continue
        value = result.final_rto[n]
        assert value is not None
        ax.plot(
            [n],
            [value],
            marker,
            color=colour,
            # A hollow square around the star when both pick the same n.
            mfc="none" if marker == "s" else colour,
            mew=2,
            ms={"*": 13, "v": 10, "s": 18}[marker],
            zorder=3,
            label=f"{name}: n = {n}, {value:.2f} s",
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("n, ACKs released when the FH's timer is due")
    ax.set_ylabel("FH's RTO at the end of the outage (s)")
    ax.set_title(f"Final RTO against n ({_problem(result)})")
    ax.legend()
    return fig


def _sparse_label(value: float, _position: int) -> str:
    """Minor tick labels of a log axis at 2, 3 and 5 times a power of ten
    only: all of them overlap."""
    leading = round(value / 10 ** math.floor(math.log10(value))) if value > 0 else 0
    return f"{value:g}" if leading in (2, 3, 5) else ""


def paced_gaps_figure(
    results: Mapping[str, PacingResult], search: Search = "global-minimum"
) -> Figure:
    """For each labelled result, the gap before each ACK (left) and the
    FH's RTO after each ACK (right) of the schedule ``search`` picks,
    against the ACK's number. A dotted line marks the last stretched ACK
    and a cross the first ACK the FH would see after timing out."""
    fig, (gaps_ax, rto_ax) = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for i, (label, result) in enumerate(results.items()):
        colour = PALETTE[i % len(PALETTE)]
        schedule = result.chosen(search)
        if schedule is None:
            gaps_ax.plot([], [], " ", label=f"{label}: no schedule keeps the FH from timing out")
            continue
        numbers = range(1, len(schedule.gaps) + 1)
        name = f"{label} (n = {schedule.n}, θ = {schedule.theta:.3g} s)"
        gaps_ax.plot(numbers, schedule.gaps, "o-", color=colour, ms=3, label=name)
        rto_ax.plot(numbers, schedule.rto_after, "o-", color=colour, ms=3, label=name)
        if schedule.n > 0:
            for ax in (gaps_ax, rto_ax):
                ax.axvline(schedule.n, color=colour, ls=":", lw=1)
        if schedule.first_timeout is not None:
            late = schedule.first_timeout
            gaps_ax.plot(
                [late],
                [schedule.gaps[late - 1]],
                "x",
                color=colour,
                ms=10,
                mew=2,
                label=f"{label}: FH times out before ACK {late}",
            )
    fig.suptitle(f"Paced ACKs ({search.replace('-', ' ')})")
    gaps_ax.set_title("Gap before each ACK")
    gaps_ax.set_ylabel("s")
    rto_ax.set_title("FH's RTO after each ACK")
    rto_ax.set_ylabel("s")
    for ax in (gaps_ax, rto_ax):
        ax.set_xlabel("ACK")
        ax.set_yscale("log")  # the stretched gaps grow by 7/4 an ACK
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(_sparse_label))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if results:
            ax.legend()
    return fig


__all__ = [
    "PacingResult",
    "Schedule",
    "Search",
    "final_rto_figure",
    "paced_gaps_figure",
    "pacing",
]
