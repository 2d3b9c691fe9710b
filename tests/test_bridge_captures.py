"""The bridge model against the three captures the study printed (its
Ethernet side, transcribed in the bridge reference), compared with
``rtolab compare``: every packet matched, in the same order, with the same
direction, flags, relative sequence and acknowledgement numbers and length,
each within 10 % or 100 ms (whichever is larger) of the published time, both
aligned on the SYN. Every slot phase tried (seeds 1-5) must match. The
side-by-side tables in docs/bridge.md are what the documented commands print
now."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import tomllib

import rtolab
from rtolab.comparison import Comparison, compare, read_packets
from rtolab.experiments import bridge

REPO = Path(__file__).resolve().parent.parent
CAPTURES = REPO / "tests" / "data" / "bridge-captures.md"
SCENARIOS = REPO / "scenarios"
DOC = REPO / "docs" / "bridge.md"
SEEDS = (1, 2, 3, 4, 5)
#: The tolerance the calibration promises: 100 ms or 10 % of the time.
ABSOLUTE_S, RELATIVE = 0.1, 0.1

#: Each capture's configuration as `rtolab reproduce bridge` builds it, and
#: the shipped scenario file the doc's commands run.
CONFIGURATIONS = {
    "A": (bridge.exchange_scenario(11.2, 1080, False, None), "bridge.toml"),
    "B": (bridge.exchange_scenario(11.2, 1080, False, 5.0), "bridge-rto-5s.toml"),
    "C": (bridge.ethernet_exchange_scenario(), "bridge-ethernet.toml"),
}


def problems(result: Comparison) -> list[str]:
    """What keeps a comparison from a match within the tolerance."""
    found = [
        f"only in the {side}: no. {row['no']} {row['direction']} {row['flags']} "
        f"at {row['time_s']:.3f} s"
        for side, frame in (("run", result.only_run), ("reference", result.only_reference))
        for row in frame.to_dict("records")
    ]
    found += [
        f"reference no. {row['reference_no']}: {row['error_s'] * 1e3:+.1f} ms off"
        for row in result.outside(ABSOLUTE_S, RELATIVE).to_dict("records")
    ]
    return found


def run_and_compare(choice: str, seed: int, out: Path) -> Comparison:
    result = rtolab.run(CONFIGURATIONS[choice][0], seed=seed, out=out, traces=False)
    assert result.out_dir is not None
    return compare(result.out_dir / "ethernet.pcap", CAPTURES, table=choice)


@pytest.mark.parametrize("seed", SEEDS)
def test_capture_a_original_configuration(seed: int, tmp_path: Path) -> None:
    result = run_and_compare("A", seed, tmp_path)
    assert problems(result) == []
    assert result.summary["compared"] == ["direction", "flags", "seq", "ack", "len"]
    assert result.summary["matched"] == 12


@pytest.mark.parametrize("seed", SEEDS)
def test_capture_b_initial_rto_5s(seed: int, tmp_path: Path) -> None:
    result = run_and_compare("B", seed, tmp_path)
    assert problems(result) == []
    assert result.summary["compared"] == ["direction", "flags", "seq", "ack", "len"]
    assert result.summary["matched"] == 9


def test_capture_c_without_the_nfc_link(tmp_path: Path) -> None:
    result = run_and_compare("C", 1, tmp_path)
    assert problems(result) == []
    # The printed table has no seq/ack column.
    assert result.summary["compared"] == ["direction", "flags", "len"]
    assert result.summary["matched"] == 9


def test_the_comparison_sees_a_difference() -> None:
    """The check is not vacuous: a missing packet, a late packet and a
    changed flag, each made in a copy of capture B, are each reported."""
    reference = read_packets(CAPTURES, table="B")
    assert problems(compare(reference, reference)) == []

    missing = replace(reference, packets=reference.packets[:-1])
    assert any("only in the reference" in p for p in problems(compare(missing, reference)))

    late = replace(reference, packets=list(reference.packets))
    last = late.packets[-1]
    late.packets[-1] = replace(last, time_s=last.time_s + 1.0)
    assert [p for p in problems(compare(late, reference)) if "ms off" in p] == [
        "reference no. 11: +1000.0 ms off"
    ]
    # Within the tolerance: 10 % of the last packet's 7.34 s is 0.73 s.
    close = replace(reference, packets=list(reference.packets))
    close.packets[-1] = replace(last, time_s=last.time_s + 0.7)
    assert problems(compare(close, reference)) == []

    flagged = replace(reference, packets=list(reference.packets))
    flagged.packets[5] = replace(flagged.packets[5], flags="ACK")
    found = problems(compare(flagged, reference))
    assert any("only in the run" in p and "ACK" in p for p in found)
    assert any("only in the reference" in p and "FIN,ACK" in p for p in found)


def test_the_transcribed_tables_are_in_time_order() -> None:
    for choice in CONFIGURATIONS:
        times = [p.time_s for p in read_packets(CAPTURES, table=choice).packets]
        assert times == sorted(times), choice


@pytest.mark.parametrize("choice", sorted(CONFIGURATIONS))
def test_the_shipped_scenarios_are_the_reproductions(choice: str) -> None:
    """The files the doc's commands run describe the run that
    `rtolab reproduce bridge` and the tests above build."""
    built, shipped = CONFIGURATIONS[choice]
    ours = tomllib.loads(built)
    theirs = tomllib.loads((SCENARIOS / shipped).read_text(encoding="utf-8"))
    for scenario in (ours, theirs):
        scenario.pop("name")
        # "120s" and "120.0s" are the same duration.
        scenario["duration"] = float(scenario["duration"].removesuffix("s"))
    assert theirs == ours


# ----- the tables in docs/bridge.md -----

#: A shell block of the doc whose last command is `rtolab compare
#: --markdown`, then that command's output, up to the end marker.
_GENERATED = re.compile(
    r"```sh\n(?P<commands>(?:rtolab [^\n]*\n)+)```\n\n(?P<output>.*?)<!-- end of output -->",
    re.S,
)


def generated_blocks() -> list[tuple[list[str], str]]:
    text = DOC.read_text(encoding="utf-8")
    return [
        (m["commands"].splitlines(), m["output"])
        for m in _GENERATED.finditer(text)
        if "--markdown" in m["commands"]
    ]


def test_the_doc_shows_all_three_captures() -> None:
    tables = [
        re.search(r"--table (\w+)", commands[-1]).group(1)  # type: ignore[union-attr]
        for commands, _ in generated_blocks()
    ]
    assert tables == ["A", "B", "C"]


@pytest.mark.parametrize("index", range(3))
def test_the_doc_tables_are_what_the_commands_print(index: int, tmp_path: Path) -> None:
    """Runs the doc's commands as written (the output directory moved to a
    temporary one) and compares what the last prints with the doc."""
    commands, shown = generated_blocks()[index]
    printed = ""
    for line in commands:
        args = [a.replace("results/", f"{tmp_path}/") for a in shlex.split(line)[1:]]
        done = subprocess.run(
            [sys.executable, "-m", "rtolab", *args],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
        )
        assert done.returncode == 0, (line, done.stderr)
        printed = done.stdout
    assert shown.rstrip("\n") == printed.rstrip("\n")
