"""HTML reports: self-contained pages that a real browser loads cleanly."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

import rtolab
from rtolab.experiments import reproduce


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("Chromium is not installed (the test command installs it)")


def load_in_browser(page: Path, shot: Path) -> list[str]:
    """Loads ``page`` in headless Chromium, screenshots it to ``shot``, and
    returns the console messages the page produced."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,1600",
            f"--screenshot={shot}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.is_file(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def colours(shot: Path) -> int:
    with Image.open(shot) as image:
        found = image.convert("RGB").getcolors(maxcolors=1 << 20)
    return len(found) if found is not None else 1 << 20


def assert_self_contained(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    sources = re.findall(r'src="([^"]*)"', text)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources), sources[:3]
    # Links only within the page, each to an element that is there.
    for target in re.findall(r'href="([^"]*)"', text):
        assert target.startswith("#") and f'id="{target[1:]}"' in text, target
    assert "<script" not in text
    return text


def test_experiment_figures_are_embedded_in_the_page(tmp_path: Path) -> None:
    from rtolab.experiments import figure_html

    png = tmp_path / "sys" / "figures" / "f.png"
    png.parent.mkdir(parents=True)
    Image.new("RGB", (4, 3), "white").save(png)
    html = figure_html(png, tmp_path)
    (source,) = re.findall(r'src="([^"]*)"', html)
    assert source.startswith("data:image/png;base64,")
    assert "sys/figures/f.png" in html  # where the file is, in the caption


def test_browser_check_catches_console_errors(tmp_path: Path) -> None:
    """The check below is not vacuous: a page that logs errors is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>console.error('boom'); missing();</script>")
    messages = load_in_browser(bad, tmp_path / "bad.png")
    assert any("boom" in m for m in messages) and any("Uncaught" in m for m in messages)


def test_run_report_loads_in_a_browser(bulk_result: rtolab.Result, tmp_path: Path) -> None:
    page = rtolab.report(bulk_result.out_dir, tmp_path / "run.html")
    text = assert_self_contained(page)
    assert text.count("<img") >= 5  # throughput, drops, time-sequence, RTO, cwnd, bars
    assert "scenario <b>p2p-bulk</b>, seed <b>1</b>" in text
    for pcap in bulk_result.pcaps:
        assert pcap.name in text
    assert 'name = "p2p-bulk"' in text  # the scenario itself
    shot = tmp_path / "run.png"
    assert load_in_browser(page, shot) == []
    assert colours(shot) > 50


def test_sweep_report_loads_in_a_browser(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        'scenario = "p2p-cbr"\nseeds = 2\n[set]\nduration = "0.5s"\n'
        '[grid]\n"link.ab.loss" = [0.0, 0.1]\n'
    )
    rtolab.sweep(spec, tmp_path / "out", workers=0)
    page = rtolab.report(tmp_path / "out")
    assert page == tmp_path / "out" / "report.html"
    text = assert_self_contained(page)
    assert "link.ab.loss" in text and "results.parquet" in text
    assert text.count("<tr>") >= 4 + 1  # a row per run at least
    shot = tmp_path / "sweep.png"
    assert load_in_browser(page, shot) == []
    assert colours(shot) > 50


def test_reproduction_report_loads_in_a_browser(tmp_path: Path) -> None:
    outcome = reproduce("foundation/determinism", tmp_path / "repro")
    page = rtolab.report(tmp_path / "repro")
    text = assert_self_contained(page)
    assert "foundation/determinism" in text and text.count('class="pass"') == len(
        outcome.checks["foundation/determinism"]
    )
    assert "seed</th>" in text and "default-a/" in text  # runs listed with their captures
    assert '<a href="#verdicts">' in text and '<a href="#foundation-determinism">' in text
    shot = tmp_path / "repro.png"
    assert load_in_browser(page, shot) == []
    assert colours(shot) > 50
