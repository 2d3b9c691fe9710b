"""Running the ``rtolab`` command line as a user does, for the tests."""

from __future__ import annotations

import os
import subprocess
import sys


def rtolab_cli(
    *args: str, columns: int | None = None, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m rtolab ARGS`` with its output captured; never raises on
    a non-zero exit. ``columns`` sets the terminal width rich lays tables
    out for (a wide one keeps cells from wrapping mid-word)."""
    env = dict(os.environ)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "rtolab", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
