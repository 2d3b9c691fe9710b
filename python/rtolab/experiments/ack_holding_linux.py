"""ACK holding against real Linux TCP in the emulator (docs/ack-holding.md,
"Against real Linux TCP").

Runs ``scenarios/emu-ack-holding.toml`` (Linux fixed host and mobile, a
base station that holds the mobile's ACKs through a 10 s outage) with the
base station's ``min_rto``, ``samples``, ``duplicates`` and ``fixed_host``
settings varied, and its ``-baseline`` twin, several rounds each, and reads
what happened from the
captures: the fixed host's timeouts, the ACKs it got during the outage, the
bytes delivered; and in every capture the two constraints the scheme must
keep (:func:`check_capture`): no third duplicate of an ACK reaches the
fixed host, and the advertised window is respected.

Needs root and network namespaces (the emulator's own requirements)::

    sudo python -m rtolab.experiments.ack_holding_linux --rounds 3 --out DIR

writes ``DIR/linux.csv`` (one row per run) and prints the table. With
``--ss MS`` it also samples the fixed host's own view of its timer (``ss
-tino`` in its namespace every MS milliseconds: rto, rtt, the pending timer)
into each run's ``ss.csv``, on the captures' clock; every run writes
``retransmissions.csv``, each retransmission of the fixed host with the time
since the last ACK of new data and since the head segment was last sent
(:func:`retransmissions`).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: The shipped scenarios, relative to the repository.
SCENARIO = "scenarios/emu-ack-holding.toml"
BASELINE = "scenarios/emu-ack-holding-baseline.toml"
FIXED, MOBILE = "10.0.0.1", "10.0.0.2"
#: A retransmission is the fixed host's timer firing only this long after
#: the segment it repeats was last sent, or later: Linux's RTO is never
#: below its 200 ms floor, and its timer starts at that send or later (at
#: an ACK, or at a loss probe).
MIN_RTO_S = 0.2
#: ...and not within this of any ACK: what an ACK triggers (a fast
#: retransmit, go-back-N after a timeout) leaves within a millisecond of it.
ACK_TRIGGERED_S = 0.005

#: The base station planning for Linux's RTO and the held ACKs' samples.
LINUX_HOLD: dict[str, str | int] = {"fixed_host": "linux", "min_rto": "200ms", "samples": "hold"}

#: Configuration name → the base station's extra fields (``None``: no
#: middlebox, the baseline). 600 ms is Linux's RTO measured at the fixed
#: host in this set-up (its 200 ms floor on top of the round trip and its
#: deviation; docs/emulator.md).
CONFIGS: dict[str, dict[str, str | int] | None] = {
    "baseline": None,
    "spec": {},
    "duplicates = 2": {"duplicates": 2},
    'min_rto = "infer"': {"min_rto": "infer"},
    'min_rto = "200ms"': {"min_rto": "200ms"},
    'min_rto = "600ms"': {"min_rto": "600ms"},
    'min_rto = "600ms", samples = "hold"': {"min_rto": "600ms", "samples": "hold"},
    'min_rto = "600ms", duplicates = 2': {"min_rto": "600ms", "duplicates": 2},
    'min_rto = "600ms", search = "timeout-free"': {"min_rto": "600ms", "search": "timeout-free"},
    'min_rto = "600ms", samples = "hold", search = "timeout-free"': {
        "min_rto": "600ms",
        "samples": "hold",
        "search": "timeout-free",
    },
    'fixed_host = "linux", min_rto = "200ms", samples = "hold"': {
        "fixed_host": "linux",
        "min_rto": "200ms",
        "samples": "hold",
    },
    'fixed_host = "linux", min_rto = "200ms", samples = "hold", search = "timeout-free"': {
        "fixed_host": "linux",
        "min_rto": "200ms",
        "samples": "hold",
        "search": "timeout-free",
    },
    # The Linux model with the fixed host's loss detection switched off one
    # piece at a time: tail loss probes (tcp_early_retrans), RACK
    # (tcp_recovery), timestamps (and with them the echo Linux samples
    # when Karn's rule forbids timing a segment).
    'fixed_host = "linux", min_rto = "200ms", samples = "hold"; no TLP': LINUX_HOLD,
    'fixed_host = "linux", min_rto = "200ms", samples = "hold"; no RACK': LINUX_HOLD,
    'fixed_host = "linux", min_rto = "200ms", samples = "hold"; no timestamps': LINUX_HOLD,
    "two outages: spec": {},
    'two outages: min_rto = "infer"': {"min_rto": "infer"},
}
#: Sysctls of the fixed host's namespace for the configurations whose name
#: ends with the key (emulator: ``linux = { sysctls = ... }``).
FIXED_SYSCTLS: dict[str, dict[str, int]] = {
    "; no TLP": {"net.ipv4.tcp_early_retrans": 0},
    "; no RACK": {"net.ipv4.tcp_recovery": 0},
    "; no timestamps": {"net.ipv4.tcp_timestamps": 0},
}


def fixed_sysctls(config: str) -> dict[str, int]:
    """The fixed host's sysctls in `config` (none for most)."""
    return next((v for k, v in FIXED_SYSCTLS.items() if config.endswith(k)), {})


