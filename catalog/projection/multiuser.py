"""Many users at once: the projected aggregate and per-user decode speed at each load level.

A batched decode step serves every running request one token. It reads the weights once for the
whole batch, each user's own KV cache (and linear-attention state), and does each user's matmuls:

    t_step(N) = max((W + N × S) / (bandwidth × cards), N × F / (peak × cards)) + collectives
    per-user tok/s = 1 / t_step(N),   aggregate tok/s = N / t_step(N)

W: weight bytes per forward (single-stream byte model, KV and state left out); S: bytes of one
user's KV cache at its context plus its linear-attention state; F: FLOPs per token of one user.
See docs/projections.md ("Many users at once") for the model and a hand-computed example.
"""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import Field

from catalog.model.base import StrictModel
from catalog.model.load_sweep import LoadLevel, LoadSweep
from catalog.model.packet import Arm, Packet
from catalog.projection.cells import ALLREDUCE_LATENCY_US, STATE_BYTES, cell_for_arm
from catalog.projection.physics import GB, Layout, architecture_step, collective_ms, layout_from
from catalog.projection.project import project_cell
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe

FORMULA = (
    "t_step(N) = max((W + N × S) / (bandwidth × cards), N × F / (peak × cards)) + collectives;"
    "  per-user tok/s = 1 / t_step;  aggregate tok/s = N / t_step"
)
USERS_CLOSED = "closed loop: the level's users, each with one request running"
USERS_OPEN = "open loop: mean requests in flight by Little's law, rate × mean end-to-end latency of the level"


class UserStep(StrictModel):
    """One batched decode step of `users` sequences."""

    users: float = Field(gt=0, description="sequences decoding together")
    memory_ms: float = Field(ge=0, description="weights once plus every user's KV cache and state, at bandwidth")
    compute_ms: float = Field(ge=0, description="every user's FLOPs per token at the card's peak")
    interconnect_ms: float = Field(ge=0, description="collectives per step under tensor parallelism")
    bound: Literal["memory", "compute"] = Field(description="which of the two binds")

    @property
    def step_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms) + self.interconnect_ms

    @property
    def per_user_tok_s(self) -> float:
        return 1000.0 / self.step_ms

    @property
    def aggregate_tok_s(self) -> float:
        return self.users * self.per_user_tok_s


def multi_user_step(
    *,
    users: float,
    weight_bytes: float,
    per_user_bytes: float,
    flops_per_token: float,
    bandwidth_gb_s: float,
    peak_tflops: float,
    cards: int = 1,
    interconnect_ms: float = 0.0,
) -> UserStep:
    memory_ms = (weight_bytes + users * per_user_bytes) / (bandwidth_gb_s * GB * cards) * 1000.0
    compute_ms = users * flops_per_token / (peak_tflops * 1e12 * cards) * 1000.0 if peak_tflops else 0.0
    return UserStep(
        users=users,
        memory_ms=memory_ms,
        compute_ms=compute_ms,
        interconnect_ms=interconnect_ms,
        bound="compute" if compute_ms > memory_ms else "memory",
    )


def decode_flops_per_token(layout: Layout, context_tokens: float) -> float:
    """One user's FLOPs for one decoded token: 2 per weight of the decoder blocks and lm_head,
    attention over the context (4 × heads × head_dim per position per full-attention layer), and
    the delta-rule state update (about 4 dk dv per value head per linear-attention layer)."""
    blocks = (
        layout.full_layers * layout.attention
        + layout.linear_layers * layout.linear_attention
        + layout.layers * layout.mlp
    )
    return (
        2.0 * (blocks + layout.embedding)
        + layout.full_layers * 4.0 * layout.heads * layout.head_dim * context_tokens
        + layout.linear_layers * 4.0 * layout.lin_v_heads * layout.lin_k_dim * layout.lin_v_dim
    )


class LevelEstimate(StrictModel):
    """The projection of one load level, beside what was measured there."""

    level: str = Field(description="the level's label (8 users, 2 req/s)")
    users: float = Field(description="sequences decoding together, as projected")
    users_source: str = Field(description="where the user count comes from")
    context_tokens: float = Field(description="mean context per user: prompt + half the level's mean output")
    per_user_bytes: float = Field(description="one user's KV cache at that context plus its recurrent state")
    flops_per_token: float = Field(description="one user's FLOPs per decoded token")
    step: UserStep
    per_user_tok_s: float = Field(description="projected decode rate of one user")
    aggregate_tok_s: float = Field(description="projected output tok/s of the card(s)")
    measured_aggregate_tok_s: float = Field(description="the level's measured aggregate tok/s")
    measured_over_projected: float = Field(description="measured aggregate / projected aggregate")


