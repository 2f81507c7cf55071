"""The arithmetic: parameters per component, bytes moved per decode step, step time, prefill FLOPs.

Single-stream decode is memory-bound: each target forward reads every weight it uses once, the
KV cache of the full-attention layers up to the current position, and reads and rewrites the fixed
recurrent state of linear-attention layers. A speculative step adds `depth` draft forwards and
verifies depth + 1 positions in one target forward, yielding the mean acceptance length L tokens.
Across `n` tensor-parallel cards the bytes split n ways and every decoder layer adds collectives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from catalog.projection.facts import ArchitectureFacts
from catalog.projection.precision import QuantScheme

GB = 1e9
Per = Literal["target step", "drafted token"]


@dataclass(frozen=True)
class Layout:
    """Parameter counts of one model, derived from its architecture facts."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    full_layers: int
    linear_layers: int
    heads: int
    kv_heads: int
    head_dim: int
    gate: bool
    tied: bool
    lin_k_heads: int
    lin_v_heads: int
    lin_k_dim: int
    lin_v_dim: int
    conv_kernel: int
    mtp_layers: int
    vision_parameters: int

    @property
    def embedding(self) -> int:
        return self.vocab * self.hidden

    @property
    def attention(self) -> int:
        """One full-attention block: q (+ output gate), k, v, o projections and q/k norms."""
        q_out = self.heads * self.head_dim * (2 if self.gate else 1)
        kv_out = self.kv_heads * self.head_dim
        return (
            self.hidden * q_out
            + 2 * self.hidden * kv_out
            + self.heads * self.head_dim * self.hidden
            + 2 * self.head_dim
        )

    @property
    def conv_dim(self) -> int:
        return 2 * self.lin_k_heads * self.lin_k_dim + self.lin_v_heads * self.lin_v_dim

    @property
    def linear_attention(self) -> int:
        """One Gated DeltaNet block: qkv, z, b and a projections, depthwise conv, out projection, small vectors."""
        value_dim = self.lin_v_heads * self.lin_v_dim
        return (
            self.hidden * self.conv_dim
            + self.hidden * value_dim
            + 2 * self.hidden * self.lin_v_heads
            + self.conv_dim * self.conv_kernel
            + value_dim * self.hidden
            + 2 * self.lin_v_heads
            + self.lin_v_dim
        )

    @property
    def mlp(self) -> int:
        return 3 * self.hidden * self.intermediate

    @property
    def layer_norms(self) -> int:
        return 2 * self.hidden

    @property
    def mtp(self) -> int:
        """One MTP layer: fc over [embedding; hidden], two pre-fc norms, a full-attention decoder
        layer and a final norm."""
        return (
            2 * self.hidden * self.hidden + 2 * self.hidden + self.attention + self.mlp + self.layer_norms + self.hidden
        )

    @property
    def text_parameters(self) -> int:
        """Language model without MTP or vision; an untied lm_head counts separately."""
        blocks = self.full_layers * self.attention + self.linear_layers * self.linear_attention
        dense = self.layers * (self.mlp + self.layer_norms) + self.hidden
        return self.embedding * (1 if self.tied else 2) + blocks + dense

    @property
    def checkpoint_parameters(self) -> int:
        return self.text_parameters + self.mtp_layers * self.mtp + self.vision_parameters

    @property
    def kv_elements_per_token(self) -> int:
        """K and V of one full-attention layer for one position."""
        return 2 * self.kv_heads * self.head_dim

    @property
    def state_elements(self) -> int:
        """Recurrent state of one linear-attention layer: one dk x dv matrix per value head."""
        return self.lin_v_heads * self.lin_k_dim * self.lin_v_dim

    @property
    def conv_state_elements(self) -> int:
        return self.conv_dim * (self.conv_kernel - 1)


def layout_from(facts: ArchitectureFacts) -> Layout | None:
    """None when a number the byte model needs is unknown."""
    num_layers, hidden_size, intermediate_size = facts.num_layers, facts.hidden_size, facts.intermediate_size
    num_attention_heads, vocab_size = facts.num_attention_heads, facts.vocab_size
    if num_layers is None or hidden_size is None or intermediate_size is None:
        return None
    if num_attention_heads is None or vocab_size is None:
        return None
    layers = num_layers.value
    hidden = hidden_size.value
    heads = num_attention_heads.value
    linear = facts.linear_attention_layers.value if facts.linear_attention_layers else 0
    full = facts.full_attention_layers.value if facts.full_attention_layers else layers - linear
    if full + linear != layers:
        return None
    lin = (
        facts.linear_num_key_heads,
        facts.linear_num_value_heads,
        facts.linear_key_head_dim,
        facts.linear_value_head_dim,
    )
    if linear and any(f is None for f in lin):
        return None
    return Layout(
        vocab=vocab_size.value,
        hidden=hidden,
        intermediate=intermediate_size.value,
        layers=layers,
        full_layers=full,
        linear_layers=linear,
        heads=heads,
        kv_heads=facts.num_kv_heads.value if facts.num_kv_heads else heads,
        head_dim=facts.head_dim.value if facts.head_dim else hidden // heads,
        gate=facts.attn_output_gate.value if facts.attn_output_gate else False,
        tied=facts.tie_word_embeddings.value if facts.tie_word_embeddings else False,
        lin_k_heads=lin[0].value if lin[0] else 0,
        lin_v_heads=lin[1].value if lin[1] else 0,
        lin_k_dim=lin[2].value if lin[2] else 0,
        lin_v_dim=lin[3].value if lin[3] else 0,
        conv_kernel=facts.linear_conv_kernel_dim.value if facts.linear_conv_kernel_dim else 4,
        mtp_layers=facts.mtp_layers.value if facts.mtp_layers else 0,
        vision_parameters=facts.vision.value.parameters if facts.vision else 0,
    )


