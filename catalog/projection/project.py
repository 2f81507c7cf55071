"""Project packet arms against the physical ceiling; see docs/projections.md."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from catalog.model.metrics import DECODE_WINDOW
from catalog.model.packet import Arm, Packet, State
from catalog.projection.bands import band_for
from catalog.projection.cells import ALLREDUCE_LATENCY_SOURCE, ALLREDUCE_LATENCY_US, Cell, Inputs, cell_for_arm
from catalog.projection.models import ByteTerm, OptimisationGrade, Projection
from catalog.projection.physics import GB, Ceiling, StepModel, step_ceiling
from catalog.projection.prefill import prefill_bound
from catalog.projection.steps import step_model
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe


def _formula(cell: Cell) -> str:
    b = (
        "B_target = weights read per target forward at their stored precision (lm_head, decoder blocks;"
        " vision tower not read) + KV cache at the context + linear-attention state"
    )
    if cell.spec_depth == 0 and cell.cards == 1:
        return f"ceiling = bandwidth × cards / B_target;  {b}"
    if cell.spec_depth == 0:
        return (
            f"ceiling = 1 / (B_target / (bandwidth × cards) + C × t_coll);  {b}; "
            f" C = 2 collectives per decoder layer + 2;  "
            "t_coll = latency + 2(cards−1)/cards × hidden × 2 B / link bandwidth"
        )
    return (
        f"ceiling = L / t_step;  t_step = (B_target + d × B_draft) / (bandwidth × cards) + t_comm;  {b};  "
        "B_draft = MTP layer + draft lm_head + MTP KV cache, per drafted token;  d = speculative depth;  "
        "L = mean tokens per target forward (1 + accepted / drafts), at most d + 1;  "
        "t_comm = C_target × t_coll(d + 1 positions) + d × C_draft × t_coll(1) on more than one card, else 0"
    )


def project_cell(cell: Cell, *, force_upper_bound: bool = False) -> Projection | None:
    """The cell's ceiling, utilisation and grade, each input with its source; None when not even a
    parameter count is known. `force_upper_bound` ignores a recorded acceptance length (L = depth + 1)."""
    inputs = Inputs()
    context = cell.prompt_tokens + DECODE_WINDOW / 2
    _record_cell_inputs(cell, inputs, context)
    modelled = step_model(cell, inputs, context)
    if modelled is None:
        return None
    step, method, layout = modelled
    link = _record_interconnect(cell, inputs, step)
    tokens, acceptance = _tokens_per_step(cell, inputs, force_upper_bound)
    ceiling = step_ceiling(
        step,
        bandwidth_gb_s=cell.hardware.memory_bandwidth_gb_s.value,
        cards=cell.cards,
        spec_depth=cell.spec_depth,
        tokens_per_step=tokens,
        latency_us=ALLREDUCE_LATENCY_US,
        link_gb_s=link,
    )
    measured, basis = _measured(cell.arm)
    utilisation = measured / ceiling.tok_s if measured else None
    consistent = utilisation is None or utilisation <= 1.0
    grade = _grade(cell, utilisation, consistent)
    depth = cell.spec_depth
    return Projection(
        packet_id=cell.packet.id if cell.packet else None,
        arm_id=cell.arm.id if cell.arm else None,
        arm_label=cell.arm.label if cell.arm else _cell_label(cell),
        arm_state=cell.arm.state.value if cell.arm else State.ESTIMATED.value,
        hardware=cell.hardware.id,
        cards=cell.cards,
        quantization=cell.quantization,
        spec_depth=depth,
        method=method,
        ceiling_tok_s=ceiling.tok_s,
        ceiling_kind="speculative" if depth else "decode",
        acceptance_length=tokens if depth else None,
        acceptance=acceptance,
        target_bytes_per_step=step.target_bytes,
        draft_bytes_per_token=step.draft_bytes,
        step_ms=ceiling.step_ms,
        memory_ms=ceiling.memory_ms,
        interconnect_ms=ceiling.interconnect_ms,
        context_tokens=context,
        measured_tok_s=measured,
        measured_basis=basis,
        utilisation=utilisation,
        utilisation_is_lower_bound=acceptance == ACCEPTANCE_UPPER_BOUND,
        optimisation_grade=grade,
        consistent=consistent,
        formula=_formula(cell),
        substituted=_substituted(cell, step, ceiling, tokens, measured),
        byte_terms=[
            ByteTerm(key=t.key, label=t.label, per=t.per, bytes=t.bytes, detail=t.detail)
            for t in (*step.target, *step.draft)
        ],
        inputs=inputs.listed(),
        prefill=prefill_bound(cell, layout, step, link),
        notes=list(dict.fromkeys(cell.notes)),
    )


def _record_cell_inputs(cell: Cell, inputs: Inputs, context: float) -> None:
    """The inputs every projection shows: the card's bandwidth, the cards, weight format, lengths, KV bytes."""
    hw = cell.hardware
    inputs.add(
        "memory_bandwidth_gb_s",
        "memory bandwidth per card",
        hw.memory_bandwidth_gb_s.value,
        "GB/s",
        f"data/hardware.yaml {hw.id} memory_bandwidth_gb_s (source: {hw.memory_bandwidth_gb_s.source})",
        "hardware",
    )
    inputs.add(
        "cards",
        "cards (tensor parallel size)",
        cell.cards,
        "cards",
        cell.cards_source,
        "packet" if cell.packet else "derived",
    )
    inputs.add(
        "quantization",
        "weight format",
        cell.scheme.label,
        "",
        f"{cell.scheme_source}; {cell.scheme.source}",
        "packet" if cell.packet else "derived",
    )
    inputs.add(
        "prompt_tokens",
        "prompt length",
        cell.prompt_tokens,
        "tokens",
        cell.prompt_source,
        "packet" if cell.prompt_source.startswith("packet") else "assumed",
    )
    inputs.add(
        "context_tokens",
        "mean context over the decode window",
        context,
        "tokens",
        f"derived: prompt tokens + {DECODE_WINDOW}/2 (decode rate is timed over generated tokens 1..{DECODE_WINDOW})",
        "derived",
    )
    inputs.add(
        "kv_bytes",
        "KV cache bytes per value",
        cell.kv_bytes,
        "B",
        cell.kv_source,
        "assumed"
        if cell.kv_source.startswith("assumed")
        else ("packet" if cell.kv_source.startswith("packet") else "recipe"),
    )


