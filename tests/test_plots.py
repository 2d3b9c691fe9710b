"""Figures: each takes a Result or a DataFrame and draws what the run holds."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

import rtolab
from rtolab import plots


def drawn(ax: plt.Axes) -> int:
    """How many data artists an axes holds (lines, bar patches, point sets)."""
    return len(ax.lines) + len(ax.patches) + len(ax.collections)


def message(ax: plt.Axes) -> str:
    return " ".join(t.get_text() for t in ax.texts)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_time_sequence_marks_every_retransmission(bulk_result: rtolab.Result) -> None:
    ax = plots.time_sequence(bulk_result, capture="a-ab")
    labels = ax.get_legend_handles_labels()[1]
    retx = next(label for label in labels if label.startswith("retransmission"))
    # The flow's sender logged as many retransmissions as the plot finds in its capture.
    bulk = next(a for a in bulk_result.report["apps"] if a["name"] == "bulk")
    assert retx == f"retransmission ({bulk['retransmissions']})"
    assert "ACK" in labels
    # Same figure from the packets table alone.
    assert drawn(plots.time_sequence(bulk_result.packets)) > 0


def test_tcp_figures_from_traces(bulk_result: rtolab.Result) -> None:
    rto = plots.rto_vs_rtt(bulk_result)
    assert drawn(rto) >= 2 and rto.get_yscale() == "log"
    cwnd = plots.cwnd_over_time(bulk_result.traces)
    assert any(line.get_label().startswith("cwnd bulk") for line in cwnd.lines)
    lat, retx = plots.latency_retransmission_bars(bulk_result)
    assert [t.get_text() for t in lat.get_xticklabels()] == ["bulk", "sink"]
    heights = [p.get_height() for p in retx.patches]
    assert max(heights) == next(
        a["retransmissions"] for a in bulk_result.report["apps"] if a["name"] == "bulk"
    )


def test_latency_bars_show_each_apps_own_latency_beside_the_rtt(tmp_path: Path) -> None:
    # The default scenario's exchange client measures request to response;
    # its RTT samples are a different, much shorter, quantity.
    result = rtolab.run(rtolab.default_scenario(), out=tmp_path / "run")
    lat, _ = plots.latency_retransmission_bars(result)
    names = [t.get_text() for t in lat.get_xticklabels()]
    labels = lat.get_legend_handles_labels()[1]
    assert labels == ["app latency", "mean RTT sample"]
    app_bars, rtt_bars = (c.patches for c in lat.containers)
    client = names.index("device-api")
    exchange = result.flat_metrics()["app.device-api.latency_mean_ns"] / 1e6
    assert app_bars[client].get_height() == pytest.approx(exchange)
    assert 0 < rtt_bars[client].get_height() < exchange
    assert lat.get_ylabel() == "mean (ms)"


def test_tcp_figures_say_so_on_a_udp_run(cbr_result: rtolab.Result) -> None:
    assert "no TCP" in message(plots.time_sequence(cbr_result))
    assert "no RTO" in message(plots.rto_vs_rtt(cbr_result))
    assert "no cwnd" in message(plots.cwnd_over_time(cbr_result))
    lat, lost = plots.latency_retransmission_bars(cbr_result)
    assert [t.get_text() for t in lat.get_xticklabels()] == ["sink"]
    sink = cbr_result.flat_metrics()
    assert lost.patches[0].get_height() == sink["app.sink.lost"]


def test_throughput_and_drops(cbr_result: rtolab.Result) -> None:
    ax = plots.throughput_over_time(cbr_result)
    assert [line.get_label() for line in ax.lines] == ["ab → b"]
    # 2 Mbit/s of payload (plus headers) while the source sends.
    assert 1900 < max(ax.lines[0].get_ydata()) < 2400
    from_packets = plots.throughput_over_time(cbr_result.packets)
    assert {line.get_label() for line in from_packets.lines} == {"a-ab", "b-ab"}
    # Both captures see the same packets: the second line, drawn over the
    # first, is dashed so that the first shows through it.
    styles = [line.get_linestyle() for line in from_packets.lines]
    assert styles[0] == "-" and styles[1] != "-"
    drops = plots.drops_over_time(cbr_result)
    assert [line.get_label() for line in drops.lines] == ["random_loss"]
    lost = cbr_result.flat_metrics()["link.ab.directions[0].dropped_random_loss"]
    assert max(drops.lines[0].get_ydata()) == lost


def test_jain_index() -> None:
    assert plots.jain([5, 5, 5]) == pytest.approx(1.0)
    assert plots.jain([1, 0, 0, 0]) == pytest.approx(0.25)
    assert plots.jain([]) != plots.jain([])  # NaN without data


def test_goodput_fairness_of_runs_and_sweeps(cbr_result: rtolab.Result, tmp_path: Path) -> None:
    table = plots.goodput_fairness_table(cbr_result)
    sink = cbr_result.flat_metrics()["app.sink.received_bytes"]
    assert table["goodput_bps"].item() == pytest.approx(sink * 8 / cbr_result.duration_s)
    assert table["fairness"].item() == pytest.approx(1.0)
    spec = tmp_path / "s.toml"
    spec.write_text(
        'scenario = "three-hop"\nseeds = 2\n[set]\nduration = "1s"\n'
        '[grid]\n"app.h2-to-h1.rate" = ["100kbps", "1.5Mbps"]\n'
    )
    results = rtolab.sweep(spec, tmp_path / "out", workers=0).results
    fair = plots.goodput_fairness_table(results)
    assert len(fair) == 4
    by_rate = fair.groupby("param.app.h2-to-h1.rate")["fairness"].mean()
    # Two flows at 1 Mbit/s and 100 kbit/s are less fair than at 1 and 1.5.
    assert by_rate["100kbps"] < by_rate["1.5Mbps"] <= 1.0
    ax = plots.goodput_fairness(results)
    assert len(ax.collections) == 2
    lat, _ = plots.latency_retransmission_bars(results)
    assert {t.get_text() for t in lat.get_xticklabels()} == {"100kbps", "1.5Mbps"}


def test_plot_functions_reject_what_they_cannot_read() -> None:
    with pytest.raises(TypeError):
        plots.cwnd_over_time([1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        plots.latency_retransmission_bars(pd.DataFrame({"x": [1]}))


def test_plot_run_writes_pngs(bulk_result: rtolab.Result) -> None:
    files = plots.plot_run(bulk_result)
    names = {f.stem for f in files}
    assert {"throughput", "drops", "time-sequence", "rto-rtt", "cwnd"} <= names
    assert all(f.stat().st_size > 10_000 for f in files)


@pytest.fixture(scope="module")
def mesh_result(tmp_path_factory: pytest.TempPathFactory) -> rtolab.Result:
    """The study's mesh until every member has chosen a parent and the
    clients have sent for a while."""
    scenario = Path(__file__).parent.parent / "scenarios" / "mesh-uip.toml"
    return rtolab.run(scenario, duration=180, out=tmp_path_factory.mktemp("mesh"))


def test_the_routing_tree_of_a_mesh_run(mesh_result: rtolab.Result) -> None:
    tree = plots.tree_at(mesh_result)
    # Every member but the root has a parent, and following parents from
    # any member ends at the root.
    assert sorted(tree) == sorted(f"n{i}" for i in range(2, 17))
    for member in tree:
        node, hops = member, 0
        while node != "n1":
            node = tree[node]
            hops += 1
            assert node is not None and hops < 16, f"{member} does not reach n1"
    # Before the first DIO nobody has a parent.
    assert plots.tree_at(mesh_result, at=0.0) == {}
    ax = plots.routing_tree(mesh_result)
    # One label per node and one arrow (an annotation) per member.
    assert len(ax.texts) == 16 + 15
    assert "16 nodes" in ax.get_title()
    timeline = plots.parent_timeline(mesh_result)
    assert len(timeline.patches) >= 15
    names = [p.name for p in plots.save(plots.run_figures(mesh_result), mesh_result.out_dir)]
    assert "routing-tree.png" in names


def test_the_packets_table_reads_ipv6_and_leaves_radio_frames_out(
    mesh_result: rtolab.Result,
) -> None:
    packets = mesh_result.packets
    assert set(packets["capture"]) == {"server"}
    tcp = packets[packets["protocol"] == "tcp"]
    assert len(tcp) > 0 and tcp["error"].isna().all()
    assert tcp["src"].str.contains(":").all()
    assert (tcp["dst_port"] == 80).any()
