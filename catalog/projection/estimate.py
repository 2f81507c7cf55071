"""Estimates for untested matrix cells: the cell's ceiling times the utilisation of its closest
published neighbours. An estimate is labelled `estimated`, never a measurement, never a headline."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from catalog.hardware import Hardware
from catalog.metrics import DECODE_WINDOW
from catalog.packet import Arm, Packet
from catalog.projection.cells import Cell, cell_for_arm
from catalog.projection.facts import resolve_architecture
from catalog.projection.models import BasisArm, CellEstimate, Projection
from catalog.projection.physics import GB, layout_from
from catalog.projection.precision import DRAFT_INT4_ENV, QuantScheme, packet_scheme, scheme_for
from catalog.projection.project import project_cell
from catalog.recipe import Recipe
from catalog.selection import qualified

ESTIMATE_RULE = (
    "estimate = ceiling of the untested cell × median utilisation of its closest published arms. Published: measured "
    "or imported, every gate passed, two fresh-server values. Same family and same hardware only. Same speculative "
    "depth only (acceptance falls with depth, so utilisation does not carry across depths); speculative ceilings on "
    "both sides use the upper bound L = depth + 1. Closest: same tensor-parallel size first, then same quantization, "
    "then the same draft head; the median is taken over every arm tied at the best match. No such arm, an unknown "
    "architecture or a model that does not fit in the cards' memory: no estimate."
)


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
    candidates: list[tuple[tuple[bool, bool, bool], Packet, Arm, Projection]] = []
    for packet in packets:
        if packet.identity.model.slug != family or packet.identity.host.hardware != hardware.id:
            continue
        packet_scheme_, _ = packet_scheme(packet, recipe)
        for arm in packet.arms:
            if not qualified(arm) or arm.config.spec_depth != spec_depth:
                continue
            if spec_depth and arm.config.spec_method != "mtp":
                continue
            cell = cell_for_arm(packet, arm, hardware, recipe)
            if cell is None:
                continue
            projection = project_cell(cell, force_upper_bound=True)
            if projection is None or projection.utilisation is None or not projection.consistent:
                continue
            arm_int4 = arm.config.env.get(DRAFT_INT4_ENV) == "1"
            same_tp = arm.config.tensor_parallel_size == tensor_parallel_size
            same_quant = packet_scheme_ is not None and packet_scheme_.id == scheme.id
            same_draft = not spec_depth or draft_lm_head_int4 is None or arm_int4 == draft_lm_head_int4
            if same_tp and same_quant and same_draft:
                continue  # the cell itself: leave it out
            candidates.append(((same_tp, same_quant, same_draft), packet, arm, projection))
    if not candidates:
        return None
    best = max(c[0] for c in candidates)
    basis = [c for c in candidates if c[0] == best]
    if draft_lm_head_int4 is None:
        draft_lm_head_int4 = bool(spec_depth) and basis[0][2].config.env.get(DRAFT_INT4_ENV) == "1"
        basis = [
            c for c in basis if not spec_depth or (c[2].config.env.get(DRAFT_INT4_ENV) == "1") == draft_lm_head_int4
        ]
    utilisation = statistics.median(c[3].utilisation for c in basis if c[3].utilisation is not None)
    kv_bytes, kv_source = _variant_kv(recipe, scheme)
    facts = resolve_architecture(None, recipe, recipe.variant_model_id(variant) if variant else None)
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
        prompt_tokens=round(statistics.fmean(c[3].context_tokens - DECODE_WINDOW / 2 for c in basis)),
        prompt_source="mean prompt length of the basis arms",
        facts=facts,
        recipe=recipe,
    )
    projection = project_cell(cell, force_upper_bound=True)
    if projection is None:
        return None
    layout = layout_from(facts)
    if layout is not None:
        resident = layout.checkpoint_parameters * 2 if scheme.weight_bits >= 16 else None
        if resident is not None and resident / tensor_parallel_size > hardware.memory_gb.value * GB:
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
            for _, p, a, proj in basis
        ],
        rule=ESTIMATE_RULE,
        projection=projection,
    )


def _variant_kv(recipe: Recipe, scheme: QuantScheme) -> tuple[float, str]:
    for name, variant in recipe.variants.items():
        found = scheme_for(variant.precision)
        if found is not None and found.id == scheme.id and "--kv-cache-dtype" in variant.extra_args[:-1]:
            dtype = variant.extra_args[variant.extra_args.index("--kv-cache-dtype") + 1]
            return (
                1.0 if "fp8" in dtype or "int8" in dtype else 2.0
            ), f"recipe variants.{name}.extra_args --kv-cache-dtype {dtype}"
    return 2.0, "assumed: KV cache in the model's 16-bit dtype (no --kv-cache-dtype in the recipe variant)"
