"""The ``rtolab`` command.

Errors in what the user gave (scenario or sweep files, flags) print one line
and exit with status 2; ``--debug`` shows the traceback instead. A command
whose runs failed exits with status 1.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import tomllib
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rtolab import api, outdir
from rtolab._command import EXIT_INTERRUPTED, interrupt
from rtolab._rtolab import DEFAULT_STALL_EVENTS
from rtolab.errors import (
    MAX_TOML_NESTING,
    RtolabError,
    RunError,
    RunStopped,
    ScenarioError,
    read_json_file,
    toml_nesting,
)
from rtolab.runreport import Report, human, plain_number

if TYPE_CHECKING:
    from rich.progress import Progress

    from rtolab.catalog import Field

#: Every option's help shows its default.
_CONTEXT = {"show_default": True, "help_option_names": ["--help"]}
# Highlighting is off: what is printed is mostly data (names, values, paths),
# and rich's highlighter costs time quadratic in the length of a line.
out_console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

#: Longest name shown in a summary or a table; longer ones end in "…" (the
#: whole name is in the output files).
MAX_SHOWN = 60
#: Longest error line printed; the field path comes first, so it survives.
MAX_ERROR = 2000
#: Most items (links, apps, flows) shown as columns of a summary table; more
#: are counted, and listed in metrics.json and metrics.parquet.
MAX_TABLE_ITEMS = 8

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 1

T = TypeVar("T")


class _State:
    debug = False
    #: Set by a command whose outputs are all written and closed, and which
    #: left no thread, process or temporary file to clean up at exit.
    nothing_to_tear_down = False
    #: What an interrupted command says after "interrupted" (what it kept).
    interrupted_note: str | None = None


# The command line is click's, used directly: typer, on top of it, builds a
# pydantic validator per option of the command being run, which alone took
# longer than a second's simulation (docs/performance.md, "Traces and the
# scenario path").
@click.group(
    name="rtolab",
    context_settings=_CONTEXT,
    help="TCP over constrained links: simulate, sweep, reproduce, report.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
def app(debug: bool) -> None:
    _State.debug = debug


@app.group(name="list")
def list_app() -> None:
    """List what rtolab can be configured with."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _visible(text: str) -> str:
    """Control characters (newlines included) as escapes, so that user text
    stays on its line and cannot drive the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """User text as displayed: control characters escaped, cut to ``limit``."""
    text = str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return _visible(text)


def _cell(value: Any) -> Text:
    """A table cell or header: data, never markup."""
    return Text(_shown(_scalar(value)))


def _print_error(message: str, label: str = "error:") -> None:
    # Text, not a markup string: the message holds user text ("x[/]").
    line = Text.assemble((label, "bold red"), " ", _shown(message, MAX_ERROR))
    err_console.print(line, soft_wrap=True)


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn rtolab's errors into one line on stderr and a non-zero exit."""
    try:
        yield
    except RtolabError as err:
        if _State.debug:
            raise
        code = EXIT_RUN_FAILED if isinstance(err, RunError) else EXIT_BAD_INPUT
        _print_error(str(err))
        raise click.exceptions.Exit(code) from None
    except RecursionError:
        # Python's TOML and JSON readers recurse once per nesting level.
        if _State.debug:
            raise
        _print_error("input nested too deeply (more levels than rtolab reads)")
        raise click.exceptions.Exit(EXIT_BAD_INPUT) from None


def _bad_input(message: str) -> click.exceptions.Exit:
    _print_error(message)
    return click.exceptions.Exit(EXIT_BAD_INPUT)


class _Seeds(click.ParamType):
    """Seeds as a comma-separated list with ranges: ``1,3-5``."""

    name = "seeds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        seeds: set[int] = set()
        for part in str(value).split(","):
            low, _, high = part.strip().partition("-")
            try:
                first, last = int(low), int(high or low)
            except ValueError:
                self.fail(f"{part.strip()!r} is not a seed or a range of seeds (1,3-5)", param, ctx)
            if not 0 <= first <= last < 2**64:
                self.fail(f"{part.strip()!r}: seeds run from 0 upwards, low-high", param, ctx)
            if last - first >= 100_000:
                self.fail(f"{part.strip()!r}: more than 100000 seeds", param, ctx)
            seeds.update(range(first, last + 1))
        return tuple(sorted(seeds))


class _Duration(click.ParamType):
    """A duration as scenario files write it (``20s``, ``500ms``), or a bare
    number of seconds; ``minimum`` seconds at least."""

    name = "duration"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            from rtolab._native import duration_seconds

            try:
                seconds = float(value)
            except ValueError:
                try:
                    seconds = duration_seconds(str(value))
                except ScenarioError as err:
                    self.fail(err.message, param, ctx)
        if not (seconds > 0 and seconds < float("inf")) or seconds < self.minimum:
            least = f"at least {self.minimum:g} s" if self.minimum else "positive"
            self.fail(f"must be {least}, got {value!r}", param, ctx)
        return seconds


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        return plain_number(value, 6)
    return str(value)


