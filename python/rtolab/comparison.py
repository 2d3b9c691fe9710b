"""Comparing a run's capture with a reference capture, packet by packet.

A reference is a pcap or pcapng file (any capture of real TCP: Ethernet,
Linux cooked, loopback or raw IP link types), or a table of packets as a CSV
file or a Markdown table with the columns ``no.``, ``time (s)``,
``from → to``, ``flags``, ``seq/ack (relative)`` (optional) and ``TCP len``,
like the captures printed in a paper.

:func:`compare` reads both sides, keeps one TCP connection of each, sets
both clocks to zero at the SYN (or the first packet), turns sequence
numbers into relative ones per direction (as Wireshark shows them), and
aligns the two packet sequences: packets match when they go the same way
with the same flags, relative sequence and acknowledgement numbers and TCP
payload length. The result holds the matched pairs with their time error,
the packets only one side has and a summary.

Endpoints are matched by role: the SYN's sender is the client on both sides
(without a SYN, the sender of the first packet). ``mapping`` overrides that:
``{"app": "192.168.1.102"}`` says that the reference's ``app`` is the run's
192.168.1.102.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import os
import re
import stat
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rtolab import _rtolab
from rtolab.errors import RtolabError

#: Largest capture file read, bytes.
MAX_CAPTURE_BYTES = 256 * 1024 * 1024
#: Largest CSV or Markdown reference read, bytes.
MAX_TABLE_BYTES = 16 * 1024 * 1024
#: Most packets kept per side (of the compared connection).
MAX_PACKETS = 200_000
#: Largest exact alignment (packets of one side x packets of the other, once
#: the common start and end are set aside); larger ones are aligned by
#: matching blocks instead, and the summary says so.
MAX_ALIGN_CELLS = 2_000_000

#: TCP flags in the order Wireshark prints them, by bit.
FLAG_BITS: tuple[tuple[str, int], ...] = (
    ("FIN", 0x01),
    ("SYN", 0x02),
    ("RST", 0x04),
    ("PSH", 0x08),
    ("ACK", 0x10),
    ("URG", 0x20),
    ("ECE", 0x40),
    ("CWR", 0x80),
)
_FLAG_ORDER = {name: i for i, (name, _) in enumerate(FLAG_BITS)}
_FLAG_ALIASES = {"F": "FIN", "S": "SYN", "R": "RST", "P": "PSH", ".": "ACK", "U": "URG"}

#: Columns of the packet tables of a :class:`Comparison`.
PACKET_TABLE_COLUMNS = ("no", "time_s", "src", "dst", "flags", "seq", "ack", "len", "note")
#: Columns of :attr:`Comparison.pairs`.
PAIR_COLUMNS = (
    "run_no",
    "reference_no",
    "direction",
    "flags",
    "seq",
    "ack",
    "len",
    "run_time_s",
    "reference_time_s",
    "error_s",
)

ALIGNMENTS = ("syn", "first", "none")


class CompareError(RtolabError, ValueError):
    """A file given to :func:`compare` cannot be read or is not what it should
    be. ``path`` names the file; the message names the line, row or packet."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass
class Packet:
    """One TCP segment of either side, as compared."""

    no: int
    time_s: float
    src: str
    dst: str
    flags: str
    seq: int | None
    ack: int | None
    len: int
    note: str = ""


@dataclass
class Capture:
    """The packets of one side (``source`` says where they came from) and
    whether the side gives sequence numbers at all."""

    source: str
    packets: list[Packet]
    has_seq: bool = True
    ignored: int = 0
    #: Sequence numbers as sent (a capture), not yet relative (a table).
    absolute: bool = False


