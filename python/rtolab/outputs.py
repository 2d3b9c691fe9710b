"""A run with every output the ``rtolab run`` command writes.

:func:`rtolab.api.run` runs the core and keeps what it writes (pcaps,
traces, ``metrics.json``, the scenario). The files drawn from those
(``metrics.parquet``, written by the core, the plots and ``report.html``,
which need pandas, matplotlib and the report writer) sit above
:mod:`rtolab.api`; this module, above them all, writes them. ``rtolab.run``
and the ``rtolab run`` command both come here, so that the API and the
command write the same files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rtolab import api
from rtolab.api import Result, ScenarioSource
from rtolab.runreport import write_metrics_parquet

#: The table of every metric of a run, next to ``metrics.json``.
METRICS_TABLE = "metrics.parquet"


def write_outputs(result: Result, *, plots: bool = True, report: bool = False) -> list[Path]:
    """Writes the files drawn from a run's results into its directory:
    ``metrics.parquet``, the standard figures in ``plots/`` (when ``plots``
    and the run wrote traces) and ``report.html`` (when ``report``).
    Returns the files written; nothing for a run without a directory."""
    if result.out_dir is None:
        return []
    table = result.out_dir / METRICS_TABLE
    write_metrics_parquet(result.report, table)
    written = [table]
    if plots and (result.trace_dir is not None or result.trace_file is not None):
        from rtolab.plots import plot_run

        written += plot_run(result)
    if report:
        from rtolab.reports import report as write_report

        written.append(write_report(result.out_dir))
    return written


def run(
    scenario: ScenarioSource,
    *,
    seed: int | None = None,
    out: str | os.PathLike[str] | None = None,
    duration: float | None = None,
    traces: bool | str = "summary",
    trace_families: Sequence[str] | None = None,
    trace_format: str = "parquet",
    plots: bool = True,
    report: bool = False,
    max_events: int | None = None,
    max_wall: float | None = None,
    max_output: int | None = None,
    max_stall_events: int | None = None,
) -> Result:
    """Run a scenario in the simulator, writing what ``rtolab run`` writes.

    The arguments are :func:`rtolab.api.run`'s, plus: with ``out``, the
    run's directory also gets ``metrics.parquet``, the standard figures in
    ``out/plots/`` (``plots=False`` leaves them out) and, with
    ``report=True``, ``report.html``, exactly as the command writes them;
    ``Result.files`` lists them all. ``traces`` defaults to the command's
    level, ``"summary"`` (``"full"`` adds the per-packet events); figures
    are drawn from the traces, so a run with ``traces="none"`` gets none,
    as with the command. Without ``out``,
    the run's files go to a temporary directory and nothing more is drawn.
    """
    result = api.run(
        scenario,
        seed=seed,
        out=out,
        duration=duration,
        traces=traces,
        trace_families=trace_families,
        trace_format=trace_format,
        max_events=max_events,
        max_wall=max_wall,
        max_output=max_output,
        max_stall_events=max_stall_events,
    )
    result.files.extend(write_outputs(result, plots=plots, report=report))
    return result
