"""The bridge study's experiments (bridge spec §4, docs/spec/bridge.md): TCP
over a time-slotted NFC link through a bridge, its two fixes, and Algorithm 1.

``rtolab reproduce bridge --out DIR`` runs them all and writes, in
``DIR/bridge/``:

* ``single_exchange.csv``: the single exchange at both rates, four NFC
  payload sizes, four configurations (``original``, ``sensing``,
  ``optimum_rto``, ``sensing+optimum_rto``) and several seeds;
* ``initial_rto_sweep.csv``: the single exchange without sensing for a
  range of initial RTOs;
* ``long_session.csv`` and ``long_session_packets.csv``: one connection
  carrying a series of messages of varying size, Van Jacobson's estimator
  (lwIP's) against Algorithm 1, with and without the modified delayed ACK;
  ``long_session_sweep.csv``: the same over a range of message mixes;
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
import random
from collections.abc import Iterable, Sequence
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
LONG_MESSAGES = 68
LONG_SIZES_SEED = 7
#: The long session's mix (the study gives none): the share of messages
#: that are recipe uploads (1001-1024 bytes, one full segment each; the rest
#: are 8-9 byte control messages) and the share the end-user device answers
#: with a short reply (8-9 bytes).
LONG_LARGE_SHARE = 0.25
LONG_REPLY_SHARE = 0.5
#: The sweep over the mix: (share of uploads, share of replies).
LONG_SWEEP = tuple((large, reply) for large in (0.1, 0.25, 0.5) for reply in (0.0, 0.5, 1.0))

SINGLE_COLUMNS = (
    "rate_kbps",
    "nfc_payload_bytes",
    "config",
    "seed",
    "retx_appliance",
    "retx_end_user",
    "dup_acks",
    "keepalives",
    "nfc_drops",
    "latency_s",
    "throughput_kbps",
    "goodput_kbps",
    "bw_utilization",
    "theoretical_min_latency_s",
)
SWEEP_COLUMNS = (*SINGLE_COLUMNS, "initial_rto_s")
LONG_COLUMNS = ("estimator", "modified_delayed_ack", "spurious_retx", "dup_acks", "session_s")
LONG_SWEEP_COLUMNS = ("large_share", "reply_share", *LONG_COLUMNS)
PACKET_COLUMNS = ("estimator", "seq", "size", "rto_s", "measured_rtt_s")

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


def long_session_sizes(
    count: int = LONG_MESSAGES,
    large_share: float = LONG_LARGE_SHARE,
    reply_share: float = LONG_REPLY_SHARE,
) -> tuple[list[int], list[int]]:
    """Message and answer sizes of the long session, drawn once from a fixed
    seed: each message is a recipe upload of 1001-1024 bytes with
    probability ``large_share``, else a control message of 8 or 9 bytes (the
    request header is 8); the end-user device answers a message with a
    reply of 8 or 9 bytes with probability ``reply_share``, else not at all
    (0)."""
    rng = random.Random(LONG_SIZES_SEED)
    messages, answers = [], []
    for _ in range(count):
        large = rng.random() < large_share
        messages.append(rng.randint(1001, 1024) if large else rng.randint(8, 9))
        answers.append(rng.randint(8, 9) if rng.random() < reply_share else 0)
    return messages, answers


def long_session_scenario(
    estimator: str,
    modified_ack: bool,
    count: int = LONG_MESSAGES,
    large_share: float = LONG_LARGE_SHARE,
    reply_share: float = LONG_REPLY_SHARE,
) -> str:
    """The long session at 11.2 kbps with channel sensing: the appliance
    writes its messages back to back, each the moment the previous one is
    acknowledged and answered; ``estimator`` is ``vj`` (lwIP's Van Jacobson
    estimator, optimum initial RTO) or ``algorithm1`` (the per-packet
    estimator); ``modified_ack`` switches to the size-aware delayed ACK."""
    rate = 11.2
    messages, answers = long_session_sizes(count, large_share, reply_share)
    app = (
        f'[[app]]\nkind = "message-series"\nname = "client"\nhost = "appliance"\n'
        f'peer = "{END_USER}:{SERVER_PORT}"\nsource_port = {CLIENT_PORT}\n'
        f"connect_first = true\nafter_ack = true\nsizes = {messages}\nresponses = {answers}\n"
    )
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
    duration = count * 20.0 + 180.0
    return scenario("bridge-long-session", rate, True, app, rto=rto, ack=ack, duration_s=duration)


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


def _long_label(estimator: str, modified: bool) -> str:
    return f"{estimator}-{'modified' if modified else 'plain'}-ack"


def _sweep_label(estimator: str, modified: bool, large: float, reply: float) -> str:
    return f"mix-large{large:g}-reply{reply:g}-{_long_label(estimator, modified)}"


def long_sweep_points(reduced: bool | None = None) -> tuple[tuple[float, float], ...]:
    """The mixes of the long session's sweep."""
    reduced = quick() if reduced is None else reduced
    return ((0.1, 0.0), (0.5, 1.0)) if reduced else LONG_SWEEP