#: Case B's outages (ack-holding spec §4), for the configurations whose
#: name says so: "infer" learns the fixed host's RTO from the first outage's
#: timeouts and uses it in the second.
TWO_OUTAGES = (
    'outages = [ { start = "8s", duration = "10s" }, { start = "24s", duration = "10s" } ]'
)


def scenario_text(repo: Path, config: str) -> str:
    """The scenario of one configuration, with a capture at the mobile too
    (to check the windows the base station releases against the mobile's)."""
    holding = CONFIGS[config]
    if holding is None:
        text = (repo / BASELINE).read_text(encoding="utf-8")
    else:
        text = (repo / SCENARIO).read_text(encoding="utf-8")
        fields = "".join(f"{k} = {json.dumps(v)}\n" for k, v in holding.items())
        text = text.replace('mobile = "10.0.0.2"\n', f'mobile = "10.0.0.2"\n{fields}', 1)
    sysctls = fixed_sysctls(config)
    if sysctls:
        table = ", ".join(f"{json.dumps(k)} = {v}" for k, v in sysctls.items())
        host = 'name = "fixed"\nstack = "linux"\n'
        text = text.replace(host, f"{host}linux = {{ sysctls = {{ {table} }} }}\n", 1)
    if config.startswith("two outages"):
        text = text.replace('outages = [ { start = "10s", duration = "10s" } ]', TWO_OUTAGES, 1)
    return text + '\n[[capture]]\nhost = "mobile"\nlink = "radio"\nfile = "mobile-radio.pcap"\n'


@dataclass
class CaptureCheck:
    """The scheme's constraints, checked on one run's captures."""

    #: ACKs that reached the fixed host in the checked interval as the
    #: third (or later) duplicate of the one before: must be 0.
    third_duplicates: int
    #: The longest run of identical ACKs (same number and window, no data)
    #: in the checked interval: 1 is no duplicate, 3 the original and two.
    longest_run: int
    #: Data segments the fixed host sent beyond the right edge (ACK +
    #: scaled window) of the last ACK it had received: must be 0.
    beyond_window: int
    #: ACKs reaching the fixed host whose right edge lies beyond any the
    #: mobile had advertised by then (needs the mobile's capture): must be 0.
    edge_opened: int
    #: Data segments reaching the mobile beyond its advertised right edge
    #: (needs the mobile's capture): must be 0.
    beyond_mobile_window: int

    @property
    def ok(self) -> bool:
        return (
            self.third_duplicates == 0
            and self.beyond_window == 0
            and self.edge_opened == 0
            and self.beyond_mobile_window == 0
        )


