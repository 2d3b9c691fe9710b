"""The Python API: run and validate scenarios, get results as Python objects."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtolab import _rtolab
from rtolab.errors import ScenarioError, native_errors

ScenarioSource = str | os.PathLike[str]


def scenario_text(scenario: ScenarioSource) -> str:
    """Return the TOML text of ``scenario``: a path to a file, or TOML text itself.

    A string is taken as TOML when it spans several lines or contains ``=``;
    otherwise it must name an existing file.
    """
    if isinstance(scenario, os.PathLike) or not _looks_like_toml(scenario):
        path = Path(scenario)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ScenarioError("scenario", f"no such file: {path}") from None
        except UnicodeDecodeError as err:
            raise ScenarioError("scenario", f"{path} is not UTF-8 text: {err.reason}") from None
        except OSError as err:
            raise ScenarioError("scenario", f"cannot read {path}: {err.strerror}") from None
    return scenario


def _looks_like_toml(text: str) -> bool:
    return "\n" in text or "=" in text


def default_scenario() -> str:
    """The TOML text of the embedded default scenario (what ``rtolab run`` runs)."""
    return _rtolab.default_scenario()


def validate(scenario: ScenarioSource) -> dict[str, Any]:
    """Check a scenario without running it; returns a short summary of what it holds.

    Raises :class:`rtolab.ScenarioError` naming the offending field.
    """
    text = scenario_text(scenario)
    with native_errors():
        summary: dict[str, Any] = json.loads(_rtolab.validate_scenario(text))
    return summary


@dataclass(frozen=True)
class Result:
    """What one run produced: its report and the files it wrote."""

    report: dict[str, Any]
    out_dir: Path | None
    files: list[Path] = field(default_factory=list)

    @property
    def seed(self) -> int:
        """The seed the run used (the scenario's, or the one given to :func:`run`)."""
        return int(self.report["seed"])

    @property
    def pcaps(self) -> list[Path]:
        """Every pcap file the run wrote, one per capture point."""
        return [f for f in self.files if f.suffix == ".pcap"]

    @property
    def trace_file(self) -> Path | None:
        """The JSON-lines trace file, when traces were written."""
        return next((f for f in self.files if f.name == "traces.jsonl"), None)


def run(
    scenario: ScenarioSource,
    *,
    seed: int | None = None,
    out: str | os.PathLike[str] | None = None,
    duration: float | None = None,
    traces: bool = True,
) -> Result:
    """Run a scenario in the simulator.

    ``scenario`` is a path to a TOML file or TOML text. ``seed`` overrides the
    scenario's seed, ``duration`` (seconds) its duration. With ``out`` set,
    pcaps, traces and metrics are written there. The GIL is released while the
    simulation runs.
    """
    text = scenario_text(scenario)
    if seed is not None and not 0 <= seed < 2**64:
        raise ScenarioError("seed", f"must be an integer in [0, 2^64), got {seed}")
    out_dir = Path(out) if out is not None else None
    if out_dir is not None:
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ScenarioError("out", f"cannot create {out_dir}: {err.strerror}") from None
    with native_errors():
        report: dict[str, Any] = json.loads(
            _rtolab.run(
                text,
                seed=seed,
                out_dir=str(out_dir) if out_dir is not None else None,
                duration_s=duration,
                write_traces=traces,
            )
        )
    files = [Path(f) for f in report.get("files", [])]
    return Result(report=report, out_dir=out_dir, files=files)