def _record_interconnect(cell: Cell, inputs: Inputs, step: StepModel) -> float | None:
    """The card-to-card link's bandwidth (None when the card lists none); on more than one card, the
    collective latency and the link are inputs and a note says what tensor parallelism costs."""
    hw = cell.hardware
    link = hw.interconnect.bandwidth_gb_s.value if hw.interconnect else None
    if cell.cards == 1:
        return link
    inputs.add(
        "allreduce_latency_us",
        "latency per collective",
        ALLREDUCE_LATENCY_US,
        "µs",
        ALLREDUCE_LATENCY_SOURCE,
        "assumed",
    )
    if hw.interconnect:
        inputs.add(
            "link_gb_s",
            f"card-to-card link ({hw.interconnect.name})",
            link or 0.0,
            "GB/s",
            f"data/hardware.yaml {hw.id} interconnect (source: {hw.interconnect.bandwidth_gb_s.source})",
            "hardware",
        )
    cell.notes.append(
        f"Tensor parallel over {cell.cards} cards: bytes split {cell.cards} ways;"
        f" each of {step.collectives_target} "
        "collectives per target forward pays the latency above. Replicated small tensors are ignored."
    )
    return link


ACCEPTANCE_UPPER_BOUND = "upper bound: acceptance not recorded"


def _tokens_per_step(cell: Cell, inputs: Inputs, force_upper_bound: bool) -> tuple[float, str | None]:
    """L, the mean tokens one target forward yields, and where it comes from (None without speculation)."""
    depth = cell.spec_depth
    if not depth:
        return 1.0, None
    if cell.acceptance_length is not None and not force_upper_bound:
        inputs.add(
            "acceptance_length",
            "mean tokens per target forward (L)",
            cell.acceptance_length,
            "tokens",
            cell.acceptance_source,
            "packet",
        )
        return cell.acceptance_length, "recorded"
    inputs.add(
        "acceptance_length",
        "mean tokens per target forward (L)",
        float(depth + 1),
        "tokens",
        f"upper bound: depth + 1 = {depth + 1}, every drafted token accepted (acceptance not recorded)",
        "assumed",
    )
    cell.notes.append(
        "Acceptance not recorded: L is bounded by depth + 1,"
        " so the ceiling is an upper bound and the utilisation a lower bound."
    )
    return float(depth + 1), ACCEPTANCE_UPPER_BOUND