def _flatten(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per item: nested dicts are merged in, and a nested list of
    dicts (e.g. a link's two directions) gives one row per element."""
    flat: list[dict[str, Any]] = []
    for row in rows:
        base: dict[str, Any] = {}
        expand: list[dict[str, Any]] = []
        for key, value in row.items():
            if isinstance(value, dict):
                for inner, inner_value in value.items():
                    if isinstance(inner_value, list) and all(
                        isinstance(x, dict) for x in inner_value
                    ):
                        expand = inner_value
                    else:
                        base[inner] = inner_value
            else:
                base[key] = value
        if expand:
            flat.extend({**base, "#": i, **item} for i, item in enumerate(expand))
        else:
            flat.append(base)
    return flat


def _table(title: str, rows: list[dict[str, Any]]) -> Table | None:
    """Items as columns and their metrics as rows, so wide stats stay readable."""
    rows = _flatten(rows)
    if not rows:
        return None
    labels = [
        " ".join(_shown(row[k]) for k in ("name", "#") if k in row) or str(i)
        for i, row in enumerate(rows)
    ]
    # A dict keeps first-seen order and finds a key in constant time.
    metrics: dict[str, None] = {}
    for row in rows:
        for key, value in row.items():
            if key not in ("name", "#") and not isinstance(value, dict | list):
                metrics.setdefault(key)
    table = Table(title=title, title_justify="left")
    # Names whole, whatever the terminal's width: values wrap instead.
    table.add_column("", no_wrap=True, min_width=max(len(m) for m in metrics) if metrics else 0)
    for label in labels:
        table.add_column(Text(label), justify="right", overflow="fold")
    for metric in metrics:
        values = (Text(_shown(human(metric, row.get(metric)))) for row in rows)
        table.add_row(_cell(metric), *values)
    return table


def _print_summary(report: dict[str, Any], seconds: float, files: list[Path]) -> None:
    out_console.print(
        Text.assemble(
            (_shown(report.get("name", "scenario")), "bold"),
            f": seed {_shown(report.get('seed'))}, "
            f"{_shown(_scalar(report.get('duration_s', 0.0)))} s simulated, "
            f"{_shown(report.get('events_processed', 0))} events in {seconds:.2f} s",
        ),
        soft_wrap=True,
    )
    for key in ("links", "apps", "middleboxes", "flows"):
        count = _count(report, key)
        if count is None:
            continue
        if count > MAX_TABLE_ITEMS:
            # A column per item stops being readable long before it gets slow.
            what = "TCP connections" if key == "flows" else key
            out_console.print(f"{key}: {count} {what} (see metrics.json and metrics.parquet)")
            continue
        table = _table(key, report[key])
        if table is not None:
            out_console.print(table)
    if files:
        by_kind: dict[str, list[str]] = {}
        for f in files:
            by_kind.setdefault(_file_kind(f), []).append(_visible(str(f)))
        for kind, names in by_kind.items():
            out_console.print(Text(f"{kind}: " + ", ".join(names)), soft_wrap=True)


def _count(report: Mapping[str, Any], key: str) -> int | None:
    """How many items ``report`` lists under ``key`` (``None`` if no list),
    without decoding them when the report is kept as text."""
    if isinstance(report, Report):
        return report.count(key)
    rows = report.get(key)
    return len(rows) if isinstance(rows, list) else None


def _file_kind(path: Path) -> str:
    if path.suffix == ".pcap":
        return "pcaps"
    if path.suffix == ".png":
        return "plots"
    if path.suffix == ".html":
        return "report"
    if path.name.startswith("traces"):
        return "traces"
    if path.suffix == ".toml":
        return "scenario"
    return "metrics"


#: Seconds between two plain progress lines (output not a terminal).
PLAIN_PROGRESS_S = 10.0


class _PlainProgress:
    """Progress as plain lines on stderr when it is not a terminal (a log
    file, a pipe, a batch job), where a bar would print nothing: one line
    at most every :data:`PLAIN_PROGRESS_S` seconds, and one at the end."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.off = quiet or err_console.is_terminal
        self.total: int | None = None
        self.done = 0
        self.failed = 0
        self.started = time.perf_counter()
        self.last = -math.inf

    def start(self, total: int) -> None:
        self.total = total
        self.started = time.perf_counter()
        self._line(f"{total} runs to do")

    def advance(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += failed
        now = time.perf_counter()
        if now - self.last >= PLAIN_PROGRESS_S or self.done == self.total:
            elapsed = now - self.started
            text = f"{self.done}/{self.total} runs done"
            if self.failed:
                text += f" ({self.failed} failed)"
            text += f", {_clock(elapsed)} elapsed"
            if self.total and self.done < self.total:
                left = elapsed / self.done * (self.total - self.done)
                text += f", about {_clock(left)} left"
            self._line(text)

    def _line(self, text: str) -> None:
        if self.off:
            return
        self.last = time.perf_counter()
        err_console.print(Text(f"{self.label}: {text}"), soft_wrap=True)
        err_console.file.flush()


def _clock(seconds: float) -> str:
    """``2h05m``, ``3m07s`` or ``12s``."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _with_spinner(label: str, work: Callable[[], T], quiet: bool = False) -> T:
    """Show a spinner on an interactive terminal while ``work`` runs."""
    if quiet or not err_console.is_terminal:
        return work()
    with err_console.status(f"{label}…"):
        return work()


def _progress(quiet: bool) -> Progress:
    # Imported here: only sweeps and reproductions show progress bars.
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=quiet or not err_console.is_terminal,
    )


@app.command()
@click.argument("scenario", required=False)
@click.option("--seed", type=click.IntRange(min=0), help="Override the scenario's seed.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("results/run"),
    help="Directory for pcaps, traces, metrics and plots.",
)
@click.option(
    "--duration",
    type=_Duration(),
    help="Override the simulated duration: 20s, 500ms (as in scenario files) or seconds.",
)
@click.option(
    "--traces",
    default="summary",
    help="Trace level: none, summary (no per-packet events; what the plots "
    "need, fast at any size) or full (every event).",
)
@click.option("--no-traces", is_flag=True, help="Write no trace (same as --traces none).")
@click.option(
    "--trace-families",
    help="Record only these families, comma-separated: names (tcp_cwnd) or "
    "prefixes (tcp); see docs/traces.md.",
)
@click.option(
    "--trace-format",
    default="parquet",
    help="parquet (one table per family in traces/) or jsonl (traces.jsonl).",
)
@click.option(
    "--plot/--no-plot", default=True, help="Draw plots from the traces (none without a trace)."
)
@click.option("--report/--no-report", default=False, help="Write report.html.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--max-events", type=click.IntRange(min=0), help="Stop after this many events.")
@click.option(
    "--max-wall",
    type=click.FloatRange(min=0.001),
    help="Stop after this many seconds of wall time.",
)
@click.option(
    "--max-output",
    type=click.IntRange(min=0),
    help="Stop once pcaps and traces hold this many bytes.",
)
@click.option(
    "--max-stall-events",
    type=click.IntRange(min=1, max=2**64 - 1),
    help="Fail when this many events in a row fire at one instant "
    f"(simulated time standing still); default {DEFAULT_STALL_EVENTS}.",
)
def run(
    scenario: str | None,
    seed: int | None,
    out: Path,
    duration: float | None,
    traces: str,
    no_traces: bool,
    trace_families: str | None,
    trace_format: str,
    plot: bool,
    report: bool,
    as_json: bool,
    max_events: int | None,
    max_wall: float | None,
    max_output: int | None,
    max_stall_events: int | None,
) -> None:
    """Run one scenario in the simulator and summarise it.

    SCENARIO is a scenario TOML file or a shipped scenario's name; the
    embedded default when omitted. A run stopped by a limit, Ctrl-C or
    SIGTERM keeps valid outputs, with metrics.json marked incomplete."""
    # SIGTERM stops a run the way Ctrl-C does, outputs flushed.
    _stop_on_sigterm()
    with _user_errors():
        source = scenario if scenario is not None else api.default_scenario()
        started = time.perf_counter()
        try:
            result = _with_spinner(
                "simulating",
                lambda: api.run(
                    source,
                    seed=seed,
                    out=out,
                    duration=duration,
                    traces="none" if no_traces else traces,
                    trace_families=trace_families.split(",") if trace_families else None,
                    trace_format=trace_format,
                    max_events=max_events,
                    max_wall=max_wall,
                    max_output=max_output,
                    max_stall_events=max_stall_events,
                ),
                as_json,
            )
        except RunStopped as err:
            raise _bad_input(f"{err}; outputs so far in {out}, marked incomplete") from None
        except KeyboardInterrupt:
            err_console.print(
                _interrupted(out),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
            # The run's files are written and closed by now; leave without
            # the interpreter's teardown of pandas, pyarrow and dask, which
            # takes longer than the stop itself.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        elapsed = time.perf_counter() - started
        # The same files as rtolab.run(out=...) writes, by the same code.
        from rtolab.outputs import write_outputs

        label = "plotting" if plot else "writing the metrics table"
        extra = _with_spinner(
            label, lambda: write_outputs(result, plots=plot, report=report), as_json
        )
        if as_json:
            changes = {
                "files": [str(f) for f in result.files] + [str(f) for f in extra],
                "plots": [str(p) for p in extra if p.suffix == ".png"],
                "wall_s": elapsed,
            }
            if isinstance(result.report, Report):
                # Copies the report's text: no object per app.
                sys.stdout.flush()
                result.report.write_json(sys.stdout.buffer, **changes)
                sys.stdout.buffer.flush()
            else:
                click.echo(json.dumps({**result.report, **changes}))
        else:
            _print_summary(result.report, elapsed, result.files + extra)
        _State.nothing_to_tear_down = True


def _stop_on_sigterm(note: str | None = None) -> None:
    """SIGTERM (a batch system's or a service manager's stop) stops the
    command the way Ctrl-C does; ``note`` says what an interrupted command
    kept, after "interrupted"."""
    signal.signal(signal.SIGTERM, interrupt)
    _State.interrupted_note = note


def _print_interrupted() -> None:
    note = _State.interrupted_note
    err_console.print(Text("interrupted" + (f"; {_visible(note)}" if note else "")), soft_wrap=True)


def _interrupted(out: Path) -> str:
    """What a run interrupted before its figures left in ``out``: its
    ``metrics.json`` (written whole) says whether the simulation ended."""
    try:
        complete = read_json_file(out / api.METRICS_FILE).get("complete") is not False
    except RtolabError:
        complete = False
    if complete:
        return (
            f"interrupted after the simulation; its outputs are in {out} "
            "(metrics.json complete; metrics.parquet, plots and report not written)"
        )
    return f"interrupted; outputs so far in {out}, marked incomplete"


#: Files from this size on are tried as scenarios before as sweeps.
LARGE_FILE = 1 << 20


def _is_large(path: str) -> bool:
    try:
        return os.path.getsize(path) >= LARGE_FILE
    except OSError:
        return False


#: A line that can give a TOML file its top-level ``scenario`` key, which
#: every sweep has: a cheap test before Python's TOML reader, which takes
#: minutes on a large scenario (a million apps, 50 MB).
SWEEP_SCENARIO_LINE = re.compile(r"""^[ \t]*(?:scenario|"scenario"|'scenario')[ \t]*=""", re.M)


def _is_sweep_file(path: str) -> bool:
    try:
        text = Path(path).read_text(encoding="utf-8")
        if not SWEEP_SCENARIO_LINE.search(text):
            return False
        # Python's TOML reader costs far more than the text's size on deep
        # nesting: the core's own reader refuses it instead.
        if toml_nesting(text) > MAX_TOML_NESTING:
            return False
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        # Not readable as a sweep: the scenario check says what is wrong.
        return False
    return "scenario" in data and "duration" not in data


def _large_scenario_summary(path: str) -> dict[str, Any] | None:
    """The summary of the scenario in a large file, or ``None`` if it is a
    sweep. Reading 50 MB as TOML takes Python a minute, and sweep files are
    small: the core reads it first."""
    try:
        return api.validate(path)
    except ScenarioError:
        if _is_sweep_file(path):
            return None
        raise


def _sweep_summary(path: str) -> dict[str, Any]:
    from rtolab.sweeps import Sweep

    spec = Sweep.load(path)
    return {
        "sweep": spec.name,
        "runs": len(spec.combinations()) * len(spec.seeds),
        "combinations": len(spec.combinations()),
        "seeds": len(spec.seeds),
        "parameters": list(spec.grid),
    }


@app.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def validate(file: str, as_json: bool) -> None:
    """Check a scenario (or sweep) TOML FILE without running it."""
    with _user_errors():
        summary = _large_scenario_summary(file) if _is_large(file) else None
        if summary is None:
            summary = _sweep_summary(file) if _is_sweep_file(file) else api.validate(file)
    if as_json:
        click.echo(json.dumps(summary))
    else:
        parts = ", ".join(f"{_shown(k)}: {_shown(_scalar(v))}" for k, v in summary.items())
        out_console.print(
            Text.assemble(("ok", "green"), f" {_visible(file)} ({parts})"), soft_wrap=True
        )


def _toml_value(value: Any) -> str:
    """A default as a scenario file writes it; ``None`` (TOML has no null)
    as "unset"."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items())
        return f"{{ {inner} }}" if inner else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)


@list_app.command("policies")
@click.option("--family", help="Only this family: rto, cc or ack.")
@click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON.")
def list_policies(family: str | None, as_json: bool) -> None:
    """List the RTO, congestion-control and ACK policies with their parameters.

    Select one in a host's or app's tcp table of a scenario, e.g.
    rto = { policy = "fixed", rto = "300ms" }; parameters left out take the
    defaults shown. With timelost = true in the same table, every RTO
    policy and Vegas get RTT samples without the MAC retransmission time
    the peer echoes, unless rtt_correction = false (docs/timelost.md).
    """
    from rtolab.catalog import FAMILIES, policies

    if family is not None and family not in FAMILIES:
        raise _bad_input(f"--family: expected one of {', '.join(FAMILIES)}, got {family!r}")
    found = policies(family)
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(p) for p in found]))
        return
    table = Table(title="TCP policies", title_justify="left", show_lines=True)
    for name in ("family", "name", "parameters (defaults)", "description"):
        table.add_column(name)
    for p in found:
        # Text cells: descriptions and values are data, never rich markup.
        parameters = "\n".join(
            f"{k} = {_toml_value(v)}" + (f": {p.meanings[k]}" if k in p.meanings else "")
            for k, v in p.defaults.items()
        )
        table.add_row(Text(p.family), Text(p.name), Text(parameters), Text(p.description))
    out_console.print(table)


def _list_kinds(family: str, as_json: bool) -> None:
    """Print the registered kinds of ``family``: one table per kind with its
    fields, or the catalog as JSON."""
    from rtolab.catalog import kinds

    found = kinds(family)
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(k) for k in found]))
        return
    for k in found:
        # Text, never markup: descriptions hold brackets and backticks.
        title = Text.assemble((f'kind = "{k.kind}"', "bold"), f": {k.description}")
        if not k.fields:
            out_console.print(title, Text("  (no fields)"), soft_wrap=True)
            continue
        table = Table(title=title, title_justify="left", show_lines=True)
        for name in ("field", "type", "unit", "default", "meaning"):
            table.add_column(name)
        for key, f in _field_rows(k.fields):
            default = "required" if f.required else (f.default or "")
            table.add_row(
                Text(key), Text(f.type), Text(f.unit or ""), Text(default), Text(f.meaning)
            )
        out_console.print(table)


def _field_rows(fields: Iterable[Field], prefix: str = "") -> Iterator[tuple[str, Field]]:
    """Each field under its key, then the keys of the table it holds:
    ``signal.speed``, ``ends[].host`` for an array of tables."""
    for f in fields:
        key = prefix + f.name
        yield key, f
        inner = f"{key}[]." if f.type.startswith("array of") else f"{key}."
        yield from _field_rows(f.fields, inner)


_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON.")


@list_app.command("links")
@_JSON_OPTION
def list_links(as_json: bool) -> None:
    """List the link kinds of [[link]] tables with their fields.

    Every link also takes name and kind. Durations are strings with a unit
    ("5ms"), rates too ("10Mbps")."""
    _list_kinds("link", as_json)


@list_app.command("macs")
@_JSON_OPTION
def list_macs(as_json: bool) -> None:
    """List the MACs a broadcast link's mac table selects, with their fields."""
    _list_kinds("mac", as_json)


@list_app.command("apps")
@_JSON_OPTION
def list_apps(as_json: bool) -> None:
    """List the app kinds of [[app]] tables with their fields.

    Every app also takes kind, host and name (default "<kind><index>")."""
    _list_kinds("app", as_json)


@list_app.command("middleboxes")
@_JSON_OPTION
def list_middleboxes(as_json: bool) -> None:
    """List the middlebox kinds of [[middlebox]] tables with their fields.

    Every middlebox also takes kind, host and name (default "<kind><index>")."""
    _list_kinds("middlebox", as_json)


@app.command()
@click.argument("file")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Output directory (default results/sweep/NAME); resumes if it exists.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    help="Local worker processes (default: one per core; 0: no Dask).",
)
@click.option("--scheduler", help="Address of an existing Dask scheduler, e.g. tcp://HOST:8786.")
@click.option("--retry-failed", is_flag=True, help="Run again the runs that failed before.")
@click.option("--report/--no-report", default=True, help="Write report.html at the end.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def sweep(
    file: str,
    out: Path | None,
    workers: int | None,
    scheduler: str | None,
    retry_failed: bool,
    report: bool,
    as_json: bool,
) -> None:
    """Run a parameter grid x seeds on Dask; results in one Parquet dataset.

    FILE is a sweep TOML file: a base scenario, a grid and seeds."""
    from rtolab.sweeps import Sweep, load_results
    from rtolab.sweeps import sweep as run_sweep

    if workers is not None and scheduler is not None:
        raise _bad_input("give --workers or --scheduler, not both")
    _stop_on_sigterm()
    with _user_errors():
        spec = _with_spinner("checking the sweep", lambda: Sweep.load(file), as_json)
        target = out if out is not None else Path("results/sweep") / spec.name
        _State.interrupted_note = (
            f"finished runs kept in {target}; the same command resumes the sweep"
        )
        with _progress(as_json) as progress:
            task = progress.add_task(f"sweep {_shown(spec.name)}", total=None)

            plain = _PlainProgress(f"sweep {_shown(spec.name)}", as_json)

            def on_start(todo: int, total: int) -> None:
                progress.update(task, total=todo)
                plain.start(todo)

            def on_result(row: dict[str, Any], done: int, todo: int) -> None:
                progress.update(task, completed=done)
                plain.advance(row.get("status") != "ok")

            outcome = run_sweep(
                spec,
                target,
                workers=workers,
                scheduler=scheduler,
                retry_failed=retry_failed,
                on_start=on_start,
                on_result=on_result,
            )
        page = None
        if report and outcome.total:
            from rtolab.reports import report as write_report

            page = _with_spinner("writing the report", lambda: write_report(target), as_json)
        if as_json:
            data = outcome.to_dict()
            data["report"] = str(page) if page else None
            click.echo(json.dumps(data))
        else:
            _print_sweep(load_results(target), spec.describe(), outcome.to_dict(), page)
        if outcome.failed:
            raise click.exceptions.Exit(EXIT_RUN_FAILED)


def _warn(message: str) -> None:
    err_console.print(
        Text.assemble(("warning:", "bold yellow"), " ", _shown(message, MAX_ERROR)),
        soft_wrap=True,
    )


def _warn_rejected(rejected: dict[str, str], what: str) -> None:
    """One warning line naming the result files that did not verify."""
    if not rejected:
        return
    names = [f"{name} ({why})" for name, why in sorted(rejected.items())]
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    _warn(f"{len(rejected)} result files did not verify, {what}: {shown}")


def _short_names(keys: list[str]) -> dict[str, str]:
    """Each dotted key by its shortest unique tail (``link.ab.loss`` →
    ``loss``; ``app.sink.goodput_bps`` → ``sink.goodput_bps`` when another
    app has a goodput too)."""
    tails = {k: k.split(".") for k in keys}
    short = {}
    for key in keys:
        parts = tails[key]
        for n in range(1, len(parts) + 1):
            tail = ".".join(parts[-n:])
            clashes = [o for o in keys if o != key and (o == tail or o.endswith("." + tail))]
            if not clashes:
                short[key] = tail
                break
        else:
            short[key] = key
    return short


#: Most metrics in the sweep summary printed at the end of ``rtolab sweep``
#: (all of them are in the report and results.parquet).
SWEEP_TABLE_METRICS = 3
#: Most runs listed by name as unfinished or failed.
SWEEP_LISTED_RUNS = 8


def _header(name: str) -> Text:
    """A column header on several short lines (one per word of the dotted
    name), so that many columns fit side by side."""
    return Text("\n".join(_shown(w, 24) for w in re.split(r"[._]", name) if w))


def _aggregate_cell(aggregate: Any, finished: int, metric: str) -> Text:
    """Mean over the finished runs, their range below it, and how many had
    a value when not all did; or why there is none (the counts next to it,
    and the list of runs below the table, say more)."""
    if aggregate.n == 0:
        return Text("none\nfinished" if not finished else "not\nmeasured")
    lines = [human(metric, aggregate.mean)]
    if aggregate.n > 1:
        lines.append(f"{human(metric, aggregate.low)}..\n{human(metric, aggregate.high)}")
    if aggregate.n < finished:
        lines.append(f"(n={aggregate.n})")
    return Text("\n".join(lines))


def sweep_summary_renderables(results: Any, spec: Mapping[str, Any], console: Console) -> list[Any]:
    """The summary of a sweep's results as printed: one row per cell of the
    grid with n = runs that finished their workload / runs planned, the
    unfinished and failed runs counted (and then named), and key metrics as
    mean and min..max over the finished runs. Column names are shortened
    and explained below the table; a piped output is plain ASCII."""
    from rich import box

    from rtolab import sweeps

    grid = spec.get("grid") if isinstance(spec.get("grid"), dict) else None
    seeds = spec.get("seeds")
    planned = len(seeds) if isinstance(seeds, list) else None
    metrics = sweeps.summary_metrics(results)[:SWEEP_TABLE_METRICS]
    cells = sweeps.summarize(results, metrics, grid=grid, seeds=planned)
    params = list(cells[0].params) if cells else []
    short = _short_names(params + metrics)
    table = Table(
        title="n = runs finished/planned; mean and min..max over finished runs",
        title_justify="left",
        box=box.SQUARE if console.is_terminal else box.ASCII,
        show_lines=True,
    )
    for name in params:
        table.add_column(_header(short[name]), justify="right")
    for name in ("n", "unfin", "fail"):
        table.add_column(name, justify="right")
    for name in metrics:
        table.add_column(_header(short[name]), justify="right")
    for cell in cells:
        row = [_cell(v) for v in cell.params.values()]
        row += [Text(cell.n), Text(str(len(cell.unfinished))), Text(str(len(cell.failed)))]
        row += [_aggregate_cell(cell.metrics[m], len(cell.finished), m) for m in metrics]
        table.add_row(*row)
    shown: list[Any] = [table]
    legend = ["unfin = runs whose workload was not done when they ended; fail = runs failed"]
    legend += [f"{short[k]} = {k}" for k in params + metrics if short[k] != k]
    shown.append(Text("columns:\n" + "\n".join(f"  {_visible(x)}" for x in legend)))

    def named(cell: Any, seed: int) -> str:
        values = ", ".join(f"{short[k]}={_shown(_scalar(v), 20)}" for k, v in cell.params.items())
        return f"{values}, seed {seed}" if values else f"seed {seed}"

    unfinished = [
        f"  {named(c, seed)}: {_shown(apps, 40)} not done"
        for c in cells
        for seed, apps in c.unfinished.items()
    ]
    failed = [
        f"  {named(c, seed)}: {_shown(error, 50)}"
        for c in cells
        for seed, error in c.failed.items()
    ]
    for title, lines in (
        (
            "unfinished runs (workload not done when the run ended; left out of the means)",
            unfinished,
        ),
        ("failed runs", failed),
    ):
        if lines:
            more = len(lines) - SWEEP_LISTED_RUNS
            tail = [f"  and {more} more (see the report)"] if more > 0 else []
            shown.append(Text("\n".join([f"{title}:", *lines[:SWEEP_LISTED_RUNS], *tail])))
    return shown


def _print_whole(renderable: Any) -> None:
    """Prints on stdout; piped or redirected, as wide as it needs, so that
    no cell of a table is wrapped into lines a script cannot read."""
    console = out_console
    if not console.is_terminal:
        width = Console(width=10_000).measure(renderable).maximum
        console = Console(highlight=False, width=max(width, console.width))
    console.print(renderable)


def _print_sweep(
    results: Any, spec: Mapping[str, Any], outcome: dict[str, Any], page: Path | None
) -> None:
    _warn_rejected(outcome.get("redone", {}), "their runs ran again")
    out_console.print(
        Text.assemble(
            (f"{outcome['total']} runs", "bold"),
            f": {len(outcome['ran'])} ran ({len(outcome['failed'])} failed), "
            f"{len(outcome['skipped'])} already done; "
            f"{outcome['wall_s']:.1f} s on {outcome['workers']} workers",
        )
    )
    if len(results):
        for renderable in sweep_summary_renderables(results, spec, out_console):
            out_console.print(renderable)
    out_console.print(Text(f"results: {_visible(str(outcome['results']))}"), soft_wrap=True)
    if page is not None:
        out_console.print(Text(f"report: {_visible(str(page))}"), soft_wrap=True)


@app.command()
@click.argument("target", required=False)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("results/reproduce"),
    help="Output directory.",
)
@click.option("--report/--no-report", default=True, help="Write report.html at the end.")
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    help="Seeds per configuration, for experiments that take it.",
)
@click.option(
    "--duration",
    type=_Duration(minimum=1.0),
    help="The measured phase (e.g. of sending), for experiments that take it: 60s, or seconds.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    help="Local Dask workers for experiments run in parallel (default: one per core; 0: no Dask).",
)
@click.option(
    "--full",
    is_flag=True,
    help="The full design, for experiments whose default is reduced (uip-rto readings).",
)
@click.option(
    "--traces",
    "all_traces",
    is_flag=True,
    help="Keep every trace family of every run (default: those the analysis reads).",
)
@click.option(
    "--capture",
    is_flag=True,
    help="Keep every run's captures (default: those the experiment's tables are).",
)
@click.option(
    "--keep-seeds",
    type=_Seeds(),
    help="Keep every trace family and the captures of the runs with these seeds only "
    "(e.g. 1,3-5); with --traces or --capture, only that.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def reproduce(
    target: str | None,
    out: Path,
    report: bool,
    seeds: int | None,
    duration: float | None,
    workers: int | None,
    full: bool,
    all_traces: bool,
    capture: bool,
    keep_seeds: tuple[int, ...] | None,
    as_json: bool,
) -> None:
    """Run every registered experiment of a system and report on them.

    TARGET is a system (e.g. foundation), SYSTEM/EXPERIMENT, or all; omit it
    to list the experiments.

    By default each run keeps its report and the trace families its
    experiment's analysis reads, and the report's figures' families in the
    run they are drawn from; the bridge and the foundation keep their
    captures. --traces and --capture keep every family and every capture of
    every run, --keep-seeds of the runs with the seeds given:

        rtolab reproduce uip-rto --keep-seeds 1,2
    """
    from rtolab import experiments as registry

    _stop_on_sigterm(f"finished runs kept in {out}; the same command resumes")
    with _user_errors():
        if target is None:
            found = registry.experiments()
            if as_json:
                click.echo(
                    json.dumps(
                        [
                            {
                                "system": e.system,
                                "name": e.name,
                                "title": e.title,
                                "runs": len(e.runs()),
                            }
                            for e in found
                        ]
                    )
                )
                return
            table = Table(title="registered experiments", title_justify="left")
            for name in ("system", "experiment", "runs", "title"):
                table.add_column(name)
            for e in found:
                table.add_row(Text(e.system), Text(e.name), str(len(e.runs())), Text(e.title))
            out_console.print(table)
            out_console.print("run one with: rtolab reproduce SYSTEM (or all)")
            return
        options = {"seeds": seeds, "duration": duration, "full": full or None}
        # Unknown names and options fail here, before any output.
        registry.check_options(registry.select(target), options)
        plain = _PlainProgress(f"reproduce {_shown(target)}", as_json)
        with _progress(as_json) as progress:
            task = progress.add_task(f"reproduce {_shown(target)}", total=None)

            def on_start(total: int) -> None:
                progress.update(task, total=total)
                plain.start(total)

            def on_result(record: Any) -> None:
                progress.advance(task)
                plain.advance(record.status != "ok")

            outcome = registry.reproduce(
                target,
                out,
                on_start=on_start,
                on_result=on_result,
                options=options,
                workers=workers,
                kept=registry.Kept(
                    # --keep-seeds alone: both, for those seeds.
                    traces=all_traces or (keep_seeds is not None and not capture),
                    captures=capture or (keep_seeds is not None and not all_traces),
                    seeds=keep_seeds,
                ),
            )
        page = None
        if report:
            from rtolab.reports import report as write_report

            sections: dict[str, tuple[float, float]] = {}
            t0, cpu0 = time.perf_counter(), registry.cpu_seconds()
            page = _with_spinner(
                "writing the report", lambda: write_report(out, times=sections), as_json
            )
            outcome.record_report(
                (time.perf_counter() - t0, registry.cpu_seconds() - cpu0), sections
            )
        if as_json:
            data = outcome.to_dict()
            data["report"] = str(page) if page else None
            click.echo(json.dumps(data, default=str))
        else:
            table = Table(title=Text(f"reproduce {_shown(target)}"), title_justify="left")
            columns = ("experiment", "runs", "failed", "checks", "failed checks", "wall s", "CPU s")
            for name in columns:
                table.add_column(name, justify="right")
            for key in dict.fromkeys(f"{r.system}/{r.experiment}" for r in outcome.runs):
                runs = [r for r in outcome.runs if f"{r.system}/{r.experiment}" == key]
                checks = outcome.checks.get(key, [])
                timing = outcome.times.get(key, registry.Timing())
                table.add_row(
                    Text(_shown(key)),
                    str(len(runs)),
                    str(sum(r.status != "ok" for r in runs)),
                    str(len(checks)),
                    str(sum(not c.passed for c in checks)),
                    f"{timing.wall_s:.1f}",
                    f"{timing.cpu_s:.1f}",
                )
            out_console.print(table)
            verdicts = {True: ("holds", "green"), False: ("does not hold", "yellow")}
            for key, claims in outcome.claims.items():
                for claim in claims:
                    word, style = verdicts.get(claim.holds, ("cannot tell", ""))
                    line = f" {_visible(key)}: {_visible(claim.statement)}: {_visible(claim.ours)}"
                    out_console.print(Text.assemble((word, style), line))
            for key, check in outcome.failed_checks:
                detail = f" {_visible(key)}: {_visible(check.name)} ({_visible(check.detail)})"
                out_console.print(Text.assemble(("FAIL", "red"), detail), soft_wrap=True)
            if page is not None:
                out_console.print(Text(f"report: {_visible(str(page))}"), soft_wrap=True)
        if outcome.failed or outcome.failed_checks:
            raise click.exceptions.Exit(EXIT_RUN_FAILED)


