"""The bytes one decode step reads: the component model when the architecture is known, else the
checkpoint's weight bytes or the recipe's parameter count (docs/projections.md)."""

from __future__ import annotations

from catalog.projection.cells import STATE_BYTES, STATE_BYTES_SOURCE, TEXT_ONLY_NOTE, Cell, Inputs, parse_count
from catalog.projection.facts import ArchitectureFacts
from catalog.projection.models import Method
from catalog.projection.physics import GB, Layout, StepModel, Term, architecture_step, layout_from, stored_bytes
from catalog.projection.precision import DRAFT_LM_HEAD_INT4


def step_model(cell: Cell, inputs: Inputs, context: float) -> tuple[StepModel, Method, Layout | None] | None:
    """The step's byte terms, how they were found, and the layout (None without a full architecture);
    None when not even a parameter count is known. Records its inputs and notes on the way."""
    layout = layout_from(cell.facts)
    method: Method
    if layout is not None:
        step, method = _architecture_step(cell, inputs, context, layout), "architecture"
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
    return step, method, layout


def _architecture_step(cell: Cell, inputs: Inputs, context: float, layout: Layout) -> StepModel:
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
    return step


def _record_facts(inputs: Inputs, facts: ArchitectureFacts, layout: Layout) -> None:
    inputs.fact("num_layers", "decoder layers", facts.num_layers)
    inputs.fact("full_attention_layers", "full-attention layers", facts.full_attention_layers)
    inputs.fact("linear_attention_layers", "linear-attention layers", facts.linear_attention_layers)
    inputs.fact("hidden_size", "hidden size", facts.hidden_size)
    inputs.fact("intermediate_size", "MLP intermediate size", facts.intermediate_size)
    inputs.fact("num_attention_heads", "attention heads", facts.num_attention_heads)
    inputs.fact("num_kv_heads", "KV heads", facts.num_kv_heads)
    inputs.fact("head_dim", "attention head dim", facts.head_dim)
    inputs.fact("attn_output_gate", "attention output gate", facts.attn_output_gate)
    inputs.fact("vocab_size", "vocabulary", facts.vocab_size)
    inputs.fact("tie_word_embeddings", "lm_head tied to the embeddings", facts.tie_word_embeddings)
    if layout.linear_layers:
        inputs.fact("linear_num_key_heads", "linear-attention key heads", facts.linear_num_key_heads)
        inputs.fact("linear_num_value_heads", "linear-attention value heads", facts.linear_num_value_heads)
        inputs.fact("linear_key_head_dim", "linear-attention key head dim", facts.linear_key_head_dim)
        inputs.fact("linear_value_head_dim", "linear-attention value head dim", facts.linear_value_head_dim)
        inputs.fact("linear_conv_kernel_dim", "linear-attention conv kernel", facts.linear_conv_kernel_dim)
    inputs.fact("mtp_layers", "MTP layers", facts.mtp_layers)
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
