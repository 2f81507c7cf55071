"""Evidence grade A-D, computed from a packet's signature, gates, canaries and reproductions by
one rule; nobody types a grade.

Limitations a measured packet can disclose (`limitations` lists them, in words):
- not independently reproduced: no measured packet that names it in `reproduces`, signed by a
  key listed in data/keys.yaml under another owner than the original's key (`one_voice`: the same
  key, or a second key its owner listed, owners compared as catalog/packets/keys.py `owner_key`
  normalises them, is one voice vouching twice; a local unsigned packet vouches for nothing), on
  the same stack (image or install, graph mode, switches:
  catalog/checks/stack.py), whose token times are its own (a copy of the original's, shifted or
  scaled, is refused outright) and that holds every published arm of it (`arm_not_reproduced`: the
  same arm id and configuration, as runner/reproduce.py plans them) measured, every server of that
  arm giving the original's token arrays. An arm the reproduction withheld (its result was not
  repeated), did not run, or ran to other outputs is not reproduced by it, and the limitation names
  the arm and why. The grade is one per packet (catalog/checks/selection.py: every arm of a packet
  shares it), so one arm not reproduced keeps the whole packet from A; reproductions may share the
  arms between them, and one whose measured arm gives other outputs than the original's vouches for
  none;
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

from array import array
from collections.abc import Iterable
from typing import Literal

from catalog.checks.independence import copied_from
from catalog.checks.stack import stack_differences
from catalog.model.packet import Arm, Packet, ServerRun, State

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


def vouches(original: Packet, reproduction: Packet) -> bool:
    """Whether the reproduction may vouch for any arm of its original: measured, naming it, signed by a
    listed key of another owner, on the same stack, its own times, and no arm that both measured giving
    other outputs (an arm the reproduction repeated otherwise contradicts the original, so it vouches
    for none). Which arms it vouches for: `arm_not_reproduced`."""
    if not (reproduction.signed and reproduction.state == State.MEASURED and reproduction.reproduces == original.id):
        return False
    if one_voice(original, reproduction):
        return False  # one signer, or one owner, vouching twice
    if stack_differences(original, reproduction):
        return False
    mine = {arm.id: arm for arm in original.arms if arm.state == State.MEASURED}
    for arm in reproduction.arms:
        before = mine.get(arm.id)
        if before is not None and arm.state == State.MEASURED and _other_outputs(before, arm) is not None:
            return False
    return not copied_from(reproduction, original)


def _outputs(server: ServerRun) -> dict[str, array[int]]:
    return {row.prompt_id: row.token_ids for row in server.rows}


def _configuration(arm: Arm) -> tuple[int, str | None, int, str | None]:
    config = arm.config
    return config.tensor_parallel_size, config.spec_method, config.spec_depth, config.draft_head


def _other_outputs(before: Arm, after: Arm) -> str | None:
    """The label of the first of `after`'s servers whose outputs are not the original arm's, "" when
    the original arm has no rows or `after` no server, None when every server's are its own.

    Every server, not the first alone: a measured arm's servers agree token for token (G1, or G2 and
    G3, compare each with the first; any difference fails the gate and withholds the arm), and greedy
    decoding of one model and command on one stack is deterministic, so each fresh server of an honest
    reproduction gives the original's outputs. A server that does not is a result not repeated, even
    where its arm carries no gate to say so."""
    reference = next((_outputs(s) for s in before.servers if s.rows), None)
    if not reference or not after.servers:
        return ""
    return next((s.label for s in after.servers if _outputs(s) != reference), None)


def arm_not_reproduced(arm: Arm, reproduction: Packet) -> str | None:
    """Why the reproduction does not repeat this arm of its original, in words; None when it does:
    it holds the arm (runner/reproduce.py plans each arm under its own id, with its configuration:
    card count, method, depth, draft head), measured (every gate it carries passed: not withheld), on
    servers each of which gave the original's outputs, prompt for prompt."""
    again = next((a for a in reproduction.arms if a.id == arm.id), None)
    if again is None:
        return f"not run by {reproduction.id}"
    if _configuration(again) != _configuration(arm):
        return f"run with another configuration by {reproduction.id}"
    if again.state != State.MEASURED:
        return f"{again.state.value} in {reproduction.id} (a gate failed there: the result was not repeated)"
    server = _other_outputs(arm, again)
    if server is not None:
        where = f" on server {server}" if server else ""
        return f"other outputs{where} in {reproduction.id}"
    return None


def _unreproduced(packet: Packet, reproductions: Iterable[Packet]) -> str | None:
    """None when every published arm of the packet is repeated by an independent reproduction (one
    that `vouches`; one may repeat some arms, another the rest); otherwise the limitation, in words:
    NOT_REPRODUCED, and which arms and why when some reproduction vouches but not for all of them."""
    vouching = [r for r in reproductions if vouches(packet, r)]
    if not vouching:
        return NOT_REPRODUCED
    missing = []
    for arm in _published_arms(packet):
        why = [arm_not_reproduced(arm, r) for r in vouching]
        if all(w is not None for w in why):
            missing.append(f"arm {arm.id!r} " + ", ".join(w for w in why if w))
    return f"{NOT_REPRODUCED}: " + "; ".join(missing) if missing else None


def independent(original: Packet, reproduction: Packet) -> bool:
    """Whether this one reproduction lifts the original: it vouches for it (another owner's listed key,
    the same stack, its own times) and repeats every published arm of it."""
    return _unreproduced(original, [reproduction]) is None


def limitations(packet: Packet, reproductions: Iterable[Packet] = ()) -> list[str]:
    """What keeps a measured packet from grade A, in words a reader sees beside the grade."""
    found = []
    unreproduced = _unreproduced(packet, reproductions)
    if unreproduced is not None:
        found.append(unreproduced)
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
    "A": "signed, measured here, every gate and canary passed, every arm reproduced under another owner's key",
    "B": "signed, measured here, one disclosed limitation (usually: not yet reproduced)",
    "C": "bounded evidence: imported with gate outcomes, unsigned, or measured with several gaps",
    "D": "speed snapshot only: no identity gate",
}
