"""Errors raised by rtolab, mapped in one place from the native module's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rtolab import _rtolab


class RtolabError(Exception):
    """Base class of every error rtolab raises on purpose."""


class ScenarioError(RtolabError, ValueError):
    """A scenario is invalid. ``path`` names the offending field, e.g. ``link[0].rate``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class RunError(RtolabError, OSError):
    """A run failed after it started (for example an output file could not be written)."""


class RunStopped(RunError):
    """A limit stopped a run before its end (``stopped_by``: ``max_events``,
    ``max_wall``, ``max_output`` or ``stalled``). The outputs written so far
    are valid and ``metrics.json`` says ``"complete": false``."""

    def __init__(self, stopped_by: str, message: str) -> None:
        super().__init__(message)
        self.stopped_by = stopped_by


class CaptureError(RtolabError, ValueError):
    """A capture file could not be read. ``path`` names the file."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class SweepError(RtolabError, ValueError):
    """A sweep file (or a sweep's output directory) is invalid. ``path``
    names the offending entry, e.g. ``grid."link.0.loss"[1]``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class ExperimentError(RtolabError, ValueError):
    """An unknown experiment or system was asked for."""


@contextmanager
def native_errors() -> Iterator[None]:
    """Re-raise the native module's exceptions as rtolab's own."""
    try:
        yield
    except _rtolab.ScenarioError as err:
        path, message = err.args if len(err.args) == 2 else ("", str(err))
        raise ScenarioError(str(path), str(message)) from None
    except _rtolab.CaptureError as err:
        path, message = err.args if len(err.args) == 2 else ("", str(err))
        raise CaptureError(str(path), str(message)) from None
    except _rtolab.RunStopped as err:
        stopped_by, message = err.args if len(err.args) == 2 else ("", str(err))
        raise RunStopped(str(stopped_by), str(message)) from None
    except _rtolab.RunError as err:
        raise RunError(str(err)) from None
