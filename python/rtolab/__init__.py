"""rtolab: TCP over constrained links, simulated and emulated.

The entry points are :func:`run` (one scenario → a :class:`Result` with
pandas DataFrames of packets, traces and metrics), :func:`validate`,
:class:`Scenario` (scenarios built in Python), :func:`sweep` (a parameter
grid x seeds on Dask, results in Parquet), :func:`report` (one
self-contained HTML page) and :func:`compare` (a run's capture next to a
reference capture or a published table, packet by packet). Figures are in :mod:`rtolab.plots`;
:func:`policies` lists the TCP policies a profile can select by name. The
``rtolab`` command wraps them all.
"""

from __future__ import annotations

import typing as _typing

from rtolab import _command

# First: the imports below take long enough for a Ctrl-C to arrive in them.
if _command.started_as_command():
    _command.install()

from rtolab._rtolab import __version__
from rtolab.api import (
    Result,
    default_scenario,
    run_metrics,
    shipped_scenarios,
    validate,
)
from rtolab.catalog import Policy, policies
from rtolab.errors import (
    CaptureError,
    ExperimentError,
    OutputError,
    ResultError,
    RtolabError,
    RunError,
    RunStopped,
    ScenarioError,
    SweepError,
)
from rtolab.outputs import run
from rtolab.scenario import App, Capture, Host, Link, Middlebox, Route, Scenario

if _typing.TYPE_CHECKING:
    import os
    from pathlib import Path

    from rtolab.comparison import CompareError, Comparison, compare
    from rtolab.frames import read_capture
    from rtolab.sweeps import Sweep, load_results, sweep

#: Names whose modules (pandas, pyarrow, Dask) are imported on first use,
#: so that ``import rtolab`` and the ``rtolab`` command start quickly: pandas
#: alone takes longer to import than a 16-flow, 60 s simulation takes to run.
_LAZY = {
    "CompareError": "rtolab.comparison",
    "Comparison": "rtolab.comparison",
    "compare": "rtolab.comparison",
    "read_capture": "rtolab.frames",
    "Sweep": "rtolab.sweeps",
    "load_results": "rtolab.sweeps",
    "sweep": "rtolab.sweeps",
}


def __getattr__(name: str) -> _typing.Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rtolab' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The public names only: not the submodules an import leaves behind.
    return sorted(__all__)


def report(directory: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> Path:
    """Writes the self-contained HTML report of a run, sweep or reproduction
    directory and returns its path (see :mod:`rtolab.reports`)."""
    from rtolab.reports import report as write_report

    return write_report(directory, out)


__all__ = [
    "App",
    "Capture",
    "CaptureError",
    "CompareError",
    "Comparison",
    "ExperimentError",
    "Host",
    "Link",
    "Middlebox",
    "OutputError",
    "Policy",
    "Result",
    "ResultError",
    "Route",
    "RtolabError",
    "RunError",
    "RunStopped",
    "Scenario",
    "ScenarioError",
    "Sweep",
    "SweepError",
    "__version__",
    "compare",
    "default_scenario",
    "load_results",
    "policies",
    "read_capture",
    "report",
    "run",
    "run_metrics",
    "shipped_scenarios",
    "sweep",
    "validate",
]
