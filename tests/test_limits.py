"""Nothing a user writes can hang or flood a run: degenerate settings are
rejected naming the field, budgets stop a run, and Ctrl-C or SIGTERM stop it
within moments, from the CLI and from Python, with valid outputs marked
incomplete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import cli_run
import rtolab

#: Longest wait for a stopped run to hand control back. How soon it does is
#: measured by benches/stop/bench.py: a loaded test machine says nothing
#: about it, so the tests check only that it stops, with valid outputs.
STOP_WAIT_S = 60

#: Simulated seconds requested of runs that a stop has to cut short.
LONG_S = 100_000


def bulk(a_tcp: str = "", b_tcp: str = "", duration: str = f"{LONG_S}s") -> str:
    """An endless bulk transfer from ``a`` to ``b`` over a 1 Mbit/s link."""
    return f"""
name = "limits"
duration = "{duration}"
[[host]]
name = "a"
[host.tcp]
{a_tcp}
[[host]]
name = "b"
[host.tcp]
{b_tcp}
[[link]]
name = "ab"
kind = "point-to-point"
ends = [ {{ host = "a", address = "10.0.0.1/24" }}, {{ host = "b", address = "10.0.0.2/24" }} ]
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


CBR_1E14 = """
name = "flood"
duration = "60s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
name = "ab"
kind = "point-to-point"
ends = [ { host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" } ]
rate = "10Mbps"
delay = "1ms"
[[app]]
kind = "cbr"
host = "a"
destination = "10.0.0.2:9000"
size = 1000
rate = "100000000Mbps"
[[app]]
kind = "sink"
host = "b"
port = 9000
"""


def rtolab_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_run.rtolab_cli(*args, timeout=120)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (bulk('keepalive = { idle = "0s", interval = "1s", probes = 3 }'), "keepalive.idle"),
        (bulk('keepalive = { idle = "9s", interval = "1ns", probes = 3 }'), "keepalive.interval"),
        (bulk('persist_max = "0s"', "recv_buffer = 0"), "persist_max"),
        (bulk('persist_max = "1ns"'), "persist_max"),
    ],
)
def test_timers_that_freeze_time_are_rejected_naming_the_field(
    text: str, field: str, tmp_path: Path
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    for args in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "out")]):
        done = rtolab_cli(*args)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert f"host[0].tcp.{field}: must be at least" in lines[0]


def test_a_cbr_flood_is_rejected_naming_the_rate(tmp_path: Path) -> None:
    path = tmp_path / "flood.toml"
    path.write_text(CBR_1E14, encoding="utf-8")
    done = rtolab_cli("validate", str(path))
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: app[0].rate: sends a datagram every 1ns")


def assert_incomplete(out: Path, stopped_by: str) -> dict[str, object]:
    """The outputs of a stopped run: metrics say so, the pcap reads back."""
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["complete"] is False
    assert metrics["stopped_by"] == stopped_by
    assert 0 < metrics["duration_s"] < LONG_S
    packets = rtolab.read_capture(out / "a.pcap")
    assert len(packets) > 0
    assert packets["time_ns"].max() <= metrics["duration_ns"]
    return metrics


