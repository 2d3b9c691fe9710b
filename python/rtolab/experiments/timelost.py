"""The timelost study's experiment (docs/spec/timelost.md, docs/timelost.md):
tables, figures and the report, from per-run summaries.

A wired TCP source sends to a mobile sink behind an 802.11 access point;
the sink moves away from the AP from t = 0 to t = 150 s and stays near the
edge of coverage until t = 300 s (timelost spec §3). Each configuration of
:data:`CONFIGS` runs with many seeds (shadowing is random).

What one run shows is reduced to a small summary (:func:`run_summary`):
the sink's goodput in 1 s bins, the MAC retries of the data frames by the
mobile's distance, the echoed timelost, TCP retransmissions and timeouts.
From the summaries of every planned run this module writes
``DIR/timelost/throughput.csv`` (config, seed, t, throughput per 1 s bin),
``runs.csv`` (one row per run; a run that did not finish is flagged, never
dropped), ``phases.csv`` (per configuration and phase: n, mean, spread),
``claims.csv`` (the study's claims beside our numbers) and the figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from rtolab import outdir
from rtolab.experiments import (
    Check,
    Claim,
    Experiment,
    ExperimentRun,
    figure_html,
    option,
    register,
    save_figure,
    system_dir,
    write_table,
)
from rtolab.experiments.stats import spread

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

SYSTEM = "timelost"
#: The network settings. ``ns2`` is the study's (timelost spec §3): ns-2.35's
#: 802.11 with its defaults (1 Mbit/s, RTS/CTS before every frame: the
#: link's ``preset = "ns2"``) and its TCP hosts (the ``ns2`` profile);
#: ``802.11b`` is today's: 11 Mbit/s data without RTS/CTS and Linux-like
#: hosts, the shipped scenario as it is. Both share the topology, the
#: mobility and the propagation.
SETTINGS = ("ns2", "802.11b")
#: Prefix of a setting's configuration names (the study's has none).
PREFIX = {"ns2": "", "802.11b": "11b-"}
#: ns-2's TCP window: initial 2 packets (``windowInit_``), at most 20
#: (``window_``) of the ``ns2`` profile's 1000-byte MSS.
NS2_WINDOW = {"initial_window": {"segments": 2}, "max_window": 20000}
#: Each sender's congestion control in each setting: ns-2's Vegas (mean of
#: the round's samples, its thresholds) in the study's setting, Linux's
#: form in today's; the others with each setting's initial window.
SENDERS: dict[str, dict[str, dict[str, Any]]] = {
    "vegas": {"ns2": {"policy": "vegas_ns2"}, "802.11b": {"policy": "vegas"}},
    "reno": {
        "ns2": {"policy": "reno", **NS2_WINDOW},
        "802.11b": {"policy": "reno"},
    },
    "westwood": {
        "ns2": {"policy": "westwood", "window": NS2_WINDOW},
        "802.11b": {"policy": "westwood"},
    },
    "tibet": {
        "ns2": {"policy": "tibet", "window": NS2_WINDOW},
        "802.11b": {"policy": "tibet"},
    },
}


#: TCP settings a sender needs beyond its congestion control. ns-2's Vegas
#: agent sends its packets itself (``VegasTcpAgent::output``) without
#: adding the 40 header bytes the other agents add to ``packetSize_``, so
#: its packets are 1000 bytes where Reno's are 1040: an MSS of 960 (the
#: ``ns2`` profile's is 1000).
SENDER_TCP: dict[tuple[str, str], dict[str, Any]] = {("vegas", "ns2"): {"mss": 960}}


def _configs() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for setting in SETTINGS:
        for sender, cc in SENDERS.items():
            for corrected in (False, True):
                name = f"{PREFIX[setting]}{sender}{'-timelost' if corrected else ''}"
                out[name] = {
                    "setting": setting,
                    "sender": sender,
                    "tcp": {
                        "cc": cc[setting],
                        **SENDER_TCP.get((sender, setting), {}),
                        "timelost": True,
                        "rtt_correction": corrected,
                    },
                }
    return out


#: Every configuration: a setting, a sender and whether it corrects its RTT
#: samples. Every one agrees the option, so packets are the same size in all
#: of them; only the ``-timelost`` ones remove the echoed time from their
#: samples (the RTO's included).
CONFIGS: dict[str, dict[str, Any]] = _configs()
#: (without, with the correction) of every sender in every setting.
PAIRS: tuple[tuple[str, str], ...] = tuple(
    (f"{PREFIX[s]}{sender}", f"{PREFIX[s]}{sender}-timelost")
    for s in SETTINGS
    for sender in SENDERS
)
#: The study's mobility (timelost spec §3): moving until 150 s, then still.
STOP_S = 150.0
DURATION_S = 300.0
#: Phases of runs.csv: near the AP, moving towards the edge, at the edge.
PHASES: dict[str, tuple[float, float]] = {
    "before_100s": (0.0, 100.0),
    "100_150s": (100.0, STOP_S),
    "after_150s": (STOP_S, math.inf),
}
BIN_S = 1.0
#: Width of the distance bins of the retries-against-distance figure.
DISTANCE_BIN_M = 5.0

RUN_COLUMNS = (
    "config",
    "seed",
    "finished",
    "duration_s",
    *(f"throughput_mbps_{p}" for p in PHASES),
    "mac_attempts",
    "mac_retries",
    "mean_timelost_ms",
    "tcp_retransmissions",
    "rto_expirations",
)
THROUGHPUT_COLUMNS = ("config", "seed", "t_s", "throughput_mbps")
DISTANCE_COLUMNS = ("config", "seed", "distance_m", "frames", "retries")


# ----- one run -----


def with_config(base: str, config: str) -> str:
    """The TOML of ``base`` (a scenario with one ``tcp-bulk`` source and its
    ``tcp-sink``) with ``config``'s TCP settings on the source's host and
    the timelost option on the sink's host too (the option is agreed only
    when both SYNs carry it), and no captures. In the ``ns2`` setting both
    hosts run the ``ns2`` profile and every wifi link ns-2's MAC."""
    import tomllib

    from rtolab.scenario import toml_text

    if config not in CONFIGS:
        raise ValueError(f"config: one of {', '.join(CONFIGS)}, got {config!r}")
    data = tomllib.loads(base)
    apps = data.get("app", [])
    sources = [a for a in apps if a.get("kind") == "tcp-bulk"]
    sinks = [a for a in apps if a.get("kind") == "tcp-sink"]
    if len(sources) != 1 or len(sinks) != 1:
        raise ValueError("the scenario needs exactly one tcp-bulk and one tcp-sink app")
    spec = CONFIGS[config]
    settings = spec["tcp"]
    ns2 = spec["setting"] == "ns2"
    sink_settings = {"timelost": bool(settings["timelost"])}
    for host in data.get("host", []):
        if host.get("name") == sources[0]["host"]:
            host["tcp"] = {**host.get("tcp", {}), **settings}
        elif host.get("name") == sinks[0]["host"]:
            host["tcp"] = {**host.get("tcp", {}), **sink_settings}
        else:
            continue
        if ns2:
            # ns-2's TCP; its sink sends one ACK per segment and no window
            # updates.
            host["profile"] = "ns2"
    if ns2:
        for link in data.get("link", []):
            if link.get("kind") == "wifi":
                queue = link.get("mac", {}).get("queue")
                link["mac"] = {"preset": "ns2", **({"queue": queue} if queue else {})}
    data["name"] = f"{data.get('name', 'timelost')}-{config}"
    data.pop("capture", None)
    return toml_text(data)


