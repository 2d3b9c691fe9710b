"""Type stubs of the native module built from crates/py."""

__version__: str
#: Events in a row at one instant of simulated time that stop a run as stalled.
DEFAULT_STALL_EVENTS: int

class ScenarioError(ValueError):
    """A scenario failed validation; ``args`` is ``(field_path, message)``."""

class RunError(OSError):
    """A run failed after it started; files written so far are kept."""

class RunStopped(RunError):
    """A limit stopped a run before its end; ``args`` is ``(limit, message)``."""

class CaptureError(ValueError):
    """A capture file could not be read; ``args`` is ``(file_path, message)``."""

def validate_scenario(text: str) -> str:
    """Checks a scenario given as TOML text; returns a JSON summary of it."""

def run(
    text: str,
    seed: int | None = None,
    out_dir: str | None = None,
    duration_s: float | None = None,
    write_traces: bool = True,
    max_events: int | None = None,
    max_wall_s: float | None = None,
    max_output: int | None = None,
    max_stall_events: int | None = None,
) -> str:
    """Runs a scenario given as TOML text and returns the run report as JSON;
    the limits stop it early (``RunStopped``), and so does a signal handler
    that raises (Ctrl-C), whose exception is raised here."""

def default_scenario() -> str:
    """The TOML text of the embedded default scenario."""

def read_capture(path: str) -> str:
    """Decodes a capture file; returns its packets as JSON columns."""

def shipped_scenarios() -> list[tuple[str, str]]:
    """The scenario files shipped with rtolab, as (name, TOML text) pairs."""

def policy_catalog() -> str:
    """Every registered RTO, congestion-control and ACK policy as JSON: a list
    of ``{"family", "name", "description", "defaults"}`` objects."""
