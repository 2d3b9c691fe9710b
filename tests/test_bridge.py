"""The bridge study's experiments (``rtolab reproduce bridge``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import rtolab
from rtolab.experiments import (
    bridge,
    bridge_buffers,
    bridge_future,
    bridge_links,
    bridge_variability,
    reproduce,
)
from rtolab.frames import read_capture


@pytest.fixture(scope="module")
def quick_reproduction(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reduced reproduction of every bridge experiment."""
    out = tmp_path_factory.mktemp("bridge")
    previous = os.environ.get("RTOLAB_BRIDGE_QUICK")
    os.environ["RTOLAB_BRIDGE_QUICK"] = "1"
    try:
        outcome = reproduce("bridge", out)
    finally:
        if previous is None:
            del os.environ["RTOLAB_BRIDGE_QUICK"]
        else:
            os.environ["RTOLAB_BRIDGE_QUICK"] = previous
    assert not outcome.failed
    return out


def test_equation_5_2_gives_the_published_values() -> None:
    assert bridge.nfc_payload(1024) == 1080
    assert bridge.rtt_nfc(1080, 11.2) == pytest.approx(2.37324, abs=5e-6)
    assert bridge.theoretical_rtt(1080, 11.2) == pytest.approx(3.37324, abs=5e-6)
    assert bridge.optimum_initial_rto(11.2) == 3.5
    assert bridge.optimum_initial_rto(24.0) == 2.5
    # Whole slots only ever add time.
    assert bridge.rtt_nfc(1075, 11.2, whole_slots=True) > bridge.rtt_nfc(1075, 11.2)


def test_every_configuration_is_a_valid_scenario() -> None:
    for cell in bridge.single_exchange_cells(reduced=True) + bridge.sweep_cells(reduced=True):
        summary = rtolab.validate(cell.run().scenario)
        assert summary["hosts"] == 3
    for run in bridge.long_session_runs(reduced=True):
        assert rtolab.validate(run.scenario)["apps"] == 2
    for cell in bridge_future.filter_cells(reduced=True):
        assert rtolab.validate(cell.scenario()).get("middleboxes", 0) == int(cell.filtered)


def test_the_python_link_model_matches_the_simulator(tmp_path: Path) -> None:
    """A SYN crosses an idle link exactly as the theoretical minimum assumes."""
    cell = bridge.Cell(11.2, 1080, "sensing+optimum_rto", 3)
    result = rtolab.run(cell.run().scenario, seed=3, out=tmp_path)
    session = bridge.Session.of(result)
    syn_out = session.nfc[session.nfc["flags"] == "SYN"]["time_ns"].iloc[0] / 1e9
    syn_in = session.eth[session.eth["flags"] == "SYN"]["time_ns"].iloc[0] / 1e9
    phase = bridge.nfc_stats(result)["slot_phase_ns"] / 1e9
    expected = bridge.ethernet_crossing(bridge.nfc_crossing(syn_out, 44, 11.2, phase), 44)
    assert syn_in == pytest.approx(expected, abs=1e-8)
    row = bridge.exchange_row(result, cell)
    assert (
        row["theoretical_min_latency_s"] < row["latency_s"] < 1.2 * row["theoretical_min_latency_s"]
    )


def test_csvs_have_the_documented_columns(quick_reproduction: Path) -> None:
    out = quick_reproduction / "bridge"
    expected = {
        "single_exchange.csv": bridge.SINGLE_COLUMNS,
        "initial_rto_sweep.csv": bridge.SWEEP_COLUMNS,
        "long_session.csv": bridge.LONG_COLUMNS,
        "long_session_packets.csv": bridge.PACKET_COLUMNS,
        "long_session_sweep.csv": bridge.LONG_SWEEP_COLUMNS,
        "ptx_filter.csv": bridge_future.FILTER_COLUMNS,
        "ptx_filter_paired.csv": bridge_future.PAIRED_COLUMNS,
        "compression.csv": bridge_links.COMPRESSION_COLUMNS,
        "compression_paired.csv": bridge_links.PAIRED_COLUMNS,
        "faster_links.csv": bridge_links.LINK_COLUMNS,
        "faster_links_summary.csv": bridge_links.LINK_SUMMARY_COLUMNS,
        "variability.csv": bridge_variability.ROW_COLUMNS,
        "variability_summary.csv": bridge_variability.SUMMARY_COLUMNS,
        "variability_paired.csv": bridge_variability.PAIRED_COLUMNS,
        "buffers.csv": bridge_buffers.BUFFER_COLUMNS,
        "buffers_paired.csv": bridge_buffers.PAIRED_COLUMNS,
    }
    for name, columns in expected.items():
        frame = pd.read_csv(out / name)
        assert tuple(frame.columns) == columns, name
        assert not frame.empty, name
    single = pd.read_csv(out / "single_exchange.csv")
    assert set(single["config"]) == set(bridge.CONFIGS)
    assert set(single["rate_kbps"]) == {11.2, 24.0}
    for run_dir in (out / "single_exchange").iterdir():
        assert (run_dir / "nfc.pcap").is_file() and (run_dir / "ethernet.pcap").is_file()
    for figure in (
        "single-exchange-latency",
        "single-exchange-throughput",
        "initial-rto-sweep",
        "long-session-rto-vs-rtt",
        "long-session-time-sequence",
        "ptx-filter",
        "compression-latency",
        "faster-links-latency",
        "buffers-goodput",
    ):
        assert (out / "figures" / f"{figure}.png").stat().st_size > 1000


