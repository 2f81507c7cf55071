"""Project packet arms and untested cells against the physical ceiling; see docs/projections.md."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from catalog.hardware import Hardware
from catalog.metrics import DECODE_WINDOW
from catalog.packet import Arm, Packet, State
from catalog.projection.bands import band_for
from catalog.projection.facts import ArchitectureFacts, Fact, conflicts, known_model, resolve_architecture
from catalog.projection.models import (
    BasisArm,
    ByteTerm,
    CellEstimate,
    Method,
    OptimisationGrade,
    Origin,
    PrefillBound,
    Projection,
    ProjectionInput,
)
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
)
from catalog.projection.precision import (
    BF16,
    DRAFT_INT4_ENV,
    DRAFT_LM_HEAD_INT4,
    QuantScheme,
    packet_scheme,
    scheme_for,
)
from catalog.recipe import Recipe
from catalog.selection import qualified

# Assumptions with no better source; each appears in the inputs list of every projection using it.
ALLREDUCE_LATENCY_US = 10.0
ALLREDUCE_LATENCY_SOURCE = (
    "assumed: a floor for one small-message all-reduce between cards over PCIe with a host-driven collective "
    "library (measured stacks typically pay 20-100 µs); a lower value keeps the ceiling an upper bound"
)
DEFAULT_PROMPT_TOKENS = 300
DEFAULT_PROMPT_SOURCE = (
    "assumed: the packet has no prompt rows; strict-suite prompts are one-paragraph work requests of about "
    "1,100 characters (strict-v1 averages 1,129), about 4 characters per token, sent without a chat template"
)
STATE_BYTES = 2.0
STATE_BYTES_SOURCE = (
    "assumed: vLLM's --mamba-ssm-cache-dtype auto keeps the linear-attention state in the model's 16-bit dtype "
    "(a float32 state would add under 1 % to the bytes)"
)
TEXT_ONLY_NOTE = (
    "Text path only: the strict suite sends text, so the vision tower is never read during decode "
    "(with or without --language-model-only) and is left out of the bytes."
)
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMBT])\s*$", re.IGNORECASE)
_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


class _Inputs:
    def __init__(self) -> None:
        self.items: dict[str, ProjectionInput] = {}

    def add(self, name: str, label: str, value: float | bool | str, unit: str, source: str, origin: Origin) -> None:
        self.items[name] = ProjectionInput(name=name, label=label, value=value, unit=unit, source=source, origin=origin)

    def fact(self, name: str, label: str, fact: Fact[object] | None, unit: str = "") -> None:
        if fact is not None and isinstance(fact.value, int | float | bool | str):
            self.add(name, label, fact.value, unit, fact.source, fact.origin)

    def listed(self) -> list[ProjectionInput]:
        return list(self.items.values())


@dataclass
class _Cell:
    """One configuration to project: an arm of a packet, or an untested combination."""

    hardware: Hardware
    scheme: QuantScheme
    scheme_source: str
    quantization: str
    cards: int
    cards_source: str
    spec_method: str | None
    spec_depth: int
    draft_int4: bool
    draft_int4_source: str
    kv_bytes: float
    kv_source: str
    prompt_tokens: int
    prompt_source: str
    facts: ArchitectureFacts
    recipe: Recipe | None = None
    packet: Packet | None = None
    arm: Arm | None = None
    acceptance_length: float | None = None
    acceptance_source: str = ""
    notes: list[str] = field(default_factory=list)


def parse_count(text: str | None) -> float | None:
    """'9B' -> 9e9, '1.3M' -> 1.3e6; None for free text."""
    match = _SIZE.match(text or "")
    return float(match.group(1)) * _SCALE[match.group(2).upper()] if match else None


def _kv_bytes(arm: Arm | None, packet: Packet | None, recipe: Recipe | None) -> tuple[float, str]:
    def size(dtype: str) -> float:
        lowered = dtype.lower()
        return 1.0 if ("fp8" in lowered or "int8" in lowered) else 2.0

    if arm is not None and arm.config.kv_cache_dtype:
        dtype = arm.config.kv_cache_dtype
        return size(dtype), f"packet arm {arm.id} config.kv_cache_dtype = {dtype!r}"
    if arm is not None and "--kv-cache-dtype" in arm.config.argv[:-1]:
        dtype = arm.config.argv[arm.config.argv.index("--kv-cache-dtype") + 1]
        return size(dtype), f"packet arm {arm.id} config.argv --kv-cache-dtype {dtype}"
    variant = packet.identity.model.variant if packet is not None else None
    if recipe is not None and variant is not None and variant in recipe.variants:
        args = recipe.variants[variant].extra_args
        if "--kv-cache-dtype" in args[:-1]:
            dtype = args[args.index("--kv-cache-dtype") + 1]
            return size(dtype), (
                f"recipe variants.{variant}.extra_args --kv-cache-dtype {dtype}"
                f" (the packet records no argv; assumed to apply)"
            )
    return 2.0, "assumed: KV cache in the model's 16-bit dtype (no --kv-cache-dtype recorded)"


def _prompt_tokens(arm: Arm | None) -> tuple[int, str]:
    rows = [row for server in (arm.servers if arm else []) for row in server.rows]
    if rows:
        mean = round(statistics.fmean(row.prompt_tokens for row in rows))
        return mean, f"packet arm {arm.id}: mean prompt_tokens of its {len(rows)} prompt rows"  # type: ignore[union-attr]
    return DEFAULT_PROMPT_TOKENS, DEFAULT_PROMPT_SOURCE


def _acceptance(arm: Arm) -> tuple[float | None, str]:
    metrics = [s.spec_metrics for s in arm.servers if s.spec_metrics is not None and s.spec_metrics.drafts]
    if not metrics:
        return None, ""
    drafts = sum(m.drafts for m in metrics)
    accepted = sum(m.accepted_tokens for m in metrics)
    return 1 + accepted / drafts, (
        f"packet arm {arm.id} servers[].spec_metrics: 1 + {accepted:,} accepted / {drafts:,} drafts "
        f"(vLLM spec_decode counters over the strict suite, {len(metrics)} server(s))"
    )


def _cell_for_arm(packet: Packet, arm: Arm, hardware: Hardware, recipe: Recipe | None) -> _Cell | None:
    scheme, scheme_source = packet_scheme(packet, recipe)
    notes: list[str] = []
    if scheme is None:
        scheme, scheme_source = BF16, f"assumed 16-bit: {scheme_source}"
        notes.append(
            f"Quantization {packet.identity.model.quantization!r} is not in the scheme table:"
            f" weights counted at 2 bytes."
        )
    draft_env = arm.config.env.get(DRAFT_INT4_ENV) == "1"
    kv_bytes, kv_source = _kv_bytes(arm, packet, recipe)
    prompt, prompt_source = _prompt_tokens(arm)
    index = packet.arms.index(arm)
    cell = _Cell(
        hardware=hardware,
        scheme=scheme,
        scheme_source=scheme_source,
        quantization=packet.identity.model.quantization,
        cards=arm.config.tensor_parallel_size,
        cards_source=f"packet arms[{index}].config.tensor_parallel_size",
        spec_method=arm.config.spec_method,
        spec_depth=arm.config.spec_depth,
        draft_int4=draft_env,
        draft_int4_source=(
            f"packet arms[{index}].config.env {DRAFT_INT4_ENV}=1"
            if draft_env
            else f"packet arms[{index}].config.env has no {DRAFT_INT4_ENV}=1:"
            f" the draft reads lm_head at its stored precision"
        ),
        kv_bytes=kv_bytes,
        kv_source=kv_source,
        prompt_tokens=prompt,
        prompt_source=prompt_source,
        facts=resolve_architecture(packet, recipe),
        recipe=recipe,
        packet=packet,
        arm=arm,
        notes=notes,
    )
    if arm.config.spec_depth > 0:
        cell.acceptance_length, cell.acceptance_source = _acceptance(arm)
    return cell


def _record_facts(inputs: _Inputs, facts: ArchitectureFacts, layout: Layout) -> None:
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


def _fallback_step(cell: _Cell, inputs: _Inputs, context: float) -> tuple[StepModel, Method] | None:
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


def _formula(cell: _Cell) -> str:
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


def _project(cell: _Cell, *, force_upper_bound: bool = False) -> Projection | None:
    hw = cell.hardware
    inputs = _Inputs()
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
    if (
        utilisation is not None
        and consistent
        and cell.arm is not None
        and cell.arm.state in (State.MEASURED, State.IMPORTED, State.SCREENED)
    ):
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
    prefill = _prefill(cell, layout, step, link) if layout is not None else None
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


def _cell_label(cell: _Cell) -> str:
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


def _checkpoint_check(cell: _Cell, layout: Layout) -> None:
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
        scheme = cell.scheme
        h = layout.hidden
        stored = (
            layout.embedding * scheme.bytes_per_weight("embedding", h)
            + (0 if layout.tied else layout.embedding * scheme.bytes_per_weight("lm_head", h))
            + layout.full_layers * layout.attention * scheme.bytes_per_weight("attention", h)
            + layout.linear_layers * layout.linear_attention * scheme.bytes_per_weight("linear_attn", h)
            + layout.layers * layout.mlp * scheme.bytes_per_weight("mlp", h)
            + layout.mtp_layers * layout.mtp * scheme.bytes_per_weight("mtp", h)
            + layout.vision_parameters * scheme.bytes_per_weight("vision", h)
        )
        ratio = model.weight_bytes / stored
        if abs(ratio - 1) > 0.1:
            cell.notes.append(
                f"Check the precision assumptions: the packet's checkpoint holds {model.weight_bytes / GB:.2f} GB, "
                f"the component model predicts {stored / GB:.2f} GB ({(ratio - 1) * 100:+.0f} %)."
            )


def _prefill(cell: _Cell, layout: Layout, step: StepModel, link: float | None) -> PrefillBound:
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
    flops = prefill_flops(layout, p, with_mtp=spec_mtp)
    compute_ms = flops / (peak * 1e12 * cell.cards) * 1000 if peak else 0.0
    weights = sum(t.bytes for t in step.target if t.key not in ("kv_cache", "linear_state")) + (
        step.draft_bytes if spec_mtp else 0.0
    )
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
        formula=(
            "TTFT ≥ max(FLOPs / (peak × cards), weight bytes / (bandwidth × cards)) + collectives; "
            " FLOPs = 2 × decoder weights × P "
            "+ 2 × P² × heads × head_dim per full-attention layer +"
            " 4 × P × value heads × dk × dv per linear-attention layer "
            "+ 2 × lm_head (last position)" + (" + the MTP head over the prompt" if spec_mtp else "")
        ),
    )


def project_arm(packet: Packet, arm: Arm, hardware: Hardware, recipe: Recipe | None) -> Projection | None:
    """Ceiling, utilisation and grade for one arm; None only when not even a parameter count is known."""
    cell = _cell_for_arm(packet, arm, hardware, recipe)
    return _project(cell) if cell is not None else None


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
    cell = _cell_for_arm(packet, arm, hardware, recipe)
    if cell is None:
        return None
    if prompt_tokens is not None:
        cell.prompt_tokens, cell.prompt_source = prompt_tokens, "given by the caller"
    projection = _project(cell)
    return projection.prefill if projection else None


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
            cell = _cell_for_arm(packet, arm, hardware, recipe)
            if cell is None:
                continue
            projection = _project(cell, force_upper_bound=True)
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
    cell = _Cell(
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
    projection = _project(cell, force_upper_bound=True)
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