def _connection(frame: pd.DataFrame, fixed: str, mobile: str) -> tuple[int, int, int]:
    """The fixed host's and the mobile's initial sequence numbers and the
    shift of the mobile's windows (0 unless both SYNs carried window scale)."""
    tcp = frame[frame["protocol"] == "tcp"]
    syn = tcp["flags"].fillna("").str.contains("SYN")
    ours = tcp[syn & (tcp["src"] == fixed) & (tcp["dst"] == mobile)]
    theirs = tcp[syn & (tcp["src"] == mobile) & (tcp["dst"] == fixed)]
    if ours.empty or theirs.empty:
        raise ValueError(f"capture: no handshake between {fixed} and {mobile}")
    ours_ws, theirs_ws = ours["window_scale"].iloc[0], theirs["window_scale"].iloc[0]
    shift = 0 if pd.isna(ours_ws) or pd.isna(theirs_ws) else int(theirs_ws)
    return int(ours["seq"].iloc[0]), int(theirs["seq"].iloc[0]), shift


def _acks(frame: pd.DataFrame, fixed: str, mobile: str, isn: int, shift: int) -> pd.DataFrame:
    """The mobile's ACKs (not SYN) in `frame`: time, relative ACK, window
    (unscaled), payload, right edge."""
    rows = frame[
        (frame["src"] == mobile)
        & (frame["dst"] == fixed)
        & (frame["protocol"] == "tcp")
        & ~frame["flags"].fillna("").str.contains("SYN")
    ]
    out = pd.DataFrame(
        {
            "t": rows["time_s"].to_numpy(dtype=float),
            "ack": (rows["ack"].to_numpy(dtype=np.int64) - isn) % 2**32,
            "window": rows["window"].to_numpy(dtype=np.int64),
            "payload": rows["payload_len"].to_numpy(dtype=np.int64),
            "fin": rows["flags"].str.contains("FIN").to_numpy(dtype=bool),
        }
    )
    out["edge"] = out["ack"] + out["window"] * (1 << shift)
    return out


def _data(frame: pd.DataFrame, fixed: str, mobile: str, isn: int) -> pd.DataFrame:
    """The fixed host's data segments: time, relative start and end."""
    rows = frame[
        (frame["src"] == fixed)
        & (frame["dst"] == mobile)
        & (frame["protocol"] == "tcp")
        & (frame["payload_len"] > 0)
    ]
    seq = (rows["seq"].to_numpy(dtype=np.int64) - isn) % 2**32
    return pd.DataFrame(
        {
            "t": rows["time_s"].to_numpy(dtype=float),
            "seq": seq,
            "end": seq + rows["payload_len"].to_numpy(dtype=np.int64),
        }
    )


def _beyond(data: pd.DataFrame, acks: pd.DataFrame) -> int:
    """Data segments ending beyond the largest right edge advertised by an
    ACK captured before them (a sender may not shrink what it was offered,
    so the largest edge so far is the limit)."""
    if data.empty:
        return 0
    if acks.empty:
        return int((data["seq"] > 0).sum())
    edges = np.maximum.accumulate(acks["edge"].to_numpy())
    i = np.searchsorted(acks["t"].to_numpy(), data["t"].to_numpy(), side="left") - 1
    limit = np.where(i >= 0, edges[np.maximum(i, 0)], 0)
    # Before any ACK the sender may send its initial window; only later
    # segments are checked.
    checked = i >= 0
    return int(((data["end"].to_numpy() > limit) & checked).sum())