@dataclass
class Comparison:
    """What :func:`compare` found.

    ``pairs`` holds one row per matched packet (``error_s`` is the run's time
    minus the reference's, both measured from the alignment point);
    ``only_run`` and ``only_reference`` the packets one side alone has;
    ``alignment`` the whole alignment in order, as pairs of row positions
    (``None`` where a side has no packet); ``summary`` the numbers.
    """

    pairs: pd.DataFrame
    only_run: pd.DataFrame
    only_reference: pd.DataFrame
    summary: dict[str, Any]
    run: pd.DataFrame
    reference: pd.DataFrame
    alignment: list[tuple[int | None, int | None]] = field(default_factory=list)

    def outside(self, absolute_s: float = 0.0, relative: float = 0.0) -> pd.DataFrame:
        """The matched pairs whose time error exceeds ``absolute_s`` seconds
        or ``relative`` times the reference's time, whichever is larger:
        ``outside(0.1, 0.1)`` for "within 10 % or 100 ms". The reference's
        time counts from the alignment point, so it is the elapsed time the
        tolerance scales with."""
        if absolute_s < 0 or relative < 0:
            raise ValueError("tolerances are not negative")
        allowed = (self.pairs["reference_time_s"].abs() * relative).clip(lower=absolute_s)
        return self.pairs[self.pairs["error_s"].abs() > allowed].reset_index(drop=True)

    def side_by_side(self) -> list[tuple[list[str], str]]:
        """The side-by-side table as text, one row per packet in alignment
        order (columns :data:`SIDE_BY_SIDE_COLUMNS`), each with what the row
        is: ``"matched"``, ``"only run"`` or ``"only ref"``."""
        # Rows as dicts once: a DataFrame's .iloc per cell took seconds for
        # a capture of thousands of packets.
        run = self.run.to_dict(orient="records")
        reference = self.reference.to_dict(orient="records")
        rows = []
        for i, j in self.alignment:
            packet = run[i] if i is not None else reference[j]
            if i is not None and j is not None:
                error = run[i]["time_s"] - reference[j]["time_s"]
                status, delta = "matched", f"{error * 1e3:+.3f}"
            else:
                status = "only run" if j is None else "only ref"
                delta = status
            note = reference[j]["note"] if j is not None else ""
            cells = [
                *_side_text(run, i),
                *_side_text(reference, j),
                delta,
                str(packet["direction"]),
                str(packet["flags"]),
                seqack_text(packet["seq"], packet["ack"]),
                str(_plain(packet["len"])),
                str(note),
            ]
            rows.append((cells, status))
        return rows

    def summary_lines(self) -> list[str]:
        """The summary as the command prints it below the table: packets
        matched, the time error, and the first divergence."""
        summary = self.summary
        matched = summary["matched"]
        lines = [
            f"matched {matched} of {summary['run_packets']} run and "
            f"{summary['reference_packets']} reference packets "
            f"({summary['matched_fraction']:.1%}); compared: {', '.join(summary['compared'])}",
        ]
        if matched:
            lines.append(
                f"time error: median {summary['median_abs_error_s'] * 1e3:.3f} ms, "
                f"worst {summary['worst_abs_error_s'] * 1e3:.3f} ms "
                f"(run no. {summary['worst_pair']['run_no']}, "
                f"reference no. {summary['worst_pair']['reference_no']})"
            )
        divergence = summary["first_divergence"]
        if divergence is None:
            lines.append("no divergence: the same packets in the same order")
        else:
            sides = []
            for side in ("run", "reference"):
                packet = divergence[side]
                if packet is None:
                    sides.append(f"{side}: ended")
                else:
                    sides.append(
                        f"{side} no. {packet['no']} {packet['direction']} {packet['flags']} "
                        f"{seqack_text(packet['seq'], packet['ack'])} len {packet['len']} "
                        f"at {packet['time_s']:.6f} s".replace("  ", " ")
                    )
            lines.append(f"first divergence at row {divergence['index'] + 1}: " + "; ".join(sides))
        return lines

    def to_markdown(self) -> str:
        """The side-by-side table as a Markdown table, then the summary
        lines as a list: what ``rtolab compare --markdown`` prints. User text is kept
        to one cell: bars are escaped, control characters shown as
        ``\\xNN``."""
        header = [name for name, _ in SIDE_BY_SIDE_COLUMNS]
        rule = ["---:" if justify == "right" else "---" for _, justify in SIDE_BY_SIDE_COLUMNS]
        lines = [_markdown_row(header), "|" + "|".join(rule) + "|"]
        lines += [_markdown_row(cells) for cells, _ in self.side_by_side()]
        return "\n".join(lines) + "\n\n" + self.summary_markdown()

    def summary_markdown(self) -> str:
        """The summary lines as a Markdown list: what ``rtolab compare
        --summary --markdown`` prints, and the end of :meth:`to_markdown`."""
        return "".join(f"- {_escape_controls(line)}\n" for line in self.summary_lines())

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-ready values (missing values as ``None``)."""
        return {
            "summary": self.summary,
            "pairs": _records(self.pairs),
            "only_run": _records(self.only_run),
            "only_reference": _records(self.only_reference),
            "alignment": [list(pair) for pair in self.alignment],
        }


#: Columns of the side-by-side table and how each is justified.
SIDE_BY_SIDE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run", "right"),
    ("t run (s)", "right"),
    ("ref", "right"),
    ("t ref (s)", "right"),
    ("Δt (ms)", "right"),
    ("direction", "left"),
    ("flags", "left"),
    ("seq/ack", "left"),
    ("len", "right"),
    ("note", "left"),
)

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape_controls(text: str) -> str:
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _markdown_row(cells: Sequence[str]) -> str:
    escaped = [_escape_controls(c).replace("|", "\\|") for c in cells]
    return "| " + " | ".join(escaped) + " |"


def seqack_text(seq: Any, ack: Any) -> str:
    """``seq N ack M`` as the tables print it, leaving out what is missing."""
    parts = []
    if _present(seq):
        parts.append(f"seq {seq}")
    if _present(ack):
        parts.append(f"ack {ack}")
    return " ".join(parts)


def _present(value: Any) -> bool:
    """Not missing: neither ``None``, pandas' NA nor NaN."""
    return value is not None and not pd.isna(value)


