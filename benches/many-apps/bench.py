"""Cost outside the simulator: a run with N apps, timed step by step.

    python3 benches/many-apps/bench.py [--apps 10000] [--duration 0.2] [--json]

The scenario has two hosts on one link and N/2 sink + CBR pairs, each pair
on its own port, so the simulator's share stays small and what grows with
N is the report: the summary the ``rtolab run`` command prints, the metrics
table, ``metrics.parquet`` and the flat metrics a sweep stores. The script
prints the wall time of each step and their sum over the simulation's time;
the budget is five times the simulation's time for 10 000 apps.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

import rtolab
from rtolab import cli


def scenario(apps: int, duration_s: float) -> str:
    """Two hosts, one link and ``apps`` apps (sink + CBR pairs)."""
    lines = [
        'name = "many-apps"',
        "seed = 1",
        f'duration = "{duration_s}s"',
        '[[host]]\nname = "a"',
        '[[host]]\nname = "b"',
        '[[link]]\nname = "ab"\nkind = "point-to-point"',
        'ends = [{ host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" }]',
        'rate = "100Mbps"\ndelay = "5ms"',
    ]
    for i in range(apps // 2):
        port = 1024 + i
        lines.append(f'[[app]]\nkind = "sink"\nname = "sink{i}"\nhost = "b"\nport = {port}')
        lines.append(
            f'[[app]]\nkind = "cbr"\nname = "cbr{i}"\nhost = "a"\n'
            f'destination = "10.0.0.2:{port}"\nsize = 100\nrate = "8kbps"'
        )
    return "\n".join(lines) + "\n"


def timed(step: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = step()
    return time.perf_counter() - started, value


def measure(apps: int, duration_s: float) -> dict[str, float]:
    text = scenario(apps, duration_s)
    times: dict[str, float] = {"apps": apps}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        times["simulation_s"], result = timed(lambda: rtolab.run(text, out=out, traces=False))
        times["metrics_s"], frame = timed(lambda: result.metrics)
        times["parquet_s"], _ = timed(lambda: frame.to_parquet(out / "m.parquet", index=False))
        times["flat_metrics_s"], _ = timed(result.flat_metrics)
        # The summary ``rtolab run`` prints, into a buffer instead of a terminal.
        saved = cli.out_console
        cli.out_console = Console(file=io.StringIO(), highlight=False)
        try:
            times["summary_s"], _ = timed(lambda: cli._print_summary(result.report, 0.0, []))
        finally:
            cli.out_console = saved
    outside = sum(v for k, v in times.items() if k.endswith("_s") and k != "simulation_s")
    times["outside_s"] = outside
    times["outside_over_simulation"] = outside / times["simulation_s"]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--duration", type=float, default=0.2, help="simulated seconds")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()
    for apps in args.apps:
        times = measure(apps, args.duration)
        if args.json:
            print(json.dumps(times))
        else:
            steps = ", ".join(f"{k} {v:.3f}" for k, v in times.items() if k.endswith("_s"))
            ratio = times["outside_over_simulation"]
            print(f"{apps} apps: {steps}; outside/simulation {ratio:.1f}")


if __name__ == "__main__":
    main()