def check_capture(
    fixed_side: pd.DataFrame,
    mobile_side: pd.DataFrame | None,
    interval: tuple[float, float],
    fixed: str = FIXED,
    mobile: str = MOBILE,
) -> CaptureCheck:
    """Checks one run's captures (frames of :func:`rtolab.frames.read_capture`):
    `fixed_side` at the fixed host's link, `mobile_side` at the mobile's
    (or ``None``). Duplicates are counted among the ACKs reaching the fixed
    host within `interval` (s, the time the base station acts for the
    mobile); outside it the mobile's own duplicates (real losses) pass
    untouched. A duplicate is an ACK with the previous one's number and
    window and no data, SYN or FIN (RFC 5681 §2)."""
    isn, _, shift = _connection(fixed_side, fixed, mobile)
    acks = _acks(fixed_side, fixed, mobile, isn, shift)
    start, end = interval
    inside = acks[(acks["t"] >= start) & (acks["t"] <= end)]
    run, longest, third = 0, 0, 0
    previous: tuple[int, int] | None = None
    for ack, window, payload, fin in zip(
        inside["ack"], inside["window"], inside["payload"], inside["fin"], strict=True
    ):
        key = (int(ack), int(window))
        pure = payload == 0 and not fin
        run = run + 1 if pure and key == previous else 1
        previous = key if pure else None
        longest = max(longest, run)
        third += run > 3
    beyond = _beyond(_data(fixed_side, fixed, mobile, isn), acks)
    opened = beyond_mobile = 0
    if mobile_side is not None:
        sent = _acks(mobile_side, fixed, mobile, isn, shift)
        if not sent.empty and not acks.empty:
            most = np.maximum.accumulate(sent["edge"].to_numpy())
            i = np.searchsorted(sent["t"].to_numpy(), acks["t"].to_numpy(), side="right") - 1
            limit = np.where(i >= 0, most[np.maximum(i, 0)], 0)
            opened = int(((acks["edge"].to_numpy() > limit) & (i >= 0)).sum())
        beyond_mobile = _beyond(_data(mobile_side, fixed, mobile, isn), sent)
    return CaptureCheck(third, longest, beyond, opened, beyond_mobile)


def timeouts(fixed_side: pd.DataFrame, fixed: str = FIXED, mobile: str = MOBILE) -> list[float]:
    """When the fixed host's retransmission timer fired, from its capture:
    a retransmission of the segment the last ACK it received asked for, at
    least :data:`MIN_RTO_S` after that segment was last sent and not just
    after any ACK (:data:`ACK_TRIGGERED_S`). Times in s.

    Counting from the segment's send rather than from the last ACK matters
    for Linux: with a loss probe pending its timer is due an RTO after the
    oldest unacknowledged segment was sent, which during ACK holding can be
    a fraction of a second after a released ACK."""
    r = retransmissions(fixed_side, fixed, mobile)
    fired = r[
        r["head"] & (r["head_age"].fillna(np.inf) >= MIN_RTO_S) & (r["since_ack"] > ACK_TRIGGERED_S)
    ]
    return [float(t) for t in fired["t"]]


def retransmissions(
    fixed_side: pd.DataFrame, fixed: str = FIXED, mobile: str = MOBILE
) -> pd.DataFrame:
    """Every retransmission in the fixed host's capture: time ``t`` (s),
    relative ``seq``, whether it is the segment the last ACK asked for
    (``head``), the time since the last ACK of new data (``since_new_ack``)
    and since any ACK (``since_ack``), and the time since the head segment
    (the one the last ACK asked for) was last sent (``head_age``): Linux
    rearms its timer from that send when a loss probe is pending
    (``tcp_rearm_rto``), so a timeout there comes an RTO after it rather
    than after the last ACK."""
    isn, _, shift = _connection(fixed_side, fixed, mobile)
    acks = _acks(fixed_side, fixed, mobile, isn, shift)
    data = _data(fixed_side, fixed, mobile, isn)
    events = pd.concat(
        [
            acks.assign(kind="ack")[["t", "kind", "ack"]],
            data.assign(kind="data")[["t", "kind", "seq"]],
        ]
    ).sort_values("t", kind="stable")
    sent: dict[int, float] = {}
    rows: list[tuple[float, int, bool, float, float, float]] = []
    asked = -1
    new_ack_t = any_ack_t = -np.inf
    highest = 0
    for t, kind, ack, seq in zip(
        events["t"], events["kind"], events["ack"], events["seq"], strict=True
    ):
        if kind == "ack":
            if int(ack) > asked:
                asked, new_ack_t = int(ack), float(t)
            any_ack_t = float(t)
            continue
        seq = int(seq)
        if seq < highest:
            rows.append(
                (
                    float(t),
                    seq,
                    seq == asked,
                    float(t) - new_ack_t,
                    float(t) - any_ack_t,
                    float(t) - sent.get(asked, np.nan),
                )
            )
        sent[seq] = float(t)
        highest = max(highest, seq + 1)
    return pd.DataFrame(
        rows, columns=["t", "seq", "head", "since_new_ack", "since_ack", "head_age"]
    )


