"""One row per arm of every packet: the unit the scorecards, charts and hardware pages share."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property

from builder import routes
from builder.views.energy import EnergyFigure, arm_energy
from catalog.checks.grade import Grade, evidence_grade
from catalog.checks.selection import Headline, headline_order, lead_of, qualified
from catalog.model.packet import IDENTITY_NOT_PUBLISHED, Arm, GateResult, Ladder, Packet, State
from catalog.recipes.hardware import Hardware

# The packet states' words and order live on catalog.model.packet.State; a page adds one state of its
# own, for a combination no packet covers.
UNTESTED = "untested"
_BY_RANK = sorted(State, key=lambda state: state.rank)
STATE_LABELS = {**{s.value: s.label for s in _BY_RANK}, UNTESTED: "Untested"}
STATE_MEANINGS = {**{s.value: s.meaning for s in _BY_RANK}, UNTESTED: "no packet covers this combination"}
STATE_RANK = [*(s.value for s in _BY_RANK), UNTESTED]


@cache  # a handful of labels, asked for on every result of every page
def label_key(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") or "unknown"


NO_SPEC = "no spec"


def short_depth(method: str | None, depth: int) -> str:
    """The compact axis label: `no spec` at depth 0 (whatever the family's method: an n-gram arm at
    depth 0 is no n-gram at all), then MTP3, NGRAM4; SPEC3 when no arm names a method."""
    return NO_SPEC if depth == 0 else f"{(method or 'spec').upper()}{depth}"


GATE_NAMES = {"G1": "G1 repeat-exactness", "G2": "G2 speculative repeat", "G3": "G3 lossless"}


def against_words(gate: GateResult, packet: Packet) -> str:
    """What a gate compared with, in words: an arm id becomes that arm's label."""
    arm = next((a for a in packet.arms if a.id == gate.against), None)
    if arm is None:
        return gate.against
    return f"the oracle ({arm.label})" if gate.gate == "G3" else arm.label


def unjudged(gate: GateResult, packet: Packet) -> bool:
    """A G3 that did not pass because its oracle failed repeat-exactness (G1): its servers were never
    compared with a reference, so the gate is not passed rather than failed."""
    oracle = next((a for a in packet.arms if a.id == gate.against), None)
    return (
        gate.gate == "G3"
        and not gate.passed
        and gate.exact is None
        and oracle is not None
        and any(g.gate == "G1" for g in oracle.failed_gates)
    )


def gate_words(gate: GateResult, packet: Packet) -> str:
    """`G3 lossless: 8/12 identical vs the oracle (1 card, no speculative decoding)`; no internal id."""
    if gate.exact is not None:
        count = f"{gate.exact}/{gate.total} identical"
    elif unjudged(gate, packet):
        count = "not passed: its oracle is not repeat-exact (G1 failed), so there is nothing to compare with"
    else:
        count = ("passed" if gate.passed else "failed") + " (count not published)"
    who = f" on server {gate.server}" if gate.server else ""
    return f"{GATE_NAMES.get(gate.gate, gate.gate)}: {count}{who} vs {against_words(gate, packet)}"


def withheld_reason(arm: Arm, packet: Packet) -> str:
    gates = "; ".join(gate_words(g, packet) for g in arm.failed_gates)
    reason = arm.withheld_reason or ""
    counts = {f"{g.exact}/{g.total}" for g in arm.failed_gates if g.exact is not None}
    if reason and any(c in reason for c in counts):
        reason = ""  # the source's words only repeat the count the gate already shows
    return " · ".join(part for part in (gates, reason) if part) or "withheld"


def screened_reason(packet: Packet) -> str:
    """Why a screened arm has no identity verdict, in the words of where it came from."""
    if packet.provenance.tool:
        return f"speed only: {packet.provenance.tool} checks no identity"
    return f"{IDENTITY_NOT_PUBLISHED}: speed only"


def cell_reason(packet: Packet, arm: Arm) -> str | None:
    """`state_reason` as a scorecard cell has room for: each failed gate and its count (the arm it was
    compared with is on the packet page), or "speed only"; the whole reason is the cell's tooltip."""
    if arm.state == State.SCREENED:
        return "speed only" if packet.provenance.tool else IDENTITY_NOT_PUBLISHED
    if arm.state != State.WITHHELD:
        return None
    gates = [
        f"{GATE_NAMES.get(g.gate, g.gate)}: "
        + (
            f"{g.exact}/{g.total} identical"
            if g.exact is not None
            else "no repeat-exact oracle"
            if unjudged(g, packet)
            else "failed"
        )
        for g in arm.failed_gates
    ]
    return "; ".join(gates) or "withheld"


def state_reason(packet: Packet, arm: Arm) -> str | None:
    if arm.state == State.WITHHELD:
        return withheld_reason(arm, packet)
    if arm.state == State.SCREENED:
        return screened_reason(packet)
    return None


