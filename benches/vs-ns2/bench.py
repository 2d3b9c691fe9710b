"""The timelost study's scenario timed in ns-2 and in rtolab, in the same run.

    python3 benches/vs-ns2/bench.py [--rounds 3] [--seconds 300] [--json]

The scenario is `scripts/ns2-check`'s `timelost-moving` case (the study's
topology and mobility, ns-2.35's 802.11 and TCP defaults, TCP Vegas from
5 s): ns-2 runs the generated Tcl script without a trace file (`ns` from
PATH, Debian's ns-2.35 build), rtolab the same scenario through
`rtolab.run_metrics` (no files). The two alternate, `--rounds` times each,
so that both see the same load; the wall time of each run is its whole
process for ns-2 (start-up included, about 0.05 s) and the call for rtolab.
Prints the median of each, their ratio, rtolab's goodput (a check that the
run moved data; `scripts/ns2-check` compares the two runs' work) and the
machine's load average before and after (`/proc/loadavg`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from ns2check import cases, ns2, setting


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import rtolab

    binary = ns2.ensure_ns()
    (_, s), *_ = cases.moving(args.seconds).rows
    script = setting.tcl(s, trace=False)
    text = setting.toml(s)
    before = load()
    ns_times, ours_times = [], []
    goodput = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "run.tcl").write_text(script, encoding="utf-8")
        for _ in range(args.rounds):
            started = time.perf_counter()
            subprocess.run([binary, "run.tcl"], cwd=tmp, check=True, capture_output=True)
            ns_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            report = rtolab.run_metrics(text)
            ours_times.append(time.perf_counter() - started)
            bulk = next(a for a in report["apps"] if a["name"] == "bulk")
            goodput = float(bulk["bytes_acked"]) * 8 / (args.seconds - s.start_s) / 1e6
    result = {
        "scenario": "timelost-moving",
        "simulated_s": args.seconds,
        "rounds": args.rounds,
        "ns2_version": ns2.version(binary),
        "ns2_median_s": statistics.median(ns_times),
        "rtolab_median_s": statistics.median(ours_times),
        "ratio_rtolab_over_ns2": statistics.median(ours_times) / statistics.median(ns_times),
        "ns2_s": ns_times,
        "rtolab_s": ours_times,
        "rtolab_goodput_mbps": goodput,
        "load_before": before,
        "load_after": load(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
