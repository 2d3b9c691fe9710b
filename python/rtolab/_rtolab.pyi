"""Type stubs of the native module built from crates/py."""

import os
from typing import Any

__version__: str
#: Events in a row at one instant of simulated time that stop a run as stalled.
DEFAULT_STALL_EVENTS: int
#: Every name a run writes in its output directory besides its captures.
OUTPUT_NAMES: list[str]

class ScenarioError(ValueError):
    """A scenario failed validation; ``args`` is ``(field_path, message)``."""

class RunError(OSError):
    """A run failed after it started; files written so far are kept."""

class RunStopped(RunError):
    """A limit stopped a run before its end; ``args`` is ``(limit, message)``."""

class CaptureError(ValueError):
    """A capture file could not be read; ``args`` is ``(file_path, message)``."""

def validate_scenario(text: str) -> str:
    """Checks a scenario given as TOML text; returns a JSON summary of it."""

def parse_duration(text: str) -> int:
    """A duration as scenario files write it ("20s"), in nanoseconds."""

def run(
    text: str,
    seed: int | None = None,
    out_dir: str | None = None,
    duration_s: float | None = None,
    write_traces: bool = True,
    max_events: int | None = None,
    max_wall_s: float | None = None,
    max_output: int | None = None,
    max_stall_events: int | None = None,
    trace_level: str = "full",
    trace_families: list[str] | None = None,
    trace_format: str = "jsonl",
) -> bytes:
    """Runs a scenario given as TOML text and returns the run report as JSON
    (UTF-8); the limits stop it early (``RunStopped``), and so does a signal
    handler that raises (Ctrl-C), whose exception is raised here."""

def report_index(
    text: bytes,
) -> list[tuple[str, int, int, int | None, bool | None]]:
    """Where each top-level value of a run report (JSON) is: ``(key, start,
    end, length, objects)``, the last two for arrays only (their length, and
    whether every element is an object). ``ValueError`` unless the text is
    one JSON object."""

def write_metric_table(text: bytes, path: str | os.PathLike[str]) -> None:
    """Writes the long metrics table of a run report (JSON) to ``path`` as
    Parquet, the columns of :func:`rtolab.runreport.metric_table`. Raises
    ``ValueError`` when the text is not one JSON object, ``OSError`` when
    the file cannot be written."""

def metric_columns(text: bytes) -> dict[str, Any]:
    """The long metrics table of a run report (JSON) as columns: distinct
    strings (``scopes``, ``names``, ``kinds``, ``parts``, ``metrics``, each
    as the buffers of an Arrow ``large_string`` array: ``(length, validity
    or None, offsets, data)``), ``keys`` (the report key of each scope),
    ``items`` (per scope, its first name and count) and per row
    little-endian arrays ``scope`` (u8), ``name``, ``part``, ``metric``
    (u32) and ``value`` (f64). ``ValueError`` unless the text is one JSON
    object."""

def default_scenario() -> str:
    """The TOML text of the embedded default scenario."""

def read_capture(path: str) -> str:
    """Decodes a capture file; returns its packets as JSON columns."""

def read_wlan_capture(path: str) -> str:
    """Decodes an 802.11 radiotap capture; returns its frames as JSON columns."""

def read_tcp_segments(
    data: bytes, max_segments: int
) -> tuple[list[tuple[int, float, str, str, str, int, int | None, int]], int]:
    """The TCP segments of a pcap or pcapng capture held in ``data``, as
    ``(no, time_s, src, dst, flags, seq, ack, len)`` (times from the first
    packet, ``ack`` only with ACK), and the number of packets that are not
    TCP. Raises :class:`CaptureError` with an empty path and a message
    naming the packet or byte offset."""

def shipped_scenarios() -> list[tuple[str, str]]:
    """The scenario files shipped with rtolab, as (name, TOML text) pairs."""

def policy_catalog() -> str:
    """Every registered RTO, congestion-control and ACK policy as JSON: a list
    of ``{"family", "name", "description", "defaults"}`` objects."""

def kind_catalog() -> str:
    """Every registered link, MAC, app and middlebox kind as JSON: a list of
    ``{"family", "kind", "description", "fields"}`` objects, each field
    ``{"name", "type", "unit", "required", "default", "meaning"}``."""

def ack_pacing(outage: float, acks: int, mean: float, deviation: float) -> str:
    """The release schedule of ACK holding as JSON: ``step_forward``,
    ``global_minimum`` and ``timeout_free_minimum`` (n, the last null when
    no n is on time); per n < N, ``final_rto`` and ``timeout_free`` (null
    where n is not feasible) and ``stretch_time`` (null where it
    overflows); and ``schedule`` (global minimum), ``step_forward_schedule``
    and ``timeout_free_schedule`` (null when no n is on time), each
    ``{"n", "theta", "gaps", "rto_after", "first_timeout"}``. Raises
    ``ValueError`` whose message starts with the invalid parameter's name."""

def emulate_main(args: list[str]) -> int:
    """Runs the emulator's command line in this process (``["emulate",
    "SCENARIO.toml", "--json"]``); returns its exit status (0, 1: the run
    failed, 2: bad input)."""
