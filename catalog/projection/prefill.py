"""The lower bound on time to first token: prefill is bound by compute, or by reading the weights
once, plus the collectives (docs/projections.md)."""

from __future__ import annotations

from catalog.projection.cells import ALLREDUCE_LATENCY_US, Cell
from catalog.projection.models import PrefillBound
from catalog.projection.physics import GB, Layout, StepModel, collective_ms, prefill_flops


def prefill_bound(cell: Cell, layout: Layout | None, step: StepModel, link: float | None) -> PrefillBound:
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
