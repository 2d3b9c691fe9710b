"""Self-contained HTML reports of a run, a sweep or a reproduction.

:func:`report` looks at a directory, recognises what wrote it (a run's
``metrics.json``, a sweep's ``sweep.json``, a reproduction's
``reproduce.json``) and writes one HTML page with everything inline:
figures as base64 PNG, tables, the scenario text, and the seed and scenario
behind every number. The page loads no script, style sheet or image from
anywhere else, so it can be mailed or archived as one file.
"""

from __future__ import annotations

import base64
import datetime
import html
import io
import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from rtolab import outdir, plots, sweeps
from rtolab._rtolab import __version__
from rtolab.api import METRICS_FILE, TRACES_DIR, Result
from rtolab.errors import OutputError, ResultError, RtolabError, read_file, read_json_file
from rtolab.experiments import MANIFEST, Reproduction, cpu_seconds, experiments
from rtolab.runreport import human
from rtolab.sweeps import RESULTS_FILE, RUNS_DIR, SPEC_FILE, read_results

#: Default file name of the page, inside the reported directory.
REPORT_FILE = "report.html"

#: Metrics shown in summary tables (by the end of their dotted key).
KEY_METRICS = (
    "goodput_bps",
    "received_packets",
    "lost",
    "delay_mean_ns",
    "retransmissions",
    "timeouts",
)

