"""Outputs are never written through a link, and a reused output directory
holds only what its last run wrote.

Every command is run against an output directory where a link stands at
every name the command writes, each pointing at a file (or directory)
outside it; the test then checks that the link's target is untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rtolab
from rtolab import outdir
from rtolab.errors import OutputError

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = REPO / "scenarios"


def rtolab_cli(*args: str, cwd: Path | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "rtolab", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=timeout,
    )


class Bait:
    """A victim file and an empty directory outside the output directory,
    and links to them planted at names in it."""

    def __init__(self, root: Path) -> None:
        self.victim = root / "victim.txt"
        self.victim.write_text("precious")
        self.elsewhere = root / "elsewhere"
        self.elsewhere.mkdir()
        self.planted: list[Path] = []

    def plant(self, out: Path, files: list[str], dirs: list[str] = ()) -> None:
        for name in files:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).unlink(missing_ok=True)
            (out / name).symlink_to(self.victim)
            self.planted.append(out / name)
        for name in dirs:
            path = out / name
            if path.is_dir() and not path.is_symlink():
                outdir.remove(out, name)
            path.unlink(missing_ok=True)
            path.symlink_to(self.elsewhere, target_is_directory=True)
            self.planted.append(path)

    def assert_untouched(self) -> None:
        assert self.victim.read_text() == "precious"
        assert list(self.elsewhere.iterdir()) == []

    def assert_replaced(self) -> None:
        """Every planted name now holds the command's own file or directory."""
        for path in self.planted:
            assert not path.is_symlink(), f"{path} is still a link"
            assert path.exists(), f"{path} was not written"


# ----- the module itself -----


def test_a_link_at_a_file_name_is_replaced_not_followed(tmp_path: Path) -> None:
    bait = Bait(tmp_path)
    out = outdir.open_root(tmp_path / "out")
    bait.plant(out, ["metrics.json"], ["plots"])
    outdir.write_text(out, "metrics.json", "{}")
    outdir.write_bytes(out, "plots/a.png", b"png")
    bait.assert_untouched()
    bait.assert_replaced()
    assert (out / "metrics.json").read_text() == "{}"
    assert (out / "plots" / "a.png").read_bytes() == b"png"


def test_a_directory_where_a_file_goes_is_refused_naming_it(tmp_path: Path) -> None:
    out = outdir.open_root(tmp_path)
    (out / "report.html").mkdir()
    (out / "plots").write_text("a file")
    with pytest.raises(OutputError, match=r"report\.html: is a directory"):
        outdir.write_text(out, "report.html", "page")
    with pytest.raises(OutputError, match="plots: exists and is not a directory"):
        outdir.write_text(out, "plots/a.png", "png")
    assert (out / "report.html").is_dir() and (out / "plots").read_text() == "a file"
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def test_names_outside_the_directory_are_refused(tmp_path: Path) -> None:
    out = outdir.open_root(tmp_path / "out")
    for name in ["../escape.txt", "a/../../escape.txt", str(tmp_path / "escape.txt"), ""]:
        with pytest.raises(OutputError):
            outdir.write_text(out, name, "x")
    assert not (tmp_path / "escape.txt").exists()


def test_a_write_stopped_midway_leaves_the_earlier_file_and_no_temporary(tmp_path: Path) -> None:
    out = outdir.open_root(tmp_path)
    outdir.write_bytes(out, "plots/cwnd.png", b"earlier figure")

    def stopped(file) -> None:
        file.write(b"\x89PNG half a fig")
        raise KeyboardInterrupt  # SIGTERM during plotting, as the command maps it

    with pytest.raises(KeyboardInterrupt):
        outdir.write_with(out, "plots/cwnd.png", stopped)
    assert (out / "plots" / "cwnd.png").read_bytes() == b"earlier figure"
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["cwnd.png"]