@dataclass(frozen=True)
class ArmResult:
    """One arm with its packet's grade. What pages read of the arm is derived once, on creation:
    a family page asks for a result's state, cards, centre and link many times (scorecards,
    charts, picks, projection), and reading through the packet model each time was most of it."""

    packet: Packet
    arm: Arm
    grade: Grade
    hardware: Hardware | None
    quant_key: str
    quant_label: str
    state: str = field(init=False, repr=False, compare=False)
    tp: int = field(init=False, repr=False, compare=False)
    depth: int = field(init=False, repr=False, compare=False)
    method: str | None = field(init=False, repr=False, compare=False)
    draft_head: str | None = field(init=False, repr=False, compare=False)
    hardware_id: str = field(init=False, repr=False, compare=False)
    published: bool = field(init=False, repr=False, compare=False)
    centre: float | None = field(init=False, repr=False, compare=False)
    values: list[float] = field(init=False, repr=False, compare=False)
    # catalog.checks.selection's qualified (a headline candidate) and headline_order
    qualified: bool = field(init=False, repr=False, compare=False)
    lead_order: tuple[bool, int, float] = field(init=False, repr=False, compare=False)
    href: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        arm, config = self.arm, self.arm.config
        values = arm.server_values
        centre = arm.decode_tok_s
        # a frozen dataclass sets its own derived fields through its __dict__ (no __setattr__)
        self.__dict__.update(
            state=arm.state.value,
            tp=config.tensor_parallel_size,
            depth=config.spec_depth,
            method=config.spec_method,
            draft_head=config.draft_head,
            hardware_id=self.packet.identity.host.hardware,
            published=arm.state.published,
            centre=centre,
            values=values,
            qualified=qualified(arm),
            lead_order=headline_order(self.packet, self.grade, centre or 0.0),
            href=routes.packet_page(self.packet.id, arm.id),
        )

    @property
    def hardware_name(self) -> str:
        return self.hardware.name if self.hardware else self.hardware_id

    @property
    def unpublished_value(self) -> float | None:
        """What a withheld arm would have shown: never displayed as a result, only struck."""
        return self.centre if self.centre is not None else self.arm.published_figure

    @cached_property
    def reason(self) -> str | None:
        return state_reason(self.packet, self.arm)

    @cached_property
    def energy(self) -> EnergyFigure | None:
        """J per token and tok/s per W beside a speed this runner measured (None: no speed, or imported)."""
        if not self.arm.state.has_speed or self.packet.provenance.kind != "measured":
            return None
        return arm_energy(self.packet, self.arm)

    @cached_property
    def short_reason(self) -> str | None:
        return cell_reason(self.packet, self.arm)

    @property
    def series_head(self) -> str:
        return self.draft_head or (f"{self.method.upper()} draft" if self.method else "no draft head")


def quant_identity(packet: Packet) -> tuple[str, str]:
    label = packet.identity.model.quantization_label
    return label_key(label), label


def arm_results(
    packets: Sequence[Packet], hardware: dict[str, Hardware], reproductions: Sequence[Packet]
) -> list[ArmResult]:
    results = []
    for packet in packets:
        grade = evidence_grade(packet, reproductions)
        key, label = quant_identity(packet)
        for arm in packet.arms:
            results.append(ArmResult(packet, arm, grade, hardware.get(packet.identity.host.hardware), key, label))
    return results


def best_state(states: Iterable[str]) -> str:
    present = set(states)
    return next((s for s in STATE_RANK if s in present), "untested")


def configuration(result: ArmResult) -> tuple[str, str, int, int, str, str]:
    """What makes two results repeats of one measurement: same card, build, cards, depth, drafter."""
    return (
        result.hardware_id,
        result.quant_key,
        result.tp,
        result.depth,
        result.method or "",
        result.draft_head or "",
    )


def _lead_order(result: ArmResult) -> tuple[bool, tuple[bool, int, float]]:
    """catalog.checks.selection.headline's order, so the family's headline result always represents its cell."""
    return (result.qualified, result.lead_order)


def headline_result(results: Sequence[ArmResult]) -> ArmResult | None:
    """catalog.checks.selection.headline over results graded once each (arm_results), as a result."""
    lead = lead_of([Headline(r.packet, r.arm, r.grade) for r in results if r.qualified])
    return next((r for r in results if lead and r.arm is lead.arm and r.packet is lead.packet), None)


def _newest_order(result: ArmResult) -> tuple[str, str]:
    created = result.packet.created
    return (created.isoformat() if created else "", result.packet.id)


def representatives(results: Sequence[ArmResult]) -> list[ArmResult]:
    """Repeats of one configuration collapse, per state, to one result: among published results the
    one the headline rule would choose, otherwise the newest. A withheld repeat is therefore never
    hidden behind a measured one; every repeat stays listed with its packet. Input order is kept."""
    chosen: dict[tuple[tuple[str, str, int, int, str, str], str], ArmResult] = {}
    for result in results:
        slot = (configuration(result), result.state)
        held = chosen.get(slot)
        if held is None:
            chosen[slot] = result
            continue
        if result.published:
            better = _lead_order(result) > _lead_order(held)
        else:
            better = _newest_order(result) > _newest_order(held)
        if better:
            chosen[slot] = result
    kept = {id(r) for r in chosen.values()}
    return [r for r in results if id(r) in kept]


def ladder_sources(results: Sequence[ArmResult]) -> list[tuple[Packet, Ladder]]:
    """The ladders a family page charts: per configuration, state and kind, the newest packet's, so
    repeats do not pile onto one chart. Every ladder stays on its packet page."""
    chosen: dict[tuple[tuple[str, str, int, int, str, str], str, str], tuple[ArmResult, Ladder]] = {}
    for result in results:
        for ladder in result.packet.ladders:
            if ladder.arm != result.arm.id:
                continue
            slot = (configuration(result), result.state, ladder.kind)
            held = chosen.get(slot)
            if held is None or _newest_order(result) > _newest_order(held[0]):
                chosen[slot] = (result, ladder)
    kept = {id(ladder) for _, ladder in chosen.values()}
    return [
        (r.packet, ladder)
        for r in results
        for ladder in r.packet.ladders
        if id(ladder) in kept and ladder.arm == r.arm.id
    ]
