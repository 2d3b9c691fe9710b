"""Preload of the local Dask workers that sweeps and reproductions start.

A worker closing under a task (the sweep was stopped) logs errors and
``CommClosedError`` tracebacks about connections its scheduler closed first;
they say nothing to whoever stopped the sweep, so a closing worker logs
nothing. (Ctrl-C itself never reaches a worker: see ``sweeps._stops_held``.)
"""

from __future__ import annotations

import logging
from typing import Any


def dask_setup(worker: Any) -> None:
    """Called by Dask in each worker process as the worker starts."""
    from distributed.core import Status

    running = {Status.init, Status.starting, Status.running, Status.paused}

    def open_for_logs(record: logging.LogRecord) -> bool:
        return worker.status in running

    # Dask's own handler (shared by its and tornado's loggers), and Python's
    # handler of last resort, which asyncio's messages reach.
    for handler in [*logging.getLogger("distributed").handlers, logging.lastResort]:
        if handler is not None:
            handler.addFilter(open_for_logs)
