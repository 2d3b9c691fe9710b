"""The check's cases: each a list of settings (one per distance, station
count...), run with every seed in both simulators, and how its rows are
labelled."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ns2check.setting import Setting, Station

#: The study's mobility (timelost spec §3): from 5 m at t = 0 to 550 m at
#: 150 s, then still until 300 s.
MOVING = Station(((0.0, 5.0), (150.0, 550.0)))
STUDY_PHASES = (
    ("before 100 s", 5.0, 100.0),
    ("100-150 s", 100.0, 150.0),
    ("after 150 s", 150.0, 300.0),
)

#: Distances of `timelost-distance` (m): near the AP to where one frame in
#: twenty gets through under ns-2's shadowing defaults (about 1550 m).
DISTANCES = (10.0, 250.0, 400.0, 550.0, 700.0, 900.0, 1100.0, 1300.0, 1550.0)
STATION_COUNTS = (2, 5, 10, 20)


@dataclass(frozen=True)
class Case:
    name: str
    #: (row label, setting) pairs, seed 1; the driver sets the seed.
    rows: tuple[tuple[str, Setting], ...]


def distance(duration_s: float = 60.0, distances: tuple[float, ...] = DISTANCES) -> Case:
    rows = tuple(
        (
            f"{d:g} m",
            Setting(
                f"distance-{d:g}",
                duration_s,
                (Station(((0.0, d),)),),
                phases=(("transfer", 5.0, duration_s),),
            ),
        )
        for d in distances
    )
    return Case("timelost-distance", rows)


def moving(duration_s: float = 300.0, cc: str = "vegas") -> Case:
    """The study's moving sink with sender `cc` (setting.SOURCES); the
    case is `timelost-moving` for Vegas, `timelost-moving-<cc>` else."""
    phases = tuple((n, a, min(b, duration_s)) for n, a, b in STUDY_PHASES if a < duration_s)
    suffix = "" if cc == "vegas" else f"-{cc}"
    return Case(
        f"timelost-moving{suffix}",
        (
            (
                "moving sink",
                Setting(f"moving{suffix}", duration_s, (MOVING,), cc=cc, phases=phases),
            ),
        ),
    )


def stations(duration_s: float = 25.0, counts: tuple[int, ...] = STATION_COUNTS) -> Case:
    rows = []
    for n in counts:
        # Within a few metres of the AP, on both sides of it.
        spots = tuple(Station(((0.0, 5.0 + (i % 5)),)) for i in range(n))
        rows.append(
            (
                f"{n} stations",
                Setting(
                    f"stations-{n}",
                    duration_s,
                    spots,
                    traffic="cbr",
                    phases=(("saturated", 5.0, duration_s),),
                ),
            )
        )
    return Case("timelost-stations", tuple(rows))


def with_seed(s: Setting, seed: int, timelost: bool) -> Setting:
    return replace(s, seed=seed, timelost=timelost)