def _side_text(rows: Sequence[Mapping[str, Any]], position: int | None) -> list[str]:
    """A side's packet number and time, or a dash where it has no packet."""
    if position is None:
        return ["—", ""]
    row = rows[position]
    return [str(_plain(row["no"])), f"{row['time_s']:.6f}"]


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {key: _plain(value) for key, value in row.items()}
        for row in frame.to_dict(orient="records")
    ]


def _plain(value: Any) -> Any:
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


# ----- reading files -----


def _read_file(path: Path) -> bytes:
    """The bytes of a capture or a table, refused by size before they are
    read: a capture may have up to :data:`MAX_CAPTURE_BYTES`, anything else
    (a table) :data:`MAX_TABLE_BYTES`."""
    try:
        if path.is_dir():
            pcaps = sorted(p.name for p in path.glob("*.pcap"))
            hint = f"; give one of its captures: {', '.join(pcaps)}" if pcaps else ""
            raise CompareError(str(path), f"is a directory{hint}")
        status = path.stat()
        if not stat.S_ISREG(status.st_mode):
            # A FIFO or a device would block, or never end.
            raise CompareError(str(path), "not a regular file: give a capture or a table")
        size = status.st_size
        with open(path, "rb") as f:
            magic = f.read(4)
            if magic in _CAPTURE_MAGICS:
                if size > MAX_CAPTURE_BYTES:
                    raise CompareError(
                        str(path),
                        f"{size} bytes: larger than the {MAX_CAPTURE_BYTES} bytes "
                        "a capture may have",
                    )
                limit = MAX_CAPTURE_BYTES
            else:
                if size > MAX_TABLE_BYTES:
                    raise CompareError(
                        str(path),
                        f"not a pcap, and larger than the {MAX_TABLE_BYTES} bytes a table may have",
                    )
                limit = MAX_TABLE_BYTES
            # At most one byte past the limit: a file that grew is still caught.
            return magic + f.read(limit + 1 - len(magic))
    except FileNotFoundError:
        raise CompareError(str(path), "no such file") from None
    except OSError as err:
        raise CompareError(str(path), f"cannot read: {err.strerror}") from None


#: The first four bytes of a capture: pcap (both byte orders, micro- and
#: nanoseconds) and pcapng (a section header block); the core reads the rest.
_CAPTURE_MAGICS = frozenset(
    {
        b"\xd4\xc3\xb2\xa1",
        b"\xa1\xb2\xc3\xd4",
        b"\x4d\x3c\xb2\xa1",
        b"\xa1\xb2\x3c\x4d",
        b"\x0a\x0d\x0d\x0a",
    }
)


def read_packets(path: str | os.PathLike[str], table: str | None = None) -> Capture:
    """The TCP packets of a capture or a reference table, in file order.

    ``table`` chooses one table of a Markdown file holding several: its
    number (from 1) or the start of the heading above it (``"B"`` for
    ``## B. ...``). Raises :class:`CompareError` naming the file and the
    line, row or packet when something is wrong.
    """
    path = Path(path)
    head = _read_file(path)
    if head[:4] in _CAPTURE_MAGICS:
        return _read_capture(path, head)
    if len(head) > MAX_TABLE_BYTES:
        raise CompareError(
            str(path),
            f"not a pcap, and larger than the {MAX_TABLE_BYTES} bytes a table may have",
        )
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CompareError(
            str(path), "not a pcap, pcapng, CSV or Markdown table (binary data)"
        ) from None
    if any(line.lstrip().startswith("|") for line in text.splitlines()):
        return _read_markdown(path, text, table)
    if table is not None:
        raise CompareError(str(path), "--table applies to Markdown files only")
    return _read_csv(path, text)


# ----- captures -----


def _read_capture(path: Path, data: bytes) -> Capture:
    """The TCP packets of a pcap or pcapng capture, read by the core's
    capture reader (the wire crate's, as for a run's own captures): any
    link type that carries IP, times from the file's first packet."""
    try:
        segments, ignored = _rtolab.read_tcp_segments(data, MAX_PACKETS)
    except _rtolab.CaptureError as err:
        message = err.args[1] if len(err.args) == 2 else str(err)
        raise CompareError(str(path), str(message)) from None
    packets = [Packet(*segment) for segment in segments]
    return Capture(str(path), packets, ignored=ignored, absolute=True)


# ----- tables -----

#: Header names (lower case, parenthesised parts removed) and what they hold.
_HEADERS = {
    "no": "no",
    "no.": "no",
    "#": "no",
    "frame": "no",
    "index": "no",
    "time": "time",
    "time_s": "time",
    "t": "time",
    "from → to": "direction",
    "from -> to": "direction",
    "from->to": "direction",
    "from→to": "direction",
    "direction": "direction",
    "from": "src",
    "src": "src",
    "source": "src",
    "to": "dst",
    "dst": "dst",
    "destination": "dst",
    "flags": "flags",
    "seq/ack": "seqack",
    "seq": "seq",
    "ack": "ack",
    "tcp len": "len",
    "tcp_len": "len",
    "len": "len",
    "length": "len",
    "payload_len": "len",
}
_REQUIRED = ("time", "flags", "len")


