"""What a reproduction keeps of its runs: by default only the trace families
its analysis reads and no captures its tables no longer need, with the same
numbers as when every trace family and capture is kept (``rtolab reproduce
--traces --capture``). On the quickest plan: ACK holding's paths experiment,
reduced, whose tables come from the traces and, after the runs, from the
captures."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rtolab import experiments as registry
from rtolab.cli import app
from rtolab.experiments import ack_holding
from rtolab.frames import trace_families

TARGET = "ack-holding/paths"
TABLES = ("paths.csv", "paths-acks.csv")


@pytest.fixture(scope="module")
def quick() -> Iterator[None]:
    saved = os.environ.get("RTOLAB_ACK_HOLDING_QUICK")
    os.environ["RTOLAB_ACK_HOLDING_QUICK"] = "1"
    yield
    if saved is None:
        del os.environ["RTOLAB_ACK_HOLDING_QUICK"]
    else:
        os.environ["RTOLAB_ACK_HOLDING_QUICK"] = saved


def _reproduce(out: Path, *flags: str) -> None:
    done = CliRunner().invoke(
        app,
        ["reproduce", TARGET, "--out", str(out), "--workers", "0", "--no-report", *flags],
    )
    assert done.exit_code == 0, done.output


def _reproduce_timelost(out: Path, *flags: str) -> None:
    # In a process of its own: its figures of runs this short warn of empty
    # legends, which the test session turns into errors.
    import subprocess
    import sys

    args = ["--seeds", "1", "--duration", "5", "--workers", "0", "--no-report", *flags]
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "reproduce", "timelost", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def reduced(quick: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reduced")
    _reproduce(out)
    return out


@pytest.fixture(scope="module")
def everything(quick: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("everything")
    _reproduce(out, "--traces", "--capture")
    return out


def _run_dirs(out: Path) -> list[Path]:
    found = sorted(p.parent for p in (out / ack_holding.SYSTEM).glob("paths/*/metrics.json"))
    assert found, out
    return found


def _verdicts(out: Path) -> tuple[object, object]:
    manifest = json.loads((out / registry.MANIFEST).read_text(encoding="utf-8"))
    return manifest["checks"], manifest["claims"]


def test_the_same_numbers_with_and_without_full_traces(reduced: Path, everything: Path) -> None:
    for name in TABLES:
        ours = (reduced / ack_holding.SYSTEM / name).read_bytes()
        assert ours == (everything / ack_holding.SYSTEM / name).read_bytes(), name
        # A table with rows: the comparison is of numbers, not of two empty files.
        assert ours.count(b"\n") > 1, name
    assert _verdicts(reduced) == _verdicts(everything)


def test_by_default_no_full_traces_and_no_captures(reduced: Path) -> None:
    experiment = registry.select(TARGET)[0]
    recorded = set(registry.Kept().families(experiment) or ())
    assert "packet_sent" not in recorded
    for run_dir in _run_dirs(reduced):
        assert not list(run_dir.glob("*.pcap")), run_dir
        assert set(trace_families(run_dir / "traces")) <= recorded, run_dir
    manifest = json.loads((reduced / registry.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["kept"] == {"traces": False, "captures": False, "seeds": None}


def test_traces_and_capture_keep_every_family_and_the_captures(everything: Path) -> None:
    for run_dir in _run_dirs(everything):
        assert (run_dir / "fixed.pcap").stat().st_size > 0, run_dir
        families = set(trace_families(run_dir / "traces"))
        # Per-packet families that no analysis of the experiment reads.
        assert {"packet_sent", "packet_enqueued"} <= families, run_dir
    outcome = registry.Reproduction.load(everything)
    assert outcome.kept == registry.Kept(traces=True, captures=True)


def test_the_report_says_what_was_kept(reduced: Path) -> None:
    import html

    from rtolab.reports import reproduction_report

    page = reproduction_report(reduced)
    assert html.escape(registry.Kept().sentence()) in page
    assert "--traces" in page and "--capture" in page
    # Beside the experiment's own figures, one run's standard figures (of
    # five runs, each its own scenario): drawing them took most of the time.
    assert "Figures of one run" in page
    assert page.count("<figcaption>time sequence — ") == 1


def test_a_run_done_with_fewer_outputs_runs_again_with_more(
    quick: None, reduced: Path, tmp_path: Path
) -> None:
    import shutil

    out = tmp_path / "again"
    shutil.copytree(reduced, out)
    _reproduce(out, "--capture")
    for run_dir in _run_dirs(out):
        assert (run_dir / "fixed.pcap").is_file(), run_dir


def test_the_same_tables_when_run_again_into_the_same_directory(
    quick: None, reduced: Path, tmp_path: Path
) -> None:
    # Its captures were removed after the checks read them: the runs are
    # done again rather than checked without them.
    import shutil

    out = tmp_path / "again"
    shutil.copytree(reduced, out)
    _reproduce(out)
    for name in TABLES:
        ours = (out / ack_holding.SYSTEM / name).read_bytes()
        assert ours == (reduced / ack_holding.SYSTEM / name).read_bytes(), name


def test_timelost_keeps_one_run_s_trace_tables_with_the_same_tables(tmp_path: Path) -> None:
    # Its tables come from each run's summary: after the checks only the
    # first run's trace tables stay (the report draws its figures), and the
    # tables are those of a reproduction that keeps every trace.
    from rtolab.experiments import timelost

    default, full = tmp_path / "default", tmp_path / "full"
    _reproduce_timelost(default)
    _reproduce_timelost(full, "--traces")
    runs = sorted((default / timelost.SYSTEM / "vegas").iterdir())
    first = timelost.runs()[0].label
    assert [r.name for r in runs if (r / "traces").is_dir()] == [first]
    assert all((r / "traces").is_dir() for r in (full / timelost.SYSTEM / "vegas").iterdir())
    tables = ("runs.csv", "throughput.csv", "claims.csv")
    for name in tables:
        ours = (default / timelost.SYSTEM / name).read_bytes()
        assert ours == (full / timelost.SYSTEM / name).read_bytes(), name
    # Run again into the same directory: the runs are kept, their tables
    # read from the summaries again.
    _reproduce_timelost(default)
    for name in tables:
        ours = (default / timelost.SYSTEM / name).read_bytes()
        assert ours == (full / timelost.SYSTEM / name).read_bytes(), name


# ----- the standard figures' families in one run; uIP's traces after its checks -----


def _tables(directory: Path) -> dict[str, bytes]:
    found = {p.name: p.read_bytes() for p in sorted(directory.glob("*.csv"))}
    assert found, directory
    return found


def test_fades_figure_families_only_in_the_run_the_report_draws(
    quick: None, tmp_path: Path
) -> None:
    # Its tables come from the runs' reports: no trace at all but in the
    # first run, whose standard figures the report shows.
    default, full = tmp_path / "default", tmp_path / "full"
    args = ["reproduce", "ack-holding/fades", "--workers", "0", "--no-report"]
    for out, flags in ((default, ()), (full, ("--traces",))):
        done = CliRunner().invoke(app, [*args, "--out", str(out), *flags])
        assert done.exit_code == 0, done.output
    runs = sorted(p.parent for p in (default / ack_holding.SYSTEM / "fades").glob("*/metrics.json"))
    experiment = registry.select("ack-holding/fades")[0]
    first = experiment.runs()[0].label
    assert len(runs) > 1
    for run_dir in runs:
        families = set(trace_families(run_dir / "traces"))
        if run_dir.name == first:
            assert families and families <= set(registry.RUN_FIGURE_FAMILIES), families
        else:
            assert not (run_dir / "traces").exists(), run_dir
    assert _tables(default / ack_holding.SYSTEM) == _tables(full / ack_holding.SYSTEM)
    assert _verdicts(default) == _verdicts(full)


UIP = ["reproduce", "uip-rto/schemes", "--seeds", "2", "--duration", "30", "--workers", "0"]


def _uip(out: Path, *flags: str) -> dict[str, object]:
    done = CliRunner().invoke(app, [*UIP, "--out", str(out), "--no-report", "--json", *flags])
    assert done.exit_code == 0, done.output
    return dict(json.loads(done.output))


@pytest.fixture(scope="module")
def uip_default(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uip-default")
    _uip(out)
    return out


def _uip_runs(out: Path) -> dict[str, Path]:
    return {p.parent.name: p.parent for p in sorted(out.glob("uip-rto/schemes/*/metrics.json"))}


def test_uip_keeps_the_traces_its_figures_read_with_the_same_tables(
    uip_default: Path, tmp_path: Path
) -> None:
    from rtolab.api import Result
    from rtolab.experiments import uip_rto

    full = tmp_path / "full"
    _uip(full, "--traces")
    assert _tables(uip_default / "uip-rto") == _tables(full / "uip-rto")
    assert _verdicts(uip_default) == _verdicts(full)
    runs = _uip_runs(uip_default)
    read = set(uip_rto.traces_read({k: Result.load(v) for k, v in runs.items()}))
    first = uip_rto.runs()[0].label
    assert 0 < len(read) < len(runs) - 1
    with_traces = {name for name, path in runs.items() if (path / "traces").is_dir()}
    assert with_traces == read | {first}
    for name in read - {first}:
        # The analysis' families only, not the standard figures'.
        assert set(trace_families(runs[name] / "traces")) == set(uip_rto.TRACE_FAMILIES)
    assert all((p / "traces").is_dir() for p in _uip_runs(full).values())


def test_a_run_whose_traces_the_figures_read_runs_again_if_they_went(
    uip_default: Path, tmp_path: Path
) -> None:
    # As when a reproduction with more seeds picks a run of an earlier one
    # whose traces were removed after its checks.
    import shutil

    from rtolab.experiments import uip_rto

    out = tmp_path / "again"
    shutil.copytree(uip_default, out)
    first = uip_rto.runs()[0].label
    gone = {n for n, p in _uip_runs(out).items() if n != first and (p / "traces").is_dir()}
    assert gone
    for name in gone:
        shutil.rmtree(out / "uip-rto" / "schemes" / name / "traces")
    outcome = _uip(out)
    ran = {r["label"] for r in outcome["runs"] if not r["reused"]}  # type: ignore[union-attr]
    assert ran == gone
    assert all((out / "uip-rto" / "schemes" / n / "traces").is_dir() for n in gone)
    assert _tables(out / "uip-rto") == _tables(uip_default / "uip-rto")


def test_keep_seeds_keeps_everything_of_those_runs_only(uip_default: Path, tmp_path: Path) -> None:
    from rtolab.experiments import uip_rto

    out = tmp_path / "seed2"
    outcome = _uip(out, "--keep-seeds", "2")
    assert outcome["kept"] == {"traces": True, "captures": True, "seeds": [2]}
    first = uip_rto.runs()[0].label
    for name, path in _uip_runs(out).items():
        families = set(trace_families(path / "traces"))
        if name.endswith("-seed2"):
            # Every family: per-packet ones no analysis reads among them.
            assert "packet_sent" in families, name
        elif name != first:
            assert "packet_sent" not in families, name
    assert _tables(out / "uip-rto") == _tables(uip_default / "uip-rto")
    page_sentence = registry.Kept(traces=True, captures=True, seeds=(2,)).sentence()
    assert "the runs with seed 2 kept every trace family and its captures" in page_sentence


def test_keep_seeds_refuses_what_is_not_a_list_of_seeds(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        app, ["reproduce", "foundation", "--out", str(tmp_path), "--keep-seeds", "1,x"]
    )
    assert done.exit_code == 2
    assert "--keep-seeds" in done.output and "'x'" in done.output
    assert not (tmp_path / registry.MANIFEST).exists()
