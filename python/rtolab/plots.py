"""Figures of runs and sweeps (matplotlib, readable on screen and in print).

Each function takes a :class:`rtolab.Result` or a DataFrame (the
``packets``, ``traces`` or ``metrics`` table of a run, or the results of a
sweep) and an optional ``ax`` to draw into, and returns the axes. Figures
that need data the run does not have (TCP events of a UDP-only run, say)
say so on the axes instead of failing, so notebooks and reports can draw
every figure for every run.

* :func:`time_sequence`: Stevens time-sequence plot of a TCP flow;
* :func:`rto_vs_rtt`: RTO chosen vs RTT measured;
* :func:`cwnd_over_time`: congestion window (and ssthresh);
* :func:`latency_retransmission_bars`: latency, mean RTT and
  retransmissions per app (or per parameter value of a sweep);
* :func:`goodput_fairness`: goodput vs Jain's fairness index, one point per run;
* :func:`metric_by_parameter`: a sweep's metric against a parameter, one
  line per value of another, with the range over seeds;
* :func:`throughput_over_time`: received throughput per link and receiver;
* :func:`drops_over_time`: cumulative drops by reason;
* :func:`routing_tree`: a mesh's routing tree at one instant, drawn where
  its nodes are;
* :func:`parent_timeline`: each mesh node's preferred parent over time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # files only: runs happen on headless machines and in workers
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rtolab import outdir, runreport

if TYPE_CHECKING:
    from rtolab.api import Result

BINS = 50
#: The directory of a run's figures.
PLOTS_DIR = "plots"
#: Colour-blind-safe palette (Okabe-Ito) that stays distinct in greyscale print.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

plt.rcParams.update(
    {
        "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
        "axes.grid": True,
        "grid.alpha": 0.3,
        "font.size": 10,
        "axes.titlesize": 11,
        "legend.fontsize": "small",
        "figure.dpi": 100,
    }
)


# ----- input handling -----


def _is_result(data: Any) -> bool:
    return hasattr(data, "report") and hasattr(data, "files")


def _traces(data: Any) -> pd.DataFrame:
    if _is_result(data):
        return data.traces
    if isinstance(data, pd.DataFrame):
        return data
    raise TypeError(f"expected a Result or a traces DataFrame, got {type(data).__name__}")


#: Most points per connection of a time series read from trace tables (fewer
#: than a figure has pixels across): time
#: is cut into this many bins and each connection keeps its last event of
#: each, so a figure's data is bounded however long the run.
MAX_POINTS = 600


def _trace_dir(data: Any) -> Path | None:
    """The run's Parquet trace tables, when ``data`` is a result that has them."""
    return getattr(data, "trace_dir", None) if _is_result(data) else None


def _kind(
    data: Any, kind: str, columns: Sequence[str] | None = None, *, thin: bool = False
) -> pd.DataFrame:
    """The events named ``kind``: from a run's trace tables, only that
    family and ``columns`` of it (and, with ``thin``, at most
    :data:`MAX_POINTS` per connection); else from the whole traces table."""
    directory = _trace_dir(data)
    if directory is not None:
        from rtolab import frames

        return frames.trace_events(
            directory,
            kind,
            columns,
            data.report,
            max_points=MAX_POINTS if thin else None,
            duration_s=data.duration_s,
        )
    return events(_traces(data), kind, columns)


def _run_owner_colours(data: Any) -> dict[str, str]:
    """One colour per connection owner, the same in every figure of a run."""
    if _trace_dir(data) is not None:
        return _owner_colours(_kind(data, "state", ["flow", "node_name", "app_name"]))
    return _owner_colours(_tcp_events(_traces(data)))


def _packets(data: Any) -> pd.DataFrame:
    if _is_result(data):
        return data.packets
    if isinstance(data, pd.DataFrame):
        return data
    raise TypeError(f"expected a Result or a packets DataFrame, got {type(data).__name__}")


def _ax(ax: Axes | None, size: tuple[float, float] = (8, 4)) -> Axes:
    if ax is not None:
        return ax
    fig = plt.figure(figsize=size, layout="constrained")
    return fig.gca()


def _empty(ax: Axes, message: str) -> Axes:
    ax.text(0.5, 0.5, message, transform=ax.transAxes, ha="center", va="center", color="0.4")
    return ax


#: Most legend entries shown; more would hide the data.
MAX_LEGEND = 8
#: Most bars (apps, parameter values) in a bar chart; the first ones are
#: drawn and the title says how many there are. Drawing 10 000 tick labels
#: takes minutes and shows nothing; 40 slanted labels already took a second
#: to lay out and overlapped at the figure's width.
MAX_BARS = 20
#: Longest name in a legend or under a bar; longer ones end in "…".
MAX_LABEL = 30


def _label(name: Any) -> str:
    """A name as plain text in a figure: cut to ``MAX_LABEL`` characters,
    and ``$`` escaped so that matplotlib does not read it as mathtext."""
    text = str(name)
    if len(text) > MAX_LABEL:
        text = text[: MAX_LABEL - 1] + "…"
    return text.replace("$", r"\$")


