"""Scenarios built in Python.

A :class:`Scenario` holds the same tables as a scenario file (hosts, links,
routes, captures, apps) as Python objects, and turns into TOML with
:meth:`Scenario.to_toml`. :func:`rtolab.run` and :func:`rtolab.validate`
accept it wherever they accept a file. Validation stays in the core: the
Python objects only carry values, so every model the simulator knows
(including ones added after this module was written) can be described by
passing its parameters as keyword arguments.

Example::

    from rtolab import App, Capture, Host, Link, Scenario

    s = Scenario(name="two-hosts", duration=2.0)
    s.hosts += [Host("a"), Host("b")]
    s.links.append(
        Link("ab", ends=[("a", "10.0.0.1/24"), ("b", "10.0.0.2/24")],
             rate="10Mbps", delay="5ms", loss=0.01)
    )
    s.captures.append(Capture("b", link="ab", file="b.pcap"))
    s.apps += [App("sink", host="b", port=9000),
               App("cbr", host="a", destination="10.0.0.2:9000", size=500, rate="1Mbps")]
    result = rtolab.run(s, seed=3)

Dotted paths name a value inside a scenario, as in sweep files:
``link.0.loss`` (by index), ``link.ab.loss`` (by name), ``app.cbr1.rate``,
``duration``. :meth:`Scenario.get` and :meth:`Scenario.with_values` use them.
"""

from __future__ import annotations

import copy
import datetime
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import tomli_w
import tomllib

from rtolab import _native
from rtolab.errors import ScenarioError

#: Top-level arrays of tables, in the order a scenario file lists them,
#: with the Python attribute that holds each.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("host", "hosts"),
    ("link", "links"),
    ("route", "routes"),
    ("capture", "captures"),
    ("app", "apps"),
    ("middlebox", "middleboxes"),
)


def toml_text(data: Mapping[str, Any]) -> str:
    """A scenario's tables (or any tables) as TOML text."""
    return tomli_w.dumps(dict(data))


def duration_text(value: str | float | datetime.timedelta) -> str:
    """A duration for a scenario file: strings pass through, numbers are seconds.

    Numbers become whole nanoseconds (``0.25`` → ``"250000000ns"``) so that
    no precision is lost on the way to the core.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError("duration", f"expected seconds or a string like '5ms', got {value!r}")
    return f"{round(value * 1e9)}ns"


def rate_text(value: str | float) -> str:
    """A rate for a scenario file: strings pass through, numbers are bit/s."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError("rate", f"expected bit/s or a string like '1Mbps', got {value!r}")
    return f"{round(value)}bps"


def _position(value: Any) -> Any:
    if isinstance(value, tuple | list) and len(value) == 2:
        return {"x": value[0], "y": value[1]}
    return value


class _Table:
    """Shared behaviour of the scenario's tables: typed fields plus free extras.

    Fields left at ``None`` are omitted from the TOML, so the core applies
    its defaults. Keys the class does not name go in ``extra`` and are
    written as given, so new parameters of the core need no change here.
    """

    extra: dict[str, Any]
    _kind_keys: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """The table as it appears in TOML (``None`` fields left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = _plain(value)
        out.update({k: _plain(v) for k, v in self.extra.items() if v is not None})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Builds the table from its TOML form; unknown keys go to ``extra``."""
        names = {f.name for f in fields(cls) if f.name != "extra"}  # type: ignore[arg-type]
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names}
        return cls(**known, **extra)


def _plain(value: Any) -> Any:
    """Python values as TOML values (tables become dicts, tuples lists)."""
    if isinstance(value, _Table):
        return value.to_dict()
    if isinstance(value, datetime.timedelta):
        return duration_text(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


@dataclass(init=False)
class Host(_Table):
    """A host (every host also forwards, so routers are hosts too)."""

    name: str
    position: dict[str, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, name: str, position: Any = None, **extra: Any) -> None:
        self.name = name
        self.position = _position(position)
        self.extra = extra


@dataclass(init=False)
class Link(_Table):
    """A link. ``ends`` (point-to-point, half-duplex) take ``(host, address)``
    pairs or dicts; ``members`` (broadcast) take dicts or ``(host, address)``
    pairs. Other parameters (``rate``, ``delay``, ``queue``, ``loss``,
    ``tx_range``...) are keyword arguments, as in the file."""

    name: str
    kind: str = "point-to-point"
    ends: list[dict[str, Any]] | None = None
    members: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        name: str,
        kind: str = "point-to-point",
        ends: Iterable[Any] | None = None,
        members: Iterable[Any] | None = None,
        **extra: Any,
    ) -> None:
        self.name = name
        self.kind = kind
        self.ends = None if ends is None else [_attachment(e) for e in ends]
        self.members = None if members is None else [_attachment(m) for m in members]
        if "rate" in extra:
            extra["rate"] = rate_text(extra["rate"])
        if "delay" in extra:
            extra["delay"] = duration_text(extra["delay"])
        self.extra = extra


