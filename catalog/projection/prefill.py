"""The lower bound on time to first token: prefill is bound by compute, or by reading the weights
once, plus the collectives (docs/projections.md)."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.projection.cells import ALLREDUCE_LATENCY_US, Cell
from catalog.projection.models import PrefillBound
from catalog.projection.physics import GB, Layout, StepModel, collective_ms, prefill_flops
from catalog.recipes.hardware import Figure


@dataclass(frozen=True)
class _Prefill:
    flops: float
    figure: Figure | None
    which: str
    compute_ms: float
    memory_ms: float
    interconnect_ms: float
    formula: str

    @property
    def bound_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms) + self.interconnect_ms


def _prefill(cell: Cell, layout: Layout | None, step: StepModel, link: float | None, prompt_tokens: int) -> _Prefill:
    hw = cell.hardware
    eight_bit = cell.scheme.activation_bits <= 8 and hw.compute_tops_int8 is not None
    if eight_bit and cell.scheme.id == "fp8-dynamic" and hw.platform != "cuda":
        eight_bit = False  # assumed: no FP8 matrix engine outside the CUDA cards listed; FP8 weights are up-converted
    figure = hw.compute_tops_int8 if eight_bit else hw.compute_tflops_bf16
    if figure is None:
        figure = hw.compute_tops_int8 or hw.compute_tflops_bf16
    peak = figure.value if figure else 0.0
    which = "compute_tops_int8" if figure is hw.compute_tops_int8 else "compute_tflops_bf16"
    p = prompt_tokens
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
    return _Prefill(flops, figure, which, compute_ms, memory_ms, comm, formula)


def prefill_floor_ms(
    cell: Cell, layout: Layout | None, step: StepModel, link: float | None, prompt_tokens: int
) -> float:
    """The least time a prefill of `prompt_tokens` can take on the cell's cards (no margin)."""
    return _prefill(cell, layout, step, link, prompt_tokens).bound_ms


def prefill_bound(cell: Cell, layout: Layout | None, step: StepModel, link: float | None) -> PrefillBound:
    found = _prefill(cell, layout, step, link, cell.prompt_tokens)
    measured = cell.arm.ttft_ms if cell.arm is not None else None
    bound = found.bound_ms
    return PrefillBound(
        prompt_tokens=cell.prompt_tokens,
        prompt_tokens_source=cell.prompt_source,
        flops=found.flops,
        peak_tflops=found.figure.value if found.figure else 0.0,
        peak_source=f"data/hardware.yaml {cell.hardware.id} {found.which}"
        f" (source: {found.figure.source if found.figure else 'missing'})",
        compute_ms=found.compute_ms,
        memory_ms=found.memory_ms,
        interconnect_ms=found.interconnect_ms,
        bound_ms=bound,
        measured_ttft_ms=measured,
        bound_over_measured=bound / measured if measured else None,
        formula=found.formula,
    )