def test_max_events_stops_the_cli_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "long.toml"
    path.write_text(bulk(), encoding="utf-8")
    out = tmp_path / "out"
    done = rtolab_cli("run", str(path), "--out", str(out), "--max-events", "20000")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "stopped by max_events (20000 events)" in lines[0], done.stderr
    metrics = assert_incomplete(out, "max_events")
    assert metrics["events_processed"] == 20000


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_rtolab_run_with_valid_outputs(
    signum: signal.Signals, tmp_path: Path
) -> None:
    path = tmp_path / "long.toml"
    path.write_text(bulk(), encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtolab", "run", str(path), "--out", str(out), "--no-plot"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The capture file appears when the simulation starts; let it run a bit.
    deadline = time.monotonic() + 60
    while not (out / "a.pcap").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    assert proc.poll() is None, "the run ended by itself"
    proc.send_signal(signum)
    try:
        _, stderr = proc.communicate(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        # Left running, the run would fill the disk with its traces.
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {STOP_WAIT_S} s after {signum.name}")
    assert proc.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted; outputs so far in"), stderr
    assert_incomplete(out, "interrupted")


def test_ctrl_c_interrupts_rtolab_run_in_python(tmp_path: Path) -> None:
    out = tmp_path / "out"
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            rtolab.run(bulk(), out=out)
    finally:
        timer.cancel()
    assert_incomplete(out, "interrupted")


def test_budgets_raise_run_stopped_in_python(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(rtolab.RunStopped) as stopped:
        rtolab.run(bulk(), out=out, max_output=200_000)
    assert stopped.value.stopped_by == "max_output"
    assert_incomplete(out, "max_output")
    with pytest.raises(rtolab.RunStopped) as stopped:
        rtolab.run(bulk(), out=tmp_path / "wall", max_wall=0.2)
    assert stopped.value.stopped_by == "max_wall"
    with pytest.raises(rtolab.ScenarioError, match="max_events"):
        rtolab.run(bulk(), max_events=-1)


def test_max_stall_events_sets_the_guard_of_rtolab_run(tmp_path: Path) -> None:
    # At its start the bulk sender's timer fires three times at t=0: a normal
    # run, which the default guard lets through and a guard of 3 stops.
    path = tmp_path / "short.toml"
    path.write_text(bulk(duration="1s"), encoding="utf-8")
    done = rtolab_cli("run", str(path), "--out", str(tmp_path / "ok"), "--no-plot")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "stalled"
    done = rtolab_cli("run", str(path), "--out", str(out), "--max-stall-events", "3")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert 'timer of app "tcp-bulk1" fired 3 times at t=0.000000000s' in lines[0]
    assert "without time advancing" in lines[0]
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["complete"] is False and metrics["stopped_by"] == "stalled"
    assert rtolab.read_capture(out / "a.pcap").empty  # valid, and nothing sent yet


@pytest.mark.parametrize("value", ["0", "-5", "18446744073709551616", "many"])
def test_max_stall_events_must_be_a_positive_count(value: str, tmp_path: Path) -> None:
    done = rtolab_cli("run", "--max-stall-events", value, "--out", str(tmp_path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "'--max-stall-events'" in lines[0], done.stderr
    assert not (tmp_path / "metrics.json").exists()


def test_max_stall_events_in_python(tmp_path: Path) -> None:
    with pytest.raises(rtolab.RunStopped, match='start of app "tcp-bulk1" fired 2 times') as err:
        rtolab.run(bulk(duration="1s"), out=tmp_path, max_stall_events=2)
    assert err.value.stopped_by == "stalled"
    for bad in (0, -1, 2**64, True):
        with pytest.raises(rtolab.ScenarioError, match="max_stall_events"):
            rtolab.run(bulk(duration="1s"), max_stall_events=bad)


def exchanges(count: int, gap: str = "0s", extra: str = "") -> str:
    """``count`` exchanges of 8 bytes for 1, one connection each, over a
    1 Gbit/s, 10 us link: every connection's port stays in TIME-WAIT."""
    return f"""
name = "ports"
duration = "{LONG_S}s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
name = "ab"
kind = "point-to-point"
ends = [ {{ host = "a", address = "10.0.0.1/24" }}, {{ host = "b", address = "10.0.0.2/24" }} ]
rate = "1Gbps"
delay = "10us"
[[capture]]
host = "a"
link = "ab"
file = "a.pcap"
[[app]]
kind = "exchange"
host = "a"
peer = "10.0.0.2:80"
request = 8
response = 1
count = {count}
gap = "{gap}"
{extra}
[[app]]
kind = "exchange-server"
host = "b"
port = 80
"""


def test_a_host_out_of_ports_reports_the_connects_it_could_not_make(tmp_path: Path) -> None:
    # 16 384 ephemeral ports, all in TIME-WAIT after as many exchanges: the
    # next connect fails as EADDRNOTAVAIL would, the run goes on to its end.
    path = tmp_path / "ports.toml"
    path.write_text(exchanges(16_385), encoding="utf-8")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "rtolab", "run", str(path), "--out", str(out)]
    done = subprocess.run(
        [*command, "--no-plot", "--max-wall", "120"],
        capture_output=True,
        text=True,
        timeout=STOP_WAIT_S * 3,
    )
    assert done.returncode == 0, done.stderr
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert "stopped_by" not in metrics  # a complete run
    client = metrics["apps"][0]
    assert client["exchanges_completed"] == 16_384
    assert client["exchanges_failed"] == 1
    assert client["failure"] == "connect_failed"
    assert client["connect_errors"] == 1
    assert client["connections"] == 16_384
    assert metrics["apps"][1]["connect_errors"] == 0


def many_clients(count: int) -> str:
    """``count`` TCP clients on host a, each sending a kilobyte to one sink."""
    client = '[[app]]\nkind = "tcp-bulk"\nhost = "a"\npeer = "10.0.0.2:5001"\nbytes = 1000\n'
    clients = client * count
    return bulk(duration=f"{LONG_S}s").split("[[app]]")[0] + (
        '[[app]]\nkind = "tcp-sink"\nhost = "b"\nport = 5001\n' + clients
    )


#: Scenarios written to make the simulator spend unbounded time somewhere:
#: each must end by itself, by --max-wall or on SIGINT, never hang.
HOSTILE_RUNS = {
    # Every connect after the ports ran out, at one instant, a million times.
    "ports out, no gap": exchanges(1_000_000),
    # The same with time moving on between attempts.
    "ports out, 1 ns gaps": exchanges(1_000_000, gap="1ns"),
    # More clients than ephemeral ports, all at once.
    "more clients than ports": many_clients(16_500),
    # One-byte segments (mss = 1) in both directions.
    "mss 1": bulk("mss = 1", "mss = 1"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_RUNS))
@pytest.mark.parametrize("stop", ["max-wall", "SIGINT"])
def test_hostile_runs_end_by_their_limit_or_a_signal(case: str, stop: str, tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(HOSTILE_RUNS[case], encoding="utf-8")
    out = tmp_path / "out"
    args = [sys.executable, "-m", "rtolab", "run", str(path), "--out", str(out), "--no-plot"]
    if stop == "max-wall":
        args += ["--max-wall", "2"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if stop == "SIGINT":
        # Once the simulation runs (its first output exists), interrupt it.
        deadline = time.monotonic() + STOP_WAIT_S
        while not (out / "a.pcap").exists() and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"{case}: still running {STOP_WAIT_S} s after it was asked to stop")
    assert proc.returncode in (0, 2, 130), stderr
    assert "Traceback" not in stderr, stderr
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    # A run that ended before the signal or limit has no "stopped_by".
    if "stopped_by" in metrics:
        assert metrics["complete"] is False, stderr
        assert metrics["stopped_by"] in ("max_wall", "interrupted", "stalled"), stderr
