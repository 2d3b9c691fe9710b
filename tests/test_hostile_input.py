"""Input written to break rtolab: markup in names, deep nesting, garbled
result files, unusable file names, huge names and many apps. Each ends with
one clear line and exit status 2, or a bounded run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import rtolab
from cli_run import rtolab_cli
from rtolab import cli, comparison, plots, sweeps

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    return lines[0]


def p2p(tmp_path: Path, **replace: str) -> Path:
    text = (SCENARIOS / "p2p-cbr.toml").read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


MARKUP = {
    'name = "p2p-cbr"': 'name = "x[/]"',
    'name = "a"': 'name = "[bold]a[/]"',
    'host = "a"': 'host = "[bold]a[/]"',
    'name = "sink"': 'name = "s[/red]"',
}


@pytest.mark.parametrize("command", ["validate", "run"])
def test_markup_in_names_is_printed_as_written(command: str, tmp_path: Path) -> None:
    scenario = p2p(tmp_path, **MARKUP)
    args = ["--out", str(tmp_path / "o[/]"), "--no-plot"] if command == "run" else []
    done = rtolab_cli(command, str(scenario), *args)
    assert done.returncode == 0, done.stderr
    assert "x[/]" in done.stdout
    if command == "run":
        assert "s[/red]" in done.stdout and "[bold]a[/]" in done.stdout
        assert "o[/]/metrics.json" in done.stdout


@pytest.mark.parametrize("command", ["validate", "run"])
def test_markup_in_an_error_is_printed_as_written(command: str, tmp_path: Path) -> None:
    # Both hosts named "x[/]": the core's error quotes the name.
    scenario = p2p(tmp_path, **{'name = "a"': 'name = "x[/]"', 'name = "b"': 'name = "x[/]"'})
    assert '"x[/]"' in one_line_error(rtolab_cli(command, str(scenario)))


def test_control_characters_in_names_stay_on_one_line(tmp_path: Path) -> None:
    scenario = p2p(tmp_path, **{'name = "p2p-cbr"': 'name = "two\\nlines\\u001b[2J"'})
    done = rtolab_cli("run", str(scenario), "--out", str(tmp_path / "o"), "--no-plot")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("two\\x0alines\\x1b[2J: seed 1")
    assert "\x1b[2J" not in done.stdout


def nested(depth: int) -> str:
    return "a = " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize("command", ["validate", "run", "sweep"])
def test_deep_nesting_is_one_line_for_every_command(command: str, tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(nested(10_000))
    args = ["--out", str(tmp_path / "o")] if command != "validate" else []
    line = one_line_error(rtolab_cli(command, str(path), *args))
    assert "recursion" in line or "nested" in line


GARBLED = {
    "random bytes": bytes(range(256)) * 4,
    "not json": b"{ this is not json",
    "a list": b"[1, 2, 3]",
    "deep nesting": nested(100_000).removeprefix("a = ").encode(),
    "no seed": b'{"name": "x", "files": []}',
    "apps not objects": b'{"name": "x", "seed": 1, "files": [], "apps": [1, 2]}',
}


@pytest.mark.parametrize("case", sorted(GARBLED))
def test_report_on_a_garbled_metrics_file_names_it(case: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert rtolab_cli("run", "p2p-cbr", "--out", str(run), "--no-plot").returncode == 0
    (run / "metrics.json").write_bytes(GARBLED[case])
    line = one_line_error(rtolab_cli("report", str(run)))
    assert f"{run / 'metrics.json'}: garbled" in line


def test_report_on_a_garbled_trace_file_names_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cli = rtolab_cli("run", "p2p-cbr", "--out", str(run), "--no-plot", "--trace-format", "jsonl")
    assert cli.returncode == 0
    with open(run / "traces.jsonl", "ab") as f:
        f.write(b"\xff\xfe garbage\n")
    line = one_line_error(rtolab_cli("report", str(run)))
    assert str(run / "traces.jsonl") in line and "garbled" in line


def test_report_on_a_garbled_trace_table_names_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert rtolab_cli("run", "p2p-cbr", "--out", str(run), "--no-plot").returncode == 0
    table = run / "traces" / "packet_dropped.parquet"
    table.write_bytes(b"PAR1 not a table PAR1")
    line = one_line_error(rtolab_cli("report", str(run)))
    assert str(table) in line and "unreadable trace table" in line


#: Trace tables put in a run's place: (family, table's columns, what the error says).
WRONG_TRACE_TABLES = {
    "other columns": ("packet_dropped", {"x": [1, 2], "y": ["a", "b"]}, "no column t_ns"),
    "times as text": ("packet_dropped", {"t_ns": ["1", "2"]}, "column t_ns holds string"),
    "indices as text": (
        "packet_dropped",
        {"t_ns": [1, 2], "node": ["a", "b"], "reason": ["x", "y"]},
        "column node holds string",
    ),
    "bins without links": ("packet_received_bins", {"t_ns": [1, 2]}, "no column link"),
}


@pytest.mark.parametrize("case", sorted(WRONG_TRACE_TABLES))
def test_report_on_a_trace_table_of_another_schema_names_it(case: str, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    family, columns, needle = WRONG_TRACE_TABLES[case]
    run = tmp_path / "run"
    assert rtolab_cli("run", "p2p-cbr", "--out", str(run), "--no-plot").returncode == 0
    table = run / "traces" / f"{family}.parquet"
    assert table.is_file()
    pq.write_table(pa.table(columns), table)
    line = one_line_error(rtolab_cli("report", str(run)))
    assert str(table) in line and needle in line


def test_report_on_trace_events_of_another_schema_names_the_field(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cli = rtolab_cli("run", "p2p-cbr", "--out", str(run), "--no-plot", "--trace-format", "jsonl")
    assert cli.returncode == 0
    with open(run / "traces.jsonl", "a") as f:
        f.write('{"t_ns": 5, "event": "packet_dropped", "node": "a"}\n')
    line = one_line_error(rtolab_cli("report", str(run)))
    assert f"{run / 'traces.jsonl'}: garbled: events whose node is not an integer" in line


@pytest.mark.parametrize(
    ("number", "needle"),
    [
        ("9" * 5000, "field seed: an integer of 5000 digits"),
        ("-" + "9" * 400, "field seed: an integer of 400 digits, out of range"),
        ("NaN", "field seed: nan, not a finite number"),
    ],
)
def test_report_on_a_number_no_run_writes_names_the_field(
    number: str, needle: str, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert rtolab_cli("run", "p2p-cbr", "--out", str(run), "--no-plot").returncode == 0
    metrics = run / "metrics.json"
    text = metrics.read_text()
    assert '"seed": 1,' in text
    metrics.write_text(text.replace('"seed": 1,', f'"seed": {number},', 1))
    line = one_line_error(rtolab_cli("report", str(run)))
    assert f"{metrics}: garbled: {needle}" in line


def test_report_on_a_garbled_reproduction_manifest_names_it(tmp_path: Path) -> None:
    (tmp_path / "reproduce.json").write_bytes(b"\x00\x01 not json")
    line = one_line_error(rtolab_cli("report", str(tmp_path)))
    assert str(tmp_path / "reproduce.json") in line


@pytest.mark.parametrize(
    ("file", "needle"),
    [
        ("a\\u0000b.pcap", "control characters"),
        ("x" * 300, "at most 255 bytes"),
        ("...", "only dots and spaces"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_unusable_capture_file_names_fail_validation(
    file: str, needle: str, command: str, tmp_path: Path
) -> None:
    scenario = p2p(tmp_path, **{'file = "a-ab.pcap"': f'file = "{file}"'})
    out = tmp_path / "out"
    args = ["--out", str(out)] if command == "run" else []
    line = one_line_error(rtolab_cli(command, str(scenario), *args))
    assert line.startswith("error: capture[0].file: ") and needle in line
    assert len(line) < 300
    assert not out.exists() or not any(out.iterdir())  # nothing half written


def test_a_huge_scenario_name_gives_a_short_summary(tmp_path: Path) -> None:
    name = "n" * 1_000_000
    scenario = p2p(tmp_path, **{'name = "p2p-cbr"': f'name = "{name}"'})
    done = rtolab_cli("run", str(scenario), "--out", str(tmp_path / "o"), "--no-plot")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("n" * (cli.MAX_SHOWN - 1) + "…: seed 1") and len(first) < 200
    assert len(done.stdout) < 10_000
    # The whole name is kept in the results.
    assert json.loads((tmp_path / "o" / "metrics.json").read_text())["name"] == name


def many_apps(pairs: int) -> str:
    """Two hosts and ``pairs`` sink + CBR pairs, each pair on its own port."""
    parts = [
        'name = "many"\nduration = "0.05s"\n[[host]]\nname = "a"\n[[host]]\nname = "b"\n'
        '[[link]]\nname = "ab"\nkind = "point-to-point"\nrate = "100Mbps"\ndelay = "5ms"\n'
        'ends = [{ host = "a", address = "10.0.0.1/24" }, { host = "b", address = "10.0.0.2/24" }]'
    ]
    for i in range(pairs):
        port = 1024 + i
        parts.append(f'[[app]]\nkind = "sink"\nname = "sink{i}"\nhost = "b"\nport = {port}')
        parts.append(
            f'[[app]]\nkind = "cbr"\nname = "cbr{i}"\nhost = "a"\n'
            f'destination = "10.0.0.2:{port}"\nsize = 100\nrate = "80kbps"'
        )
    return "\n".join(parts) + "\n"


def python_calls(step: object) -> int:
    """How many Python and C functions ``step()`` calls: a measure of its
    work that, unlike wall time, is the same on every machine."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        step()  # type: ignore[operator]
    finally:
        sys.setprofile(None)
    return count


