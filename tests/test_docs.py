"""The docs hold together: the API reference builds from the docstrings and
covers what users touch, the quick start shows real commands, every spec
citation names a section of docs/spec/, and every relative link resolves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_api_reference_builds(tmp_path: Path) -> None:
    pytest.importorskip("pdoc")
    done = subprocess.run(
        [sys.executable, "-W", "error", str(REPO / "docs" / "api" / "build.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    index = (tmp_path / "rtolab.html").read_text(encoding="utf-8")
    for name in ("run", "Result", "Scenario", "sweep", "report", "ScenarioError", "compare"):
        assert f'id="{name}"' in index, name
    api = (tmp_path / "rtolab" / "api.html").read_text(encoding="utf-8")
    assert "One row per packet per capture point" in api
    for page in ("sweeps", "plots", "reports", "scenario", "frames", "experiments", "comparison"):
        assert (tmp_path / "rtolab" / f"{page}.html").is_file(), page


def test_quickstart_commands_exist() -> None:
    """Every ``rtolab`` subcommand the quick start shows is a real command."""
    text = (REPO / "docs" / "quickstart.md").read_text(encoding="utf-8")
    shown = {
        line.split()[1]
        for line in text.splitlines()
        if line.strip().startswith("rtolab ") and len(line.split()) > 1
    }
    assert shown >= {"run", "sweep", "report", "validate", "reproduce"}
    done = subprocess.run(
        [sys.executable, "-m", "rtolab", "--help"], capture_output=True, text=True, check=True
    )
    for command in shown:
        assert command in done.stdout, command


# ----- citations of the specs in docs/spec/ -----

SPEC_DIR = REPO / "docs" / "spec"
#: Where citations are looked for, and which files hold them.
CITING_ROOTS = ("README.md", "benches", "crates", "docs", "python", "scenarios", "scripts", "tests")
CITING_SUFFIXES = {".md", ".py", ".rs", ".toml"}
#: Directories never scanned: build output, caches, virtual environments.
SKIPPED_DIRS = {"target", "node_modules", "__pycache__", "results"}

_NUMBER = r"\d+(?:\.\d+)*"
#: More section numbers continuing a citation: a range ("-1.2", "-§4") or
#: a list (", §3.1", " and §3.3"); a list item needs its own "§".
_MORE = rf"(?:\s*[-\u2013]\s*§?\s?{_NUMBER}|\s*(?:,|and|to|, and)\s*§\s?{_NUMBER})*"
#: "bridge spec §1.1-1.2, §3.1": the page's name, then its sections.
_NAMED = re.compile(rf"\b([A-Za-z][\w-]*)\s+spec §\s?({_NUMBER}{_MORE})")
#: "RFC 9293 §3.10.4" and its continuations: an RFC's clause, not a spec page.
_RFC = re.compile(rf"\bRFC\s?\d+\s*§\s?{_NUMBER}{_MORE}")
_UNNAMED = re.compile(rf"\bspec §\s?({_NUMBER})")
_BARE = re.compile(rf"§\s?({_NUMBER})")
_HEADING = re.compile(rf"^#{{1,6}}\s+({_NUMBER})\.?\s")


def spec_sections(page: Path) -> set[str]:
    """The section numbers a spec page's headings start with ("3.3")."""
    sections = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            sections.add(match.group(1))
    return sections


def citing_files() -> list[Path]:
    """Every file whose citations are checked (this file's examples aside)."""
    files = []
    for name in CITING_ROOTS:
        root = REPO / name
        if root.is_file():
            files.append(root)
            continue
        for directory, subdirs, names in os.walk(root):
            subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith(".")]
            files += [Path(directory) / n for n in names if Path(n).suffix in CITING_SUFFIXES]
    return sorted(f for f in files if f != Path(__file__).resolve())