def stored_bytes(layout: Layout, scheme: QuantScheme) -> float:
    """Bytes of the whole checkpoint (text, MTP head, vision tower) at the scheme's stored precision."""
    h = layout.hidden
    return (
        layout.embedding * scheme.bytes_per_weight("embedding", h)
        + (0 if layout.tied else layout.embedding * scheme.bytes_per_weight("lm_head", h))
        + layout.full_layers * layout.attention * scheme.bytes_per_weight("attention", h)
        + layout.linear_layers * layout.linear_attention * scheme.bytes_per_weight("linear_attn", h)
        + layout.layers * layout.mlp * scheme.bytes_per_weight("mlp", h)
        + (layout.layers * layout.layer_norms + h) * 2.0
        + layout.mtp_layers * layout.mtp * scheme.bytes_per_weight("mtp", h)
        + layout.vision_parameters * scheme.bytes_per_weight("vision", h)
    )


@dataclass(frozen=True)
class Term:
    """One contribution to the bytes a step moves."""

    key: str
    label: str
    per: Per
    bytes: float
    detail: str


def _n(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def weight_term(key: str, label: str, per: Per, params: int, bytes_per_weight: float, why: str) -> Term:
    return Term(key, label, per, params * bytes_per_weight, f"{_n(params)} params × {bytes_per_weight:.5g} B ({why})")


@dataclass(frozen=True)
class StepModel:
    """Bytes per target forward and per drafted token, and the collectives each needs under TP."""

    target: tuple[Term, ...]
    draft: tuple[Term, ...]
    draft_cost_known: bool
    collectives_target: int
    collectives_draft: int
    message_bytes_per_token: float  # one all-reduce of the hidden state, per position in flight

    @property
    def target_bytes(self) -> float:
        return sum(t.bytes for t in self.target)

    @property
    def draft_bytes(self) -> float:
        return sum(t.bytes for t in self.draft)


def architecture_step(
    layout: Layout,
    scheme: QuantScheme,
    *,
    context_tokens: float,
    kv_bytes: float,
    state_bytes: float,
    spec_depth: int,
    draft_lm_head: QuantScheme | None,
) -> StepModel:
    """Bytes per step from the component model. The vision tower is never read by text decode."""
    h = layout.hidden
    target = [
        weight_term(
            "lm_head",
            "lm_head (output projection, read in full each forward)"
            + (" = the tied embedding table" if layout.tied else ""),
            "target step",
            layout.embedding,
            scheme.bytes_per_weight("lm_head", h),
            scheme.describe("lm_head"),
        ),
        Term("embedding_row", "input embedding (one row per token)", "target step", h * 2.0, f"{_n(h)} values × 2 B"),
        weight_term(
            "attention",
            f"full-attention blocks ({layout.full_layers} layers)",
            "target step",
            layout.full_layers * layout.attention,
            scheme.bytes_per_weight("attention", h),
            scheme.describe("attention"),
        ),
        weight_term(
            "linear_attn",
            f"linear-attention blocks ({layout.linear_layers} layers)",
            "target step",
            layout.linear_layers * layout.linear_attention,
            scheme.bytes_per_weight("linear_attn", h),
            scheme.describe("linear_attn"),
        ),
        weight_term(
            "mlp",
            f"MLP blocks ({layout.layers} layers)",
            "target step",
            layout.layers * layout.mlp,
            scheme.bytes_per_weight("mlp", h),
            scheme.describe("mlp"),
        ),
        Term(
            "norms",
            "norms",
            "target step",
            (layout.layers * layout.layer_norms + h) * 2.0,
            f"{_n(layout.layers * layout.layer_norms + h)} values × 2 B",
        ),
        Term(
            "kv_cache",
            f"KV cache read ({layout.full_layers} full-attention layers at {context_tokens:,.0f} tokens)",
            "target step",
            layout.full_layers * layout.kv_elements_per_token * kv_bytes * context_tokens,
            f"{layout.full_layers} layers × {_n(layout.kv_elements_per_token)} values/token"
            f" × {kv_bytes:g} B × {context_tokens:,.0f} tokens",
        ),
        Term(
            "linear_state",
            f"linear-attention state, read and rewritten ({layout.linear_layers} layers, fixed size)",
            "target step",
            2 * layout.linear_layers * (layout.state_elements * state_bytes + layout.conv_state_elements * 2.0),
            f"2 × {layout.linear_layers} layers × ({_n(layout.state_elements)} state values × {state_bytes:g} B "
            f"+ {_n(layout.conv_state_elements)} conv values × 2 B)",
        ),
    ]
    draft: list[Term] = []
    if spec_depth > 0 and layout.mtp_layers > 0:
        head = draft_lm_head or scheme
        head_component = "lm_head"
        draft = [
            weight_term(
                "mtp",
                f"MTP head ({layout.mtp_layers} decoder layer + fc)",
                "drafted token",
                layout.mtp_layers * layout.mtp,
                scheme.bytes_per_weight("mtp", h),
                scheme.describe("mtp"),
            ),
            weight_term(
                "draft_lm_head",
                "draft lm_head (shared with the target" + (", INT4 copy" if draft_lm_head else "") + ")",
                "drafted token",
                layout.embedding,
                head.bytes_per_weight(head_component, h),
                head.describe(head_component) if draft_lm_head is None else head.source,
            ),
            Term(
                "mtp_kv_cache",
                "MTP layer KV cache read",
                "drafted token",
                layout.mtp_layers * layout.kv_elements_per_token * kv_bytes * context_tokens,
                f"{layout.mtp_layers} layer × {_n(layout.kv_elements_per_token)} values/token"
                f" × {kv_bytes:g} B × {context_tokens:,.0f} tokens",
            ),
        ]
    return StepModel(
        target=tuple(t for t in target if t.bytes > 0),
        draft=tuple(draft),
        draft_cost_known=spec_depth == 0 or layout.mtp_layers > 0,
        collectives_target=2 * layout.layers + 2,
        collectives_draft=2 * layout.mtp_layers + 2,
        message_bytes_per_token=h * 2.0,
    )


@dataclass(frozen=True)
class Ceiling:
    tok_s: float
    tokens_per_step: float
    memory_ms: float
    interconnect_ms: float

    @property
    def step_ms(self) -> float:
        return self.memory_ms + self.interconnect_ms


def collective_ms(message_bytes: float, cards: int, latency_us: float, link_gb_s: float | None) -> float:
    """Ring all-reduce: a fixed latency plus 2 (n-1)/n of the message over the link."""
    if cards <= 1:
        return 0.0
    transfer = 2 * (cards - 1) / cards * message_bytes / (link_gb_s * GB) if link_gb_s else 0.0
    return latency_us / 1000 + transfer * 1000


def step_ceiling(
    step: StepModel,
    *,
    bandwidth_gb_s: float,
    cards: int,
    spec_depth: int,
    tokens_per_step: float,
    latency_us: float,
    link_gb_s: float | None,
) -> Ceiling:
    """tok/s = L / ((B_target + depth × B_draft) / (bandwidth × cards) + collectives)."""
    moved = step.target_bytes + spec_depth * step.draft_bytes
    memory_ms = moved / (bandwidth_gb_s * GB * cards) * 1000
    comm = step.collectives_target * collective_ms(
        step.message_bytes_per_token * (spec_depth + 1), cards, latency_us, link_gb_s
    ) + spec_depth * step.collectives_draft * collective_ms(step.message_bytes_per_token, cards, latency_us, link_gb_s)
    return Ceiling(tokens_per_step / ((memory_ms + comm) / 1000), tokens_per_step, memory_ms, comm)


def prefill_flops(layout: Layout, prompt_tokens: int, *, with_mtp: bool) -> float:
    """Forward FLOPs over a prompt: 2 per weight per token for the decoder's matmuls, causal
    attention scores and values (2 P² heads head_dim per full-attention layer), the delta-rule
    state update (about 4 dk dv per value head per token per linear layer), lm_head for the last
    position only; the MTP head runs over the prompt too when speculation is on."""
    p = prompt_tokens
    blocks = (
        layout.full_layers * layout.attention
        + layout.linear_layers * layout.linear_attention
        + layout.layers * layout.mlp
    )
    flops = 2.0 * blocks * p
    flops += layout.full_layers * 2.0 * p * p * layout.heads * layout.head_dim
    flops += layout.linear_layers * 4.0 * p * layout.lin_v_heads * layout.lin_k_dim * layout.lin_v_dim
    flops += 2.0 * layout.embedding
    if with_mtp and layout.mtp_layers:
        flops += layout.mtp_layers * (2.0 * layout.mtp * p + 2.0 * p * p * layout.heads * layout.head_dim)
    return flops
