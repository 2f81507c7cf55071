"""Section 7, "how much faster could this get?": the published speed against the physical ceiling.

catalog.projection computes everything (ceiling, utilisation, optimisation band, the formula with
its numbers, every input with its source); this module only formats what it returns. The family
page makes one call, `projection_view(...)`; when the projection has no answer, the page shows a
labelled gap instead. A projection that fails on its data is a build warning (fatal under --strict),
never a silent gap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from builder import routes
from builder.format import Num, byte_size, num, opt_num
from builder.views.common import Fact
from builder.views.results import STATE_LABELS, ArmResult
from catalog.errors import CatalogError
from catalog.model.packet import Packet
from catalog.projection import CellEstimate, PrefillBound, Projection, estimate_cell, project_arm
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe

Warn = Callable[[str], None]
# What a projection raises on data it cannot use: the build names it, the page shows the gap.
PROJECTION_FAILURES = (CatalogError, ValidationError, ArithmeticError)


@dataclass(frozen=True)
class ProjectionRow:
    arm: str
    href: str
    state: str
    state_label: str
    value: Num | None  # the arm's published speed, whatever its state (`state` names it)
    ceiling: Num
    utilisation: Num | None
    band: str | None  # None: unpublished, so no band


@dataclass(frozen=True)
class ProjectionView:
    title: str
    ceiling: Num
    value: Num | None  # the lead arm's speed, whatever its state: `state_word` names it
    state_word: str  # the lead arm's state, lower-case (`imported`): never `measured` for an import
    utilisation: Num | None
    lower_bound: bool
    band: str | None
    band_meaning: str | None
    formula: str
    substituted: str
    inputs: list[Fact]
    byte_terms: list[Fact]
    prefill: list[Fact]
    notes: list[str]
    rows: list[ProjectionRow]


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def project(result: ArmResult, recipe: Recipe | None, warn: Warn) -> Projection | None:
    """The one call into catalog.projection; None when it has no answer (or failed, with a warning)."""
    if result.hardware is None:
        return None
    try:
        return project_arm(result.packet, result.arm, result.hardware, recipe)
    except PROJECTION_FAILURES as error:
        warn(f"{result.packet.id}: arm {result.arm.id}: no projection: {_one_line(error)}")
        return None


def _percent(fraction: float | None) -> Num | None:
    return None if fraction is None else num(fraction * 100, 1, "%")


def _input_value(value: object, unit: str) -> str | Num:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value} {unit}".strip()
    # a whole number (a layer count, a card count, 608 GB/s) is written whole, never `32.00`
    return num(value, 0 if float(value).is_integer() else 2, unit)


def in_words(source: str, packet: Packet) -> str:
    """catalog.projection names an input's arm by id (`packet arm tp1-mtp3-int4-head: ...`); a page
    names it by its label, as everywhere else."""
    labels = {arm.id: arm.label for arm in packet.arms}
    return re.sub(r"\barm (\S+?)(?=[:\s]|$)", lambda m: f"arm “{labels[m[1]]}”" if m[1] in labels else m[0], source)


def _prefill(bound: PrefillBound | None, packet: Packet, state_word: str) -> list[Fact]:
    if bound is None:
        return []
    facts = [
        Fact("prompt tokens", num(bound.prompt_tokens, 0), in_words(bound.prompt_tokens_source, packet)),
        Fact("TTFT lower bound", num(bound.bound_ms, 2, "ms"), bound.formula),
    ]
    if bound.measured_ttft_ms is not None:
        # the arm's TTFT, its servers' or the figures its source printed: named by the arm's state
        facts.append(Fact(f"{state_word} TTFT", num(bound.measured_ttft_ms, 2, "ms")))
    return facts


def _row(result: ArmResult, projection: Projection) -> ProjectionRow:
    grade = projection.optimisation_grade
    return ProjectionRow(
        arm=f"{result.quant_label} · {result.arm.label}",
        href=routes.packet_page(result.packet.id, result.arm.id),
        state=result.state,
        state_label=STATE_LABELS[result.state],
        value=opt_num(projection.measured_tok_s, 2, "tok/s") if result.published else None,
        ceiling=num(projection.ceiling_tok_s, 2, "tok/s"),
        utilisation=_percent(projection.utilisation) if result.published else None,
        band=grade.band if grade and result.published else None,
    )


def projection_view(
    lead: ArmResult | None, results: Sequence[ArmResult], recipe: Recipe | None, warn: Warn
) -> ProjectionView | None:
    if lead is None:
        return None
    main = project(lead, recipe, warn)
    if main is None:
        return None
    rows = []
    for result in results:
        projection = main if result is lead else project(result, recipe, warn)  # the lead: projected once
        if projection is not None:
            rows.append(_row(result, projection))
    grade = main.optimisation_grade
    return ProjectionView(
        title=f"{lead.quant_label} · {lead.arm.label} on {lead.hardware_name}",
        ceiling=num(main.ceiling_tok_s, 2, "tok/s"),
        value=opt_num(main.measured_tok_s, 2, "tok/s"),
        state_word=STATE_LABELS[lead.state].lower(),
        utilisation=_percent(main.utilisation),
        lower_bound=bool(main.utilisation_is_lower_bound),
        band=grade.band if grade else None,
        band_meaning=grade.meaning if grade else None,
        formula=main.formula,
        substituted=main.substituted,
        inputs=[
            Fact(i.label, _input_value(i.value, i.unit), in_words(f"{i.origin}: {i.source}", lead.packet))
            for i in main.inputs
        ],
        byte_terms=[
            Fact(f"{t.label} (per {t.per})", byte_size(t.bytes), in_words(t.detail, lead.packet))
            for t in main.byte_terms
        ],
        prefill=_prefill(main.prefill, lead.packet, STATE_LABELS[lead.state].lower()),
        notes=[in_words(note, lead.packet) for note in main.notes],
        rows=rows,
    )


Estimator = Callable[[str, int, int], CellEstimate | None]


def cell_estimator(
    packets: Sequence[Packet], recipe: Recipe | None, hardware: Hardware | None, warn: Warn
) -> Estimator | None:
    """`estimate(quantization, tp, depth)` for one family on one card: catalog.projection's
    estimate for an untested cell, or None."""
    if recipe is None or hardware is None:
        return None

    def estimate(quantization: str, tp: int, depth: int) -> CellEstimate | None:
        try:
            return estimate_cell(
                packets, recipe, hardware, quantization=quantization, tensor_parallel_size=tp, spec_depth=depth
            )
        except PROJECTION_FAILURES as error:
            warn(
                f"{recipe.meta.slug} on {hardware.id}: no estimate for {quantization} TP{tp} depth {depth}: "
                f"{_one_line(error)}"
            )
            return None

    return estimate


PROJECTION_GAP = (
    "No projection: the physical-ceiling model has no answer for this family's headline result "
    "(its architecture or hardware figures are missing). The published numbers above stand on their own."
)
