"""Turning a run's files into pandas DataFrames.

* :func:`packets`: one row per packet per capture point, decoded by the
  core's own wire parser (so Python and Rust agree on every field);
* :func:`traces`: one row per trace event, nested records flattened into
  dotted columns (``detail.kind``), from ``traces.jsonl`` or the Parquet
  tables of ``traces/``;
* :func:`trace_events`: the events of one kind from the Parquet tables,
  only the columns asked for, optionally thinned to a bounded number of
  rows per connection (what the figures use);
* :func:`metrics`: one row per number of the run report, in long form.

Every function copes with columns it does not know: new trace events and
new statistics appear as new columns or rows, never as errors.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rtolab import _rtolab, runreport
from rtolab.errors import ResultError, native_errors

#: Columns of :func:`packets`, in order (more may follow when the core adds fields).
PACKET_COLUMNS: tuple[str, ...] = (
    "time_s",
    "time_ns",
    "capture",
    "host",
    "link",
    "direction",
    "index",
    "src",
    "dst",
    "protocol",
    "src_port",
    "dst_port",
    "seq",
    "ack",
    "flags",
    "window",
    "len",
    "payload_len",
    "segment_len",
    "ip_id",
    "ttl",
    "mss",
    "window_scale",
    "sack_permitted",
    "sack",
    "tsval",
    "tsecr",
    "timelost",
    "error",
)

_INT_COLUMNS = (
    "time_ns",
    "index",
    "src_port",
    "dst_port",
    "seq",
    "ack",
    "window",
    "len",
    "payload_len",
    "segment_len",
    "ip_id",
    "ttl",
    "mss",
    "window_scale",
    "tsval",
    "tsecr",
    "timelost",
)

#: Columns of :func:`metrics`.
METRIC_COLUMNS: tuple[str, ...] = runreport.METRIC_COLUMNS


def read_capture(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Decodes one capture file: one row per packet. A run writes raw-IP
    pcap files; pcap and pcapng files of Ethernet, Linux cooked, loopback
    and raw IP link types read the same way (the link header left out).

    Raises :class:`rtolab.CaptureError` when the file is not such a
    capture, naming the packet or byte offset where it stops making sense.
    A packet that does not parse (bad checksum, truncated, a frame without
    IP) still gets a row, with the reason in ``error``.
    """
    with native_errors():
        columns: dict[str, list[Any]] = json.loads(_rtolab.read_capture(os.fspath(path)))
    # Typed as the columns are built: converting a built frame column by
    # column cost three times as long for a run's small captures.
    kinds = {name: "Int64" for name in _INT_COLUMNS} | {"sack_permitted": "boolean"}
    frame = pd.DataFrame(
        {
            name: pd.array(values, dtype=kinds[name]) if name in kinds else values
            for name, values in columns.items()
        }
    )
    frame["time_s"] = frame["time_ns"].astype("float64") / 1e9
    return frame