def rtt_samples(traces: pd.DataFrame | Result, node: str) -> pd.DataFrame:
    """``node``'s RTT samples (from a traces table or a run's result):
    ``t_s``, ``raw_s``, ``timelost_s`` (what the
    ACK echoed, 0 without the option) and ``corrected_s`` (raw minus the
    echo, never below zero, whether or not the host used it). Samples of
    retransmitted segments are left out: the trace records them for the
    timers that use them (Lim's weak samples), but which transmission an
    ACK answers is ambiguous (Karn), so they measure no round trip."""
    from rtolab.plots import events

    rows = events(traces, "rtt_sample")
    if "node_name" in rows:
        rows = rows[rows["node_name"] == node]
    if "retransmitted" in rows:
        rows = rows[~rows["retransmitted"].astype("boolean").fillna(False).astype(bool)]
    raw = rows["raw"].astype(float) / 1e9 if "raw" in rows else pd.Series(dtype=float)
    echoed = (
        rows["timelost"].astype(float).fillna(0.0) / 1e9
        if "timelost" in rows
        else pd.Series(0.0, index=rows.index)
    )
    return pd.DataFrame(
        {
            "t_s": rows["t_s"].astype(float) if "t_s" in rows else pd.Series(dtype=float),
            "raw_s": raw,
            "timelost_s": echoed,
            "corrected_s": (raw - echoed).clip(lower=0.0),
        }
    ).reset_index(drop=True)


