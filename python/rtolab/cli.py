"""The ``rtolab`` command.

Errors in what the user gave (scenario files, flags) print one line and exit
with status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rtolab import api, plots
from rtolab.errors import RtolabError, RunError, ScenarioError

app = typer.Typer(
    name="rtolab",
    help="TCP over constrained links: simulate, emulate, compare RTO fixes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out_console = Console()
err_console = Console(stderr=True)

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 1


class _State:
    debug = False


@app.callback()
def _options(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
) -> None:
    _State.debug = debug


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn rtolab's errors into one line on stderr and a non-zero exit."""
    try:
        yield
    except (ScenarioError, RunError, RtolabError) as err:
        if _State.debug:
            raise
        code = EXIT_RUN_FAILED if isinstance(err, RunError) else EXIT_BAD_INPUT
        err_console.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
        raise typer.Exit(code) from None


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
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
        " ".join(str(row[k]) for k in ("name", "#") if k in row) or str(i)
        for i, row in enumerate(rows)
    ]
    metrics: list[str] = []
    for row in rows:
        for key, value in row.items():
            if (
                key not in metrics
                and key not in ("name", "#")
                and not isinstance(value, dict | list)
            ):
                metrics.append(key)
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for label in labels:
        table.add_column(label, justify="right")
    for metric in metrics:
        table.add_row(metric, *(_scalar(row.get(metric, "")) for row in rows))
    return table


def _print_summary(report: dict[str, Any], seconds: float, plot_files: list[Path]) -> None:
    out_console.print(
        f"[bold]{report.get('name', 'scenario')}[/]: seed {report.get('seed')}, "
        f"{_scalar(report.get('duration_s', 0.0))} s simulated, "
        f"{report.get('events_processed', 0)} events in {seconds:.2f} s"
    )
    for key in ("links", "apps", "flows"):
        table = _table(key, report.get(key, []))
        if table is not None:
            out_console.print(table)
    files = [Path(f) for f in report.get("files", [])] + plot_files
    if files:
        by_kind: dict[str, list[str]] = {}
        for f in files:
            by_kind.setdefault(_file_kind(f), []).append(str(f))
        for kind, names in by_kind.items():
            out_console.print(f"{kind}: " + ", ".join(names), highlight=False, soft_wrap=True)


def _file_kind(path: Path) -> str:
    if path.suffix == ".pcap":
        return "pcaps"
    if path.suffix == ".png":
        return "plots"
    if path.name.startswith("traces"):
        return "traces"
    return "metrics"


@app.command()
def run(
    scenario: Annotated[
        str | None,
        typer.Argument(help="Scenario TOML file; the embedded default when omitted."),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed.", min=0)] = None,
    out: Annotated[
        Path, typer.Option(help="Directory for pcaps, traces, metrics and plots.")
    ] = Path("results/run"),
    duration: Annotated[
        float | None, typer.Option(help="Override the simulated duration, seconds.")
    ] = None,
    traces: Annotated[bool, typer.Option(help="Write traces.jsonl.")] = True,
    plot: Annotated[bool, typer.Option(help="Draw plots from the traces.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Run one scenario in the simulator and summarise it."""
    with _user_errors():
        source = scenario if scenario is not None else api.default_scenario()
        started = time.perf_counter()
        result = _with_spinner(
            "simulating",
            lambda: api.run(source, seed=seed, out=out, duration=duration, traces=traces or plot),
        )
        elapsed = time.perf_counter() - started
        plot_files = plots.plot_run(result) if plot and result.trace_file else []
        if as_json:
            report = dict(result.report)
            report["plots"] = [str(p) for p in plot_files]
            report["wall_s"] = elapsed
            typer.echo(json.dumps(report))
        else:
            _print_summary(result.report, elapsed, plot_files)


def _with_spinner(label: str, work: Callable[[], api.Result]) -> api.Result:
    """Show a spinner on an interactive terminal while ``work`` runs."""
    if not err_console.is_terminal:
        return work()
    with err_console.status(f"{label}…"):
        return work()


@app.command()
def validate(
    scenario: Annotated[str, typer.Argument(help="Scenario TOML file to check.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Check a scenario file without running it."""
    with _user_errors():
        summary = api.validate(scenario)
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        parts = ", ".join(f"{k}: {_scalar(v)}" for k, v in summary.items())
        out_console.print(f"[green]ok[/] {scenario} ({parts})", highlight=False)


def main() -> None:
    """Entry point of the ``rtolab`` console script."""
    try:
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as err:
        # Anything that is not a user error is a bug of ours: still one line
        # unless the user asked for the traceback.
        if _State.debug:
            raise
        err_console.print(
            f"[bold red]internal error:[/] {type(err).__name__}: {err} (rerun with --debug)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(EXIT_RUN_FAILED)
