"""uIP's retransmission timer in a duty-cycled mesh (docs/spec/uip-rto.md).

``rtolab reproduce uip-rto`` runs the study's experiment on the network of
``scenarios/mesh-uip.toml``: 15 uIP clients on a 4 x 4 ContikiMAC mesh
send 48-byte segments to a server behind the border router ``n1``, after
two minutes of RPL formation, for 10 minutes, with each RTO scheme of
:data:`SCHEMES` and each seed (``--seeds N``, default 50; ``--duration S``
shortens the sending). Clients reconnect :data:`RECONNECT` after a failed
connection, as Contiki's TCP client applications do.

Runs go to Dask workers like a sweep's; each worker reads its run's
report and traces into ``uip-rto.json`` beside the run's files, so the
tables below are built without reading any trace again. Writes
``DIR/uip-rto/runs.csv`` (one row per run), ``per_node.csv`` (one row per
client and run), ``summary.csv`` (per scheme), ``trees.csv`` (per tree
class and scheme) and figures in ``DIR/uip-rto/figures/``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import tomllib

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
from rtolab.experiments.stats import family_half_width, spread

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rtolab.api import Result

SYSTEM = "uip-rto"
#: The trace families :func:`summarise` and the figures read.
TRACE_FAMILIES = ("parent_changed", "tcp_rtt_sample", "tcp_retransmission", "tcp_rto_armed")
#: The study's network, as shipped.
BASE_SCENARIO = "mesh-uip"
#: Each scheme's ``tcp`` table, merged onto the clients' (MSS 48 kept).
#: A scheme is one more entry.
SCHEMES: dict[str, dict[str, Any]] = {
    "uip": {"rto": {"policy": "uip", "uip_rto": "3s"}},
    "lim2020": {"rto": {"policy": "lim2020"}},
    "lim2024": {"rto": {"policy": "lim2024"}},
    # Ours: the first RTO from the path the mesh reports, then Lim 2024
    # (docs/mesh.md, "A link-aware initial RTO").
    "link_aware": {"rto": {"policy": "link_aware"}},
}
#: Seeds per scheme unless ``--seeds`` says otherwise.
DEFAULT_SEEDS = 50
#: Seconds of sending unless ``--duration`` says otherwise (the study's 10 minutes).
DEFAULT_SENDING_S = 600.0
#: The clients start once RPL has formed its tree (scenarios/mesh-uip.toml).
FORMATION_S = 120.0
#: Delay before a client replaces a failed connection (docs/uip-rto.md).
RECONNECT = "5s"
#: TCP payload per segment.
SEGMENT = 48
ROOT = "n1"
SERVER = "server"
#: Grid spacing, for the fewest hops a node can be from the root.
SPACING_M = 40.0
#: What each run's worker writes beside the run's files.
SUMMARY_FILE = "uip-rto.json"

RUN_COLUMNS = (
    "scheme",
    "seed",
    "status",
    "complete",
    "goodput_segments",
    "fairness",
    "clients_delivering",
    "retransmissions",
    "spurious_retransmissions",
    "connections_failed",
    "tree_depth",
    "root_children",
    "nodes_off_shortest",
    "nodes_without_parent",
    "tree_class",
    "duty_cycle_mean",
    "bytes_corrupt",
    "start_tree",
    "end_tree",
)
NODE_COLUMNS = (
    "scheme",
    "seed",
    "node",
    "hops",
    "min_hops",
    "parent",
    "goodput_segments",
    "retransmissions",
    "most_retransmissions_one_segment",
    "connections",
    "connections_failed",
    "longest_stall_s",
)
#: One row per segment a client retransmitted (``segments.csv``).
SEGMENT_COLUMNS = (
    "scheme",
    "seed",
    "node",
    "hops",
    "retransmissions",
    "acked",
    "wait_s",
)
#: Tree classes, best placed first (see :func:`tree_class`).
TREE_CLASSES = (
    "A: 2 root children, shortest paths",
    "B: 2 root children, longer paths",
    "C: 1 root child",
    "D: a node without parent",
)


def seeds() -> list[int]:
    """Seeds of every scheme: 1..N."""
    return list(range(1, int(option("seeds", DEFAULT_SEEDS)) + 1))


def sending_s() -> float:
    """Seconds of sending."""
    return float(option("duration", DEFAULT_SENDING_S))


def scenario(
    scheme: str,
    sending: float | None = None,
    tcp: dict[str, Any] | None = None,
    name: str | None = None,
) -> str:
    """The TOML of one scheme's runs: the shipped study network with the
    scheme's ``tcp`` table (or ``tcp`` when given) on the clients,
    ``reconnect`` on every client, ``sending`` seconds after the formation,
    and no captures. Nothing that differs between schemes acts before the
    clients start, so every scheme of a seed reaches them with the same
    mesh (the medium, each MAC and each RPL node draw from their own
    seeded streams, ``crates/sim/src/rng.rs``)."""
    from rtolab.api import shipped_scenarios
    from rtolab.scenario import toml_text

    if tcp is None:
        if scheme not in SCHEMES:
            raise ValueError(f"scheme: one of {', '.join(SCHEMES)}, got {scheme!r}")
        tcp = SCHEMES[scheme]
    sending = sending_s() if sending is None else sending
    data = tomllib.loads(shipped_scenarios()[BASE_SCENARIO])
    data["name"] = f"uip-rto-{name or scheme}"
    data["duration"] = f"{FORMATION_S + sending:g}s"
    data.pop("capture", None)
    for group in data["host_group"]:
        group["tcp"] = {**group.get("tcp", {}), **tcp}
    for app in data["app"]:
        if app["kind"] == "tcp-bulk":
            app["reconnect"] = RECONNECT
    return toml_text(data)


def runs() -> list[ExperimentRun]:
    """Every scheme with every seed."""
    plan = []
    for scheme in SCHEMES:
        text = scenario(scheme)
        for seed in seeds():
            params = {"scheme": scheme, "sending_s": sending_s()}
            plan.append(ExperimentRun(f"{scheme}-seed{seed}", text, seed=seed, params=params))
    return plan


# ----- what a run shows (computed on the worker) -----


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index, (Σx)² / (n·Σx²); 1 for all zeros."""
    x = np.asarray(values, dtype=float)
    total = float((x * x).sum())
    return 1.0 if total == 0 else float(x.sum() ** 2 / (len(x) * total))


