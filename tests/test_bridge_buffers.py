"""The buffer and MTU exchange on the NFC link (``buffers`` on an ``nfc``
link, ``rtolab reproduce bridge/buffers``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import rtolab
from cli_run import rtolab_cli
from rtolab.experiments import bridge, bridge_buffers
from rtolab.frames import read_capture

SCENARIO = Path(__file__).parent.parent / "scenarios" / "bridge-buffers.toml"
EXCHANGED = "exchange = true }"


def segments(out: Path) -> list[int]:
    """TCP payload sizes of every segment on the NFC capture, both ways."""
    frame = read_capture(out / "nfc.pcap")
    return [int(n) for n in frame[frame["protocol"] == "tcp"]["payload_len"]]


def test_no_segment_on_the_link_exceeds_the_negotiated_mss_and_a_fixed_one_does(
    tmp_path: Path,
) -> None:
    text = SCENARIO.read_text()
    assert EXCHANGED in text
    negotiated = rtolab.run(text, seed=3, out=tmp_path / "negotiated")
    fixed = rtolab.run(
        text.replace(EXCHANGED, "exchange = false }"), seed=3, out=tmp_path / "fixed"
    )
    # 1024 bytes of 256-byte pbufs hold 768 bytes of NFC payload: 712 of TCP.
    assert bridge.nfc_stats(negotiated)["negotiated_mss"] == 712
    sizes = segments(tmp_path / "negotiated")
    # The 1024-byte request and response each crossed as 712 + 312.
    assert max(sizes) == 712 and sizes.count(712) == 2 and sizes.count(312) == 2
    assert bridge.session_latency(negotiated) > 0
    directions = bridge.nfc_stats(negotiated)["directions"]
    assert sum(d["dropped_buffer_overflow"] for d in directions) == 0
    # With the fixed MSS the appliance writes full 1024-byte segments that
    # its own buffer cannot hold: each is lost at its MCU, and the session
    # never completes.
    sizes = segments(tmp_path / "fixed")
    assert max(sizes) == 1024
    assert "negotiated_mss" not in bridge.nfc_stats(fixed)
    lost = bridge.nfc_stats(fixed)["directions"][0]["dropped_buffer_overflow"]
    assert lost == sizes.count(1024) >= 2
    assert bridge.session_latency(fixed) != bridge.session_latency(fixed)  # NaN


def test_the_exchange_clamps_the_mss_option_and_never_raises_it(tmp_path: Path) -> None:
    text = SCENARIO.read_text()
    rtolab.run(text, seed=1, out=tmp_path / "small")
    syn = read_capture(tmp_path / "small" / "nfc.pcap")
    syn = syn[syn["flags"] == "SYN"]
    # The appliance announces the negotiated MSS in its SYN.
    assert list(syn["mss"]) == [712]
    # Buffers that hold more than the profile's 1024: the link offers 4040,
    # the hosts keep 1024.
    big = text.replace("bytes = [1024, 2048], pbuf = [256, 0]", "bytes = [4096, 4096]")
    result = rtolab.run(big, seed=1, out=tmp_path / "big")
    assert bridge.nfc_stats(result)["negotiated_mss"] == 4096 - 16 - 40
    assert max(segments(tmp_path / "big")) == 1024


def test_every_run_is_a_valid_scenario_and_pairs_by_seed() -> None:
    cells = bridge_buffers.buffer_cells(reduced=True)
    for cell in cells:
        text = cell.scenario()
        assert (EXCHANGED in text) == (cell.mode == "negotiated")
        assert rtolab.validate(text)["hosts"] == 3
    fixed = {(c.layout, c.rate_kbps, c.message, c.seed) for c in cells if c.mode == "fixed"}
    neg = {(c.layout, c.rate_kbps, c.message, c.seed) for c in cells if c.mode == "negotiated"}
    assert fixed == neg


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "bytes = [1024, 2048]",
            "bytes = [1024]",
            "buffers.bytes: must list two byte counts, one per end, got 1",
        ),
        (
            "pbuf = [256, 0]",
            "pbuf = [256, 0, 0]",
            "buffers.pbuf: must list two byte counts, one per end, got 3",
        ),
        (
            "bytes = [1024, 2048]",
            "bytes = [50, 2048]",
            "buffers.bytes: end 0 holds at most 0 bytes of NFC payload in 256-byte pbufs",
        ),
        (
            "bytes = [1024, 2048]",
            "bytes = [1024, 56]",
            "buffers.bytes: end 1 holds at most 56 bytes of NFC payload, too few",
        ),
        ("bytes = [1024, 2048], ", "", "buffers.bytes: required in a `buffers` table"),
        ("exchange = true", "exchange = 1", "buffers.exchange"),
        ("exchange = true", "exchange = true, mss = 500", "buffers"),
        ("bytes = [1024, 2048]", "bytes = [-1, 2048]", "buffers.bytes"),
        ('rate = "11.2kbps"', 'rate = "11.2kbps"\nmcu_buffer = 2048', "link[0].buffers: give"),
    ],
)
def test_bad_buffers_are_refused_naming_the_field(
    old: str, new: str, message: str, tmp_path: Path
) -> None:
    text = SCENARIO.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    done = rtolab_cli("validate", str(bad))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
