"""What a scenario can name: the TCP policies a profile selects, and the
link, MAC, app and middlebox kinds with the fields of their tables.

Every retransmission-timeout (``rto``), congestion-control (``cc``) and ACK
(``ack``) policy of the engine is registered in one place in the core; this
module lists them with their parameters and defaults, which are exactly what
a scenario file or :class:`rtolab.Host` accepts::

    import rtolab

    for p in rtolab.policies("rto"):
        print(p.name, p.defaults)

    # Select one by name, overriding some parameters:
    rtolab.Host("a", profile="rfc", tcp={"rto": {"policy": "fixed", "rto": "300ms"}})

``rtolab list policies`` prints the same catalog.

The kinds are registered in the core too, each with the fields its table
takes, their types, units and defaults (from the documentation next to each
field in the core)::

    from rtolab.catalog import kinds

    for k in kinds("link"):
        print(k.kind, [f.name for f in k.fields])

``rtolab list links`` (``macs``, ``apps``, ``middleboxes``) prints them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rtolab import _rtolab

#: The policy families, which are also the profile fields that select them.
FAMILIES: tuple[str, ...] = ("rto", "cc", "ack")


@dataclass(frozen=True)
class Policy:
    """One registered policy."""

    #: ``"rto"``, ``"cc"`` or ``"ack"``: the profile field that selects it.
    family: str
    #: The value of ``policy`` that selects it, e.g. ``"fixed"``.
    name: str
    #: One line: the first sentence of the policy's documentation.
    description: str
    #: Every parameter with its default, as a scenario file writes it
    #: (durations as strings with a unit, ``None`` for an unset option).
    defaults: dict[str, Any]
    #: What each parameter means (the first sentence of its documentation),
    #: for the parameters that are documented.
    meanings: dict[str, str] = field(default_factory=dict)


def policies(family: str | None = None) -> list[Policy]:
    """Every registered policy, RTO first, then congestion control, then ACK,
    each family in registration order; only ``family``'s when given.

    Raises :class:`ValueError` for a family other than ``"rto"``, ``"cc"``
    or ``"ack"``.
    """
    if family is not None and family not in FAMILIES:
        raise ValueError(
            f"unknown policy family {family!r} (expected one of {', '.join(FAMILIES)})"
        )
    found = [Policy(**entry) for entry in json.loads(_rtolab.policy_catalog())]
    return [p for p in found if family is None or p.family == family]


#: The kind families, in the order the catalog lists them.
KIND_FAMILIES: tuple[str, ...] = ("link", "mac", "app", "middlebox")


@dataclass(frozen=True)
class Field:
    """One key of a kind's table."""

    #: The key, as a scenario file writes it.
    name: str
    #: Its TOML type: ``integer``, ``float``, ``boolean``, ``string``,
    #: ``table``, ``duration`` (``"5ms"``), ``rate`` (``"10Mbps"``), an
    #: address, or ``array of ...``.
    type: str
    #: The unit of a number, when it has one (``bytes``, ``packets``, ``m``).
    unit: str | None
    #: Whether a table of this kind must set it.
    required: bool
    #: What leaving it out means (``None`` for a required field).
    default: str | None
    #: What it sets, on one line.
    meaning: str
    #: The keys of the table it holds (of each table, for an array of
    #: tables), when the catalog knows them.
    fields: tuple[Field, ...] = ()


@dataclass(frozen=True)
class Kind:
    """One registered link, MAC, app or middlebox kind."""

    #: ``"link"``, ``"mac"``, ``"app"`` or ``"middlebox"``.
    family: str
    #: The value of ``kind`` that selects it, e.g. ``"point-to-point"``.
    kind: str
    #: One line: what it is.
    description: str
    #: The keys of its table besides ``kind``, ``name`` and ``host``.
    fields: tuple[Field, ...]


def _fields(entries: list[dict[str, Any]]) -> tuple[Field, ...]:
    return tuple(Field(**{**f, "fields": _fields(f["fields"])}) for f in entries)


def kinds(family: str | None = None) -> list[Kind]:
    """Every registered kind, links first, then MACs, apps and middleboxes,
    each family in registration order; only ``family``'s when given.

    Raises :class:`ValueError` for a family other than those of
    :data:`KIND_FAMILIES`.
    """
    if family is not None and family not in KIND_FAMILIES:
        raise ValueError(
            f"unknown kind family {family!r} (expected one of {', '.join(KIND_FAMILIES)})"
        )
    found = [
        Kind(**{**entry, "fields": _fields(entry["fields"])})
        for entry in json.loads(_rtolab.kind_catalog())
    ]
    return [k for k in found if family is None or k.family == family]


__all__ = ["FAMILIES", "KIND_FAMILIES", "Field", "Kind", "Policy", "kinds", "policies"]