def _ip(endpoint: str) -> str:
    """The address of ``[fd00::1]:80`` or ``10.0.0.1:80``."""
    return endpoint.rsplit(":", 1)[0].strip("[]")


def depths(tree: dict[str, str | None], root: str = ROOT) -> dict[str, int | None]:
    """Hops from each node to ``root`` along ``tree``; ``None`` for a node
    whose parents never reach it (no parent, or a loop)."""
    out: dict[str, int | None] = {}
    for start in tree:
        hops, node, seen = 0, start, set()
        while node != root and node not in seen:
            seen.add(node)
            parent = tree.get(node)
            if parent is None:
                break
            node, hops = parent, hops + 1
        out[start] = hops if node == root else None
    return out


def tree_class(root_children: int, off_shortest: int, orphans: int) -> str:
    """The class of a final tree: D when some node has no path to the root,
    C when the root has one child (one of its two grid neighbours goes
    through another node), B when it has both but some node is deeper than
    its fewest hops, A otherwise."""
    if orphans:
        return TREE_CLASSES[3]
    if root_children < 2:
        return TREE_CLASSES[2]
    return TREE_CLASSES[1] if off_shortest else TREE_CLASSES[0]


def tree_text(tree: dict[str, str | None]) -> str:
    """A tree as one comparable string, ``child>parent`` pairs in node order
    (``-`` for a node without parent)."""
    from rtolab.plots import node_order

    return " ".join(f"{c}>{tree[c] or '-'}" for c in sorted(tree, key=node_order))


def segment_waits(
    retx: pd.DataFrame, armed: pd.DataFrame, samples: pd.DataFrame
) -> list[dict[str, Any]]:
    """For every segment a node retransmitted, how many times, and the time
    from its first transmission (the first timer armed for it) to its
    acknowledgement (the node's first RTT sample on that connection after
    the last retransmission), the time the node could send nothing new
    with uIP's one segment in flight; ``acked`` is false when no sample
    came (the connection gave up or the run ended) and the wait is then
    unknown."""
    out: list[dict[str, Any]] = []
    if retx.empty:
        return out
    keys = ["node_name", "flow", "seq"]
    first_armed = armed.groupby(keys)["t_s"].min()
    by_flow = {
        key: np.sort(group.to_numpy(dtype=float))
        for key, group in samples.groupby(["node_name", "flow"])["t_s"]
    }
    # One row per segment, in the groups' order; per-group work in pandas
    # took half of a run's analysis.
    segments = retx.groupby(keys)["t_s"].agg(["size", "max"])
    starts = first_armed.reindex(segments.index).to_numpy(dtype=float)
    for (node, flow, _), count, last, start in zip(
        segments.index, segments["size"], segments["max"].to_numpy(dtype=float), starts, strict=True
    ):
        acks = by_flow.get((node, flow), np.empty(0))
        # The first acknowledgement after the last retransmission.
        at = int(np.searchsorted(acks, last, side="right"))
        acked = at < len(acks) and not math.isnan(start)
        out.append(
            {
                "node": str(node),
                "retransmissions": int(count),
                "acked": acked,
                "wait_s": round(float(acks[at]) - float(start), 3) if acked else None,
            }
        )
    return out


def _longest_stall(times: np.ndarray, start: float, end: float) -> float:
    """The longest time without an acknowledged segment between ``start``
    and ``end``, given the acknowledgement times."""
    marks = np.concatenate(([start], np.sort(times[(times >= start) & (times <= end)]), [end]))
    return float(np.diff(marks).max())