def _legend(ax: Axes, where: str = "right") -> None:
    """The axes' legend outside its data: to the ``right`` of the axes, or
    ``above`` it (for panels side by side)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    labels = [_label(label) for label in labels]
    if len(handles) > MAX_LEGEND:
        hidden = len(handles) - MAX_LEGEND + 1
        handles = handles[: MAX_LEGEND - 1]
        labels = [*labels[: MAX_LEGEND - 1]]
        ax.plot([], [], " ", label=f"… {hidden} more")
        extra = ax.get_legend_handles_labels()
        handles.append(extra[0][-1])
        labels.append(extra[1][-1])
    if where == "above":
        # The title moves up to make room for one row of entries.
        ax.set_title(ax.get_title(), pad=22)
        ax.legend(
            handles,
            labels,
            fontsize="small",
            loc="lower left",
            bbox_to_anchor=(0.0, 1.01),
            ncol=min(len(handles), 3),
            borderaxespad=0.0,
            frameon=False,
        )
    else:
        ax.legend(
            handles,
            labels,
            fontsize="small",
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
        )


def column(frame: pd.DataFrame, name: str) -> pd.Series | None:
    """The column holding field ``name``: exactly ``name``, or a nested
    ``*.name`` (the one with most values). ``None`` when there is none."""
    candidates = [c for c in frame.columns if c == name or str(c).endswith("." + name)]
    if not candidates:
        return None
    best = max(candidates, key=lambda c: (int(frame[c].notna().sum()), c == name))
    return frame[best]


def events(traces: Any, kind: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The trace events named ``kind`` (matching ``kind`` or ``event``);
    only ``columns`` of them when given (those the trace has), which spares
    a copy of every other column of what may be millions of events.
    ``traces`` is a traces table or a run's result, of whose trace tables
    only that family is then read."""
    if _is_result(traces):
        return _kind(traces, kind, columns)
    if columns is not None:
        columns = [c for c in columns if c in traces]
    if traces.empty:
        return traces if columns is None else traces[columns]
    mask = pd.Series(False, index=traces.index)
    for name in ("kind", "event", "tcp_event"):
        if name in traces:
            mask |= traces[name] == kind
    return traces[mask] if columns is None else traces.loc[mask, columns]


def _owner_key(frame: pd.DataFrame) -> pd.Series:
    """A label per row naming the app (or, without one, the node) behind it."""
    owner = pd.Series(None, index=frame.index, dtype="object")
    for name in ("app_name", "node_name", "node"):
        if name in frame:
            owner = owner.where(owner.notna(), frame[name].astype("object"))
    return owner.fillna("all").astype(str)