#: Tables with at most this many items show them as columns.
TRANSPOSE_UP_TO = 6
#: Most rows of a run's tables of apps, connections, links or nodes; a run
#: with more says how many there are and where they all are. A page with a
#: row per app of a run of 10 000 took seconds to write and megabytes to
#: hold, and no reader scrolls through it.
MAX_ROWS = 200

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1100px; padding: 0 1rem; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.25rem; border-bottom: 1px solid #ccc; padding-bottom: .2rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .85rem; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; text-align: right; vertical-align: top; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
.scroll { overflow-x: auto; }
.nowrap td { white-space: nowrap; }
details { margin: .6rem 0; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: .85rem; }
pre { background: #f7f7f7; padding: .8rem; overflow-x: auto; font-size: .8rem; }
.pass { color: #006d2c; font-weight: 600; }
.fail { color: #b30000; font-weight: 600; }
.holds { color: #006d2c; font-weight: 600; }
.not-holds { color: #a05a00; font-weight: 600; }
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _pre(text: str) -> str:
    # Quotes need no escaping in element content, and TOML reads better without.
    return f"<pre>{html.escape(text, quote=False)}</pre>"


def _number(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.4g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def figure_html(fig: Figure, caption: str) -> str:
    """A figure as an inline PNG with a caption; closes the figure."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (
        f'<figure><img alt="{_esc(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{_esc(caption)}</figcaption></figure>"
    )


def table_html(frame: pd.DataFrame, *, index: bool = False, nowrap: bool = False) -> str:
    """A DataFrame as an escaped HTML table with readable numbers; with
    ``nowrap``, cells (long paths) stay on one line and the table scrolls
    sideways instead of stretching the page's layout."""
    if frame.empty:
        return "<p><em>none</em></p>"
    shown = frame.copy()
    for name in shown.columns:
        shown[name] = shown[name].map(_number)
    kind = "scroll nowrap" if nowrap else "scroll"
    return f'<div class="{kind}">' + shown.to_html(index=index, escape=True, border=0) + "</div>"


def table_sections(base: Path, tables: Iterable[tuple[str, str]]) -> list[str]:
    """A report's sections for the CSV tables ``(file name, title)`` in
    ``base`` that exist, each a heading and the table, in the order given."""

    return [
        f"<h3>{title}</h3>" + table_html(pd.read_csv(base / name))
        for name, title in tables
        if (base / name).is_file()
    ]


def _page(title: str, subtitle: str, body: Iterable[str]) -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f'<h1>{_esc(title)}</h1>\n<p class="meta">{subtitle}</p>\n'
        + "\n".join(body)
        + f'\n<p class="meta">Generated by rtolab {_esc(__version__)} on {stamp}.</p>\n'
        "</body>\n</html>\n"
    )


# ----- a run -----


def _wide(metrics: pd.DataFrame, scope: str, limit: int | None = None) -> tuple[pd.DataFrame, int]:
    """One row per item (and part) of ``scope``, one column per metric: the
    first ``limit`` of them, and how many there are."""
    rows = metrics[metrics["scope"] == scope]
    if rows.empty:
        return pd.DataFrame(), 0
    rows = rows.assign(part=rows["part"].fillna(""))
    keys = rows[["name", "part"]].drop_duplicates()
    count = len(keys)
    if limit is not None and count > limit:
        # Only the rows shown are pivoted: a run may have millions.
        first = set(keys["name"].iloc[:limit])
        rows = rows[rows["name"].isin(first)]
    wide = rows.pivot_table(
        index=["name", "part"], columns="metric", values="value", aggfunc="first", sort=False
    )
    wide = wide.reset_index()
    if (wide["part"] == "").all():
        wide = wide.drop(columns="part")
    wide.columns.name = None
    return (wide.iloc[:limit] if limit is not None else wide), count


def _files_table(result: Result) -> pd.DataFrame:
    counts: dict[str, int] = {}
    if result.pcaps:
        try:
            counts = result.packets.groupby("capture").size().to_dict()
        except RtolabError:
            counts = {}
    rows = []
    for f in result.files:
        size = f.stat().st_size if f.exists() else None
        rows.append(
            {
                "file": f.name,
                "kind": "capture (pcap)" if f.suffix == ".pcap" else f.suffix.lstrip("."),
                "bytes": size,
                "packets": counts.get(f.stem) if f.suffix == ".pcap" else None,
            }
        )
    return pd.DataFrame(rows)


def run_sections(result: Result, *, heading: int = 2, figures: bool = True) -> list[str]:
    """The HTML sections describing one run."""
    h = f"h{heading}"
    source = f"scenario <b>{_esc(result.name)}</b>, seed <b>{result.seed}</b>"
    parts = [
        f"<p>Every number in this section comes from {source}, "
        f"{_number(result.duration_s)} s of simulated time "
        f"({_number(result.report.get('events_processed'))} events).</p>"
    ]
    metrics = result.metrics
    for scope, title in (
        ("app", "Apps"),
        ("flow", "TCP connections"),
        ("link", "Links"),
        ("node", "Nodes"),
    ):
        wide, rows = _wide(metrics, scope, MAX_ROWS)
        if wide.empty:
            continue
        if scope == "flow":
            flows = pd.DataFrame(result.report.get("flows", [])[: len(wide)])
            keep = [c for c in ("host", "app", "local", "remote", "profile", "state") if c in flows]
            if keep and len(flows) == len(wide):
                wide = pd.concat([wide[["name"]], flows[keep], wide.drop(columns="name")], axis=1)
        if rows <= TRANSPOSE_UP_TO:
            # Few items, many metrics: items as columns reads better.
            label = wide["name"].astype(str)
            if "part" in wide:
                label = label + " " + wide["part"].astype(str)
            wide = wide.drop(columns=[c for c in ("name", "part") if c in wide])
            wide.index = label.to_numpy()
            wide = wide.T.reset_index(names="metric")
        note = ""
        if rows > MAX_ROWS:
            note = (
                f"<p>The first {MAX_ROWS} of {rows} rows; every one is in "
                "<code>metrics.json</code> and <code>metrics.parquet</code>.</p>"
            )
        parts.append(f"<{h}>{title} ({source})</{h}>" + note + table_html(wide))
    if figures:
        parts.append(f"<{h}>Figures ({source})</{h}>")
        for name, fig in plots.run_figures(result):
            parts.append(
                figure_html(fig, f"{name.replace('-', ' ')} — {result.name}, seed {result.seed}")
            )
    parts.append(
        f"<{h}>Files</{h}><p>Captures are raw-IPv4 pcap files with nanosecond "
        "timestamps; open them in Wireshark or <code>tshark -r</code>.</p>"
        + table_html(_files_table(result))
    )
    if result.scenario:
        parts.append(f"<{h}>Scenario</{h}>" + _pre(result.scenario))
    return parts


def run_report(result: Result) -> str:
    """The HTML page of one run."""
    subtitle = (
        f"Scenario <b>{_esc(result.name)}</b>, seed <b>{result.seed}</b>, "
        f"output in <code>{_esc(result.out_dir or '')}</code>"
    )
    return _page(f"rtolab run: {result.name}", subtitle, run_sections(result))


# ----- a sweep -----


def _key_columns(frame: pd.DataFrame) -> list[str]:
    return [
        c
        for c in frame.columns
        if str(c).startswith("app.") and str(c).rsplit(".", 1)[-1] in KEY_METRICS
    ]


def sweep_report(directory: Path) -> str:
    """The HTML page of a sweep's output directory."""
    spec: dict[str, Any] = {}
    if (directory / SPEC_FILE).is_file():
        spec = read_json_file(directory / SPEC_FILE)
    read = read_results(directory)
    results = read.frame
    base = directory / sweeps.BASE_FILE
    base_text = ""
    if base.is_file():
        try:
            base_text = read_file(base, follow=False).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            raise ResultError(str(base), "unreadable or not UTF-8 text") from None
    params = [c for c in results.columns if str(c).startswith("param.")]
    scenario = str(results["scenario"].dropna().iloc[0]) if len(results) else "?"
    ok = results[results["status"] == "ok"] if len(results) else results
    failed = results[results["status"] != "ok"] if len(results) else results
    seeds = spec.get("seeds") or (sorted(results["seed"].unique()) if len(results) else [])
    body = [
        f"<p>Base scenario <b>{_esc(scenario)}</b>; {len(results)} runs "
        f"({len(ok)} ok, {len(failed)} failed) over seeds "
        f"{_esc(', '.join(str(s) for s in seeds))}. "
        "Each row of the tables below names the parameters and seed of its run.</p>",
        *_rejected_html(read.rejected),
        *_unfinished_html(spec, len(results)),
    ]
    # The answer first: the summary by parameters and the figures; the
    # grid, the list of runs and the files after them.
    key = _key_columns(ok)
    if len(results):
        body += _summary_html(results, spec)
    figures = plots.sweep_figures(results) if len(ok) else []
    if figures:
        body.append("<h2>Figures</h2>")
        for name, fig in figures:
            body.append(
                figure_html(fig, f"{name.replace('-', ' ')} — sweep {spec.get('name', '')}")
            )
    body += [
        "<h2>Grid</h2>",
        table_html(
            pd.DataFrame(
                [
                    {"parameter": k, "values": ", ".join(map(str, v))}
                    for k, v in spec.get("grid", {}).items()
                ]
                + [
                    {"parameter": f"{k} (fixed)", "values": str(v)}
                    for k, v in spec.get("set", {}).items()
                ]
            )
        ),
    ]
    shown = ["run_id", *params, "seed", "status", "wall_s", *key]
    runs = table_html(results[[c for c in shown if c in results]])
    body.append(_collapsed(f"Runs ({len(results)})", runs))
    if len(failed):
        body += ["<h2>Failures</h2>", table_html(failed[["run_id", *params, "seed", "error"]])]
    files = directory / sweeps.FILES_DIR
    listing = (
        [
            {"file": str(p.relative_to(directory)), "bytes": p.stat().st_size}
            for p in sorted(files.rglob("*.pcap"))
        ]
        if files.is_dir()
        else []
    )
    body += [
        "<h2>Files</h2>",
        f"<p>All rows: <code>{_esc(RESULTS_FILE)}</code>; one file per run in "
        f"<code>{_esc(RUNS_DIR)}/</code> (Parquet; read with pandas, polars or DuckDB).</p>",
        table_html(pd.DataFrame(listing))
        if listing
        else "<p>Captures were not kept (set <code>keep_files = true</code> in the sweep "
        "file to keep them).</p>",
    ]
    if base_text:
        body += ["<h2>Base scenario</h2>", _pre(base_text)]
    return _page(
        f"rtolab sweep: {spec.get('name', directory.name)}",
        f"Output in <code>{_esc(directory)}</code>",
        body,
    )


def _claims_html(claims: list[tuple[str, Any]]) -> str:
    """Each claim of a study with its source, our number, and whether it holds."""
    words = {
        True: ("holds", "holds"),
        False: ("not-holds", "does not hold"),
        None: ("", "cannot tell"),
    }
    rows = "".join(
        f"<tr><td>{_esc(key)}</td><td>{_esc(c.statement)}</td><td>{_esc(c.ours)}</td>"
        f'<td class="{words[c.holds][0]}">{words[c.holds][1]}</td></tr>'
        for key, c in claims
    )
    return (
        "<table><tr><th>experiment</th><th>the study</th><th>ours</th><th>verdict</th></tr>"
        + rows
        + "</table>"
    )


def _checks_html(checks: list[tuple[str, Any]]) -> str:
    """Verdicts as a table: experiment, what is checked (and the study's
    claim with its source, when the check states one), our number, verdict."""
    rows = "".join(
        f"<tr><td>{_esc(key)}</td><td>{_esc(c.name)}</td><td>{_esc(c.detail)}</td>"
        f'<td class="{"pass" if c.passed else "fail"}">{"pass" if c.passed else "FAIL"}</td></tr>'
        for key, c in checks
    )
    return (
        "<table><tr><th>experiment</th><th>check</th><th>ours</th><th>verdict</th></tr>"
        + rows
        + "</table>"
    )


def _collapsed(title: str, content: str) -> str:
    """A section closed until the reader opens it: long lists of runs."""
    return f"<details><summary><b>{_esc(title)}</b></summary>{content}</details>"


def _summary_html(results: pd.DataFrame, spec: dict[str, Any]) -> list[str]:
    """Each cell of the grid: runs finished out of planned, the unfinished
    and failed ones counted, each key metric's mean and range over the
    finished runs (or why there is none); then the unfinished runs by name."""
    grid = spec.get("grid") if isinstance(spec.get("grid"), dict) else None
    seeds = spec.get("seeds")
    metrics = sweeps.summary_metrics(results)
    cells = sweeps.summarize(
        results, metrics, grid=grid, seeds=len(seeds) if isinstance(seeds, list) else None
    )
    rows = []
    for cell in cells:
        row: dict[str, Any] = dict(cell.params)
        row["n (finished / planned)"] = cell.n
        row["unfinished"] = len(cell.unfinished)
        row["failed"] = len(cell.failed)
        for metric in metrics:
            a = cell.metrics[metric]
            name = metric.removeprefix("app.")
            row[f"{name} mean"] = human(metric, a.mean) if a.n else a.why
            row[f"{name} min..max"] = (
                f"{human(metric, a.low)}..{human(metric, a.high)}" if a.n else ""
            )
        rows.append(row)
    parts = [
        "<h2>Summary by parameters</h2>",
        "<p>n counts the runs that finished their workload out of the runs planned for "
        "each combination; means and ranges are over those runs only. A run whose "
        "workload was not done when it ended (an app reports <code>completed = "
        "false</code>) is counted as unfinished and listed below, never averaged in.</p>",
        table_html(pd.DataFrame(rows)),
    ]
    unfinished = [
        {**cell.params, "seed": seed, "apps not done": apps}
        for cell in cells
        for seed, apps in cell.unfinished.items()
    ]
    if unfinished:
        parts += [
            f'<p class="fail">{len(unfinished)} runs did not finish their workload:</p>',
            table_html(pd.DataFrame(unfinished)),
        ]
    return parts


def _rejected_html(rejected: dict[str, str]) -> list[str]:
    """A warning and a table naming the result files left out, if any."""
    if not rejected:
        return []
    rows = pd.DataFrame(
        [{"file": f"{RUNS_DIR}/{name}", "why": why} for name, why in sorted(rejected.items())]
    )
    return [
        f'<p class="fail">{len(rejected)} result files did not verify and are left out of '
        "every count, table and figure on this page; run the sweep again to redo them.</p>",
        table_html(rows),
    ]


def _unfinished_html(spec: dict[str, Any], found: int) -> list[str]:
    """A warning when fewer runs have a verified result than the sweep plans."""
    seeds = spec.get("seeds")
    grid = spec.get("grid")
    if not isinstance(seeds, list) or not isinstance(grid, dict):
        return []
    planned = len(seeds) * math.prod(len(v) for v in grid.values() if isinstance(v, list))
    if found >= planned:
        return []
    return [
        f'<p class="fail">{planned - found} of {planned} planned runs have no verified '
        "result (not finished, or left out above): the numbers below cover the "
        f"{found} that do. Run the sweep again to finish them.</p>"
    ]


# ----- a reproduction -----


def reproduction_report(
    directory: Path, times: dict[str, tuple[float, float]] | None = None
) -> str:
    """The HTML page of a reproduction's output directory; ``times``, when
    given, receives each experiment's section's wall and CPU seconds."""
    data = read_json_file(directory / MANIFEST)
    outcome = Reproduction.load(directory)
    described = data.get("experiments", {})
    body: list[str] = []
    checks_total = sum(len(c) for c in outcome.checks.values())
    failed_checks = len(outcome.failed_checks)
    body.append(
        f"<p>{len(outcome.runs)} runs, {len(outcome.failed)} failed; "
        f"{checks_total} checks, {failed_checks} failed. {_esc(outcome.kept.sentence())}</p>"
    )
    keys: list[str] = []
    for r in outcome.runs:
        k = f"{r.system}/{r.experiment}"
        if k not in keys:
            keys.append(k)
    contents: list[tuple[str, str]] = []

    def heading(anchor: str, title: str) -> str:
        contents.append((anchor, title))
        return f'<h2 id="{_esc(anchor)}">{_esc(title)}</h2>'

    # The answer first: the study's claims beside our numbers, then every
    # check of every experiment.
    claims = [(key, c) for key in keys for c in outcome.claims.get(key, [])]
    if claims:
        body.append(heading("claims", "The study's claims and ours") + _claims_html(claims))
    verdicts = [(key, c) for key in keys for c in outcome.checks.get(key, [])]
    if verdicts:
        body.append(heading("verdicts", "Verdicts") + _checks_html(verdicts))
    run_lists: list[str] = []
    for key in keys:
        t0, cpu0 = time.perf_counter(), cpu_seconds()
        info = described.get(key, {})
        records = [r for r in outcome.runs if f"{r.system}/{r.experiment}" == key]
        body.append(heading(key.replace("/", "-"), f"{key}: {info.get('title', '')}"))
        if info.get("description"):
            body.append(f"<p>{_esc(info['description'])}</p>")
        rows = []
        seen_scenarios: set[str] = set()
        figures: list[str] = []
        registered = [e for e in experiments() if e.key == key]
        own = bool(registered and registered[0].report is not None)
        for record in records:
            row: dict[str, Any] = {
                "run": record.label,
                "scenario": record.scenario,
                "seed": record.seed,
                "status": record.status,
            }
            run_dir = directory / record.out_dir
            if record.status == "ok" and (run_dir / METRICS_FILE).is_file():
                result = Result.load(run_dir)
                flat = result.flat_metrics()
                for k, v in flat.items():
                    if k.startswith("app.") and k.rsplit(".", 1)[-1] in KEY_METRICS:
                        row[k] = v
                # The directory once, not every capture's path: long
                # paths side by side would stretch the table.
                row["captures"] = f"{len(result.pcaps)} in {record.out_dir}/"
                # One set of figures per scenario keeps the page readable;
                # one run's in all beside an experiment's own figures, which
                # make its point: drawing them took most of a report's time.
                if record.scenario not in seen_scenarios and not (own and seen_scenarios):
                    seen_scenarios.add(record.scenario)
                    figures.append(
                        f"<h3>{_esc(record.label)} (scenario {_esc(record.scenario)}, "
                        f"seed {record.seed})</h3>"
                    )
                    for name, fig in plots.run_figures(result):
                        figures.append(
                            figure_html(
                                fig,
                                f"{name.replace('-', ' ')} — {record.scenario}, seed {record.seed}",
                            )
                        )
            else:
                row["error"] = record.error
            rows.append(row)
        # The experiment's own tables and figures come first, then the runs'
        # figures; the list of runs is collapsed at the end.
        if own:
            body.extend(registered[0].report(directory))
        if figures and own:
            # The experiment's figures make its point; a single run's are detail.
            title = "Figures of one run"
            body.append(_collapsed(title, "".join(figures)))
        else:
            body.extend(figures)
        run_lists.append(
            _collapsed(f"{key}: runs ({len(rows)})", table_html(pd.DataFrame(rows), nowrap=True))
        )
        if times is not None:
            times[key] = (time.perf_counter() - t0, cpu_seconds() - cpu0)
    if outcome.times:
        body.append(heading("time", "Time and size") + _times_html(outcome, keys))
    if run_lists:
        body += [heading("runs", "Runs"), *run_lists]
    toc = "".join(f'<li><a href="#{_esc(a)}">{_esc(t)}</a></li>' for a, t in contents)
    body.insert(1, f'<nav><h2>Contents</h2><ol class="toc">{toc}</ol></nav>')
    return _page(
        "rtolab reproduction",
        f"Output in <code>{_esc(directory)}</code>",
        body,
    )


def _times_html(outcome: Reproduction, keys: list[str]) -> str:
    """What each experiment and system took: wall and CPU seconds of its
    runs, their analysis and its checks, and what its directory holds."""
    rows: list[dict[str, Any]] = []
    systems = outcome.system_times()
    for system, entry in systems.items():
        rows.append(
            {
                "system": system,
                "experiment": "(all)",
                "runs": entry["runs"],
                "kept from before": entry["reused"],
                "wall s": round(entry["wall_s"], 1),
                "CPU s": round(entry["cpu_s"], 1),
                "size MB": round(entry["disk_bytes"] / 1e6, 1) if "disk_bytes" in entry else "",
                "files": entry.get("files", ""),
            }
        )
        for key in keys:
            if key.split("/")[0] != system or key not in outcome.times:
                continue
            records = [r for r in outcome.runs if f"{r.system}/{r.experiment}" == key]
            rows.append(
                {
                    "system": system,
                    "experiment": key.split("/", 1)[1],
                    "runs": len(records),
                    "kept from before": sum(r.reused for r in records),
                    "wall s": round(outcome.times[key].wall_s, 1),
                    "CPU s": round(outcome.times[key].cpu_s, 1),
                    "size MB": "",
                    "files": "",
                }
            )
    note = (
        f"<p>In all {outcome.wall_s:.1f} s of wall time and {outcome.cpu_s:.1f} s of CPU "
        "time (this process and its worker processes), before this page was written. "
        "An experiment's time covers its runs, their analysis and its checks; CPU time "
        "is the fairer figure on a machine that other work shares.</p>"
    )
    return note + table_html(pd.DataFrame(rows))


def kind_of(directory: Path) -> str:
    """``run``, ``sweep`` or ``reproduction``: what wrote ``directory``."""
    if (directory / MANIFEST).is_file():
        return "reproduction"
    if (directory / SPEC_FILE).is_file() or (directory / RUNS_DIR).is_dir():
        return "sweep"
    if (directory / METRICS_FILE).is_file():
        return "run"
    raise RtolabError(
        f"{directory}: not the output of a run, a sweep or a reproduction "
        f"(no {METRICS_FILE}, {SPEC_FILE} or {MANIFEST})"
    )


def report(
    directory: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    times: dict[str, tuple[float, float]] | None = None,
) -> Path:
    """Writes the HTML report of a run, sweep or reproduction directory;
    returns the page's path (``DIR/report.html`` unless ``out`` is given).
    For a reproduction, ``times`` receives each experiment's section's wall
    and CPU seconds."""
    root = Path(directory)
    if not root.is_dir():
        raise RtolabError(f"{root}: no such directory")
    kind = kind_of(root)
    # A link would have the page show the file it points to. A run reads
    # its directory's own files and trace tables; a sweep or reproduction
    # reads its whole tree.
    if kind == "run":
        links = outdir.links_below(root, 1) + outdir.links_below(root / TRACES_DIR, 1)
    else:
        links = outdir.links_below(root)
    # The page's own name is written over, not read.
    links = [p for p in links if p != root / REPORT_FILE]
    if links:
        shown = ", ".join(str(p) for p in links[:3]) + (" …" if len(links) > 3 else "")
        raise OutputError(
            shown, "a link, which no run writes (not followed: remove it to write the report)"
        )
    if kind == "run":
        page = run_report(Result.load(root))
    elif kind == "sweep":
        page = sweep_report(root)
    else:
        page = reproduction_report(root, times)
    if out is None:
        return outdir.write_text(root.resolve(), REPORT_FILE, page)
    # A page written elsewhere goes to the directory it names (a link
    # there followed once), under its name (a link there replaced).
    target = Path(out)
    return outdir.write_text(outdir.open_root(target.parent), target.name, page)