def test_the_fixes_do_what_the_study_says(quick_reproduction: Path) -> None:
    single = pd.read_csv(quick_reproduction / "bridge" / "single_exchange.csv")
    fixed = single[single["config"] == "sensing+optimum_rto"]
    assert (fixed[["retx_appliance", "retx_end_user", "nfc_drops"]] == 0).all().all()
    assert (single[single["config"].str.startswith("sensing")]["nfc_drops"] == 0).all()
    assert (single[single["config"] == "original"]["nfc_drops"] > 0).all()
    assert (single["latency_s"] >= single["theoretical_min_latency_s"]).all()
    assert (single["bw_utilization"] <= 1).all()
    # Counting the slot headers raises the utilisation by the headers' share
    # of the slots used: 4 of 14 or 30 bytes of a full slot, more of a
    # packet's last, partly filled one.
    for rate, chunk in bridge.MODES.items():
        part = single[single["rate_kbps"] == rate]
        share = 1 - part["bw_utilization"] / part["bw_utilization_with_headers"]
        assert (share >= bridge.SLOT_HEADER / (chunk + bridge.SLOT_HEADER) - 1e-9).all()


def test_duplicate_acks_and_keep_alives_match_tshark(quick_reproduction: Path) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed")

    def tshark_counts(pcap: Path) -> dict[str, int]:
        done = subprocess.run(
            [
                "tshark",
                "-r",
                str(pcap),
                "-T",
                "fields",
                "-Y",
                "tcp.analysis.duplicate_ack || tcp.analysis.keep_alive"
                " || tcp.analysis.retransmission || tcp.analysis.fast_retransmission"
                " || tcp.analysis.spurious_retransmission",
                "-e",
                "tcp.analysis.duplicate_ack",
                "-e",
                "tcp.analysis.keep_alive",
                "-e",
                "tcp.analysis.retransmission",
                "-e",
                "tcp.analysis.fast_retransmission",
                "-e",
                "tcp.analysis.spurious_retransmission",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        rows = [line.split("\t") + [""] * 5 for line in done.stdout.splitlines() if line.strip()]
        return {
            "retransmissions": sum(1 for r in rows if any(f.strip() for f in r[2:5])),
            "dup_acks": sum(1 for r in rows if r[0].strip()),
            "keepalives": sum(1 for r in rows if r[1].strip()),
        }

    # The Ethernet side, where the CSVs count them (as the study did).
    pcaps = sorted((quick_reproduction / "bridge").glob("*/*/ethernet.pcap"))
    assert pcaps
    total = {"retransmissions": 0, "dup_acks": 0}
    for pcap in pcaps:
        ours = bridge.tcp_analysis_counts(read_capture(pcap))
        theirs = tshark_counts(pcap)
        assert ours == theirs, pcap
        for key in total:
            total[key] += ours[key]
    assert all(total.values()), f"the runs should contain some of each to compare: {total}"


def test_the_report_shows_the_tables_and_figures(quick_reproduction: Path) -> None:
    from rtolab.reports import report

    page = report(quick_reproduction).read_text(encoding="utf-8")
    assert "single_exchange.csv" in page
    assert "single_exchange_counts.csv" in page and "2R+1DA" in page
    assert "bridge/figures/long-session-rto-vs-rtt.png" in page
    assert "ptx_filter_paired.csv" in page


def test_counts_are_written_as_the_study_writes_them() -> None:
    def form(r: int, da: int, ka: int) -> str:
        return bridge.study_form({"retransmissions": r, "dup_acks": da, "keepalives": ka})

    assert form(3, 1, 0) == "3R+1DA"
    assert form(2, 1, 2) == "2R+1DA+2KA"
    assert form(0, 0, 0) == "0R"
    table = pd.DataFrame(
        {
            "rate_kbps": [11.2] * 3,
            "nfc_payload_bytes": [1080] * 3,
            "config": ["original"] * 3,
            "counts": ["3R+1DA", "3R+1DA", "4R+1DA"],
        }
    )
    assert bridge.study_form_table(table, "config")["original"].tolist() == [
        "3R+1DA (2 seeds), 4R+1DA (1 seed)"
    ]


def _packet(t: float, src: str, seq: int, ack: int, flags: str, length: int) -> dict[str, object]:
    dst = bridge.END_USER if src == bridge.APPLIANCE else bridge.APPLIANCE
    return {
        "time_ns": int(t * 1e9),
        "src": src,
        "dst": dst,
        "seq": seq,
        "ack": ack,
        "flags": flags,
        "payload_len": length,
    }


def test_a_resend_is_spurious_only_once_the_receiver_acknowledged_it() -> None:
    app, user = bridge.APPLIANCE, bridge.END_USER
    nfc = pd.DataFrame(
        [
            _packet(0.0, app, 100, 0, "SYN", 0),
            _packet(1.0, app, 101, 501, "PSH,ACK", 10),
            # Resent before the end-user device acknowledged it: needed as far
            # as the sender can tell, not spurious.
            _packet(2.0, app, 101, 501, "PSH,ACK", 10),
            # Resent after the ACK left the end-user device: spurious.
            _packet(4.0, app, 101, 501, "PSH,ACK", 10),
        ]
    )
    eth = pd.DataFrame(
        [
            _packet(0.1, user, 500, 101, "SYN,ACK", 0),
            _packet(3.0, user, 501, 111, "ACK", 0),
        ]
    )
    resent = bridge.resends(bridge.Session(nfc, eth), app)
    assert resent["spurious"].tolist() == [False, True]
    assert resent["end"].tolist() == [11, 11]
    assert bridge.spurious_retransmissions(bridge.Session(nfc, eth)) == 1
