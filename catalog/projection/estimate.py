"""Estimates for untested matrix cells: the cell's ceiling times the utilisation of its closest
published neighbours. An estimate is labelled `estimated`, never a measurement, never a headline."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from catalog.checks.selection import qualified
from catalog.model.metrics import DECODE_WINDOW
from catalog.model.packet import Arm, Packet
from catalog.projection.cells import Cell, cell_for_arm
from catalog.projection.facts import resolve_architecture
from catalog.projection.models import BasisArm, CellEstimate, Projection
from catalog.projection.physics import GB, layout_from, stored_bytes
from catalog.projection.precision import (
    DRAFT_INT4_ENV,
    QuantScheme,
    kv_cache_bytes,
    packet_scheme,
    scheme_for,
    variant_kv_cache_dtype,
)
from catalog.projection.project import project_cell
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe

ESTIMATE_RULE = (
    "estimate = ceiling of the untested cell × median utilisation of its closest published arms. Published: measured "
    "or imported, every gate passed, two fresh-server values. Same family and same hardware only. Same speculative "
    "depth only (acceptance falls with depth, so utilisation does not carry across depths); speculative ceilings on "
    "both sides use the upper bound L = depth + 1. Closest: same tensor-parallel size first, then same quantization, "
    "then the same draft head; the median is taken over every arm tied at the best match. When the closest arms run "
    "on a different number of cards, their utilisation is scaled by the family's TP ratio: the median utilisation on "
    "the cell's card count over that on the basis' card count, at depths where both are published. No such arm, an "
    "unknown architecture or a model that does not fit in the cards' memory: no estimate."
)

_Published = tuple[Packet, Arm, Projection]


def estimate_cell(
    packets: Sequence[Packet],
    recipe: Recipe,
    hardware: Hardware,
    *,
    quantization: str,
    tensor_parallel_size: int,
    spec_depth: int,
    draft_lm_head_int4: bool | None = None,
) -> CellEstimate | None:
    """Predict decode tok/s for an untested (quantization, TP, depth) cell of one family; see ESTIMATE_RULE.

    `quantization` is a packet quantization slug ('fp8-dynamic', 'w4a16', 'bf16') or a recipe variant
    name. `draft_lm_head_int4` None takes the draft head of the closest basis arm. Arms that match the
    cell exactly are left out of the basis, so a tested cell gets a leave-one-out estimate."""
    scheme = scheme_for(quantization)
    variant = quantization if quantization in recipe.variants else None
    if scheme is None and variant is not None:
        scheme = scheme_for(recipe.variants[variant].precision)
    if scheme is None:
        return None
    family = recipe.meta.slug

    def same_quant(packet: Packet) -> bool:
        found, _ = packet_scheme(packet, recipe)
        return found is not None and found.id == scheme.id

    def is_cell(packet: Packet, arm: Arm) -> bool:
        arm_int4 = arm.config.env.get(DRAFT_INT4_ENV) == "1"
        return (
            arm.config.tensor_parallel_size == tensor_parallel_size
            and arm.config.spec_depth == spec_depth
            and same_quant(packet)
            and (not spec_depth or draft_lm_head_int4 is None or arm_int4 == draft_lm_head_int4)
        )

    published = [p for p in _published(packets, recipe, hardware, family) if not is_cell(p[0], p[1])]
    candidates = [
        (
            (
                a.config.tensor_parallel_size == tensor_parallel_size,
                same_quant(p),
                not spec_depth
                or draft_lm_head_int4 is None
                or (a.config.env.get(DRAFT_INT4_ENV) == "1") == draft_lm_head_int4,
            ),
            (p, a, proj),
        )
        for p, a, proj in published
        if a.config.spec_depth == spec_depth and (not spec_depth or a.config.spec_method == "mtp")
    ]
    if not candidates:
        return None
    best = max(score for score, _ in candidates)
    basis = [item for score, item in candidates if score == best]
    if draft_lm_head_int4 is None:
        draft_lm_head_int4 = bool(spec_depth) and basis[0][1].config.env.get(DRAFT_INT4_ENV) == "1"
        basis = [
            b for b in basis if not spec_depth or (b[1].config.env.get(DRAFT_INT4_ENV) == "1") == draft_lm_head_int4
        ]
    utilisation = statistics.median(b[2].utilisation or 0.0 for b in basis)
    tp_ratio = None
    basis_tp = basis[0][1].config.tensor_parallel_size
    if basis_tp != tensor_parallel_size:
        tp_ratio = _tp_ratio(published, tensor_parallel_size, basis_tp)
        utilisation *= tp_ratio if tp_ratio is not None else 1.0
    kv_bytes, kv_source = _variant_kv(recipe, scheme)
    facts = resolve_architecture(None, recipe)
    cell = Cell(
        hardware=hardware,
        scheme=scheme,
        scheme_source=f"cell quantization {quantization!r}",
        quantization=quantization,
        cards=tensor_parallel_size,
        cards_source="cell tensor_parallel_size",
        spec_method="mtp" if spec_depth else None,
        spec_depth=spec_depth,
        draft_int4=bool(spec_depth and draft_lm_head_int4),
        draft_int4_source="cell draft_lm_head_int4" + (" (taken from the closest basis arm)" if spec_depth else ""),
        kv_bytes=kv_bytes,
        kv_source=kv_source,
        prompt_tokens=round(statistics.fmean(b[2].context_tokens - DECODE_WINDOW / 2 for b in basis)),
        prompt_source="mean prompt length of the basis arms",
        facts=facts,
        recipe=recipe,
    )
    if basis_tp != tensor_parallel_size:
        cell.notes.append(
            f"Basis runs on {basis_tp} card(s): utilisation scaled by the family's TP ratio {tp_ratio:.3f}."
            if tp_ratio is not None
            else f"Basis runs on {basis_tp} card(s) and no TP ratio is published: the estimate is likely optimistic."
        )
    projection = project_cell(cell, force_upper_bound=True)
    if projection is None:
        return None
    layout = layout_from(facts)
    if layout is not None and stored_bytes(layout, scheme) / tensor_parallel_size > hardware.memory_gb.value * GB:
        return None
    return CellEstimate(
        family=family,
        hardware=hardware.id,
        quantization=quantization,
        tensor_parallel_size=tensor_parallel_size,
        spec_depth=spec_depth,
        draft_lm_head_int4=cell.draft_int4,
        decode_tok_s=projection.ceiling_tok_s * utilisation,
        ceiling_tok_s=projection.ceiling_tok_s,
        utilisation=utilisation,
        tp_ratio=tp_ratio,
        basis=[
            BasisArm(
                packet_id=p.id,
                arm_id=a.id,
                quantization=p.identity.model.quantization,
                tensor_parallel_size=a.config.tensor_parallel_size,
                spec_depth=a.config.spec_depth,
                draft_head=a.config.draft_head,
                measured_tok_s=proj.measured_tok_s or 0.0,
                ceiling_tok_s=proj.ceiling_tok_s,
                utilisation=proj.utilisation or 0.0,
            )
            for p, a, proj in basis
        ],
        rule=ESTIMATE_RULE,
        projection=projection,
    )


def _published(packets: Sequence[Packet], recipe: Recipe, hardware: Hardware, family: str) -> list[_Published]:
    """Qualified arms of the family on this hardware, projected with speculative ceilings at L = depth + 1."""
    out: list[_Published] = []
    for packet in packets:
        if packet.identity.model.slug != family or packet.identity.host.hardware != hardware.id:
            continue
        for arm in packet.arms:
            if not qualified(arm):
                continue
            cell = cell_for_arm(packet, arm, hardware, recipe)
            projection = project_cell(cell, force_upper_bound=True) if cell is not None else None
            if projection is not None and projection.utilisation is not None and projection.consistent:
                out.append((packet, arm, projection))
    return out


def _tp_ratio(published: list[_Published], cell_tp: int, basis_tp: int) -> float | None:
    """Median over depths published on both card counts of u(cell_tp) / u(basis_tp)."""
    ratios = []
    for depth in sorted({a.config.spec_depth for _, a, _ in published}):
        here = [
            proj.utilisation or 0.0
            for _, a, proj in published
            if a.config.spec_depth == depth and a.config.tensor_parallel_size == cell_tp
        ]
        there = [
            proj.utilisation or 0.0
            for _, a, proj in published
            if a.config.spec_depth == depth and a.config.tensor_parallel_size == basis_tp
        ]
        if here and there:
            ratios.append(statistics.median(here) / statistics.median(there))
    return statistics.median(ratios) if ratios else None


def _variant_kv(recipe: Recipe, scheme: QuantScheme) -> tuple[float, str]:
    for name, variant in recipe.variants.items():
        found = scheme_for(variant.precision)
        dtype = variant_kv_cache_dtype(recipe, name) if found is not None and found.id == scheme.id else None
        if dtype is not None:
            return kv_cache_bytes(dtype), f"recipe variants.{name}.extra_args --kv-cache-dtype {dtype}"
    return 2.0, "assumed: KV cache in the model's 16-bit dtype (no --kv-cache-dtype in the recipe variant)"
