"""The lower bound on time to first token: prefill is bound by compute, or by reading the weights
once, plus the collectives (docs/projections.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from catalog.projection.cells import ALLREDUCE_LATENCY_US, Cell
from catalog.projection.models import PrefillBound
from catalog.projection.physics import GB, Layout, StepModel, collective_ms, prefill_flops
from catalog.recipes.hardware import Figure


@dataclass(frozen=True)
class _Prefill:
    flops: float
    compute_ms: float
    memory_ms: float
    interconnect_ms: float

    @property
    def bound_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms) + self.interconnect_ms


@dataclass(frozen=True)
class _Setup:
    """What a prefill bound needs that does not depend on the prompt's length: worked out once per
    cell, since verification bounds every row and load request of an arm (hundreds of prompts)."""

    cell: Cell
    layout: Layout | None
    step: StepModel
    link: float | None
    figure: Figure | None
    which: str
    peak: float
    spec_mtp: bool
    weights: float

    def at(self, prompt_tokens: int) -> _Prefill:
        cell, p = self.cell, prompt_tokens
        if self.layout is not None:
            flops = prefill_flops(self.layout, p, with_mtp=self.spec_mtp)
        else:
            params = self.weights / cell.scheme.bytes_per_weight("mlp", 4096)
            flops = 2.0 * params * p
        compute_ms = flops / (self.peak * 1e12 * cell.cards) * 1000 if self.peak else 0.0
        memory_ms = self.weights / (cell.hardware.memory_bandwidth_gb_s.value * GB * cell.cards) * 1000
        comm = self.step.collectives_target * collective_ms(
            self.step.message_bytes_per_token * p, cell.cards, ALLREDUCE_LATENCY_US, self.link
        )
        return _Prefill(flops, compute_ms, memory_ms, comm)

    def bound_ms(self, prompt_tokens: int) -> float:
        return self.at(prompt_tokens).bound_ms

    @property
    def formula(self) -> str:
        if self.layout is not None:
            return (
                "TTFT ≥ max(FLOPs / (peak × cards), weight bytes / (bandwidth × cards)) + collectives; "
                " FLOPs = 2 × decoder weights × P "
                "+ 2 × P² × heads × head_dim per full-attention layer +"
                " 4 × P × value heads × dk × dv per linear-attention layer "
                "+ 2 × lm_head (last position)" + (" + the MTP head over the prompt" if self.spec_mtp else "")
            )
        return (
            "TTFT ≥ max(FLOPs / (peak × cards), weight bytes / (bandwidth × cards)) + collectives; "
            " FLOPs ≈ 2 × (weight bytes / bytes per weight) × P (architecture incomplete: attention scores left out)"
        )


def _setup(cell: Cell, layout: Layout | None, step: StepModel, link: float | None) -> _Setup:
    hw = cell.hardware
    eight_bit = cell.scheme.activation_bits <= 8 and hw.compute_tops_int8 is not None
    if eight_bit and cell.scheme.id == "fp8-dynamic" and hw.platform != "cuda":
        eight_bit = False  # assumed: no FP8 matrix engine outside the CUDA cards listed; FP8 weights are up-converted
    figure = hw.compute_tops_int8 if eight_bit else hw.compute_tflops_bf16
    if figure is None:
        figure = hw.compute_tops_int8 or hw.compute_tflops_bf16
    peak = figure.value if figure else 0.0
    which = "compute_tops_int8" if figure is hw.compute_tops_int8 else "compute_tflops_bf16"
    spec_mtp = cell.spec_depth > 0 and cell.spec_method == "mtp"
    weights = sum(t.bytes for t in step.target if t.key not in ("kv_cache", "linear_state")) + (
        step.draft_bytes if spec_mtp else 0.0
    )
    return _Setup(cell, layout, step, link, figure, which, peak, spec_mtp, weights)


def prefill_floor(cell: Cell, layout: Layout | None, step: StepModel, link: float | None) -> Callable[[int], float]:
    """The least time a prefill of a prompt can take on the cell's cards (no margin), as a function
    of the prompt's length in tokens."""
    return _setup(cell, layout, step, link).bound_ms


def token_compute_ms(cell: Cell, layout: Layout | None, step: StepModel, link: float | None) -> float:
    """The least compute time of one token on the cell's cards (no margin): a one-token prefill's
    FLOPs at peak. Every decoded token costs at least those (each weight's multiply-add and the
    lm_head), and its attention over a longer context only adds to them. 0 without a peak figure."""
    return _setup(cell, layout, step, link).at(1).compute_ms


def prefill_bound(cell: Cell, layout: Layout | None, step: StepModel, link: float | None) -> PrefillBound:
    setup = _setup(cell, layout, step, link)
    found = setup.at(cell.prompt_tokens)
    measured = cell.arm.ttft_ms if cell.arm is not None else None
    bound = found.bound_ms
    figure = setup.figure
    return PrefillBound(
        prompt_tokens=cell.prompt_tokens,
        prompt_tokens_source=cell.prompt_source,
        flops=found.flops,
        peak_tflops=figure.value if figure else 0.0,
        peak_source=f"data/hardware.yaml {cell.hardware.id} {setup.which}"
        f" (source: {figure.source if figure else 'missing'})",
        compute_ms=found.compute_ms,
        memory_ms=found.memory_ms,
        interconnect_ms=found.interconnect_ms,
        bound_ms=bound,
        measured_ttft_ms=measured,
        bound_over_measured=bound / measured if measured else None,
        formula=setup.formula,
    )
