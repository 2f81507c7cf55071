"""Project packet arms against the physical ceiling; see docs/projections.md."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from catalog.hardware import Hardware
from catalog.metrics import DECODE_WINDOW
from catalog.packet import Arm, Packet, State
from catalog.projection.bands import band_for
from catalog.projection.cells import (
    ALLREDUCE_LATENCY_SOURCE,
    ALLREDUCE_LATENCY_US,
    STATE_BYTES,
    STATE_BYTES_SOURCE,
    TEXT_ONLY_NOTE,
    Cell,
    Inputs,
    cell_for_arm,
    parse_count,
)
from catalog.projection.facts import ArchitectureFacts, conflicts, known_model
from catalog.projection.models import ByteTerm, Method, OptimisationGrade, PrefillBound, Projection
from catalog.projection.physics import (
    GB,
    Layout,
    StepModel,
    Term,
    architecture_step,
    collective_ms,
    layout_from,
    prefill_flops,
    step_ceiling,
    stored_bytes,
)
from catalog.projection.precision import DRAFT_LM_HEAD_INT4
from catalog.recipe import Recipe


def _record_facts(inputs: Inputs, facts: ArchitectureFacts, layout: Layout) -> None:
    inputs.fact("num_layers", "decoder layers", facts.num_layers)  # type: ignore[arg-type]
    inputs.fact("full_attention_layers", "full-attention layers", facts.full_attention_layers)  # type: ignore[arg-type]
    inputs.fact("linear_attention_layers", "linear-attention layers", facts.linear_attention_layers)  # type: ignore[arg-type]
    inputs.fact("hidden_size", "hidden size", facts.hidden_size)  # type: ignore[arg-type]
    inputs.fact("intermediate_size", "MLP intermediate size", facts.intermediate_size)  # type: ignore[arg-type]
    inputs.fact("num_attention_heads", "attention heads", facts.num_attention_heads)  # type: ignore[arg-type]
    inputs.fact("num_kv_heads", "KV heads", facts.num_kv_heads)  # type: ignore[arg-type]
    inputs.fact("head_dim", "attention head dim", facts.head_dim)  # type: ignore[arg-type]
    inputs.fact("attn_output_gate", "attention output gate", facts.attn_output_gate)  # type: ignore[arg-type]
    inputs.fact("vocab_size", "vocabulary", facts.vocab_size)  # type: ignore[arg-type]
    inputs.fact("tie_word_embeddings", "lm_head tied to the embeddings", facts.tie_word_embeddings)  # type: ignore[arg-type]
    if layout.linear_layers:
        inputs.fact("linear_num_key_heads", "linear-attention key heads", facts.linear_num_key_heads)  # type: ignore[arg-type]
        inputs.fact("linear_num_value_heads", "linear-attention value heads", facts.linear_num_value_heads)  # type: ignore[arg-type]
        inputs.fact("linear_key_head_dim", "linear-attention key head dim", facts.linear_key_head_dim)  # type: ignore[arg-type]
        inputs.fact("linear_value_head_dim", "linear-attention value head dim", facts.linear_value_head_dim)  # type: ignore[arg-type]
        inputs.fact("linear_conv_kernel_dim", "linear-attention conv kernel", facts.linear_conv_kernel_dim)  # type: ignore[arg-type]
    inputs.fact("mtp_layers", "MTP layers", facts.mtp_layers)  # type: ignore[arg-type]
    inputs.add(
        "text_parameters",
        "language-model parameters (no MTP, no vision)",
        layout.text_parameters,
        "params",
        "derived: embeddings + lm_head (if untied) + decoder blocks + norms, from the facts above",
        "derived",
    )


def _fallback_step(cell: Cell, inputs: Inputs, context: float) -> tuple[StepModel, Method] | None:
    """No full architecture: the checkpoint's bytes, else the recipe's parameter count."""
    facts = cell.facts
    vocab = facts.vocab_size.value if facts.vocab_size else None
    hidden = facts.hidden_size.value if facts.hidden_size else None
    tied = bool(facts.tie_word_embeddings and facts.tie_word_embeddings.value)
    model = cell.packet.identity.model if cell.packet else None
    terms: list[Term] = []
    if model is not None and model.weight_bytes:
        method: Method = "checkpoint"
        inputs.add(
            "weight_bytes",
            "checkpoint weight bytes",
            model.weight_bytes,
            "B",
            "packet identity.model.weight_bytes",
            "packet",
        )
        unread = 2.0 * vocab * hidden if (vocab and hidden and not tied) else 0.0
        detail = f"{model.weight_bytes:,} B checkpoint" + (
            f" − {unread:,.0f} B input embedding table (untied, one row read)" if unread else ""
        )
        terms.append(Term("weights", "weights (checkpoint bytes)", "target step", model.weight_bytes - unread, detail))
        cell.notes.append(
            "Architecture incomplete: bytes per step are the checkpoint's weight bytes;"
            " any vision tower or MTP head in it is counted too, so the ceiling is conservative."
        )
    elif cell.recipe is not None:
        method = "parameters"
        active = parse_count(cell.recipe.model.active_parameters)
        total = parse_count(cell.recipe.model.parameter_count)
        count = active or total
        if count is None:
            return None
        which = "active_parameters" if active else "parameter_count"
        inputs.add(
            "parameters",
            "parameters read per token",
            count,
            "params",
            f"recipe model.{which} = {getattr(cell.recipe.model, which)!r}",
            "recipe",
        )
        head = float(vocab * hidden) if vocab and hidden else 0.0
        body = count - head * (1 if tied else 2) if head else count
        bpw = cell.scheme.bytes_per_weight("mlp", hidden or 4096)
        terms.append(
            Term(
                "weights",
                "decoder weights",
                "target step",
                body * bpw,
                f"{body:,.0f} params × {bpw:.5g} B ({cell.scheme.describe('mlp')})",
            )
        )
        if head:
            terms.append(Term("lm_head", "lm_head", "target step", head * 2.0, f"{head:,.0f} params × 2 B"))
        cell.notes.append(
            "Architecture unknown: bytes per step come from the recipe's parameter count"
            + (
                " (embeddings and lm_head split out with the packet's vocab and hidden size)"
                if head
                else ", all at the quantized precision"
            )
            + "; a multimodal count includes the vision tower, so the ceiling is conservative."
        )
    else:
        return None
    layers = facts.full_attention_layers or facts.num_layers
    if layers and facts.num_kv_heads and facts.head_dim:
        per_token = 2 * facts.num_kv_heads.value * facts.head_dim.value
        kv = layers.value * per_token * cell.kv_bytes * context
        terms.append(
            Term(
                "kv_cache",
                f"KV cache read ({layers.value} layers at {context:,.0f} tokens)",
                "target step",
                kv,
                f"{layers.value} × {per_token:,} values/token × {cell.kv_bytes:g} B × {context:,.0f}",
            )
        )
    collectives = 2 * facts.num_layers.value + 2 if facts.num_layers else 0
    step = StepModel(
        tuple(terms), (), cell.spec_method == "ngram" or cell.spec_depth == 0, collectives, 0, (hidden or 0) * 2.0
    )
    return step, method


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
    hw = cell.hardware
    inputs = Inputs()
    context = cell.prompt_tokens + DECODE_WINDOW / 2
    bandwidth = hw.memory_bandwidth_gb_s.value
    inputs.add(
        "memory_bandwidth_gb_s",
        "memory bandwidth per card",
        bandwidth,
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
    layout = layout_from(cell.facts)
    method: Method
    if layout is not None:
        method = "architecture"
        _record_facts(inputs, cell.facts, layout)
        for component in ("attention", "linear_attn", "mlp", "lm_head", "mtp"):
            if component == "linear_attn" and not layout.linear_layers:
                continue
            if component == "mtp" and not (cell.spec_depth and layout.mtp_layers):
                continue
            inputs.add(
                f"bytes_per_weight_{component}",
                f"{component} bytes per weight",
                round(cell.scheme.bytes_per_weight(component, layout.hidden), 6),
                "B",
                cell.scheme.describe(component),
                "assumed" if "assumed" in cell.scheme.describe(component) else "derived",
            )
        if layout.linear_layers:
            inputs.add(
                "state_bytes", "linear-attention state bytes per value", STATE_BYTES, "B", STATE_BYTES_SOURCE, "assumed"
            )
        draft_head = DRAFT_LM_HEAD_INT4 if cell.draft_int4 else None
        if cell.spec_depth:
            inputs.add(
                "draft_lm_head_int4",
                "draft lm_head in INT4",
                cell.draft_int4,
                "",
                cell.draft_int4_source,
                "packet" if cell.packet else "derived",
            )
        step = architecture_step(
            layout,
            cell.scheme,
            context_tokens=context,
            kv_bytes=cell.kv_bytes,
            state_bytes=STATE_BYTES,
            spec_depth=cell.spec_depth if cell.spec_method in (None, "mtp") else 0,
            draft_lm_head=draft_head,
        )
        if cell.spec_method not in (None, "mtp"):
            step = StepModel(
                step.target, (), cell.spec_method == "ngram", step.collectives_target, 0, step.message_bytes_per_token
            )
        cell.notes.append(TEXT_ONLY_NOTE)
        _checkpoint_check(cell, layout)
    else:
        fallback = _fallback_step(cell, inputs, context)
        if fallback is None:
            return None
        step, method = fallback
    if cell.spec_depth and not step.draft_cost_known:
        cell.notes.append(
            f"Draft cost of {cell.spec_method!r} speculation is not modelled:"
            f" the ceiling leaves it out, so it is generous."
        )
    if cell.spec_depth and cell.spec_method == "ngram":
        cell.notes.append("n-gram drafts come from prompt lookup on the host: no draft weights are read.")
    link = hw.interconnect.bandwidth_gb_s.value if hw.interconnect else None
    if cell.cards > 1:
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
    depth = cell.spec_depth
    if depth:
        if cell.acceptance_length is not None and not force_upper_bound:
            tokens, acceptance = cell.acceptance_length, "recorded"
            inputs.add(
                "acceptance_length",
                "mean tokens per target forward (L)",
                tokens,
                "tokens",
                cell.acceptance_source,
                "packet",
            )
        else:
            tokens, acceptance = float(depth + 1), "upper bound: acceptance not recorded"
            inputs.add(
                "acceptance_length",
                "mean tokens per target forward (L)",
                tokens,
                "tokens",
                f"upper bound: depth + 1 = {depth + 1}, every drafted token accepted (acceptance not recorded)",
                "assumed",
            )
            cell.notes.append(
                "Acceptance not recorded: L is bounded by depth + 1,"
                " so the ceiling is an upper bound and the utilisation a lower bound."
            )
    else:
        tokens, acceptance = 1.0, None
    ceiling = step_ceiling(
        step,
        bandwidth_gb_s=bandwidth,
        cards=cell.cards,
        spec_depth=depth,
        tokens_per_step=tokens,
        latency_us=ALLREDUCE_LATENCY_US,
        link_gb_s=link,
    )
    measured, basis = _measured(cell.arm)
    utilisation = measured / ceiling.tok_s if measured else None
    consistent = utilisation is None or utilisation <= 1.0
    grade = None
    if utilisation is not None and consistent and cell.arm is not None and cell.arm.state.has_speed:
        band = band_for(utilisation)
        grade = OptimisationGrade(band=band.name, threshold=band.threshold, meaning=band.meaning)
    if not consistent:
        cell.notes.append(
            "Inconsistent: the measured speed exceeds the ceiling, so the model or its inputs are wrong; no grade."
        )
    if cell.arm is not None and cell.arm.state == State.WITHHELD:
        cell.notes.append("Withheld result: its speed is shown against the ceiling for the record, never graded.")
    if cell.packet is not None:
        cell.notes.extend(conflicts(cell.packet, known_model(cell.packet.identity.model.repo)))
    substituted = (
        f"({step.target_bytes / GB:.3f} GB + {depth} × {step.draft_bytes / GB:.3f} GB)"
        f" / ({bandwidth:g} GB/s × {cell.cards}) "
        f"= {ceiling.memory_ms:.3f} ms + {ceiling.interconnect_ms:.3f} ms collectives;"
        f" {tokens:g} tokens / {ceiling.step_ms:.3f} ms "
        f"= {ceiling.tok_s:.2f} tok/s"
    )
    if measured:
        substituted += f"; measured {measured:.2f} tok/s / {ceiling.tok_s:.2f} = {utilisation:.3f}"
    prefill = _prefill(cell, layout, step, link)
    return Projection(
        packet_id=cell.packet.id if cell.packet else None,
        arm_id=cell.arm.id if cell.arm else None,
        arm_label=cell.arm.label if cell.arm else _cell_label(cell),
        arm_state=cell.arm.state.value if cell.arm else State.ESTIMATED.value,
        hardware=hw.id,
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
        utilisation_is_lower_bound=acceptance == "upper bound: acceptance not recorded",
        optimisation_grade=grade,
        consistent=consistent,
        formula=_formula(cell),
        substituted=substituted,
        byte_terms=[
            ByteTerm(key=t.key, label=t.label, per=t.per, bytes=t.bytes, detail=t.detail)
            for t in (*step.target, *step.draft)
        ],
        inputs=inputs.listed(),
        prefill=prefill,
        notes=list(dict.fromkeys(cell.notes)),
    )


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


def _checkpoint_check(cell: Cell, layout: Layout) -> None:
    """Compare the component model with the bytes a checkpoint is known to have."""
    bf16 = cell.facts.bf16_checkpoint_bytes
    if bf16 is not None:
        modelled = layout.checkpoint_parameters * 2
        cell.notes.append(
            f"Cross-check: {layout.checkpoint_parameters:,} parameters × 2 B = {modelled / GB:.2f} GB "
            f"vs {bf16.value / GB:.2f} GB BF16 checkpoint ({(modelled / bf16.value - 1) * 100:+.1f} %)."
        )
    model = cell.packet.identity.model if cell.packet else None
    if model is not None and model.weight_bytes:
        stored = stored_bytes(layout, cell.scheme)
        ratio = model.weight_bytes / stored
        if abs(ratio - 1) > 0.1:
            cell.notes.append(
                f"Check the precision assumptions: the packet's checkpoint holds {model.weight_bytes / GB:.2f} GB, "
                f"the component model predicts {stored / GB:.2f} GB ({(ratio - 1) * 100:+.0f} %)."
            )


def _prefill(cell: Cell, layout: Layout | None, step: StepModel, link: float | None) -> PrefillBound:
    hw = cell.hardware
    eight_bit = cell.scheme.activation_bits <= 8 and hw.compute_tops_int8 is not None
    if eight_bit and cell.scheme.id == "fp8-dynamic" and hw.platform != "cuda":
        eight_bit = False  # assumed: no FP8 matrix engine outside the CUDA cards listed; FP8 weights are up-converted
    figure = hw.compute_tops_int8 if eight_bit else hw.compute_tflops_bf16
    if figure is None:
        figure = hw.compute_tops_int8 or hw.compute_tflops_bf16
    peak = figure.value if figure else 0.0
    which = "compute_tops_int8" if figure is hw.compute_tops_int8 else "compute_tflops_bf16"
    p = cell.prompt_tokens
    spec_mtp = cell.spec_depth > 0 and cell.spec_method == "mtp"
    weights = sum(t.bytes for t in step.target if t.key not in ("kv_cache", "linear_state")) + (
        step.draft_bytes if spec_mtp else 0.0
    )
    if layout is not None:
        flops = prefill_flops(layout, p, with_mtp=spec_mtp)
        formula = (
            "TTFT ≥ max(FLOPs / (peak × cards), weight bytes / (bandwidth × cards)) + collectives; "
            " FLOPs = 2 × decoder weights × P "
            "+ 2 × P² × heads × head_dim per full-attention layer +"
            " 4 × P × value heads × dk × dv per linear-attention layer "
            "+ 2 × lm_head (last position)" + (" + the MTP head over the prompt" if spec_mtp else "")
        )
    else:
        params = weights / cell.scheme.bytes_per_weight("mlp", 4096)
        flops = 2.0 * params * p
        formula = (
            "TTFT ≥ max(FLOPs / (peak × cards), weight bytes / (bandwidth × cards)) + collectives; "
            " FLOPs ≈ 2 × (weight bytes / bytes per weight) × P (architecture incomplete: attention scores left out)"
        )
    compute_ms = flops / (peak * 1e12 * cell.cards) * 1000 if peak else 0.0
    memory_ms = weights / (hw.memory_bandwidth_gb_s.value * GB * cell.cards) * 1000
    comm = step.collectives_target * collective_ms(
        step.message_bytes_per_token * p, cell.cards, ALLREDUCE_LATENCY_US, link
    )
    bound = max(compute_ms, memory_ms) + comm
    measured = cell.arm.ttft_ms if cell.arm is not None else None
    return PrefillBound(
        prompt_tokens=p,
        prompt_tokens_source=cell.prompt_source,
        flops=flops,
        peak_tflops=peak,
        peak_source=f"data/hardware.yaml {hw.id} {which} (source: {figure.source if figure else 'missing'})",
        compute_ms=compute_ms,
        memory_ms=memory_ms,
        interconnect_ms=comm,
        bound_ms=bound,
        measured_ttft_ms=measured,
        bound_over_measured=bound / measured if measured else None,
        formula=formula,
    )


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


def prefill_bound_ms(
    packet: Packet, arm: Arm, hardware: Hardware, recipe: Recipe | None, prompt_tokens: int | None = None
) -> PrefillBound | None:
    """Lower bound on TTFT for an arm, at its own prompt length or at `prompt_tokens`."""
    cell = cell_for_arm(packet, arm, hardware, recipe)
    if cell is None:
        return None
    if prompt_tokens is not None:
        cell.prompt_tokens, cell.prompt_source = prompt_tokens, "given by the caller"
    projection = project_cell(cell)
    return projection.prefill if projection else None
