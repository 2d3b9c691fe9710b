"""Errors raised by rtolab, mapped in one place from the native module's."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


class ResultError(RtolabError, ValueError):
    """A file that a run, sweep or reproduction wrote is missing, unreadable
    or garbled. ``path`` names the file."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class OutputError(RtolabError, OSError):
    """An output could not be made where it goes (a directory stands where a
    file goes, a directory that holds what no run wrote, no permission).
    ``path`` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class ExperimentError(RtolabError, ValueError):
    """An unknown experiment or system was asked for."""


#: Deepest nesting of TOML that rtolab reads in Python: sweep files and
#: scenarios need a handful of levels. Python's TOML reader builds a table
#: per level of a dotted key and recurses into it, which took 274 MB for
#: 8 000 levels and gigabytes for 50 000 before failing.
MAX_TOML_NESTING = 64

#: Strings and comments of TOML text, whose brackets and dots do not nest.
_TOML_QUOTED = re.compile(
    r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'
)
_TOML_NESTING = re.compile(r"[\[\]{}.\n]")


def toml_nesting(text: str) -> int:
    """An upper bound of how deeply TOML ``text`` nests: open brackets and
    braces plus the dots read so far on the line, outside strings and
    comments. One pass, no parse (a float's dot counts too: a bound)."""
    depth = dots = deepest = 0
    for match in _TOML_NESTING.finditer(_TOML_QUOTED.sub("", text)):
        char = match.group()
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth = max(depth - 1, 0)
        elif char == ".":
            dots += 1
        else:
            dots = 0
        deepest = max(deepest, depth + dots)
    return deepest


def read_file(
    path: str | os.PathLike[str], limit: int | None = None, *, follow: bool = True
) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit`` + 1 of them,
    so that a caller can tell a file over its limit). A FIFO, device or
    socket is refused, as reading one may never end; with ``follow=False``
    a link at ``path`` is refused too: a file read inside an output
    directory, where whoever can write there may have planted a link to a
    secret that a report would then show. Raises :class:`OSError`
    (``strerror`` says why)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP and not follow:
            raise OSError(errno.ELOOP, "a link (not followed in an output directory)") from None
        raise
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return file.read() if limit is None else file.read(limit + 1)


def read_json_file(path: Path, kind: type = dict) -> Any:
    """The JSON value in ``path``, which must be a ``kind`` (an object by
    default); raises :class:`ResultError` naming the file otherwise, whatever
    is wrong with it (missing, a link, not UTF-8, not JSON, nested too
    deeply)."""
    text = ""
    try:
        text = read_file(path, follow=False).decode("utf-8")
        data = json.loads(text)
    except FileNotFoundError:
        raise ResultError(str(path), "no such file") from None
    except OSError as err:
        raise ResultError(str(path), f"cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ResultError(str(path), "garbled: not UTF-8 text") from None
    except json.JSONDecodeError as err:
        where = f"{err.msg} at line {err.lineno}"
        raise ResultError(str(path), f"garbled: not JSON ({where})") from None
    except RecursionError:
        raise ResultError(str(path), "garbled: nested too deeply") from None
    except ValueError:
        # Python reads integers of at most sys.get_int_max_str_digits() digits.
        raise ResultError(str(path), f"garbled: {_long_number(text)}") from None
    if not isinstance(data, kind):
        raise ResultError(str(path), f"garbled: expected a JSON {kind.__name__}")
    return data


def json_field(data: Any, wanted: Callable[[Any], bool]) -> tuple[str, Any] | None:
    """The first value of JSON ``data`` (in the text's order) that is
    ``wanted``, and where: ``apps[2].sent`` (``""`` for ``data`` itself)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if wanted(value):
            return where, value
        # Reversed: the first value of the text comes out first.
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else k, v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


class _TooLong:
    """An integer too long to read, where a JSON text holds one."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _long_number(text: str) -> str:
    """Which field of JSON ``text`` holds an integer of more digits than
    Python reads (``sys.get_int_max_str_digits()``), and how long it is."""
    limit = sys.get_int_max_str_digits()

    def integer(text: str) -> int | _TooLong:
        digits = len(text.lstrip("-"))
        return int(text) if digits <= limit else _TooLong(digits)

    # Read again with such integers kept aside (nested too deeply, it failed before).
    found = json_field(json.loads(text, parse_int=integer), lambda v: isinstance(v, _TooLong))
    if found is None:
        return "a number too long to read"
    where, value = found
    field = f"field {where}: " if where else ""
    return f"{field}an integer of {value.digits} digits, more than the {limit} read"


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
