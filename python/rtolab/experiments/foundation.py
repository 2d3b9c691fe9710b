"""The foundation's experiments: the simulator itself, on the shipped scenarios."""

from __future__ import annotations

from rtolab.experiments import Check, Claim, Experiment, ExperimentRun, register

SEEDS = (1, 2, 3)


def foundation_scenarios() -> dict[str, str]:
    """The shipped scenarios the simulator runs (emulator-only ones do not
    validate) and that no other system claims: a scenario named after a
    registered system (``bridge-fixed``) is that system's to reproduce."""
    from rtolab.api import shipped_scenarios, validate
    from rtolab.errors import ScenarioError
    from rtolab.experiments import systems

    others = [s for s in systems() if s != "foundation"]
    chosen = {}
    for name, text in sorted(shipped_scenarios().items()):
        if any(name == s or name.startswith(f"{s}-") for s in others):
            continue
        try:
            validate(text)
        except ScenarioError:
            continue
        chosen[name] = text
    return chosen


def _shipped_runs() -> list[ExperimentRun]:
    return [
        ExperimentRun(label=f"{name}-seed{seed}", scenario=text, seed=seed)
        for name, text in foundation_scenarios().items()
        for seed in SEEDS
    ]


def _shipped_checks(results: dict) -> list[Check]:
    checks = []
    for label, result in sorted(results.items()):
        moved = sum(
            v
            for k, v in result.flat_metrics().items()
            if k.startswith("link.") and k.endswith("delivered_packets")
        )
        checks.append(
            Check(f"{label} delivers packets", moved > 0, f"{int(moved)} packets delivered")
        )
    return checks


register(
    Experiment(
        system="foundation",
        name="shipped-scenarios",
        title="Every shipped scenario over three seeds",
        description=(
            "Runs each scenario shipped with rtolab that the simulator runs and no "
            "other system claims, with seeds 1, 2 and 3, and keeps its captures and "
            "metrics; every run must move packets."
        ),
        runs=_shipped_runs,
        checks=_shipped_checks,
        # The checks read the runs' reports: traces only for the report's
        # figures of each scenario.
        trace_families=(),
    )
)


def _determinism_runs() -> list[ExperimentRun]:
    return [ExperimentRun(label=f"default-{copy}", scenario="default", seed=7) for copy in "ab"]


def _determinism_checks(results: dict) -> list[Check | Claim]:
    first, second = results.get("default-a"), results.get("default-b")
    if first is None or second is None:
        return [Check("both runs completed", False, "a run failed")]
    checks: list[Check | Claim] = []
    identical = 0
    for a, b in zip(sorted(first.pcaps), sorted(second.pcaps), strict=False):
        same = a.read_bytes() == b.read_bytes()
        identical += same
        checks.append(Check(f"{a.name} identical", same, f"{a.stat().st_size} bytes"))
    same_metrics = first.flat_metrics() == second.flat_metrics()
    checks.append(Check("metrics identical", same_metrics, f"{len(first.flat_metrics())} numbers"))
    # The simulator's own claim (docs/design.md): the study here is rtolab.
    checks.append(
        Claim(
            "A run is a function of its scenario and seed: run twice, it writes the "
            "same bytes (rtolab's design)",
            f"{identical} of {len(first.pcaps)} captures identical; metrics "
            + ("identical" if same_metrics else "differ"),
            identical == len(first.pcaps) == len(second.pcaps) and same_metrics,
        )
    )
    return checks


register(
    Experiment(
        system="foundation",
        name="determinism",
        title="Same scenario and seed give byte-identical results",
        description=(
            "Runs the default scenario twice with seed 7 into different directories "
            "and compares every capture byte for byte and every metric."
        ),
        runs=_determinism_runs,
        checks=_determinism_checks,
    )
)