class LoadProjection(StrictModel):
    """Projected multi-user speeds for one arm's load sweep."""

    packet_id: str
    arm_id: str
    hardware: str
    cards: int
    bandwidth_gb_s: float
    peak_tflops: float
    peak_source: str
    weight_bytes: float = Field(description="weights read once per batched step")
    kv_bytes_per_token: float = Field(description="KV cache bytes per token of context, one user")
    state_bytes_per_user: float = Field(description="linear-attention state read and rewritten per user per step")
    formula: str
    levels: list[LevelEstimate]
    notes: list[str]


def _users(level: LoadLevel) -> tuple[float, str]:
    if level.mode == "closed" and level.users is not None:
        return float(level.users), USERS_CLOSED
    e2e = [r.e2e_ms for r in level.completed if r.e2e_ms is not None]
    rate = level.rate_rps or 0.0
    return max(1.0, rate * (statistics.fmean(e2e) if e2e else 0.0) / 1000.0), USERS_OPEN


def project_load(
    packet: Packet, arm: Arm, sweep: LoadSweep, hardware: Hardware, recipe: Recipe | None
) -> LoadProjection | None:
    """None where the model has nothing to say: an unknown architecture, or a speculative arm (its
    acceptance under load is not modelled)."""
    if arm.config.spec_depth:
        return None
    cell = cell_for_arm(packet, arm, hardware, recipe)
    layout = layout_from(cell.facts) if cell is not None else None
    single = project_cell(cell) if cell is not None else None
    if cell is None or layout is None or single is None or single.prefill is None:
        return None
    weights = architecture_step(
        layout,
        cell.scheme,
        context_tokens=0.0,
        kv_bytes=cell.kv_bytes,
        state_bytes=STATE_BYTES,
        spec_depth=0,
        draft_lm_head=None,
    )
    weight_bytes = sum(t.bytes for t in weights.target if t.key not in ("kv_cache", "linear_state"))
    kv_per_token = layout.full_layers * layout.kv_elements_per_token * cell.kv_bytes
    state = 2 * layout.linear_layers * (layout.state_elements * STATE_BYTES + layout.conv_state_elements * 2.0)
    bandwidth = hardware.memory_bandwidth_gb_s.value
    link = hardware.interconnect.bandwidth_gb_s.value if hardware.interconnect else None
    levels = []
    for level in sweep.levels:
        users, users_source = _users(level)
        outputs = [r.output_tokens for r in level.completed]
        context = cell.prompt_tokens + (statistics.fmean(outputs) if outputs else 0.0) / 2
        per_user = kv_per_token * context + state
        flops = decode_flops_per_token(layout, context)
        comm = weights.collectives_target * collective_ms(
            weights.message_bytes_per_token * users, cell.cards, ALLREDUCE_LATENCY_US, link
        )
        step = multi_user_step(
            users=users,
            weight_bytes=weight_bytes,
            per_user_bytes=per_user,
            flops_per_token=flops,
            bandwidth_gb_s=bandwidth,
            peak_tflops=single.prefill.peak_tflops,
            cards=cell.cards,
            interconnect_ms=comm,
        )
        levels.append(
            LevelEstimate(
                level=level.label,
                users=users,
                users_source=users_source,
                context_tokens=context,
                per_user_bytes=per_user,
                flops_per_token=flops,
                step=step,
                per_user_tok_s=step.per_user_tok_s,
                aggregate_tok_s=step.aggregate_tok_s,
                measured_aggregate_tok_s=level.aggregate_tok_s,
                measured_over_projected=level.aggregate_tok_s / step.aggregate_tok_s,
            )
        )
    return LoadProjection(
        packet_id=packet.id,
        arm_id=arm.id,
        hardware=hardware.id,
        cards=cell.cards,
        bandwidth_gb_s=bandwidth,
        peak_tflops=single.prefill.peak_tflops,
        peak_source=single.prefill.peak_source,
        weight_bytes=weight_bytes,
        kv_bytes_per_token=kv_per_token,
        state_bytes_per_user=state,
        formula=FORMULA,
        levels=levels,
        notes=[
            "Decode steps only: prefill of arriving prompts and the client's gaps are not modelled, so the "
            "measured aggregate (which includes them) sits below the projection.",
            f"KV cache {kv_per_token:,.0f} B per token per user ({cell.kv_source}).",
        ],
    )