def summarise(result: Result, params: dict[str, Any]) -> dict[str, Any]:
    """The run's row of ``runs.csv`` and its clients' rows of
    ``per_node.csv``, from its report and traces."""
    from rtolab.plots import events, tree_at

    report = result.report
    scheme, seed = str(params["scheme"]), result.seed
    end = float(report["duration_s"])
    apps = {a["name"]: a for a in report["apps"]}
    clients = [a for a in report["apps"] if a["kind"] == "tcp-bulk"]
    flows = report["flows"]
    # Segments the server received from each client address.
    received: dict[str, int] = {}
    for flow in flows:
        if flow.get("app") == SERVER:
            ip = _ip(flow["remote"])
            received[ip] = received.get(ip, 0) + int(flow["bytes_received"])
    # Each family read on its own from the run's tables, not the whole trace.
    tree = tree_at(result)
    hops = depths(tree)
    positions = {n["name"]: n.get("position") for n in report["nodes"]}
    root_at = positions.get(ROOT) or {"x": 0.0, "y": 0.0}

    def min_hops(node: str) -> int | None:
        at = positions.get(node)
        if not at:
            return None
        return round((abs(at["x"] - root_at["x"]) + abs(at["y"] - root_at["y"])) / SPACING_M)

    samples = events(result, "rtt_sample", ["t_s", "node_name", "flow"])
    retx = events(result, "retransmission", ["t_s", "node_name", "flow", "seq"])
    armed = events(result, "rto_armed", ["t_s", "node_name", "flow", "seq"])
    hosts = {a["host"] for a in clients}
    segments = [
        {"scheme": scheme, "seed": seed, **row, "hops": hops.get(row["node"])}
        for row in segment_waits(
            *(frame[frame["node_name"].isin(hosts)] for frame in (retx, armed, samples))
        )
    ]
    nodes = []
    for app in clients:
        host = app["host"]
        mine = [f for f in flows if f.get("app") == app["name"]]
        ips = {_ip(f["local"]) for f in mine}
        goodput = sum(received.get(ip, 0) for ip in ips) // SEGMENT
        acked = samples.loc[samples["node_name"] == host, "t_s"].to_numpy(dtype=float)
        own = retx[retx["node_name"] == host]
        most = int(own.groupby(["flow", "seq"]).size().max()) if len(own) else 0
        nodes.append(
            {
                "scheme": scheme,
                "seed": seed,
                "node": host,
                "hops": hops.get(host),
                "min_hops": min_hops(host),
                "parent": tree.get(host),
                "goodput_segments": goodput,
                "retransmissions": sum(int(f["retransmissions"]) for f in mine),
                "most_retransmissions_one_segment": most,
                "connections": len(mine),
                "connections_failed": int(app.get("connections_failed") or 0),
                "longest_stall_s": _longest_stall(acked, FORMATION_S, end),
            }
        )
    members = []
    for link in report["links"]:
        stats = link.get("stats")
        if isinstance(stats, dict) and "members" in stats:
            members += stats["members"]
    root_children = sum(1 for p in tree.values() if p == ROOT)
    reached = [h for h in hops.values() if h is not None]
    orphans = sum(1 for n in nodes if n["hops"] is None)
    off_shortest = sum(
        1
        for n in nodes
        if n["hops"] is not None and n["min_hops"] is not None and n["hops"] > n["min_hops"]
    )
    client_flows = [f for f in flows if f.get("app") in {a["name"] for a in clients}]
    sink = apps.get(SERVER, {})
    run = {
        "scheme": scheme,
        "seed": seed,
        "status": "ok",
        "complete": bool(end >= FORMATION_S + float(params["sending_s"]) - 1e-9),
        "goodput_segments": int(sink.get("bytes_received", 0)) // SEGMENT,
        "fairness": jain([n["goodput_segments"] for n in nodes]),
        "clients_delivering": sum(1 for n in nodes if n["goodput_segments"] > 0),
        "retransmissions": sum(int(f["retransmissions"]) for f in client_flows),
        "spurious_retransmissions": sum(int(f["spurious_retransmissions"]) for f in client_flows),
        "connections_failed": sum(n["connections_failed"] for n in nodes),
        "tree_depth": max(reached, default=0),
        "root_children": root_children,
        "nodes_off_shortest": off_shortest,
        "nodes_without_parent": orphans,
        "tree_class": tree_class(root_children, off_shortest, orphans),
        "duty_cycle_mean": float(np.mean([m["radio"]["duty_cycle"] for m in members]))
        if members
        else math.nan,
        "bytes_corrupt": int(sink.get("bytes_corrupt", 0)),
        "start_tree": tree_text(tree_at(result, FORMATION_S)),
        "end_tree": tree_text(tree),
    }
    return {"run": run, "nodes": nodes, "segments": segments}


def analyse(result: Result, params: dict[str, Any]) -> None:
    """Writes :func:`summarise` into the run's directory (on the worker)."""
    if result.out_dir is not None:
        data = summarise(result, params)
        outdir.write_text(result.out_dir, SUMMARY_FILE, json.dumps(data) + "\n")