def _header_kind(name: str) -> str:
    key = re.sub(r"\([^)]*\)", "", name).strip().lower()
    key = re.sub(r"\s+", " ", key)
    return _HEADERS.get(key, "note")


def _columns(path: Path, header: list[str], where: str) -> dict[str, int]:
    columns: dict[str, int] = {}
    for i, name in enumerate(header):
        kind = _header_kind(name)
        if kind == "note":
            columns.setdefault("note", i)
        elif kind in columns:
            raise CompareError(str(path), f"{where}: column {name.strip()!r} appears twice")
        else:
            columns[kind] = i
    missing = [k for k in _REQUIRED if k not in columns]
    if "direction" not in columns and not ("src" in columns and "dst" in columns):
        missing.insert(1, "from → to")
    if missing:
        names = {"time": "time (s)", "len": "TCP len"}
        listed = ", ".join(names.get(m, m) for m in missing)
        raise CompareError(str(path), f"{where}: missing column {listed}")
    return columns


_ARROW = re.compile(r"\s*(?:→|->|>|\bto\b)\s*")


def _row_packet(
    path: Path, columns: dict[str, int], cells: list[str], where: str, position: int
) -> Packet:
    def cell(kind: str) -> str:
        i = columns.get(kind)
        return cells[i].strip() if i is not None and i < len(cells) else ""

    needed = max(i for k, i in columns.items() if k != "note") + 1
    if len(cells) < needed:
        raise CompareError(
            str(path), f"{where}: {len(cells)} cells, but the header has {needed} columns"
        )
    text = cell("time")
    try:
        time_s = float(text)
    except ValueError:
        raise CompareError(str(path), f"{where}: time {text!r} is not a number") from None
    if not math.isfinite(time_s):
        raise CompareError(str(path), f"{where}: time {text!r} is not a finite number")
    if "direction" in columns:
        parts = [p for p in _ARROW.split(cell("direction")) if p]
        if len(parts) != 2:
            raise CompareError(
                str(path), f"{where}: direction {cell('direction')!r} is not 'FROM → TO'"
            )
        src, dst = parts
    else:
        src, dst = cell("src"), cell("dst")
        if not src or not dst:
            raise CompareError(str(path), f"{where}: empty from or to")
    flags = _parse_flags(path, cell("flags"), where)
    seq = ack = None
    if "seqack" in columns:
        seq, ack = _parse_seqack(path, cell("seqack"), where)
    if "seq" in columns:
        seq = _parse_int(path, cell("seq"), where, "seq")
    if "ack" in columns:
        ack = _parse_int(path, cell("ack"), where, "ack")
    length = _parse_int(path, cell("len"), where, "TCP len")
    if length is None:
        raise CompareError(str(path), f"{where}: empty TCP len")
    number_text = cell("no")
    no = _parse_int(path, number_text, where, "no.") if number_text else None
    return Packet(
        no if no is not None else position,
        time_s,
        src,
        dst,
        flags,
        seq,
        ack,
        length,
        cell("note"),
    )


def _parse_int(path: Path, text: str, where: str, name: str) -> int | None:
    text = text.strip()
    if not text or text in ("-", "—"):
        return None
    if not re.fullmatch(r"\d{1,12}", text):
        raise CompareError(str(path), f"{where}: {name} {text!r} is not a whole number")
    return int(text)


def _parse_flags(path: Path, text: str, where: str) -> str:
    names = [n for n in re.split(r"[\s,+|/\[\]]+", text.upper()) if n]
    if not names and text.strip() in ("", "."):
        names = ["ACK"] if text.strip() == "." else []
    found = set()
    for name in names:
        name = _FLAG_ALIASES.get(name, name)
        if name not in _FLAG_ORDER:
            raise CompareError(str(path), f"{where}: unknown TCP flag {name!r} in {text!r}")
        found.add(name)
    if not found:
        raise CompareError(str(path), f"{where}: no TCP flags given")
    return ",".join(sorted(found, key=_FLAG_ORDER.__getitem__))


def _parse_seqack(path: Path, text: str, where: str) -> tuple[int | None, int | None]:
    text = text.strip()
    if not text or text in ("-", "—"):
        return None, None
    named = re.fullmatch(
        r"(?:seq\s*=?\s*(\d{1,12}))?\s*,?\s*(?:ack\s*=?\s*(\d{1,12}))?", text, re.I
    )
    if named and (named.group(1) or named.group(2)):
        return (
            int(named.group(1)) if named.group(1) else None,
            int(named.group(2)) if named.group(2) else None,
        )
    slash = re.fullmatch(r"(\d{1,12})\s*/\s*(\d{1,12})?", text)
    if slash:
        return int(slash.group(1)), int(slash.group(2)) if slash.group(2) else None
    raise CompareError(str(path), f"{where}: seq/ack {text!r} is not 'seq N ack M' (or 'N/M')")


