"""Sweep scaling: the same 40-run sweep on 1 and on 2 local Dask workers.

    python3 benches/sweep/bench.py [--runs 40] [--target-seconds 1.3] [--json]

Each run is the `three-hop` scenario with a simulated duration chosen so
that one run takes about `--target-seconds` of wall time on this machine
(at least one second). The grid varies the bottleneck rate over 4 values,
with as many seeds as make up `--runs`. Both sweeps write their Parquet
results to temporary directories; the script checks that they hold the same
numbers, then prints the wall times and the speed-up (1-worker time over
2-worker time), for the whole command (cluster start included) and for the
runs alone (first submission to last result).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import rtolab

RATES = ["1.5Mbps", "2Mbps", "2.5Mbps", "3Mbps"]


def calibrate(target_s: float) -> int:
    """Simulated seconds of three-hop that take about ``target_s`` of wall time."""
    probe = 500
    samples = []
    for _ in range(3):
        started = time.perf_counter()
        rtolab.run_metrics("three-hop", duration=probe)
        samples.append(time.perf_counter() - started)
    per_sim_second = min(samples) / probe
    return max(1, round(target_s / per_sim_second))


def sweep_file(directory: Path, runs: int, duration_s: int) -> Path:
    seeds = max(1, runs // len(RATES))
    path = directory / "bench-sweep.toml"
    rates = ", ".join(f'"{r}"' for r in RATES)
    path.write_text(
        f'name = "bench"\nscenario = "three-hop"\nseeds = {seeds}\n\n'
        f'[set]\nduration = "{duration_s}s"\n\n[grid]\n"link.core.rate" = [{rates}]\n'
    )
    return path


def timed_sweep(spec: Path, out: Path, workers: int) -> dict[str, float]:
    marks: dict[str, float] = {}
    started = time.perf_counter()
    outcome = rtolab.sweep(
        spec,
        out,
        workers=workers,
        on_start=lambda todo, total: marks.setdefault("first", time.perf_counter()),
        on_result=lambda row, done, todo: marks.__setitem__("last", time.perf_counter()),
    )
    total = time.perf_counter() - started
    assert not outcome.failed and len(outcome.ran) == outcome.total
    walls = rtolab.load_results(out)["wall_s"]
    return {
        "workers": workers,
        "runs": outcome.total,
        "total_s": total,
        "runs_phase_s": marks["last"] - marks["first"],
        "run_mean_s": statistics.mean(walls),
        "run_min_s": min(walls),
    }


def same_numbers(a: Path, b: Path) -> bool:
    left = rtolab.load_results(a).set_index("run_id").sort_index()
    right = rtolab.load_results(b).set_index("run_id").sort_index()
    metrics = [c for c in left.columns if c.startswith(("app.", "link.", "node.", "run."))]
    return left[metrics].equals(right[metrics])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--target-seconds", type=float, default=1.3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    duration = calibrate(args.target_seconds)
    with tempfile.TemporaryDirectory(prefix="rtolab-bench-") as tmp:
        root = Path(tmp)
        spec = sweep_file(root, args.runs, duration)
        one = timed_sweep(spec, root / "one", 1)
        two = timed_sweep(spec, root / "two", 2)
        identical = same_numbers(root / "one", root / "two")
    summary = {
        "cores": os.cpu_count(),
        "simulated_s_per_run": duration,
        "one_worker": one,
        "two_workers": two,
        "speedup_total": one["total_s"] / two["total_s"],
        "speedup_runs_phase": one["runs_phase_s"] / two["runs_phase_s"],
        "identical_results": identical,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"{one['runs']} runs of three-hop, {duration} s simulated each, {os.cpu_count()} cores")
    for row in (one, two):
        print(
            f"  {row['workers']} worker(s): {row['total_s']:.1f} s in all, "
            f"{row['runs_phase_s']:.1f} s of runs; one run {row['run_mean_s']:.2f} s on average "
            f"(fastest {row['run_min_s']:.2f} s)"
        )
    print(
        f"  speed-up: {summary['speedup_total']:.2f}x in all, "
        f"{summary['speedup_runs_phase']:.2f}x for the runs; identical results: {identical}"
    )


if __name__ == "__main__":
    main()
