"""The bridge study's experiments (bridge spec §4, docs/spec/bridge.md): TCP
over a time-slotted NFC link through a bridge, its two fixes, and Algorithm 1.

``rtolab reproduce bridge --out DIR`` runs them all and writes, in
``DIR/bridge/``:

* ``single_exchange.csv``: the single exchange at both rates, four NFC
  payload sizes, four configurations (``original``, ``sensing``,
  ``optimum_rto``, ``sensing+optimum_rto``) and several seeds;
* ``initial_rto_sweep.csv``: the single exchange without sensing for a
  range of initial RTOs;
* ``single_exchange_counts.csv`` and ``initial_rto_sweep_counts.csv``:
  retransmissions, duplicate ACKs and keep-alives in the study's form
  (``"2R+1DA"``);
* ``long_session.csv`` and ``long_session_packets.csv``: one connection
  carrying the study's session (runs of small messages, then a recipe; the
  ``cooking-session`` app), Van Jacobson's estimator (lwIP's) against
  Algorithm 1, with and without the modified delayed ACK;
  ``long_session_sweep.csv``: the same with one parameter of the session
  changed at a time;
* ``figures/*.png``; every run's captures of both sides are in
  ``DIR/bridge/<experiment>/<run>/`` (``nfc.pcap``: the appliance's NFC
  interface, ``ethernet.pcap``: the end-user device's Ethernet interface).

The model constants come from the spec alone (see :data:`MODES`); every
number in the files is computed from the captures and run reports.
``RTOLAB_BRIDGE_QUICK=1`` runs a reduced plan (what the tests use).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rtolab.experiments import (
    Check,
    Claim,
    Experiment,
    ExperimentRun,
    figure_html,
    register,
    save_figure,
    system_dir,
    write_table,
)
from rtolab.experiments.stats import seed_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

SYSTEM = "bridge"
#: The trace family the analysis reads (the rest comes from the captures,
#: which stay).
TRACE_FAMILIES = ("tcp_rto_armed",)

# ----- the model's constants (bridge spec §1.1-1.3, §3.2) -----

#: NFC payload bytes per 10 ms slot, by nominal rate in kbit/s.
MODES: dict[float, int] = {11.2: 10, 24.0: 26}
#: NFC protocol header bytes per slot.
SLOT_HEADER = 4
SLOT_PERIOD_S = 0.010
SLOT_AIR_S = 0.0015
SLOT_LEAD_S = 0.002
MAX_SLOT_WAIT_S = 0.012
UART_BYTES_PER_S = 115_200 / 10
#: UI protocol and MCU framing added to an IP packet.
FRAMING = 16
#: IPv4 + TCP header without options; a SYN adds the 4-byte MSS option.
HEADERS = 40
SYN_OPTIONS = 4
WIFI_RTT_S = 1.0
TIMER_GRID_S = 0.5
MSS = 1024
#: The Ethernet between PTx and end-user device in the scenarios.
ETH_RATE_BPS = 100e6
ETH_DELAY_S = 100e-6

#: The study's NFC payload sizes (IP packet + 16 bytes).
SIZES = (250, 500, 1000, 1080)
CONFIGS = ("original", "sensing", "optimum_rto", "sensing+optimum_rto")
SEEDS = (1, 2, 3, 4, 5)
#: Initial RTOs of the sweep, by rate (seconds).
SWEEP = {11.2: (1.0, 2.0, 3.0, 3.5, 4.0, 5.0), 24.0: (1.0, 1.5, 2.0, 2.5, 3.0)}
SWEEP_SEEDS = (1, 2, 3)


@dataclass(frozen=True)
class LongShape:
    """The long session's shape (bridge spec §4.3, the ``cooking-session``
    app): ``rounds`` rounds of a run of small control messages followed by
    one recipe upload; run lengths and sizes are ``[lo, hi]`` ranges drawn
    from uniformly by the run's seed, and ``reply`` is what the end-user
    device answers each message with (0: nothing).

    The defaults are the study's text: messages under 10 bytes (8-9, the
    request header being 8) for long enough that the estimator adapts its
    RTO down to its floor, then a recipe over 1 kB; three rounds of 20 give
    about 68 data packets from the appliance, as in the study's session."""

    small_run: tuple[int, int] = (20, 20)
    small: tuple[int, int] = (8, 9)
    large: tuple[int, int] = (1025, 3072)
    reply: int = 0
    rounds: int = 3

    @property
    def label(self) -> str:
        def span(s: tuple[int, int]) -> str:
            return f"{s[0]}" if s[0] == s[1] else f"{s[0]}-{s[1]}"

        return (
            f"run{span(self.small_run)}-small{span(self.small)}-large{span(self.large)}"
            f"-reply{self.reply}-rounds{self.rounds}"
        )

    def app(self) -> str:
        """The appliance's ``[[app]]`` table."""
        return (
            f'[[app]]\nkind = "cooking-session"\nname = "client"\nhost = "appliance"\n'
            f'peer = "{END_USER}:{SERVER_PORT}"\nsource_port = {CLIENT_PORT}\n'
            f"connect_first = true\nrounds = {self.rounds}\n"
            f"small_run = {list(self.small_run)}\nsmall = {list(self.small)}\n"
            f"large = {list(self.large)}\nreply = {self.reply}\n"
        )

    @property
    def messages(self) -> int:
        """The most messages a session of this shape has."""
        return self.rounds * (self.small_run[1] + 1)


LONG_SHAPE = LongShape()
LONG_SEEDS = (1, 2, 3, 4, 5)
#: The sweep: one parameter at a time around the study's shape.
LONG_SWEEP: tuple[LongShape, ...] = (
    *(LongShape(small_run=(n, n)) for n in (5, 10, 40)),
    LongShape(large=(1025, 2048)),
    LongShape(large=(2049, 4096)),
    LongShape(reply=8),
)
LONG_SWEEP_SEEDS = (1, 2, 3)

SINGLE_COLUMNS = (
    "rate_kbps",
    "nfc_payload_bytes",
    "config",
    "seed",
    "retx_appliance",
    "retx_end_user",
    "dup_acks",
    "keepalives",
    "retx_seen",
    "counts",
    "nfc_drops",
    "latency_s",
    "throughput_kbps",
    "goodput_kbps",
    "bw_utilization",
    "bw_utilization_with_headers",
    "theoretical_min_latency_s",
)
SWEEP_COLUMNS = (*SINGLE_COLUMNS, "initial_rto_s")
LONG_COLUMNS = (
    "estimator",
    "modified_delayed_ack",
    "seed",
    "data_packets",
    "retx_appliance",
    "spurious_retx",
    "dup_acks",
    "session_s",
)
LONG_SWEEP_COLUMNS = ("shape", "small_run", "large_max", "reply", *LONG_COLUMNS)
PACKET_COLUMNS = ("estimator", "modified_delayed_ack", "seq", "size", "rto_s", "measured_rtt_s")

APPLIANCE = "192.168.1.102"
END_USER = "192.168.1.202"
CLIENT_PORT = 49153
SERVER_PORT = 7891


def quick() -> bool:
    """Whether the reduced plan was asked for (``RTOLAB_BRIDGE_QUICK=1``)."""
    return os.environ.get("RTOLAB_BRIDGE_QUICK", "") not in ("", "0")