def _grade(cell: Cell, utilisation: float | None, consistent: bool) -> OptimisationGrade | None:
    """The optimisation band of a published (or screened) speed under its ceiling; the notes say why none."""
    if not consistent:
        cell.notes.append(
            "Inconsistent: the measured speed exceeds the ceiling, so the model or its inputs are wrong; no grade."
        )
    if cell.arm is not None and cell.arm.state == State.WITHHELD:
        cell.notes.append("Withheld result: its speed is shown against the ceiling for the record, never graded.")
    if utilisation is None or not consistent or cell.arm is None or not cell.arm.state.has_speed:
        return None
    band = band_for(utilisation)
    return OptimisationGrade(band=band.name, threshold=band.threshold, meaning=band.meaning)


def _substituted(cell: Cell, step: StepModel, ceiling: Ceiling, tokens: float, measured: float | None) -> str:
    """The formula with this cell's numbers in it."""
    bandwidth = cell.hardware.memory_bandwidth_gb_s.value
    text = (
        f"({step.target_bytes / GB:.3f} GB + {cell.spec_depth} × {step.draft_bytes / GB:.3f} GB)"
        f" / ({bandwidth:g} GB/s × {cell.cards}) "
        f"= {ceiling.memory_ms:.3f} ms + {ceiling.interconnect_ms:.3f} ms collectives;"
        f" {tokens:g} token{'' if tokens == 1 else 's'} / {ceiling.step_ms:.3f} ms "
        f"= {ceiling.tok_s:.2f} tok/s"
    )
    if measured:
        # the arm's own state word: an imported or withheld speed is never called measured
        word = cell.arm.state.label.lower() if cell.arm is not None else "speed"
        text += f"; {word} {measured:.2f} tok/s / {ceiling.tok_s:.2f} = {measured / ceiling.tok_s:.3f}"
    return text


def _cell_label(cell: Cell) -> str:
    spec = (
        f"MTP depth {cell.spec_depth}" + (" with the draft INT4 head" if cell.draft_int4 else "")
        if cell.spec_depth
        else "no speculative decoding"
    )
    return f"{cell.scheme.label} · {cell.cards} × {cell.hardware.name} · {spec}"


def _measured(arm: Arm | None) -> tuple[float | None, str | None]:
    if arm is None:
        return None, None
    values = arm.server_values
    if len(values) >= 2:
        return arm.decode_tok_s, f"centre of {len(values)} fresh-server class-balanced medians"
    if values:
        return values[0], "one fresh server only"
    if arm.published_figure is not None:
        return arm.published_figure, "a single published figure (no fresh-server pair recorded)"
    return None, None


def project_arm(packet: Packet, arm: Arm, hardware: Hardware, recipe: Recipe | None) -> Projection | None:
    """Ceiling, utilisation and grade for one arm; None only when not even a parameter count is known."""
    cell = cell_for_arm(packet, arm, hardware, recipe)
    return project_cell(cell) if cell is not None else None


def project_packet(packet: Packet, hardware: Hardware, recipe: Recipe | None) -> list[Projection]:
    out = [project_arm(packet, arm, hardware, recipe) for arm in packet.arms]
    return [p for p in out if p is not None]


def project_catalog(
    packets: Iterable[Packet], hardware: Mapping[str, Hardware], recipes: Mapping[str, Recipe]
) -> dict[str, list[Projection]]:
    """Every packet's projections, keyed by packet id.

    With a loaded `Catalog` c: `project_catalog(c.packets.values(), c.hardware, c.recipes)`."""
    out: dict[str, list[Projection]] = {}
    for packet in packets:
        hw = hardware.get(packet.identity.host.hardware)
        if hw is not None:
            out[packet.id] = project_packet(packet, hw, recipes.get(packet.identity.model.slug))
    return out
