"""The studies' claims beside our numbers: each verdict follows from the
numbers it is given, and the reproduction report leads with them."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

import rtolab
from rtolab.experiments import Claim, Reproduction, ack_holding, bridge, reproduce, uip_rto


def _exchange(config: str, drops: int, retx: int) -> dict:
    return {"config": config, "nfc_drops": drops, "retx_appliance": retx, "retx_end_user": 0}


def test_bridge_claims_follow_the_single_exchange_table() -> None:
    table = pd.DataFrame(
        [
            _exchange("original", 2, 3),
            _exchange("original", 1, 2),
            _exchange("sensing", 0, 1),
            _exchange("sensing+optimum_rto", 0, 0),
        ]
    )
    drops, sensing, fixed = bridge.single_exchange_claims(table)
    assert "bridge spec §2" in drops.statement and drops.holds is True
    assert drops.ours == "NFC drops in 2 of 2 runs"
    assert sensing.holds is True and fixed.holds is True
    table.loc[3, "retx_appliance"] = 1
    assert bridge.single_exchange_claims(table)[2].holds is False
    assert bridge.single_exchange_claims(table)[2].ours == "1 retransmissions in 1 runs"
    # No run of a configuration: the claim cannot be judged.
    only_original = table[table["config"] == "original"]
    assert [c.holds for c in bridge.single_exchange_claims(only_original)] == [True, None, None]


def _held(case: str, scheme: str, rto: int, delivered: int, dups: int = 1) -> dict:
    return {
        "case": case,
        "scheme": scheme,
        "rto_expirations": rto,
        "packets_delivered": delivered,
        "duplicate_acks_max": dups,
    }


def test_ack_holding_claims_follow_the_runs_table() -> None:
    case = next(iter(ack_holding.CASES))
    table = pd.DataFrame([_held(case, "reno", 2, 900), _held(case, "ack-holding", 0, 1200, dups=2)])
    timeouts, throughput, duplicates = ack_holding.main_claims(table)
    assert timeouts.holds is True and "2 with plain Reno, 0 with ACK holding" in timeouts.ours
    assert throughput.holds is True and throughput.ours.startswith("1200 packets")
    assert duplicates.holds is True
    table.loc[1, "rto_expirations"] = 1
    table.loc[1, "duplicate_acks_max"] = 3
    assert [c.holds for c in ack_holding.main_claims(table)] == [False, True, False]


def _mesh_runs(scheme: str, fairness: list[float], goodput: list[float]) -> list[dict]:
    return [
        {
            "scheme": scheme,
            "seed": i,
            "status": "ok",
            "complete": True,
            "fairness": f,
            "goodput_segments": g,
            "retransmissions": 0,
            "connections_failed": 0,
            "duty_cycle_mean": 0.01,
        }
        for i, (f, g) in enumerate(zip(fairness, goodput, strict=True))
    ]


def test_uip_rto_claim_needs_a_difference_beyond_the_intervals() -> None:
    base = _mesh_runs("lim2020", [0.30, 0.31, 0.29, 0.30], [1500, 1510, 1490, 1500])
    better = _mesh_runs("lim2024", [0.50, 0.51, 0.49, 0.50], [1500, 1505, 1495, 1500])
    (claim,) = uip_rto.claims(pd.DataFrame(base + better))
    assert claim.holds is True and "uip-rto spec §2.3" in claim.statement
    assert "fairness +0.200" in claim.ours
    # No difference, measured tightly enough to rule out one of 0.02: the
    # claim does not hold.
    same = _mesh_runs("lim2024", [0.30, 0.32, 0.28, 0.30], [1500, 1520, 1480, 1500])
    assert uip_rto.claims(pd.DataFrame(base + same))[0].holds is False
    # No difference, but an interval too wide to rule one out: cannot tell.
    unclear = _mesh_runs("lim2024", [0.30, 0.41, 0.19, 0.30], [1500, 1520, 1480, 1500])
    assert uip_rto.claims(pd.DataFrame(base + unclear))[0].holds is None
    fewer = _mesh_runs("lim2024", [0.50, 0.51, 0.49, 0.50], [1000, 1005, 995, 1000])
    assert uip_rto.claims(pd.DataFrame(base + fewer))[0].holds is False
    assert uip_rto.claims(pd.DataFrame(base)) == []


def test_reproduction_report_puts_the_claims_first(tmp_path: Path) -> None:
    outcome = reproduce("foundation/determinism", tmp_path / "repro")
    (claim,) = outcome.claims["foundation/determinism"]
    assert isinstance(claim, Claim) and claim.holds is True
    # Claims are kept in the manifest and read back.
    assert Reproduction.load(tmp_path / "repro").claims == outcome.claims
    page = rtolab.report(tmp_path / "repro").read_text(encoding="utf-8")
    contents = page.index("<h2>Contents</h2>")
    first = page.index('<h2 id="claims">The study&#x27;s claims and ours</h2>')
    assert contents < first < page.index('<h2 id="verdicts">Verdicts</h2>') < page.index("<figure")
    assert "same bytes" in page and 'class="holds">holds<' in page
    assert not math.isnan(outcome.wall_s)
