"""The bridge study's NFC-link recommendations: header compression and the
faster links (``rtolab reproduce bridge/compression``,
``bridge/faster_links``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rtolab
from rtolab.experiments import bridge, bridge_links


def test_rfc_1144_sizes_in_the_theory() -> None:
    assert [bridge_links.delta_len(v) for v in (0, 1, 255, 256, 65535)] == [3, 1, 1, 3, 3]
    # Equation 5.2 for a full segment whose 40 header bytes cross as 3.
    assert bridge_links.rtt_nfc_compressed(1024, 11.2) == bridge.rtt_nfc(1043, 11.2)
    # The minimal exchange: only the last ACK is compressed (mask, checksum,
    # ACK and sequence deltas of 1025 in three bytes each, IP ID delta 2).
    sent = bridge.minimal_session(1024, 1024)
    on_link = bridge_links.minimal_session_compressed(1024, 1024)
    assert on_link[:-1] == sent[:-1]
    assert on_link[-1] == ("up", 1 + 2 + 3 + 3 + 1)
    # A 250-byte exchange moves the ACK and sequence by 195: one byte each.
    assert bridge_links.minimal_session_compressed(194, 194)[-1] == ("up", 6)
    for rate in bridge.MODES:
        without = bridge_links.theoretical_min_latency(1024, 1024, rate, 0.003, 0.0, False)
        with_ = bridge_links.theoretical_min_latency(1024, 1024, rate, 0.003, 0.0, True)
        assert without == bridge.theoretical_min_latency(1024, 1024, rate, 0.003)
        assert with_ < without


def test_every_run_is_a_valid_scenario() -> None:
    for cell in bridge_links.compression_cells(reduced=True):
        text = cell.scenario()
        assert ('header_compression = "rfc1144"' in text) == cell.compressed
        assert rtolab.validate(text)["hosts"] == 3
    for link in bridge_links.link_cells(reduced=True):
        assert rtolab.validate(link.scenario())["hosts"] == 3


def test_compression_shortens_the_exchange_paired_by_seed(tmp_path: Path) -> None:
    rows = {}
    for compressed in (False, True):
        cell = bridge_links.CompressionCell(
            "exchange", "sensing+optimum_rto", 11.2, 1080, compressed, 2
        )
        result = rtolab.run(cell.scenario(), seed=2, out=tmp_path / str(compressed))
        rows[compressed] = bridge_links.compression_row(result, cell)
    off, on = rows[False], rows[True]
    assert off["link_bytes"] == off["ip_bytes"] and on["ip_bytes"] == off["ip_bytes"]
    assert on["link_bytes"] < on["ip_bytes"] and on["compressed_packets"] > 0
    assert on["nfc_slots"] < off["nfc_slots"]
    assert on["theoretical_min_latency_s"] <= on["latency_s"] < off["latency_s"]
    assert on["dropped_decompression"] == 0


def test_a_scenario_without_an_nfc_link_is_refused() -> None:
    with pytest.raises(ValueError, match="no nfc link"):
        bridge_links.with_link_fields(bridge.ethernet_exchange_scenario(), "mcu = false")
