"""``rtolab compare``: reading references (pcap, pcapng, CSV, Markdown),
aligning packets, the numbers it reports, and its errors."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtolab
from cli_run import rtolab_cli
from rtolab.comparison import Capture, CompareError, Packet, compare, read_packets

DATA = Path(__file__).resolve().parent / "data"
#: The bridge study's three printed captures, transcribed (see data/README.md).
CAPTURES = DATA / "bridge-captures.md"
#: A real Linux TCP exchange on the loopback interface (see data/README.md).
LINUX = DATA / "linux-loopback.pcap"
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.fixture(scope="module")
def bridge_pcap(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Ethernet-side capture of one run of the bridge scenario."""
    out = tmp_path_factory.mktemp("bridge")
    rtolab.run(SCENARIOS / "bridge.toml", out=out, traces=False)
    return out / "ethernet.pcap"


# ----- reading references -----


@pytest.mark.parametrize(
    ("choice", "count", "has_seq", "last"),
    [
        ("A", 12, True, (14, 4.412743, "app", "user", "ACK", 1026, 1026, 0)),
        ("B", 9, True, (11, 7.337531, "app", "user", "ACK", 1026, 1026, 0)),
        ("C", 9, False, (11, 0.002801, "app", "user", "ACK", None, None, 0)),
    ],
)
def test_each_published_table_parses(
    choice: str, count: int, has_seq: bool, last: tuple[object, ...]
) -> None:
    capture = read_packets(CAPTURES, table=choice)
    assert len(capture.packets) == count
    assert capture.has_seq is has_seq
    first = capture.packets[0]
    assert (first.no, first.src, first.dst, first.flags, first.len) == (3, "app", "user", "SYN", 0)
    p = capture.packets[-1]
    assert (p.no, p.time_s, p.src, p.dst, p.flags, p.seq, p.ack, p.len) == last
    # Data segments carry their length, and frame numbers run on.
    assert [p.len for p in capture.packets].count(1024) >= 2
    assert [p.no for p in capture.packets] == list(range(3, 3 + count))


def test_table_a_keeps_the_notes_and_both_numbers() -> None:
    capture = read_packets(CAPTURES, table="1")
    dup = capture.packets[7]
    assert (dup.no, dup.note, dup.flags, dup.seq, dup.ack) == (10, "dup ACK", "ACK", 1025, 1025)
    assert capture.packets[1].flags == "SYN,ACK" and capture.packets[1].ack == 1
    assert capture.packets[0].ack is None


def test_a_table_is_chosen_by_number_or_heading() -> None:
    by_heading = read_packets(CAPTURES, table="initial RTO 5 s")
    by_number = read_packets(CAPTURES, table="2")
    assert by_heading.packets == by_number.packets == read_packets(CAPTURES, table="b").packets


def test_csv_and_markdown_give_the_same_packets(tmp_path: Path) -> None:
    markdown = read_packets(CAPTURES, table="B")
    rows = ["no.,time (s),from → to,flags,seq/ack,TCP len"]
    for p in markdown.packets:
        seqack = f"seq {p.seq}" + (f" ack {p.ack}" if p.ack is not None else "")
        rows.append(f'{p.no},{p.time_s},{p.src} → {p.dst},"{p.flags}",{seqack},{p.len}')
    path = tmp_path / "b.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert read_packets(path).packets == markdown.packets


def test_capture_reader_agrees_with_the_core(bridge_pcap: Path) -> None:
    """Compare's reader gives the fields the frames table gives."""
    ours = read_packets(bridge_pcap).packets
    core = rtolab.read_capture(bridge_pcap)
    assert len(ours) == len(core)
    for p, (_, row) in zip(ours, core.iterrows(), strict=True):
        assert p.src == f"{row['src']}:{row['src_port']}"
        assert (p.seq, p.flags, p.len) == (row["seq"], row["flags"], row["payload_len"])
        if "ACK" in p.flags:
            assert p.ack == row["ack"]
        assert p.time_s == pytest.approx(row["time_s"] - core["time_s"].iloc[0], abs=1e-9)


# ----- comparing -----