def post_processing(result: rtolab.Result) -> tuple[int, int]:
    """Calls made by the summary, the metrics table, the flat metrics and
    the per-app plot table of ``result``, and the lines of the summary."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, width=100)
    saved = cli.out_console
    cli.out_console = console
    try:

        def step() -> None:
            cli._print_summary(result.report, 0.0, result.files)
            result.__dict__.pop("metrics", None)  # computed afresh each time
            frames_metrics = result.metrics
            assert len(frames_metrics)
            result.flat_metrics()
            plots._run_latency_retx(result)

        calls = python_calls(step)
    finally:
        cli.out_console = saved
    return calls, len(buffer.getvalue().splitlines())


def test_post_processing_makes_no_python_call_per_app(tmp_path: Path) -> None:
    # The report's numbers become columns in the core and in Arrow, so the
    # Python calls of the summary, the metrics table, the flat metrics and
    # the plot's table are the same for 200 apps as for 800: none is made
    # per app or per number (the first measure also pays for first uses).
    measured = {}
    for pairs in (50, 100, 200, 400):
        result = rtolab.run(many_apps(pairs), out=tmp_path / str(pairs), seed=1)
        assert result.report.count("apps") == 2 * pairs
        measured[pairs] = post_processing(result)
        assert len(result.report["apps"]) == 2 * pairs  # still there when asked for
    calls = [measured[pairs][0] for pairs in (100, 200, 400)]
    assert max(calls) - min(calls) < 0.02 * min(calls), measured
    # The summary does not grow with the apps either.
    lines = {m[1] for m in measured.values()}
    assert len(lines) == 1, measured


def test_many_apps_draw_a_bounded_bar_chart() -> None:
    result = rtolab.run(many_apps(60), seed=1)
    fig = plots.plt.figure()
    lat_ax, retx_ax = fig.subplots(1, 2)
    plots.latency_retransmission_bars(result, axes=[lat_ax, retx_ax])
    assert len(lat_ax.get_xticklabels()) == plots.MAX_BARS
    assert lat_ax.get_title() == f"Latency and RTT (first {plots.MAX_BARS} of 60)"
    plots.plt.close(fig)


def test_a_run_report_lists_a_bounded_number_of_apps(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from rtolab import reports

    monkeypatch.setattr(reports, "MAX_ROWS", 7)
    result = rtolab.run(many_apps(10), seed=1, out=tmp_path / "run")
    page = rtolab.report(result.out_dir).read_text(encoding="utf-8")
    apps = page.split("<h2>Apps", 1)[1].split("<h2>", 1)[0]
    assert "The first 7 of 20 rows; every one is in" in apps
    assert apps.split("<tbody>")[1].count("<tr>") == 7
    assert "sink3" in apps and "sink4" not in apps


def test_progress_labels_are_plain_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    monkeypatch.setattr(cli, "err_console", Console(file=buffer, force_terminal=True, width=80))
    with cli._progress(quiet=False) as progress:
        task = progress.add_task("sweep x[/] [bold]y", total=2)
        progress.advance(task)
        progress.refresh()
    assert "sweep x[/] [bold]y" in buffer.getvalue()


def test_a_sweep_with_markup_in_its_names_runs(tmp_path: Path) -> None:
    scenario = p2p(tmp_path, **MARKUP)
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'name = "sw[/]"\nscenario = "{scenario.name}"\n[set]\nduration = "0.2s"\n'
        '[grid]\n"app.s[/red].port" = [9000]\n"app.cbr.size" = [100, 200]\n'
    )
    done = rtolab_cli("sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "0")
    assert done.returncode == 0, done.stderr
    assert "app.s[/red]" in done.stdout and "2 runs" in done.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--seed", "x[/]"], "error: rtolab run: Invalid value for '--seed'"),
        (["run", "--no-such-flag"], "error: rtolab run: No such option '--no-such-flag'"),
        (["no-such-command"], "error: rtolab: No such command 'no-such-command'"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(args: list[str], expected: str) -> None:
    done = rtolab_cli(*args)
    assert done.returncode == 2, done.stderr
    assert one_line_error(done).startswith(expected)


def test_deep_dotted_keys_never_reach_pythons_toml_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 50 000 levels in 100 kB: Python's reader took 9.8 GB and two minutes
    # before failing; the core's reader refuses it at once.
    path = tmp_path / "deep.toml"
    path.write_text("a" + ".a" * 50_000 + " = 1\n")

    def refuse(text: str) -> None:
        raise AssertionError("Python's TOML reader was given the deep file")

    monkeypatch.setattr(cli.tomllib, "loads", refuse)
    assert cli._is_sweep_file(str(path)) is False
    with pytest.raises(rtolab.SweepError, match=r"^sweep: nested 50000 levels deep"):
        sweeps.Sweep.load(path)
    # A sweep file as written still is one.
    monkeypatch.undo()
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('scenario = "p2p-cbr"\n[grid]\n"link.ab.loss" = [0.0, 0.5]\n')
    assert cli._is_sweep_file(str(sweep)) is True


def test_many_sinks_on_one_port_are_refused_by_the_core_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20 000 sinks on one port (1 MB): the core refuses the second one.
    # Before, the refusal sent the file through Python's TOML reader to see
    # whether it was a sweep, which took minutes for a million sinks.
    path = tmp_path / "sinks.toml"
    head = (
        'name = "sinks"\nduration = "1s"\n[[host]]\nname = "a"\n[[host]]\nname = "b"\n'
        '[[link]]\nname = "l"\nkind = "point-to-point"\n'
        'ends = [{ host = "a", address = "10.0.0.1/24" },\n'
        '        { host = "b", address = "10.0.0.2/24" }]\n'
        'rate = "1Mbps"\ndelay = "1ms"\n'
    )
    sinks = "".join(
        f'[[app]]\nkind = "sink"\nname = "s{i}"\nhost = "b"\nport = 9000\n' for i in range(20_000)
    )
    path.write_text(head + sinks)
    assert cli._is_large(str(path))

    def refuse(text: str) -> None:
        raise AssertionError("Python's TOML reader was given a scenario without a sweep key")

    monkeypatch.setattr(cli.tomllib, "loads", refuse)
    with pytest.raises(rtolab.ScenarioError, match=r"app\[1\]\.port.*already used by app\[0\]"):
        cli._large_scenario_summary(str(path))


def test_validate_refuses_deep_dotted_keys_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("a" + ".a" * 50_000 + " = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    one_line_error(done)


def test_compare_refuses_a_fifo_instead_of_waiting_on_it(tmp_path: Path) -> None:
    fifo = tmp_path / "capture.pcap"
    os.mkfifo(fifo)
    table = tmp_path / "table.csv"
    table.write_text("no.,time (s),from → to,flags,TCP len\n1,0.0,a → b,SYN,0\n")
    for args in ([str(fifo), str(table)], [str(table), str(fifo)]):
        done = subprocess.run(
            [sys.executable, "-m", "rtolab", "compare", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert f"{fifo}: not a regular file" in one_line_error(done)


def test_a_table_too_large_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(comparison, "MAX_TABLE_BYTES", 1000)
    path = tmp_path / "big.csv"
    path.write_text("no.,time (s),from → to,flags,TCP len\n" + "1,0.0,a → b,ACK,0\n" * 1000)
    read: list[int] = []
    real_open = open

    class Counted:
        def __init__(self, *args: Any) -> None:
            self.file = real_open(*args)

        def __enter__(self) -> Counted:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def read(self, size: int = -1) -> bytes:
            data = self.file.read(size)
            read.append(len(data))
            return data

    monkeypatch.setattr(comparison, "open", Counted, raising=False)
    with pytest.raises(comparison.CompareError, match="larger than the 1000 bytes a table"):
        comparison.read_packets(path)
    assert sum(read) <= 4  # the magic number, to tell a capture from a table


def test_a_table_with_too_many_rows_is_refused_before_its_packets_are_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(comparison, "MAX_PACKETS", 10)
    built: list[object] = []
    real = comparison._row_packet

    def counted(*args: Any) -> Any:
        built.append(args)
        return real(*args)

    monkeypatch.setattr(comparison, "_row_packet", counted)
    path = tmp_path / "long.csv"
    path.write_text("no.,time (s),from → to,flags,TCP len\n" + "1,0.0,a → b,ACK,0\n" * 1000)
    with pytest.raises(comparison.CompareError, match="more than 10 packets"):
        comparison.read_packets(path)
    assert not built


def test_figures_draw_a_trace_field_no_event_of_the_first_rows_had(tmp_path: Path) -> None:
    # In its first 5 s the RTO is armed before any RTT sample: the table's
    # rttvar column is all null, of null type, and was thinned with the rest.
    out = tmp_path / "run"
    done = rtolab_cli("run", "wifi-timelost", "--duration", "5s", "--out", str(out))
    assert done.returncode == 0, done.stderr
    schema = pq.read_schema(out / "traces" / "tcp_rto_armed.parquet")
    assert str(schema.field("rttvar").type) == "null"
    assert (out / "plots" / "rto-rtt.png").is_file()