def outages(report: dict[str, Any]) -> list[tuple[float, float]]:
    """Each outage the base station was told of: (``going_down``, ``up``)
    times in s, on the captures' clock."""
    at: dict[str, list[float]] = {"going_down": [], "up": []}
    for i in report["engine"]["indications"]:
        if i["host"] == "bs" and i["indication"] in at:
            at[i["indication"]].append(i["at_ns"] / 1e9)
    if not at["going_down"] or len(at["going_down"]) != len(at["up"]):
        raise ValueError("report: the base station's going_down and up do not pair up")
    return list(zip(sorted(at["going_down"]), sorted(at["up"]), strict=True))


def measure(out: Path) -> dict[str, Any]:
    """One emulation's measures, from the files it wrote in `out`."""
    from rtolab.frames import read_capture

    report = json.loads((out / "metrics.json").read_text())
    fixed_side = read_capture(out / "fixed-wired.pcap")
    mobile_pcap = out / "mobile-radio.pcap"
    mobile_side = read_capture(mobile_pcap) if mobile_pcap.exists() else None
    spans = outages(report)
    checks = [check_capture(fixed_side, mobile_side, (down, up + 0.2)) for down, up in spans]
    fired = timeouts(fixed_side)
    retransmissions(fixed_side).to_csv(out / "retransmissions.csv", index=False)
    during = [sum(down <= t <= up for t in fired) for down, up in spans]
    sink = next(a for a in report["apps"] if a["name"] == "sink")
    row: dict[str, Any] = {
        "outages": len(spans),
        "timeouts_per_outage": sum(during) / len(spans),
        "timeouts_each": " ".join(map(str, during)),
        "timeouts_after": len(fired) - sum(during),
        "timeout_times": " ".join(f"{t:.2f}" for t in fired),
        "delivered_mb": sink["bytes_received"] / 1e6,
        "third_duplicates": sum(c.third_duplicates for c in checks),
        "longest_run": max(c.longest_run for c in checks),
        "beyond_window": checks[0].beyond_window,
        "edge_opened": checks[0].edge_opened,
        "beyond_mobile_window": checks[0].beyond_mobile_window,
        "ok": all(c.ok for c in checks),
        "timing_error_p99_ms": report["timing_error_p99_ms"],
    }
    boxes = report["engine"]["middleboxes"]
    if boxes:
        stats = boxes[0]["stats"]
        schedules = stats.get("schedules") or []
        row.update(
            acks_held=stats["acks_held"] / len(spans),
            acks_paced=stats["acks_paced"],
            duplicates_sent=stats.get("duplicates_sent", 0),
            inferred_min_rto_s=stats.get("inferred_min_rto_s"),
            releases=" ".join(str(s.get("releases")) for s in schedules),
            n=" ".join(str(s.get("n")) for s in schedules),
            min_rto_s=" ".join(str(s.get("min_rto_s")) for s in schedules),
            gaps_s="; ".join(
                " ".join(f"{g:.2f}" for g in s.get("gaps_s") or []) for s in schedules
            ),
        )
    return row


#: What the sampler keeps of each ``ss -tino`` line.
_SS_FIELDS = {
    "rto_ms": re.compile(r"\brto:([\d.]+)"),
    "rtt_ms": re.compile(r"\brtt:([\d.]+)/"),
    "rttvar_ms": re.compile(r"\brtt:[\d.]+/([\d.]+)"),
    "backoff": re.compile(r"\bbackoff:(\d+)"),
    "lastack_ms": re.compile(r"\blastack:(\d+)"),
    # ss prints 6.544 s as "6.544ms", 6 s as "6sec", 544 ms as "544ms".
    "timer_ms": re.compile(r"timer:\(on,(?:(\d+)min)?(?:(\d+)(sec|\.))?(?:(\d+)ms)?"),
    "retrans_total": re.compile(r"\bretrans:\d+/(\d+)"),
    "unacked": re.compile(r"\bunacked:(\d+)"),
    "cwnd": re.compile(r"\bcwnd:(\d+)"),
}