def test_a_run_compared_with_itself_matches_entirely(bridge_pcap: Path) -> None:
    result = compare(bridge_pcap, bridge_pcap)
    s = result.summary
    assert s["matched_fraction"] == 1.0 and s["matched"] == s["run_packets"] > 10
    assert s["worst_abs_error_s"] == 0.0 and s["median_abs_error_s"] == 0.0
    assert s["first_divergence"] is None
    assert result.only_run.empty and result.only_reference.empty
    assert (result.pairs["error_s"] == 0.0).all()


def test_linux_capture_matches_its_pcapng_copy() -> None:
    result = compare(LINUX, DATA / "linux-loopback.pcapng")
    assert result.summary["matched_fraction"] == 1.0
    assert result.summary["worst_abs_error_s"] == 0.0
    # Relative numbers as Wireshark shows them.
    assert list(result.pairs["seq"][:4]) == [0, 0, 1, 1]
    assert result.pairs["ack"].iloc[-1] == 1026


def editcap(*args: str | Path) -> None:
    subprocess.run(["editcap", *map(str, args)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def linux_forms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The Linux capture in the forms a reference comes in, converted by
    editcap (installed with tshark): its Ethernet frames, the same as raw
    IP (the Ethernet header chopped), each as pcapng, and as a nanosecond
    pcap."""
    out = tmp_path_factory.mktemp("forms")
    forms = {"ethernet": LINUX, "ethernet pcapng": DATA / "linux-loopback.pcapng"}
    forms["raw"] = out / "raw.pcap"
    editcap("-C", "14", "-T", "rawip", LINUX, forms["raw"])
    forms["raw pcapng"] = out / "raw.pcapng"
    editcap("-F", "pcapng", forms["raw"], forms["raw pcapng"])
    forms["ethernet ns"] = out / "ethernet-ns.pcap"
    editcap("-F", "nsecpcap", LINUX, forms["ethernet ns"])
    return forms


def test_every_form_of_a_capture_gives_the_raw_ip_packets(linux_forms: dict[str, Path]) -> None:
    raw = read_packets(linux_forms["raw"])
    assert len(raw.packets) == 10 and raw.ignored == 0
    assert raw.packets[0].src == "127.0.0.1:46968" and raw.packets[0].flags == "SYN"
    for name, path in linux_forms.items():
        assert read_packets(path).packets == raw.packets, name


def _pcap_records(path: Path) -> tuple[bytes, list[bytearray]]:
    data = path.read_bytes()
    records, offset = [], 24
    while offset < len(data):
        captured = struct.unpack_from("<I", data, offset + 8)[0]
        records.append(bytearray(data[offset : offset + 16 + captured]))
        offset += 16 + captured
    return data[:24], records


def test_a_perturbed_linux_capture_shows_the_perturbation(tmp_path: Path) -> None:
    """The reference is the real capture with packet 6 (the server's data)
    sent 5 ms later and packet 9 (the server's FIN) removed."""
    header, records = _pcap_records(LINUX)
    assert len(records) == 10
    seconds, micros = struct.unpack_from("<II", records[5], 0)
    micros += 5000
    struct.pack_into("<II", records[5], 0, seconds + micros // 1_000_000, micros % 1_000_000)
    removed = records.pop(8)
    perturbed = tmp_path / "perturbed.pcap"
    perturbed.write_bytes(header + b"".join(records))
    assert removed  # the server's FIN, gone from the reference

    result = compare(LINUX, perturbed)
    s = result.summary
    assert s["matched"] == 9 and s["only_run"] == 1 and s["only_reference"] == 0
    assert list(result.only_run["no"]) == [9]
    assert list(result.only_run["flags"]) == ["FIN,ACK"]
    shifted = result.pairs[result.pairs["run_no"] == 6]
    assert shifted["error_s"].iloc[0] == pytest.approx(-0.005, abs=1e-9)
    assert s["worst_abs_error_s"] == pytest.approx(0.005, abs=1e-9)
    assert s["worst_pair"]["run_no"] == 6
    assert s["median_abs_error_s"] == 0.0
    assert s["first_divergence"]["run"]["no"] == 9
    # The reference's next packet: the client's last ACK, frame 9 of its file.
    assert s["first_divergence"]["reference"]["no"] == 9
    assert s["first_divergence"]["reference"]["ack"] == 1026


def test_the_bridge_run_against_the_published_capture(bridge_pcap: Path) -> None:
    """Every packet of capture A has its counterpart in the run (the
    calibration; tests/test_bridge_captures.py checks the times)."""
    result = compare(bridge_pcap, CAPTURES, table="A")
    s = result.summary
    assert s["matched"] == 12 and s["only_reference"] == 0
    assert s["run_client"] == "192.168.1.102:49153" and s["reference_client"] == "app"
    first = result.pairs.iloc[0]
    assert (first["flags"], first["error_s"]) == ("SYN", 0.0)
    # Without seq/ack in the table, only direction, flags and length count.
    without = compare(bridge_pcap, CAPTURES, table="C")
    assert without.summary["compared"] == ["direction", "flags", "len"]


def test_map_names_the_endpoints(bridge_pcap: Path) -> None:
    plain = compare(bridge_pcap, CAPTURES, table="B")
    mapped = compare(bridge_pcap, CAPTURES, table="B", mapping=["app=192.168.1.102"])
    assert mapped.summary["matched"] == plain.summary["matched"]
    # Naming the server as the appliance reverses every direction.
    swapped = compare(bridge_pcap, CAPTURES, table="B", mapping={"app": "192.168.1.202"})
    assert swapped.summary["run_client"] == "192.168.1.202:7891"
    assert swapped.summary["matched"] < plain.summary["matched"]
    with pytest.raises(CompareError, match="--map ghost"):
        compare(bridge_pcap, CAPTURES, table="B", mapping={"ghost": "192.168.1.102"})


def test_a_lost_syn_ack_keeps_the_numbering() -> None:
    """Without the SYN-ACK, the server's numbers count from the client's
    first acknowledgement, so everything else still matches."""
    run = _linux_capture()
    assert run.packets[1].flags == "SYN,ACK"
    reference = Capture("no SYN-ACK", run.packets[:1] + run.packets[2:], absolute=True)
    result = compare(run, reference)
    assert result.summary["matched"] == len(run.packets) - 1
    assert list(result.only_run["flags"]) == ["SYN,ACK"]


def _linux_capture() -> Capture:
    return read_packets(LINUX)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_dropped_packets_are_reported_as_one_sided(data: st.DataObject) -> None:
    run = _linux_capture()
    n = len(run.packets)
    # The handshake stays: the clocks are aligned on it and it fixes the
    # sequence numbers (a lost SYN-ACK has its own test).
    dropped = data.draw(st.sets(st.integers(3, n - 1)))
    from_reference = data.draw(st.booleans())
    kept = [p for k, p in enumerate(run.packets) if k not in dropped]
    other = Capture("perturbed", kept, absolute=True)
    result = compare(run, other) if from_reference else compare(other, run)
    s = result.summary
    assert s["matched"] == n - len(dropped)
    one_sided = result.only_run if from_reference else result.only_reference
    assert sorted(one_sided["no"]) == sorted(run.packets[k].no for k in dropped)
    assert (result.pairs["error_s"] == 0.0).all()
    assert (s["first_divergence"] is None) == (not dropped)


@settings(max_examples=40, deadline=None)
@given(
    shifts=st.dictionaries(
        st.integers(1, 9), st.floats(-1.0, 1.0).filter(lambda x: abs(x) > 1e-6), max_size=5
    )
)
def test_time_shifts_are_the_errors(shifts: dict[int, float]) -> None:
    run = _linux_capture()
    moved = [
        Packet(p.no, p.time_s + shifts.get(k, 0.0), p.src, p.dst, p.flags, p.seq, p.ack, p.len)
        for k, p in enumerate(run.packets)
    ]
    result = compare(Capture("moved", moved, absolute=True), run)
    assert result.summary["matched_fraction"] == 1.0
    errors = dict(zip(result.pairs["run_no"], result.pairs["error_s"], strict=True))
    for k, p in enumerate(run.packets):
        assert errors[p.no] == pytest.approx(shifts.get(k, 0.0), abs=1e-9)
    worst = max((abs(v) for v in shifts.values()), default=0.0)
    assert result.summary["worst_abs_error_s"] == pytest.approx(worst, abs=1e-9)


# ----- the command -----


def test_cli_prints_the_side_by_side_table(bridge_pcap: Path) -> None:
    done = rtolab_cli("compare", str(bridge_pcap), str(CAPTURES), "--table", "A")
    assert done.returncode == 0, done.stderr
    assert "spurious retransmission" in done.stdout  # the reference's notes
    assert "matched 12 of 12 run" in done.stdout and "no divergence" in done.stdout
    # The same run against capture B (another initial RTO) parts from it.
    done = rtolab_cli("compare", str(bridge_pcap), str(CAPTURES), "--table", "B")
    assert done.returncode == 0, done.stderr
    assert "only run" in done.stdout and "first divergence at row 6" in done.stdout


def test_cli_json_is_machine_readable(bridge_pcap: Path) -> None:
    done = rtolab_cli("compare", str(bridge_pcap), str(bridge_pcap), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["summary"]["matched_fraction"] == 1.0
    assert len(data["pairs"]) == data["summary"]["matched"]
    assert data["only_run"] == [] and data["only_reference"] == []


def test_cli_markdown_is_the_table_and_the_summary(bridge_pcap: Path) -> None:
    done = rtolab_cli("compare", str(bridge_pcap), str(CAPTURES), "--table", "A", "--markdown")
    assert done.returncode == 0, done.stderr
    result = compare(bridge_pcap, CAPTURES, table="A")
    assert done.stdout == result.to_markdown()
    table, summary = done.stdout.rstrip("\n").split("\n\n")
    rows = table.splitlines()
    assert rows[0].startswith("| run | t run (s) | ref |") and rows[1].startswith("|---:|")
    # One row per alignment position, each with every column.
    assert len(rows) == 2 + len(result.alignment)
    assert all(row.count(" | ") == 9 for row in rows[2:])
    assert summary.splitlines() == ["- " + line for line in result.summary_lines()]


def test_cli_summary_prints_the_summary_without_the_table(bridge_pcap: Path) -> None:
    result = compare(bridge_pcap, CAPTURES, table="B")
    done = rtolab_cli("compare", str(bridge_pcap), str(CAPTURES), "--table", "B", "--summary")
    assert done.returncode == 0, done.stderr
    # The summary lines and nothing else: no row of the packet table.
    assert done.stdout.splitlines() == result.summary_lines()
    assert "first divergence at row 6" in done.stdout and "only run" not in done.stdout
    done = rtolab_cli(
        "compare", str(bridge_pcap), str(CAPTURES), "--table", "B", "--summary", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(result.summary))
    done = rtolab_cli(
        "compare", str(bridge_pcap), str(CAPTURES), "--table", "B", "--summary", "--markdown"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "".join(f"- {line}\n" for line in result.summary_lines())


def test_markdown_keeps_user_text_in_its_cell(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("time,from,to,flags,len,note\n0,a,b,SYN,0,x | y\n", encoding="utf-8")
    text = compare(table, table).to_markdown()
    row = text.splitlines()[2]
    assert row.endswith("| x \\| y |") and row.count(" | ") == 9


def test_outside_applies_the_larger_of_the_two_tolerances() -> None:
    reference = read_packets(CAPTURES, table="B")
    # Shifted by 0.5 s: beyond 100 ms everywhere, within 10 % only past 5 s.
    late = Capture(
        "late",
        [
            Packet(p.no, p.time_s + (0.5 if i else 0.0), p.src, p.dst, p.flags, p.seq, p.ack, p.len)
            for i, p in enumerate(reference.packets)
        ],
    )
    result = compare(late, reference)
    # Aligned on the SYN, which stays put: every later packet is 0.5 s late.
    assert list(result.outside(0.1)["reference_no"]) == [4, 5, 6, 7, 8, 9, 10, 11]
    beyond = result.outside(0.1, 0.1)
    assert list(beyond["reference_no"]) == [4, 5]
    assert list(result.outside(0.5 + 1e-9)["reference_no"]) == []
    with pytest.raises(ValueError, match="not negative"):
        result.outside(-1.0)


def test_the_compare_page_quotes_the_command_as_it_prints_now(bridge_pcap: Path) -> None:
    """docs/compare.md's example summary is the run of bridge.toml (its
    seed, 1) against capture A."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "compare.md").read_text(
        encoding="utf-8"
    )
    quoted = page.split("For example, a run of `scenarios/bridge.toml`", 1)[1]
    quoted = quoted.split("```\n", 2)[1]
    assert quoted.strip().splitlines() == compare(bridge_pcap, CAPTURES, table="A").summary_lines()


def test_cli_shows_user_text_as_text(tmp_path: Path) -> None:
    table = tmp_path / "t.md"
    table.write_text(
        "| no. | time (s) | from → to | flags | TCP len | note |\n|---|---|---|---|---|---|\n"
        "| 1 | 0 | [red]a[/] → b | SYN | 0 | [bold]x[/bold] |\n",
        encoding="utf-8",
    )
    done = rtolab_cli("compare", str(table), str(table))
    assert done.returncode == 0, done.stderr
    assert "[bold]x[/bold]" in done.stdout and "[red]a[/] → b" in done.stdout


#: A pcap file header: little endian, microseconds, Ethernet.
_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
_PCAPNG = (DATA / "linux-loopback.pcapng").read_bytes()
#: Where the file's last block starts: its length closes it.
_LAST_BLOCK = len(_PCAPNG) - struct.unpack("<I", _PCAPNG[-4:])[0]
MISSING_COLUMN = (
    "| no. | time (s) | from → to | seq/ack |\n|---|---|---|---|\n| 3 | 0 | a → b | seq 0 |\n"
)
BAD_CASES = {
    "missing file": (None, "no such file"),
    "garbled pcap": (b"\xd4\xc3\xb2\xa1" + b"\x00" * 20 + b"\x01\x02", "truncated"),
    "missing column": (MISSING_COLUMN, "line 1: missing column flags, TCP len"),
    "bad time": (
        "| time (s) | from → to | flags | TCP len |\n|---|---|---|---|\n| x | a → b | SYN | 0 |\n",
        "line 3: time 'x' is not a number",
    ),
    "unknown flag": (
        "time,from,to,flags,len\n0,a,b,SYN,0\n0.1,b,a,SYN+BOGUS,0\n",
        "line 3: unknown TCP flag 'BOGUS'",
    ),
    "binary": (b"\x00\xff\xfe" * 10, "not a pcap, pcapng, CSV or Markdown table"),
    "absurd record length": (
        _PCAP_HEADER + struct.pack("<IIII", 0, 0, 0xFFFFFFFF, 60),
        "garbled: packet 1 (byte 24) claims 4294967295 bytes",
    ),
    "unknown link type": (
        _PCAP_HEADER[:20] + struct.pack("<I", 147) + struct.pack("<IIII", 0, 0, 4, 4) + bytes(4),
        "link type 147 is not supported (packet 1)",
    ),
    "truncated pcapng block": (
        _PCAPNG[:-6],
        f"truncated: block at byte {_LAST_BLOCK} is cut short",
    ),
    "no SYN": ("time,from,to,flags,len\n0,a,b,ACK,0\n", "has no SYN to align on"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_cli_bad_input_is_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    content, expected = BAD_CASES[case]
    path = tmp_path / "reference"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif content is not None:
        path.write_bytes(content)
    done = rtolab_cli("compare", str(LINUX), str(path))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    assert str(path) in lines[0] and expected in lines[0], lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--table", "Z"], "--table 'Z': no table matches"),
        ([], "holds 3 packet tables; choose one with --table"),
        (["--table", "A", "--align", "middle"], "--align: expected one of syn, first, none"),
        (["--table", "A", "--map", "app"], "--map: 'app' is not NAME=ADDRESS"),
        (["--table", "A", "--json", "--markdown"], "--json and --markdown: choose one"),
    ],
)
def test_cli_bad_options_are_one_line_and_exit_2(args: list[str], expected: str) -> None:
    done = rtolab_cli("compare", str(LINUX), str(CAPTURES), *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


def test_cli_names_the_captures_of_a_run_directory(bridge_pcap: Path) -> None:
    done = rtolab_cli("compare", str(bridge_pcap.parent), str(CAPTURES))
    assert done.returncode == 2
    assert "is a directory; give one of its captures: ethernet.pcap, nfc.pcap" in done.stderr
