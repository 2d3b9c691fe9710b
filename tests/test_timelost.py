"""The timelost experiment's tables, claims, figures and report, from
synthetic runs whose numbers are known in advance."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rtolab.experiments import timelost as tl

PLANNED_S = 300.0


def test_throughput_bins_are_megabits_per_second_per_second() -> None:
    # 125 000 bytes in second 0 (1 Mbit/s), 250 000 in second 2, nothing in 1.
    bins = tl.throughput_bins([0.2, 0.7, 2.5], [62_500, 62_500, 250_000], 3.0)
    assert bins.tolist() == pytest.approx([1.0, 0.0, 2.0])
    # A last partial bin counts over its own length: 0.5 s, 62 500 bytes.
    bins = tl.throughput_bins([0.5, 1.2], [125_000, 62_500], 1.5)
    assert bins.tolist() == pytest.approx([1.0, 1.0])
    # Deliveries outside the run are not counted.
    assert tl.throughput_bins([-1.0, 5.0], [1, 1], 2.0).tolist() == [0.0, 0.0]


def test_retries_are_binned_by_distance() -> None:
    rows = tl.retries_by_distance([1.0, 4.9, 5.0, 12.0, 13.0], [0, 1, 2, 3, 4], 5.0)
    assert rows == [(0.0, 2, 1), (5.0, 1, 2), (10.0, 2, 7)]
    assert tl.retries_by_distance([], [], 5.0) == []


def synthetic(
    config: str, seed: int, gain_at_edge: float, *, stop: float = PLANNED_S
) -> tl.RunSummary:
    """A run whose goodput is 4 Mbit/s before 100 s, 3 from 100 to 150 s
    and 1 afterwards, plus ``gain_at_edge`` after 150 s (half of it before)
    and a little seed-dependent noise; the sink gets its bytes in 0.1 s
    steps."""
    rng = np.random.default_rng(seed)
    t = np.arange(0, stop, 0.1)
    rate = np.where(t < 100, 4.0, np.where(t < 150, 3.0 + gain_at_edge / 2, 1.0 + gain_at_edge))
    rate = rate + rng.normal(0, 0.05, size=t.size)
    received = pd.DataFrame({"t_s": t, "bytes": rate * 1e6 / 8 * 0.1})
    distance = np.linspace(0, 60, 600)[: int(stop * 2)]
    frames = pd.DataFrame({"distance_m": distance, "retries": (distance > 40).astype(int)})
    return tl.run_summary(
        config,
        seed,
        planned_s=PLANNED_S,
        duration_s=stop,
        received=received,
        frames=frames,
        echoed_timelost_s=[0.0, 0.002, 0.004],
        mac_attempts=700,
        mac_retries=100,
        tcp_retransmissions=seed,
        rto_expirations=0,
    )


def planned(seeds: int = 6) -> list[tuple[str, int]]:
    return [(c, s) for c in tl.CONFIGS for s in range(1, seeds + 1)]


def summaries(seeds: int = 6) -> dict[tuple[str, int], tl.RunSummary]:
    gain = {"vegas-timelost": 0.8}
    return {(c, s): synthetic(c, s, gain.get(c, 0.0)) for c, s in planned(seeds)}


def test_runs_table_has_one_row_per_planned_run_and_flags_unfinished_ones() -> None:
    done = summaries(3)
    done[("reno", 2)] = synthetic("reno", 2, 0.0, stop=120.0)
    del done[("reno", 3)]
    runs, bins, distance = tl.tables(planned(3), done)
    assert list(runs.columns) == list(tl.RUN_COLUMNS)
    assert len(runs) == len(planned(3))
    assert runs[["config", "seed"]].apply(tuple, axis=1).tolist() == planned(3)
    flagged = runs[~runs["finished"]][["config", "seed"]].apply(tuple, axis=1).tolist()
    assert flagged == [("reno", 2), ("reno", 3)]
    # The unfinished run keeps what it measured; it has nothing after 150 s.
    short = runs[(runs["config"] == "reno") & (runs["seed"] == 2)].iloc[0]
    assert short["duration_s"] == 120.0
    assert short["throughput_mbps_before_100s"] == pytest.approx(4.0, abs=0.05)
    assert math.isnan(short["throughput_mbps_after_150s"])
    row = runs[(runs["config"] == "vegas-timelost") & (runs["seed"] == 1)].iloc[0]
    assert row["throughput_mbps_before_100s"] == pytest.approx(4.0, abs=0.05)
    assert row["throughput_mbps_100_150s"] == pytest.approx(3.4, abs=0.05)
    assert row["throughput_mbps_after_150s"] == pytest.approx(1.8, abs=0.05)
    assert (row["mac_attempts"], row["mac_retries"]) == (700, 100)
    assert row["mean_timelost_ms"] == pytest.approx(2.0)
    assert list(bins.columns) == list(tl.THROUGHPUT_COLUMNS)
    assert len(bins[(bins["config"] == "vegas") & (bins["seed"] == 1)]) == 300
    assert set(distance["distance_m"]) == {5.0 * i for i in range(13)}


def test_phase_table_counts_finished_runs_only() -> None:
    done = summaries(4)
    done[("vegas", 4)] = synthetic("vegas", 4, 0.0, stop=50.0)
    runs, _, _ = tl.tables(planned(4), done)
    phases = tl.phase_table(runs)
    vegas = phases[phases["config"] == "vegas"].set_index("phase")
    assert vegas.loc["after_150s", "n"] == 3
    assert vegas.loc["after_150s", "unfinished"] == 1
    assert vegas.loc["after_150s", "mean"] == pytest.approx(1.0, abs=0.05)
    assert vegas.loc["after_150s", "ci95"] > 0


def test_claims_hold_only_where_the_numbers_say_so() -> None:
    runs, _, _ = tl.tables(planned(), summaries())
    vegas = tl.claims(runs, "vegas", "vegas-timelost").set_index("claim")
    assert vegas["holds"].tolist() == [True, True, True]
    edge = vegas.iloc[2]
    assert edge["gain_mbps"] == pytest.approx(0.8, abs=0.05)
    assert edge["gain_ci95_low"] > 0
    assert (edge["n_base"], edge["n_corrected"]) == (6, 6)
    # Reno with the correction gains nothing: the first claim holds, the
    # gains do not.
    reno = tl.claims(runs, "reno", "reno-timelost")
    assert reno["holds"].tolist() == [True, False, False]
    # With one run per configuration nothing can be told.
    few, _, _ = tl.tables(planned(1), summaries(1))
    assert tl.claims(few)["holds"].tolist() == [None, None, None]


def test_outputs_and_report_lead_with_the_answer(tmp_path: Path) -> None:
    samples = pd.DataFrame(
        {"t_s": [1.0, 2.0, 160.0], "raw_s": [0.02, 0.02, 0.08], "corrected_s": [0.02, 0.02, 0.03]}
    )
    out = tmp_path / tl.SYSTEM
    tl.write_outputs(out, planned(3), summaries(3), samples, "vegas-timelost seed 1")
    for name in ("runs", "throughput", "retries_by_distance", "phases", "claims"):
        assert (out / f"{name}.csv").is_file(), name
    for png in ("throughput-vegas", "throughput-all", "retries-vs-distance", "rtt-raw-corrected"):
        assert (out / "figures" / f"{png}.png").stat().st_size > 5_000, png
    assert pd.read_csv(out / "runs.csv")["finished"].all()
    sections = tl.report_sections(tmp_path)
    assert sections[0].startswith("<h3>The study's claims and our numbers</h3>")
    assert sections[0].count("holds") >= 3
    assert "n = 3 and 3" in sections[0]
    assert any("throughput-vegas.png" in s for s in sections)
    assert sections[-1].startswith(
        f"<details><summary>runs.csv ({len(planned(3))} runs, 0 unfinished)"
    )


def test_a_summary_survives_its_json_form() -> None:
    s = synthetic("vegas", 1, 0.0)
    assert tl.RunSummary.from_dict(s.to_dict()) == s


def test_a_config_sets_the_source_and_turns_the_option_on_at_the_sink(
    bulk_scenario: Path,
) -> None:
    import tomllib

    base = bulk_scenario.read_text(encoding="utf-8")
    # Today's setting: the scenario's hosts and links as they are.
    data = tomllib.loads(tl.with_config(base, "11b-vegas-timelost"))
    hosts = {h["name"]: h for h in data["host"]}
    assert hosts["a"]["tcp"] == {
        "cc": {"policy": "vegas"},
        "timelost": True,
        "rtt_correction": True,
    }
    assert hosts["b"]["tcp"] == {"timelost": True}
    assert (hosts["a"]["profile"], hosts["b"]["profile"]) == ("linux", "linux")
    assert "capture" not in data
    assert data["name"] == "p2p-bulk-11b-vegas-timelost"
    # The study's setting: ns-2's hosts and Vegas.
    data = tomllib.loads(tl.with_config(base, "vegas-timelost"))
    hosts = {h["name"]: h for h in data["host"]}
    assert hosts["a"]["tcp"]["cc"] == {"policy": "vegas_ns2"}
    # ns-2's Vegas packets are 1000 bytes, its Reno's 1040 (the profile's).
    assert hosts["a"]["tcp"]["mss"] == 960
    assert (hosts["a"]["profile"], hosts["b"]["profile"]) == ("ns2", "ns2")
    raw = tomllib.loads(tl.with_config(base, "reno"))
    assert {h["name"]: h["tcp"] for h in raw["host"]}["a"]["rtt_correction"] is False
    assert "mss" not in {h["name"]: h["tcp"] for h in raw["host"]}["a"]
    with pytest.raises(ValueError, match="config"):
        tl.with_config(base, "cubic")


def test_rtt_samples_of_a_run_over_a_wired_path_echo_nothing(bulk_scenario: Path) -> None:
    """Over a wired link the option is agreed and echoed as 0: corrected
    samples equal raw ones."""
    from rtolab.api import run

    text = tl.with_config(bulk_scenario.read_text(encoding="utf-8"), "vegas-timelost")
    result = run(text, seed=1)
    from rtolab.plots import events

    # Both SYNs carried the option: every sample of the source records an echo.
    traced = events(result.traces, "rtt_sample")
    assert traced.loc[traced["node_name"] == "a", "timelost"].notna().all()
    samples = tl.rtt_samples(result.traces, "a")
    assert len(samples) > 100
    assert (samples["raw_s"] >= 0.02).all()
    assert (samples["timelost_s"] == 0).all()
    assert samples["corrected_s"].equals(samples["raw_s"])
    # The sink times only its SYN-ACK and its FIN.
    assert len(tl.rtt_samples(result.traces, "b")) <= 2


def test_reproduce_timelost_reduced_end_to_end(tmp_path: Path) -> None:
    """Two seeds of 10 s (the source starts at 5 s): every planned run in
    runs.csv, 1 s bins in throughput.csv, MAC retransmission time echoed
    end to end, figures and the report."""
    import json
    import shutil
    import subprocess
    import sys

    out = tmp_path / "out"
    reduced = ["--seeds", "2", "--duration", "10", "--workers", "0", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "reproduce", "timelost", "--out", str(out), *reduced],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    assert len(outcome["runs"]) == 2 * len(tl.CONFIGS)
    base = out / tl.SYSTEM
    runs = pd.read_csv(base / "runs.csv")
    assert list(runs.columns) == list(tl.RUN_COLUMNS)
    assert runs[["config", "seed"]].apply(tuple, axis=1).tolist() == planned(2)
    assert runs["finished"].all()
    # Near the AP the sink gets data at the first seconds already.
    today = runs["config"].str.startswith("11b-")
    assert (runs.loc[today, "throughput_mbps_before_100s"] > 0.1).all()
    assert (runs.loc[today, "mac_attempts"] > 100).all()
    classic = today & runs["config"].str.contains("vegas|reno")
    assert (runs.loc[classic, "throughput_mbps_before_100s"] > 0.5).all()
    assert (runs.loc[classic, "mac_attempts"] > 1000).all()
    # The study's 1 Mbit/s with RTS/CTS: tenfold fewer frames, still data.
    assert (runs.loc[~today, "throughput_mbps_before_100s"] > 0.1).all()
    assert (runs.loc[~today, "mac_attempts"] > 100).all()
    # Even next to the AP some frames need a second attempt at 11 Mbit/s
    # without RTS/CTS: the AP and the sink write that time into the option
    # and the source sees it echoed.
    assert (runs.loc[today, "mac_retries"] > 0).all()
    assert (runs.loc[today, "mean_timelost_ms"] > 0).all()
    bins = pd.read_csv(base / "throughput.csv")
    assert len(bins) == 2 * len(tl.CONFIGS) * 10
    if shutil.which("tshark") is not None:
        # The first seed's capture of the AP's radio, frame by frame.
        distance = pd.read_csv(base / "retries_by_distance.csv")
        assert set(distance["seed"]) == {1}
        assert set(distance["config"]) == {
            c for c, spec in tl.CONFIGS.items() if spec["sender"] == "vegas"
        }
        assert (distance["retries"] <= distance["frames"]).all()
        assert distance["frames"].sum() > 1000
    for png in ("throughput-vegas", "throughput-all", "rtt-raw-corrected"):
        assert (base / "figures" / f"{png}.png").is_file(), png
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "The study's claims and our numbers" in report
    # The claims are in the reproduction's headline table too, with our numbers.
    claims = outcome["claims"][f"{tl.SYSTEM}/vegas"]
    assert len(claims) == len(pd.read_csv(base / "claims.csv"))
    assert all("Mbit/s" in c["ours"] and "95 % CI" in c["ours"] for c in claims)
    headline = report[report.index('id="claims"') : report.index('id="verdicts"')]
    assert f"{tl.SYSTEM}/vegas" in headline


def test_the_wlan_reader_reads_the_frames_and_retry_bits_tshark_reads(tmp_path: Path) -> None:
    # 20 s of the 802.11b Vegas configuration, the AP's radio captured.
    import shutil
    import subprocess

    import rtolab
    from rtolab.frames import read_wlan_capture

    result = rtolab.run(
        tl.scenario("11b-vegas", duration=20.0, capture=True), out=tmp_path, traces="none"
    )
    pcap = result.out_dir / tl.CAPTURE_FILE
    ours = read_wlan_capture(pcap)
    assert set(ours["kind"].dropna()) <= {"data", "ack", "rts", "cts"}
    assert ours["kind"].eq("data").sum() > 1000 and ours["retry"].any()
    data = tl.captured_data_frames(pcap)
    assert len(data) > 1000 and data["retry"].any() and not data["retry"].all()
    tshark = shutil.which("tshark")
    assert tshark is not None, "the test command installs tshark"
    fields = [tshark, "-r", str(pcap), "-T", "fields", "-e", "frame.len", "-e", "wlan.fc.retry"]
    done = subprocess.run(
        [*fields, "-e", "wlan.fc.type_subtype"], capture_output=True, text=True, check=True
    )
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    assert [int(r[0]) for r in rows] == ours["len"].tolist()
    theirs_retry = [r[1].strip().lower() in ("1", "true") for r in rows]
    assert theirs_retry == ours["retry"].astype(bool).tolist()
    # Data frames are type 2, subtype 0 (0x0020); the others are control frames.
    theirs_data = [int(r[2], 0) == 0x20 for r in rows]
    assert theirs_data == ours["kind"].eq("data").tolist()


# ----- scripts/ns2-check: ns-2 beside the simulator -----

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _ns2check():
    import sys

    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import ns2check.cases
    import ns2check.ns2
    import ns2check.report

    return ns2check


def test_ns2_trace_lines_are_read_by_their_flags() -> None:
    ns2check = _ns2check()
    data = (
        "s -t 5.303408400 -Hs 1 -Hd 4194305 -Ni 1 -Nx 10.00 -Ny 10.00 -Nz 0.00 -Ne -1.000000 "
        "-Nl MAC -Nw --- -Ma 13a -Md 1 -Ms 0 -Mt 800 -Is 0.0 -Id 4194305.0 -It tcp -Il 1058 "
        "-If 0 -Ii 34 -Iv 30 -Pn tcp -Ps 18 -Pa 0 -Pf 0 -Po 0 "
    )
    row = ns2check.ns2.parse_line(data)
    assert row == {
        "event": "s", "t": "5.303408400", "node": "1", "x": "10.00", "y": "10.00",
        "layer": "MAC", "reason": "---", "duration": "13a", "ethertype": "800", "type": "tcp",
        "len": "1058", "uid": "34", "seq": "18", "ack": "0",
    }  # fmt: skip
    # A control frame has no type; a wired link's line is not a wireless event.
    rts = "s -t 5.3027 -Hs 1 -Hd -2 -Ni 1 -Nx 10.00 -Ny 10.00 -Nl MAC -Nw --- -Ma 238e -Md 1"
    assert "type" not in ns2check.ns2.parse_line(rts)
    assert ns2check.ns2.parse_line("+ 5.03539 0 1 tcp 1000 ------- 0 0.0.0.0 1.0.1.0 1 4") is None


def _ns2_case(tmp_path: Path, pick: Any) -> tuple[str, pd.Series]:
    """Runs the case `pick(ns2check.cases)` with one seed in both
    simulators; its table and its measures by (column, measure)."""
    ns2check = _ns2check()
    binary = ns2check.ns2.ensure_ns()
    case = pick(ns2check.cases)
    text, ok = ns2check.report.run_case(case, tmp_path, 1, binary, progress=lambda _: None)
    assert ok, text
    return text, pd.read_csv(tmp_path / "runs.csv").set_index(["column", "measure"])["value"]


def test_ns2_check_smoke_both_simulators_near_the_access_point(tmp_path: Path) -> None:
    """ns-2.35 and rtolab, one station 10 m from the AP, 12 s with a TCP
    Vegas transfer from 5 s: both MACs deliver every frame at the first
    attempt after an RTS/CTS exchange, and the goodputs agree."""
    text, runs = _ns2_case(tmp_path, lambda cases: cases.distance(12.0, (10.0,)))
    for column in ("ns-2", "rtolab"):
        assert runs[(column, "down: delivery per attempt")] == pytest.approx(1.0, abs=0.01)
        assert runs[(column, "down: attempts per frame")] == pytest.approx(1.0, abs=0.02)
        assert runs[(column, "down: RTS per frame")] >= 1.0
        assert runs[(column, "down: RTS/CTS exchanges per frame")] >= 1.0
        assert runs[(column, "down: drops at retry limit")] == 0
        # 1 Mbit/s with RTS/CTS and the ACKs' own exchanges: well below 1.
        assert 0.3 < runs[(column, "goodput transfer (Mbit/s)")] < 0.8
        assert runs[(column, "RTT p50 (ms)")] > 20  # the wired 2 x 10 ms and more
    ns, ours = (runs[(c, "goodput transfer (Mbit/s)")] for c in ("ns-2", "rtolab"))
    assert ours == pytest.approx(ns, rel=0.15)
    assert "| 10 m | down: delivery per attempt |" in text


@pytest.mark.parametrize("cc", ["reno", "westwood"])
def test_ns2_check_smoke_loss_based_senders_on_the_moving_case(tmp_path: Path, cc: str) -> None:
    """The moving case's first 12 s (the station within 50 m of the AP)
    with Reno (ns-2's Agent/TCP/Reno) and Westwood+ (ns-2's TCP-Linux
    agent running Linux's westwood): both simulators run the sender, which
    fills its 20-packet window into the AP's queue (median RTT over 150 ms,
    where Vegas keeps about 60) at the same RTT. Reno's goodputs agree;
    ns-2's TCP-Linux agent loses its first segment at the AP's ARP queue
    and waits out its 3 s initial timeout, so its 7 s of transfer carry
    less."""
    text, runs = _ns2_case(tmp_path, lambda cases: cases.moving(12.0, cc))
    for column in ("ns-2", "rtolab"):
        assert 0.3 < runs[(column, "goodput before 100 s (Mbit/s)")] < 0.8
        assert runs[(column, "RTT p50 (ms)")] > 150
    ns, ours = (runs[(c, "RTT p90 (ms)")] for c in ("ns-2", "rtolab"))
    assert ours == pytest.approx(ns, rel=0.15)
    if cc == "reno":
        ns, ours = (runs[(c, "goodput before 100 s (Mbit/s)")] for c in ("ns-2", "rtolab"))
        assert ours == pytest.approx(ns, rel=0.15)
    script = (tmp_path / f"moving-{cc}" / "ns-2" / "seed1" / "ns2.tcl").read_text()
    assert {"reno": "Agent/TCP/Reno", "westwood": "select_ca westwood"}[cc] in script
    assert "| moving sink | goodput before 100 s (Mbit/s) |" in text


@pytest.mark.parametrize(("cc", "packet"), [("vegas", 1000), ("reno", 1040)])
def test_ns2_check_sends_packets_of_ns2s_size_per_sender(
    tmp_path: Path, cc: str, packet: int
) -> None:
    """ns-2's Vegas agent adds no header bytes to its 1000-byte
    `packetSize_`, its Reno agent adds 40: the wired hop carries data
    packets of that size in ns-2's trace and in rtolab's capture alike."""
    from dataclasses import replace

    import tomllib

    import rtolab
    from rtolab.scenario import toml_text

    ns2check = _ns2check()
    setting = ns2check.setting
    s = replace(ns2check.cases.moving(7.0, cc).rows[0][1], duration_s=7.0)
    trace = ns2check.ns2.run(setting.tcl(s), tmp_path / "ns2")
    # Wired-link lines: "+ t from to tcp SIZE ..."; data packets only.
    sizes = {
        int(f[5])
        for f in (line.split() for line in trace.read_text().splitlines())
        if len(f) > 5 and f[0] == "+" and f[4] == "tcp" and int(f[5]) > 100
    }
    assert sizes == {packet}
    data = tomllib.loads(setting.toml(s))
    wired = next(link for link in data["link"] if link["kind"] != "wifi")
    data["capture"] = [{"host": "source", "link": wired["name"], "file": "wired.pcap"}]
    result = rtolab.run(toml_text(data), out=tmp_path / "rtolab", traces="none")
    frames = rtolab.read_capture(result.out_dir / "wired.pcap")
    ours = set(frames[frames["payload_len"] > 0]["len"])
    assert ours == {packet}


def test_ns2_check_pairs_columns_by_seed() -> None:
    """The check's paired differences: per seed, timelost against without
    in each simulator, and rtolab's ns-2 loss handling against NewReno's;
    a seed missing from one column drops out of its pairs."""
    report = _ns2check().report
    records = []
    values = [
        (0.10, 0.12, 0.20, 0.21, 0.19),
        (0.12, 0.13, 0.18, 0.20, 0.18),
        (0.11, 0.14, 0.19, 0.19, 0.17),
    ]
    for seed, (ns, ns_tl, ours, ours_tl, nr) in enumerate(values, start=1):
        for column, value in [
            ("ns-2", ns), ("ns-2 timelost", ns_tl), ("rtolab", ours),
            ("rtolab timelost", ours_tl), (report.NEWRENO_LOSS, nr),
        ]:  # fmt: skip
            records.append(("moving sink", column, seed, "goodput after 150 s (Mbit/s)", value))
    records.append(("moving sink", "rtolab timelost", 4, "goodput after 150 s (Mbit/s)", 0.5))
    frame = pd.DataFrame(records, columns=["row", "column", "seed", "measure", "value"])
    columns = (*report.TIMELOST_COLUMNS, (report.NEWRENO_LOSS, False))
    lines = report.paired_differences(frame, columns)
    by_label = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    # ns-2: +0.02, +0.01, +0.03: mean 0.02, sd 0.01, CI 1.96 * 0.01 / sqrt(3).
    half = 1.96 * 0.01 / math.sqrt(3)
    assert f"+0.0200 ± {half:.4f} | 0.0100 | 3 |" in by_label["ns-2: timelost - without"]
    # rtolab's seed 4 has no partner without timelost: n stays 3.
    assert by_label["rtolab: timelost - without"].endswith("| 3 |")
    assert "+0.0100 ±" in by_label["rtolab: ns-2 loss - NewReno loss"]
    assert report.paired_differences(frame, report.COLUMNS) == []


def test_ns2_check_smoke_two_saturated_stations(tmp_path: Path) -> None:
    """Two stations next to the AP saturating the uplink with UDP from 5 s
    to 8 s: both simulators carry what one 1 Mbit/s channel with RTS/CTS
    can, and both report it (the sink's datagrams are counted on each
    side). A station's datagrams are 1020 bytes in both (ns-2's DSDV adds
    an IP header to the 1000-byte CBR packets a node originates), so the
    goodputs agree within 1 % (rtolab's 1000-byte datagrams gave 1.4 %
    more)."""
    _, runs = _ns2_case(tmp_path, lambda cases: cases.stations(8.0, (2,)))
    for column in ("ns-2", "rtolab"):
        assert 0.5 < runs[(column, "goodput saturated (Mbit/s)")] < 1.0
        assert runs[(column, "up: RTS/CTS exchanges per frame")] >= 1.0
    ns, ours = (runs[(c, "goodput saturated (Mbit/s)")] for c in ("ns-2", "rtolab"))
    assert ours == pytest.approx(ns, rel=0.01)
    # Neither repeats an exchange; ns-2's ARP reply to each station (a data
    # frame without a type, SIFS after the station's CTS) is not a CTS.
    assert runs[("ns-2", "up: RTS/CTS exchanges per frame")] == 1.0
    # ns-2's routing layer hands the AP's agent 1020-byte packets.
    script = (tmp_path / "stations-2" / "ns-2" / "seed1" / "ns2.tcl").read_text()
    assert "packetSize_ 1000" in script
    scenario = (tmp_path / "stations-2" / "rtolab" / "seed1" / "rtolab.toml").read_text()
    assert "size = 992" in scenario  # 1020 bytes with the UDP and IP headers


def test_ns2_check_twenty_stations_saturate_from_the_start(tmp_path: Path) -> None:
    """Twenty stations starting at the same instant: ns-2's ARP requests,
    broadcast together, would collide and cost it most of the first
    seconds (0.35 Mbit/s from 5 s to 8 s); with each station's address
    resolved by an early datagram, both simulators carry the channel's
    saturation goodput from the start, within 5 % of each other."""
    _, runs = _ns2_case(tmp_path, lambda cases: cases.stations(8.0, (20,)))
    ns2, ours = (runs[(c, "goodput saturated (Mbit/s)")] for c in ("ns-2", "rtolab"))
    assert ns2 > 0.75 and ours > 0.75
    assert abs(ns2 - ours) / ours < 0.05