def throughput_bins(
    t_s: Sequence[float] | np.ndarray,
    nbytes: Sequence[int] | np.ndarray,
    duration_s: float,
    bin_s: float = BIN_S,
) -> np.ndarray:
    """Goodput in Mbit/s per ``bin_s`` bin from 0 to ``duration_s``, from
    the times and sizes of what the sink received; a last partial bin
    counts over its own length."""
    n = max(math.ceil(duration_s / bin_s - 1e-9), 0)
    t = np.asarray(t_s, dtype=float)
    b = np.asarray(nbytes, dtype=float)
    inside = (t >= 0) & (t < duration_s)
    index = np.minimum((t[inside] // bin_s).astype(int), max(n - 1, 0))
    total = np.bincount(index, weights=b[inside], minlength=n)[:n]
    widths = np.minimum(bin_s, duration_s - np.arange(n) * bin_s)
    return np.asarray(total * 8 / widths / 1e6, dtype=float)


def retries_by_distance(
    distance_m: Sequence[float] | np.ndarray,
    retries: Sequence[int] | np.ndarray,
    width_m: float = DISTANCE_BIN_M,
) -> list[tuple[float, int, int]]:
    """(bin's lower edge, frames, retries) per ``width_m`` bin of the
    receiver's distance, for the bins that hold frames."""
    d = np.asarray(distance_m, dtype=float)
    r = np.asarray(retries, dtype=int)
    if d.size == 0:
        return []
    edges = np.floor(d / width_m) * width_m
    frame = pd.DataFrame({"edge": edges, "retries": r})
    grouped = frame.groupby("edge")["retries"].agg(["size", "sum"])
    return [(float(e), int(n), int(s)) for e, (n, s) in grouped.iterrows()]


@dataclass(frozen=True)
class RunSummary:
    """What one run shows, as written beside its files."""

    config: str
    seed: int
    #: Whether the run reached its planned end.
    finished: bool
    duration_s: float
    #: Goodput per 1 s bin (Mbit/s).
    throughput_mbps: tuple[float, ...]
    #: (distance bin, data frames, MAC retries) of the AP's data frames,
    #: from a capture (empty without one).
    retries_by_distance: tuple[tuple[float, int, int], ...]
    #: The link's counters: data frames sent (every attempt) and retries.
    mac_attempts: int
    mac_retries: int
    #: Mean of the timelost the ACKs echoed (ms), ``nan`` without samples.
    mean_timelost_ms: float
    tcp_retransmissions: int
    rto_expirations: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "config": self.config,
            "seed": self.seed,
            "finished": self.finished,
            "duration_s": self.duration_s,
            "throughput_mbps": list(self.throughput_mbps),
            "retries_by_distance": [list(r) for r in self.retries_by_distance],
            "mac_attempts": self.mac_attempts,
            "mac_retries": self.mac_retries,
            "mean_timelost_ms": self.mean_timelost_ms,
            "tcp_retransmissions": self.tcp_retransmissions,
            "rto_expirations": self.rto_expirations,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        """Reads :meth:`to_dict`'s form back."""
        return cls(
            config=str(data["config"]),
            seed=int(data["seed"]),
            finished=bool(data["finished"]),
            duration_s=float(data["duration_s"]),
            throughput_mbps=tuple(float(x) for x in data["throughput_mbps"]),
            retries_by_distance=tuple(
                (float(d), int(n), int(r)) for d, n, r in data["retries_by_distance"]
            ),
            mac_attempts=int(data["mac_attempts"]),
            mac_retries=int(data["mac_retries"]),
            mean_timelost_ms=float(data["mean_timelost_ms"]),
            tcp_retransmissions=int(data["tcp_retransmissions"]),
            rto_expirations=int(data["rto_expirations"]),
        )


def run_summary(
    config: str,
    seed: int,
    *,
    planned_s: float,
    duration_s: float,
    received: pd.DataFrame,
    frames: pd.DataFrame,
    echoed_timelost_s: Sequence[float] | np.ndarray,
    mac_attempts: int,
    mac_retries: int,
    tcp_retransmissions: int,
    rto_expirations: int,
) -> RunSummary:
    """A run's summary from what it recorded: ``received`` (``t_s``,
    ``bytes``: what the sink application read), ``frames`` (``distance_m``,
    ``retries``: one row per data frame the AP sent the mobile), the
    timelost values the source's ACKs echoed, and the source's counters.
    ``duration_s`` is how far the run got, ``planned_s`` where it was to end."""
    echoed = np.asarray(echoed_timelost_s, dtype=float)
    return RunSummary(
        config=config,
        seed=seed,
        finished=bool(duration_s >= planned_s - 1e-9),
        duration_s=float(duration_s),
        throughput_mbps=tuple(
            float(x) for x in throughput_bins(received["t_s"], received["bytes"], duration_s)
        ),
        retries_by_distance=tuple(
            retries_by_distance(frames["distance_m"], frames["retries"], DISTANCE_BIN_M)
        ),
        mac_attempts=int(mac_attempts),
        mac_retries=int(mac_retries),
        mean_timelost_ms=float(echoed.mean() * 1e3) if echoed.size else math.nan,
        tcp_retransmissions=int(tcp_retransmissions),
        rto_expirations=int(rto_expirations),
    )


# ----- the study's scenario -----

#: The study's topology as shipped (scenarios/wifi-timelost.toml).
BASE_SCENARIO = "wifi-timelost"
SOURCE, SINK, AP, WLAN = "source", "sink", "ap", "wlan"
#: Capture of the AP's radio (802.11 frames behind radiotap), for MAC
#: retries against distance.
CAPTURE_FILE = "ap-wlan.pcap"
#: Seeds per configuration unless ``--seeds`` says otherwise.
DEFAULT_SEEDS = 10
#: Written beside each run's files by its worker.
SUMMARY_FILE = "timelost.json"
#: A data frame carrying a full TCP segment is longer than this (bytes of
#: the captured frame); ACKs are far shorter.
DATA_FRAME_MIN = 500


def seeds() -> list[int]:
    """Seeds of every configuration: 1..N (``--seeds``)."""
    return list(range(1, int(option("seeds", DEFAULT_SEEDS)) + 1))


def duration_s() -> float:
    """Simulated seconds of every run (``--duration``, default 300)."""
    return float(option("duration", DURATION_S))


def scenario(config: str, duration: float | None = None, capture: bool = False) -> str:
    """One configuration's runs: the shipped study scenario with the
    configuration's TCP settings, ``duration`` seconds long, and a capture
    of the AP's radio when ``capture``."""
    import tomllib

    from rtolab.api import shipped_scenarios
    from rtolab.scenario import toml_text

    data = tomllib.loads(with_config(shipped_scenarios()[BASE_SCENARIO], config))
    data["duration"] = f"{duration_s() if duration is None else duration:g}s"
    if capture:
        data["capture"] = [{"host": AP, "link": WLAN, "file": CAPTURE_FILE}]
    return toml_text(data)


def runs() -> list[ExperimentRun]:
    """Every configuration with every seed; the first seed of each Vegas
    configuration also captures the AP's radio (the retries-against-distance
    figure)."""
    plan = []
    first = seeds()[0] if seeds() else None
    for config, spec in CONFIGS.items():
        for seed in seeds():
            capture = seed == first and spec["sender"] == "vegas"
            text = scenario(config, capture=capture)
            params = {"config": config, "duration_s": duration_s()}
            plan.append(ExperimentRun(f"{config}-seed{seed}", text, seed=seed, params=params))
    return plan


def acked_bytes(traces: pd.DataFrame | Result, node: str) -> pd.DataFrame:
    """What ``node``'s connection had acknowledged over time (``t_s``,
    ``bytes`` newly acknowledged), from the oldest unacknowledged sequence
    number its retransmission timer guards each time it is armed (from a
    traces table or a run's result); the sequence space is unwrapped (it
    may pass 2^32 once in a long run)."""
    from rtolab.plots import events

    armed = events(traces, "rto_armed", ["t_s", "node_name", "seq"])
    armed = armed[armed["node_name"] == node].dropna(subset=["seq"])
    if armed.empty:
        return pd.DataFrame({"t_s": [], "bytes": []})
    seq = armed["seq"].to_numpy(dtype=np.uint64).astype(np.int64)
    step = np.diff(seq) % (1 << 32)
    # The guarded segment never moves back: a step above 2^31 in modular
    # arithmetic would be a move back, and counts nothing.
    step = np.where(step > (1 << 31), 0, step)
    return pd.DataFrame({"t_s": armed["t_s"].to_numpy(dtype=float)[1:], "bytes": step})


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


def seconds(value: str | float) -> float:
    """A scenario's duration (``"150s"``, ``"250ms"``, or a number of
    seconds) in seconds."""
    if isinstance(value, int | float):
        return float(value)
    import re

    match = re.fullmatch(r"\s*([0-9_.]+)\s*([a-zµ]+)\s*", value)
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"not a duration: {value!r}")
    return float(match.group(1).replace("_", "")) * _UNITS[match.group(2)]


def distance_at(
    waypoints: Sequence[dict[str, Any]], ap: dict[str, float], t_s: np.ndarray
) -> np.ndarray:
    """The station's distance from the AP at times ``t_s``, moving in a
    straight line between waypoints (``at``, ``x``, ``y``) and staying at
    the last one."""
    at = np.array([seconds(w["at"]) for w in waypoints], dtype=float)
    x = np.interp(t_s, at, [float(w["x"]) for w in waypoints])
    y = np.interp(t_s, at, [float(w.get("y", 0.0)) for w in waypoints])
    return np.asarray(np.hypot(x - ap.get("x", 0.0), y - ap.get("y", 0.0)), dtype=float)


def captured_data_frames(pcap: Path) -> pd.DataFrame:
    """(``t_s``, ``retry``) of every long data frame in an 802.11 capture
    (:func:`rtolab.frames.read_wlan_capture`; the same frames as
    Wireshark's ``wlan.fc.type == 2 && frame.len > DATA_FRAME_MIN``)."""
    from rtolab.frames import read_wlan_capture

    frames = read_wlan_capture(pcap)
    data = frames[frames["kind"].eq("data") & (frames["len"] > DATA_FRAME_MIN)]
    return pd.DataFrame(
        {"t_s": data["time_s"].to_numpy(), "retry": data["retry"].to_numpy(dtype=bool)}
    )


def summarise(result: Result, params: dict[str, Any]) -> RunSummary:
    """A run's :class:`RunSummary` from its report, traces and capture."""
    import tomllib

    report = result.report
    scenario_data = tomllib.loads(result.scenario) if result.scenario else {}
    frames = pd.DataFrame({"distance_m": [], "retries": []})
    pcap = result.out_dir / CAPTURE_FILE if result.out_dir is not None else None
    if pcap is not None and pcap.is_file():
        captured = captured_data_frames(pcap)
        wlan = next(link for link in scenario_data.get("link", []) if link.get("name") == WLAN)
        if len(captured):
            station = next(s for s in wlan["stations"] if s["host"] == SINK)
            distance = distance_at(
                station["mobility"]["waypoints"],
                wlan["ap"].get("position", {}),
                captured["t_s"].to_numpy(),
            )
            # One row per attempt on air; a retry is an attempt with the
            # Retry bit, so retries per row is the share of attempts that
            # repeat a frame.
            frames = pd.DataFrame(
                {"distance_m": distance, "retries": captured["retry"].astype(int).to_numpy()}
            )
    stats = next((link["stats"] for link in report["links"] if link.get("name") == WLAN), {})
    ap_member = next((m for m in stats.get("members", []) if m.get("host") == AP), {})
    flows = [f for f in report["flows"] if f.get("host") == SOURCE]
    # Each family read on its own from the run's tables, not the whole trace.
    received = acked_bytes(result, SOURCE)
    return run_summary(
        str(params["config"]),
        result.seed,
        planned_s=float(params["duration_s"]),
        duration_s=float(report["duration_s"]),
        received=received,
        frames=frames,
        echoed_timelost_s=rtt_samples(result, SOURCE)["timelost_s"].to_numpy(),
        mac_attempts=int(ap_member.get("data_attempts", 0)),
        mac_retries=int(ap_member.get("retries", 0)),
        tcp_retransmissions=sum(int(f["retransmissions"]) for f in flows),
        rto_expirations=sum(int(f["timeouts"]) for f in flows),
    )


#: The run whose RTT samples the report draws (``rtt.csv``), by configuration.
RTT_FIGURE_CONFIG = "vegas-timelost"


def analyse(result: Result, params: dict[str, Any]) -> None:
    """Writes :func:`summarise` into the run's directory (on the worker),
    and the source's RTT samples (``rtt.csv``, over 1 MB) for the run the
    figure draws."""
    if result.out_dir is None:
        return
    summary = summarise(result, params)
    outdir.write_text(result.out_dir, SUMMARY_FILE, json.dumps(summary.to_dict()) + "\n")
    if params["config"] == RTT_FIGURE_CONFIG and result.seed == seeds()[0]:
        write_table(rtt_samples(result, SOURCE), result.out_dir / "rtt.csv")


# ----- tables -----


def phase_mean(bins: Sequence[float], start_s: float, end_s: float) -> float:
    """Mean goodput over the 1 s bins inside [start, end); ``nan`` when the
    run has none there."""
    x = np.asarray(bins, dtype=float)
    lo = int(start_s / BIN_S)
    hi = len(x) if math.isinf(end_s) else min(int(end_s / BIN_S), len(x))
    part = x[lo:hi]
    return float(part.mean()) if part.size else math.nan


def tables(
    planned: Iterable[tuple[str, int]], summaries: dict[tuple[str, int], RunSummary]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``runs.csv``, ``throughput.csv`` and the retries-by-distance table,
    one row (or bin) per planned run in plan order. A planned run without a
    summary (it failed) keeps its config, seed and ``finished = False``."""
    runs: list[dict[str, Any]] = []
    bins: list[dict[str, Any]] = []
    distance: list[dict[str, Any]] = []
    for config, seed in planned:
        s = summaries.get((config, seed))
        if s is None:
            runs.append({"config": config, "seed": seed, "finished": False})
            continue
        row: dict[str, Any] = {
            "config": config,
            "seed": seed,
            "finished": s.finished,
            "duration_s": s.duration_s,
        }
        for phase, (start, end) in PHASES.items():
            row[f"throughput_mbps_{phase}"] = phase_mean(s.throughput_mbps, start, end)
        row["mac_attempts"] = s.mac_attempts
        row["mac_retries"] = s.mac_retries
        row["mean_timelost_ms"] = s.mean_timelost_ms
        row["tcp_retransmissions"] = s.tcp_retransmissions
        row["rto_expirations"] = s.rto_expirations
        runs.append(row)
        bins += [
            {"config": config, "seed": seed, "t_s": i * BIN_S, "throughput_mbps": v}
            for i, v in enumerate(s.throughput_mbps)
        ]
        distance += [
            {"config": config, "seed": seed, "distance_m": d, "frames": n, "retries": r}
            for d, n, r in s.retries_by_distance
        ]
    frame = pd.DataFrame(runs, columns=list(RUN_COLUMNS))
    frame["finished"] = frame["finished"].astype(bool)
    return (
        frame,
        pd.DataFrame(bins, columns=list(THROUGHPUT_COLUMNS)),
        pd.DataFrame(distance, columns=list(DISTANCE_COLUMNS)),
    )


def phase_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and phase, over the finished runs: n, mean, sd,
    min, max and 95 % CI of the mean goodput; and the runs left out."""
    rows = []
    for config, group in runs.groupby("config", sort=False):
        done = group[group["finished"]]
        for phase in PHASES:
            row: dict[str, Any] = {"config": config, "phase": phase, "planned": len(group)}
            row.update(spread(done[f"throughput_mbps_{phase}"]))
            row["unfinished"] = len(group) - len(done)
            rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[
            "config",
            "phase",
            "planned",
            "n",
            "mean",
            "sd",
            "min",
            "max",
            "ci95",
            "unfinished",
        ],
    )


def difference(a: pd.Series, b: pd.Series) -> tuple[float, float, float]:
    """Mean of ``a`` minus mean of ``b`` with its 95 % confidence interval
    (Welch's normal approximation): (difference, low, high)."""
    sa, sb = spread(a), spread(b)
    d = sa["mean"] - sb["mean"]
    if sa["n"] < 2 or sb["n"] < 2:
        return d, math.nan, math.nan
    half = 1.96 * math.sqrt(sa["sd"] ** 2 / sa["n"] + sb["sd"] ** 2 / sb["n"])
    return d, d - half, d + half


#: The study's claims (timelost spec §3), each tested on a pair of
#: configurations (with the correction, without) and a phase.
CLAIMS = (
    (
        "near the AP (before 100 s) the curves are identical",
        "before_100s",
        "the 95 % CI of the difference contains 0",
    ),
    (
        "moving towards the edge (100-150 s) timelost gains",
        "100_150s",
        "the 95 % CI of the gain is above 0",
    ),
    (
        "stationary at the edge (after 150 s) timelost gains, most of all phases",
        "after_150s",
        "the 95 % CI of the gain is above 0 and the gain is the largest of the three phases",
    ),
)


def claims(
    runs: pd.DataFrame, base: str = "vegas", corrected: str = "vegas-timelost"
) -> pd.DataFrame:
    """Each claim of :data:`CLAIMS` for ``corrected`` against ``base``:
    both means, the gain and its 95 % CI, n of each, and whether it holds
    (``None`` when too few finished runs to tell)."""
    done = runs[runs["finished"]]
    gains: dict[str, tuple[float, float, float]] = {}
    for phase in PHASES:
        column = f"throughput_mbps_{phase}"
        gains[phase] = difference(
            done.loc[done["config"] == corrected, column], done.loc[done["config"] == base, column]
        )
    rows = []
    for text, phase, criterion in CLAIMS:
        column = f"throughput_mbps_{phase}"
        a = spread(done.loc[done["config"] == corrected, column])
        b = spread(done.loc[done["config"] == base, column])
        gain, low, high = gains[phase]
        holds: bool | None
        if math.isnan(low):
            holds = None
        elif phase == "before_100s":
            holds = bool(low <= 0 <= high)
        elif phase == "after_150s":
            holds = bool(low > 0 and all(gain >= g for g, _, _ in gains.values()))
        else:
            holds = bool(low > 0)
        rows.append(
            {
                "claim": text,
                "criterion": criterion,
                "base": base,
                "corrected": corrected,
                "base_mbps": b["mean"],
                "corrected_mbps": a["mean"],
                "gain_mbps": gain,
                "gain_ci95_low": low,
                "gain_ci95_high": high,
                "n_base": b["n"],
                "n_corrected": a["n"],
                "holds": holds,
            }
        )
    return pd.DataFrame(rows)


# ----- figures -----


def _colours() -> dict[str, str]:
    from rtolab.plots import PALETTE

    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(CONFIGS)}