def _split_row(line: str) -> list[str]:
    """The cells of a Markdown table row; ``\\|`` is a literal bar."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


@dataclass
class _Table:
    heading: str
    start: int  # the header's line number
    lines: list[tuple[int, str]]


def _markdown_tables(text: str) -> list[_Table]:
    tables: list[_Table] = []
    heading = ""
    fenced = False
    current: _Table | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
        if fenced:
            current = None
            continue
        if stripped.startswith("#"):
            heading = stripped.lstrip("#").strip()
        if stripped.startswith("|"):
            if current is None:
                current = _Table(heading, number, [])
                tables.append(current)
            current.lines.append((number, line))
        else:
            current = None
    return tables


def _is_packet_table(table: _Table) -> bool:
    kinds = {_header_kind(c) for c in _split_row(table.lines[0][1])}
    return "time" in kinds and "flags" in kinds


def _choose_table(path: Path, tables: list[_Table], choice: str | None) -> _Table:
    packet_tables = [t for t in tables if _is_packet_table(t)] or tables
    described = "; ".join(
        f"{i}: {t.heading or 'line ' + str(t.start)}" for i, t in enumerate(packet_tables, 1)
    )
    if choice is None:
        if len(packet_tables) == 1:
            return packet_tables[0]
        raise CompareError(
            str(path),
            f"holds {len(packet_tables)} packet tables; choose one with --table ({described})",
        )
    if choice.isdigit():
        index = int(choice)
        if 1 <= index <= len(packet_tables):
            return packet_tables[index - 1]
        raise CompareError(str(path), f"--table {choice}: no such table ({described})")
    wanted = choice.strip().lower()
    starting = [
        t
        for t in packet_tables
        if re.match(rf"{re.escape(wanted)}(?:[.:)\s]|$)", t.heading.lower())
    ]
    found = starting or [t for t in packet_tables if wanted in t.heading.lower()]
    if len(found) == 1:
        return found[0]
    what = "no" if not found else "more than one"
    raise CompareError(str(path), f"--table {choice!r}: {what} table matches ({described})")


def _read_markdown(path: Path, text: str, choice: str | None) -> Capture:
    tables = _markdown_tables(text)
    table = _choose_table(path, tables, choice)
    header_line, header = table.lines[0]
    columns = _columns(path, _split_row(header), f"line {header_line}")
    rows = table.lines[1:]
    if rows and _SEPARATOR.match(rows[0][1]):
        rows = rows[1:]
    return _table_capture(path, columns, [(n, _split_row(line)) for n, line in rows])


def _read_csv(path: Path, text: str) -> Capture:
    first = text.split("\n", 1)[0]
    delimiter = max((",", ";", "\t"), key=first.count)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows: list[tuple[int, list[str]]] = []
    try:
        for row in reader:
            if any(c.strip() for c in row):
                rows.append((reader.line_num, row))
                # The header and one row too many say enough: stop reading.
                if len(rows) > MAX_PACKETS + 1:
                    break
    except csv.Error as err:
        raise CompareError(str(path), f"line {reader.line_num}: not CSV ({err})") from None
    if not rows:
        raise CompareError(str(path), "empty: no header and no packets")
    header_line, header = rows[0]
    columns = _columns(path, header, f"line {header_line}")
    return _table_capture(path, columns, rows[1:])


def _table_capture(
    path: Path, columns: dict[str, int], rows: Sequence[tuple[int, list[str]]]
) -> Capture:
    """The packets of a table's rows (line number, cells), either format."""
    if len(rows) > MAX_PACKETS:
        raise CompareError(str(path), f"more than {MAX_PACKETS} packets")
    packets = [
        _row_packet(path, columns, cells, f"line {number}", i)
        for i, (number, cells) in enumerate(rows, start=1)
    ]
    has_seq = "seqack" in columns or "seq" in columns
    return Capture(str(path), packets, has_seq=has_seq)


# ----- connection, roles, relative numbers -----


def _endpoint_matches(endpoint: str, address: str) -> bool:
    """``address`` names ``endpoint`` exactly or by its host part."""
    if endpoint == address:
        return True
    host, _, port = endpoint.rpartition(":")
    return bool(port.isdigit() and host and host.strip("[]") == address.strip("[]"))


def _connection(capture: Capture, wanted: Sequence[str]) -> tuple[list[Packet], str, str]:
    """The packets of one connection, its client and its server.

    The connection is the first one (by its SYN, else by its first packet)
    whose endpoints include every address in ``wanted``.
    """
    candidates = [
        p
        for p in capture.packets
        if all(_endpoint_matches(p.src, a) or _endpoint_matches(p.dst, a) for a in wanted)
    ]
    if not candidates:
        if wanted:
            raise CompareError(
                capture.source, f"no packet between the endpoints {', '.join(wanted)}"
            )
        raise CompareError(capture.source, "holds no TCP packet")
    syn = _first_syn_index(candidates)
    opener = candidates[syn if syn is not None else 0]
    client, server = opener.src, opener.dst
    ends = {client, server}
    packets = [p for p in candidates if {p.src, p.dst} == ends]
    return packets, client, server


