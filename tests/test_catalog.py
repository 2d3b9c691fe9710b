"""The kind catalog as a user meets it: ``rtolab list links|macs|apps|
middleboxes`` (tables and ``--json``), ``rtolab.catalog.kinds()``, and the
docs that name every registered kind."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import cli_run
import rtolab
from rtolab.catalog import KIND_FAMILIES, kinds

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: ``rtolab list`` subcommand of each family.
COMMANDS = {"link": "links", "mac": "macs", "app": "apps", "middlebox": "middleboxes"}

#: A scenario whose one table of the family names ``kind = "nope"``.
UNKNOWN_KIND = {
    "link": '[[link]]\nname = "l"\nkind = "nope"\n',
    "app": '[[app]]\nkind = "nope"\nhost = "a"\n',
    "middlebox": '[[middlebox]]\nkind = "nope"\nhost = "a"\n',
    "mac": (
        '[[link]]\nname = "l"\nkind = "broadcast"\nrate = "250kbps"\n'
        "tx_range = 50.0\ninterference_range = 100.0\n"
        'members = [ { host = "a", address = "10.0.0.1/24", position = { x = 0, y = 0 } },\n'
        '  { host = "b", address = "10.0.0.2/24", position = { x = 1, y = 0 } } ]\n'
        'mac = { kind = "nope" }\n'
    ),
}


def rtolab_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_run.rtolab_cli(*args, columns=250)


def accepted_kinds(family: str, tmp_path: Path) -> list[str]:
    """The kinds the scenario reader accepts, as its error for an unknown one
    lists them: a source independent of the catalog."""
    path = tmp_path / f"{family}.toml"
    hosts = '[[host]]\nname = "a"\n[[host]]\nname = "b"\n'
    path.write_text(f'name = "x"\nduration = "1s"\n{hosts}{UNKNOWN_KIND[family]}')
    with pytest.raises(rtolab.ScenarioError) as caught:
        rtolab.validate(str(path))
    listed = re.search(r"expected one of ([^)]*)\)", str(caught.value))
    assert listed, str(caught.value)
    return listed.group(1).split(", ")


@pytest.mark.parametrize("family", KIND_FAMILIES)
def test_list_json_has_every_kind_the_reader_accepts_with_documented_fields(
    family: str, tmp_path: Path
) -> None:
    done = rtolab_cli("list", COMMANDS[family], "--json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [k["kind"] for k in listed] == accepted_kinds(family, tmp_path)
    for k in listed:
        assert k["family"] == family
        assert k["description"] and "\n" not in k["description"], k
        fields = list(k["fields"])
        while fields:
            f = fields.pop()
            fields.extend(f["fields"])
            assert f["name"] and f["type"] and f["meaning"], (k["kind"], f)
            # Each field either must be given or says what leaving it out means.
            assert f["required"] != (f["default"] is not None), (k["kind"], f)


def test_link_fields_carry_types_units_and_defaults() -> None:
    p2p = next(k for k in kinds("link") if k.kind == "point-to-point")
    fields = {f.name: f for f in p2p.fields}
    # In the struct's order, under their scenario keys.
    assert list(fields)[:3] == ["ends", "rate", "delay"]
    assert {"queue", "loss"} <= set(fields)
    assert (fields["rate"].type, fields["rate"].unit, fields["rate"].required) == (
        "rate",
        "bit/s",
        True,
    )
    assert (fields["queue"].type, fields["queue"].unit, fields["queue"].default) == (
        "integer",
        "packets",
        "100",
    )
    assert fields["loss"].default == "0" and not fields["loss"].required
    # A table's keys are listed under the field that holds it.
    end = {f.name: f for f in fields["ends"].fields}
    assert end["host"].required and end["address"].default == "none"
    fading = next(k for k in kinds("link") if k.kind == "fading")
    signal = next(f for f in fading.fields if f.name == "signal")
    speed = next(f for f in signal.fields if f.name == "speed")
    assert (speed.unit, speed.default) == ("m/s", "10")
    # TCP apps also take their profile and its overrides.
    bulk = next(k for k in kinds("app") if k.kind == "tcp-bulk")
    assert {"peer", "bytes", "profile", "tcp"} <= {f.name for f in bulk.fields}
    assert "profile" not in {
        f.name for f in next(k for k in kinds("app") if k.kind == "cbr").fields
    }


def test_list_links_prints_a_table_per_kind() -> None:
    done = rtolab_cli("list", "links")
    assert done.returncode == 0, done.stderr
    for text in (
        'kind = "gilbert-elliott"',
        "p_good_to_bad",
        "required",
        "packets",
        "100",
        "ends[].host",
        "signal.threshold_dbm",
        "ap.mobility.waypoints[].at",
    ):
        assert text in done.stdout, text


def test_list_macs_shows_a_kind_without_fields() -> None:
    done = rtolab_cli("list", "macs")
    assert done.returncode == 0, done.stderr
    assert 'kind = "aloha"' in done.stdout and "(no fields)" in done.stdout
    assert "max_backoffs" in done.stdout


def test_kinds_rejects_an_unknown_family() -> None:
    with pytest.raises(ValueError, match="unknown kind family 'links'"):
        kinds("links")


def test_every_registered_kind_is_named_in_the_scenario_reference() -> None:
    """docs/scenarios.md is where a reader learns what each kind is for: a
    kind registered without a word there fails here."""
    text = (DOCS / "scenarios.md").read_text()
    missing = [
        f"{k.family} {k.kind}"
        for k in kinds()
        if f'"{k.kind}"' not in text and f"`{k.kind}`" not in text
    ]
    assert not missing, f"not named in docs/scenarios.md: {', '.join(missing)}"


@pytest.mark.parametrize("doc", ["scenarios.md", "extending.md", "design.md"])
def test_docs_point_to_the_catalog(doc: str) -> None:
    text = " ".join((DOCS / doc).read_text().split())
    assert "rtolab list links" in text, doc
