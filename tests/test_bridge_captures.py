"""The bridge model against the three captures the study printed (its
Ethernet side, transcribed in the bridge reference): the same packets in the
same order, with the same direction, flags, relative sequence and
acknowledgement numbers and length, each within 10 % or 100 ms (whichever is
larger) of the published time, both aligned on the SYN. Every slot phase
tried (seeds 1-5) must match."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import rtolab
from rtolab.experiments import bridge
from rtolab.frames import read_capture

UP, DOWN = "app->user", "user->app"

# (time s, direction, flags, seq, ack, TCP length); seq/ack relative, None
# where the capture does not print them.
CAPTURE_A = [
    (0.000579, UP, "SYN", 0, None, 0),
    (0.001024, DOWN, "SYN,ACK", 0, 1, 0),
    (0.139693, UP, "ACK", 1, 1, 0),
    (1.860508, UP, "PSH,ACK", 1, 1, 1024),
    (1.861212, DOWN, "PSH,ACK", 1, 1025, 1024),
    (2.758809, DOWN, "PSH,ACK", 1, 1025, 1024),
    (3.850816, UP, "PSH,ACK", 1, 1, 1024),
    (3.861312, DOWN, "ACK", 1025, 1025, 0),
    (4.202049, UP, "FIN,ACK", 1025, 1025, 0),
    (4.202545, DOWN, "ACK", 1025, 1026, 0),
    (4.202651, DOWN, "FIN,ACK", 1025, 1026, 0),
    (4.412743, UP, "ACK", 1026, 1026, 0),
]
CAPTURE_B = [
    (0.000630, UP, "SYN", 0, None, 0),
    (0.001072, DOWN, "SYN,ACK", 0, 1, 0),
    (0.139762, UP, "ACK", 1, 1, 0),
    (5.872002, UP, "PSH,ACK", 1, 1, 1024),
    (5.872726, DOWN, "PSH,ACK", 1, 1025, 1024),
    (7.126788, UP, "FIN,ACK", 1025, 1025, 0),
    (7.127341, DOWN, "ACK", 1025, 1026, 0),
    (7.127436, DOWN, "FIN,ACK", 1025, 1026, 0),
    (7.337531, UP, "ACK", 1026, 1026, 0),
]
CAPTURE_C = [
    (0.000606, UP, "SYN", None, None, 0),
    (0.001128, DOWN, "SYN,ACK", None, None, 0),
    (0.001253, UP, "ACK", None, None, 0),
    (0.001338, UP, "PSH,ACK", None, None, 1024),
    (0.002062, DOWN, "PSH,ACK", None, None, 1024),
    (0.002302, UP, "FIN,ACK", None, None, 0),
    (0.002657, DOWN, "ACK", None, None, 0),
    (0.002678, DOWN, "FIN,ACK", None, None, 0),
    (0.002801, UP, "ACK", None, None, 0),
]

SEEDS = (1, 2, 3, 4, 5)


def packets(capture: Path) -> list[tuple[float, str, str, int, int, int]]:
    """The TCP packets of a run's Ethernet capture as the reference lists
    them: time from the SYN, direction, flags, and sequence and
    acknowledgement numbers relative to each side's initial one."""
    frame = read_capture(capture)
    frame = frame[frame["protocol"] == "tcp"]
    isn: dict[str, int] = {}
    rows = []
    start = None
    for row in frame.to_dict("records"):
        direction = UP if row["src"] == bridge.APPLIANCE else DOWN
        other = DOWN if direction == UP else UP
        flags = str(row["flags"])
        if "SYN" in flags:
            isn.setdefault(direction, int(row["seq"]))
        if start is None:
            start = float(row["time_s"])
        seq = (int(row["seq"]) - isn[direction]) % 2**32
        ack = (int(row["ack"]) - isn[other]) % 2**32 if other in isn and "ACK" in flags else None
        rows.append(
            (float(row["time_s"]) - start, direction, flags, seq, ack, int(row["payload_len"]))
        )
    return rows


def differences(run: list, reference: list) -> list[str]:
    """What keeps ``run`` from matching ``reference`` packet by packet."""
    problems = []
    if len(run) != len(reference):
        problems.append(f"{len(run)} packets, the capture has {len(reference)}")
    t0 = reference[0][0]
    for i, (got, want) in enumerate(zip(run, reference, strict=False)):
        for name, g, w in zip(
            ("direction", "flags", "seq", "ack", "length"), got[1:], want[1:], strict=True
        ):
            if w is not None and g != w:
                problems.append(f"packet {i + 1}: {name} {g}, the capture has {w}")
        published = want[0] - t0
        allowed = max(0.1, 0.1 * published)
        if abs(got[0] - published) > allowed:
            problems.append(
                f"packet {i + 1}: at {got[0]:.3f} s, the capture at {published:.3f} s "
                f"(allowed ±{allowed:.3f} s)"
            )
    return problems


def run_capture(scenario: str, seed: int, out: Path) -> list:
    result = rtolab.run(scenario, seed=seed, out=out, traces=False)
    assert result.out_dir is not None
    return packets(result.out_dir / "ethernet.pcap")


@pytest.mark.parametrize("seed", SEEDS)
def test_capture_a_original_configuration(seed: int, tmp_path: Path) -> None:
    run = run_capture(bridge.exchange_scenario(11.2, 1080, False, None), seed, tmp_path)
    assert differences(run, CAPTURE_A) == []


@pytest.mark.parametrize("seed", SEEDS)
def test_capture_b_initial_rto_5s(seed: int, tmp_path: Path) -> None:
    run = run_capture(bridge.exchange_scenario(11.2, 1080, False, 5.0), seed, tmp_path)
    assert differences(run, CAPTURE_B) == []


def test_capture_c_without_the_nfc_link(tmp_path: Path) -> None:
    run = run_capture(bridge.ethernet_exchange_scenario(), 1, tmp_path)
    assert differences(run, CAPTURE_C) == []


def test_the_comparison_sees_a_difference() -> None:
    """The comparison is not vacuous: a lost FIN, a late packet and a
    changed flag are each reported."""
    late = [list(p) for p in CAPTURE_B]
    late[-1][0] += 1.0
    assert differences([tuple(p) for p in late], CAPTURE_B)
    assert differences(CAPTURE_B[:-1], CAPTURE_B)
    flagged = [list(p) for p in CAPTURE_B]
    flagged[5][2] = "ACK"
    assert differences([tuple(p) for p in flagged], CAPTURE_B)
    assert differences(CAPTURE_B, CAPTURE_B) == []


def test_the_transcribed_tables_are_in_time_order() -> None:
    for table in (CAPTURE_A, CAPTURE_B, CAPTURE_C):
        times = pd.Series([p[0] for p in table])
        assert times.is_monotonic_increasing