def _summary_of(result: Result, params: dict[str, Any]) -> dict[str, Any]:
    path = result.out_dir / SUMMARY_FILE if result.out_dir is not None else None
    if path is not None and path.is_file():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    return summarise(result, params)


# ----- tables -----


def tables(
    results: dict[str, Result], plan: Sequence[ExperimentRun] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``runs.csv``, ``per_node.csv`` and ``segments.csv`` of the runs of
    ``plan`` (default: this experiment's), in plan order; a run that failed
    has its scheme, seed and status only. A run planned with a ``reading``
    parameter has it in a column of its own, first."""
    plan = runs() if plan is None else plan
    run_rows: list[dict[str, Any]] = []
    node_rows: list[dict[str, Any]] = []
    segment_rows: list[dict[str, Any]] = []
    for spec in plan:
        scheme = str(spec.params["scheme"])
        extra = {"reading": spec.params["reading"]} if "reading" in spec.params else {}
        result = results.get(spec.label)
        if result is None:
            run_rows.append(
                {
                    **extra,
                    "scheme": scheme,
                    "seed": spec.seed,
                    "status": "failed",
                    "complete": False,
                }
            )
            continue
        data = _summary_of(result, spec.params)
        run_rows.append({**extra, **data["run"]})
        node_rows += [{**extra, **row} for row in data["nodes"]]
        segment_rows += [{**extra, **row} for row in data.get("segments", [])]
    first = ["reading"] if any("reading" in spec.params for spec in plan) else []
    frame = pd.DataFrame(run_rows, columns=[*first, *RUN_COLUMNS])
    nodes = pd.DataFrame(node_rows, columns=[*first, *NODE_COLUMNS])
    for name in ("hops", "min_hops"):
        nodes[name] = nodes[name].astype("Int64")
    segments = pd.DataFrame(segment_rows, columns=[*first, *SEGMENT_COLUMNS])
    segments["hops"] = segments["hops"].astype("Int64")
    return frame, nodes, segments


SUMMARY_METRICS = (
    "goodput_segments",
    "fairness",
    "retransmissions",
    "connections_failed",
    "duty_cycle_mean",
)


def summary(frame: pd.DataFrame, keys: Sequence[str] = ("scheme",)) -> pd.DataFrame:
    """Per group: planned runs, complete ones (n), unfinished ones, and for
    each metric the median, min, max, mean and the 95 % CI half-width of
    the mean (normal approximation) over the complete runs."""
    rows = []
    for key, group in frame.groupby(list(keys), sort=False):
        values = key if isinstance(key, tuple) else (key,)
        done = group[group["status"].eq("ok") & group["complete"].eq(True)]
        row: dict[str, Any] = dict(zip(keys, values, strict=True))
        row["runs"] = len(group)
        row["n"] = len(done)
        row["unfinished"] = len(group) - len(done)
        for metric in SUMMARY_METRICS:
            stats = spread(done[metric])
            for stat in ("median", "min", "max", "mean", "ci95"):
                row[f"{metric}_{stat}"] = round(stats[stat], 4)
        rows.append(row)
    return pd.DataFrame(rows)


def tree_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per tree class and scheme: n and the spread of goodput and fairness."""
    done = frame[frame["status"].eq("ok")].copy()
    if done.empty:
        return pd.DataFrame(columns=["tree_class", "scheme", "runs", "n"])
    done["tree_class"] = pd.Categorical(done["tree_class"], list(TREE_CLASSES), ordered=True)
    done["scheme"] = pd.Categorical(done["scheme"], list(SCHEMES), ordered=True)
    done = done.sort_values(["tree_class", "scheme"], kind="stable")
    done["tree_class"] = done["tree_class"].astype(str)
    done["scheme"] = done["scheme"].astype(str)
    table = summary(done, ("tree_class", "scheme"))
    keep = ["tree_class", "scheme", "runs", "n", "unfinished"]
    keep += [f"{m}_{s}" for m in ("goodput_segments", "fairness") for s in ("median", "min", "max")]
    return table[keep]


# ----- figures -----


def _colours() -> dict[str, str]:
    from rtolab.plots import PALETTE

    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(SCHEMES)}


def scatter_figure(frame: pd.DataFrame) -> Figure:
    """Goodput against fairness, one point per run, per scheme."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    colour = _colours()
    for i, (scheme, group) in enumerate(
        frame[frame["status"] == "ok"].groupby("scheme", sort=False)
    ):
        ax.scatter(
            group["fairness"],
            group["goodput_segments"],
            color=colour.get(str(scheme)),
            marker="os^Dv<>"[i % 7],
            alpha=0.75,
            label=f"{scheme} (n = {len(group)})",
        )
    ax.set_xlabel("Jain's fairness index over the 15 clients")
    ax.set_ylabel("goodput (segments received by the server)")
    ax.set_title("Goodput vs fairness, one point per run")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def cdf_figure(frame: pd.DataFrame) -> Figure:
    """CDFs of goodput and fairness per scheme."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    colour = _colours()
    ok = frame[frame["status"] == "ok"]
    for ax, metric, label in zip(
        axes,
        ("goodput_segments", "fairness"),
        ("goodput (segments)", "Jain's fairness index"),
        strict=True,
    ):
        for scheme, group in ok.groupby("scheme", sort=False):
            x = np.sort(group[metric].to_numpy(dtype=float))
            y = np.arange(1, len(x) + 1) / len(x)
            ax.step(
                x, y, where="post", color=colour.get(str(scheme)), label=f"{scheme} (n = {len(x)})"
            )
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of runs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("Distribution over seeds")
    fig.tight_layout()
    return fig


def hops_figure(nodes: pd.DataFrame) -> Figure:
    """Per-client goodput by hop count in the final tree: median and
    min-max per scheme, with the number of (client, run) pairs."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colour = _colours()
    known = nodes.dropna(subset=["hops"])
    width = 0.8 / max(len(SCHEMES), 1)
    for i, scheme in enumerate(SCHEMES):
        rows = known[known["scheme"] == scheme]
        if rows.empty:
            continue
        grouped = rows.groupby("hops")["goodput_segments"]
        hops = np.array(sorted(grouped.groups), dtype=float)
        med = grouped.median().reindex(hops).to_numpy()
        low = grouped.min().reindex(hops).to_numpy()
        high = grouped.max().reindex(hops).to_numpy()
        x = hops + (i - (len(SCHEMES) - 1) / 2) * width
        ax.errorbar(
            x,
            med,
            yerr=[med - low, high - med],
            fmt="o",
            color=colour[scheme],
            capsize=3,
            label=scheme,
        )
    ax.set_xlabel("hops to the root in the final tree")
    ax.set_ylabel("client goodput (segments): median, min-max")
    ax.set_title("Per-client goodput by depth")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig


def tree_class_figure(frame: pd.DataFrame) -> Figure:
    """Goodput and fairness per tree class and scheme (median, min-max, n)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colour = _colours()
    ok = frame[frame["status"] == "ok"]
    classes = [c for c in TREE_CLASSES if (ok["tree_class"] == c).any()]
    width = 0.8 / max(len(SCHEMES), 1)
    for ax, metric in zip(axes, ("goodput_segments", "fairness"), strict=True):
        for i, scheme in enumerate(SCHEMES):
            for j, cls in enumerate(classes):
                values = ok[(ok["scheme"] == scheme) & (ok["tree_class"] == cls)][metric]
                if values.empty:
                    continue
                med = float(values.median())
                x = j + (i - (len(SCHEMES) - 1) / 2) * width
                ax.errorbar(
                    [x],
                    [med],
                    yerr=[[med - float(values.min())], [float(values.max()) - med]],
                    fmt="o",
                    color=colour[scheme],
                    capsize=3,
                    label=scheme if j == 0 else None,
                )
                ax.annotate(
                    f"{len(values)}",
                    (x, med),
                    xytext=(3, 3),
                    textcoords="offset points",
                    fontsize=7,
                )
        ax.set_xticks(range(len(classes)), [c.split(":")[0] for c in classes])
        ax.set_xlabel("tree class (labels: n runs)")
        ax.set_ylabel(metric.replace("_", " ") + ": median, min-max")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("; ".join(classes), fontsize=8)
    fig.tight_layout()
    return fig


def trees_figure(best: Result, worst: Result, best_row: pd.Series, worst_row: pd.Series) -> Figure:
    """The final RPL tree of the best and of the worst run (by goodput)."""
    import matplotlib.pyplot as plt

    from rtolab.plots import routing_tree

    fig, axes = plt.subplots(1, 2, figsize=(11, 5.5))
    for ax, result, row, what in (
        (axes[0], best, best_row, "best"),
        (axes[1], worst, worst_row, "worst"),
    ):
        routing_tree(result, ax=ax)
        ax.set_title(
            f"{what}: {row['scheme']} seed {row['seed']}, {row['goodput_segments']} segments, "
            f"J = {row['fairness']:.2f}\n{row['tree_class']}",
            fontsize=9,
        )
    fig.tight_layout()
    return fig


def rto_figure(result: Result, node: str, row: pd.Series) -> Figure:
    """The timers one client armed over time, with the retransmissions of
    the segment it retransmitted most often marked."""
    import matplotlib.pyplot as plt

    from rtolab.plots import events

    traces = result.traces
    armed = events(traces, "rto_armed", ["t_s", "node_name", "flow", "rto", "seq"])
    armed = armed[armed["node_name"] == node]
    retx = events(traces, "retransmission", ["t_s", "node_name", "flow", "seq"])
    retx = retx[retx["node_name"] == node]
    fig, ax = plt.subplots(figsize=(9, 4))
    for flow, group in armed.groupby("flow"):
        ax.step(
            group["t_s"],
            group["rto"] / 1e9,
            where="post",
            lw=0.9,
            label=f"timer armed, connection {flow}",
        )
    if len(retx):
        (flow, seq), _ = max(retx.groupby(["flow", "seq"]), key=lambda kv: len(kv[1]))
        same = retx[(retx["flow"] == flow) & (retx["seq"] == seq)]
        ax.plot(
            same["t_s"],
            np.zeros(len(same)),
            "x",
            color="red",
            clip_on=False,
            label=f"retransmissions of one segment ({len(same)})",
        )
        other = retx.drop(same.index)
        ax.plot(other["t_s"], np.zeros(len(other)), "|", color="0.5", label="other retransmissions")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("timer armed (s)")
    ax.set_title(f"{node}, {row['scheme']} seed {row['seed']}: RTO over time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


# ----- checks, report -----


#: Jain's-index difference the paired intervals are meant to resolve.
RESOLUTION = 0.02
#: Scheme pairs compared seed by seed (first minus second).
PAIRS = (
    ("lim2024", "lim2020"),
    ("lim2020", "uip"),
    ("lim2024", "uip"),
    ("link_aware", "lim2024"),
)
PAIRED_METRICS = ("fairness", "goodput_segments")
PAIRED_COLUMNS = (
    "a",
    "b",
    "metric",
    "n",
    "mean",
    "sd",
    "ci95",
    "min",
    "max",
    "seeds_to_resolve",
)


def seeds_to_resolve(sd: float, resolution: float = RESOLUTION) -> float:
    """Seeds whose paired differences, spread by ``sd``, give a 95 % interval
    of half-width ``resolution`` (normal approximation, as :func:`spread`)."""
    if math.isnan(sd):
        return math.nan
    return float(math.ceil((1.96 * sd / resolution) ** 2))


def paired(frame: pd.DataFrame, metric: str, a: str, b: str) -> dict[str, float]:
    """:func:`spread` of ``metric`` under scheme ``a`` minus under ``b``, seed
    by seed, over the seeds where both runs are complete: the schemes of a
    seed share the mesh's random draws and its state when the clients
    start, so the difference is the timer's."""
    done = frame[frame["status"].eq("ok") & frame["complete"].eq(True)]
    wide = done.pivot_table(index="seed", columns="scheme", values=metric, aggfunc="first")
    if a not in wide or b not in wide:
        return spread(pd.Series(dtype=float))
    return spread((wide[a] - wide[b]).dropna())


def paired_table(frame: pd.DataFrame, pairs: Sequence[tuple[str, str]] = PAIRS) -> pd.DataFrame:
    """``paired.csv``: per pair and metric, the per-seed differences' n,
    mean, sd, 95 % CI half-width, min and max, and (fairness) the seeds
    that would resolve :data:`RESOLUTION`."""
    rows = []
    schemes = set(frame["scheme"])
    for a, b in pairs:
        if not {a, b} <= schemes:
            continue
        for metric in PAIRED_METRICS:
            stats = paired(frame, metric, a, b)
            row: dict[str, Any] = {"a": a, "b": b, "metric": metric}
            row.update({k: round(stats[k], 4) for k in ("n", "mean", "sd", "ci95", "min", "max")})
            row["seeds_to_resolve"] = (
                seeds_to_resolve(stats["sd"]) if metric == "fairness" else math.nan
            )
            rows.append(row)
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def _bounds(stats: dict[str, float]) -> tuple[float, float]:
    return stats["mean"] - stats["ci95"], stats["mean"] + stats["ci95"]


def claim_verdicts(frame: pd.DataFrame, tests: int = 1) -> list[tuple[str, str, bool | None]]:
    """The study's claims, each judged on paired per-seed differences with
    95 % intervals: (statement, our numbers, holds). A claim of an
    improvement holds when the interval lies above 0; it does not when the
    interval lies below 0, or when it is narrow enough to resolve
    :data:`RESOLUTION` and stays below it (no improvement that large); the
    runs cannot tell otherwise. With ``tests`` > 1 the intervals are
    family-wise over that many judgements (:func:`family_half_width`)."""
    out: list[tuple[str, str, bool | None]] = []
    level = (
        "95 % intervals"
        if tests <= 1
        else f"family-wise 95 % intervals over {tests} judgements, Bonferroni"
    )

    def judged(metric: str, a: str, b: str) -> dict[str, float]:
        stats = paired(frame, metric, a, b)
        return {**stats, "ci95": family_half_width(stats, tests)}

    def text(stats: dict[str, float], digits: int) -> str:
        return f"{stats['mean']:+.{digits}f} ± {stats['ci95']:.{digits}f} (n = {stats['n']})"

    def improves(stats: dict[str, float], resolution: float) -> bool | None:
        low, high = _bounds(stats)
        if any(math.isnan(x) for x in (low, high)):
            return None
        if low > 0:
            return True
        if high < 0 or (stats["ci95"] <= resolution and high < resolution):
            return False
        return None

    schemes = set(frame["scheme"])
    if {"lim2020", "lim2024"} <= schemes:
        fair = judged("fairness", "lim2024", "lim2020")
        good = judged("goodput_segments", "lim2024", "lim2020")
        better = improves(fair, RESOLUTION)
        _, good_high = _bounds(good)
        lower = not math.isnan(good_high) and good_high < 0
        holds = False if lower or better is False else better
        out.append(
            (
                "Lim 2024 improves fairness between nodes over Lim 2020 without lowering "
                "the total goodput (uip-rto spec §2.3)",
                f"Lim 2024 minus Lim 2020, per seed: fairness {text(fair, 3)}, goodput "
                f"{text(good, 0)} segments ({level})",
                holds,
            )
        )
    for lim in ("lim2020", "lim2024"):
        if not {lim, "uip"} <= schemes:
            continue
        good = judged("goodput_segments", lim, "uip")
        fair = judged("fairness", lim, "uip")
        name = "Lim 2020" if lim == "lim2020" else "Lim 2024"
        out.append(
            (
                f"{name} delivers more total goodput than stock uIP's fixed RTO "
                "(the premise of Lim's timers, uip-rto spec §1-2)",
                f"{name} minus uip, per seed: goodput {text(good, 0)} segments",
                improves(good, 0.0),
            )
        )
        out.append(
            (
                f"{name} is fairer than stock uIP's fixed RTO",
                f"{name} minus uip, per seed: fairness {text(fair, 3)}",
                improves(fair, RESOLUTION),
            )
        )
    return out


def claims(frame: pd.DataFrame) -> list[Claim]:
    """:func:`claim_verdicts` as the reproduction's claims."""
    return [Claim(statement, ours, holds) for statement, ours, holds in claim_verdicts(frame)]


def same_start(frame: pd.DataFrame, keys: Sequence[str] = ("seed",)) -> tuple[int, int]:
    """How many groups (seeds, by default) have every scheme's run start
    sending on the same tree, of the groups with a tree recorded."""
    ok = frame[frame["status"].eq("ok")]
    if ok.empty:
        return 0, 0
    counts = ok.groupby(list(keys))["start_tree"].nunique()
    return int((counts == 1).sum()), len(counts)


#: Total goodput under which the study calls a run poor (uip-rto spec §3).
LOW_GOODPUT = 500
#: Tree classes where a node that hears the root is not its child.
MISPLACED = (TREE_CLASSES[2], TREE_CLASSES[3])


def fisher_greater(a: int, b: int, c: int, d: int) -> float:
    """One-sided p of Fisher's exact test that the table [[a, b], [c, d]]
    has more in ``a`` than independence gives: P(X ≥ a) for the
    hypergeometric count of the first row in the first column."""
    row, col, total = a + b, a + c, a + b + c + d
    denominator = math.comb(total, col)
    if denominator == 0:
        return math.nan
    top = min(row, col)
    return sum(math.comb(row, k) * math.comb(total - row, col - k) for k in range(a, top + 1)) / (
        denominator
    )


def tree_relation(frame: pd.DataFrame) -> pd.DataFrame:
    """``low-goodput.csv``: per scheme and over all, the complete runs under
    :data:`LOW_GOODPUT` segments and the others, how many of each ended on a
    tree where a node that hears the root is not its child (class C or D),
    and the one-sided p of Fisher's exact test that poor runs have such
    trees more often."""
    done = frame[frame["status"].eq("ok") & frame["complete"].eq(True)]
    rows = []
    groups = [(str(k), g) for k, g in done.groupby("scheme", sort=False)] + [("all", done)]
    for name, group in groups:
        low = group["goodput_segments"] < LOW_GOODPUT
        bad = group["tree_class"].isin(MISPLACED)
        a, b = int((low & bad).sum()), int((low & ~bad).sum())
        c, d = int((~low & bad).sum()), int((~low & ~bad).sum())
        rows.append(
            {
                "scheme": name,
                "low_runs": a + b,
                "low_misplaced": a,
                "other_runs": c + d,
                "other_misplaced": c,
                "p_one_sided": round(fisher_greater(a, b, c, d), 4),
            }
        )
    return pd.DataFrame(rows)


def _picked(
    frame: pd.DataFrame, nodes: pd.DataFrame
) -> tuple[pd.Series | None, pd.Series | None, pd.Series | None]:
    """The runs the figures drawn from traces show: the best and the worst
    run by goodput, and the client that retransmitted one segment most
    (its row of ``per_node.csv``)."""
    ok = frame[frame["status"] == "ok"].sort_values(
        ["goodput_segments", "scheme", "seed"], kind="stable"
    )
    best, worst = (ok.iloc[-1], ok.iloc[0]) if len(ok) else (None, None)
    pick = (
        nodes.sort_values(
            ["most_retransmissions_one_segment", "scheme", "seed", "node"],
            ascending=[False, True, True, True],
            kind="stable",
        ).iloc[0]
        if len(nodes)
        else None
    )
    return best, worst, pick


def _label(row: pd.Series) -> str:
    """The label of the run of a row of ``runs.csv`` or ``per_node.csv``."""
    labels = {(r.params["scheme"], r.seed): r.label for r in runs()}
    return labels[(row["scheme"], int(row["seed"]))]


def traces_read(results: dict[str, Result]) -> list[str]:
    """The runs whose traces :func:`checks` draws figures from."""
    frame, nodes, _ = tables(results)
    return [_label(row) for row in _picked(frame, nodes) if row is not None]


def checks(results: dict[str, Result]) -> list[Check | Claim]:
    """Writes the tables and figures; checks that every run finished and
    every byte arrived intact."""
    out = system_dir(results)
    if out is None:
        return [Check("runs completed", False, "no results")]
    frame, nodes, segments = tables(results)
    write_table(frame, out / "runs.csv")
    write_table(nodes, out / "per_node.csv")
    write_table(segments, out / "segments.csv")
    write_table(summary(frame), out / "summary.csv")
    write_table(tree_table(frame), out / "trees.csv")
    write_table(paired_table(frame), out / "paired.csv")
    write_table(tree_relation(frame), out / "low-goodput.csv")
    figures = out / "figures"
    save_figure(scatter_figure(frame), figures / "goodput-vs-fairness.png")
    save_figure(cdf_figure(frame), figures / "cdf.png")
    save_figure(hops_figure(nodes), figures / "goodput-by-hops.png")
    save_figure(tree_class_figure(frame), figures / "tree-classes.png")
    best, worst, pick = _picked(frame, nodes)
    if best is not None and worst is not None:
        save_figure(
            trees_figure(results[_label(best)], results[_label(worst)], best, worst),
            figures / "trees-best-worst.png",
        )
    if pick is not None:
        save_figure(
            rto_figure(results[_label(pick)], str(pick["node"]), pick),
            figures / "rto-over-time.png",
        )
    done = int((frame["status"].eq("ok") & frame["complete"].eq(True)).sum())
    corrupt = int(frame["bytes_corrupt"].fillna(0).sum())
    same, seeds_with_tree = same_start(frame)
    return [
        *claims(frame),
        Check("every planned run completed", done == len(frame), f"{done} of {len(frame)}"),
        Check(
            "every scheme of a seed starts sending on the same tree",
            same == seeds_with_tree,
            f"{same} of {seeds_with_tree} seeds",
        ),
        Check("the server received every byte intact", corrupt == 0, f"{corrupt} corrupt bytes"),
    ]


def report_sections(directory: Path) -> list[str]:
    """The per-scheme summary first, then the tree classes, the figures,
    and the per-run table collapsed."""
    from rtolab.reports import table_html

    base = directory / SYSTEM
    parts: list[str] = []
    path = base / "summary.csv"
    if path.is_file():
        frame = pd.read_csv(path)
        cols = ["scheme", "runs", "n", "unfinished"]
        for metric in ("goodput_segments", "fairness", "retransmissions"):
            cols += [f"{metric}_{s}" for s in ("median", "min", "max", "mean", "ci95")]
        parts.append(
            "<h3>Per scheme (complete runs: median, min, max, mean, 95 % CI of the mean)</h3>"
            + table_html(frame[[c for c in cols if c in frame]])
        )
    path = base / "paired.csv"
    if path.is_file():
        parts.append(
            "<h3>Paired differences (a minus b, per seed; n, mean, sd, 95 % CI half-width, "
            f"min, max; seeds that would resolve {RESOLUTION} in Jain's index)</h3>"
            + table_html(pd.read_csv(path))
        )
    path = base / "low-goodput.csv"
    if path.is_file():
        parts.append(
            f"<h3>Runs under {LOW_GOODPUT} segments and tree shape (classes C and D: a node "
            "that hears the root is not its child)</h3>" + table_html(pd.read_csv(path))
        )
    path = base / "trees.csv"
    if path.is_file():
        parts.append(
            "<h3>Per tree class and scheme</h3>"
            + "<p>"
            + "; ".join(TREE_CLASSES)
            + " (docs/uip-rto.md).</p>"
            + table_html(pd.read_csv(path))
        )
    for png in sorted((base / "figures").glob("*.png")):
        parts.append(figure_html(png, directory))
    path = base / "runs.csv"
    if path.is_file():
        frame = pd.read_csv(path)
        parts.append(
            f"<details><summary>runs.csv ({len(frame)} runs)</summary>"
            + table_html(frame)
            + "</details>"
        )
    return parts


register(
    Experiment(
        system=SYSTEM,
        name="schemes",
        title="uIP's fixed RTO, Lim 2020, Lim 2024 and a link-aware timer on the 4 x 4 mesh",
        description=(
            "15 uIP clients send 48-byte segments to a server behind the border router for "
            "10 minutes (after 2 minutes of RPL formation), with each RTO scheme and many "
            "seeds; clients reconnect 5 s after a failed connection. Writes runs.csv, "
            "per_node.csv, summary.csv and trees.csv."
        ),
        runs=runs,
        checks=checks,
        report=report_sections,
        options=("seeds", "duration"),
        parallel=True,
        analyse=analyse,
        trace_families=TRACE_FAMILIES,
        keep_captures=False,
        # Its tables come from each run's summary; figures from the traces
        # of the few runs traces_read names.
        keep_traces=False,
        traces_read=traces_read,
    )
)