def long_session_runs(reduced: bool | None = None) -> list[ExperimentRun]:
    """The long session's four runs with the documented mix, then the same
    four for every mix of the sweep."""
    reduced = quick() if reduced is None else reduced
    count = 12 if reduced else LONG_MESSAGES
    runs = [
        ExperimentRun(
            _long_label(estimator, modified),
            long_session_scenario(estimator, modified, count),
            1,
            params={"estimator": estimator, "modified_delayed_ack": modified},
        )
        for estimator, modified in LONG_RUNS
    ]
    for large, reply in long_sweep_points(reduced):
        for estimator, modified in LONG_RUNS:
            runs.append(
                ExperimentRun(
                    _sweep_label(estimator, modified, large, reply),
                    long_session_scenario(estimator, modified, count, large, reply),
                    1,
                    params={
                        "estimator": estimator,
                        "modified_delayed_ack": modified,
                        "large_share": large,
                        "reply_share": reply,
                    },
                )
            )
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
    """Duplicate ACKs and keep-alives as tshark's TCP analysis labels them
    (``tcp.analysis.duplicate_ack``, ``tcp.analysis.keep_alive``) in one
    capture, by the same rules: per direction it tracks the highest next
    sequence number, the last ACK number and the last window. A keep-alive
    carries 0 or 1 byte at one less than the next sequence number; a
    duplicate ACK carries no data, repeats the last ACK number and window
    (non-zero) at the next sequence number, and does not answer a
    keep-alive; neither has SYN, FIN or RST."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    counts = {"dup_acks": 0, "keepalives": 0}
    tcp = frame[frame["protocol"] == "tcp"]
    for row in tcp.itertuples(index=False):
        fwd_key = (row.src, row.src_port, row.dst, row.dst_port)
        rev_key = (row.dst, row.dst_port, row.src, row.src_port)
        fwd = state.setdefault(fwd_key, {"nextseq": 0, "lastack": 0, "window": None, "ka": False})
        rev = state.setdefault(rev_key, {"nextseq": 0, "lastack": 0, "window": None, "ka": False})
        flags = str(row.flags or "")
        control = any(f in flags for f in ("SYN", "FIN", "RST"))
        seq, ack, window = _u32(row.seq), _u32(row.ack), int(row.window)
        seglen = int(row.payload_len or 0)
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


def spurious_retransmissions(session: Session) -> int:
    """Retransmissions whose data had already got through: for each sending
    host, a resend of a segment (same sequence number, data, SYN or FIN) is
    spurious when an earlier copy of it reached the other host (matched by
    IP identification in the receiver's capture)."""
    count = 0
    for sender, receiver in ((APPLIANCE, END_USER), (END_USER, APPLIANCE)):
        sent = session.sent_by(sender)
        sent = sent[(sent["payload_len"].fillna(0) > 0) | sent["flags"].str.contains("SYN|FIN")]
        arrived = set(session.arrived_at(receiver)["ip_id"].dropna().astype(int))
        copies: dict[tuple[int, int], list[int]] = {}
        for row in sent.itertuples(index=False):
            key = (_u32(row.seq), int(row.payload_len or 0))
            earlier = copies.setdefault(key, [])
            if any(ip_id in arrived for ip_id in earlier):
                count += 1
            earlier.append(int(row.ip_id))
    return count


def _flows(result: Result) -> dict[str, dict[str, Any]]:
    return {str(f["host"]): f for f in result.report.get("flows", [])}


def _nfc_stats(result: Result) -> dict[str, Any]:
    for link in result.report.get("links", []):
        if link.get("kind") == "nfc":
            return dict(link["stats"])
    raise ValueError("the run has no NFC link")


def session_latency(result: Result) -> float:
    """From the appliance's SYN to the last ACK of the close reaching its
    host (the passive closer's connection turning CLOSED), in seconds; NaN
    when the session did not finish."""
    flows = _flows(result)
    appliance, enduser = flows.get("appliance"), flows.get("enduser")
    if appliance is None or enduser is None or enduser.get("closed_ns") is None:
        return math.nan
    if enduser.get("state") != "CLOSED":
        return math.nan
    return (int(enduser["closed_ns"]) - int(appliance["opened_ns"])) / 1e9


def exchange_row(result: Result, cell: Cell) -> dict[str, Any]:
    """One row of ``single_exchange.csv``."""
    session = Session.of(result)
    flows = _flows(result)
    stats = _nfc_stats(result)
    counts = tcp_analysis_counts(session.eth)
    latency = session_latency(result)
    carried = sum(int(d["nfc_payload_bytes"]) for d in stats["directions"])
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
        "nfc_drops": sum(int(d["dropped_mcu_busy"]) for d in stats["directions"]),
        "latency_s": latency,
        "throughput_kbps": throughput,
        "goodput_kbps": goodput,
        "bw_utilization": throughput / cell.rate_kbps,
        "theoretical_min_latency_s": theoretical_min_latency(
            payload, payload, cell.rate_kbps, phase, start
        ),
    }