def _by_owner_and_flow(frame: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    """Groups of rows per connection, each labelled with its owner (app)."""
    owner = _owner_key(frame)
    flow = frame["flow"] if "flow" in frame else pd.Series(0, index=frame.index)
    for (label, _), group in frame.groupby([owner, flow.fillna(-1)], sort=True):
        yield str(label), group


def _steps_per_connection(
    ax: Axes,
    frame: pd.DataFrame,
    value: str,
    unit: float,
    colours: dict[str, str],
    label: str,
    below: float | None = None,
    **style: str,
) -> None:
    """Step lines of ``value / unit`` over time, one per connection, each
    owner named once in the legend (``label`` formatted with its name);
    values from ``below`` up are left out."""
    labelled: set[str] = set()
    for owner, group in _by_owner_and_flow(frame):
        values = column(group, value)
        if values is None:
            continue
        if below is not None:
            values = values.where(values < below)
        ax.step(
            group["t_s"],
            values / unit,
            where="post",
            color=colours.get(owner, "0.3"),
            label=None if owner in labelled else label.format(owner),
            **style,
        )
        labelled.add(owner)


def _owner_colours(frame: pd.DataFrame) -> dict[str, str]:
    """One colour per owner, the same in every figure of a run."""
    owners = sorted(set(_owner_key(frame)))
    return {o: PALETTE[i % len(PALETTE)] for i, o in enumerate(owners)}


# ----- TCP -----


def _tcp_events(traces: pd.DataFrame) -> pd.DataFrame:
    if "tcp_event" in traces:
        return traces[traces["tcp_event"].notna()]
    return traces


def _tcp_flows(packets: pd.DataFrame) -> pd.DataFrame:
    tcp = packets[packets["protocol"] == "tcp"] if "protocol" in packets else packets.iloc[0:0]
    return tcp


def time_sequence(
    data: Result | pd.DataFrame,
    *,
    capture: str | None = None,
    flow: tuple[str, int, str, int] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Stevens time-sequence plot of one TCP flow at one capture point.

    Data segments are vertical bars from their first to last sequence
    number (relative to the first seen), retransmissions in a second colour,
    and the ACKs of the reverse direction as a step line. ``capture``
    chooses the capture (default: the one that saw the most TCP payload),
    ``flow`` the data direction as ``(src, src_port, dst, dst_port)``
    (default: the one carrying the most payload).

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax)
    packets = _tcp_flows(_packets(data))
    if packets.empty:
        return _empty(ax, "no TCP segments captured")
    if capture is None and "capture" in packets:
        payload = packets.groupby("capture")["payload_len"].sum()
        capture = str(payload.idxmax())
    if capture is not None and "capture" in packets:
        packets = packets[packets["capture"] == capture]
    key = ["src", "src_port", "dst", "dst_port"]
    if flow is None:
        by_flow = packets.groupby(key)["payload_len"].sum()
        flow = tuple(by_flow.idxmax())  # type: ignore[assignment]
    src, sport, dst, dport = flow  # type: ignore[misc]
    fwd = packets[
        (packets["src"] == src)
        & (packets["src_port"] == sport)
        & (packets["dst"] == dst)
        & (packets["dst_port"] == dport)
    ]
    rev = packets[
        (packets["src"] == dst)
        & (packets["src_port"] == dport)
        & (packets["dst"] == src)
        & (packets["dst_port"] == sport)
    ]
    if fwd.empty:
        return _empty(ax, "no segments in that flow")
    isn = int(fwd["seq"].iloc[0])

    def rel(values: pd.Series) -> np.ndarray:
        # Sequence numbers wrap at 2^32; distances from the ISN do not.
        return ((values.astype("int64") - isn) % 2**32).to_numpy(dtype=float)

    data_segs = fwd[fwd["payload_len"].fillna(0) > 0]
    start = rel(data_segs["seq"])
    end = start + data_segs["payload_len"].to_numpy(dtype=float)
    # A segment is a retransmission when it ends at or below what was already sent.
    highest = np.maximum.accumulate(np.concatenate([[0.0], end]))[:-1]
    retx = end <= highest
    t = data_segs["time_s"].to_numpy(dtype=float)
    ax.vlines(t, start / 1e3, end / 1e3, colors=PALETTE[0], lw=1.2)
    ax.plot(t[~retx], end[~retx] / 1e3, "_", color=PALETTE[0], ms=4, label="data segment")
    if retx.any():
        # Marked, not just drawn: one segment is too short to see at this scale.
        ax.plot(
            t[retx],
            end[retx] / 1e3,
            "x",
            color=PALETTE[1],
            ms=6,
            mew=1.5,
            zorder=3,
            label=f"retransmission ({int(retx.sum())})",
        )
    acks = rev[rev["flags"].fillna("").str.contains("ACK")]
    if not acks.empty:
        ax.step(
            acks["time_s"],
            rel(acks["ack"]) / 1e3,
            where="post",
            color=PALETTE[2],
            lw=0.8,
            label="ACK",
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel("relative sequence number (kB)")
    ax.set_title(
        f"Time-sequence {src}:{sport} → {dst}:{dport}" + (f" at {capture}" if capture else "")
    )
    _legend(ax)
    return ax


def rto_vs_rtt(data: Result | pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """The RTO each connection chose (``rto_armed``) against the RTT samples
    it measured (``rtt_sample``: raw, and corrected where a policy corrects),
    in milliseconds over time.

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax)
    armed = _kind(data, "rto_armed", thin=True)
    samples = _kind(data, "rtt_sample", thin=True)
    if armed.empty and samples.empty:
        return _empty(ax, "no RTO or RTT events in the traces")
    colour = _run_owner_colours(data)
    _steps_per_connection(ax, armed, "rto", 1e6, colour, "{}")
    corrected_any = False
    for label, group in _by_owner_and_flow(samples):
        raw = column(group, "raw")
        corrected = column(group, "corrected")
        if raw is not None:
            ax.plot(group["t_s"], raw / 1e6, ".", ms=3, color=colour.get(label, "0.3"), alpha=0.6)
        if corrected is not None and raw is not None and not corrected.equals(raw):
            corrected_any = True
            ax.plot(group["t_s"], corrected / 1e6, "x", ms=3, color=colour.get(label, "0.3"))
    # One key for the marks, so the legend stays one entry per connection.
    ax.plot([], [], "-", color="0.3", label="line: RTO chosen")
    ax.plot([], [], ".", color="0.3", label="dots: RTT samples")
    if corrected_any:
        ax.plot([], [], "x", color="0.3", label="crosses: corrected RTT")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("ms")
    ax.set_yscale("log")
    ax.set_title("RTO chosen vs RTT measured")
    _legend(ax)
    return ax


def cwnd_over_time(data: Result | pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Congestion window of every connection over time (``cwnd`` events),
    with the slow-start threshold dashed, in kB.

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax)
    cwnd = _kind(data, "cwnd", thin=True)
    ssthresh = _kind(data, "ssthresh", thin=True)
    if cwnd.empty:
        return _empty(ax, "no cwnd events in the traces")
    colours = _run_owner_colours(data)
    _steps_per_connection(ax, cwnd, "new", 1e3, colours, "cwnd {}")
    # "Infinite" initial thresholds would flatten the plot.
    _steps_per_connection(ax, ssthresh, "new", 1e3, colours, "ssthresh {}", below=2**40, ls="--")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("kB")
    ax.set_title("Congestion window")
    _legend(ax)
    return ax


# ----- latency, retransmissions, goodput -----


def _is_sweep(frame: pd.DataFrame) -> bool:
    return "run_id" in frame.columns and "status" in frame.columns


def _param_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if str(c).startswith("param.")]


def _metric_sum(frame: pd.DataFrame, suffixes: Sequence[str], scope: str = "") -> pd.Series:
    cols = [
        c
        for c in frame.columns
        if str(c).startswith(scope) and any(str(c).endswith(s) for s in suffixes)
    ]
    if not cols:
        return pd.Series(np.nan, index=frame.index)
    return frame[cols].sum(axis=1, min_count=1)


def _metric_mean(frame: pd.DataFrame, suffixes: Sequence[str], scope: str = "") -> pd.Series:
    cols = [
        c
        for c in frame.columns
        if str(c).startswith(scope) and any(str(c).endswith(s) for s in suffixes)
    ]
    if not cols:
        return pd.Series(np.nan, index=frame.index)
    return frame[cols].mean(axis=1)


#: App metrics that are a latency, in ns: a datagram sink's one-way delay,
#: an exchange's request-to-response time, a message series' per-message
#: delivery time.
LATENCY_METRICS = ("delay_mean_ns", "latency_mean_ns")


def _run_latency_retx(result: Result) -> pd.DataFrame:
    """Per app of a run: its mean latency as the app measures it (ms; see
    :data:`LATENCY_METRICS`), the mean RTT sample of its TCP connections
    (ms), retransmissions and lost datagrams."""
    # Whole-column operations rather than a loop over apps: a run may have
    # tens of thousands of them.
    apps = runreport.select(result.report, scope="app", metrics=[*LATENCY_METRICS, "lost"])
    last = apps.drop_duplicates(["name", "metric"], keep="last")
    wide = last.pivot(index="name", columns="metric", values="value")
    frame = pd.DataFrame(index=wide.index.astype(str))
    for name in ("latency_ms", "rtt_ms", "retransmissions", "lost"):
        frame[name] = np.nan
    for metric in LATENCY_METRICS:
        if metric in wide:
            values = pd.Series(wide[metric].to_numpy(dtype=float) / 1e6, index=frame.index)
            frame["latency_ms"] = frame["latency_ms"].fillna(values)
    if "lost" in wide:
        frame["lost"] = wide["lost"].to_numpy()
    frame = frame.dropna(how="all")
    samples = _kind(result, "rtt_sample", ["raw", "node_name", "app_name"])
    raw = column(samples, "raw") if not samples.empty else None
    if raw is not None:
        rtt = (raw.astype("float64").groupby(_owner_key(samples)).mean() / 1e6).dropna()
        frame = frame.reindex(frame.index.union(rtt.index, sort=False))
        frame.loc[rtt.index, "rtt_ms"] = rtt
    retx = _kind(result, "retransmission", ["cause", "node_name", "app_name"])
    cause = column(retx, "cause") if not retx.empty else None
    if cause is not None:
        # Window probes and keep-alives are not retransmissions of data.
        retx = retx[cause.isin(["timeout", "fast_retransmit"]) | cause.isna()]
    if not retx.empty:
        counts = retx.groupby(_owner_key(retx)).size().astype(float)
        frame = frame.reindex(frame.index.union(counts.index, sort=False))
        frame.loc[counts.index, "retransmissions"] = counts
    return frame


def _sweep_latency_retx(results: pd.DataFrame, by: str | None) -> pd.DataFrame:
    ok = results[results["status"] == "ok"] if "status" in results else results
    params = _param_columns(ok)
    by = by or (params[0] if params else "seed")
    frame = pd.DataFrame(
        {
            by: ok[by],
            "latency_ms": _metric_mean(ok, LATENCY_METRICS) / 1e6,
            "rtt_ms": np.nan,
            "retransmissions": _metric_sum(ok, (".retransmissions",), "app."),
            "lost": _metric_sum(ok, (".lost",), "app."),
        }
    )
    return frame.groupby(by).mean()


def latency_retransmission_bars(
    data: Result | pd.DataFrame, *, by: str | None = None, axes: Sequence[Axes] | None = None
) -> Sequence[Axes]:
    """Two bar charts side by side: mean latency as each app measures it
    (one-way delay of datagram sinks, request to response of exchanges)
    beside the mean RTT sample of its TCP connections, and retransmissions (TCP) or lost
    datagrams (UDP), per app of a run — or, for sweep results, per
    value of the parameter ``by`` (default: the first one), averaged over seeds.
    Returns the two axes."""
    if axes is None:
        _, pair = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
        axes = list(pair)
    lat_ax, retx_ax = axes[0], axes[1]
    if _is_result(data):
        table = _run_latency_retx(data)
        xlabel = ""
    elif isinstance(data, pd.DataFrame) and _is_sweep(data):
        table = _sweep_latency_retx(data, by)
        xlabel = str(table.index.name or "")
    else:
        raise TypeError("expected a Result or sweep results")
    if table.empty:
        _empty(lat_ax, "no latency data")
        _empty(retx_ax, "no retransmission data")
        return axes
    count = len(table)
    table = table.iloc[:MAX_BARS]
    labels = [_label(i) for i in table.index]
    x = np.arange(len(labels))
    latency = table["latency_ms"].to_numpy(dtype=float)
    rtt = table["rtt_ms"].to_numpy(dtype=float)
    width = 0.4
    series = [
        (values, colour, label)
        for values, colour, label in (
            (latency, PALETTE[0], "app latency"),
            (rtt, PALETTE[5], "mean RTT sample"),
        )
        if np.isfinite(values).any()
    ]
    for i, (values, colour, label) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * width if len(series) > 1 else 0.0
        lat_ax.bar(x + offset, np.nan_to_num(values), width, color=colour, label=label)
    if not series:
        _empty(lat_ax, "no latency data")
    lat_ax.set_ylabel("mean (ms)")
    shown = f" (first {MAX_BARS} of {count})" if count > MAX_BARS else ""
    lat_ax.set_title("Latency and RTT" + shown)
    retx = table["retransmissions"].to_numpy(dtype=float)
    lost = table["lost"].to_numpy(dtype=float)
    drew = False
    if np.isfinite(retx).any():
        retx_ax.bar(
            x - width / 2,
            np.nan_to_num(retx),
            width,
            color=PALETTE[1],
            label="retransmitted segments",
        )
        drew = True
    if np.isfinite(lost).any():
        retx_ax.bar(
            x + width / 2, np.nan_to_num(lost), width, color=PALETTE[2], label="lost datagrams"
        )
        drew = True
    if not drew:
        _empty(retx_ax, "no retransmission data")
    retx_ax.set_ylabel("count")
    _integer_ticks(retx_ax, [*np.nan_to_num(retx), *np.nan_to_num(lost)])
    retx_ax.set_title("Retransmissions and losses" + shown)
    for ax in (lat_ax, retx_ax):
        ax.set_xticks(
            x,
            labels,
            rotation=30 if len(labels) > 3 else 0,
            ha="right" if len(labels) > 3 else "center",
        )
        ax.set_xlabel(xlabel)
        _legend(ax, "above")
    return axes


def jain(values: Iterable[float]) -> float:
    """Jain's fairness index of ``values``: 1 when all are equal, 1/n when
    one takes everything (NaN without data)."""
    x = np.array([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if x.size == 0 or not (x**2).sum():
        return math.nan
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


#: Metric names that count payload bytes delivered to a receiving app.
GOODPUT_BYTES = ("received_bytes", "bytes_received")


def _goodputs(flat: dict[str, float], duration_s: float) -> dict[str, float]:
    """Per receiving app (one that counts received bytes), its goodput in
    bit/s: the app's own ``goodput_bps`` when it reports one, else its
    received bytes over the run's duration."""
    apps: dict[str, dict[str, float]] = {}
    for key, value in flat.items():
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "app" and value is not None and not math.isnan(value):
            apps.setdefault(parts[1], {})[parts[2]] = value
    out: dict[str, float] = {}
    for app, values in apps.items():
        received = next((values[k] for k in GOODPUT_BYTES if k in values), None)
        if received is None:
            continue
        out[app] = values.get("goodput_bps", received * 8 / max(duration_s, 1e-9))
    return out


def goodput_fairness_table(data: Result | pd.DataFrame | Sequence[Result]) -> pd.DataFrame:
    """One row per run: total goodput (bit/s) and Jain's index over the
    receiving apps, plus the run's parameters and seed."""
    rows = []
    if _is_result(data):
        data = [data]  # type: ignore[list-item]
    if isinstance(data, pd.DataFrame):
        ok = data[data["status"] == "ok"] if "status" in data else data
        for _, row in ok.iterrows():
            flat = {str(k): float(v) for k, v in row.items() if _is_float(v) and "." in str(k)}
            duration = float(row.get("run.duration_s", 0.0) or 0.0)
            flows = _goodputs(flat, duration)
            entry = {k: row[k] for k in (*_param_columns(ok), "seed") if k in row}
            entry.update(goodput_bps=sum(flows.values()), fairness=jain(flows.values()))
            rows.append(entry)
    else:
        for result in data:
            flows = _goodputs(result.flat_metrics(), result.duration_s)
            rows.append(
                {
                    "scenario": result.name,
                    "seed": result.seed,
                    "goodput_bps": sum(flows.values()),
                    "fairness": jain(flows.values()),
                }
            )
    return pd.DataFrame(rows)


def _is_float(value: Any) -> bool:
    return isinstance(value, int | float | np.floating | np.integer) and not isinstance(value, bool)


def goodput_fairness(
    data: Result | pd.DataFrame | Sequence[Result], *, by: str | None = None, ax: Axes | None = None
) -> Axes:
    """Total goodput against Jain's fairness index over the receiving apps,
    one point per run; sweep points are coloured by the parameter ``by``
    (default: the first).

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax, (6, 4.5))
    table = goodput_fairness_table(data)
    table = table.dropna(subset=["fairness"]) if not table.empty else table
    if table.empty:
        return _empty(ax, "no receiving apps to compare")
    params = _param_columns(table)
    by = by or (params[0] if params else ("scenario" if "scenario" in table else None))
    if by is not None and by in table:
        for i, (value, group) in enumerate(table.groupby(by)):
            ax.scatter(
                group["fairness"],
                group["goodput_bps"] / 1e6,
                color=PALETTE[i % len(PALETTE)],
                marker="os^Dv<>"[i % 7],
                label=f"{by.removeprefix('param.')} = {value}",
            )
    else:
        ax.scatter(table["fairness"], table["goodput_bps"] / 1e6, color=PALETTE[0])
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("Jain's fairness index")
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_title("Goodput vs fairness")
    _legend(ax)
    return ax


# ----- mesh routing -----


def _parent_changes(data: Any) -> pd.DataFrame:
    """The ``parent_changed`` events of a run: time, child and parent names
    (``None`` for a node that lost every parent), in time order."""
    frame = _kind(data, "parent_changed", ["t_s", "node", "parent", "node_name", "parent_name"])
    if frame.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in ("t_s", "child", "parent")})
    child = frame["node_name"] if "node_name" in frame else frame["node"].astype(str)
    if "parent_name" in frame:
        parent = frame["parent_name"]
    elif "parent" in frame:
        parent = frame["parent"].astype("object").where(frame["parent"].notna(), None)
        parent = parent.map(lambda p: None if p is None else str(p))
    else:
        parent = pd.Series(None, index=frame.index, dtype="object")
    out = pd.DataFrame({"t_s": frame["t_s"], "child": child.astype(str), "parent": parent})
    return out.sort_values("t_s", kind="stable").reset_index(drop=True)


def tree_at(data: Result | pd.DataFrame, at: float | None = None) -> dict[str, str | None]:
    """Each mesh node's preferred parent at ``at`` seconds (default: the end
    of the run), from the ``parent_changed`` events; a node that lost every
    parent maps to ``None``. Roots, which choose no parent, are not keys."""
    changes = _parent_changes(data)
    if at is not None:
        changes = changes[changes["t_s"] <= at]
    tree: dict[str, str | None] = {}
    for child, parent in zip(changes["child"], changes["parent"], strict=True):
        tree[child] = None if parent is None or pd.isna(parent) else str(parent)
    return tree


def _positions(data: Any, names: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Where each named node is: its position in the run report, else a
    place on a circle (a run built without positions)."""
    report = _report(data)
    placed: dict[str, tuple[float, float]] = {}
    for node in report.get("nodes", []) if isinstance(report.get("nodes"), list) else []:
        position = node.get("position") if isinstance(node, dict) else None
        if isinstance(position, dict) and node.get("name") in names:
            placed[str(node["name"])] = (float(position["x"]), float(position["y"]))
    missing = [n for n in names if n not in placed]
    for i, name in enumerate(missing):
        angle = 2 * math.pi * i / max(len(missing), 1)
        placed[name] = (math.cos(angle), math.sin(angle))
    return placed


#: Radius of a node's marker in a routing tree, in points: room for a name
#: such as ``n16`` inside it.
_NODE_RADIUS_PT = 11


def routing_tree(
    data: Result | pd.DataFrame, *, at: float | None = None, ax: Axes | None = None
) -> Axes:
    """The mesh's routing tree at ``at`` seconds (default: the end): every
    node where it is (positions from the run report), an arrow from each
    node to its preferred parent, roots (nodes that are parents but chose
    none) drawn as squares, nodes without a parent circled in red. Drawn
    from ``parent_changed`` trace events.

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax, (6, 6))
    tree = tree_at(data, at)
    if not tree:
        return _empty(ax, "no routing tree in this run")
    names = sorted(set(tree) | {p for p in tree.values() if p is not None}, key=node_order)
    where = _positions(data, names)
    for child, parent in tree.items():
        if parent is None:
            continue
        (x0, y0), (x1, y1) = where[child], where[parent]
        # Each arrow runs between the markers' edges (both ends shrunk by
        # the marker's radius), and each name is written inside its
        # marker, so no arrow crosses a name.
        ax.annotate(
            "",
            xy=(x1, y1),
            xytext=(x0, y0),
            arrowprops={
                "arrowstyle": "->",
                "color": PALETTE[0],
                "lw": 1.2,
                "shrinkA": _NODE_RADIUS_PT,
                "shrinkB": _NODE_RADIUS_PT + 1,
            },
        )
    for name in names:
        x, y = where[name]
        root = name not in tree
        orphan = tree.get(name, "") is None
        ax.scatter(
            [x],
            [y],
            s=(2 * _NODE_RADIUS_PT) ** 2,
            marker="s" if root else "o",
            color=PALETTE[1] if root else "white",
            edgecolors="red" if orphan else "black",
            linewidths=1.5 if orphan else 1.0,
            zorder=3,
        )
        ax.annotate(
            _label(name),
            (x, y),
            ha="center",
            va="center",
            fontsize=7,
            color="white" if root else "black",
            zorder=4,
        )
    depth = _depths(tree)
    deepest = max(depth.values(), default=0)
    when = "end of run" if at is None else f"t = {at:g} s"
    ax.set_title(f"Routing tree at {when} ({len(names)} nodes, depth {deepest})")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.margins(0.15)
    return ax


def node_order(name: str) -> tuple[str, int]:
    """Sort key putting n2 before n10."""
    stem = name.rstrip("0123456789")
    digits = name[len(stem) :]
    return (stem, int(digits) if digits else -1)


def _depths(tree: dict[str, str | None]) -> dict[str, int]:
    """Hops from each node to its root along the tree (a node without a
    parent, or on a loop, counts the hops it has)."""
    depth: dict[str, int] = {}
    for start in tree:
        hops, node, seen = 0, start, set()
        while node in tree and tree[node] is not None and node not in seen:
            seen.add(node)
            node = tree[node]  # type: ignore[assignment]
            hops += 1
        depth[start] = hops
    return depth


def parent_timeline(data: Result | pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Each mesh node's preferred parent over time: one row per node, one
    bar per parent it kept, labelled with that parent's name; gaps are
    times with no parent (before the first choice, or after losing every
    parent). Drawn from ``parent_changed`` trace events.

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax, (8, 5))
    changes = _parent_changes(data)
    if changes.empty:
        return _empty(ax, "no routing tree in this run")
    end = float(_report(data).get("duration_s", 0.0)) or float(changes["t_s"].max()) + 1.0
    children = sorted(changes["child"].unique(), key=node_order)
    parents = sorted(
        {p for p in changes["parent"] if p is not None and not pd.isna(p)}, key=node_order
    )
    colour = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(parents)}
    for row, child in enumerate(children):
        mine = changes[changes["child"] == child]
        times = [*mine["t_s"].astype(float), end]
        for (start, stop), parent in zip(itertools.pairwise(times), mine["parent"], strict=True):
            if parent is None or pd.isna(parent) or stop <= start:
                continue
            ax.barh(row, stop - start, left=start, height=0.6, color=colour[parent], alpha=0.8)
            if stop - start > end / 25:
                ax.text(
                    start + (stop - start) / 2,
                    row,
                    _label(parent),
                    ha="center",
                    va="center",
                    fontsize="x-small",
                    color="white",
                )
    ax.set_yticks(range(len(children)), [_label(c) for c in children])
    ax.invert_yaxis()
    ax.set_xlim(0, end)
    ax.set_xlabel("time (s)")
    ax.set_title(f"Preferred parent over time ({len(changes)} changes)")
    return ax


def has_routing_tree(result: Result) -> bool:
    """Whether the run's trace has ``parent_changed`` events (a mesh)."""
    directory = _trace_dir(result)
    if directory is not None:
        from rtolab import frames

        return "parent_changed" in frames.trace_families(directory)
    traces = result.traces
    return "event" in traces and bool((traces["event"] == "parent_changed").any())


# ----- links -----


def _report(data: Any) -> dict[str, Any]:
    return data.report if _is_result(data) else {}


def throughput_over_time(
    data: Result | pd.DataFrame, *, bins: int = BINS, ax: Axes | None = None
) -> Axes:
    """Bytes received per link and receiving node over time, in kbit/s
    (from ``packet_received`` trace events; from the captures when given a
    packets table).

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax)
    directory = _trace_dir(data)
    if directory is not None:
        return _binned_throughput(data, directory, bins, ax)
    frame = data.traces if _is_result(data) else data
    if _is_result(data) and frame.empty:
        frame = data.packets
    if frame.empty:
        return _empty(ax, "no packets")
    if "event" in frame:
        needed = ["t_s", "len", "link_name", "node_name", "link", "node"]
        received = events(frame, "packet_received", needed)
        # Before reading columns: a trace without receptions (a short mesh
        # run still forming its tree) has no `len` column at all.
        if received.empty:
            return _empty(ax, "no packets received")
        groups = [c for c in ("link_name", "node_name") if c in received] or ["link", "node"]
        times = received["t_s"]
        sizes = received["len"]
    else:
        received = frame
        groups = ["capture"]
        times = received["time_s"]
        sizes = received["len"]
    if received.empty:
        return _empty(ax, "no packets received")
    duration = float(_report(data).get("duration_s", 0.0)) or float(times.max() or 1.0)
    width = duration / bins
    bytes_per_bin = (
        (label, sizes.loc[group.index].groupby((times.loc[group.index] // width).astype(int)).sum())
        for label, group in received.groupby(groups)
    )
    return _throughput_steps(ax, bytes_per_bin, bins, width)


#: Line styles for series that may lie on top of each other: solid first,
#: then dash patterns with gaps wide enough for the line below to show.
SERIES_DASHES: tuple[Any, ...] = ("-", (0, (5, 3)), (0, (1, 2)), (0, (6, 2, 1, 2)))


def _throughput_steps(
    ax: Axes, bytes_per_bin: Iterable[tuple[Any, pd.Series]], bins: int, width: float
) -> Axes:
    """One step line per group: its bytes received per bin of ``width``
    seconds (indexed by bin number), in kbit/s."""
    for i, (label, received) in enumerate(bytes_per_bin):
        kbps = (received * 8 / width / 1e3).reindex(range(bins), fill_value=0)
        name = " → ".join(str(x) for x in label) if isinstance(label, tuple) else str(label)
        # The same packets often cross two links (a router's uplink and the
        # server's link carry the same bytes): a dash pattern per series
        # lets a line drawn over an identical one show it through its gaps.
        ax.step(
            kbps.index * width,
            kbps.to_numpy(),
            where="post",
            label=name,
            linestyle=SERIES_DASHES[i % len(SERIES_DASHES)],
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel("received (kbit/s)")
    ax.set_title("Throughput per link and receiver")
    _legend(ax)
    return ax


def _binned_throughput(data: Any, directory: Path, bins: int, ax: Axes) -> Axes:
    """:func:`throughput_over_time` from the core's binned receptions (or,
    when the run recorded ``packet_received`` but not the bins, from those
    events, only the columns needed)."""
    from rtolab import frames

    received = frames.received_bins(directory, data.report)
    size = "bytes"
    if received.empty:
        received = _kind(data, "packet_received", ["len", "link_name", "node_name"])
        size = "len"
    if received.empty:
        return _empty(ax, "no packets received")
    duration = float(data.duration_s) or float(received["t_s"].max() or 1.0)
    width = duration / bins
    groups = [c for c in ("link_name", "node_name") if c in received] or ["link", "node"]
    duration_ns = max(1, round(duration * 1e9))
    # Integer arithmetic: a 10 ms bin must not fall into the figure's bin
    # before its own through rounding (0.2 / 0.2 < 1 in floats).
    bytes_per_bin = (
        (
            label,
            group[size]
            .astype("float64")
            .groupby((group["t_ns"].astype("int64") * bins // duration_ns).to_numpy())
            .sum(),
        )
        for label, group in received.groupby(groups)
    )
    return _throughput_steps(ax, bytes_per_bin, bins, width)


def drops_over_time(data: Result | pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Cumulative packet drops over time, one line per reason.

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    ax = _ax(ax)
    drops = _kind(data, "packet_dropped", ["t_s", "reason"])
    if drops.empty or "reason" not in drops:
        return _empty(ax, "no drops")
    for reason, group in drops.groupby("reason"):
        times = group["t_s"].sort_values().to_numpy()
        ax.step(times, range(1, len(times) + 1), where="post", label=str(reason))
    duration = float(_report(data).get("duration_s", 0.0))
    if duration:
        ax.set_xlim(0, duration)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("packets dropped (cumulative)")
    _integer_ticks(ax, [1.0])
    ax.set_title("Drops by reason")
    _legend(ax)
    return ax


# ----- sets of figures -----


def has_tcp(result: Result) -> bool:
    """Whether the run has TCP trace events."""
    directory = _trace_dir(result)
    if directory is not None:
        from rtolab import frames

        return any(f.startswith("tcp_") for f in frames.trace_families(directory))
    traces = result.traces
    return (not traces.empty and "tcp_event" in traces.columns) or (
        "event" in traces and (traces["event"] == "tcp").any()
    )


def run_figures(result: Result) -> list[tuple[str, Figure]]:
    """The standard figures of a run, as (name, figure); TCP figures only
    when the run has TCP events."""
    figures: list[tuple[str, Figure]] = []

    def single(name: str, draw: Any, size: tuple[float, float] = (8, 4)) -> None:
        fig, ax = plt.subplots(figsize=size, layout="constrained")
        draw(result, ax=ax)
        figures.append((name, fig))

    single("throughput", throughput_over_time)
    single("drops", drops_over_time)
    if has_tcp(result):
        single("time-sequence", time_sequence)
        single("rto-rtt", rto_vs_rtt)
        single("cwnd", cwnd_over_time)
    if has_routing_tree(result):
        fig, pair = plt.subplots(
            1, 2, figsize=(13, 5.5), layout="constrained", gridspec_kw={"width_ratios": [1, 1.4]}
        )
        routing_tree(result, ax=pair[0])
        parent_timeline(result, ax=pair[1])
        figures.append(("routing-tree", fig))
    fig, pair = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    latency_retransmission_bars(result, axes=list(pair))
    figures.append(("latency-retransmissions", fig))
    return figures


def metric_label(metric: str, magnitude: float) -> tuple[str, float]:
    """An axis label for a sweep metric in words with its unit, and what to
    divide its values by: ``app.bulk.completion_time_ns`` around 1e10 is
    ``("bulk: completion time (s)", 1e9)``."""
    owner, _, name = metric.removeprefix("app.").rpartition(".")
    stem, factor, unit = runreport.unit_of(name, magnitude)
    words = stem.replace("_", " ")
    label = f"{owner}: {words}" if owner else words
    return (f"{label} ({unit})" if unit else label), factor


def _integer_ticks(ax: Axes, values: Iterable[float]) -> None:
    """Whole-number ticks on the y axis when every value is a whole number
    (counts), and never an offset (``1e10``) in place of the unit."""
    from matplotlib.ticker import MaxNLocator

    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    finite = [v for v in values if math.isfinite(v)]
    if finite and all(float(v).is_integer() for v in finite):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def metric_by_parameter(
    results: pd.DataFrame,
    metric: str,
    *,
    x: str | None = None,
    by: str | None = None,
    ax: Axes | None = None,
) -> Axes:
    """One metric of sweep results against one parameter: the mean over the
    runs that finished their workload (see :func:`rtolab.sweeps.summarize`)
    with a bar from the smallest to the largest value, one line per value of
    a second parameter ``by``. ``x`` and ``by`` default to the sweep's
    first and second parameters (names without ``param.``); values with
    units are placed in their numeric order. Combinations where no run
    finished are left out of their line and counted in the title.

    Returns the axes drawn on: ``ax`` when given, else those of a new figure."""
    from rtolab import sweeps

    ax = _ax(ax, (7, 4.5))
    params = [c.removeprefix("param.") for c in _param_columns(results)]
    x = x or (params[0] if params else None)
    if x is None:
        return _empty(ax, "the sweep has no parameter to draw against")
    by = by or next((p for p in params if p != x), None)
    cells = sweeps.summarize(results, [metric])
    x_values = sweeps.ordered_values(list(dict.fromkeys(c.params[x] for c in cells)))
    numeric = all(_is_float(v) for v in x_values)
    position = {v: (float(v) if numeric else float(i)) for i, v in enumerate(x_values)}
    lines: dict[Any, list[Any]] = {}
    for cell in cells:
        lines.setdefault(cell.params.get(by) if by else None, []).append(cell)
    measured = [c.metrics[metric] for c in cells if c.metrics[metric].n]
    magnitude = max((abs(float(a.mean)) for a in measured), default=0.0)
    ylabel, factor = metric_label(metric, magnitude)
    missing = 0
    for i, (value, group) in enumerate(lines.items()):
        drawn = sorted(
            (c for c in group if c.metrics[metric].n), key=lambda c: position[c.params[x]]
        )
        missing += len(group) - len(drawn)
        if not drawn:
            continue
        xs = np.array([position[c.params[x]] for c in drawn])
        mean = np.array([c.metrics[metric].mean for c in drawn], dtype=float) / factor
        low = np.array([c.metrics[metric].low for c in drawn], dtype=float) / factor
        high = np.array([c.metrics[metric].high for c in drawn], dtype=float) / factor
        ax.errorbar(
            xs,
            mean,
            yerr=[mean - low, high - mean],
            marker="os^Dv<>"[i % 7],
            color=PALETTE[i % len(PALETTE)],
            capsize=3,
            label=f"{by} = {value}" if by else None,
        )
    if not numeric:
        ax.set_xticks(list(position.values()), [_label(v) for v in x_values])
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    # The means of counts need not be whole; their axis is.
    _integer_ticks(ax, [float(v) for a in measured for v in (a.low, a.high) if v is not None])
    note = f"\n({missing} combinations with no finished run)" if missing else ""
    ax.set_title(f"{ylabel.split(' (')[0]} by {x}{note}")
    if missing == len(cells):
        return _empty(ax, "no run finished its workload")
    _legend(ax)
    return ax


#: Most metrics drawn by default for a sweep, one figure each.
SWEEP_FIGURE_METRICS = 4


def sweep_figures(results: pd.DataFrame) -> list[tuple[str, Figure]]:
    """The default figures of sweep results, chosen from what the sweep
    varies and measures: each of the first :data:`SWEEP_FIGURE_METRICS`
    metrics that differ between runs (:func:`rtolab.sweeps.summary_metrics`)
    against the first parameter, one line per value of the second; and
    goodput against fairness only when more than one app receives."""
    from rtolab import sweeps

    figures: list[tuple[str, Figure]] = []
    if not _param_columns(results):
        return figures
    for metric in sweeps.summary_metrics(results)[:SWEEP_FIGURE_METRICS]:
        fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
        metric_by_parameter(results, metric, ax=ax)
        figures.append((metric.removeprefix("app.").replace(".", "-"), fig))
    receivers = [
        c
        for c in results.columns
        if str(c).startswith("app.") and str(c).endswith(".bytes_received")
    ]
    if len(receivers) > 1:
        fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
        goodput_fairness(results, ax=ax)
        figures.append(("goodput-fairness", fig))
    return figures


def save(
    figures: Iterable[tuple[str, Figure]],
    root: Path,
    directory: str | None = None,
    dpi: int = 120,
) -> list[Path]:
    """Writes figures as PNG files named after them into the output
    directory ``root``, or its ``directory`` (see :mod:`rtolab.outdir`);
    closes them."""
    written = []
    for name, fig in figures:
        file = f"{name}.png" if directory is None else f"{directory}/{name}.png"
        written.append(outdir.save_figure(fig, root, file, dpi=dpi))
        plt.close(fig)
    return written


def plot_run(result: Result) -> list[Path]:
    """Draw the standard figures of a run into ``OUT/plots``; returns the files."""
    if result.out_dir is None:
        return []
    return save(run_figures(result), result.out_dir, PLOTS_DIR)
