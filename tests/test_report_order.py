"""Reports lead with the answer: verdicts, summary tables and figures first,
long lists of runs collapsed at the end; a sweep's default figures fit what
it varies and measures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rtolab
from rtolab import plots, sweeps
from rtolab.experiments import reproduce


def test_sweep_figures_follow_the_parameters_and_metrics(loss_delay_sweep: Path) -> None:
    results = rtolab.load_results(loss_delay_sweep)
    figures = dict(plots.sweep_figures(results))
    # One transfer: a goodput-fairness figure would put every point at 1.0.
    assert "goodput-fairness" not in figures
    assert "bulk-goodput_bps" in figures and "bulk-completion_time_ns" in figures
    ax = figures["bulk-goodput_bps"].axes[0]
    assert ax.get_xlabel() == "link.ab.delay"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5ms", "50ms"]
    # One line per loss that has finished runs, its points at the mean of
    # the finished runs; the lossy combinations, where none finished, said so.
    assert ax.get_legend_handles_labels()[1] == ["link.ab.loss = 0.0"]
    cells = sweeps.summarize(results, ["app.bulk.goodput_bps"])
    means = [c.metrics["app.bulk.goodput_bps"].mean for c in cells if c.params["link.ab.loss"] == 0]
    drawn = ax.containers[0].lines[0].get_ydata()
    # Drawn in the axis' unit, Mbit/s.
    assert "Mbit/s" in ax.get_ylabel()
    assert list(drawn) == pytest.approx([m / 1e6 for m in means])
    assert "2 combinations with no finished run" in ax.get_title()
    for fig in figures.values():
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert not any("no latency data" in t for t in texts)


def test_sweep_report_puts_summary_and_figures_before_the_runs(loss_delay_sweep: Path) -> None:
    page = rtolab.report(loss_delay_sweep).read_text(encoding="utf-8")
    summary = page.index("<h2>Summary by parameters</h2>")
    figures = page.index("<h2>Figures</h2>")
    runs = page.index("<details><summary><b>Runs (8)</b>")
    assert summary < figures < page.index("<h2>Grid</h2>") < runs
    assert page.rindex("<figure") < runs


def test_reproduction_report_leads_with_the_verdicts(tmp_path: Path) -> None:
    outcome = reproduce("foundation/determinism", tmp_path / "repro")
    page = rtolab.report(tmp_path / "repro").read_text(encoding="utf-8")
    verdicts = page.index('<h2 id="verdicts">Verdicts</h2>')
    assert verdicts < page.index("<figure") < page.index('<h2 id="runs">Runs</h2>')
    checks = outcome.checks["foundation/determinism"]
    assert len(re.findall(r'class="pass">pass<', page)) == sum(c.passed for c in checks)
    # The list of runs is collapsed, its captures named by directory.
    runs = page[page.index('<h2 id="runs">Runs</h2>') :]
    assert runs.startswith('<h2 id="runs">Runs</h2>\n<details><summary>')
    assert 'class="scroll nowrap"' in runs and ".pcap" not in runs


def test_a_run_without_receptions_still_gets_its_figures(tmp_path: Path) -> None:
    # Two seconds of the mesh: the tree is still forming, nothing is received.
    result = rtolab.run("mesh-uip", duration=2.0, out=tmp_path)
    ax = plots.throughput_over_time(result)
    assert [t.get_text() for t in ax.texts] == ["no packets received"]
    assert (tmp_path / "plots" / "throughput.png") in result.files
