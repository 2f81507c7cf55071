"""One configuration to project (a packet arm or an untested cell) and where its inputs come from."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from catalog.model.packet import Arm, Packet
from catalog.projection.facts import ArchitectureFacts, Fact, resolve_architecture
from catalog.projection.models import Origin, ProjectionInput
from catalog.projection.precision import (
    BF16,
    DRAFT_INT4_ENV,
    QuantScheme,
    kv_cache_bytes,
    packet_scheme,
    variant_kv_cache_dtype,
)
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from catalog.recipes.recorded import recorded_kv_cache_dtype

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


class Inputs:
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
class Cell:
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
    """The KV cache's bytes per value: as the arm recorded it (its recorded command's, which
    verification holds it to), else its recipe variant's, else 16-bit assumed."""
    recorded = recorded_kv_cache_dtype(arm) if arm is not None else None
    if arm is not None and recorded is not None:
        if arm.config.kv_cache_dtype is None:  # a recorded command that sets none
            return kv_cache_bytes(recorded), (
                f"packet arm {arm.id}: its recorded command sets no --kv-cache-dtype"
                f" (vLLM's {recorded!r}, the model's dtype)"
            )
        return kv_cache_bytes(recorded), f"packet arm {arm.id} config.kv_cache_dtype = {recorded!r}"
    variant = packet.identity.model.variant if packet is not None else None
    if recipe is not None and variant is not None and variant in recipe.variants:
        dtype = variant_kv_cache_dtype(recipe, variant)
        if dtype is not None:
            return kv_cache_bytes(dtype), (
                f"recipe variants.{variant}.extra_args --kv-cache-dtype {dtype}"
                f" (the packet records no argv; assumed to apply)"
            )
    return 2.0, "assumed: KV cache in the model's 16-bit dtype (no --kv-cache-dtype recorded)"


def _prompt_tokens(arm: Arm | None) -> tuple[int, str]:
    sizes = [row.prompt_tokens for server in arm.servers for row in server.rows] if arm is not None else []
    if arm is not None and sizes:
        mean = round(statistics.fmean(sizes))
        return mean, f"packet arm {arm.id}: mean prompt_tokens of its {len(sizes)} prompt rows"
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


def cell_for_arm(packet: Packet, arm: Arm, hardware: Hardware, recipe: Recipe | None) -> Cell | None:
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
    cell = Cell(
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