@app.command(name="report")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Where to write the page (default DIRECTORY/report.html).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def report_command(directory: Path, out: Path | None, as_json: bool) -> None:
    """Turn a run, a sweep or a reproduction into one self-contained HTML page.

    DIRECTORY is the output directory of a run, a sweep or a reproduction."""
    from rtolab.reports import kind_of
    from rtolab.reports import report as write_report

    rejected: dict[str, str] = {}
    with _user_errors():
        if not directory.is_dir():
            raise RtolabError(f"{directory}: no such directory")
        kind = kind_of(directory)
        if kind == "sweep":
            from rtolab.sweeps import read_results

            rejected = read_results(directory).rejected
        page = _with_spinner("writing the report", lambda: write_report(directory, out), as_json)
    # Left out of the page's counts and tables, and said so here as well.
    _warn_rejected(rejected, "left out of the report")
    if as_json:
        data = {"kind": kind, "report": str(page), "bytes": page.stat().st_size}
        if kind == "sweep":
            data["rejected"] = rejected
        click.echo(json.dumps(data))
    else:
        out_console.print(
            Text.assemble(("wrote", "green"), f" {_visible(str(page))} ({kind} report)"),
            soft_wrap=True,
        )


@app.command(name="compare")
@click.argument("run_capture", metavar="RUN_PCAP")
@click.argument("reference")
@click.option("--align", default="syn", help="Zero of both clocks: syn, first (packet) or none.")
@click.option(
    "--map",
    "mapping",
    multiple=True,
    help="NAME=ADDRESS: the reference's endpoint NAME is the run's ADDRESS (repeatable).",
)
@click.option("--table", help="Which table of a Markdown file: its number or its heading's start.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--markdown", "as_markdown", is_flag=True, help="Print the table and summary as Markdown."
)
@click.option(
    "--summary",
    "summary_only",
    is_flag=True,
    help="Print only the summary (a few lines), not the packet table.",
)
def compare_command(
    run_capture: str,
    reference: str,
    align: str,
    mapping: tuple[str, ...],
    table: str | None,
    as_json: bool,
    as_markdown: bool,
    summary_only: bool,
) -> None:
    """Compare a run's capture with a reference capture, packet by packet.

    RUN_PCAP is a capture of the run (pcap or pcapng); REFERENCE a capture,
    or a CSV or Markdown table of packets.

    Packets match when they go the same way with the same flags, relative
    seq/ack and TCP length; the table shows each pair's time error and the
    packets only one side has. With --summary only the summary: the packets
    matched, the time error and the first divergence (with --json: the
    summary object; with --markdown: the summary list)."""
    from rtolab.comparison import compare

    with _user_errors():
        if as_json and as_markdown:
            raise RtolabError("--json and --markdown: choose one")
        result = compare(
            run_capture, reference, align=align, mapping=list(mapping) or None, table=table
        )
    if as_json:
        click.echo(json.dumps(result.summary if summary_only else result.to_dict()))
        return
    if as_markdown:
        text = result.summary_markdown() if summary_only else result.to_markdown()
        click.echo(text, nl=False)
        return
    if summary_only:
        for line in result.summary_lines():
            out_console.print(Text(_visible(line)), soft_wrap=True)
        return
    _print_comparison(result)


