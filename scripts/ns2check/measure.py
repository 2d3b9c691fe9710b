"""What the MAC and TCP did in one run, measured the same way in both
simulators.

A *direction* is one sender's data frames to one receiver: downlink (the AP
sending TCP data to the first station) and uplink (the stations sending TCP
ACKs or UDP to the AP). Per direction:

* `attempts`: data frames put on air (first attempts and retries);
* `delivered`: data frames the receiver got intact (duplicates included),
  so `delivered / attempts` is the per-frame delivery probability;
* `packets`: distinct packets the sender tried; `attempts / packets` is the
  MAC attempts per frame;
* `rts`, `cts`: RTS frames sent by the sender, CTS frames its receiver
  answered (an RTS/CTS exchange per CTS);
* `retry_drops`: packets dropped at the retry limit;
* `spans_ms`: per packet that got through, the time from its first data
  attempt to its last (0 for a first-attempt success): what the timelost
  option accounts.

For TCP: goodput in Mbit/s per phase, counted as the source's cumulative
acknowledgement moves, each segment counted as ns-2 counts it, 1000 bytes
(ns-2's `packetSize_`: its Reno and TCP-Linux agents add 40 bytes of
headers to it, its Vegas agent none, so rtolab's MSS is 1000 for the first
and 960 for Vegas), and the source's RTT samples (ms, raw: before any
correction, which ns-2's trace cannot show). ns-2's samples are taken as
its Vegas takes them: one per new cumulative ACK, the time since the
acknowledged segment was sent, none from a segment sent more than once;
rtolab's engine takes them the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ns2check import ns2
from ns2check.setting import Setting, segment_data

#: ns-2's `packetSize_`: what each TCP segment and each CBR datagram counts
#: for in goodput.
DATAGRAM = 1000


@dataclass
class Direction:
    attempts: int = 0
    delivered: int = 0
    packets: int = 0
    rts: int = 0
    cts: int = 0
    retry_drops: int = 0
    spans_ms: list[float] = field(default_factory=list)

    @property
    def delivery(self) -> float:
        return self.delivered / self.attempts if self.attempts else math.nan

    @property
    def attempts_per_packet(self) -> float:
        return self.attempts / self.packets if self.packets else math.nan


@dataclass
class Measured:
    down: Direction
    up: Direction
    #: Goodput (Mbit/s) per phase name.
    goodput: dict[str, float]
    rtt_ms: list[float]


def phase_goodput(times: np.ndarray, segments: np.ndarray, s: Setting) -> dict[str, float]:
    """Mbit/s of 1000-byte datagrams per phase, from the times at which
    `segments` more datagrams were acknowledged (or delivered)."""
    out = {}
    for name, start, end in s.phases:
        inside = (times >= start) & (times < end)
        out[name] = float(segments[inside].sum()) * DATAGRAM * 8 / (end - start) / 1e6
    return out


# ----- ns-2 -----

#: Node ids in the generated scripts: the wired source, the AP, stations.
NS_SOURCE, NS_AP = 0, 1


def _ns_direction(
    mac: pd.DataFrame, senders: list[int], receiver: int, types: set[str]
) -> Direction:
    d = Direction()
    sent = mac[(mac["event"] == "s") & mac["node"].isin(senders) & mac["type"].isin(types)]
    d.attempts = len(sent)
    d.packets = int(sent["uid"].nunique())
    at_receiver = mac[(mac["node"] == receiver) & mac["type"].isin(types)]
    d.delivered = int(
        (
            (at_receiver["event"] == "r")
            | ((at_receiver["event"] == "d") & (at_receiver["reason"] == "DUP"))
        ).sum()
    )
    drops = mac[
        (mac["event"] == "d")
        & mac["node"].isin(senders)
        & (mac["reason"] == "RET")
        & mac["type"].isin(types)
    ]
    d.retry_drops = int(drops["uid"].nunique())
    dropped = set(drops["uid"])
    # Control frames carry no type: an ACK has duration 0 (-Ma 0), an RTS
    # and a CTS do not; a CTS is the answer, SIFS after an RTS ended there.
    # ARP's frames carry no type either: their ethertype (-Mt 806) tells
    # them apart, else the AP's ARP reply, SIFS after the station's CTS,
    # would count as a CTS.
    control = mac[mac["type"].isna() & (mac["duration"] > 0) & (mac["ethertype"] == "0")]
    control = control.sort_values(["node", "t"])
    previous = control.groupby("node")[["event", "t"]].shift()
    is_cts = (
        (control["event"] == "s")
        & (previous["event"] == "r")
        & ((control["t"] - previous["t"]) < 15e-6)
    )
    sends = control["event"] == "s"
    d.cts = int((is_cts & (control["node"] == receiver)).sum())
    d.rts = int((sends & ~is_cts & control["node"].isin(senders)).sum())
    spans = sent[~sent["uid"].isin(dropped)].groupby("uid")["t"].agg(["min", "max"])
    d.spans_ms = list((spans["max"] - spans["min"]) * 1e3)
    return d


def from_ns2(trace: Path, s: Setting) -> Measured:
    """The measures of an ns-2 run from its trace file."""
    frame = ns2.parse_trace(trace)
    mac = frame[frame["layer"] == "MAC"]
    stations = [NS_AP + 1 + i for i in range(len(s.stations))]
    if s.traffic == "tcp":
        down = _ns_direction(mac, [NS_AP], stations[0], {"tcp"})
        up = _ns_direction(mac, [stations[0]], NS_AP, {"ack"})
        wired = ns2.parse_wired(trace)
        goodput, rtt = _ns_tcp(wired, s)
    else:
        down = Direction()
        up = _ns_direction(mac, stations, NS_AP, {"cbr"})
        agt = frame[(frame["layer"] == "AGT") & (frame["event"] == "r") & (frame["node"] == NS_AP)]
        agt = agt[agt["type"] == "cbr"]
        goodput = phase_goodput(agt["t"].to_numpy(), np.ones(len(agt)), s)
        rtt = []
    return Measured(down, up, goodput, rtt)


def _ns_tcp(wired: pd.DataFrame, s: Setting) -> tuple[dict[str, float], list[float]]:
    data = wired[(wired["event"] == "+") & (wired["src"] == NS_SOURCE) & (wired["type"] == "tcp")]
    acks = wired[(wired["event"] == "r") & (wired["dst"] == NS_SOURCE) & (wired["type"] == "ack")]
    sends = data.groupby("seq")["t"].agg(["first", "size"])
    times, steps, rtt = [], [], []
    highest = -1
    for row in acks.itertuples():
        if row.seq <= highest:
            continue
        times.append(row.t)
        steps.append(row.seq - highest)
        highest = row.seq
        if row.seq in sends.index and sends.at[row.seq, "size"] == 1:
            rtt.append((row.t - sends.at[row.seq, "first"]) * 1e3)
    return phase_goodput(np.array(times), np.array(steps, dtype=float), s), rtt


# ----- rtolab -----


def from_rtolab(report: Any, traces: pd.DataFrame, s: Setting) -> Measured:
    """The measures of an rtolab run from its report and traces."""
    link = next(lk for lk in report["links"] if lk.get("name") == "wlan")
    members = {m["host"]: m for m in link["stats"]["members"]}
    names = [f"st{i}" for i in range(len(s.stations))]
    attempts = _events(traces, "mac_attempt")
    dropped = _events(traces, "packet_dropped")
    if s.traffic == "tcp":
        down = _rtolab_direction(members, attempts, dropped, ["ap"], names[0])
        up = _rtolab_direction(members, attempts, dropped, [names[0]], "ap")
        goodput, rtt = _rtolab_tcp(traces, s)
    else:
        down = Direction()
        up = _rtolab_direction(members, attempts, dropped, names, "ap")
        received = _events(traces, "datagram_received")
        received = received[received["node_name"] == "ap"] if "node_name" in received else received
        times = received["t_s"].to_numpy(dtype=float) if len(received) else np.array([])
        goodput = phase_goodput(times, np.ones(len(times)), s)
        rtt = []
    return Measured(down, up, goodput, rtt)


def _events(traces: pd.DataFrame, kind: str) -> pd.DataFrame:
    from rtolab.plots import events

    return events(traces, kind)


def _rtolab_direction(
    members: dict[str, Any],
    attempts: pd.DataFrame,
    dropped: pd.DataFrame,
    senders: list[str],
    receiver: str,
) -> Direction:
    d = Direction()
    d.attempts = sum(int(members[h]["data_attempts"]) for h in senders)
    d.rts = sum(int(members[h]["rts_sent"]) for h in senders)
    d.retry_drops = sum(int(members[h]["dropped_retry_limit"]) for h in senders)
    d.delivered = int(members[receiver]["received"]) + int(members[receiver]["duplicates"])
    d.cts = int(members[receiver]["cts_sent"])
    mine = attempts[attempts["node_name"].isin(senders)] if len(attempts) else attempts
    d.packets = int(mine["packet"].nunique()) if len(mine) else 0
    lost = set()
    if len(dropped):
        lost = set(
            dropped[(dropped["reason"] == "no_ack") & dropped["node_name"].isin(senders)]["packet"]
        )
    if len(mine):
        ok = mine[~mine["packet"].isin(lost)]
        spans = ok.groupby("packet")["t_s"].agg(["min", "max"])
        d.spans_ms = list((spans["max"] - spans["min"]) * 1e3)
    return d


def _rtolab_tcp(traces: pd.DataFrame, s: Setting) -> tuple[dict[str, float], list[float]]:
    from rtolab.experiments.timelost import acked_bytes, rtt_samples

    acked = acked_bytes(traces, "source")
    segments = acked["bytes"].to_numpy(dtype=float) / segment_data(s.cc)
    goodput = phase_goodput(acked["t_s"].to_numpy(dtype=float), segments, s)
    samples = rtt_samples(traces, "source")
    return goodput, list(samples["raw_s"] * 1e3)
