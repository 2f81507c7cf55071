"""Evidence grade A-D, computed from provenance and gates by one rule; nobody types a grade.

- A: measured by this runner; every published arm has two fresh servers with prompt rows, G1/G2/G3
  all passed, canaries passed and cache zero on every server; and the campaign was reproduced:
  another packet names it in `reproduces` and its gates passed too.
- B: as A, without an independent reproduction.
- C: measured with a gap (a missing server, canary or cache check), or imported from a named
  source that reports gate outcomes. Imported numbers cannot be replayed from here, so they
  never rise above C.
- D: screened (speed only, no identity gate), or imported without gate outcomes.
A packet whose every arm is withheld keeps its grade for the record but has no headline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from catalog.packet import Arm, Packet, State

Grade = Literal["A", "B", "C", "D"]

PUBLISHED = (State.MEASURED, State.IMPORTED)


def _server_complete(arm: Arm) -> bool:
    servers = arm.servers
    return len(servers) >= 2 and all(
        s.status == "ok" and s.rows and s.cache_zero is True and s.canaries and all(c.passed for c in s.canaries)
        for s in servers
    )


def _gates_complete(arm: Arm) -> bool:
    names = {g.gate for g in arm.gates}
    needed = {"G1"} if arm.config.spec_depth == 0 else {"G2", "G3"}
    return needed <= names and not arm.failed_gates


def evidence_grade(packet: Packet, reproductions: Iterable[Packet] = ()) -> Grade:
    kind = packet.provenance.kind
    published = [a for a in packet.arms if a.state in PUBLISHED] or packet.arms
    if kind == "screened":
        return "D"
    if kind == "imported":
        return "C" if any(a.gates for a in packet.arms) else "D"
    if not all(_gates_complete(a) and _server_complete(a) for a in published):
        return "C"
    replayed = any(r.reproduces == packet.id and r.state == State.MEASURED for r in reproductions)
    return "A" if replayed else "B"


GRADE_MEANING: dict[Grade, str] = {
    "A": "measured here, every gate passed, independently reproduced",
    "B": "measured here, every gate passed, not yet reproduced",
    "C": "bounded evidence: imported with gate outcomes, or measured with a gap",
    "D": "speed snapshot only: no identity gate",
}