def _print_comparison(result: Any) -> None:
    from rtolab.comparison import SIDE_BY_SIDE_COLUMNS

    summary = result.summary
    table = Table(
        title=Text(f"{_shown(summary['run'])} (run) vs {_shown(summary['reference'])}"),
        title_justify="left",
    )
    for name, justify in SIDE_BY_SIDE_COLUMNS:
        table.add_column(name, justify=justify, no_wrap=name != "note")
    styles = {"matched": "", "only run": "yellow", "only ref": "red"}
    for cells, status in result.side_by_side():
        table.add_row(*(_cell(c) for c in cells), style=styles[status])
    _print_whole(table)
    for line in result.summary_lines():
        out_console.print(Text(_visible(line)), soft_wrap=True)


@app.command()
@click.argument("scenario")
@click.option("--duration", help="Wall-clock time to run: seconds or with a unit.")
@click.option("--out", type=click.Path(path_type=Path), help="Directory for captures and metrics.")
@click.option("--seed", type=click.IntRange(min=0), help="Override the scenario's seed.")
@click.option(
    "--keep-running/--no-keep-running",
    default=False,
    help="Run the whole duration even when the apps are done.",
)
@click.option(
    "--realtime/--no-realtime",
    default=True,
    help="Schedule the emulator thread as real-time (SCHED_FIFO).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def emulate(
    scenario: str,
    duration: str | None,
    out: Path | None,
    seed: int | None,
    keep_running: bool,
    realtime: bool,
    as_json: bool,
) -> None:
    """Run a scenario's links in real time between network namespaces (needs root).

    SCENARIO is an emulation scenario TOML file (scenarios/emu-*).

    Hosts with ``stack = "linux"`` are network namespaces with the kernel's
    TCP; ``stack = "rtolab"`` hosts run the rtolab engine and
    ``stack = "smoltcp"`` hosts smoltcp, inside the emulator. The emulator
    prints how to run any program inside a host while it runs.
    """
    from rtolab._rtolab import emulate_main

    with _user_errors():
        if not Path(scenario).is_file():
            raise RtolabError(f"scenario: no such file: {scenario}")
        if out is not None:
            # A link at --out followed once; what an earlier run left cleared.
            out = outdir.open_root(out)
            text = Path(scenario).read_text(encoding="utf-8")
            api.prepare_out_dir(out, text, simulated=False)
            outdir.write_text(out, api.SCENARIO_FILE, text)
    argv = ["emulate", scenario]
    if duration is not None:
        argv += ["--duration", duration]
    if out is not None:
        argv += ["--out", str(out)]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if keep_running:
        argv.append("--keep-running")
    if not realtime:
        argv.append("--no-realtime")
    if as_json:
        argv.append("--json")
    sys.stdout.flush()
    sys.stderr.flush()
    # The emulator is part of the extension module and runs in this
    # process: the installed package needs no other binary. It handles
    # Ctrl-C itself, removing its namespaces before it returns.
    code = emulate_main(argv)
    if code:
        raise click.exceptions.Exit(code)


