"""What the projection API returns: plain pydantic models the JSON API dumps as they are."""

from __future__ import annotations

from typing import Literal

from catalog.model.base import StrictModel

Origin = Literal["packet", "recipe", "hardware", "model-table", "assumed", "derived"]
Method = Literal["architecture", "checkpoint", "parameters"]


class ProjectionInput(StrictModel):
    """One number the projection used, and where it came from."""

    name: str
    label: str
    value: float | int | bool | str
    unit: str
    source: str
    origin: Origin


class ByteTerm(StrictModel):
    key: str
    label: str
    per: Literal["target step", "drafted token"]
    bytes: float
    detail: str


class OptimisationGrade(StrictModel):
    band: str
    threshold: float
    meaning: str


class PrefillBound(StrictModel):
    """Lower bound on time to first token: the prompt's FLOPs at peak compute, or one read of
    the weights at full bandwidth, whichever is longer, plus the collectives under TP."""

    prompt_tokens: int
    prompt_tokens_source: str
    flops: float
    peak_tflops: float
    peak_source: str
    compute_ms: float
    memory_ms: float
    interconnect_ms: float
    bound_ms: float
    measured_ttft_ms: float | None = None
    bound_over_measured: float | None = None
    formula: str


class Projection(StrictModel):
    """Ceiling, measurement and utilisation for one arm (or one untested cell)."""

    packet_id: str | None
    arm_id: str | None
    arm_label: str
    arm_state: str
    hardware: str
    cards: int
    quantization: str
    spec_depth: int
    method: Method
    ceiling_tok_s: float
    ceiling_kind: Literal["decode", "speculative"]
    acceptance_length: float | None
    acceptance: Literal["recorded", "upper bound: acceptance not recorded"] | None
    target_bytes_per_step: float
    draft_bytes_per_token: float
    step_ms: float
    memory_ms: float
    interconnect_ms: float
    context_tokens: float
    measured_tok_s: float | None
    measured_basis: str | None
    utilisation: float | None
    utilisation_is_lower_bound: bool
    optimisation_grade: OptimisationGrade | None
    consistent: bool
    formula: str
    substituted: str
    byte_terms: list[ByteTerm]
    inputs: list[ProjectionInput]
    prefill: PrefillBound | None
    notes: list[str]


class BasisArm(StrictModel):
    packet_id: str
    arm_id: str
    quantization: str
    tensor_parallel_size: int
    spec_depth: int
    draft_head: str | None
    measured_tok_s: float
    ceiling_tok_s: float
    utilisation: float


class CellEstimate(StrictModel):
    """A predicted decode speed for an untested combination. Never a measurement, never a headline."""

    state: Literal["estimated"] = "estimated"
    family: str
    hardware: str
    quantization: str
    tensor_parallel_size: int
    spec_depth: int
    draft_lm_head_int4: bool
    decode_tok_s: float
    ceiling_tok_s: float
    utilisation: float
    tp_ratio: float | None = None
    basis: list[BasisArm]
    rule: str
    projection: Projection
