"""Scenario text and the core's check of it, shared by the API and the
scenario builder.

:mod:`rtolab.api` runs scenarios given as :class:`rtolab.Scenario` objects,
so it imports :mod:`rtolab.scenario`; a :class:`rtolab.Scenario` in turn
loads files and validates itself. What both need lives here, below both,
so that neither imports the other in both directions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rtolab import _rtolab
from rtolab.errors import ScenarioError, native_errors


def shipped_scenarios() -> dict[str, str]:
    """The scenarios shipped with rtolab: name → TOML text."""
    return dict(_rtolab.shipped_scenarios())


def source_text(source: str | os.PathLike[str]) -> str:
    """The TOML text ``source`` stands for: a string spanning several lines
    or containing ``=`` is TOML itself; any other string or path names a
    file, or failing that a shipped scenario (``"p2p-cbr"``)."""
    if isinstance(source, os.PathLike) or not _looks_like_toml(source):
        path = Path(source)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            shipped = shipped_scenarios()
            name = str(source).removesuffix(".toml")
            if not isinstance(source, os.PathLike) and name in shipped:
                return shipped[name]
            raise ScenarioError(
                "scenario",
                f"no such file: {path} (shipped scenarios: {', '.join(sorted(shipped))})",
            ) from None
        except IsADirectoryError:
            raise ScenarioError("scenario", f"{path} is a directory, not a file") from None
        except UnicodeDecodeError as err:
            raise ScenarioError("scenario", f"{path} is not UTF-8 text: {err.reason}") from None
        except OSError as err:
            raise ScenarioError("scenario", f"cannot read {path}: {err.strerror}") from None
    return source


def _looks_like_toml(text: str) -> bool:
    return "\n" in text or "=" in text


def validate_text(text: str) -> dict[str, Any]:
    """The core's summary of the scenario in ``text``; raises
    :class:`rtolab.ScenarioError` naming the offending field."""
    with native_errors():
        summary: dict[str, Any] = json.loads(_rtolab.validate_scenario(text))
    return summary


def duration_seconds(text: str) -> float:
    """A duration written as in scenario files (``"20s"``, ``"500ms"``), in
    seconds; raises :class:`rtolab.ScenarioError` saying what is wrong."""
    with native_errors():
        return _rtolab.parse_duration(text) / 1e9
