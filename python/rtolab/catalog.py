"""The TCP policies a profile can select by name.

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


__all__ = ["FAMILIES", "Policy", "policies"]
