"""What the ``rtolab`` command sets up before anything else is imported.

Importing rtolab and the command's libraries takes a fifth of a second or
more, long enough for a Ctrl-C or SIGTERM to arrive in it. The command ends
on either with one line and status 130, from its first line of Python on;
a library import of rtolab changes nothing.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import TracebackType

#: Exit status of a command stopped by Ctrl-C or SIGTERM (128 + SIGINT).
EXIT_INTERRUPTED = 130


def interrupt(signum: int, frame: object) -> None:
    """A signal handler that stops the command the way Ctrl-C does."""
    raise KeyboardInterrupt


def started_as_command() -> bool:
    """Whether this process is the ``rtolab`` command starting: its console
    script, or ``python -m rtolab`` (whose ``sys.argv[0]`` is ``-m`` while
    the package is imported)."""
    if sys.argv[:1] == ["-m"]:
        argv = getattr(sys, "orig_argv", [])
        return "-m" in argv and argv[argv.index("-m") + 1 : argv.index("-m") + 2] == ["rtolab"]
    return bool(sys.argv) and Path(sys.argv[0]).name == "rtolab"


def _excepthook(
    kind: type[BaseException], value: BaseException, traceback: TracebackType | None
) -> None:
    if not issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, traceback)
        return
    # Raised outside the command's own handling (while modules import):
    # nothing is written yet, nothing to tear down.
    sys.stdout.flush()
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def install() -> None:
    """SIGTERM stops the command as Ctrl-C does, and a Ctrl-C that no code
    of the command handles yet ends it with one line."""
    signal.signal(signal.SIGTERM, interrupt)
    sys.excepthook = _excepthook
