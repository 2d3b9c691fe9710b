"""Type stubs of the native module built from crates/py."""

__version__: str

class ScenarioError(ValueError):
    """A scenario failed validation; ``args`` is ``(field_path, message)``."""

class RunError(OSError):
    """A run failed after it started; files written so far are kept."""

def validate_scenario(text: str) -> str: ...
def run(
    text: str,
    seed: int | None = None,
    out_dir: str | None = None,
    duration_s: float | None = None,
    write_traces: bool = True,
) -> str: ...
def default_scenario() -> str: ...