def _attachment(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        out = dict(value)
        if "position" in out:
            out["position"] = _position(out["position"])
        return out
    if isinstance(value, tuple | list) and len(value) in (2, 3):
        out = {"host": value[0], "address": value[1]}
        if len(value) == 3:
            out["position"] = _position(value[2])
        return out
    raise ScenarioError("link", f"an end is (host, address) or a table, got {value!r}")


@dataclass(init=False)
class Route(_Table):
    """A static route on ``host``: ``destination`` (a prefix or ``"default"``) via ``via``."""

    host: str
    destination: str
    via: str
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, host: str, destination: str, via: str, **extra: Any) -> None:
        self.host = host
        self.destination = destination
        self.via = via
        self.extra = extra


@dataclass(init=False)
class Capture(_Table):
    """A capture point: the interface of ``host`` on ``link`` (or with address
    ``interface``) written to ``file``; ``direction`` is ``both``, ``tx`` or ``rx``."""

    host: str
    file: str
    link: str | None = None
    interface: str | None = None
    direction: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        host: str,
        file: str,
        link: str | None = None,
        interface: str | None = None,
        direction: str | None = None,
        **extra: Any,
    ) -> None:
        self.host = host
        self.file = file
        self.link = link
        self.interface = interface
        self.direction = direction
        self.extra = extra


@dataclass(init=False)
class App(_Table):
    """An application of ``kind`` (``cbr``, ``sink``, ...) on ``host``; its
    parameters are keyword arguments, as in the file."""

    kind: str
    host: str
    name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, kind: str, host: str, name: str | None = None, **extra: Any) -> None:
        self.kind = kind
        self.host = host
        self.name = name
        if "rate" in extra:
            extra["rate"] = rate_text(extra["rate"])
        for key in ("start", "stop"):
            if key in extra:
                extra[key] = duration_text(extra[key])
        self.extra = extra


@dataclass(init=False)
class Middlebox(_Table):
    """A middlebox of ``kind`` (``drop-list``, ``stall``, ...) on ``host``: it
    sees every packet the host receives from a link; its parameters are
    keyword arguments, as in the file (``match`` is a Python keyword, so the
    packet filter is ``match_`` or ``**{"match": ...}``)."""

    kind: str
    host: str
    name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __init__(self, kind: str, host: str, name: str | None = None, **extra: Any) -> None:
        self.kind = kind
        self.host = host
        self.name = name
        if "match_" in extra:
            extra["match"] = extra.pop("match_")
        for key in ("start", "end"):
            if key in extra:
                extra[key] = duration_text(extra[key])
        self.extra = extra


_SECTION_TYPES: dict[str, type[_Table]] = {
    "host": Host,
    "link": Link,
    "route": Route,
    "capture": Capture,
    "app": App,
    "middlebox": Middlebox,
}


