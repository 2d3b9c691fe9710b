"""The Python API: runs, determinism, validation errors."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import rtolab


def _app_metrics(result: rtolab.Result, name: str) -> dict:
    app = next(a for a in result.report["apps"] if a["name"] == name)
    stats = app.get("stats", {})
    return {**app, **(stats if isinstance(stats, dict) else {})}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_run_writes_pcaps_traces_and_metrics(p2p_scenario: Path, tmp_path: Path) -> None:
    result = rtolab.run(p2p_scenario, out=tmp_path)
    names = sorted(p.name for p in result.pcaps)
    assert names == ["a-ab.pcap", "b-ab.pcap"]
    assert result.trace_file is None and result.trace_dir == tmp_path / "traces"
    assert (tmp_path / "traces" / "app_datagram_received.parquet").stat().st_size > 0
    assert (tmp_path / "metrics.json").is_file()
    sink = _app_metrics(result, "sink")
    cbr = _app_metrics(result, "cbr")
    # 2 % random loss: the sink gets most but not all of what the source sent.
    assert 0 < sink["received_packets"] < cbr["sent_packets"]
    assert sink["lost"] == cbr["sent_packets"] - sink["received_packets"]


def test_same_seed_gives_identical_pcaps(p2p_scenario: Path, tmp_path: Path) -> None:
    first = rtolab.run(p2p_scenario, seed=11, out=tmp_path / "one")
    second = rtolab.run(p2p_scenario, seed=11, out=tmp_path / "two")
    for a, b in zip(sorted(first.pcaps), sorted(second.pcaps), strict=True):
        assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "one" / "metrics.json").read_bytes() == (
        tmp_path / "two" / "metrics.json"
    ).read_bytes()


def test_different_seeds_give_different_losses(p2p_scenario: Path, tmp_path: Path) -> None:
    first = rtolab.run(p2p_scenario, seed=1, out=tmp_path / "one")
    second = rtolab.run(p2p_scenario, seed=2, out=tmp_path / "two")
    received = {p.name: _digest(p) for p in first.pcaps if p.name == "b-ab.pcap"}
    other = {p.name: _digest(p) for p in second.pcaps if p.name == "b-ab.pcap"}
    assert received != other
    assert first.seed == 1 and second.seed == 2


def test_scenario_as_toml_text(p2p_scenario: Path) -> None:
    result = rtolab.run(p2p_scenario.read_text(), duration=0.5)
    assert result.out_dir is None
    assert result.report["duration_s"] == pytest.approx(0.5)


def test_every_shipped_scenario_validates(scenarios_dir: Path) -> None:
    # emu-*.toml describe real-time emulations, which the emulator checks.
    files = sorted(f for f in scenarios_dir.glob("*.toml") if not f.name.startswith("emu-"))
    assert files, "no scenarios shipped"
    for f in files:
        summary = rtolab.validate(f)
        assert summary["hosts"] >= 1, f


def test_pcaps_open_in_tshark_without_warnings(
    p2p_scenario: Path, tmp_path: Path, tshark_expert
) -> None:
    result = rtolab.run(p2p_scenario, out=tmp_path)
    for pcap in result.pcaps:
        report = tshark_expert(pcap)
        assert "Malformed" not in report, report
        assert "Warning" not in report, report


def test_default_scenario_runs(tmp_path: Path) -> None:
    result = rtolab.run(rtolab.default_scenario(), out=tmp_path, duration=1.0)
    assert result.pcaps


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda t: t.replace('rate = "10Mbps"', 'rate = "10Mbps"\nbandwidth = 3'), "link[0]"),
        (lambda t: t.replace("queue = 50", 'queue = "fifty"'), "link[0].queue"),
        (lambda t: t.replace('rate = "10Mbps"', 'rate = "-5Mbps"'), "link[0].rate"),
        (lambda t: t.replace("loss = 0.02", "loss = 1.5"), "link[0].loss"),
    ],
)
def test_bad_scenarios_name_the_field(p2p_scenario: Path, change, field: str) -> None:
    text = change(p2p_scenario.read_text())
    with pytest.raises(rtolab.ScenarioError) as info:
        rtolab.validate(text)
    assert info.value.path.startswith(field), info.value
    assert "\n" not in str(info.value)


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(rtolab.ScenarioError, match="no such file"):
        rtolab.run(tmp_path / "absent.toml")


# ----- DataFrames -----


def test_packets_has_one_row_per_packet_per_capture(cbr_result: rtolab.Result) -> None:
    packets = cbr_result.packets
    assert set(packets["capture"]) == {"a-ab", "b-ab"}
    sent = packets[packets["capture"] == "a-ab"]
    received = packets[packets["capture"] == "b-ab"]
    cbr = _app_metrics(cbr_result, "cbr")
    sink = _app_metrics(cbr_result, "sink")
    assert len(sent) == cbr["sent_packets"]
    assert len(received) == sink["received_packets"]
    assert (packets["protocol"] == "udp").all()
    assert (packets["payload_len"] == 1000).all()
    assert (packets["len"] == 1028).all()
    assert packets["time_s"].is_monotonic_increasing
    assert set(received["direction"]) == {"rx"} and set(received["host"]) == {"b"}
    assert packets["error"].isna().all()


TSHARK_FIELDS = [
    "frame.time_epoch",
    "ip.src",
    "ip.dst",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.flags",
    "tcp.window_size_value",
    "tcp.len",
    "ip.len",
    "tcp.options.timestamp.tsval",
    "tcp.options.mss_val",
    "tcp.options.sack_le",
    "tcp.options.sack_re",
]
FLAG_BITS = {"FIN": 1, "SYN": 2, "RST": 4, "PSH": 8, "ACK": 16, "URG": 32, "ECE": 64, "CWR": 128}


def test_packets_agree_with_tshark_on_every_field(bulk_result: rtolab.Result) -> None:
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (the test command installs it)")
    pcap = next(p for p in bulk_result.pcaps if p.name == "a-ab.pcap")
    args = ["tshark", "-r", str(pcap), "-o", "tcp.relative_sequence_numbers:FALSE", "-T", "fields"]
    args += ["-E", "separator=/t", "-E", "aggregator=,"]
    for name in TSHARK_FIELDS:
        args += ["-e", name]
    lines = subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()
    ours = bulk_result.packets[bulk_result.packets["capture"] == "a-ab"].reset_index(drop=True)
    assert len(lines) == len(ours) > 1000
    for line, (_, row) in zip(lines, ours.iterrows(), strict=True):
        f = line.split("\t")
        assert round(float(f[0]) * 1e9) == row["time_ns"]
        assert (f[1], f[2]) == (row["src"], row["dst"])
        assert (int(f[3]), int(f[4])) == (row["src_port"], row["dst_port"])
        assert (int(f[5]), int(f[6])) == (row["seq"], row["ack"])
        names = row["flags"].split(",") if row["flags"] else []
        assert int(f[7], 16) == sum(FLAG_BITS[n] for n in names)
        assert int(f[8]) == row["window"]
        assert int(f[9]) == row["payload_len"]
        assert int(f[10]) == row["len"]
        assert (int(f[11]) if f[11] else None) == (None if pd.isna(row["tsval"]) else row["tsval"])
        assert (int(f[12]) if f[12] else None) == (None if pd.isna(row["mss"]) else row["mss"])
        blocks = [f"{le}-{re}" for le, re in zip(f[13].split(","), f[14].split(","), strict=True)]
        assert (" ".join(blocks) if f[13] else None) == (
            None if pd.isna(row["sack"]) else row["sack"]
        )


def test_traces_are_typed_columns(bulk_result: rtolab.Result) -> None:
    traces = bulk_result.traces
    assert {"t_s", "t_ns", "event", "kind", "node_name"} <= set(traces.columns)
    assert traces["t_ns"].is_monotonic_increasing
    armed = traces[traces["kind"] == "rto_armed"]
    assert len(armed) > 0 and (armed["event"] == "tcp").all()
    assert (armed["rto"] > 0).all() and pd.api.types.is_integer_dtype(armed["rto"])
    retransmissions = traces[traces["kind"] == "retransmission"]
    bulk = _app_metrics(bulk_result, "bulk")
    assert len(retransmissions[retransmissions["app_name"] == "bulk"]) >= bulk["retransmissions"]


def test_nested_trace_records_are_flattened(cbr_result: rtolab.Result) -> None:
    traces = cbr_result.traces
    received = traces[traces["kind"] == "datagram_received"]
    assert (received["event"] == "app").all()
    assert (received["detail.delay_ns"] > 0).all()
    assert set(received["app_name"]) == {"sink"}


def test_metrics_long_table_and_flat_keys(cbr_result: rtolab.Result) -> None:
    metrics = cbr_result.metrics
    assert list(metrics.columns) == ["scope", "name", "kind", "part", "metric", "value"]
    assert set(metrics["scope"]) >= {"run", "node", "link", "app"}
    flat = cbr_result.flat_metrics()
    sink = _app_metrics(cbr_result, "sink")
    assert flat["app.sink.received_packets"] == sink["received_packets"]
    link = cbr_result.report["links"][0]["stats"]["directions"][0]
    assert flat["link.ab.directions[0].delivered_packets"] == link["delivered_packets"]
    row = metrics[(metrics["name"] == "sink") & (metrics["metric"] == "lost")]
    assert row["value"].item() == sink["lost"]


def test_result_reloads_from_its_directory(cbr_result: rtolab.Result) -> None:
    again = rtolab.Result.load(cbr_result.out_dir)
    assert again.seed == cbr_result.seed and again.scenario == cbr_result.scenario
    assert again.flat_metrics() == cbr_result.flat_metrics()
    assert len(again.packets) == len(cbr_result.packets)


def test_run_without_out_keeps_files_while_the_result_lives(p2p_scenario: Path) -> None:
    result = rtolab.run(p2p_scenario, duration=0.5)
    assert result.out_dir is None
    assert all(p.is_file() for p in result.pcaps)
    assert len(result.packets) > 0
    directory = result.pcaps[0].parent
    del result
    import gc

    gc.collect()
    assert not directory.exists()


def test_read_capture_rejects_a_file_that_is_not_a_pcap(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"definitely not a capture")
    with pytest.raises(rtolab.CaptureError) as info:
        rtolab.read_capture(junk)
    assert info.value.path.endswith("junk.pcap")


def test_shipped_scenarios_run_by_name() -> None:
    shipped = rtolab.shipped_scenarios()
    assert {"default", "p2p-cbr", "three-hop"} <= set(shipped)
    report = rtolab.run_metrics("p2p-cbr", seed=2)
    assert report["name"] == "p2p-cbr" and report["seed"] == 2


# ----- scenarios built in Python -----


def _p2p_cbr_in_python() -> rtolab.Scenario:
    s = rtolab.Scenario(name="p2p-cbr", seed=1, duration="2s")
    s.hosts += [rtolab.Host("a"), rtolab.Host("b")]
    s.links.append(
        rtolab.Link(
            "ab",
            ends=[("a", "10.0.0.1/24"), ("b", "10.0.0.2/24")],
            rate="10Mbps",
            delay=0.005,
            queue=50,
            loss=0.02,
        )
    )
    s.captures += [
        rtolab.Capture("a", link="ab", file="a-ab.pcap"),
        rtolab.Capture("b", link="ab", file="b-ab.pcap", direction="rx"),
    ]
    s.apps += [
        rtolab.App("sink", host="b", name="sink", port=9000),
        rtolab.App(
            "cbr",
            host="a",
            name="cbr",
            destination="10.0.0.2:9000",
            size=1000,
            rate=2_000_000,
            start=0.1,
            stop="1.9s",
        ),
    ]
    return s


def test_scenario_built_in_python_runs_like_the_file(p2p_scenario: Path, tmp_path: Path) -> None:
    built = _p2p_cbr_in_python()
    assert built.validate()["hosts"] == 2
    ours = rtolab.run(built, seed=5, out=tmp_path / "py")
    theirs = rtolab.run(p2p_scenario, seed=5, out=tmp_path / "file")
    assert ours.flat_metrics() == theirs.flat_metrics()
    for a, b in zip(sorted(ours.pcaps), sorted(theirs.pcaps), strict=True):
        assert a.read_bytes() == b.read_bytes()


def test_scenario_round_trips_through_toml(p2p_scenario: Path) -> None:
    loaded = rtolab.Scenario.load(p2p_scenario)
    again = rtolab.Scenario.from_toml(loaded.to_toml())
    assert again == loaded
    assert loaded.get("link.ab.loss") == 0.02 and loaded.get("link.0.rate") == "10Mbps"
    assert loaded.get("app.cbr.size") == 1000


def test_with_values_sets_dotted_paths_by_index_or_name() -> None:
    base = _p2p_cbr_in_python()
    varied = base.with_values({"link.0.loss": 0.1, "app.cbr.rate": "1Mbps", "duration": "1s"})
    assert varied.get("link.ab.loss") == 0.1 and varied.get("app.1.rate") == "1Mbps"
    assert varied.get("duration") == "1s"
    assert base.get("link.ab.loss") == 0.02  # the original is untouched


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("link.7.loss", "no index 7"),
        ("link.nope.loss", "no link named 'nope'"),
        ("router.0.x", "no such field"),
        ("link..loss", "dotted path"),
    ],
)
def test_bad_dotted_paths_are_named(path: str, message: str) -> None:
    with pytest.raises(rtolab.ScenarioError, match=message) as info:
        _p2p_cbr_in_python().with_values({path: 1})
    assert info.value.path.startswith(path.split(".")[0]) or info.value.path == path


def test_invalid_python_scenario_names_the_field() -> None:
    bad = _p2p_cbr_in_python()
    bad.links[0].extra["loss"] = 1.5
    with pytest.raises(rtolab.ScenarioError) as info:
        rtolab.run(bad)
    assert info.value.path == "link[0].loss"


@pytest.mark.parametrize(
    ("values", "path", "message"),
    [
        ({"link.ab.lossy": 0.1}, "link.ab.lossy", "link[0].lossy: unknown field"),
        ({"duration": "1s", "link.ab.loss": 1.5}, "link.ab.loss", "must be between 0 and 1"),
        ({"app.cbr.rate": "fast"}, "app.cbr.rate", "'fast'"),
    ],
)
def test_with_values_checks_every_key_at_once(values: dict, path: str, message: str) -> None:
    with pytest.raises(rtolab.ScenarioError) as info:
        _p2p_cbr_in_python().with_values(values)
    assert info.value.path == path and message in info.value.message


def test_builder_writes_middleboxes_that_the_core_runs(tmp_path):
    from rtolab import App, Host, Link, Middlebox, Route, Scenario

    s = Scenario(name="mb", duration="5s")
    s.hosts += [Host("a"), Host("r"), Host("b")]
    s.links += [
        Link("ar", ends=[("a", "10.0.1.1/24"), ("r", "10.0.1.2/24")], rate="10Mbps", delay="5ms"),
        Link("rb", ends=[("r", "10.0.2.1/24"), ("b", "10.0.2.2/24")], rate="10Mbps", delay="5ms"),
    ]
    s.routes += [Route("a", "default", "10.0.1.2"), Route("b", "default", "10.0.2.1")]
    s.apps += [
        App("tcp-sink", "b", name="sink", port=5001),
        App("tcp-bulk", "a", name="bulk", peer="10.0.2.2:5001", bytes=100_000),
    ]
    s.middleboxes.append(
        Middlebox(
            "drop-list", "r", name="loss", drop=[2], match_={"protocol": "tcp", "payload": True}
        )
    )
    assert "[[middlebox]]" in s.to_toml()
    result = rtolab.run(s, out=tmp_path / "mb")
    row = result.report["middleboxes"][0]
    assert (row["name"], row["kind"], row["dropped"]) == ("loss", "drop-list", 1)
    sink = next(a for a in result.report["apps"] if a["name"] == "sink")
    assert (sink["bytes_received"], sink["bytes_corrupt"]) == (100_000, 0)
    bulk = next(a for a in result.report["apps"] if a["name"] == "bulk")
    assert bulk["retransmissions"] >= 1
    metrics = result.metrics
    dropped = metrics[(metrics["scope"] == "middlebox") & (metrics["metric"] == "dropped")]
    assert list(dropped["value"]) == [1.0]


def test_run_with_out_writes_what_the_command_writes(tmp_path: Path) -> None:
    import sys

    api_out, cli_out = tmp_path / "api", tmp_path / "cli"
    result = rtolab.run("p2p-cbr", out=api_out, duration=0.5)
    command = ["run", "p2p-cbr", "--out", str(cli_out), "--duration", "0.5", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", *command],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    def written(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}

    assert written(api_out) == written(cli_out)
    assert {"metrics.parquet", "metrics.json", "scenario.toml"} <= written(api_out)
    assert any(name.startswith("plots/") for name in written(api_out))

    def expanded(listed: list[Path], root: Path) -> set[str]:
        # The trace tables are listed as their directory.
        files = [f for p in listed for f in (sorted(p.rglob("*")) if p.is_dir() else [p])]
        return {f.relative_to(root).as_posix() for f in files}

    assert expanded(result.files, api_out) == written(api_out)
    listed = [Path(f) for f in json.loads(done.stdout)["files"]]
    assert expanded(listed, cli_out) == written(cli_out)


def test_run_with_out_can_leave_out_plots_and_add_the_report(tmp_path: Path) -> None:
    rtolab.run("p2p-cbr", out=tmp_path, duration=0.5, plots=False, report=True)
    assert (tmp_path / "metrics.parquet").is_file() and (tmp_path / "report.html").is_file()
    assert not (tmp_path / "plots").exists()


def test_the_public_namespace_is_what_all_lists() -> None:
    assert dir(rtolab) == sorted(rtolab.__all__)
    for name in rtolab.__all__:
        assert getattr(rtolab, name) is not None
    for leaked in ("os", "Path", "Any", "TYPE_CHECKING"):
        assert not hasattr(rtolab, leaked), leaked