def parse_ss(line: str) -> dict[str, float]:
    """The fields of one ``ss -tinoH`` line (two lines joined) that tell
    the fixed host's timer: its RTO, round trip and variance, backoff, time
    since the last ACK, the time left on the pending retransmission timer
    (a loss probe shows the same way), retransmissions so far."""
    out: dict[str, float] = {}
    for name, pattern in _SS_FIELDS.items():
        m = pattern.search(line)
        if m is None:
            continue
        if name == "timer_ms":
            minutes, secs, unit, ms = m.groups()
            fraction = float(ms or 0) if unit != "." else float(f"0.{ms}") * 1000.0
            out[name] = 60_000.0 * float(minutes or 0) + 1000.0 * float(secs or 0) + fraction
        else:
            out[name] = float(m.group(1))
    return out


class SsSampler:
    """Samples ``ss -tino`` for the connection to the mobile in the fixed
    host's namespace (``rtolab-<pid>-<run>-fixed``) every `period_s`, on a
    thread, until :meth:`stop`. Each sample is stamped with the monotonic
    clock; :func:`align_ss` moves them onto the captures' clock."""

    def __init__(self, pid: int, period_s: float) -> None:
        self.pid, self.period_s = pid, period_s
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _namespace(self) -> str | None:
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        prefix = f"rtolab-{self.pid}-"
        return next(
            (n for n in listed.stdout.split() if n.startswith(prefix) and n.endswith("-fixed")),
            None,
        )

    def _run(self) -> None:
        namespace = None
        while namespace is None and not self._stop.is_set():
            namespace = self._namespace()
            self._stop.wait(0.05)
        command = ["ip", "netns", "exec", str(namespace), "ss", "-tinoH", "dst", MOBILE]
        while namespace is not None and not self._stop.is_set():
            at = time.monotonic()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            fields = parse_ss(" ".join(done.stdout.split()))
            if fields:
                self.samples.append({"mono_s": at, **fields})
            self._stop.wait(max(0.0, self.period_s - (time.monotonic() - at)))

    def stop(self) -> pd.DataFrame:
        self._stop.set()
        self._thread.join(5.0)
        return pd.DataFrame(self.samples)


def align_ss(samples: pd.DataFrame, syn_s: float, ack_times: np.ndarray) -> pd.DataFrame:
    """`samples` with ``t`` on the captures' clock. The first sample is
    the first that saw the connection, so it came within a sampling period
    after the SYN (`syn_s`, s); within 50 ms of that, the offset is the one
    that best dates the ACKs the samples report (``lastack_ms``: time
    since the fixed host last received one) onto ACKs in the fixed host's
    capture (`ack_times`, s): least mean distance, each counted up to 20 ms,
    on a 1 ms grid. The outage's ACKs, seconds apart, pin it down."""
    if samples.empty or ack_times.size == 0:
        return samples.assign(t=np.nan)
    coarse = float(samples["mono_s"].iloc[0]) - syn_s
    offset = coarse
    if "lastack_ms" in samples:
        # Before the first ACK, lastack counts from an arbitrary origin.
        known = samples["lastack_ms"] < 60_000
        dated = np.unique((samples["mono_s"] - samples["lastack_ms"] / 1000.0)[known])
        every = np.sort(ack_times)

        def cost(o: float) -> float:
            x = dated - o
            i = np.clip(np.searchsorted(every, x), 1, every.size - 1)
            near = np.minimum(np.abs(x - every[i - 1]), np.abs(x - every[i]))
            return float(np.mean(np.minimum(near, 0.02)))

        if dated.size and every.size > 1:
            offset = min(coarse - np.arange(-10, 51) / 1000.0, key=cost)
    return samples.assign(t=samples["mono_s"] - offset)


