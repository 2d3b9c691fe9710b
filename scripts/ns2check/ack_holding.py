#!/usr/bin/env python3
"""TCP Reno through a radio link that goes down: ns-2.35 against rtolab.

The ack-holding study's baseline (docs/spec/ack-holding.md §4): fixed host
-- 10 Mbit/s, 40 ms wired link -- base station -- 2 Mbit/s, 10 ms radio
link -- mobile, a Reno bulk transfer for 40 s; the radio link goes down for
10 s once (case A, from 10 s) or twice (case B, from 8 s and 24 s), with
ns-2's ``rtmodel-at``. Both simulators run with ns-2.35's defaults: 1000-byte
packets, a window of 20 packets, an initial window of 2, an initial RTO of
3 s, a minimum RTO of 200 ms and a maximum of 60 s, an ACK per packet, no
timestamps, and the behaviours of ns-2's Reno agent that rtolab's Reno takes
as settings (``setting.NS2_RENO``, shared with the 802.11 cases): one segment
timed at a time, limited transmit, the timer restarted at a fast retransmit,
Reno's careful variant after a timeout, and ns-2's window growth: one packet
per ACK in slow start however much the ACK covers, 1/cwnd per ACK in
congestion avoidance. Each seed shifts the transfer's start by a draw in
[0, 100 ms), the same in both.

For each run: packets delivered to the mobile (distinct), retransmission
timeouts at the fixed host, the RTO backoff multiplier reached, the fixed
host's idle time after the link returns (until its first packet), and the
time from the link's return until the mobile gets 90 % of its pre-outage
rate over one second.

    scripts/ns2check/ack_holding.py --out DIR [--seeds N]

``run(out, seeds)`` returns the comparison as a Markdown table and writes
``runs.csv`` in ``out``. ns-2 comes from Debian's ``ns2`` package, installed
with apt when ``ns`` is missing.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

# Run as a script or loaded from its file, the ns2check package is beside it.
_SCRIPTS = str(Path(__file__).resolve().parent.parent)
if _SCRIPTS not in sys.path:
    sys.path.insert(0, _SCRIPTS)
from ns2check.setting import NS2_RENO  # noqa: E402

#: Outages of each case, (start, duration) in seconds (ack-holding spec §4).
CASES: dict[str, list[tuple[float, float]]] = {
    "A": [(10.0, 10.0)],
    "B": [(8.0, 10.0), (24.0, 10.0)],
}
DURATION_S = 40.0
PACKET = 1000
WINDOW = 20
#: The mobile's receive buffer in rtolab: well above the window, which the
#: sender's congestion control caps at `WINDOW` packets as ns-2's `window_`
#: does, and with no window update besides each segment's ACK (ns-2's
#: TCPSink advertises no window). A buffer of exactly the window made the
#: mobile's ACK of each segment offer one segment less until the window
#: update that followed it 0.16 ms later (a 40-byte packet at 2 Mbit/s),
#: and that update, not the ACK, released the fixed host's next segment:
#: 0.16 ms more per round trip, 0.15 % fewer packets.
RECV_BUFFER = 65536
#: How often the ns-2 script reads the sender's backoff, seconds.
POLL_S = 0.01

METRICS = (
    "packets_delivered",
    "timeouts",
    "backoff_max",
    "idle_after_up_s",
    "time_to_full_rate_s",
)


def ensure_ns() -> str:
    """The ``ns`` binary, installed from Debian's ``ns2`` package if missing."""
    found = shutil.which("ns")
    if found:
        return found
    env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run([*sudo, "apt-get", "update", "-q"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-q", "ns2"], check=True, env=env)
    found = shutil.which("ns")
    if not found:
        raise RuntimeError("ns2 installed but no `ns` on PATH")
    return found


def start_offset(seed: int) -> float:
    """The transfer's start for `seed`, seconds: the same in both simulators."""
    return round(random.Random(seed).uniform(0.0, 0.1), 6)


def ns2_script(case: str, start: float, trace_dir: Path) -> str:
    """The Tcl of one ns-2 run, writing its traces to `trace_dir`."""
    outages = "\n".join(
        f"$ns rtmodel-at {s} down $bs $mh\n$ns rtmodel-at {s + d} up $bs $mh"
        for s, d in CASES[case]
    )
    return f"""set ns [new Simulator]
set fh [$ns node]
set bs [$ns node]
set mh [$ns node]
$ns duplex-link $fh $bs 10Mb 40ms DropTail
$ns duplex-link $bs $mh 2Mb 10ms DropTail
{outages}
set radio [open {trace_dir / "radio.tr"} w]
$ns trace-queue $bs $mh $radio
set wired [open {trace_dir / "wired.tr"} w]
$ns trace-queue $fh $bs $wired
set tcp [new Agent/TCP/Reno]
$tcp set window_ {WINDOW}
$tcp set packetSize_ {PACKET}
$ns attach-agent $fh $tcp
set sink [new Agent/TCPSink]
$ns attach-agent $mh $sink
$ns connect $tcp $sink
set vars [open {trace_dir / "vars.tr"} w]
$tcp attach $vars
$tcp trace nrexmit_
proc poll {{}} {{
    global ns tcp vars
    puts $vars "[$ns now] backoff_ [$tcp set backoff_]"
    $ns at [expr [$ns now] + {POLL_S}] poll
}}
set ftp [new Application/FTP]
$ftp attach-agent $tcp
$ns at {start} "$ftp start"
$ns at 0.0 poll
$ns at {DURATION_S} "finish"
proc finish {{}} {{
    global ns radio wired vars
    $ns flush-trace
    close $radio
    close $wired
    close $vars
    exit 0
}}
$ns run
"""


def _trace(path: Path) -> pd.DataFrame:
    """An ns-2 queue trace: event, time, from, to, type, size, seqno."""
    rows = []
    with path.open() as f:
        for line in f:
            p = line.split()
            if len(p) >= 11:
                rows.append((p[0], float(p[1]), int(p[2]), int(p[3]), p[4], int(p[5]), int(p[10])))
    return pd.DataFrame(rows, columns=["event", "t", "src", "dst", "type", "size", "seq"])


def full_rate_time(delivered: pd.DataFrame, outages: list[tuple[float, float]]) -> float | None:
    """Seconds from the first outage's end until the mobile receives, over
    one second, at least 90 % of what it received per second in the 5 s
    before 0.5 s ahead of the first outage (as the reproduction measures
    it); ``None`` if it never does. `delivered` has a time ``t`` (s) and
    ``bytes`` per delivery."""
    start, duration = outages[0]
    up = start + duration
    bins = (delivered["t"] // 0.1).astype("int64")
    per_bin = delivered.groupby(bins)["bytes"].sum()
    before = per_bin[(per_bin.index >= (start - 5.5) * 10) & (per_bin.index < (start - 0.5) * 10)]
    full = before.sum() / 5.0
    if full <= 0:
        return None
    n = int(DURATION_S * 10)
    counts = np.zeros(n, dtype=np.int64)
    inside = per_bin[(per_bin.index >= 0) & (per_bin.index < n)]
    counts[inside.index.to_numpy()] = inside.to_numpy(dtype=np.int64)
    total = np.concatenate(([0], np.cumsum(counts)))
    first = round(up * 10)
    windows = total[first + 10 :] - total[first:-10]
    reached = np.flatnonzero(windows >= 0.9 * full)
    if not len(reached):
        return None
    return max(0.0, (first + int(reached[0]) + 10) / 10 - up)


def run_ns2(case: str, seed: int, work: Path) -> dict[str, float | None]:
    """One ns-2 run's measures."""
    ns = ensure_ns()
    work.mkdir(parents=True, exist_ok=True)
    script = work / "run.tcl"
    script.write_text(ns2_script(case, start_offset(seed), work))
    subprocess.run([ns, str(script)], check=True, capture_output=True, timeout=300)
    radio = _trace(work / "radio.tr")
    got = radio[(radio["event"] == "r") & (radio["type"] == "tcp")]
    wired = _trace(work / "wired.tr")
    sent = wired[(wired["event"] == "+") & (wired["type"] == "tcp")]
    backoff = 1
    timeouts = 0
    for line in (work / "vars.tr").read_text().splitlines():
        p = line.split()
        if len(p) >= 3 and p[1] == "backoff_":
            backoff = max(backoff, int(p[2]))
        elif "nrexmit_" in p:
            timeouts = max(timeouts, int(p[-1]))
    first = {}
    for s in got.itertuples():
        first.setdefault(s.seq, s.t)
    delivered = pd.DataFrame({"t": list(first.values()), "bytes": PACKET})
    return {
        "packets_delivered": len(first),
        "timeouts": timeouts,
        "backoff_max": backoff,
        "idle_after_up_s": _idle_after(sent["t"], CASES[case]),
        "time_to_full_rate_s": full_rate_time(delivered, CASES[case]),
    }


def _idle_after(sent: pd.Series, outages: list[tuple[float, float]]) -> float | None:
    """Time from the first outage's end to the fixed host's first packet
    after it."""
    up = outages[0][0] + outages[0][1]
    after = sent[sent >= up]
    return float(after.min() - up) if len(after) else None


def rtolab_scenario(case: str, seed: int) -> str:
    """The same run for rtolab, with ns-2.35's TCP defaults."""
    outages = ", ".join(f'{{ start = "{s:g}s", duration = "{d:g}s" }}' for s, d in CASES[case])
    reno = "\n".join(NS2_RENO)
    tcp = f"""mss = {PACKET}
timestamps = false
sack = false
window_scale = false
recv_buffer = {RECV_BUFFER}
window_update_threshold = {RECV_BUFFER // 2}
send_buffer = 262144
cc.policy = "reno"
cc.initial_window.segments = 2
cc.max_window = {WINDOW * PACKET}
rto.policy = "rfc6298"
rto.initial = "3s"
rto.min = "200ms"
rto.max = "60s"
rto.granularity = "10ms"
ack = {{ policy = "immediate" }}
{reno}
"""
    return f"""name = "ns2-ack-holding-{case.lower()}"
duration = "{DURATION_S:g}s"

[[host]]
name = "fixed"
profile = "rfc"
[host.tcp]
{tcp}
[[host]]
name = "bs"

[[host]]
name = "mobile"
profile = "rfc"
[host.tcp]
{tcp}
[[link]]
name = "wired"
kind = "point-to-point"
ends = [
  {{ host = "fixed", address = "10.0.0.1/24" }},
  {{ host = "bs", address = "10.0.0.2/24" }},
]
rate = "10Mbps"
delay = "40ms"

[[link]]
name = "radio"
kind = "fading"
ends = [
  {{ host = "bs", address = "10.0.1.1/24" }},
  {{ host = "mobile", address = "10.0.1.2/24" }},
]
rate = "2Mbps"
delay = "10ms"
outages = [ {outages} ]

[[route]]
host = "fixed"
destination = "default"
via = "10.0.0.2"

[[route]]
host = "mobile"
destination = "default"
via = "10.0.1.1"

[[capture]]
host = "fixed"
link = "wired"
file = "fixed.pcap"

[[capture]]
host = "mobile"
link = "radio"
file = "mobile.pcap"

[[app]]
kind = "tcp-sink"
name = "sink"
host = "mobile"
port = 5001

[[app]]
kind = "tcp-bulk"
name = "bulk"
host = "fixed"
peer = "10.0.1.2:5001"
start = "{start_offset(seed) * 1e6:.0f}us"
"""


def run_rtolab(case: str, seed: int, work: Path) -> dict[str, float | None]:
    """One rtolab run's measures, from its captures and traces."""
    import rtolab

    result = rtolab.run(rtolab_scenario(case, seed), seed=seed, out=work, traces="full")
    packets = result.packets
    data = packets[(packets["src"] == "10.0.0.1") & (packets["payload_len"] > 0)]
    sent = data[data["capture"] == "fixed"]
    got = data[data["capture"] == "mobile"].drop_duplicates("seq")
    flow = next(f for f in result.report["flows"] if f.get("app") == "bulk")
    traces = result.traces
    armed = traces[(traces["kind"] == "rto_armed") & (traces["node_name"] == "fixed")]
    backoff = 2 ** int(armed["backoff"].max()) if len(armed) else 1
    delivered = pd.DataFrame({"t": got["time_s"], "bytes": got["payload_len"]})
    return {
        "packets_delivered": len(got),
        "timeouts": int(flow.get("timeouts", 0)),
        "backoff_max": backoff,
        "idle_after_up_s": _idle_after(sent["time_s"], CASES[case]),
        "time_to_full_rate_s": full_rate_time(delivered, CASES[case]),
    }


def _number(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _cell(values: pd.Series) -> str:
    x = values.dropna().astype(float)
    if not len(x):
        return "never"
    mean = _number(x.mean())
    if x.min() == x.max():
        return mean
    return f"{mean} ({_number(x.min())}..{_number(x.max())})"


def run(out: Path, seeds: int) -> str:
    """Runs both simulators on cases A and B over `seeds` seeds; writes
    ``out/runs.csv`` and returns the comparison as a Markdown table (means
    over seeds, min..max where they differ)."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            for seed in range(1, seeds + 1):
                work = Path(tmp) / f"{case}-{seed}"
                for name, runner in (("ns-2", run_ns2), ("rtolab", run_rtolab)):
                    measures = runner(case, seed, work / name)
                    rows.append({"case": case, "simulator": name, "seed": seed, **measures})
    table = pd.DataFrame(rows, columns=["case", "simulator", "seed", *METRICS])
    table.to_csv(out / "runs.csv", index=False)
    lines = [
        f"| case | measure (n = {seeds} seeds) | ns-2.35 | rtolab |",
        "|---|---|---|---|",
    ]
    for case in CASES:
        rows_case = table[table["case"] == case]
        for metric in METRICS:
            cells = [
                _cell(rows_case[rows_case["simulator"] == sim][metric])
                for sim in ("ns-2", "rtolab")
            ]
            lines.append(f"| {case} | {metric} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds: must be at least 1")
    print(run(args.out, args.seeds), end="")


if __name__ == "__main__":
    main()