# ----- theory: equations 5.1-5.6 -----


def nfc_payload(tcp_payload: int, syn: bool = False) -> int:
    """NFC payload of a segment: IP packet plus framing (§1.2)."""
    return tcp_payload + HEADERS + (SYN_OPTIONS if syn else 0) + FRAMING


def rtt_nfc(size: int, rate_kbps: float, whole_slots: bool = False) -> float:
    """``RTT_NFC`` of equation 5.2 for an NFC payload of ``size`` bytes, in
    seconds (fractional slots as published unless ``whole_slots``)."""
    chunk = MODES[rate_kbps]
    slots = size / chunk
    if whole_slots:
        slots = math.ceil(slots)
    one_way = (
        size / UART_BYTES_PER_S + MAX_SLOT_WAIT_S + slots * SLOT_PERIOD_S + chunk / UART_BYTES_PER_S
    )
    return 2 * one_way


def theoretical_rtt(size: int, rate_kbps: float) -> float:
    """Equation 5.1: ``RTT_NFC + RTT_WiFi`` in seconds."""
    return rtt_nfc(size, rate_kbps) + WIFI_RTT_S


def optimum_initial_rto(rate_kbps: float, mss: int = MSS) -> float:
    """§3.2: the theoretical RTT of an MSS-sized segment rounded up to the
    500 ms timer grid, in seconds."""
    rtt = theoretical_rtt(nfc_payload(mss), rate_kbps)
    return math.ceil(round(rtt / TIMER_GRID_S, 9)) * TIMER_GRID_S


# ----- the physical link, for the theoretical minimum latency -----


def nfc_crossing(start: float, ip_len: int, rate_kbps: float, phase: float) -> float:
    """When an IP packet of ``ip_len`` bytes handed to an idle NFC link at
    ``start`` is delivered at the far end: UART, the first slot boundary at
    least 2 ms later, whole slots, the last chunk's air time and UART."""
    chunk = MODES[rate_kbps]
    size = ip_len + FRAMING
    slots = math.ceil(size / chunk)
    ready = start + size / UART_BYTES_PER_S + SLOT_LEAD_S
    k = max(0, math.ceil(round((ready - phase) / SLOT_PERIOD_S, 9)))
    first = phase + k * SLOT_PERIOD_S
    last_chunk = size - (slots - 1) * chunk
    return first + (slots - 1) * SLOT_PERIOD_S + SLOT_AIR_S + last_chunk / UART_BYTES_PER_S


def ethernet_crossing(start: float, ip_len: int) -> float:
    """Delivery time of a packet over the scenarios' Ethernet."""
    return start + ip_len * 8 / ETH_RATE_BPS + ETH_DELAY_S


def minimal_session(request: int, response: int) -> list[tuple[str, int]]:
    """The packets of an exchange with nothing to spare: direction (``up``
    from the appliance) and IP length. The handshake ACK rides on the
    request and every ACK rides on the next packet, so each packet crosses
    once and none waits for a timer."""
    return [
        ("up", HEADERS + SYN_OPTIONS),  # SYN
        ("down", HEADERS + SYN_OPTIONS),  # SYN-ACK
        ("up", HEADERS + request),  # request, acknowledging the SYN-ACK
        ("down", HEADERS + response),  # response, acknowledging the request
        ("up", HEADERS),  # FIN, acknowledging the response
        ("down", HEADERS),  # FIN, acknowledging the appliance's FIN
        ("up", HEADERS),  # the last ACK
    ]


def theoretical_min_latency(
    request: int, response: int, rate_kbps: float, phase: float, start: float = 0.0
) -> float:
    """The session's latency on an ideal link of the same slots and UART
    (see docs/bridge.md): the minimal packet sequence of
    :func:`minimal_session`, each packet handed over the moment the previous
    one arrived, from the appliance's SYN to the end-user device receiving
    the last ACK. Only slot boundaries (at ``phase`` modulo 10 ms) make a
    packet wait."""
    t = start
    for direction, ip_len in minimal_session(request, response):
        if direction == "up":
            t = ethernet_crossing(nfc_crossing(t, ip_len, rate_kbps, phase), ip_len)
        else:
            t = nfc_crossing(ethernet_crossing(t, ip_len), ip_len, rate_kbps, phase)
    return t - start


# ----- scenarios -----


def _rate_text(rate_kbps: float) -> str:
    return "11.2kbps" if rate_kbps == 11.2 else "24kbps"


def _host(name: str, rto: str | None, ack: str | None) -> str:
    lines = [f'[[host]]\nname = "{name}"\nprofile = "lwip"\n']
    tables = []
    if rto is not None:
        tables.append(f"rto = {rto}")
    if ack is not None:
        tables.append(f"ack = {ack}")
    if tables:
        lines.append("[host.tcp]\n" + "\n".join(tables) + "\n")
    return "".join(lines)


def scenario(
    name: str,
    rate_kbps: float,
    sensing: bool,
    app: str,
    *,
    rto: str | None = None,
    ack: str | None = None,
    duration_s: float = 120.0,
) -> str:
    """The bridge system as scenario TOML: appliance, NFC link, PTx bridge,
    Ethernet, end-user device, captures of both sides, and ``app`` (the
    appliance's ``[[app]]`` table)."""
    sense = ", sensing = true" if sensing else ""
    return (
        f'name = "{name}"\nseed = 1\nduration = "{duration_s}s"\n\n'
        + _host("appliance", rto, ack)
        + '\n[[host]]\nname = "ptx"\nbridge = true\n\n'
        + _host("enduser", rto, ack)
        + f'\n[[link]]\nname = "nfc"\nkind = "nfc"\nrate = "{_rate_text(rate_kbps)}"\n'
        + f'ends = [{{ host = "appliance", address = "{APPLIANCE}/24"{sense} }},'
        + f' {{ host = "ptx"{sense} }}]\n\n'
        + '[[link]]\nname = "eth"\nkind = "point-to-point"\n'
        + f'ends = [{{ host = "ptx" }}, {{ host = "enduser", address = "{END_USER}/24" }}]\n'
        + f'rate = "{ETH_RATE_BPS / 1e6:g}Mbps"\ndelay = "{ETH_DELAY_S * 1e6:g}us"\n\n'
        + '[[capture]]\nhost = "appliance"\nlink = "nfc"\nfile = "nfc.pcap"\n\n'
        + '[[capture]]\nhost = "enduser"\nlink = "eth"\nfile = "ethernet.pcap"\n\n'
        + '[[app]]\nkind = "exchange-server"\nname = "server"\nhost = "enduser"\n'
        + f"port = {SERVER_PORT}\n\n"
        + app
    )


def _lwip_rto(initial_s: float) -> str:
    return f'{{ policy = "lwip", initial = "{initial_s:g}s" }}'


def exchange_scenario(
    rate_kbps: float, nfc_bytes: int, sensing: bool, initial_rto_s: float | None
) -> str:
    """The single exchange: request and response each one NFC payload of
    ``nfc_bytes``; lwIP's RTO with ``initial_rto_s`` (its profile's 1 s when
    ``None``)."""
    rto = None if initial_rto_s is None else _lwip_rto(initial_rto_s)
    return scenario("bridge-single-exchange", rate_kbps, sensing, _exchange_app(nfc_bytes), rto=rto)


