"""Running ns-2 and reading its traces.

`ensure_ns()` installs Debian's ns-2.35 (`ns2`) with apt when `ns` is not on
PATH, as the test command does for tshark. `run()` writes a Tcl script into
a directory and runs `ns` there.
Traces are ns-2's "new" wireless format (`$ns use-newtrace`): one event per
line, `-flag value` pairs, which `parse_trace()` turns into a table with
the columns the check reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd

#: Trace file the generated scripts write, inside the run's directory.
TRACE = "trace.tr"

#: The columns `parse_trace` keeps: event (s, r, d, f), time, node, layer
#: (AGT, RTR, MAC, IFQ), drop reason, packet type (tcp, ack, cbr, RTS,
#: CTS, ACK, DSDV message...), length, unique id, TCP sequence and ACK
#: numbers, the MAC Duration field (µs) and the node's position.
COLUMNS = (
    "event",
    "t",
    "node",
    "layer",
    "reason",
    "type",
    "len",
    "uid",
    "seq",
    "ack",
    "duration",
    "ethertype",
    "x",
    "y",
)


def ensure_ns() -> str:
    """The `ns` binary, installed with apt (Debian's `ns2`, ns-2.35) when it
    is missing."""
    found = shutil.which("ns")
    if found:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "ns2"]):
        subprocess.run(sudo + command, check=True, env=env, stdout=subprocess.DEVNULL)
    found = shutil.which("ns")
    if not found:
        raise SystemExit("ns2-check: apt installed ns2 but `ns` is not on PATH")
    return found


def version(binary: str) -> str:
    """What ns's `ns-version` says (e.g. `2.35`); ns-2.35 prints nothing
    for `ns -version`, so the command goes through its Tcl prompt."""
    done = subprocess.run(
        [binary],
        input="puts [ns-version]\nexit\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    words = done.stdout.split()
    return words[-1] if words else "unknown"


def run(script: str, work: Path, binary: str | None = None) -> Path:
    """Runs `script` (Tcl writing `trace.tr` in its working directory) with
    `binary` (default: `ensure_ns()`) in `work`, which also keeps the
    script (`ns2.tcl`); returns the trace's path."""
    binary = binary or ensure_ns()
    work.mkdir(parents=True, exist_ok=True)
    (work / "ns2.tcl").write_text(script, encoding="utf-8")
    done = subprocess.run(
        [binary, "ns2.tcl"], cwd=work, capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or not (work / TRACE).is_file():
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"ns failed (exit {done.returncode}) in {work}:\n{tail}")
    return work / TRACE


#: Flag of each column in a wireless new-trace line.
_FLAGS = {
    "-t": "t",
    "-Ni": "node",
    "-Nl": "layer",
    "-Nw": "reason",
    "-It": "type",
    "-Il": "len",
    "-Ii": "uid",
    "-Ps": "seq",
    "-Pa": "ack",
    "-Ma": "duration",
    "-Mt": "ethertype",
    "-Nx": "x",
    "-Ny": "y",
}


def parse_line(line: str) -> dict[str, str] | None:
    """One wireless event of a new-format trace line as {column: text};
    `None` for the wired links' lines (they have no `-Nl` layer) and
    anything else."""
    words = line.split()
    if len(words) < 3 or words[0] not in ("s", "r", "d", "f") or "-Nl" not in words:
        return None
    row = {"event": words[0]}
    for i in range(1, len(words) - 1):
        column = _FLAGS.get(words[i])
        if column is not None and column not in row:
            row[column] = words[i + 1]
    return row


def parse_trace(path: Path) -> pd.DataFrame:
    """The wireless events of a new-format ns-2 trace (`COLUMNS`), plus
    the wired links' TCP events in `wired` form: see `parse_wired`."""
    rows = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            row = parse_line(line)
            if row is not None:
                rows.append(row)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for column in ("t", "x", "y"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["duration"] = [int(v, 16) if isinstance(v, str) else -1 for v in frame["duration"]]
    for column in ("node", "len", "uid", "seq", "ack"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").fillna(-1).astype("int64")
    return frame


def parse_wired(path: Path) -> pd.DataFrame:
    """The wired links' events of a trace (ns-2 writes them in its old
    format even with the new wireless one): `event` (+ enqueue, - dequeue,
    r receive, d drop), `t`, `src` and `dst` (the link's ends), `type`
    (tcp, ack), `len`, `seq` (a data segment's number, an ACK's cumulative
    number)."""
    rows = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            words = line.split()
            # event t from to type size flags fid src dst seq uid
            if len(words) != 12 or words[0] not in ("+", "-", "r", "d"):
                continue
            rows.append(
                (
                    words[0],
                    float(words[1]),
                    int(words[2]),
                    int(words[3]),
                    words[4],
                    int(words[5]),
                    int(words[10]),
                )
            )
    return pd.DataFrame(rows, columns=["event", "t", "src", "dst", "type", "len", "seq"])