def packet_rows(result: Result, estimator: str) -> list[dict[str, Any]]:
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
                "seq": (_u32(seq) - isn) % 2**32,
                "size": int(length) + HEADERS + FRAMING,
                "rto_s": rto_of.get(_u32(seq), math.nan),
                "measured_rtt_s": rtt,
            }
        )
    return rows


def long_row(result: Result, estimator: str, modified: bool) -> dict[str, Any]:
    """One row of ``long_session.csv``."""
    session = Session.of(result)
    return {
        "estimator": estimator,
        "modified_delayed_ack": modified,
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


def single_exchange_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Latency per size and configuration (both rates, with the channel's
    limit), the retransmission table, and throughput, goodput and
    bandwidth utilisation per size."""
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
        ax.legend(fontsize=8)
    figures.append(("latency", fig))

    shown = seed_table(
        table,
        ["rate_kbps", "nfc_payload_bytes", "config"],
        ["retx_appliance", "retx_end_user", "dup_acks", "nfc_drops"],
        digits=2,
    ).astype(str)
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(shown) + 1), layout="constrained")
    ax.axis("off")
    tab = ax.table(cellText=shown.values, colLabels=list(shown.columns), loc="center")
    tab.auto_set_font_size(False)
    tab.set_fontsize(7)
    ax.set_title(
        "Retransmissions, duplicate ACKs and NFC drops (n runs; mean over seeds, min..max)"
    )
    figures.append(("retransmissions", fig))

    fig, axes = plt.subplots(
        2, len(rates), figsize=(6 * len(rates), 7), layout="constrained", squeeze=False
    )
    for col, rate in enumerate(rates):
        part = mean.loc[rate].reset_index()
        for i, config in enumerate(CONFIGS):
            rows = part[part["config"] == config]
            axes[0][col].plot(
                rows["nfc_payload_bytes"],
                rows["throughput_kbps"],
                "o-",
                color=PALETTE[i],
                label=f"{config} throughput",
            )
            axes[0][col].plot(
                rows["nfc_payload_bytes"],
                rows["goodput_kbps"],
                "s--",
                color=PALETTE[i],
                label=f"{config} goodput",
            )
            axes[1][col].plot(
                rows["nfc_payload_bytes"],
                rows["bw_utilization"],
                "o-",
                color=PALETTE[i],
                label=config,
            )
        axes[0][col].set_title(f"{rate:g} kbps")
        axes[0][col].set_ylabel("kbit/s")
        axes[1][col].set_ylabel("bandwidth utilisation")
        axes[1][col].set_xlabel("NFC payload (bytes)")
        axes[0][col].legend(fontsize=6)
        axes[1][col].legend(fontsize=7)
    figures.append(("throughput", fig))
    return figures


def sweep_figures(table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Retransmissions and latency against the initial RTO, per rate."""
    import matplotlib.pyplot as plt

    if table.empty:
        return []
    rates = sorted(table["rate_kbps"].unique())
    fig, axes = plt.subplots(
        2, len(rates), figsize=(6 * len(rates), 7), layout="constrained", squeeze=False
    )
    for col, rate in enumerate(rates):
        part = table[table["rate_kbps"] == rate]
        for size, rows in part.groupby("nfc_payload_bytes"):
            m = rows.groupby("initial_rto_s").mean(numeric_only=True)
            axes[0][col].plot(
                m.index, m["retx_appliance"] + m["retx_end_user"], "o-", label=f"{size} B"
            )
            axes[1][col].plot(m.index, m["latency_s"], "o-", label=f"{size} B")
        axes[0][col].axvline(optimum_initial_rto(rate), color="k", ls=":", lw=1)
        axes[1][col].axvline(optimum_initial_rto(rate), color="k", ls=":", lw=1)
        axes[0][col].set_title(f"{rate:g} kbps, no sensing (dotted: optimum initial RTO)")
        axes[0][col].set_ylabel("retransmissions (both hosts)")
        axes[1][col].set_ylabel("session latency (s)")
        axes[1][col].set_xlabel("initial RTO (s)")
        axes[0][col].legend(fontsize=7)
    return [("initial-rto-sweep", fig)]


def long_session_figures(
    packets: pd.DataFrame, results: dict[str, Result]
) -> list[tuple[str, Figure]]:
    """RTO chosen against measured RTT per packet for both estimators, and a
    time-sequence plot of the session per estimator."""
    import matplotlib.pyplot as plt

    from rtolab.plots import PALETTE, time_sequence

    figures: list[tuple[str, Figure]] = []
    estimators = ["vj", "algorithm1"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained", sharey=True)
    for ax, estimator in zip(axes, estimators, strict=True):
        part = packets[packets["estimator"] == estimator].reset_index(drop=True)
        ax.plot(part.index, part["rto_s"], "o", ms=3, color=PALETTE[0], label="RTO chosen")
        ax.plot(
            part.index, part["measured_rtt_s"], "x", ms=4, color=PALETTE[1], label="measured RTT"
        )
        ax.set_title({"vj": "Van Jacobson (lwIP)", "algorithm1": "Algorithm 1"}[estimator])
        ax.set_xlabel("data packet")
        ax.set_ylabel("seconds")
        ax.legend(fontsize=8)
    figures.append(("rto-vs-rtt", fig))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    for ax, estimator in zip(axes, estimators, strict=True):
        label = f"{estimator}-modified-ack"
        if label in results:
            time_sequence(
                results[label],
                capture="nfc",
                flow=(APPLIANCE, CLIENT_PORT, END_USER, SERVER_PORT),
                ax=ax,
            )
            ax.set_title(f"{estimator}: appliance → end-user device (NFC side)")
    figures.append(("time-sequence", fig))
    return figures


def _nan_free(frame: pd.DataFrame, column: str) -> bool:
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
            _nan_free(table, "latency_s"),
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
    for name, fig in sweep_figures(table):
        save_figure(fig, out / "figures" / f"{name}.png")
    return [
        Check(
            "every session completed",
            _nan_free(table, "latency_s"),
            f"{int(table['latency_s'].notna().sum())} of {len(table)}",
        )
    ]


def long_session_checks(results: dict[str, Result]) -> list[Check]:
    """Writes ``long_session.csv``, ``long_session_packets.csv`` and the
    per-packet and time-sequence figures."""
    out = system_dir(results)
    if out is None:
        return [Check("runs completed", False, "no results")]
    rows, packets = [], []
    for estimator, modified in LONG_RUNS:
        label = _long_label(estimator, modified)
        if label not in results:
            continue
        rows.append(long_row(results[label], estimator, modified))
        if modified:
            packets.extend(packet_rows(results[label], estimator))
    table = pd.DataFrame(rows, columns=list(LONG_COLUMNS))
    packet_table = pd.DataFrame(packets, columns=list(PACKET_COLUMNS))
    sweep = []
    for large, reply in long_sweep_points():
        for estimator, modified in LONG_RUNS:
            label = _sweep_label(estimator, modified, large, reply)
            if label in results:
                row = long_row(results[label], estimator, modified)
                sweep.append({"large_share": large, "reply_share": reply, **row})
    sweep_table = pd.DataFrame(sweep, columns=list(LONG_SWEEP_COLUMNS))
    write_table(sweep_table, out / "long_session_sweep.csv")
    write_table(table, out / "long_session.csv")
    write_table(packet_table, out / "long_session_packets.csv")
    for name, fig in long_session_figures(packet_table, results):
        save_figure(fig, out / "figures" / f"long-session-{name}.png")
    return [
        Check(
            "every session completed",
            len(table) == len(LONG_RUNS) and _nan_free(table, "session_s"),
            f"{int(table['session_s'].notna().sum())} of {len(LONG_RUNS)}",
        ),
        Check(
            "an RTO was recorded for every data packet",
            _nan_free(packet_table, "rto_s"),
            f"{int(packet_table['rto_s'].notna().sum())} of {len(packet_table)}",
        ),
        Check(
            "every session of the mix sweep completed",
            len(sweep_table) == len(LONG_RUNS) * len(long_sweep_points())
            and _nan_free(sweep_table, "session_s"),
            f"{int(sweep_table['session_s'].notna().sum())} of "
            f"{len(LONG_RUNS) * len(long_sweep_points())}",
        ),
    ]


def report_sections(directory: Path, experiment: str) -> list[str]:
    """HTML for the reproduction report: the experiment's table (means over
    seeds) and figures, from the reproduction's output ``directory``."""
    from rtolab.reports import table_html

    bridge_dir = directory / SYSTEM
    files = {
        "single_exchange": ("single_exchange.csv", "single-exchange-"),
        "initial_rto_sweep": ("initial_rto_sweep.csv", "initial-rto-sweep"),
        "long_session": ("long_session.csv", "long-session-"),
    }
    csv, prefix = files[experiment]
    parts: list[str] = []
    path = bridge_dir / csv
    if path.is_file():
        frame = pd.read_csv(path)
        keys: Sequence[str] = (
            ["rate_kbps", "nfc_payload_bytes", "config"]
            if "config" in frame and experiment == "single_exchange"
            else ["rate_kbps", "nfc_payload_bytes", "initial_rto_s"]
            if experiment == "initial_rto_sweep"
            else []
        )
        if keys:
            shown = seed_table(frame, keys)
            heading = f"{csv} (n runs; mean over seeds, min..max where they differ)"
        else:
            shown, heading = frame.drop(columns="seed", errors="ignore"), csv
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
    )
)

register(
    Experiment(
        system=SYSTEM,
        name="long_session",
        title="Long session: Van Jacobson's estimator against Algorithm 1",
        description=(
            "One connection at 11.2 kbps with channel sensing carries a series of "
            "requests of varying size (8-9 byte control messages and 1-2 kB recipe "
            "uploads), each answered by the end-user device; lwIP's estimator against "
            "the per-packet Algorithm 1, with and without the modified delayed ACK. "
            "Writes long_session.csv and long_session_packets.csv."
        ),
        runs=long_session_runs,
        checks=long_session_checks,
        report=lambda directory: report_sections(directory, "long_session"),
    )
)