def _relative(packets: list[Packet], client: str) -> list[Packet]:
    """Sequence and acknowledgement numbers relative to each direction's
    initial sequence number, as Wireshark shows them. The initial number is
    the SYN's; without one, one less than the first acknowledgement the
    other side sends (so a capture that lost the SYN-ACK still numbers the
    server's bytes from 1); else the first sequence number seen."""
    initial: dict[bool, int] = {}
    first_ack: dict[bool, int] = {}
    first_seq: dict[bool, int] = {}
    for p in packets:
        forward = p.src == client
        if p.seq is not None and "SYN" in p.flags.split(","):
            initial.setdefault(forward, p.seq)
        if p.seq is not None:
            first_seq.setdefault(forward, p.seq)
        if p.ack is not None:
            first_ack.setdefault(not forward, (p.ack - 1) % 2**32)
    for forward in (True, False):
        if forward not in initial:
            if forward in first_ack:
                initial[forward] = first_ack[forward]
            elif forward in first_seq:
                initial[forward] = first_seq[forward]
    out = []
    for p in packets:
        forward = p.src == client
        seq = (p.seq - initial[forward]) % 2**32 if p.seq is not None else None
        ack = None
        if p.ack is not None and (not forward) in initial:
            ack = (p.ack - initial[not forward]) % 2**32
        out.append(Packet(p.no, p.time_s, p.src, p.dst, p.flags, seq, ack, p.len, p.note))
    return out


def _first_syn_index(packets: Sequence[Packet]) -> int | None:
    """Position of the first SYN without ACK (a connection's opening)."""
    for i, p in enumerate(packets):
        flags = p.flags.split(",")
        if "SYN" in flags and "ACK" not in flags:
            return i
    return None


# ----- alignment -----


def _align_keys(
    run_keys: Sequence[tuple[Any, ...]],
    ref_keys: Sequence[tuple[Any, ...]],
    partial: bool = True,
) -> tuple[list[tuple[int | None, int | None]], str]:
    """The order-preserving alignment with the most matches (a longest common
    subsequence), as pairs of positions; ``None`` marks a packet only one side
    has. Returns the method used too.

    Written here rather than taken from :mod:`difflib`: its matcher grows the
    longest contiguous block first, which can leave fewer packets matched
    than possible (it is used only past :data:`MAX_ALIGN_CELLS`). A field
    that either side leaves out (``None``) matches any value.
    """

    def wildcard(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
        return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))

    # Plain tuple equality is several times faster, and exact unless a side
    # left out a field its flags call for (a table row without its ack).
    same = wildcard if partial else tuple.__eq__

    n, m = len(run_keys), len(ref_keys)
    # The common start is matched at once (it is most of a good run). The
    # common end is not: that would pair a late retransmission with the
    # reference's packet where the alignment favours the earliest match.
    start = 0
    while start < n and start < m and same(run_keys[start], ref_keys[start]):
        start += 1
    head = [(i, i) for i in range(start)]
    a, b = run_keys[start:], ref_keys[start:]
    method = "lcs"
    if len(a) * len(b) <= MAX_ALIGN_CELLS:
        middle = _lcs(a, b, same)
    else:
        method = "blocks"
        middle = _blocks(a, b)
    body = [(None if i is None else i + start, None if j is None else j + start) for i, j in middle]
    return head + body, method


def _lcs(
    a: Sequence[tuple[Any, ...]], b: Sequence[tuple[Any, ...]], same: Any
) -> list[tuple[int | None, int | None]]:
    n, m = len(a), len(b)
    # lengths[i][j]: the longest common subsequence of a[i:] and b[j:].
    lengths = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = lengths[i], lengths[i + 1]
        for j in range(m - 1, -1, -1):
            if same(a[i], b[j]):
                row[j] = below[j + 1] + 1
            else:
                row[j] = max(below[j], row[j + 1])
    out: list[tuple[int | None, int | None]] = []
    i = j = 0
    while i < n and j < m:
        if same(a[i], b[j]) and lengths[i][j] == lengths[i + 1][j + 1] + 1:
            out.append((i, j))
            i += 1
            j += 1
        elif lengths[i + 1][j] >= lengths[i][j + 1]:
            # A packet missing from the reference is listed before one
            # missing from the run, in time order of the run.
            out.append((i, None))
            i += 1
        else:
            out.append((None, j))
            j += 1
    out += [(k, None) for k in range(i, n)]
    out += [(None, k) for k in range(j, m)]
    return out