def test_a_figure_stopped_while_saving_leaves_no_truncated_png(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    out = outdir.open_root(tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    ax.figure.canvas.print_png = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        outdir.save_figure(fig, out, "plots/rto-rtt.png")
    plt.close(fig)
    assert list((out / "plots").iterdir()) == []


def test_removing_a_tree_removes_links_inside_not_their_targets(tmp_path: Path) -> None:
    bait = Bait(tmp_path)
    out = outdir.open_root(tmp_path / "out")
    (out / "traces" / "deep").mkdir(parents=True)
    (out / "traces" / "deep" / "x").symlink_to(bait.victim)
    (out / "traces" / "dirlink").symlink_to(bait.elsewhere)
    (bait.elsewhere / "keep").write_text("kept")
    outdir.remove(out, "traces")
    assert not (out / "traces").exists()
    assert bait.victim.read_text() == "precious"
    assert (bait.elsewhere / "keep").read_text() == "kept"


# ----- rtolab run -----


def test_the_issue_reproducer_leaves_the_victim_untouched(tmp_path: Path) -> None:
    bait = Bait(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    bait.plant(out, ["metrics.json"])
    done = rtolab_cli("run", str(SCENARIOS / "p2p-cbr.toml"), "--out", str(out), "--no-plot")
    # Not a run's directory, and a name the run writes is taken: refused.
    assert done.returncode == 2, done.stderr
    assert "metrics.json" in done.stderr and "no run wrote" in done.stderr
    bait.assert_untouched()


def test_run_replaces_links_at_every_name_it_writes(tmp_path: Path) -> None:
    bait = Bait(tmp_path)
    out = tmp_path / "out"
    first = rtolab_cli("run", "p2p-cbr", "--out", str(out), "--duration", "1", "--no-plot")
    assert first.returncode == 0, first.stderr
    # An earlier run's directory (its scenario.toml, then its metrics.json,
    # tells), with links at every other name.
    files = ["metrics.json", "metrics.parquet", "report.html", "a-ab.pcap", "b-ab.pcap"]
    for planted in (files, ["scenario.toml"]):
        bait.plant(out, planted, ["traces", "plots"])
        done = rtolab_cli("run", "p2p-cbr", "--out", str(out), "--duration", "1", "--report")
        assert done.returncode == 0, done.stderr
        bait.assert_untouched()
        bait.assert_replaced()
        assert list((out / "plots").glob("*.png"))


def test_run_into_a_linked_output_directory_writes_through_it_once(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "results"
    link.symlink_to(real, target_is_directory=True)
    done = rtolab_cli("run", "p2p-cbr", "--out", str(link), "--duration", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert (real / "metrics.json").is_file() and (real / "a-ab.pcap").is_file()
    # The files are named where they are, below the real directory.
    files = json.loads(done.stdout)["files"]
    assert files and all(Path(f).parent == real.resolve() for f in files if "plots" not in f)


# ----- what a reused directory holds -----


def test_a_reused_directory_holds_only_the_last_runs_outputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    bulk = rtolab.run("p2p-bulk", out=out, duration=1.0)
    assert any(p.name.startswith("tcp") for p in (out / "traces").iterdir())
    assert (out / "plots" / "cwnd.png").is_file()
    bulk_pcaps = {p.name for p in bulk.pcaps}
    # A UDP-only scenario with its captures under other names.
    text = (SCENARIOS / "p2p-cbr.toml").read_text().replace("a-ab.pcap", "cbr-a.pcap")
    cbr = rtolab.run(text, out=out, duration=1.0)
    names = {p.name for p in out.iterdir()}
    assert not (bulk_pcaps - {p.name for p in cbr.pcaps}) & names
    assert "cbr-a.pcap" in names
    assert not any(p.name.startswith("tcp") for p in (out / "traces").iterdir())
    assert not (out / "plots" / "cwnd.png").exists()
    assert {p.name for p in rtolab.Result.load(out).pcaps} == {p.name for p in cbr.pcaps}


def test_a_directory_no_run_wrote_keeps_its_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "figure-1.png").write_bytes(b"mine")
    with pytest.raises(OutputError, match="plots"):
        rtolab.run("p2p-cbr", out=tmp_path, duration=0.5)
    assert (tmp_path / "plots" / "figure-1.png").read_bytes() == b"mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "plots"]
    # Files of other names are no obstacle, and stay.
    (tmp_path / "plots" / "figure-1.png").unlink()
    (tmp_path / "plots").rmdir()
    rtolab.run("p2p-cbr", out=tmp_path, duration=0.5)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_invalid_scenario_leaves_the_earlier_run_alone(tmp_path: Path) -> None:
    rtolab.run("p2p-cbr", out=tmp_path, duration=0.5, plots=False)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(rtolab.ScenarioError):
        rtolab.run(
            (SCENARIOS / "p2p-cbr.toml").read_text().replace("10Mbps", "-5Mbps"), out=tmp_path
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize(
    "name", ["scenario.toml", "metrics.parquet", "report.html", "plots", "traces"]
)
def test_a_capture_named_like_an_output_is_refused_naming_the_field(
    tmp_path: Path, name: str
) -> None:
    text = (SCENARIOS / "p2p-cbr.toml").read_text().replace('"a-ab.pcap"', f'"{name}"')
    path = tmp_path / "s.toml"
    path.write_text(text)
    done = rtolab_cli("validate", str(path))
    assert done.returncode == 2
    assert done.stderr.startswith("error: capture[0].file:"), done.stderr
    assert "the run writes them" in done.stderr


def test_the_message_of_an_interrupt_after_the_simulation_says_it_is_complete(
    tmp_path: Path,
) -> None:
    from rtolab.cli import _interrupted

    rtolab.run("p2p-cbr", out=tmp_path, duration=0.5, plots=False)
    assert "metrics.json complete" in _interrupted(tmp_path)
    assert "marked incomplete" not in _interrupted(tmp_path)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    (tmp_path / "metrics.json").write_text(json.dumps({**metrics, "complete": False}))
    assert "marked incomplete" in _interrupted(tmp_path)


# ----- sweeps, reproductions, reports -----


SWEEP = """
scenario = "p2p-cbr"
seeds = 1
keep_files = true
[set]
duration = "0.5s"
[grid]
"link.ab.loss" = [0.0, 0.1]
"""


def test_sweep_replaces_links_and_resume_clears_killed_runs_temporaries(tmp_path: Path) -> None:
    bait = Bait(tmp_path)
    spec = tmp_path / "sweep.toml"
    spec.write_text(SWEEP)
    out = tmp_path / "out"
    out.mkdir()
    bait.plant(out, ["sweep.json", "base.toml", "results.parquet", "report.html"])
    bait.plant(out, [], ["runs", "files"])
    done = rtolab_cli("sweep", str(spec), "--out", str(out), "--workers", "0")
    assert done.returncode == 0, done.stderr
    bait.assert_untouched()
    bait.assert_replaced()
    # A killed run's temporary, and one of an earlier version's naming.
    stale = [
        out / "runs" / ".0123abcd.parquet.4242.7.tmp",
        out / "runs" / ".0123abcd.parquet.99.tmp",
    ]
    for path in stale:
        path.write_bytes(b"half")
    row = next((out / "runs").glob("*.parquet"))
    bait.plant(out, [f"runs/{row.name}"])
    done = rtolab_cli("sweep", str(spec), "--out", str(out), "--workers", "0")
    assert done.returncode == 0, done.stderr
    assert not any(p.exists() for p in stale)
    bait.assert_untouched()
    assert not row.is_symlink() and row.is_file()


def test_reproduce_replaces_links_at_every_name_it_writes(tmp_path: Path) -> None:
    bait = Bait(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    bait.plant(out, ["reproduce.json", "report.html"], ["foundation"])
    done = rtolab_cli("reproduce", "foundation/determinism", "--out", str(out))
    assert done.returncode == 0, done.stderr
    bait.assert_untouched()
    bait.assert_replaced()
    # Again, with links inside the per-run folders of the first.
    runs = [p for p in (out / "foundation").rglob("metrics.json")]
    assert runs
    bait.plant(out, [str(p.relative_to(out)) for p in runs])
    bait.plant(out, [], [str(runs[0].parent.relative_to(out) / "traces")])
    done = rtolab_cli("reproduce", "foundation/determinism", "--out", str(out))
    assert done.returncode == 0, done.stderr
    bait.assert_untouched()
    bait.assert_replaced()


def test_report_replaces_a_link_at_its_page(tmp_path: Path) -> None:
    bait = Bait(tmp_path)
    run = tmp_path / "run"
    rtolab.run("p2p-cbr", out=run, duration=0.5, plots=False)
    bait.plant(run, ["report.html"])
    bait.plant(tmp_path, ["page.html"])
    for args in (["report", str(run)], ["report", str(run), "--out", str(tmp_path / "page.html")]):
        done = rtolab_cli(*args)
        assert done.returncode == 0, done.stderr
    bait.assert_untouched()
    bait.assert_replaced()


def test_report_does_not_read_a_planted_link(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-value")
    run = tmp_path / "run"
    rtolab.run("p2p-cbr", out=run, duration=0.5, plots=False)
    (run / "scenario.toml").unlink()
    (run / "scenario.toml").symlink_to(secret)
    done = rtolab_cli("report", str(run))
    assert done.returncode == 2
    assert "scenario.toml" in done.stderr and "a link" in done.stderr
    assert not (run / "report.html").exists()
    with pytest.raises(rtolab.ResultError, match="a link"):
        rtolab.Result.load(run)


# ----- compare -----


def test_compare_refuses_a_fifo_instead_of_waiting_on_it(tmp_path: Path, cbr_result) -> None:
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)
    started = time.monotonic()
    done = rtolab_cli("compare", str(cbr_result.pcaps[0]), str(fifo), timeout=60)
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr
    assert time.monotonic() - started < 30


# ----- the emulator (root) -----


def _skip_unless_emulation_possible() -> None:
    if os.geteuid() != 0:
        pytest.skip("emulation needs root (network namespaces)")
    if not Path("/dev/net/tun").exists():
        pytest.skip("emulation needs /dev/net/tun")


def test_emulate_replaces_links_at_its_captures_and_metrics(tmp_path: Path) -> None:
    _skip_unless_emulation_possible()
    bait = Bait(tmp_path)
    scenario = SCENARIOS / "emu-bridge-fixed.toml"
    names = ["metrics.json", "nfc.pcap", "ethernet.pcap"]
    # Straight to the emulator (no clearing by the command first) ...
    from rtolab._rtolab import emulate_main

    direct = tmp_path / "direct"
    direct.mkdir()
    bait.plant(direct, names)
    assert emulate_main(["emulate", str(scenario), "--out", str(direct), "--json"]) == 0
    # ... and through the command, into an earlier run's directory.
    out = tmp_path / "out"
    out.mkdir()
    (out / "scenario.toml").write_text(scenario.read_text())
    bait.plant(out, names)
    done = rtolab_cli("emulate", str(scenario), "--out", str(out), "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    bait.assert_untouched()
    bait.assert_replaced()