def _exchange_app(nfc_bytes: int) -> str:
    """The appliance's ``[[app]]``: one request and one response, each one
    NFC payload of ``nfc_bytes``."""
    payload = nfc_bytes - HEADERS - FRAMING
    return (
        f'[[app]]\nkind = "exchange"\nname = "client"\nhost = "appliance"\n'
        f'peer = "{END_USER}:{SERVER_PORT}"\nsource_port = {CLIENT_PORT}\n'
        f"connect_first = true\nrequest = {payload}\nresponse = {payload}\n"
    )


def ethernet_exchange_scenario(nfc_bytes: int = 1080) -> str:
    """The single exchange with both hosts on the Ethernet and no NFC link
    (the study's capture C): lwIP at both ends, the profile's settings."""
    return (
        'name = "bridge-ethernet-only"\nseed = 1\nduration = "10s"\n\n'
        + _host("appliance", None, None)
        + "\n"
        + _host("enduser", None, None)
        + '\n[[link]]\nname = "eth"\nkind = "point-to-point"\n'
        + f'ends = [{{ host = "appliance", address = "{APPLIANCE}/24" }},'
        + f' {{ host = "enduser", address = "{END_USER}/24" }}]\n'
        + f'rate = "{ETH_RATE_BPS / 1e6:g}Mbps"\ndelay = "{ETH_DELAY_S * 1e6:g}us"\n\n'
        + '[[capture]]\nhost = "enduser"\nlink = "eth"\nfile = "ethernet.pcap"\n\n'
        + '[[app]]\nkind = "exchange-server"\nname = "server"\nhost = "enduser"\n'
        + f"port = {SERVER_PORT}\n\n"
        + _exchange_app(nfc_bytes)
    )


def long_session_scenario(estimator: str, modified_ack: bool, shape: LongShape = LONG_SHAPE) -> str:
    """The long session at 11.2 kbps with channel sensing: the appliance's
    ``cooking-session`` of ``shape``, each message written the moment the
    previous one is acknowledged (and answered); ``estimator`` is ``vj``
    (lwIP's Van Jacobson estimator, optimum initial RTO) or ``algorithm1``
    (the per-packet estimator); ``modified_ack`` switches to the size-aware
    delayed ACK."""
    rate = 11.2
    if estimator == "vj":
        rto = _lwip_rto(optimum_initial_rto(rate))
    else:
        rto = '{ policy = "bridge", window = 1 }'
    lwip_delayed = (
        '{ segments = 2, full_sized_only = false, timer = { fixed = { delay = "250ms", '
        'granularity = { ticks = { period = "250ms" } } } } }'
    )
    ack = f'{{ policy = "size_aware", delayed = {lwip_delayed} }}' if modified_ack else None
    # Generous: every message crossing with its worst retransmissions.
    duration = shape.messages * 20.0 + 180.0
    return scenario(
        "bridge-long-session", rate, True, shape.app(), rto=rto, ack=ack, duration_s=duration
    )


# ----- the plan -----


@dataclass(frozen=True)
class Cell:
    """One single-exchange configuration."""

    rate_kbps: float
    nfc_bytes: int
    config: str
    seed: int
    initial_rto_s: float | None = None

    @property
    def sensing(self) -> bool:
        return self.config in ("sensing", "sensing+optimum_rto")

    @property
    def label(self) -> str:
        rto = "" if self.initial_rto_s is None else f"-rto{self.initial_rto_s:g}s"
        return (
            f"{self.rate_kbps:g}kbps-{self.nfc_bytes}B-{self.config.replace('+', '_')}"
            f"{rto}-seed{self.seed}"
        )

    def rto(self) -> float | None:
        if self.initial_rto_s is not None:
            return self.initial_rto_s
        if "optimum_rto" in self.config:
            return optimum_initial_rto(self.rate_kbps)
        return None

    def run(self) -> ExperimentRun:
        text = exchange_scenario(self.rate_kbps, self.nfc_bytes, self.sensing, self.rto())
        params = {
            "rate_kbps": self.rate_kbps,
            "nfc_payload_bytes": self.nfc_bytes,
            "config": self.config,
            "initial_rto_s": self.rto(),
        }
        return ExperimentRun(self.label, text, self.seed, params=params)


def single_exchange_cells(reduced: bool | None = None) -> list[Cell]:
    """Every run of the single-exchange experiment."""
    reduced = quick() if reduced is None else reduced
    sizes = (250, 1080) if reduced else SIZES
    seeds = SEEDS[:1] if reduced else SEEDS
    return [
        Cell(rate, size, config, seed)
        for rate in MODES
        for size in sizes
        for config in CONFIGS
        for seed in seeds
    ]


def sweep_cells(reduced: bool | None = None) -> list[Cell]:
    """Every run of the initial-RTO sweep (no sensing)."""
    reduced = quick() if reduced is None else reduced
    sizes = (1080,) if reduced else SIZES
    seeds = SWEEP_SEEDS[:1] if reduced else SWEEP_SEEDS
    cells = []
    for rate, rtos in SWEEP.items():
        chosen = (rtos[0], rtos[-1]) if reduced else rtos
        for rto in chosen:
            for size in sizes:
                for seed in seeds:
                    cells.append(Cell(rate, size, "original", seed, initial_rto_s=rto))
    return cells


LONG_RUNS = (("vj", False), ("vj", True), ("algorithm1", False), ("algorithm1", True))
ESTIMATOR_NAMES = {"vj": "Van Jacobson (lwIP)", "algorithm1": "Algorithm 1"}


def _long_label(estimator: str, modified: bool, seed: int) -> str:
    return f"{estimator}-{'modified' if modified else 'plain'}-ack-seed{seed}"


def _sweep_label(estimator: str, modified: bool, shape: LongShape, seed: int) -> str:
    return f"{shape.label}-{_long_label(estimator, modified, seed)}"


def long_sweep_shapes(reduced: bool | None = None) -> tuple[LongShape, ...]:
    """The shapes of the long session's sweep."""
    reduced = quick() if reduced is None else reduced
    return (LongShape(small_run=(3, 3), rounds=2, reply=8),) if reduced else LONG_SWEEP


def long_session_shape(reduced: bool | None = None) -> LongShape:
    """The long session's shape: the study's, or a short one for the
    reduced plan."""
    reduced = quick() if reduced is None else reduced
    return LongShape(small_run=(6, 6), rounds=2) if reduced else LONG_SHAPE


def _long_run(
    estimator: str, modified: bool, shape: LongShape, seed: int, label: str
) -> ExperimentRun:
    return ExperimentRun(
        label,
        long_session_scenario(estimator, modified, shape),
        seed,
        params={
            "estimator": estimator,
            "modified_delayed_ack": modified,
            "small_run": shape.small_run[1],
            "large_max": shape.large[1],
            "reply": shape.reply,
        },
    )


def long_session_runs(reduced: bool | None = None) -> list[ExperimentRun]:
    """The long session's four runs per seed with the study's shape, then
    the same for every shape of the sweep."""
    reduced = quick() if reduced is None else reduced
    shape = long_session_shape(reduced)
    seeds = LONG_SEEDS[:1] if reduced else LONG_SEEDS
    runs = [
        _long_run(estimator, modified, shape, seed, _long_label(estimator, modified, seed))
        for estimator, modified in LONG_RUNS
        for seed in seeds
    ]
    sweep_seeds = LONG_SWEEP_SEEDS[:1] if reduced else LONG_SWEEP_SEEDS
    for point in long_sweep_shapes(reduced):
        for estimator, modified in LONG_RUNS:
            for seed in sweep_seeds:
                label = _sweep_label(estimator, modified, point, seed)
                runs.append(_long_run(estimator, modified, point, seed, label))
    return runs