def _blocks(
    a: Sequence[tuple[Any, ...]], b: Sequence[tuple[Any, ...]]
) -> list[tuple[int | None, int | None]]:
    matcher = difflib.SequenceMatcher(None, list(a), list(b), autojunk=False)
    out: list[tuple[int | None, int | None]] = []
    i = j = 0
    for block in matcher.get_matching_blocks():
        out += [(k, None) for k in range(i, block.a)]
        out += [(None, k) for k in range(j, block.b)]
        out += [(block.a + k, block.b + k) for k in range(block.size)]
        i, j = block.a + block.size, block.b + block.size
    return out


# ----- the comparison -----


def _frame(packets: Sequence[Packet], directions: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "no": pd.array([p.no for p in packets], dtype="Int64"),
            "time_s": pd.array([p.time_s for p in packets], dtype="float64"),
            "src": [p.src for p in packets],
            "dst": [p.dst for p in packets],
            "direction": list(directions),
            "flags": [p.flags for p in packets],
            "seq": pd.array([p.seq for p in packets], dtype="Int64"),
            "ack": pd.array([p.ack for p in packets], dtype="Int64"),
            "len": pd.array([p.len for p in packets], dtype="Int64"),
            "note": [p.note for p in packets],
        }
    )
    return frame


def _load(source: str | os.PathLike[str] | Capture, table: str | None) -> Capture:
    if isinstance(source, Capture):
        return source
    return read_packets(source, table)


def _parse_mapping(mapping: Mapping[str, str] | Sequence[str] | None) -> dict[str, str]:
    if mapping is None:
        return {}
    if isinstance(mapping, Mapping):
        return {str(k).strip(): str(v).strip() for k, v in mapping.items()}
    out = {}
    for item in mapping:
        name, sep, address = str(item).partition("=")
        if not sep or not name.strip() or not address.strip():
            raise CompareError("--map", f"{item!r} is not NAME=ADDRESS")
        out[name.strip()] = address.strip()
    return out


def _check_names(capture: Capture, names: Mapping[str, str]) -> None:
    """Every name of a mapping is an endpoint of the reference."""
    endpoints = list(dict.fromkeys(e for p in capture.packets for e in (p.src, p.dst)))
    for name in names:
        if not any(_endpoint_matches(e, name) for e in endpoints):
            shown = ", ".join(endpoints[:6]) + (", …" if len(endpoints) > 6 else "")
            raise CompareError(capture.source, f"--map {name}: no such endpoint (it has {shown})")