def run_one(
    repo: Path, config: str, round_: int, out: Path, ss_period_s: float | None = None
) -> dict[str, Any]:
    """Emulates `config` once (round `round_`) into `out` and measures it;
    with `ss_period_s`, samples the fixed host's timer into ``ss.csv``."""
    out.mkdir(parents=True, exist_ok=True)
    scenario = out / "scenario.toml"
    scenario.write_text(scenario_text(repo, config), encoding="utf-8")
    (out / "config.txt").write_text(config, encoding="utf-8")
    command = [sys.executable, "-m", "rtolab", "emulate", str(scenario), "--out", str(out / "run")]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        sampler = SsSampler(process.pid, ss_period_s) if ss_period_s else None
        _, stderr = process.communicate()
    samples = sampler.stop() if sampler else None
    if process.returncode:
        raise RuntimeError(f"emulate {config}: {stderr.strip()}")
    row = {"config": config, "round": round_, **measure(out / "run")}
    if samples is not None:
        from rtolab.frames import read_capture

        fixed_side = read_capture(out / "run" / "fixed-wired.pcap")
        isn, _, shift = _connection(fixed_side, FIXED, MOBILE)
        acks = _acks(fixed_side, FIXED, MOBILE, isn, shift)
        syn = float(fixed_side["time_s"].iloc[0])
        align_ss(samples, syn, acks["t"].to_numpy()).to_csv(out / "ss.csv", index=False)
    return row


def _spread(values: pd.Series, digits: int) -> str:
    v = values.dropna().astype(float)
    if v.empty:
        return "-"
    mean = f"{v.mean():.{digits}f}"
    lo, hi = f"{v.min():.{digits}f}", f"{v.max():.{digits}f}"
    return mean if lo == hi else f"{mean} ({lo}..{hi})"


def table(runs: pd.DataFrame) -> str:
    """The Markdown table of `runs` (one row per configuration; means over
    rounds, min..max where they differ)."""
    lines = [
        "| base station | runs | timeouts per outage | timeouts after it | ACKs held per outage"
        " | releases | MB delivered | longest duplicate run | constraints kept |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for config in CONFIGS:
        rows = runs[runs["config"] == config]
        if rows.empty:
            continue
        held = _spread(rows["acks_held"], 1) if "acks_held" in rows else "-"
        releases = (
            " / ".join(sorted(set(rows["releases"].dropna().astype(str))))
            if "releases" in rows
            else "-"
        )
        lines.append(
            f"| {config} | {len(rows)} | {_spread(rows['timeouts_per_outage'], 1)}"
            f" | {_spread(rows['timeouts_after'], 1)} | {held} | {releases or '-'}"
            f" | {_spread(rows['delivered_mb'], 2)} | {int(rows['longest_run'].max())}"
            f" | {int(rows['ok'].sum())}/{len(rows)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--config", action="append", choices=list(CONFIGS))
    parser.add_argument("--repo", type=Path, default=Path.cwd())
    parser.add_argument(
        "--measure-only", action="store_true", help="measure the runs already in --out again"
    )
    parser.add_argument(
        "--ss",
        type=float,
        metavar="MS",
        help="sample the fixed host's timer (ss -tino) every MS milliseconds",
    )
    args = parser.parse_args(argv)
    rows = []
    if args.measure_only:
        for done in sorted(args.out.glob("*/config.txt")):
            config, round_ = done.read_text(encoding="utf-8"), done.parent.name.split("-")[-1]
            rows.append({"config": config, "round": int(round_), **measure(done.parent / "run")})
        args.rounds = 0
    for round_ in range(args.rounds):
        for config in args.config or list(CONFIGS):
            where = args.out / f"{list(CONFIGS).index(config)}-{round_}"
            ss_period_s = args.ss / 1000.0 if args.ss else None
            row = run_one(args.repo, config, round_, where, ss_period_s)
            print(json.dumps(row), flush=True)
            rows.append(row)
    runs = pd.DataFrame(rows)
    runs.to_csv(args.out / "linux.csv", index=False)
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