# ----- analysis of one run -----


def _u32(value: Any) -> int:
    return int(value) % 2**32


@dataclass
class Session:
    """One run's two captures, split by direction."""

    nfc: pd.DataFrame
    eth: pd.DataFrame

    @classmethod
    def of(cls, result: Result) -> Session:
        from rtolab.frames import read_capture

        directory = result.out_dir
        if directory is None:
            raise ValueError("the run kept no files")
        return cls(read_capture(directory / "nfc.pcap"), read_capture(directory / "ethernet.pcap"))

    def sent_by(self, host: str) -> pd.DataFrame:
        """What ``host`` handed to its interface (dropped packets included)."""
        frame = self.nfc if host == APPLIANCE else self.eth
        return frame[frame["src"] == host]

    def arrived_at(self, host: str) -> pd.DataFrame:
        """What reached ``host``."""
        frame = self.nfc if host == APPLIANCE else self.eth
        return frame[frame["dst"] == host]


def tcp_analysis_counts(frame: pd.DataFrame) -> dict[str, int]:
    """Retransmissions, duplicate ACKs and keep-alives as tshark's TCP
    analysis labels them (``tcp.analysis.retransmission`` and its fast and
    spurious kinds, ``tcp.analysis.duplicate_ack``,
    ``tcp.analysis.keep_alive``) in one capture, by the same rules: per
    direction it tracks the highest next sequence number, the last ACK
    number and the last window. A keep-alive carries 0 or 1 byte at one less
    than the next sequence number; a duplicate ACK carries no data, repeats
    the last ACK number and window (non-zero) at the next sequence number,
    and does not answer a keep-alive; neither has SYN, FIN or RST. A
    retransmission carries data, SYN or FIN, starts below the next sequence
    number and is no keep-alive."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    counts = {"retransmissions": 0, "dup_acks": 0, "keepalives": 0}
    tcp = frame[frame["protocol"] == "tcp"]
    # The columns read, iterated together: a row tuple of every column cost
    # most of the bridge's analysis.
    fields = ("src", "src_port", "dst", "dst_port", "flags", "seq", "ack", "window", "payload_len")
    for src, src_port, dst, dst_port, flag_value, seq_value, ack_value, window, payload in zip(
        *(tcp[name] for name in fields), strict=True
    ):
        fwd_key = (src, src_port, dst, dst_port)
        rev_key = (dst, dst_port, src, src_port)
        fwd = state.setdefault(fwd_key, {"nextseq": 0, "lastack": 0, "window": None, "ka": False})
        rev = state.setdefault(rev_key, {"nextseq": 0, "lastack": 0, "window": None, "ka": False})
        flags = str(flag_value or "")
        control = any(f in flags for f in ("SYN", "FIN", "RST"))
        seq, ack, window = _u32(seq_value), _u32(ack_value), int(window)
        seglen = int(payload or 0)
        keepalive = seglen <= 1 and seq == (fwd["nextseq"] - 1) % 2**32 and not control
        repeats = (
            seglen == 0
            and window != 0
            and window == fwd["window"]
            and seq == fwd["nextseq"]
            and ack == fwd["lastack"]
            and not control
        )
        zero_window_probe = seglen == 1 and seq == fwd["nextseq"] and rev["window"] == 0
        if zero_window_probe:
            keepalive = repeats = False
        if keepalive:
            counts["keepalives"] += 1
        carries = seglen > 0 or "SYN" in flags or "FIN" in flags
        behind = fwd["nextseq"] != 0 and (seq - fwd["nextseq"]) % 2**32 >= 2**31
        if carries and behind and not keepalive:
            counts["retransmissions"] += 1
        if repeats and not rev["ka"]:
            counts["dup_acks"] += 1
        nextseq = (seq + seglen + (1 if ("SYN" in flags or "FIN" in flags) else 0)) % 2**32
        if fwd["nextseq"] == 0 or 0 < (nextseq - fwd["nextseq"]) % 2**32 < 2**31:
            if not zero_window_probe:
                fwd["nextseq"] = nextseq
        fwd["window"] = window
        fwd["lastack"] = ack
        fwd["ka"] = keepalive
    return counts


def _rel(values: pd.Series, isn: int) -> pd.Series:
    """Sequence or acknowledgement numbers relative to ``isn`` (they wrap
    at 2^32; distances from the ISN in a session do not)."""
    return (values.astype("int64") - isn) % 2**32


def resends(session: Session, sender: str) -> pd.DataFrame:
    """The segments ``sender`` handed to its interface that carry data, SYN
    or FIN a second time or more (same sequence number and length as an
    earlier one): their time (s), relative sequence number, end and whether
    they were spurious, i.e. the receiver had already acknowledged all of
    their data, an ACK covering their end having left the receiver before
    they left the sender (both captures share the run's clock)."""
    receiver = END_USER if sender == APPLIANCE else APPLIANCE
    sent = session.sent_by(sender)
    sent = sent[(sent["payload_len"].fillna(0) > 0) | sent["flags"].str.contains("SYN|FIN")]
    columns = ["time_s", "seq", "end", "spurious"]
    if sent.empty:
        return pd.DataFrame(columns=columns)
    isn = _u32(sent["seq"].iloc[0])
    acks = session.sent_by(receiver)
    acks = acks[acks["flags"].str.contains("ACK") & acks["ack"].notna()]
    ack_times = acks["time_ns"].to_numpy()
    # The highest acknowledgement the receiver had sent by each of its ACKs.
    acked = _rel(acks["ack"], isn).cummax().to_numpy()
    rows, seen = [], set()
    for time_ns, seq_value, flag_value, payload in zip(
        sent["time_ns"], sent["seq"], sent["flags"], sent["payload_len"], strict=True
    ):
        seq = (_u32(seq_value) - isn) % 2**32
        flags = str(flag_value)
        end = seq + int(payload or 0) + ("SYN" in flags or "FIN" in flags)
        key = (seq, end)
        if key in seen:
            k = int(ack_times.searchsorted(int(time_ns), side="right"))
            spurious = k > 0 and int(acked[k - 1]) >= end
            rows.append((int(time_ns) / 1e9, seq, end, spurious))
        seen.add(key)
    return pd.DataFrame(rows, columns=columns)


def study_form(counts: dict[str, int]) -> str:
    """Retransmissions (R), duplicate ACKs (DA) and keep-alives (KA) of a
    session written as the study writes them: ``"3R+1DA"``,
    ``"2R+1DA+2KA"``, ``"0R"`` (DA and KA only when there are some)."""
    text = f"{counts['retransmissions']}R"
    if counts["dup_acks"]:
        text += f"+{counts['dup_acks']}DA"
    if counts["keepalives"]:
        text += f"+{counts['keepalives']}KA"
    return text


def spurious_retransmissions(session: Session) -> int:
    """Retransmissions, by either host, of data the receiver had already
    acknowledged (see :func:`resends`)."""
    return sum(int(resends(session, host)["spurious"].sum()) for host in (APPLIANCE, END_USER))


def flows_by_host(result: Result) -> dict[str, dict[str, Any]]:
    """A run's flow reports, by the name of the host each belongs to."""
    return {str(f["host"]): f for f in result.report.get("flows", [])}


def nfc_stats(result: Result) -> dict[str, Any]:
    """The counters of the run's NFC link."""
    for link in result.report.get("links", []):
        if link.get("kind") == "nfc":
            return dict(link["stats"])
    raise ValueError("the run has no NFC link")


def session_latency(result: Result) -> float:
    """From the appliance's SYN to the last ACK of the close reaching its
    host (the passive closer's connection turning CLOSED), in seconds; NaN
    when the session did not finish."""
    flows = flows_by_host(result)
    appliance, enduser = flows.get("appliance"), flows.get("enduser")
    if appliance is None or enduser is None or enduser.get("closed_ns") is None:
        return math.nan
    if enduser.get("state") != "CLOSED":
        return math.nan
    return (int(enduser["closed_ns"]) - int(appliance["opened_ns"])) / 1e9


def exchange_row(result: Result, cell: Cell) -> dict[str, Any]:
    """One row of ``single_exchange.csv``."""
    session = Session.of(result)
    flows = flows_by_host(result)
    stats = nfc_stats(result)
    counts = tcp_analysis_counts(session.eth)
    latency = session_latency(result)
    carried = sum(int(d["nfc_payload_bytes"]) for d in stats["directions"])
    slots = sum(int(d["slots"]) for d in stats["directions"])
    payload = cell.nfc_bytes - HEADERS - FRAMING
    goodput = 2 * payload * 8 / latency / 1e3 if latency > 0 else math.nan
    throughput = carried * 8 / latency / 1e3 if latency > 0 else math.nan
    start = int(flows["appliance"]["opened_ns"]) / 1e9 if "appliance" in flows else 0.0
    phase = int(stats["slot_phase_ns"]) / 1e9
    return {
        "rate_kbps": cell.rate_kbps,
        "nfc_payload_bytes": cell.nfc_bytes,
        "config": cell.config,
        "seed": cell.seed,
        "retx_appliance": int(flows.get("appliance", {}).get("retransmissions", 0)),
        "retx_end_user": int(flows.get("enduser", {}).get("retransmissions", 0)),
        "dup_acks": counts["dup_acks"],
        "keepalives": counts["keepalives"],
        "retx_seen": counts["retransmissions"],
        "counts": study_form(counts),
        "nfc_drops": sum(int(d["dropped_mcu_busy"]) for d in stats["directions"]),
        "latency_s": latency,
        "throughput_kbps": throughput,
        "goodput_kbps": goodput,
        "bw_utilization": throughput / cell.rate_kbps,
        "bw_utilization_with_headers": (
            (carried + SLOT_HEADER * slots) * 8 / latency / 1e3 / cell.rate_kbps
            if latency > 0
            else math.nan
        ),
        "theoretical_min_latency_s": theoretical_min_latency(
            payload, payload, cell.rate_kbps, phase, start
        ),
    }


def packet_rows(result: Result, estimator: str, modified: bool) -> list[dict[str, Any]]:
    """Rows of ``long_session_packets.csv``: each data segment the appliance
    sent once or more, the RTO its sender armed for it (the first timer
    armed to guard it) and its RTT measured in the appliance's capture (first
    send to the first ACK covering it)."""
    session = Session.of(result)
    sent = session.sent_by(APPLIANCE)
    data = sent[sent["payload_len"].fillna(0) > 0]
    acks = session.arrived_at(APPLIANCE)
    traces = result.traces
    if "node_name" not in traces or "seq" not in traces:
        armed = traces.iloc[0:0]
    else:
        armed = traces[(traces["kind"] == "rto_armed") & (traces["node_name"] == "appliance")]
    rto_of: dict[int, float] = {}
    for row in armed.itertuples(index=False):
        rto_of.setdefault(int(row.seq), int(row.rto) / 1e9)
    syn = sent[sent["flags"].str.contains("SYN")]
    isn = _u32(syn["seq"].iloc[0]) if not syn.empty else 0
    rows = []
    for (seq, length), group in data.groupby(["seq", "payload_len"], sort=False):
        first = int(group["time_ns"].min())
        end = (_u32(seq) + int(length)) % 2**32
        covering = acks[
            (acks["time_ns"] > first)
            & acks["ack"].notna()
            & (((acks["ack"].astype("int64") - end) % 2**32) < 2**31)
        ]
        rtt = (int(covering["time_ns"].iloc[0]) - first) / 1e9 if not covering.empty else math.nan
        rows.append(
            {
                "estimator": estimator,
                "modified_delayed_ack": modified,
                "seq": (_u32(seq) - isn) % 2**32,
                "size": int(length) + HEADERS + FRAMING,
                "rto_s": rto_of.get(_u32(seq), math.nan),
                "measured_rtt_s": rtt,
            }
        )
    return rows


def long_row(result: Result, estimator: str, modified: bool, seed: int) -> dict[str, Any]:
    """One row of ``long_session.csv``."""
    session = Session.of(result)
    sent = session.sent_by(APPLIANCE)
    data = sent[sent["payload_len"].fillna(0) > 0]
    return {
        "estimator": estimator,
        "modified_delayed_ack": modified,
        "seed": seed,
        "data_packets": int(data.groupby(["seq", "payload_len"]).ngroups),
        "retx_appliance": len(resends(session, APPLIANCE)),
        "spurious_retx": spurious_retransmissions(session),
        "dup_acks": tcp_analysis_counts(session.eth)["dup_acks"],
        "session_s": session_latency(result),
    }


# ----- tables, figures and checks -----


def single_exchange_table(results: dict[str, Result], cells: Iterable[Cell]) -> pd.DataFrame:
    """The rows of the runs that completed."""
    rows = [exchange_row(results[c.label], c) for c in cells if c.label in results]
    return pd.DataFrame(rows, columns=list(SINGLE_COLUMNS))


def sweep_table(results: dict[str, Result], cells: Iterable[Cell]) -> pd.DataFrame:
    """The sweep's rows, with the initial RTO used."""
    rows = []
    for c in cells:
        if c.label in results:
            row = exchange_row(results[c.label], c)
            row["initial_rto_s"] = c.initial_rto_s
            rows.append(row)
    return pd.DataFrame(rows, columns=list(SWEEP_COLUMNS))


def study_form_table(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """The study's own table: a row per rate and NFC payload, a column per
    value of ``column`` (the configuration, or the initial RTO), each cell
    the session's retransmissions, duplicate ACKs and keep-alives in the
    study's form (:func:`study_form`) over the seeds: the one form when every
    seed gave it, else each form with the seeds that gave it
    (``"3R+1DA (4 seeds), 4R+1DA (1 seed)"``)."""
    rows = []
    for (rate, size), group in table.groupby(["rate_kbps", "nfc_payload_bytes"], sort=False):
        row: dict[str, Any] = {"rate_kbps": rate, "nfc_payload_bytes": size}
        # Configurations in the study's order, initial RTOs ascending.
        for value, cell in group.groupby(column, sort=column != "config"):
            forms = cell["counts"].value_counts()
            row[f"{value:g}" if isinstance(value, float) else str(value)] = (
                str(forms.index[0])
                if len(forms) == 1
                else ", ".join(
                    f"{form} ({n} seed{'s' if n > 1 else ''})" for form, n in forms.items()
                )
            )
        rows.append(row)
    frame = pd.DataFrame(rows)
    if column != "config":
        values = sorted(frame.columns[2:], key=float)
        frame = frame[["rate_kbps", "nfc_payload_bytes", *values]]
    return frame


def single_exchange_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Latency per size and configuration (both rates, with the channel's
    limit), and throughput, goodput and bandwidth utilisation (both bases)
    per size; legends outside the axes. The retransmission counts are a
    table of the report (:func:`study_form_table`), not a figure."""
    import matplotlib.pyplot as plt

    from rtolab.plots import PALETTE

    figures: list[tuple[str, Figure]] = []
    rates = sorted(table["rate_kbps"].unique())
    if table.empty:
        return figures
    mean = table.groupby(["rate_kbps", "nfc_payload_bytes", "config"], sort=False).mean(
        numeric_only=True
    )
    fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.2), layout="constrained")
    axes = list(axes) if len(rates) > 1 else [axes]
    for ax, rate in zip(axes, rates, strict=True):
        part = mean.loc[rate]
        sizes = sorted(part.index.get_level_values(0).unique())
        width = 0.8 / len(CONFIGS)
        for i, config in enumerate(CONFIGS):
            values = [
                part.loc[(s, config), "latency_s"] if (s, config) in part.index else math.nan
                for s in sizes
            ]
            ax.bar(
                [k + (i - 1.5) * width for k in range(len(sizes))],
                values,
                width,
                label=config,
                color=PALETTE[i],
            )
        limit = [part.loc[s, "theoretical_min_latency_s"].mean() for s in sizes]
        ax.plot(range(len(sizes)), limit, "k_", ms=30, mew=2, label="theoretical minimum")
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
        ax.set_xlabel("NFC payload (bytes)")
        ax.set_ylabel("session latency (s)")
        ax.set_title(f"{rate:g} kbps")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
    figures.append(("latency", fig))

    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(
        2, len(rates), figsize=(6 * len(rates), 7), layout="constrained", squeeze=False
    )
    for col, rate in enumerate(rates):
        part = mean.loc[rate].reset_index()
        for i, config in enumerate(CONFIGS):
            rows = part[part["config"] == config]
            x = rows["nfc_payload_bytes"]
            axes[0][col].plot(x, rows["throughput_kbps"], "o-", color=PALETTE[i])
            axes[0][col].plot(x, rows["goodput_kbps"], "s--", color=PALETTE[i])
            axes[1][col].plot(x, rows["bw_utilization"], "o-", color=PALETTE[i])
            axes[1][col].plot(x, rows["bw_utilization_with_headers"], "^:", color=PALETTE[i])
        chunk = MODES[rate]
        axes[1][col].axhline(chunk / (chunk + SLOT_HEADER), color="grey", lw=0.8, ls="-.")
        axes[0][col].set_title(f"{rate:g} kbps")
        axes[0][col].set_ylabel("kbit/s")
        axes[1][col].set_ylabel(f"bandwidth utilisation (of {rate:g} kbit/s)")
        axes[1][col].set_xlabel("NFC payload (bytes)")
    handles = [Line2D([], [], color=PALETTE[i], lw=2) for i in range(len(CONFIGS))]
    labels = list(CONFIGS)
    styles = (
        ("o", "-", "throughput (NFC payload)"),
        ("s", "--", "goodput (TCP payload)"),
        ("o", "-", "utilisation: NFC payload over the rate (the study's)"),
        ("^", ":", "utilisation with the 4 B slot headers counted"),
        ("", "-.", "ceiling without slot headers"),
    )
    for marker, ls, label in styles:
        handles.append(Line2D([], [], color="grey", marker=marker or None, ls=ls))
        labels.append(label)
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8)
    figures.append(("throughput", fig))
    return figures


def sweep_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Retransmissions (bars: whole counts, each size beside the others so
    none hides another) and latency against the initial RTO, per rate."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from rtolab.plots import PALETTE

    if table.empty:
        return []
    rates = sorted(table["rate_kbps"].unique())
    sizes = sorted(table["nfc_payload_bytes"].unique())
    markers = "osD^v"
    fig, axes = plt.subplots(
        2, len(rates), figsize=(6 * len(rates), 7), layout="constrained", squeeze=False
    )
    for col, rate in enumerate(rates):
        part = table[table["rate_kbps"] == rate]
        rtos = sorted(part["initial_rto_s"].unique())
        width = 0.8 / len(sizes)
        for i, size in enumerate(sizes):
            rows = part[part["nfc_payload_bytes"] == size]
            m = rows.groupby("initial_rto_s").mean(numeric_only=True).reindex(rtos)
            positions = [k + (i - (len(sizes) - 1) / 2) * width for k in range(len(rtos))]
            axes[0][col].bar(
                positions,
                m["retx_appliance"] + m["retx_end_user"],
                width,
                color=PALETTE[i],
                label=f"{size} B",
            )
            axes[1][col].plot(
                range(len(rtos)),
                m["latency_s"],
                marker=markers[i % len(markers)],
                ls="-",
                color=PALETTE[i],
                label=f"{size} B",
            )
        optimum = optimum_initial_rto(rate)
        for ax in axes[:, col]:
            ax.set_xticks(range(len(rtos)), [f"{r:g}" for r in rtos])
            if optimum in rtos:
                ax.axvline(rtos.index(optimum), color="k", ls=":", lw=1)
        axes[0][col].yaxis.set_major_locator(MaxNLocator(integer=True))
        axes[0][col].set_title(f"{rate:g} kbps, no sensing (dotted: optimum initial RTO)")
        axes[0][col].set_ylabel("retransmissions, both hosts")
        axes[1][col].set_ylabel("session latency (s)")
        axes[1][col].set_xlabel("initial RTO (s)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), title="NFC payload")
    return [("initial-rto-sweep", fig)]


def long_session_figures(
    packets: pd.DataFrame, results: dict[str, Result]
) -> list[tuple[str, Figure]]:
    """RTO chosen against measured RTT per packet, and the time-sequence
    (stream) diagram of the session with its retransmissions marked, per
    estimator and delayed ACK (seed 1)."""
    import matplotlib.pyplot as plt

    from rtolab.plots import PALETTE, time_sequence

    figures: list[tuple[str, Figure]] = []
    runs = [(e, m) for e, m in LONG_RUNS]
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), layout="constrained", sharey=True)
    for ax, (estimator, modified) in zip(axes.flat, runs, strict=True):
        part = packets[
            (packets["estimator"] == estimator) & (packets["modified_delayed_ack"] == modified)
        ].reset_index(drop=True)
        ax.plot(part.index, part["rto_s"], "o", ms=3, color=PALETTE[0], label="RTO chosen")
        ax.plot(
            part.index, part["measured_rtt_s"], "x", ms=4, color=PALETTE[1], label="measured RTT"
        )
        ack = "modified delayed ACK" if modified else "plain delayed ACK"
        ax.set_title(f"{ESTIMATOR_NAMES[estimator]}, {ack}")
        ax.set_xlabel("data packet (in sending order)")
        ax.set_ylabel("seconds")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2)
    figures.append(("rto-vs-rtt", fig))
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), layout="constrained")
    for ax, (estimator, modified) in zip(axes.flat, runs, strict=True):
        label = _long_label(estimator, modified, LONG_SEEDS[0])
        if label not in results:
            continue
        time_sequence(
            results[label],
            capture="nfc",
            flow=(APPLIANCE, CLIENT_PORT, END_USER, SERVER_PORT),
            ax=ax,
        )
        ack = "modified delayed ACK" if modified else "plain delayed ACK"
        ax.set_title(f"{ESTIMATOR_NAMES[estimator]}, {ack}")
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
        spurious = resends(Session.of(results[label]), APPLIANCE)
        spurious = spurious.loc[spurious["spurious"].astype(bool)]
        ax.plot(
            spurious["time_s"],
            spurious["end"] / 1e3,
            "v",
            color="crimson",
            ms=7,
            label=f"spurious retransmission ({len(spurious)})",
        )
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("Long session, appliance → end-user device, NFC side (seed 1)")
    figures.append(("time-sequence", fig))
    return figures


@dataclass(frozen=True)
class Comparison:
    """What :func:`write_comparison` wrote: one row per run, and the
    comparison of those rows (per cell, paired by seed)."""

    table: pd.DataFrame
    compared: pd.DataFrame


def write_comparison(
    results: dict[str, Result],
    cells: Iterable[Any],
    row: Callable[[Result, Any], dict[str, Any]],
    columns: Sequence[str],
    name: str,
    compare: Callable[[pd.DataFrame], pd.DataFrame],
    figures: Callable[[pd.DataFrame], list[tuple[str, Figure]]],
    suffix: str = "paired",
) -> Comparison | None:
    """A future-work experiment's outputs: ``row`` of each planned cell
    (anything with a ``label``) whose run completed, as ``NAME.csv`` with
    ``columns``; ``compare`` of that table as ``NAME_SUFFIX.csv``; and the
    ``figures`` of the table in ``figures/``. ``None`` when no run
    completed."""
    done = [c for c in cells if c.label in results]
    out = system_dir(results)
    if out is None or not done:
        return None
    table = pd.DataFrame([row(results[c.label], c) for c in done], columns=list(columns))
    compared = compare(table)
    write_table(table, out / f"{name}.csv")
    write_table(compared, out / f"{name}_{suffix}.csv")
    for figure, fig in figures(table):
        save_figure(fig, out / "figures" / f"{figure}.png")
    return Comparison(table, compared)


def nan_free(frame: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` has a value in every row."""
    return bool(frame[column].notna().all())


def single_exchange_claims(table: pd.DataFrame) -> list[Claim]:
    """The study's claims about the single exchange (bridge spec §2,
    bridge spec §3.1, bridge spec §3.2) beside the numbers of
    ``single_exchange.csv``; a claim without runs to judge it cannot tell."""
    original = table[table["config"] == "original"]
    sensing = table[table["config"].str.startswith("sensing")]
    fixed = table[table["config"] == "sensing+optimum_rto"]
    dropping = int((original["nfc_drops"] > 0).sum())
    sensing_drops = int(sensing["nfc_drops"].sum())
    retx = int((fixed["retx_appliance"] + fixed["retx_end_user"]).sum())
    return [
        Claim(
            "In lwIP's original configuration the NFC module drops the segment sent "
            "right behind another (bridge spec §2)",
            f"NFC drops in {dropping} of {len(original)} runs",
            bool(dropping == len(original)) if len(original) else None,
        ),
        Claim(
            "With channel sensing no packet is dropped at the NFC interface (bridge spec §3.1)",
            f"{sensing_drops} NFC drops in {len(sensing)} runs with sensing",
            sensing_drops == 0 if len(sensing) else None,
        ),
        Claim(
            "With channel sensing and the optimum initial RTO (the theoretical RTT of "
            "the largest packet) no segment is retransmitted (bridge spec §3.2)",
            f"{retx} retransmissions in {len(fixed)} runs",
            retx == 0 if len(fixed) else None,
        ),
    ]


def single_exchange_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``single_exchange.csv`` and its figures; checks the claims that
    do not depend on tuning."""
    cells = [c for c in single_exchange_cells() if c.label in results]
    out = system_dir(results)
    if out is None or not cells:
        return [Check("runs completed", False, "no results")]
    table = single_exchange_table(results, cells)
    write_table(table, out / "single_exchange.csv")
    write_table(study_form_table(table, "config"), out / "single_exchange_counts.csv")
    for name, fig in single_exchange_figures(table):
        save_figure(fig, out / "figures" / f"single-exchange-{name}.png")
    fixed = table[table["config"] == "sensing+optimum_rto"]
    sensing = table[table["config"].str.startswith("sensing")]
    original = table[table["config"] == "original"]
    retx = int((fixed["retx_appliance"] + fixed["retx_end_user"]).sum())
    ratio = (table["latency_s"] / table["theoretical_min_latency_s"]).min()
    return [
        *single_exchange_claims(table),
        Check(
            "every session completed",
            nan_free(table, "latency_s"),
            f"{int(table['latency_s'].notna().sum())} of {len(table)}",
        ),
        Check(
            "sensing + optimum RTO: no retransmissions", retx == 0, f"{retx} in {len(fixed)} runs"
        ),
        Check(
            "channel sensing: no NFC drops",
            int(sensing["nfc_drops"].sum()) == 0,
            f"{int(sensing['nfc_drops'].sum())} drops in {len(sensing)} runs",
        ),
        Check(
            "original configuration: the MCU drops packets",
            bool((original["nfc_drops"] > 0).all()),
            f"drops in {int((original['nfc_drops'] > 0).sum())} of {len(original)} runs",
        ),
        Check(
            "no run beats the channel's limit",
            bool((table["latency_s"] >= table["theoretical_min_latency_s"] - 1e-6).all()),
            f"smallest latency / limit = {ratio:.3f}",
        ),
    ]


def sweep_checks(results: dict[str, Result]) -> list[Check]:
    """Writes ``initial_rto_sweep.csv`` and its figure."""
    cells = [c for c in sweep_cells() if c.label in results]
    out = system_dir(results)
    if out is None or not cells:
        return [Check("runs completed", False, "no results")]
    table = sweep_table(results, cells)
    write_table(table, out / "initial_rto_sweep.csv")
    write_table(study_form_table(table, "initial_rto_s"), out / "initial_rto_sweep_counts.csv")
    for name, fig in sweep_figures(table):
        save_figure(fig, out / "figures" / f"{name}.png")
    return [
        Check(
            "every session completed",
            nan_free(table, "latency_s"),
            f"{int(table['latency_s'].notna().sum())} of {len(table)}",
        )
    ]


def long_session_tables(
    results: dict[str, Result],
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``long_session.csv`` (the study's shape, every seed),
    ``long_session_packets.csv`` (seed 1 of each estimator and delayed ACK)
    and ``long_session_sweep.csv`` (every shape of the sweep), from the runs
    that completed."""
    shape = long_session_shape()
    rows, packets = [], []
    for estimator, modified in LONG_RUNS:
        for seed in LONG_SEEDS:
            label = _long_label(estimator, modified, seed)
            if label not in results:
                continue
            rows.append(long_row(results[label], estimator, modified, seed))
            if seed == LONG_SEEDS[0]:
                packets.extend(packet_rows(results[label], estimator, modified))
    sweep = []
    for point in (shape, *long_sweep_shapes()):
        for estimator, modified in LONG_RUNS:
            for seed in LONG_SEEDS:
                label = (
                    _long_label(estimator, modified, seed)
                    if point == shape
                    else _sweep_label(estimator, modified, point, seed)
                )
                if label in results:
                    row = long_row(results[label], estimator, modified, seed)
                    sweep.append(
                        {
                            "shape": point.label,
                            "small_run": point.small_run[1],
                            "large_max": point.large[1],
                            "reply": point.reply,
                            **row,
                        }
                    )
    return (
        pd.DataFrame(rows, columns=list(LONG_COLUMNS)),
        pd.DataFrame(packets, columns=list(PACKET_COLUMNS)),
        pd.DataFrame(sweep, columns=list(LONG_SWEEP_COLUMNS)),
    )


def long_session_checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes ``long_session.csv``, ``long_session_packets.csv``,
    ``long_session_sweep.csv`` and the per-packet and time-sequence
    figures."""
    out = system_dir(results)
    if out is None:
        return [Check("runs completed", False, "no results")]
    table, packet_table, sweep_table = long_session_tables(results)
    write_table(sweep_table, out / "long_session_sweep.csv")
    write_table(table, out / "long_session.csv")
    write_table(packet_table, out / "long_session_packets.csv")
    for name, fig in long_session_figures(packet_table, results):
        save_figure(fig, out / "figures" / f"long-session-{name}.png")
    expected = len(LONG_RUNS) * len(LONG_SEEDS[:1] if quick() else LONG_SEEDS)
    vj = table[table["estimator"] == "vj"]
    fixed = table[(table["estimator"] == "algorithm1") & table["modified_delayed_ack"]]
    vj_spurious, fixed_spurious = int(vj["spurious_retx"].sum()), int(fixed["spurious_retx"].sum())
    swept = sweep_table["session_s"].notna().sum()
    return [
        Claim(
            "On a long session of small messages then a large one, Van Jacobson's "
            "estimator retransmits spuriously (bridge spec §4.3)",
            f"{vj_spurious} spurious retransmissions in {len(vj)} VJ runs",
            vj_spurious > 0 if len(vj) else None,
        ),
        Claim(
            "Algorithm 1 with the modified delayed ACK avoids them (bridge spec §3.3, §3.4)",
            f"{fixed_spurious} spurious retransmissions in {len(fixed)} runs",
            fixed_spurious == 0 if len(fixed) else None,
        ),
        Check(
            "every session completed",
            len(table) == expected and nan_free(table, "session_s"),
            f"{int(table['session_s'].notna().sum())} of {expected}",
        ),
        Check(
            "an RTO was recorded for every data packet",
            nan_free(packet_table, "rto_s"),
            f"{int(packet_table['rto_s'].notna().sum())} of {len(packet_table)}",
        ),
        Check(
            "every session of the sweep completed",
            bool(nan_free(sweep_table, "session_s")) and swept > 0,
            f"{int(swept)} of {len(sweep_table)}",
        ),
    ]


#: Per experiment: the tables the report shows (file, the keys its rows are
#: grouped by over seeds) and the prefix of its figures.
REPORT_FILES: dict[str, tuple[tuple[tuple[str, tuple[str, ...]], ...], str]] = {
    "single_exchange": (
        (
            ("single_exchange_counts.csv", ()),
            ("single_exchange.csv", ("rate_kbps", "nfc_payload_bytes", "config")),
        ),
        "single-exchange-",
    ),
    "initial_rto_sweep": (
        (
            ("initial_rto_sweep_counts.csv", ()),
            ("initial_rto_sweep.csv", ("rate_kbps", "nfc_payload_bytes", "initial_rto_s")),
        ),
        "initial-rto-sweep",
    ),
    "long_session": (
        (
            ("long_session.csv", ("estimator", "modified_delayed_ack")),
            ("long_session_sweep.csv", ("shape", "estimator", "modified_delayed_ack")),
        ),
        "long-session-",
    ),
}


def report_sections(directory: Path, experiment: str) -> list[str]:
    """HTML for the reproduction report: the experiment's tables (means over
    seeds) and figures, from the reproduction's output ``directory``."""
    from rtolab.reports import table_html

    bridge_dir = directory / SYSTEM
    tables, prefix = REPORT_FILES[experiment]
    parts: list[str] = []
    for csv, keys in tables:
        path = bridge_dir / csv
        if not path.is_file():
            continue
        frame = pd.read_csv(path)
        if keys:
            shown = seed_table(frame, keys)
            heading = f"{csv} (n runs; mean over seeds, min..max where they differ)"
        else:
            shown = frame
            heading = (
                f"{csv}: retransmissions (R), duplicate ACKs (DA) and keep-alives (KA) "
                "seen on the Ethernet side, in the study's form, over seeds"
            )
        parts.append(f"<h3>{heading}</h3>" + table_html(shown))
    for png in sorted((bridge_dir / "figures").glob(f"{prefix}*.png")):
        parts.append(figure_html(png, directory))
    return parts


register(
    Experiment(
        system=SYSTEM,
        name="single_exchange",
        title="Single exchange: original lwIP, channel sensing, optimum RTO, both",
        description=(
            "The appliance connects through the NFC link and the PTx bridge, sends one "
            "message of 250, 500, 1000 or 1080 bytes of NFC payload, gets as many back and "
            "closes; at 11.2 and 24 kbps, four configurations, several slot phases (seeds). "
            "Writes single_exchange.csv."
        ),
        runs=lambda: [c.run() for c in single_exchange_cells()],
        checks=single_exchange_checks,
        report=lambda directory: report_sections(directory, "single_exchange"),
        trace_families=TRACE_FAMILIES,
    )
)

register(
    Experiment(
        system=SYSTEM,
        name="initial_rto_sweep",
        title="Single exchange without sensing for a range of initial RTOs",
        description=(
            "Raising the initial RTO without channel sensing separates spurious "
            "retransmissions (they vanish once the RTO exceeds the round trip) from "
            "retransmissions of real drops (they remain). Writes initial_rto_sweep.csv."
        ),
        runs=lambda: [c.run() for c in sweep_cells()],
        checks=sweep_checks,
        report=lambda directory: report_sections(directory, "initial_rto_sweep"),
        trace_families=TRACE_FAMILIES,
    )
)

register(
    Experiment(
        system=SYSTEM,
        name="long_session",
        title="Long session: Van Jacobson's estimator against Algorithm 1",
        description=(
            "One connection at 11.2 kbps with channel sensing carries the study's "
            "session: runs of 20 control messages under 10 bytes, each followed by a "
            "recipe over 1 kB, three rounds (about 68 data packets); lwIP's estimator "
            "against the per-packet Algorithm 1, with and without the modified delayed "
            "ACK, then one parameter at a time swept (run length, recipe size, replies). "
            "Writes long_session.csv, long_session_packets.csv and long_session_sweep.csv."
        ),
        runs=long_session_runs,
        checks=long_session_checks,
        report=lambda directory: report_sections(directory, "long_session"),
        trace_families=TRACE_FAMILIES,
    )
)