def compare(
    run: str | os.PathLike[str] | Capture,
    reference: str | os.PathLike[str] | Capture,
    *,
    align: str = "syn",
    mapping: Mapping[str, str] | Sequence[str] | None = None,
    table: str | None = None,
) -> Comparison:
    """Compares the packets of a run's capture with a reference, one TCP
    connection each.

    ``run`` and ``reference`` are paths (pcap, pcapng, CSV or Markdown, see
    :func:`read_packets`) or :class:`Capture` objects. ``align`` is ``"syn"``
    (both clocks start at the first SYN), ``"first"`` (at the first packet)
    or ``"none"`` (the times as recorded). ``mapping`` maps reference
    endpoints to run addresses (``{"app": "192.168.1.102"}`` or
    ``["app=192.168.1.102"]``); ``table`` chooses a table of a Markdown
    reference. Raises :class:`CompareError` on unreadable input.
    """
    if align not in ALIGNMENTS:
        raise CompareError("--align", f"expected one of {', '.join(ALIGNMENTS)}, got {align!r}")
    names = _parse_mapping(mapping)
    run_capture = _load(run, None)
    ref_capture = _load(reference, table)

    _check_names(ref_capture, names)
    ref_packets, ref_client, ref_server = _connection(ref_capture, list(names))
    run_packets, run_client, run_server = _connection(run_capture, list(names.values()))
    if names:
        # The user's mapping decides the roles: the run endpoint named for the
        # reference's client is the client.
        for name, address in names.items():
            ref_is_client = _endpoint_matches(ref_client, name)
            run_end = run_client if _endpoint_matches(run_client, address) else run_server
            if not _endpoint_matches(run_end, address):
                raise CompareError(
                    run_capture.source,
                    f"--map {name}={address}: no such endpoint "
                    f"(it has {run_client} and {run_server})",
                )
            if (run_end == run_client) != ref_is_client:
                run_client, run_server = run_server, run_client

    sides = []
    for capture, packets, client in (
        (run_capture, run_packets, run_client),
        (ref_capture, ref_packets, ref_client),
    ):
        if capture.absolute:
            packets = _relative(packets, client)
        if align == "syn":
            index = _first_syn_index(packets)
            if index is None:
                raise CompareError(
                    capture.source, "has no SYN to align on (use --align first or none)"
                )
            zero = packets[index].time_s
        elif align == "first":
            zero = packets[0].time_s
        else:
            zero = 0.0
        packets = [
            Packet(p.no, p.time_s - zero, p.src, p.dst, p.flags, p.seq, p.ack, p.len, p.note)
            for p in packets
        ]
        sides.append(packets)
    run_packets, ref_packets = sides

    compare_seq = run_capture.has_seq and ref_capture.has_seq
    arrow = {True: f"{ref_client} → {ref_server}", False: f"{ref_server} → {ref_client}"}

    def key(p: Packet, client: str) -> tuple[Any, ...]:
        if compare_seq:
            return (p.src == client, p.flags, p.seq, p.ack, p.len)
        return (p.src == client, p.flags, p.len)

    run_keys = [key(p, run_client) for p in run_packets]
    ref_keys = [key(p, ref_client) for p in ref_packets]
    partial = compare_seq and any(
        p.seq is None or (p.ack is None and "ACK" in p.flags.split(","))
        for p in (*run_packets, *ref_packets)
    )
    alignment, method = _align_keys(run_keys, ref_keys, partial)

    run_frame = _frame(run_packets, [arrow[p.src == run_client] for p in run_packets])
    ref_frame = _frame(ref_packets, [arrow[p.src == ref_client] for p in ref_packets])

    pair_rows = []
    for i, j in alignment:
        if i is None or j is None:
            continue
        r, f = run_packets[i], ref_packets[j]
        pair_rows.append(
            {
                "run_no": r.no,
                "reference_no": f.no,
                "direction": arrow[r.src == run_client],
                "flags": r.flags,
                "seq": r.seq if compare_seq else None,
                "ack": r.ack if compare_seq else None,
                "len": r.len,
                "run_time_s": r.time_s,
                "reference_time_s": f.time_s,
                "error_s": r.time_s - f.time_s,
            }
        )
    pairs = pd.DataFrame(pair_rows, columns=list(PAIR_COLUMNS))
    for name in ("run_no", "reference_no", "seq", "ack", "len"):
        pairs[name] = pairs[name].astype("Int64")
    for name in ("run_time_s", "reference_time_s", "error_s"):
        pairs[name] = pairs[name].astype("float64")
    only_run = run_frame.iloc[[i for i, j in alignment if j is None and i is not None]]
    only_ref = ref_frame.iloc[[j for i, j in alignment if i is None and j is not None]]

    errors = [abs(e) for e in pairs["error_s"]]
    worst = max(range(len(errors)), key=errors.__getitem__) if errors else None
    divergence = next((k for k, (i, j) in enumerate(alignment) if i is None or j is None), None)
    summary: dict[str, Any] = {
        "run": run_capture.source,
        "reference": ref_capture.source,
        "align": align,
        "compared": ["direction", "flags", "seq", "ack", "len"]
        if compare_seq
        else ["direction", "flags", "len"],
        "alignment_method": method,
        "run_client": run_client,
        "run_server": run_server,
        "reference_client": ref_client,
        "reference_server": ref_server,
        "run_packets": len(run_packets),
        "reference_packets": len(ref_packets),
        "matched": len(pairs),
        "only_run": len(only_run),
        "only_reference": len(only_ref),
        # 1 exactly when both sides hold the same packets in the same order.
        "matched_fraction": len(pairs) / max(len(run_packets), len(ref_packets), 1),
        "median_abs_error_s": statistics.median(errors) if errors else None,
        "worst_abs_error_s": errors[worst] if worst is not None else None,
        "worst_pair": _pair_summary(pairs.iloc[worst]) if worst is not None else None,
        "first_divergence": _divergence(alignment, divergence, run_frame, ref_frame),
        "ignored_run_packets": run_capture.ignored + len(run_capture.packets) - len(run_packets),
        "ignored_reference_packets": ref_capture.ignored
        + len(ref_capture.packets)
        - len(ref_packets),
    }
    return Comparison(
        pairs=pairs,
        only_run=only_run.reset_index(drop=True),
        only_reference=only_ref.reset_index(drop=True),
        summary=summary,
        run=run_frame,
        reference=ref_frame,
        alignment=alignment,
    )


def _pair_summary(row: pd.Series) -> dict[str, Any]:
    return {key: _plain(value) for key, value in row.items()}


def _divergence(
    alignment: list[tuple[int | None, int | None]],
    position: int | None,
    run_frame: pd.DataFrame,
    ref_frame: pd.DataFrame,
) -> dict[str, Any] | None:
    """Where the two sequences first part: the alignment position and the
    next packet of each side from there (``None`` when a side has ended)."""
    if position is None:
        return None
    matched_before = position
    run_next = next((i for i, _ in alignment[position:] if i is not None), None)
    ref_next = next((j for _, j in alignment[position:] if j is not None), None)
    return {
        "index": matched_before,
        "run_index": run_next,
        "reference_index": ref_next,
        "run": _pair_summary(run_frame.iloc[run_next]) if run_next is not None else None,
        "reference": _pair_summary(ref_frame.iloc[ref_next]) if ref_next is not None else None,
    }


__all__ = [
    "ALIGNMENTS",
    "SIDE_BY_SIDE_COLUMNS",
    "Capture",
    "CompareError",
    "Comparison",
    "Packet",
    "compare",
    "read_packets",
]
