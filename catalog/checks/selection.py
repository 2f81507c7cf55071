"""Which result a family page leads with: one documented rule.

The headline is the fastest *qualified* arm on the fewest cards any qualified arm uses.
Qualified: published (measured or imported, never withheld, screened or estimated), every
gate it carries passed, and a centre of two fresh-server values (never a single server and
never the larger of the pair). Measured evidence outranks imported evidence; within one
provenance the better grade wins, then the higher centre.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from catalog.checks.grade import Grade, evidence_grade
from catalog.model.packet import Arm, Packet


@dataclass(frozen=True)
class Headline:
    packet: Packet
    arm: Arm
    grade: Grade

    @property
    def decode_tok_s(self) -> float:
        value = self.arm.decode_tok_s
        assert value is not None  # qualified arms have a centre
        return value


def qualified(arm: Arm) -> bool:
    return arm.state.published and not arm.failed_gates and len(arm.server_values) >= 2


def headline(packets: Sequence[Packet], reproductions: Sequence[Packet] = ()) -> Headline | None:
    candidates: list[Headline] = []
    for packet in packets:
        arms = [a for a in packet.arms if qualified(a)]
        if arms:
            grade = evidence_grade(packet, reproductions)  # one per packet: every arm of it shares it
            candidates += [Headline(packet, a, grade) for a in arms]
    return lead_of(candidates)


def lead_of(candidates: Sequence[Headline]) -> Headline | None:
    """The headline among already graded qualified candidates, for a caller that graded them once."""
    if not candidates:
        return None
    fewest_cards = min(c.arm.config.tensor_parallel_size for c in candidates)
    on_fewest = [c for c in candidates if c.arm.config.tensor_parallel_size == fewest_cards]
    return max(on_fewest, key=lambda c: headline_order(c.packet, c.grade, c.decode_tok_s))


def headline_order(packet: Packet, grade: str, decode_tok_s: float) -> tuple[bool, int, float]:
    """Among qualified results: measured over imported, then the better grade, then the faster."""
    return (packet.provenance.kind == "measured", -ord(grade), decode_tok_s)
