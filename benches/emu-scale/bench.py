"""The emulator at scale: timing error and throughput over long transfers.

    sudo python3 benches/emu-scale/bench.py [--links p2p nfc fading half-duplex]
        [--rounds 3] [--emu PATH] [--no-realtime] [--out DIR] [--json]

For each link kind, one Linux host sends to another Linux host across the
emulated link, long enough for at least 10 000 datagrams to be written to
the TUN devices (data segments and ACKs together): a bulk transfer, or on
the NFC link many short exchanges. Each round
is one ``rtolab-emu emulate --json`` process; the script reads its report
and its resource usage and prints, per link and round:

* ``writes``: datagrams written to TUN devices (the timing samples);
* the lateness of those writes against the model's delivery times
  (p50, p99, max, in ms) and the writes that failed;
* goodput of the transfer (payload bytes over the time from the app's
  start to its end) next to the link's nominal rate;
* the emulator's CPU time (user + system) per datagram written, in µs;
* the machine's load average when the round started.

``--no-realtime`` runs the engine thread without ``SCHED_FIFO``, to show
how much of the error real-time scheduling removes. The 802.11 link is not
here: the emulator has no shared medium (``docs/emulator.md``).

Needs root (namespaces and TUN devices) and an ``rtolab-emu`` binary
(``--emu``, ``$RTOLAB_EMU``, or ``target/{wheel,release,debug}``).
Results: ``docs/performance.md``, "The emulator at scale".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# The links, each with a transfer sized to pass 10 000 TUN writes: about
# one write per data segment and one per ACK (Linux acknowledges every
# second full segment, so roughly 1.5 writes per 1448-byte segment).
LINKS: dict[str, dict[str, Any]] = {
    "p2p": {
        "table": (
            'kind = "point-to-point"\nrate = "20Mbps"\ndelay = "2ms"\nqueue = 100\nloss = 0.001'
        ),
        "rate_bps": 20_000_000,
        "bytes": 12_000_000,
        "duration_s": 60,
    },
    "half-duplex": {
        "table": 'kind = "half-duplex"\nrate = "10Mbps"\ndelay = "1ms"\nqueue = 100',
        "rate_bps": 10_000_000,
        "bytes": 12_000_000,
        "duration_s": 60,
    },
    "fading": {
        "table": (
            'kind = "fading"\nrate = "5Mbps"\ndelay = "10ms"\nqueue = 100\n'
            'fading = { mean_up = "3s", mean_down = "300ms" }'
        ),
        "rate_bps": 5_000_000,
        "bytes": 12_000_000,
        "duration_s": 120,
    },
    # 24 kbit/s NFC moves 26 bytes per 10 ms slot: a bulk transfer of
    # full-sized segments would need hours for 10 000 writes, so this link
    # runs the bridge's workload instead, short request/response exchanges
    # (one connection each: handshake, request, response, close), about nine
    # writes each.
    "nfc": {
        "table": 'kind = "nfc"\nrate = "24kbps"',
        # Channel sensing at both ends (the bridge study's fix): without it
        # the busy MCU drops a third of the packets and each exchange
        # takes about 1.5 s.
        "sensing": True,
        "rate_bps": 24_000,
        "exchanges": 1100,
        "duration_s": 1800,
    },
}


def scenario(link: str) -> str:
    """An emulation scenario: two Linux hosts, the link, a server and a client."""
    spec = LINKS[link]
    if "exchanges" in spec:
        apps = [
            'kind = "exchange-server"\nname = "server"\nhost = "server"\nport = 5001',
            'kind = "exchange"\nname = "client"\nhost = "client"\npeer = "10.78.0.2:5001"',
            f"request = 16\nresponse = 16\ncount = {spec['exchanges']}\n"
            'gap = "0s"\nstart = "100ms"',
        ]
    else:
        apps = [
            'kind = "tcp-sink"\nname = "server"\nhost = "server"\nport = 5001',
            'kind = "tcp-bulk"\nname = "client"\nhost = "client"\npeer = "10.78.0.2:5001"',
            f'bytes = {spec["bytes"]}\nstart = "100ms"',
        ]
    sensing = ", sensing = true" if spec.get("sensing") else ""
    return "\n".join(
        [
            f'name = "emu-scale-{link}"',
            "seed = 1",
            f'duration = "{spec["duration_s"]}s"',
            '[[host]]\nname = "client"\nstack = "linux"',
            '[[host]]\nname = "server"\nstack = "linux"',
            "[[link]]",
            'name = "link"',
            spec["table"],
            f'ends = [ {{ host = "client", address = "10.78.0.1/24"{sensing} }},',
            f'         {{ host = "server", address = "10.78.0.2/24"{sensing} }} ]',
            "[[app]]",
            apps[0],
            "[[app]]",
            apps[1],
            apps[2],
            "",
        ]
    )


def find_emu(given: str | None) -> str:
    """The emulator binary: the flag, $RTOLAB_EMU, or a build in target/."""
    for candidate in (given, os.environ.get("RTOLAB_EMU")):
        if candidate:
            return candidate
    for profile in ("wheel", "release", "debug"):
        path = REPO / "target" / profile / "rtolab-emu"
        if path.exists():
            return str(path)
    sys.exit("no rtolab-emu: build it (cargo build --profile wheel -p rtolab-emu) or pass --emu")


def one_round(emu: str, link: str, out: Path, realtime: bool) -> dict[str, Any]:
    """Runs one emulation and returns its figures."""
    out.mkdir(parents=True, exist_ok=True)
    scenario_file = out / "scenario.toml"
    scenario_file.write_text(scenario(link))
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [emu, "emulate", str(scenario_file), "--json", "--out", str(out / "run")]
    if not realtime:
        command.append("--no-realtime")
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{link}: rtolab-emu exited {done.returncode}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    timing = report["timing"]
    client = next(app for app in report["apps"] if app["name"] == "client")
    return {
        "link": link,
        "realtime": report["realtime"],
        "load": load,
        "writes": timing["samples"],
        "write_errors": timing["write_errors"],
        "p50_ms": timing["p50_ms"],
        "p99_ms": timing["p99_ms"],
        "max_ms": timing["max_ms"],
        "ended_by": report["ended_by"],
        "wall_s": wall,
        "links_ran_s": report["duration_s"],
        "cpu_s": cpu_s,
        "cpu_us_per_write": 1e6 * cpu_s / max(timing["samples"], 1),
        "client": client,
        "goodput_bps": goodput(client, report["duration_s"]),
        "rate_bps": LINKS[link]["rate_bps"],
    }


def goodput(client: dict[str, Any], links_ran_s: float) -> float | None:
    """Payload bit/s the client moved (both directions), over the time from
    its connect to its end (a bulk sender's completion time) or, where the
    app does not report one, over the time the links ran."""
    seconds = (client.get("completion_time_ms") or 0) / 1e3 or links_ran_s
    moved = client.get("bytes_sent", 0) + client.get("bytes_received", 0)
    return 8 * moved / seconds if seconds > 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", nargs="+", default=list(LINKS), choices=list(LINKS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--emu")
    parser.add_argument("--no-realtime", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", action="store_true", help="one JSON object per round")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the emulator needs root (namespaces and TUN devices)")
    emu = find_emu(args.emu)
    out = args.out or Path(tempfile.mkdtemp(prefix="emu-scale-"))
    rows = []
    for link in args.links:
        for r in range(args.rounds):
            row = one_round(emu, link, out / f"{link}-{r}", not args.no_realtime)
            rows.append(row)
            if args.json:
                print(json.dumps({k: v for k, v in row.items() if k != "client"}), flush=True)
            else:
                print(
                    f"{link:12} round {r}: {row['writes']} writes, p50 {row['p50_ms']:.3f} ms, "
                    f"p99 {row['p99_ms']:.3f} ms, max {row['max_ms']:.3f} ms, "
                    f"{row['write_errors']} failed; goodput "
                    f"{(row['goodput_bps'] or 0) / 1e3:.1f} kbit/s of "
                    f"{row['rate_bps'] / 1e3:.0f}; {row['cpu_us_per_write']:.1f} µs CPU/write; "
                    f"load {row['load']:.2f}; ended by {row['ended_by']}",
                    flush=True,
                )
    if not args.json:
        print("\nmedians over rounds:")
        for link in args.links:
            mine = [row for row in rows if row["link"] == link]
            writes = statistics.median(r["writes"] for r in mine)
            print(
                f"{link:12} n={len(mine)}  writes {writes:.0f}"
                f"  p50 {statistics.median(r['p50_ms'] for r in mine):.3f}"
                f"  p99 {statistics.median(r['p99_ms'] for r in mine):.3f}"
                f"  max {statistics.median(r['max_ms'] for r in mine):.3f} ms"
                f"  CPU {statistics.median(r['cpu_us_per_write'] for r in mine):.1f} µs/write"
            )


if __name__ == "__main__":
    main()
