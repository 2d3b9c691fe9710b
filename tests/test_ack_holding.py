"""ACK holding: the study's experiment, reduced, end to end; its scenario
builder's errors; and tshark's view of the captures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rtolab.experiments import ack_holding

QUICK = {"RTOLAB_ACK_HOLDING_QUICK": "1"}


def planned(cells: Callable[[], list[ack_holding.Cell]]) -> int:
    """How many runs the reduced plan has."""
    saved = os.environ.get("RTOLAB_ACK_HOLDING_QUICK")
    os.environ.update(QUICK)
    try:
        return len(cells())
    finally:
        if saved is None:
            del os.environ["RTOLAB_ACK_HOLDING_QUICK"]
        else:
            os.environ["RTOLAB_ACK_HOLDING_QUICK"] = saved


@pytest.fixture(scope="module")
def reproduction(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reproduce")
    done = subprocess.run(
        # With the captures, which tshark reads below.
        [
            sys.executable,
            "-m",
            "rtolab",
            "reproduce",
            "ack-holding",
            "--out",
            str(out),
            "--capture",
            "--json",
        ],
        env={**os.environ, **QUICK},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_runs_table_has_every_planned_run_and_the_mechanism_shows(reproduction: Path) -> None:
    runs = pd.read_csv(reproduction / "ack-holding" / "runs.csv")
    assert len(runs) == planned(ack_holding.main_cells)
    assert list(runs.columns) == list(ack_holding.RUN_COLUMNS)
    for case in ack_holding.CASES:
        rows = runs[runs["case"] == case].set_index("scheme")
        assert rows.loc["reno", "rto_expirations"] > 0
        assert rows.loc["ack-holding", "rto_expirations"] == 0
        assert rows.loc["ack-holding", "fast_retransmits"] == 0
        assert rows.loc["ack-holding", "packets_delivered"] > rows.loc["reno", "packets_delivered"]
        # The mobile comes back to full rate in a bounded time.
        assert rows.loc["ack-holding", "time_to_full_rate_s"] < 10
    holding = runs[runs["scheme"].isin(list(ack_holding.SEARCHES))]
    assert holding["duplicate_acks_max"].max() <= 2


def test_cwnd_and_figures_are_written(reproduction: Path) -> None:
    base = reproduction / "ack-holding"
    cwnd = pd.read_csv(base / "cwnd.csv")
    assert set(cwnd["case"]) == set(ack_holding.CASES)
    assert {"reno", "ack-holding", "freeze"} <= set(cwnd["scheme"])
    # Plain Reno's window collapses to one segment after a timeout.
    reno = cwnd[(cwnd["case"] == "A") & (cwnd["scheme"] == "reno")]
    assert reno["cwnd_bytes"].min() <= 1460
    for name in ("cwnd", "schedule-final-rto", "schedule-paced-gaps", "sensitivity"):
        png = base / "figures" / f"{name}.png"
        assert png.stat().st_size > 10_000, name
    manifest = json.loads((reproduction / "reproduce.json").read_text())
    failed = [c for cs in manifest["checks"].values() for c in cs if not c["passed"]]
    assert not failed
    report = (reproduction / "report.html").read_text()
    assert "runs.csv" in report and "sensitivity.csv" in report


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_tshark_sees_no_third_duplicate_ack_with_ack_holding(reproduction: Path) -> None:
    pcaps = sorted((reproduction / "ack-holding" / "outages").glob("*ack-holding*/fixed.pcap"))
    assert pcaps
    for pcap in pcaps:
        done = subprocess.run(
            [
                "tshark",
                "-r",
                str(pcap),
                "-Y",
                "ip.src == 10.0.1.2 && tcp.analysis.duplicate_ack_num",
                "-T",
                "fields",
                "-e",
                "tcp.analysis.duplicate_ack_num",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        numbers = [int(x) for x in done.stdout.split()]
        assert max(numbers, default=0) <= 2, pcap
        malformed = subprocess.run(
            ["tshark", "-r", str(pcap), "-Y", "_ws.malformed"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert malformed.stdout.strip() == "", pcap


def test_sensitivity_table(reproduction: Path) -> None:
    table = pd.read_csv(reproduction / "ack-holding" / "sensitivity.csv")
    assert len(table) == planned(ack_holding.sensitivity_cells)
    exact = table[
        (table["duration_error"] == 0)
        & (table["warning_s"] == 0.5)
        & (table["scheme"] == "ack-holding")
    ]
    assert int(exact["rto_expirations"].iloc[0]) == 0


def test_scenario_builder_names_bad_arguments() -> None:
    with pytest.raises(ValueError, match="case"):
        ack_holding.scenario("C", "reno")
    with pytest.raises(ValueError, match="scheme"):
        ack_holding.scenario("A", "vegas")


def _ns2check() -> Any:
    """scripts/ns2check/ack_holding.py as a module."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "scripts" / "ns2check" / "ack_holding.py"
    spec = importlib.util.spec_from_file_location("ns2check_ack_holding", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reno_through_one_outage_agrees_with_ns2(tmp_path: Path) -> None:
    """The study's baseline in ns-2.35 and in rtolab with ns-2's TCP
    defaults and window growth: the same timeouts, backoff and idle time
    after the link returns, and packets delivered within 0.1 %
    (docs/ack-holding.md; 0.18 % apart while the mobile's receive buffer
    was the window and its window updates clocked the sender)."""
    check = _ns2check()
    theirs = check.run_ns2("A", 1, tmp_path / "ns2")
    ours = check.run_rtolab("A", 1, tmp_path / "rtolab")
    assert ours["timeouts"] == theirs["timeouts"] > 0
    assert ours["backoff_max"] == theirs["backoff_max"]
    assert abs(ours["idle_after_up_s"] - theirs["idle_after_up_s"]) < 0.05
    assert abs(ours["packets_delivered"] / theirs["packets_delivered"] - 1) < 0.001


def test_a_variable_path_runs_the_stretching_phase(reproduction: Path) -> None:
    """With cross traffic on the wired link the timeout-free search
    stretches ACKs, and the fixed host sees the planned gaps from the third
    release on (docs/ack-holding.md, "A variable path")."""
    from rtolab.experiments import ack_holding_paths as paths

    runs = pd.read_csv(reproduction / "ack-holding" / "paths.csv")
    # Every variant on every seed of the plan the reproduction ran (the
    # quick plan runs one seed).
    assert len(runs) == len(paths.VARIANTS) * runs["seed"].nunique()
    assert set(runs["variant"]) == set(paths.VARIANTS) and 1 in set(runs["seed"])
    held = runs[runs["variant"] != "reno"]
    assert (held["deviation_s"] > 1e-5).all()
    stretched = runs.set_index(["variant", "seed"]).loc[("timeout-free", 1)]
    assert stretched["n"] > 0
    acks = pd.read_csv(reproduction / "ack-holding" / "paths-acks.csv")
    rows = acks[(acks["variant"] == "timeout-free") & (acks["seed"] == 1)].dropna()
    later = rows[rows["ack"] >= 3]
    assert len(later) > 5
    assert ((later["gap_at_fixed_host_s"] - later["planned_gap_s"]).abs() < 0.03).all()
    # The fixed host's RTO is above the model's: its floor and hold samples.
    assert (later["fixed_host_rto_s"] > later["model_rto_s"]).all()


def test_predicted_fades_compare_the_schemes_on_one_channel(reproduction: Path) -> None:
    """Every scheme of a seed meets the same fades, the predictor's record
    of each fade is consistent, and the paired differences stand on the
    seeds run (docs/ack-holding.md, "Fades predicted from the signal")."""
    from rtolab.experiments import ack_holding_fades as fades

    base = reproduction / "ack-holding"
    runs = pd.read_csv(base / "fades.csv")
    assert list(runs.columns) == list(fades.RUN_COLUMNS)
    assert len(runs) == planned(fades.cells)
    assert {"reno", "ack-holding", "freeze", "snoop"} <= set(runs["scheme"])
    # The channel is the seed's: the same fades under every scheme.
    assert (runs.groupby("seed")["down_s"].nunique() == 1).all()
    assert (runs.groupby("seed")["fades"].nunique() == 1).all()
    assert (runs["fades"] > 0).all()
    predictions = pd.read_csv(base / "fades-predictions.csv")
    warned = predictions[predictions["warned"]]
    assert (warned["lead_s"] > 0).all()
    oracle = predictions[predictions["setting"] == "oracle"]
    # The oracle warns 500 ms ahead (later only when an outage follows the
    # last one sooner) with the true duration.
    assert oracle["warned"].all()
    assert (oracle["lead_s"] <= 0.5 + 1e-9).all()
    assert (oracle["duration_error"].abs() < 1e-6).all()
    paired = pd.read_csv(base / "fades-paired.csv")
    assert set(paired["scheme"]) == {"ack-holding", "freeze", "snoop"}
    assert (paired["n"] == runs["seed"].nunique()).all()
    assert (base / "figures" / "fades-gain.png").stat().st_size > 10_000


def _capture(rows: list[tuple[float, str, str, int, int, int, int]]) -> pd.DataFrame:
    """A capture as :func:`rtolab.frames.read_capture` decodes one: rows of
    (time s, source, flags, seq, ack, window, payload). SYNs carry window
    scale 2."""
    frame = pd.DataFrame(
        rows, columns=["time_s", "src", "flags", "seq", "ack", "window", "payload_len"]
    )
    frame["dst"] = frame["src"].map({"10.0.0.1": "10.0.0.2", "10.0.0.2": "10.0.0.1"})
    frame["protocol"] = "tcp"
    frame["window_scale"] = [2 if "SYN" in f else None for f in frame["flags"]]
    return frame


FIXED, MOBILE = "10.0.0.1", "10.0.0.2"
#: Handshake (the fixed host's ISN 1000, the mobile's 5000), data, and the
#: mobile's ACKs: the window field 1000 is 4000 bytes (scale 2).
HANDSHAKE = [
    (0.0, FIXED, "SYN", 1000, 0, 65535, 0),
    (0.05, MOBILE, "SYN,ACK", 5000, 1001, 65535, 0),
    (0.10, FIXED, "ACK", 1001, 5001, 500, 0),
    (0.10, FIXED, "ACK", 1001, 5001, 500, 1000),
    (0.10, FIXED, "ACK", 2001, 5001, 500, 1000),
    (0.20, MOBILE, "ACK", 5001, 2001, 1000, 0),
    (0.20, FIXED, "ACK", 3001, 5001, 500, 1000),
    (0.20, FIXED, "ACK", 4001, 5001, 500, 1000),
    (0.20, FIXED, "ACK", 5001, 5001, 500, 1000),
]


def test_capture_check_counts_third_duplicates_only_while_holding() -> None:
    from rtolab.experiments import ack_holding_linux as linux

    # The original and two duplicates while holding: allowed.
    held = [(1.0 + 0.5 * i, MOBILE, "ACK", 5001, 3001, 1000, 0) for i in range(3)]
    check = linux.check_capture(_capture(HANDSHAKE + held), None, (0.9, 3.0))
    assert (check.third_duplicates, check.longest_run, check.ok) == (0, 3, True)
    # A third duplicate is counted, and so is every later one.
    more = [(2.6 + 0.1 * i, MOBILE, "ACK", 5001, 3001, 1000, 0) for i in range(2)]
    check = linux.check_capture(_capture(HANDSHAKE + held + more), None, (0.9, 3.0))
    assert (check.third_duplicates, check.longest_run, check.ok) == (2, 5, False)
    # Outside the interval the mobile's own duplicates are not the base
    # station's doing.
    assert linux.check_capture(_capture(HANDSHAKE + held + more), None, (3.0, 4.0)).ok
    # A changed window makes it a different ACK (RFC 5681's definition).
    wider = (2.6, MOBILE, "ACK", 5001, 3001, 1001, 0)
    assert linux.check_capture(_capture(HANDSHAKE + held + [wider]), None, (0.9, 3.0)).ok


def test_capture_check_finds_data_beyond_the_scaled_window() -> None:
    from rtolab.experiments import ack_holding_linux as linux

    # The ACK at 0.2 s offers bytes up to 1000 + 4 * 1000 = 5000 past the
    # ISN: the data up to 5000 (relative) is inside, with the scale.
    assert linux.check_capture(_capture(HANDSHAKE), None, (0.0, 1.0)).beyond_window == 0
    beyond = (0.3, FIXED, "ACK", 6001, 5001, 500, 1000)
    check = linux.check_capture(_capture([*HANDSHAKE, beyond]), None, (0.0, 1.0))
    assert (check.beyond_window, check.ok) == (1, False)
    # ACKs released to the fixed host may not offer more than the mobile
    # did: here the mobile advertised 1000 (4000 bytes), the fixed host saw 1200.
    mobile_side = _capture(HANDSHAKE)
    opened = (0.25, MOBILE, "ACK", 5001, 2001, 1200, 0)
    check = linux.check_capture(_capture([*HANDSHAKE, opened]), mobile_side, (0.0, 1.0))
    assert (check.edge_opened, check.ok) == (1, False)


def test_timeouts_are_retransmissions_of_the_asked_for_segment_after_quiet() -> None:
    from rtolab.experiments import ack_holding_linux as linux

    rows = [
        *HANDSHAKE,
        # A timeout 0.6 s after the last ACK (which asked for 2001), again
        # after 1.2 s more.
        (0.80, FIXED, "ACK", 2001, 5001, 500, 1000),
        (2.00, FIXED, "ACK", 2001, 5001, 500, 1000),
        # A paced ACK; the retransmission it triggers is not a timeout.
        (2.50, MOBILE, "ACK", 5001, 3001, 1000, 0),
        (2.5005, FIXED, "ACK", 3001, 5001, 500, 1000),
        # A duplicate does not restart the timer: the timeout 50 ms after
        # it counts, a retransmission 1 ms after another does not.
        (3.40, MOBILE, "ACK", 5001, 3001, 1000, 0),
        (3.45, FIXED, "ACK", 3001, 5001, 500, 1000),
        (4.00, MOBILE, "ACK", 5001, 3001, 1000, 0),
        (4.001, FIXED, "ACK", 3001, 5001, 500, 1000),
        # Linux's timer counted from the head segment's send (at 0.2 s):
        # a timeout 0.1 s after an ACK of new data.
        (4.40, MOBILE, "ACK", 5001, 3001, 1000, 0),
        (5.00, MOBILE, "ACK", 5001, 4001, 1000, 0),
        (5.10, FIXED, "ACK", 4001, 5001, 500, 1000),
    ]
    assert linux.timeouts(_capture(rows)) == [0.8, 2.0, 3.45, 5.1]


def test_retransmissions_date_the_head_segment() -> None:
    from rtolab.experiments import ack_holding_linux as linux

    rows = [
        *HANDSHAKE,
        # A paced ACK asks for 3001 (sent at 0.20 s); 0.1 s later the
        # fixed host retransmits it: its timer counted from that send.
        (1.00, MOBILE, "ACK", 5001, 3001, 1000, 0),
        (1.10, FIXED, "ACK", 3001, 5001, 500, 1000),
        # Again 0.5 s later: the head was last sent at 1.10 s.
        (1.60, FIXED, "ACK", 3001, 5001, 500, 1000),
    ]
    got = linux.retransmissions(_capture(rows))
    assert got["seq"].tolist() == [2001, 2001]
    assert got["head"].tolist() == [True, True]
    assert np.allclose(got["since_new_ack"], [0.1, 0.6])
    assert np.allclose(got["head_age"], [0.9, 0.5])


def test_ss_lines_give_the_fixed_host_s_timer() -> None:
    from rtolab.experiments import ack_holding_linux as linux

    line = (
        "ESTAB 0 0 10.0.0.1:40000 10.0.0.2:5001 timer:(on,1.076ms,0) ts sack cubic"
        " wscale:7,7 rto:3276 backoff:1 rtt:539.343/683.783 cwnd:4 retrans:0/2"
        " lastack:8 unacked:45"
    )
    got = linux.parse_ss(line)
    assert got == {
        "rto_ms": 3276.0,
        "rtt_ms": 539.343,
        "rttvar_ms": 683.783,
        "backoff": 1.0,
        "lastack_ms": 8.0,
        # ss writes 1.076 s as "1.076ms", 6 s as "6sec".
        "timer_ms": 1076.0,
        "retrans_total": 2.0,
        "unacked": 45.0,
        "cwnd": 4.0,
    }
    assert linux.parse_ss("timer:(on,588ms,0)")["timer_ms"] == 588.0
    assert linux.parse_ss("timer:(on,6sec,0)")["timer_ms"] == 6000.0
    assert linux.parse_ss("timer:(on,1min2.050ms,0)")["timer_ms"] == 62050.0
    assert linux.parse_ss("no such fields") == {}


def test_ss_samples_are_dated_by_the_acks_they_report() -> None:
    from rtolab.experiments import ack_holding_linux as linux

    # ACKs every 12 ms until 1 s, then two released ones; the sampler's
    # clock runs 100.033 s ahead of the capture's.
    acks = np.concatenate([np.arange(0.1, 1.0, 0.012), [2.0, 3.5]])
    offset = 100.033
    at = np.array([0.13, 0.5, 1.5, 2.2, 3.0, 3.6])
    last = np.array([acks[acks <= t].max() for t in at])
    samples = pd.DataFrame({"mono_s": at + offset, "lastack_ms": np.round((at - last) * 1000)})
    got = linux.align_ss(samples, syn_s=0.11, ack_times=acks)
    assert np.allclose(got["t"], at, atol=0.0015)
    # Without ACK ages the first sample is taken as just after the SYN.
    bare = linux.align_ss(samples.drop(columns="lastack_ms"), syn_s=0.11, ack_times=acks)
    assert bare["t"].iloc[0] == pytest.approx(0.11)


def test_linux_configurations_set_the_fixed_host_s_sysctls() -> None:
    from rtolab.experiments import ack_holding_linux as linux

    repo = Path(__file__).resolve().parents[1]
    config = next(c for c in linux.CONFIGS if c.endswith("; no TLP"))
    text = linux.scenario_text(repo, config)
    assert 'linux = { sysctls = { "net.ipv4.tcp_early_retrans" = 0 } }' in text
    assert 'fixed_host = "linux"' in text
    assert "sysctls" not in linux.scenario_text(repo, "spec")
