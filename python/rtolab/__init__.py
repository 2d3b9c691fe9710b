"""rtolab: TCP over constrained links, simulated and emulated.

The entry points are :func:`run` and :func:`validate`; the ``rtolab`` command
wraps them.
"""

from rtolab._rtolab import __version__
from rtolab.api import Result, default_scenario, run, validate
from rtolab.errors import RtolabError, RunError, ScenarioError

__all__ = [
    "Result",
    "RtolabError",
    "RunError",
    "ScenarioError",
    "__version__",
    "default_scenario",
    "run",
    "validate",
]