def main() -> None:
    """Entry point of the ``rtolab`` console script."""
    try:
        # Not standalone: usage errors come back here, to be printed on one
        # line like every other error instead of in a box.
        code = app(standalone_mode=False, prog_name="rtolab")
    except click.exceptions.NoArgsIsHelpError as err:
        # `rtolab` or `rtolab list` alone: the help, as asked for.
        click.echo(err.ctx.get_help())
        sys.exit(0)
    except click.Abort:
        _print_interrupted()
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as err:
        # Usage errors (a bad flag value, an unknown command) and the like.
        _print_error(_usage_message(err))
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        _print_interrupted()
        sys.exit(EXIT_INTERRUPTED)
    except Exception as err:
        # Anything that is not a user error is a bug of ours: still one line
        # unless the user asked for the traceback.
        if _State.debug:
            raise
        _print_error(f"{type(err).__name__}: {err} (rerun with --debug)", "internal error:")
        sys.exit(EXIT_RUN_FAILED)
    code = code if isinstance(code, int) else 0
    if _State.nothing_to_tear_down:
        # Leave without the interpreter's teardown of the modules click
        # and rich loaded: freeing them one by one takes a tenth of
        # a second or more, a good share of a short `rtolab run`.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _usage_message(err: click.ClickException) -> str:
    """A usage error on one line, with the command it concerns."""
    ctx = getattr(err, "ctx", None)
    command = getattr(ctx, "command_path", None) or "rtolab"
    return f"{command}: {err.format_message()} (see {command} --help)"


__all__ = ["app", "main"]