def throughput_figure(bins: pd.DataFrame, configs: Sequence[str]) -> Figure:
    """Goodput over time per configuration: the mean over seeds and the
    band between the 10th and 90th percentiles, with n."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    colour = _colours()
    for config in configs:
        rows = bins[bins["config"] == config]
        if rows.empty:
            continue
        grouped = rows.groupby("t_s")["throughput_mbps"]
        t = np.array(sorted(grouped.groups), dtype=float)
        mean = grouped.mean().reindex(t).to_numpy()
        low = grouped.quantile(0.1).reindex(t).to_numpy()
        high = grouped.quantile(0.9).reindex(t).to_numpy()
        n = rows["seed"].nunique()
        ax.plot(t, mean, color=colour.get(config), lw=1.2, label=f"{config} (mean, n = {n})")
        ax.fill_between(t, low, high, color=colour.get(config), alpha=0.2, lw=0)
    ax.axvline(STOP_S, color="0.4", ls="--", lw=0.8)
    ax.annotate("mobile stops", (STOP_S, 0), xytext=(4, 4), textcoords="offset points", fontsize=8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("goodput (Mbit/s, 1 s bins)")
    ax.set_title("Throughput over time: mean over seeds, 10th-90th percentile band")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def rtt_figure(samples: pd.DataFrame, title: str) -> Figure:
    """One run's RTT samples (``t_s``, ``raw_s``, ``corrected_s``;
    corrected = raw minus the echoed timelost) in two panels that hide
    nothing: the distributions of the raw and corrected samples before and
    after the mobile stops (empirical CDFs, lines, so neither covers the
    other), and what the correction removed from each sample over time."""
    import matplotlib.pyplot as plt

    fig, (cdf, diff) = plt.subplots(1, 2, figsize=(11, 4.5))
    raw_ms = samples["raw_s"].to_numpy(dtype=float) * 1e3
    corrected_ms = samples["corrected_s"].to_numpy(dtype=float) * 1e3
    t = samples["t_s"].to_numpy(dtype=float)
    colours = {"raw": "C0", "corrected": "C1"}
    for phase, inside, style in (
        (f"before {STOP_S:g} s", t < STOP_S, ":"),
        (f"after {STOP_S:g} s", t >= STOP_S, "-"),
    ):
        for name, values in (("raw", raw_ms[inside]), ("corrected", corrected_ms[inside])):
            if values.size == 0:
                continue
            x = np.sort(values)
            y = np.arange(1, x.size + 1) / x.size
            cdf.step(
                x,
                y,
                where="post",
                ls=style,
                color=colours[name],
                label=f"{name}, {phase} (n = {x.size}, median {np.median(x):.1f} ms)",
            )
    cdf.set_xlabel("RTT sample (ms)")
    cdf.set_ylabel("share of samples at or below")
    cdf.set_title("Raw and corrected samples")
    cdf.grid(alpha=0.3)
    cdf.legend(fontsize="x-small", loc="lower right")
    removed_ms = raw_ms - corrected_ms
    diff.plot(t, removed_ms, ".", ms=2, alpha=0.6, color="C2")
    diff.axvline(STOP_S, color="0.4", ls="--", lw=0.8)
    nonzero = int((removed_ms > 0).sum())
    diff.set_title(
        f"Removed by the correction: {nonzero} of {removed_ms.size} samples, "
        f"mean {removed_ms.mean() if removed_ms.size else 0:.2f} ms"
    )
    diff.set_xlabel("time (s)")
    diff.set_ylabel("raw - corrected (ms)")
    diff.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def retries_figure(distance: pd.DataFrame) -> Figure:
    """MAC retries per data frame against the mobile's distance, over every
    run: the mean over runs per distance bin and its min-max over runs."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colour = _colours()
    for config, rows in distance.groupby("config", sort=False):
        per_run = rows.assign(rate=rows["retries"] / rows["frames"].where(rows["frames"] > 0))
        grouped = per_run.groupby("distance_m")["rate"]
        d = np.array(sorted(grouped.groups), dtype=float)
        mean = grouped.mean().reindex(d).to_numpy()
        low = grouped.min().reindex(d).to_numpy()
        high = grouped.max().reindex(d).to_numpy()
        x = d + DISTANCE_BIN_M / 2
        ax.errorbar(
            x,
            mean,
            yerr=[mean - low, high - mean],
            fmt="o-",
            ms=3,
            capsize=2,
            color=colour.get(str(config)),
            label=f"{config} (n = {rows['seed'].nunique()})",
        )
    ax.set_xlabel(f"distance from the AP (m, {DISTANCE_BIN_M:g} m bins)")
    ax.set_ylabel("share of data-frame attempts that are retries")
    ax.set_title("MAC retries against distance")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


