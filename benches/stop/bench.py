"""How soon `rtolab run` stops on SIGINT or SIGTERM.

    python3 benches/stop/bench.py [--rounds 10] [--json]

Each round starts `rtolab run` on an endless bulk transfer (1 Mbit/s,
100 000 simulated seconds, one capture), waits until its capture file
exists and another 0.3 s, sends the signal, and records two times from the
signal: until `metrics.json` was last written (the run's outputs flushed
and closed) and until the process exited. Prints the median and the
largest of each, per signal, with the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCENARIO = """
name = "stop"
duration = "100000s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "1Mbps"
delay = "10ms"
[[capture]]
host = "a"
link = "ab"
file = "a.pcap"
[[app]]
kind = "tcp-sink"
host = "b"
port = 5001
[[app]]
kind = "tcp-bulk"
host = "a"
peer = "10.0.0.2:5001"
"""


def one_stop(directory: Path, signum: signal.Signals) -> dict[str, float]:
    scenario = directory / "stop.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    out = directory / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtolab", "run", str(scenario), "--out", str(out), "--no-plot"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (out / "a.pcap").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    sent, sent_wall = time.monotonic(), time.time()
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    exited = time.monotonic() - sent
    if proc.returncode != 130:
        raise SystemExit(f"exit {proc.returncode}: {stderr}")
    closed = (out / "metrics.json").stat().st_mtime - sent_wall
    return {"closed_s": closed, "exited_s": exited}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="One JSON line per signal.")
    args = parser.parse_args()
    for signum in (signal.SIGINT, signal.SIGTERM):
        rounds = []
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                rounds.append(one_stop(Path(tmp), signum))
        row = {
            "signal": signum.name,
            "rounds": args.rounds,
            "load_1min": os.getloadavg()[0],
        }
        for key in ("closed_s", "exited_s"):
            values = [r[key] for r in rounds]
            row[f"{key}_median"] = round(statistics.median(values), 4)
            row[f"{key}_max"] = round(max(values), 4)
        print(json.dumps(row) if args.json else row)


if __name__ == "__main__":
    main()
