"""The policy catalog as a user meets it: ``rtolab.policies()``, ``rtolab
list policies`` and selecting a policy by name in a scenario built in Python."""

from __future__ import annotations

import json
import subprocess

import pytest

import cli_run
import rtolab

FIXED_DEFAULTS = {"rto": "1s", "backoff": 2, "max": "60s"}


def rtolab_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_run.rtolab_cli(*args, columns=250)


def test_catalog_lists_every_family_and_the_fixed_policy() -> None:
    found = rtolab.policies()
    by_family = {f: [p.name for p in found if p.family == f] for f in ("rto", "cc", "ack")}
    assert by_family == {
        "rto": [
            "rfc6298",
            "lwip",
            "uip",
            "lim2020",
            "lim2024",
            "link_aware",
            "bridge",
            "per_byte",
            "fixed",
        ],
        "cc": ["reno", "newreno", "vegas", "vegas_ns2", "westwood", "tibet", "single_segment"],
        "ack": ["immediate", "delayed", "size_aware"],
    }
    fixed = next(p for p in found if p.name == "fixed")
    assert fixed.defaults == FIXED_DEFAULTS
    assert fixed.description.startswith("A constant retransmission timeout")
    for p in found:
        assert p.description and "\n" not in p.description, p
        assert "policy" not in p.defaults, p


def test_catalog_filters_by_family_and_rejects_unknown_ones() -> None:
    assert {p.family for p in rtolab.policies("ack")} == {"ack"}
    with pytest.raises(ValueError, match="unknown policy family 'timer'"):
        rtolab.policies("timer")


def test_list_policies_prints_a_table() -> None:
    done = rtolab_cli("list", "policies")
    assert done.returncode == 0, done.stderr
    for text in ("fixed", "backoff = 2", 'rto = "1s"', "newreno", "size_aware"):
        assert text in done.stdout, text


def test_list_policies_json_parses_and_matches_the_api() -> None:
    done = rtolab_cli("list", "policies", "--json", "--family", "rto")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [p["name"] for p in listed] == [p.name for p in rtolab.policies("rto")]
    assert next(p for p in listed if p["name"] == "fixed")["defaults"] == FIXED_DEFAULTS


def test_lims_readings_are_listed_with_what_they_mean() -> None:
    done = rtolab_cli("list", "policies", "--json", "--family", "rto")
    assert done.returncode == 0, done.stderr
    lim = next(p for p in json.loads(done.stdout) if p["name"] == "lim2024")
    assert lim["defaults"]["weak_samples"] == "at_most_two"
    assert lim["defaults"]["initial_mdev"] == "2s"
    assert '"any"' in lim["meanings"]["weak_samples"]
    assert "RTO" in lim["meanings"]["subtract_compares"]
    table = rtolab_cli("list", "policies", "--family", "rto")
    assert "weak_samples" in table.stdout and "CoCoA" in table.stdout


def test_list_policies_rejects_an_unknown_family_in_one_line() -> None:
    done = rtolab_cli("list", "policies", "--family", "[bold]x")
    assert done.returncode == 2
    assert "[bold]x" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def _fixed_rto_scenario(**rto: object) -> rtolab.Scenario:
    s = rtolab.Scenario(name="fixed-rto", duration="2s")
    s.hosts += [
        rtolab.Host("a", profile="rfc", tcp={"rto": {"policy": "fixed", **rto}}),
        rtolab.Host("b"),
    ]
    s.links.append(
        rtolab.Link(
            "ab", ends=[("a", "10.0.0.1/24"), ("b", "10.0.0.2/24")], rate="1Mbps", delay="10ms"
        )
    )
    s.apps += [
        rtolab.App("tcp-sink", host="b", port=5001),
        rtolab.App("tcp-bulk", host="a", peer="10.0.0.2:5001", bytes=10_000),
    ]
    return s


def test_a_policy_is_selected_by_name_from_python() -> None:
    assert _fixed_rto_scenario(rto="300ms", max="1.5s").validate()["hosts"] == 2
    with pytest.raises(rtolab.ScenarioError, match="backoff must be at least 1") as info:
        _fixed_rto_scenario(backoff=0).validate()
    assert info.value.path.startswith("host[0].tcp")