# ----- writing it out -----


def write_outputs(
    out: Path,
    planned: Sequence[tuple[str, int]],
    summaries: dict[tuple[str, int], RunSummary],
    rtt_samples: pd.DataFrame | None = None,
    rtt_title: str = "",
) -> dict[str, pd.DataFrame]:
    """Writes the tables and figures into ``out`` (``DIR/timelost``):
    ``runs.csv``, ``throughput.csv``, ``retries_by_distance.csv``,
    ``phases.csv``, ``claims.csv`` (Vegas, and Reno for contrast) and
    ``figures/*.png``; returns the tables."""
    runs, bins, distance = tables(planned, summaries)
    phases = phase_table(runs)
    present = set(runs["config"])
    claim_rows = pd.concat(
        [claims(runs, base, corrected) for base, corrected in PAIRS if base in present]
        or [claims(runs)],
        ignore_index=True,
    )
    write_table(runs, out / "runs.csv")
    write_table(bins, out / "throughput.csv")
    write_table(distance, out / "retries_by_distance.csv")
    write_table(phases, out / "phases.csv")
    write_table(claim_rows, out / "claims.csv")
    figures = out / "figures"
    save_figure(
        throughput_figure(bins, ["vegas", "vegas-timelost"]), figures / "throughput-vegas.png"
    )
    save_figure(
        throughput_figure(bins, [c for c in CONFIGS if CONFIGS[c]["setting"] == "ns2"]),
        figures / "throughput-all.png",
    )
    save_figure(
        throughput_figure(bins, ["11b-vegas", "11b-vegas-timelost"]),
        figures / "throughput-vegas-802.11b.png",
    )
    save_figure(retries_figure(distance), figures / "retries-vs-distance.png")
    if rtt_samples is not None and len(rtt_samples):
        save_figure(rtt_figure(rtt_samples, rtt_title), figures / "rtt-raw-corrected.png")
    return {"runs": runs, "throughput": bins, "phases": phases, "claims": claim_rows}


