"""Builds the API reference of the ``rtolab`` Python package from its
docstrings into this folder (or the folder given as the first argument).

    python3 docs/api/build.py [OUTPUT_DIR]

Needs the package installed (``pip install '.[test]'`` brings pdoc).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pdoc
import pdoc.render

#: The modules users touch, in reading order.
MODULES = [
    "rtolab",
    "rtolab.api",
    "rtolab.scenario",
    "rtolab.catalog",
    "rtolab.frames",
    "rtolab.comparison",
    "rtolab.runreport",
    "rtolab.sweeps",
    "rtolab.plots",
    "rtolab.pacing",
    "rtolab.reports",
    "rtolab.experiments",
    "rtolab.errors",
    "rtolab.cli",
]


def build(output: Path) -> list[Path]:
    """Writes one HTML page per module (plus an index) into ``output``."""
    output.mkdir(parents=True, exist_ok=True)
    pdoc.render.configure(docformat="restructuredtext", show_source=False, search=False)
    pdoc.pdoc(*MODULES, output_directory=output)
    return sorted(output.rglob("*.html"))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    pages = build(target)
    print(f"wrote {len(pages)} pages to {target}")