def read_wlan_capture(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Decodes an 802.11 capture written by a run (radiotap, what a wifi
    link's ``[[capture]]`` writes): one row per frame on air, with
    ``time_ns``, ``time_s``, ``len`` (bytes, radiotap header included, as
    Wireshark's ``frame.len``), ``kind`` (``data``, ``ack``, ``rts``,
    ``cts``, or missing for a frame of another type) and ``retry`` (the
    Retry bit).

    Raises :class:`rtolab.CaptureError` when the file is not such a capture.
    """
    with native_errors():
        columns: dict[str, list[Any]] = json.loads(_rtolab.read_wlan_capture(os.fspath(path)))
    frame = pd.DataFrame(columns)
    frame["len"] = frame["len"].astype("int64")
    frame["retry"] = frame["retry"].astype("boolean")
    frame["time_s"] = frame["time_ns"].astype("float64") / 1e9
    return frame


#: pcap link types of captures that record a link's own frames (802.11
#: with radiotap, IEEE 802.15.4 with and without FCS), which the packets
#: table leaves out: they are for Wireshark.
LINK_LAYER_TYPES = frozenset({127, 195, 230})


def _link_type(pcap: Path) -> int | None:
    """The link type in a pcap file's global header (``None`` when the file
    is too short or not a pcap file; the reader then says what is wrong)."""
    try:
        with open(pcap, "rb") as file:
            head = file.read(24)
    except OSError:
        return None
    if len(head) < 24:
        return None
    magic = head[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        order = "little"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        order = "big"
    else:
        return None
    return int.from_bytes(head[20:24], order) & 0x0FFF_FFFF


def packets(
    pcaps: Iterable[Path], captures: Mapping[str, Mapping[str, Any]] | None = None
) -> pd.DataFrame:
    """All IP-level capture files of a run in one table, ordered by time
    (captures of a mesh radio's own frames are left out: see
    ``LINK_LAYER_TYPES``).

    ``captures`` maps a file name to its ``[[capture]]`` table, to fill the
    ``host``, ``link`` and ``direction`` columns.
    """
    captures = captures or {}
    frames = []
    for pcap in pcaps:
        if _link_type(pcap) in LINK_LAYER_TYPES:
            # A mesh radio's frames: 6LoWPAN fragments, not IP datagrams.
            # They are for Wireshark; the IP-level view of the same traffic
            # is in the captures of the nodes' other interfaces and in the
            # traces.
            continue
        frame = read_capture(pcap)
        spec = captures.get(pcap.name, {})
        frame["capture"] = pcap.stem
        frame["host"] = spec.get("host")
        frame["link"] = spec.get("link", spec.get("interface"))
        frame["direction"] = spec.get("direction", "both") if spec else None
        frames.append(frame)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in PACKET_COLUMNS})
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.sort_values("time_ns", kind="stable", ignore_index=True)
    ordered = [c for c in PACKET_COLUMNS if c in frame] + [
        c for c in frame.columns if c not in PACKET_COLUMNS
    ]
    return frame[ordered]


def flatten_record(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record as one level of dotted keys (lists are kept whole)."""
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_record(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def traces(trace_file: Path | None, report: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """A run's trace as a DataFrame, one row per event: ``traces.jsonl``, or
    the directory ``traces`` of Parquet tables (every family, in time
    order; see :func:`trace_events` for reading only some of it).

    Columns: ``t_ns``, ``t_s``, ``event`` (the top-level event name), ``kind``
    (the most specific name: ``detail.kind`` of app events, ``tcp_event`` of
    TCP engine events, else ``event``), then every field, nested ones as
    dotted names (``detail.delay_ns``), in the order events first give them
    a value. With the run ``report``, ``node_name``, ``link_name``,
    ``app_name`` and ``parent_name`` (of ``parent_changed`` events) translate
    the indices. A JSON-lines file is read as columns, a block
    at a time (a trace of millions of events takes about the memory of the
    table); one the column reader does not take (a field whose type
    changes, a garbled line) is read event by event.
    """
    if trace_file is None or not Path(trace_file).exists():
        return _empty_traces()
    if Path(trace_file).is_dir():
        tables = [
            _read_family(Path(trace_file), family, None)
            for family in trace_families(Path(trace_file))
            if family != RECEIVED_BINS
        ]
        if not tables:
            return _empty_traces()
        frame = _tables_frame(tables)
        frame = frame.sort_values("t_ns", kind="stable", ignore_index=True)
    else:
        frame = _trace_columns(Path(trace_file))
        if frame is None:
            frame = pd.DataFrame.from_records(_trace_records(Path(trace_file)))
        _check_trace_events(Path(trace_file), frame)
    if frame.empty:
        return _empty_traces()
    return _finish_traces(frame, report)


def _empty_traces() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in ("t_ns", "t_s", "event", "kind")})


def _finish_traces(frame: pd.DataFrame, report: Mapping[str, Any] | None) -> pd.DataFrame:
    """Integer columns restored, ``t_s`` and ``kind`` added, indices named."""
    for name in frame.columns:
        values = frame[name]
        # Integers missing from some events come back as floats; restore them.
        if values.dtype == "float64":
            present = values.dropna()
            if len(present) and (present % 1 == 0).all() and present.abs().max() < 2**53:
                frame[name] = values.astype("Int64")
    frame["t_s"] = frame["t_ns"].astype("float64") / 1e9
    kind = frame["event"] if "event" in frame else pd.Series(None, index=frame.index, dtype=object)
    # Deeper names win: "app" + detail.kind "datagram_received" is the latter.
    nested = sorted(
        (c for c in frame.columns if c != "event" and c.endswith(("event", ".kind"))),
        key=lambda c: c.count("."),
    )
    for column in nested:
        kind = frame[column].where(frame[column].notna(), kind)
    frame["kind"] = kind
    if report is not None:
        for column, key in (
            ("node", "nodes"),
            ("link", "links"),
            ("app", "apps"),
            ("parent", "nodes"),
        ):
            if column in frame:
                names = runreport.item_names(report, key)
                frame[f"{column}_name"] = _lookup(frame[column], names)
    first = [c for c in ("t_s", "t_ns", "event", "kind") if c in frame]
    return frame[first + [c for c in frame.columns if c not in first]]


#: The derived table of received bytes per receiver in bins of
#: :data:`RECEIVED_BIN_NS` (written with ``summary`` and ``full`` traces).
RECEIVED_BINS = "packet_received_bins"
#: Width of the bins of :data:`RECEIVED_BINS`, ns.
RECEIVED_BIN_NS = 10_000_000


def trace_families(trace_dir: Path) -> list[str]:
    """The families a run's ``traces`` directory holds, sorted."""
    if not trace_dir.is_dir():
        return []
    # "tcp_cwnd.parquet", and further parts "tcp_cwnd.1.parquet".
    return sorted({p.name.split(".", 1)[0] for p in trace_dir.glob("*.parquet")})


def _family_files(trace_dir: Path, family: str) -> list[Path]:
    first = trace_dir / f"{family}.parquet"
    parts = sorted(trace_dir.glob(f"{family}.*.parquet"), key=lambda p: int(p.name.split(".")[1]))
    return ([first] if first.is_file() else []) + parts


def _read_family(
    trace_dir: Path,
    family: str,
    columns: Sequence[str] | None,
    filter: Any = None,
) -> Any:
    """One family's table (all its parts, schemas unified), only
    ``columns`` of it (those it has), flattened to dotted names."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    files = _family_files(trace_dir, family)
    if not files:
        return pa.table({})
    try:
        schemas = [ds.dataset(f, format="parquet").schema for f in files]
        for file, file_schema in zip(files, schemas, strict=True):
            _check_trace_schema(file, family, file_schema)
        schema = pa.unify_schemas(schemas, promote_options="permissive")
        dataset = ds.dataset([str(f) for f in files], schema=schema, format="parquet")
        if columns is not None:
            top = {c.split(".", 1)[0] for c in columns}
            wanted = [n for n in schema.names if n in top]
            table = dataset.to_table(columns=wanted, filter=filter)
        else:
            table = dataset.to_table(filter=filter)
    except (pa.ArrowInvalid, OSError) as err:
        raise ResultError(str(files[0]), f"unreadable trace table: {err}") from None
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    # Dictionary-encoded text (states, reasons) as plain strings.
    for i, f in enumerate(table.schema):
        if pa.types.is_dictionary(f.type):
            table = table.set_column(i, f.name, table.column(i).cast(f.type.value_type))
    return table


#: Columns whose type rtolab's readers rely on, as the run writes them
#: (docs/traces.md): times, indices and lengths are integers, names text.
_INTEGER_COLUMNS = (
    "t_ns",
    "node",
    "iface",
    "link",
    "app",
    "flow",
    "parent",
    "packet",
    "len",
    "packets",
    "bytes",
)
_TEXT_COLUMNS = ("event", "tcp_event", "reason", "cause", "source", "from", "to", "policy")
#: Integer columns of some families that the figures draw.
_FIGURE_INTEGER_COLUMNS = {
    "tcp_cwnd": ("new", "old"),
    "tcp_ssthresh": ("new", "old"),
    "tcp_rto_armed": ("rto", "srtt", "rttvar"),
    "tcp_rtt_sample": ("raw", "corrected"),
}
#: Columns a family's table must have: every one has ``t_ns``; these have
#: more that the figures read.
_REQUIRED_COLUMNS = {
    RECEIVED_BINS: ("t_ns", "link", "node", "iface", "packets", "bytes"),
    "parent_changed": ("t_ns", "node", "parent"),
}


def _check_trace_schema(file: Path, family: str, schema: Any) -> None:
    """Raises :class:`ResultError` naming ``file`` and the column when its
    ``schema`` is not one a run writes for ``family``: a table put there by
    something else would fail, or draw nonsense, further on."""
    import pyarrow as pa

    def text(kind: Any) -> bool:
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))

    for name in _REQUIRED_COLUMNS.get(family, ("t_ns",)):
        if name not in schema.names:
            raise ResultError(str(file), f"not a trace table as a run writes it: no column {name}")
    integers = _INTEGER_COLUMNS + _FIGURE_INTEGER_COLUMNS.get(family, ())
    for field in schema:
        if pa.types.is_null(field.type):
            # A field no event of the table's first row group had.
            continue
        if field.name in integers and not pa.types.is_integer(field.type):
            expected = "integers"
        elif field.name in _TEXT_COLUMNS and not text(field.type):
            expected = "text"
        else:
            continue
        raise ResultError(
            str(file),
            f"not a trace table as a run writes it: column {field.name} holds "
            f"{field.type}, not {expected}",
        )


def _check_trace_events(file: Path, frame: pd.DataFrame) -> None:
    """Raises :class:`ResultError` naming ``file`` and the field when the
    events read from it are not as a run writes them (see
    :func:`_check_trace_schema`)."""
    if not frame.empty and "t_ns" not in frame:
        raise ResultError(str(file), "garbled: events without t_ns")
    types = pd.api.types
    for name in _INTEGER_COLUMNS:
        column = frame.get(name)
        if column is not None and (
            not types.is_numeric_dtype(column) or types.is_bool_dtype(column)
        ):
            raise ResultError(str(file), f"garbled: events whose {name} is not an integer")


def _tables_frame(tables: list[Any]) -> pd.DataFrame:
    """Arrow tables of different families as one DataFrame (integers with
    gaps as nullable integers)."""
    import pyarrow as pa

    # Integers as nullable Int64, as the JSON-lines reading gives them; in a
    # table where an unsigned 64-bit value does not fit (u64::MAX as an
    # unbounded threshold), its unsigned 64-bit columns as UInt64.
    import pyarrow.compute as pc

    def mapping(table: Any) -> dict[Any, Any]:
        types = {f.type: pd.Int64Dtype() for f in table.schema if pa.types.is_integer(f.type)}
        if any(
            f.type == pa.uint64() and (pc.max(table.column(f.name)).as_py() or 0) >= 2**63
            for f in table.schema
        ):
            types[pa.uint64()] = pd.UInt64Dtype()
        return types

    # One table first, so that a column has one type in every family.
    table = pa.concat_tables(tables, promote_options="permissive")
    frame = table.to_pandas(types_mapper=mapping(table).get)
    # Booleans with gaps: NaN where an event lacks the field, as JSON gives.
    for name in frame.columns:
        if frame[name].dtype == object:
            frame[name] = frame[name].where(frame[name].notna(), np.nan)
    return frame


def trace_events(
    trace_dir: Path,
    kind: str,
    columns: Sequence[str] | None = None,
    report: Mapping[str, Any] | None = None,
    *,
    max_points: int | None = None,
    duration_s: float | None = None,
) -> pd.DataFrame:
    """The events named ``kind`` from a run's Parquet tables: the family
    ``kind`` and every family ending in ``_kind`` (``cwnd`` is
    ``tcp_cwnd``). Only ``columns`` are read (``t_ns`` and the fields that
    tell connections apart always are); names (``node_name``, …) are added
    with ``report``.

    With ``max_points``, time is cut into that many bins over
    ``duration_s`` and each connection (``node``, ``flow``) keeps its last
    event per bin: a figure's data stays bounded however long the run, and
    a step line through the kept points is the one through all of them at
    the figure's resolution.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    families = [f for f in trace_families(trace_dir) if f == kind or f.endswith(f"_{kind}")]
    keys = ["node", "flow", "app"]
    wanted = None
    if columns is not None:
        wanted = list(
            dict.fromkeys(["t_ns", *keys, *(c.removesuffix("_name") for c in columns), *columns])
        )
    tables = [_read_family(trace_dir, f, wanted) for f in families]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return _empty_traces()
    if max_points is not None and duration_s:
        width = max(1, int(duration_s * 1e9 / max_points))
        thinned = []
        for table in tables:
            group = [k for k in ("node", "flow") if k in table.column_names]
            # A field no event had (all null, of null type) has no "last"
            # to take: it stays all null.
            empty = [f.name for f in table.schema if pa.types.is_null(f.type)]
            table = table.drop_columns(empty)
            values = [c for c in table.column_names if c not in group]
            t_type = table.schema.field("t_ns").type
            bins = pc.divide(table.column("t_ns"), pa.scalar(width, t_type))
            table = table.append_column("_bin", bins)
            last = table.group_by([*group, "_bin"], use_threads=False).aggregate(
                [(c, "last") for c in values]
            )
            last = last.rename_columns(
                [c.removesuffix("_last") if c.endswith("_last") else c for c in last.column_names]
            )
            last = last.drop_columns(["_bin"]).sort_by("t_ns")
            for name in empty:
                last = last.append_column(name, pa.nulls(last.num_rows))
            thinned.append(last)
        tables = thinned
    frame = _tables_frame(tables)
    if "event" not in frame:
        frame["event"] = kind
    frame = _finish_traces(frame, report)
    if columns is not None:
        return frame[[c for c in dict.fromkeys(("t_s", "t_ns", *columns)) if c in frame]]
    return frame


def received_bins(trace_dir: Path, report: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The core's binned receptions: ``t_s`` (bin start), ``link``,
    ``node``, ``iface``, ``packets``, ``bytes`` (and names with
    ``report``); empty when the run did not record them."""
    table = _read_family(trace_dir, RECEIVED_BINS, None)
    if not table.num_rows:
        return pd.DataFrame(
            {c: pd.Series(dtype="object") for c in ("t_s", "link", "node", "bytes")}
        )
    frame = table.to_pandas()
    frame["t_s"] = frame["t_ns"].astype("float64") / 1e9
    if report is not None:
        for column, key in (("node", "nodes"), ("link", "links")):
            frame[f"{column}_name"] = _lookup(frame[column], runreport.item_names(report, key))
    return frame


def _lookup(indices: pd.Series, names: list[str]) -> pd.Series:
    """``names[i]`` for each index ``i`` of ``indices`` (``None`` where it is
    missing or out of range), a whole column at once."""
    codes = pd.to_numeric(indices, errors="coerce").astype("float64").to_numpy()
    known = np.isfinite(codes) & (codes >= 0) & (codes < len(names))
    out = np.full(len(codes), None, dtype=object)
    out[known] = np.asarray(names, dtype=object)[codes[known].astype(np.int64)]
    return pd.Series(out, index=indices.index).infer_objects()


def _trace_columns(path: Path) -> pd.DataFrame | None:
    """A trace file read as columns by pyarrow's JSON reader, laid out as
    :func:`_trace_records` would give it (nested fields as dotted columns in
    order of first appearance, lists as lists); ``None`` when the reader
    does not take the file (garbled, or a field whose type changes), which
    is left to :func:`_trace_records`."""
    import pyarrow as pa
    import pyarrow.json as pj

    pieces = []
    try:
        for block in _line_blocks(path):
            piece = pj.read_json(pa.BufferReader(block))
            while any(pa.types.is_struct(f.type) for f in piece.schema):
                piece = piece.flatten()
            pieces.append(piece)
        if not pieces:
            return pd.DataFrame()
        table = pa.concat_tables(pieces, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OSError):
        return None
    del pieces
    # Columns in the order the events first give them, as records would.
    first = [_first_valid(table.column(i)) for i in range(table.num_columns)]
    order = sorted(range(table.num_columns), key=lambda i: (first[i], i))
    table = table.select(order)
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_list(column.type):
            values = pd.Series(column.to_pylist(), dtype=object)
        elif pa.types.is_integer(column.type) and column.null_count:
            # Integers some events lack: nullable, as records give them.
            values = column.to_pandas(types_mapper={column.type: pd.Int64Dtype()}.get)
        else:
            values = column.to_pandas()
        if values.dtype == object:
            # Booleans with gaps: NaN where an event lacks the field, as in records.
            values = values.where(values.notna(), np.nan)
        columns[name] = values
        table = table.drop_columns([name])  # its Arrow memory goes now
    return pd.DataFrame(columns)


#: Bytes of a trace file the JSON reader takes at a time: its memory for
#: the text and its parse stays this size, whatever the file's.
TRACE_BLOCK = 32 << 20


def _line_blocks(path: Path) -> Iterator[bytes]:
    """The file in blocks of about :data:`TRACE_BLOCK` bytes of whole lines."""
    with open(path, "rb") as f:
        rest = b""
        while chunk := f.read(TRACE_BLOCK):
            block = rest + chunk
            end = block.rfind(b"\n") + 1
            if end:
                rest = block[end:]
                yield block[:end]
            else:
                rest = block
        if rest.strip():
            yield rest


def _first_valid(column: Any) -> int:
    """Index of the first non-null value of an Arrow column (its length if none)."""
    import pyarrow.compute as pc

    valid = pc.is_valid(column)
    return int(pc.index(valid, True).as_py()) if column.null_count < len(column) else len(column)


def _trace_records(path: Path) -> list[dict[str, Any]]:
    """The flattened events of a trace file; raises :class:`rtolab.ResultError`
    naming the file and line when it is garbled."""
    records = []
    number = 0
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                number += 1  # counted by hand: the error messages need it
                if line.strip():
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise ValueError("not a JSON object")
                    records.append(flatten_record(record))
    except OSError as err:
        raise ResultError(str(path), f"cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ResultError(str(path), f"garbled: not UTF-8 text after line {number}") from None
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise ResultError(str(path), f"garbled: line {number} is not an event") from None
    return records


def metric_records(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of :func:`metrics` as dicts."""
    table = runreport.metric_table(report)
    rows = table.drop_columns("value").to_pylist()
    for row, value in zip(rows, runreport.values(table), strict=True):
        row["value"] = value
    return rows


def metrics(report: Mapping[str, Any]) -> pd.DataFrame:
    """A run report as a long table: ``scope`` (run, node, link, app),
    ``name``, ``kind``, ``part`` (e.g. ``directions[0]`` of a link, else
    empty), ``metric`` and ``value`` (float; NaN where the core reported
    none). Built by the core as columns (see :mod:`rtolab.runreport`)."""
    table = runreport.metric_table(report)
    if not table.num_rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in METRIC_COLUMNS})
    return table.to_pandas()


def flat_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """Every number of a run report under one dotted key, e.g.
    ``app.sink.received_packets`` or ``link.ab.directions[0].delivered_bytes``
    (what a sweep stores per run)."""
    return runreport.flat_metrics(report)