def _verdict(holds: Any) -> str:
    if holds is None or (isinstance(holds, float) and math.isnan(holds)):
        return "too few runs to tell"
    return "holds" if bool(holds) else "does not hold"


def report_sections(directory: Path) -> list[str]:
    """The answer first (each claim with our numbers and whether it
    holds), then the phases, the figures and the per-run table collapsed."""
    from rtolab.reports import table_html

    base = directory / SYSTEM
    parts: list[str] = []
    path = base / "claims.csv"
    if path.is_file():
        frame = pd.read_csv(path)
        items = []
        for row in frame.itertuples():
            items.append(
                f"<li><b>{row.claim}</b> ({row.corrected} vs {row.base}): "
                f"{_verdict(row.holds)}; gain {row.gain_mbps:+.3f} Mbit/s "
                f"(95 % CI {row.gain_ci95_low:+.3f} to {row.gain_ci95_high:+.3f}; "
                f"n = {row.n_corrected} and {row.n_base}); criterion: {row.criterion}.</li>"
            )
        parts.append("<h3>The study's claims and our numbers</h3><ul>" + "".join(items) + "</ul>")
    path = base / "phases.csv"
    if path.is_file():
        parts.append(
            "<h3>Goodput per phase (finished runs: n, mean, sd, min, max, 95 % CI)</h3>"
            + table_html(pd.read_csv(path).round(4))
        )
    for png in sorted((base / "figures").glob("*.png")):
        parts.append(figure_html(png, directory))
    path = base / "runs.csv"
    if path.is_file():
        frame = pd.read_csv(path)
        unfinished = int((~frame["finished"].astype(bool)).sum())
        parts.append(
            f"<details><summary>runs.csv ({len(frame)} runs, {unfinished} unfinished)</summary>"
            + table_html(frame.round(4))
            + "</details>"
        )
    return parts


def checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes the tables and figures from every run's summary; checks that
    every planned run finished; the study's claims beside our numbers (as
    the report's headline table shows them)."""
    out = system_dir(results)
    if out is None:
        return [Check("runs completed", False, "no results")]
    plan = runs()
    summaries: dict[tuple[str, int], RunSummary] = {}
    for spec in plan:
        result = results.get(spec.label)
        if result is None or result.out_dir is None:
            continue
        path = result.out_dir / SUMMARY_FILE
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            summaries[(str(spec.params["config"]), spec.seed)] = RunSummary.from_dict(data)
        else:
            summaries[(str(spec.params["config"]), spec.seed)] = summarise(result, spec.params)
    first = plan[0].seed if plan else 1
    rtt = None
    label = f"{RTT_FIGURE_CONFIG}-seed{first}"
    rtt_dir = results[label].out_dir if label in results else None
    if rtt_dir is not None and (rtt_dir / "rtt.csv").is_file():
        rtt = pd.read_csv(rtt_dir / "rtt.csv")
    tables_ = write_outputs(
        out,
        [(str(r.params["config"]), r.seed) for r in plan],
        summaries,
        rtt,
        f"vegas-timelost, seed {first}: the source's RTT samples",
    )
    finished = int(tables_["runs"]["finished"].sum())
    verdicts: list[Check | Claim] = [
        Check("every planned run finished", finished == len(plan), f"{finished} of {len(plan)}")
    ]
    for row in tables_["claims"].itertuples():
        holds = None if row.holds is None or pd.isna(row.holds) else bool(row.holds)
        ours = (
            f"{row.corrected} {row.corrected_mbps:.3f} vs {row.base} {row.base_mbps:.3f} Mbit/s: "
            f"gain {row.gain_mbps:+.3f} (95 % CI {row.gain_ci95_low:+.3f} to "
            f"{row.gain_ci95_high:+.3f}; n = {row.n_corrected} and {row.n_base})"
        )
        verdicts.append(Claim(f"{row.claim} ({row.criterion})", ours, holds))
    return verdicts


register(
    Experiment(
        system=SYSTEM,
        name="vegas",
        title="Vegas, Reno, Westwood+ and TIBET with and without timelost on a mobile 802.11 sink",
        description=(
            "A wired source sends to a mobile sink behind an 802.11 access point; the sink "
            "moves to the edge of coverage until 150 s and stays there until 300 s. Vegas, "
            "Reno, Westwood+ and TIBET, each without and with RTT samples corrected by the "
            "timelost option, in the study's setting (ns-2's 802.11 and TCP) and in today's "
            "802.11b, many seeds. Writes throughput.csv, runs.csv, phases.csv and claims.csv."
        ),
        runs=runs,
        checks=checks,
        report=report_sections,
        options=("seeds", "duration"),
        parallel=True,
        analyse=analyse,
        # What summarise reads; the capture is read by analyse on the worker.
        trace_families=("tcp_rtt_sample", "tcp_rto_armed"),
        keep_captures=False,
        # The tables come from each run's summary (timelost.json).
        keep_traces=False,
    )
)