def citations(text: str, own_page: str | None = None) -> list[tuple[str | None, str]]:
    """(page, section) for every spec citation in ``text``; see the rules at
    the top of docs/spec/README.md. ``own_page`` is the page a text inside
    docs/spec/ is. A page of ``None`` is a bare "§N" whose page cannot be
    told: "spec §N" without a page, or a bare "§N" in a text naming
    several pages."""
    # A citation may run on into the next comment line ("//! §3.1").
    text = re.sub(r"\n[ \t]*(?://[/!]?|#)[ \t]*", "\n", text)
    found: list[tuple[str | None, str]] = []
    named_pages = set()
    for match in _NAMED.finditer(text):
        named_pages.add(match.group(1))
        found += [(match.group(1), n) for n in re.findall(_NUMBER, match.group(2))]
    # What remains once named and RFC citations are blanked out is bare.
    rest = _RFC.sub(" ", _NAMED.sub(" ", text))
    # "spec §N" naming no page ("(spec §1.3)") cannot be told either.
    found += [(None, n) for n in _UNNAMED.findall(rest)]
    rest = _UNNAMED.sub(" ", rest)
    bare = _BARE.findall(rest)
    if own_page is not None:
        found += [(own_page, n) for n in bare]
    elif len(named_pages) == 1:
        found += [(next(iter(named_pages)), n) for n in bare]
    elif named_pages:
        found += [(None, n) for n in bare]
    # A text naming no page has no spec citations: its bare "§" are RFCs'.
    return found


def test_citation_parsing() -> None:
    text = (
        "bridge spec §1.1-1.2,\n//! §3.1): stack; RFC 9293 §3.10.4, §3.9 and\n"
        "(uip-rto spec §2.1) and ack-holding spec §1-§4 and §2.\n"
    )
    assert citations(text) == [
        ("bridge", "1.1"),
        ("bridge", "1.2"),
        ("bridge", "3.1"),
        ("uip-rto", "2.1"),
        ("ack-holding", "1"),
        ("ack-holding", "4"),
        ("ack-holding", "2"),
    ]
    assert citations("see §2 and RFC 6298 §5") == []
    assert citations("bridge spec §3 ... later §4.1") == [("bridge", "3"), ("bridge", "4.1")]
    assert citations("bridge spec §3; timelost spec §2; bare §5") == [
        ("bridge", "3"),
        ("timelost", "2"),
        (None, "5"),
    ]
    assert citations("as §2.2 says", own_page="uip-rto") == [("uip-rto", "2.2")]
    assert citations("(spec §1.3)") == [(None, "1.3")]
    assert citations("(bridge\n   spec §3.4)") == [("bridge", "3.4")]


def test_every_spec_citation_resolves() -> None:
    """Every "<page> spec §N" names a page of docs/spec/ with a heading N."""
    pages = {page.stem: spec_sections(page) for page in SPEC_DIR.glob("*.md")}
    assert {"bridge", "uip-rto", "timelost", "ack-holding"} <= set(pages)
    problems = []
    checked = 0
    for path in citing_files():
        text = path.read_text(encoding="utf-8")
        own = path.stem if path.parent == SPEC_DIR else None
        where = path.relative_to(REPO)
        for page, section in citations(text, own):
            checked += 1
            if page is None:
                problems.append(f"{where}: §{section}: which spec page? (docs/spec/README.md)")
            elif page not in pages:
                problems.append(f"{where}: {page} spec §{section}: no docs/spec/{page}.md")
            elif section not in pages[page]:
                problems.append(f"{where}: {page} spec §{section}: no such section")
    assert checked > 20, "the scan found almost no citations: is it looking in the right place?"
    assert not problems, "\n".join(problems)


# ----- relative links in the Markdown docs -----

_INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)


def relative_links(text: str) -> list[str]:
    """Targets of the Markdown links in ``text`` that point into the
    repository (no scheme, not a bare #anchor), outside code blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    targets = _INLINE_LINK.findall(prose) + _REFERENCE_LINK.findall(prose)
    return [t for t in targets if not re.match(r"[A-Za-z][\w+.-]*:", t) and not t.startswith("#")]


def test_relative_link_parsing() -> None:
    text = (
        "[a](docs/a.md) [b](https://x.org) [c](#here) [d](../b.md#part)\n"
        "`[e](f.md)`\n```\n[g](h.md)\n```\n[i]: spec/i.md\n"
    )
    assert relative_links(text) == ["docs/a.md", "../b.md#part", "spec/i.md"]


def test_relative_links_resolve() -> None:
    """Every relative link in README.md and docs/ names a file or folder of
    the repository."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in relative_links(page.read_text(encoding="utf-8")):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() or not path.is_relative_to(REPO):
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)
