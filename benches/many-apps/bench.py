"""Cost outside the simulator: a run with N apps, timed step by step.

    python3 benches/many-apps/bench.py [--apps 1000 10000] [--size-mb 50]
                                       [--duration 0.2] [--cli] [--json]

The scenario has sink + CBR pairs, each pair on its own port (60 000 pairs
per pair of hosts and their link, so that ports suffice), so the simulator's
share stays small and what grows with N is the report: the summary the
``rtolab run`` command prints, the metrics table, ``metrics.parquet`` and
the flat metrics a sweep stores. The script prints the wall time of each
step, their sum over the simulation's time (the budget is five times the
simulation's time for 10 000 apps) and the peak resident memory of the
process that ran them, one process per size. ``--size-mb`` adds a scenario
of about that many megabytes; ``--cli`` times the whole ``rtolab run``
command on the same scenario files instead, with and without plots.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Sink + CBR pairs per pair of hosts: one port each, below 65 536.
PAIRS_PER_LINK = 60_000


def scenario(apps: int, duration_s: float) -> str:
    """``apps`` apps (sink + CBR pairs) on as many host pairs and links as
    their ports need; the first pair of hosts is ``a`` and ``b``."""
    pairs = apps // 2
    links = max(1, -(-pairs // PAIRS_PER_LINK))
    lines = ['name = "many-apps"', "seed = 1", f'duration = "{duration_s}s"']
    for g in range(links):
        s = str(g) if g else ""
        lines += [
            f'[[host]]\nname = "a{s}"',
            f'[[host]]\nname = "b{s}"',
            f'[[link]]\nname = "ab{s}"\nkind = "point-to-point"',
            f'ends = [{{ host = "a{s}", address = "10.{g}.0.1/24" }}, '
            f'{{ host = "b{s}", address = "10.{g}.0.2/24" }}]',
            'rate = "100Mbps"\ndelay = "5ms"',
        ]
    for i in range(pairs):
        g, port = divmod(i, PAIRS_PER_LINK)
        s = str(g) if g else ""
        port += 1024
        lines.append(f'[[app]]\nkind = "sink"\nname = "sink{i}"\nhost = "b{s}"\nport = {port}')
        lines.append(
            f'[[app]]\nkind = "cbr"\nname = "cbr{i}"\nhost = "a{s}"\n'
            f'destination = "10.{g}.0.2:{port}"\nsize = 100\nrate = "8kbps"'
        )
    return "\n".join(lines) + "\n"


def apps_for_size(megabytes: float, duration_s: float) -> int:
    """The number of apps (even) whose scenario is about ``megabytes`` MB."""
    apps = 10_000
    for _ in range(2):  # the second pass accounts for the longer names
        per_app = len(scenario(apps, duration_s)) / apps
        apps = 2 * round(megabytes * 1e6 / per_app / 2)
    return apps


def timed(step: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = step()
    return time.perf_counter() - started, value


def measure(path: Path) -> dict[str, float]:
    """The steps of a run of the scenario in ``path``, in this process."""
    # Imported first, whatever rtolab imports on first use: starting Python
    # and importing are constant costs, which --cli measures.
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    from rich.console import Console

    import rtolab
    from rtolab import cli

    times: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        times["simulation_s"], result = timed(lambda: rtolab.run(path, out=out, traces=False))
        times["apps"] = len(result.report["apps"])
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


def in_child(argv: list[str]) -> tuple[float, int, str]:
    """Runs ``argv``; its wall time, its peak resident memory in bytes and
    its standard output."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        # wait4 rather than wait: it gives this child's own resource usage.
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {err.read().strip()}")
        # ru_maxrss is in kilobytes on Linux.
        return wall, usage.ru_maxrss * 1024, out.read()


def measure_api(path: Path) -> dict[str, float]:
    _, peak, stdout = in_child([sys.executable, __file__, "--child", str(path)])
    times: dict[str, float] = json.loads(stdout)
    times["peak_gb"] = peak / 1e9
    return times


def measure_cli(path: Path, apps: int) -> list[dict[str, float]]:
    rows = []
    for flags in ([], ["--no-plot"]):
        with tempfile.TemporaryDirectory() as tmp:
            argv = [sys.executable, "-m", "rtolab", "run", str(path), "--out", tmp, "--json"]
            wall, peak, stdout = in_child(argv + flags)
            report = json.loads(stdout)
        rows.append(
            {
                "apps": apps,
                "plots": not flags,
                "command_s": wall,
                "run_s": report["wall_s"],
                "peak_gb": peak / 1e9,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--size-mb", type=float, nargs="*", default=[], help="scenario sizes")
    parser.add_argument("--duration", type=float, default=0.2, help="simulated seconds")
    parser.add_argument("--cli", action="store_true", help="time the whole rtolab run command")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    sizes = [*args.apps, *(apps_for_size(mb, args.duration) for mb in args.size_mb)]
    with tempfile.TemporaryDirectory() as tmp:
        for apps in sizes:
            path = Path(tmp) / f"apps-{apps}.toml"
            path.write_text(scenario(apps, args.duration), encoding="utf-8")
            megabytes = path.stat().st_size / 1e6
            rows = measure_cli(path, apps) if args.cli else [measure_api(path)]
            for row in rows:
                row["scenario_mb"] = megabytes
                if args.json:
                    print(json.dumps(row), flush=True)
                elif args.cli:
                    plots = "with plots" if row["plots"] else "--no-plot"
                    print(
                        f"{apps} apps ({megabytes:.1f} MB), {plots}: command "
                        f"{row['command_s']:.2f} s, run {row['run_s']:.2f} s, "
                        f"peak {row['peak_gb']:.2f} GB",
                        flush=True,
                    )
                else:
                    steps = ", ".join(f"{k} {v:.3f}" for k, v in row.items() if k.endswith("_s"))
                    ratio = row["outside_over_simulation"]
                    print(
                        f"{apps} apps ({megabytes:.1f} MB): {steps}; outside/simulation "
                        f"{ratio:.1f}; peak {row['peak_gb']:.2f} GB",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