@dataclass
class Scenario:
    """A scenario: what :func:`rtolab.run` simulates.

    ``duration`` is seconds (a number) or a string with a unit (``"5s"``);
    ``seed`` defaults to the core's when ``None``. ``extra`` carries
    top-level keys this class does not name.
    """

    name: str
    duration: str | float = "10s"
    seed: int | None = None
    hosts: list[Host] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    routes: list[Route] = field(default_factory=list)
    captures: list[Capture] = field(default_factory=list)
    apps: list[App] = field(default_factory=list)
    middleboxes: list[Middlebox] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The scenario as the nested dicts and lists of its TOML form."""
        out: dict[str, Any] = {"name": self.name}
        if self.seed is not None:
            out["seed"] = self.seed
        out["duration"] = duration_text(self.duration)
        out.update({k: _plain(v) for k, v in self.extra.items() if v is not None})
        for key, attr in SECTIONS:
            items = getattr(self, attr)
            if items:
                out[key] = [item.to_dict() for item in items]
        return out

    def to_toml(self) -> str:
        """The scenario as TOML text, ready for :func:`rtolab.run` or a file."""
        return toml_text(self.to_dict())

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Writes the scenario to a TOML file; returns its path."""
        from rtolab import outdir

        target = Path(path)
        # A link at the file's name is replaced, never written through.
        outdir.write_text(outdir.open_root(target.parent), target.name, self.to_toml())
        return target

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Builds a scenario from the dict form of a TOML file."""
        data = dict(data)
        if "name" not in data:
            raise ScenarioError("name", "missing field")
        if "duration" not in data:
            raise ScenarioError("duration", "missing field")
        sections: dict[str, list[Any]] = {}
        for key, attr in SECTIONS:
            raw = data.pop(key, [])
            if not isinstance(raw, list) or not all(isinstance(t, Mapping) for t in raw):
                raise ScenarioError(key, "expected an array of tables ([[" + key + "]])")
            sections[attr] = [_SECTION_TYPES[key].from_dict(t) for t in raw]
        name = data.pop("name")
        duration = data.pop("duration")
        seed = data.pop("seed", None)
        return cls(name=name, duration=duration, seed=seed, extra=data, **sections)

    @classmethod
    def from_toml(cls, text: str) -> Scenario:
        """Parses TOML text (syntax only; :meth:`validate` checks the rest)."""
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as err:
            raise ScenarioError("scenario", f"not valid TOML: {err}") from None
        return cls.from_dict(data)

    @classmethod
    def load(cls, source: str | os.PathLike[str]) -> Scenario:
        """Reads a scenario from a file, TOML text or a shipped scenario's name."""
        # A Scenario is taken too (a copy through TOML), as everywhere a
        # scenario source is accepted.
        if isinstance(source, Scenario):
            return cls.from_toml(source.to_toml())
        return cls.from_toml(_native.source_text(source))

    def validate(self) -> dict[str, Any]:
        """Checks the scenario in the core; returns its summary or raises
        :class:`rtolab.ScenarioError` naming the field."""
        return _native.validate_text(self.to_toml())

    def get(self, path: str) -> Any:
        """The value at a dotted path such as ``link.ab.loss``."""
        return get_path(self.to_dict(), path)

    def with_values(self, values: Mapping[str, Any]) -> Scenario:
        """A copy with each dotted path set to its value, checked at once.

        Each value is checked by the core as it is set, so a misspelt key
        (``link.ab.lossy``) or a value out of range raises
        :class:`rtolab.ScenarioError` here, before any run: its ``path`` is
        the key given, its message the value and the core's complaint
        (``link.ab.lossy: 0.1: link[0].lossy: unknown field …``). A
        scenario that is not valid to begin with (one still being built)
        gets its keys' paths checked only."""
        data = self.to_dict()
        try:
            self.validate()
            base_valid = True
        except ScenarioError:
            base_valid = False
        for path, value in values.items():
            set_path(data, path, value)
            if base_valid:
                try:
                    Scenario.from_dict(data).validate()
                except ScenarioError as err:
                    raise ScenarioError(path, f"{value!r}: {err}") from None
        return Scenario.from_dict(data)

    def copy(self) -> Scenario:
        """A deep copy, to vary without touching the original."""
        return copy.deepcopy(self)


def _split(path: str) -> list[str]:
    parts = path.split(".")
    if not path or any(p == "" for p in parts):
        raise ScenarioError(path or "<empty>", "a dotted path like link.0.loss is expected")
    return parts


def _index(items: list[Any], key: str, section: str, where: str) -> int:
    """The position in an array of tables named by ``key``: an index or a name."""
    if key.isdigit():
        i = int(key)
        if i >= len(items):
            raise ScenarioError(where, f"{section} has {len(items)} entries, no index {i}")
        return i
    names = []
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, Mapping) else None
        if name is None and isinstance(item, Mapping) and section == "app":
            # Apps without a name are called "<kind><index>" by the core.
            name = f"{item.get('kind', 'app')}{i}"
        names.append(name)
        if name == key:
            return i
    known = ", ".join(str(n) for n in names if n is not None) or "none"
    raise ScenarioError(where, f"no {section} named {key!r} (known: {known})")


def _walk(data: dict[str, Any], path: str, *, create: bool = False) -> tuple[Any, str | int, str]:
    """The container holding the last segment of ``path``, that segment's
    key, and the path of that container (for errors); with ``create``,
    tables missing along the path are added empty."""
    parts = _split(path)
    node: Any = data
    walked: list[str] = []
    for depth, part in enumerate(parts[:-1]):
        where = ".".join([*walked, part])
        if isinstance(node, list):
            section = walked[-1] if walked else ""
            node = node[_index(node, part, section, where)]
        elif isinstance(node, Mapping):
            if part not in node:
                # Entries of arrays of tables are not made up.
                if not create or any(p.isdigit() for p in parts[depth:-1]):
                    raise ScenarioError(where, "no such field in the scenario")
                node[part] = {}
            node = node[part]
        else:
            raise ScenarioError(where, f"{'.'.join(walked)} is a value, not a table")
        walked.append(part)
    last = parts[-1]
    if isinstance(node, list):
        section = walked[-1] if walked else ""
        return node, _index(node, last, section, path), ".".join(walked)
    if not isinstance(node, dict):
        raise ScenarioError(path, f"{'.'.join(walked)} is a value, not a table")
    return node, last, ".".join(walked)


def get_path(data: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a scenario's dict form."""
    container, key, _ = _walk(data, path)
    if isinstance(container, dict) and key not in container:
        raise ScenarioError(path, "not set in the scenario")
    return container[key]


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Sets the value at a dotted path of a scenario's dict form, in place.

    Entries of arrays of tables (``link.0``, ``app.sink``) must exist;
    tables and fields the file left to their defaults are created
    (``host_group.0.tcp.rto.policy`` on a group without an ``rto`` table),
    and the core's check of the result names any that does not exist.
    """
    container, key, _ = _walk(data, path, create=True)
    container[key] = value
