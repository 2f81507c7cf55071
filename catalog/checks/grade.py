"""Evidence grade A-D, computed from a packet's signature, gates, canaries and reproductions by
one rule; nobody types a grade.

Limitations a measured packet can disclose (`limitations` lists them, in words):
- not independently reproduced: no measured packet that names it in `reproduces`, signed by a
  key listed in data/keys.yaml under another owner than the original's key (`one_voice`: the same
  key, or a second key its owner listed, owners compared as catalog/packets/keys.py `owner_key`
  normalises them, is one voice vouching twice; a local unsigned packet vouches for nothing), on
  the same stack (image or install, graph mode, switches:
  catalog/checks/stack.py), whose token arrays equal its own and whose token times are its own (a
  copy of the original's, shifted or scaled, is refused outright);
- a published arm without two fresh servers with prompt rows, or without the gates its depth
  needs (G1 for the oracle, G2 and G3 for a speculative arm);
- canaries missing or failed on a server;
- cache zero not confirmed on every server.

- A: signed, measured by the runner, no limitation.
- B: signed, measured, exactly one limitation (usually: not yet reproduced).
- C: measured with more than one limitation, or unsigned (a local build), or imported from a
  named source that reports gate outcomes (every imported arm carries the outcome its source
  printed; catalog/checks/consistency.py refuses one that does not). Imported numbers cannot be
  replayed, so never above C.
- D: screened (speed only, no identity gate).
A packet whose every arm is withheld keeps its grade for the record but has no headline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from catalog.checks.independence import copied_from
from catalog.checks.stack import stack_differences
from catalog.model.packet import Arm, Packet, State

Grade = Literal["A", "B", "C", "D"]

NOT_REPRODUCED = "not independently reproduced"


def _published_arms(packet: Packet) -> list[Arm]:
    return [a for a in packet.arms if a.state.published] or packet.arms


def _gates_complete(arm: Arm) -> bool:
    names = {g.gate for g in arm.gates}
    needed = {"G1"} if arm.config.spec_depth == 0 else {"G2", "G3"}
    return needed <= names and not arm.failed_gates


def one_voice(original: Packet, reproduction: Packet) -> bool:
    """Signed by the same key, or by two keys data/keys.yaml lists under one owner (a lab's second
    key is the same lab): the one rule of who may vouch for whom. The owners are those verification
    found for each signature (catalog/packets/verify.py, PacketSeal.signed_owner)."""
    if reproduction.seal.signed_by == original.seal.signed_by:
        return True
    owner = original.seal.signed_owner
    return owner is not None and owner == reproduction.seal.signed_owner


def independent(original: Packet, reproduction: Packet) -> bool:
    """Signed by a listed key of another owner, on the same stack, the same token arrays for every arm
    both ran, its own times."""
    if not (reproduction.signed and reproduction.state == State.MEASURED and reproduction.reproduces == original.id):
        return False
    if one_voice(original, reproduction):
        return False  # one signer, or one owner, vouching twice
    if stack_differences(original, reproduction):
        return False
    return _same_tokens(original, reproduction) and not copied_from(reproduction, original)


def _same_tokens(original: Packet, reproduction: Packet) -> bool:
    by_config = {(a.config.tensor_parallel_size, a.config.spec_method, a.config.spec_depth): a for a in original.arms}
    compared = 0
    for arm in reproduction.arms:
        before = by_config.get((arm.config.tensor_parallel_size, arm.config.spec_method, arm.config.spec_depth))
        if before is None or not before.servers or not arm.servers:
            continue
        old = {row.prompt_id: row.token_ids for row in before.servers[0].rows}
        new = {row.prompt_id: row.token_ids for row in arm.servers[0].rows}
        if not old or old != new:
            return False
        compared += 1
    return compared > 0


def limitations(packet: Packet, reproductions: Iterable[Packet] = ()) -> list[str]:
    """What keeps a measured packet from grade A, in words a reader sees beside the grade."""
    found = []
    if not any(independent(packet, r) for r in reproductions):
        found.append(NOT_REPRODUCED)
    arms = _published_arms(packet)
    servers = [s for a in arms for s in a.servers]
    if not all(len(a.servers) >= 2 and all(s.status == "ok" and s.rows for s in a.servers) for a in arms):
        found.append("a published arm lacks two fresh servers with prompt rows")
    if not all(_gates_complete(a) for a in arms):
        found.append("a published arm lacks a gate its depth needs")
    if not all(s.canaries and all(c.passed for c in s.canaries) for s in servers):
        found.append("canaries missing or failed on a server")
    if not all(s.cache_zero is True for s in servers):
        found.append("cache zero not confirmed on every server")
    return found


def evidence_grade(packet: Packet, reproductions: Iterable[Packet] = ()) -> Grade:
    kind = packet.provenance.kind
    if kind == "screened":
        return "D"
    if kind == "imported":
        return "C" if any(a.gates for a in packet.arms) else "D"
    if not packet.signed:
        return "C"
    count = len(limitations(packet, reproductions))
    return "A" if count == 0 else "B" if count == 1 else "C"


GRADE_MEANING: dict[Grade, str] = {
    "A": "signed, measured here, every gate and canary passed, reproduced under another owner's key",
    "B": "signed, measured here, one disclosed limitation (usually: not yet reproduced)",
    "C": "bounded evidence: imported with gate outcomes, unsigned, or measured with several gaps",
    "D": "speed snapshot only: no identity gate",
}
