"""Physics both ways: no rate above what the card can do, no time below what it must take.

The catalog's facts about the model (never the packet's: catalog/checks/facts.py) and the card's
figures (data/hardware.yaml) give, per arm, the single-stream decode ceiling (memory bandwidth ×
cards / bytes one step reads, catalog.projection) and the least time a prefill takes (the prompt's
FLOPs at peak compute, or one read of the weights, whichever is longer). From them:

- ceiling: no decode rate (a server's, a published figure, a load level's per-user median)
  exceeds the plain ceiling × the tokens one step may yield × CEILING_MARGIN, nor a context
  point's the ceiling with its context in the KV cache (every step reads it) × the same;
- floors: no first token arrives sooner than the prompt's prefill ÷ FLOOR_MARGIN after sending,
  and no row's (or load request's) last token sooner than that prefill plus (tokens − 1) ÷ the
  tokens one step may yield × one step's time ÷ CEILING_MARGIN; a concurrency point's wall time
  holds its users' tokens the same way; imported TTFT figures hold the floor of a one-token prompt;
- startup: no server answers sooner than one read of its weights at the cards' bandwidth;
- energy: no loaded window holds less energy than its steps' reads of the cards' memory cost
  (catalog/checks/energy.py `memory_floor_problems`, where the card's memory cites a figure);
- compute: a concurrency point's wall time, and a load level's duration, hold every token its
  users received at the card's peak compute (a token's FLOPs at least a one-token prefill's)
  ÷ FLOOR_MARGIN: batching shares one read of the weights among many users, never the arithmetic.

Single gaps between tokens are not held to a step's time: a stream's tokens can reach the client
in bursts (the API server merges deltas when it falls behind; a speculative step emits several),
so only the time from sending to a token, which no burst can shorten, is bounded.
Each check returns `(field, message)` problems, like catalog.checks.consistency's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from catalog.checks.energy import memory_floor_problems, windows
from catalog.checks.load_sweep import per_user_rates
from catalog.model.load_sweep import LoadLevel
from catalog.model.metrics import DECODE_WINDOW
from catalog.model.packet import Arm, Packet
from catalog.projection.cells import ALLREDUCE_LATENCY_US, Inputs, cell_for_arm
from catalog.projection.facts import catalog_facts
from catalog.projection.physics import StepModel, step_ceiling
from catalog.projection.precision import W4A16, packet_scheme
from catalog.projection.prefill import prefill_floor, token_compute_ms
from catalog.projection.steps import step_model
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe

Problem = tuple[str, str]

CEILING_MARGIN = 1.5
"""How far a decode rate may exceed the projection's physical ceiling before it is refused.

The ceiling (catalog.projection: nominal bandwidth × cards / bytes read per token) is already an
upper bound: the real measured arms in packets/ reach 0.75-0.88 of it. The margin covers what the
byte count assumes rather than knows, each of which can only make the ceiling too low: a KV cache
counted at 16 bits that may be FP8, the draft head's grouping, a bandwidth figure that is assumed
rather than published (cpu_generic), on-chip caches holding part of a small model. Together these
stay well under 50 %. A rate 1.5 times the ceiling is not a fast machine but a wrong number: a
unit slip (ms for s), a rate timed over the wrong window, a figure from another model or card.
(The test factories' synthetic timings sit at 1.21 times a B70's BF16 9B ceiling.) The decode part
of every floor below is divided by the same margin."""

FLOOR_MARGIN = 2.0
"""How far below the least prefill time a first token may arrive before it is refused.

The least prefill time is a lower bound twice over: it takes the card's peak compute (which no
real kernel reaches, and which for Intel's cards is an estimate from their INT8 figure) and a
single read of the weights at nominal bandwidth, whichever is longer, and counts no scheduling,
tokenization or HTTP time, which every measured TTFT includes. The margin of 2 covers a peak
figure that is too low by half (a matrix engine the card's entry does not count). A first token
half the least prefill time after sending is not a fast card but a forged or mis-clocked time
(the real imported and measured TTFTs sit at 5 to 100 times the bound)."""


@dataclass(frozen=True)
class ArmLimits:
    """One arm's physics on its card, without margins: the single-stream decode ceiling without
    speculation, the tokens one speculative step may yield (`factor` for rates measured over the
    suite, `tokens_per_step` for floors), and the least prefill time for a prompt length."""

    plain_tok_s: float
    factor: float
    why: str
    tokens_per_step: float
    prefill_ms: Callable[[int], float]
    token_compute_ms: float  # the least compute time of one token on the arm's cards (0: no peak figure)
    ceiling_at: Callable[[int], float]  # the plain ceiling with that many tokens of context in the KV cache
    step_bytes: float = 0.0  # what one target step reads from the cards' memory, all cards together

    @property
    def step_ms(self) -> float:
        """The least time of one target step (the plain ceiling's inverse)."""
        return 1000.0 / self.plain_tok_s

    def first_token_ms(self, prompt_tokens: int) -> float:
        """The earliest a first token may arrive after sending, margin included."""
        return self.prefill_ms(max(prompt_tokens, 1)) / FLOOR_MARGIN

    def last_token_ms(self, prompt_tokens: int, tokens: float) -> float:
        """The earliest the last of `tokens` tokens may arrive after sending, margins included."""
        return self.first_token_ms(prompt_tokens) + self.decode_ms(tokens)

    def compute_ms(self, tokens: float) -> float:
        """The least time `tokens` tokens take at the cards' peak compute, however they are batched,
        margin included (the peak figure may be too low by half, as for a prefill)."""
        return tokens * self.token_compute_ms / FLOOR_MARGIN

    def decode_ms(self, tokens: float) -> float:
        """The least time after the first of `tokens` tokens that the last may arrive, margin included
        (`last_token_ms` less the prefill, for callers that hold the prefill already)."""
        return max(tokens - 1.0, 0.0) / self.tokens_per_step * self.step_ms / CEILING_MARGIN


def arm_limits(packet: Packet, arm: Arm, hardware: Hardware, recipe: Recipe | None) -> ArmLimits | None:
    """The arm's limits from the projection's model of its target (without speculation); None
    when the projection knows too little of the model to compute them."""
    cell = cell_for_arm(packet, arm, hardware, recipe)
    if cell is None:
        return None
    depth = arm.config.spec_depth
    factor, why = 1.0, ""
    if depth:
        recorded = cell.acceptance_length
        if recorded is not None and recorded <= depth + 1:
            factor, why = recorded, f" × mean acceptance length {recorded:.3g}"
        else:
            factor, why = depth + 1.0, _depth_text(depth)
    elif packet.provenance.kind == "screened":
        # depth unknown (recorded as 0); vLLM's counters, when there, say what speculation yielded
        recorded = _acceptance_length(arm)
        if recorded is not None:
            factor, why = recorded, f" × mean acceptance length {recorded:.3g}"
    if packet_scheme(packet, recipe)[0] is None:
        # Unknown precision: the projection would count 16 bits per weight, which could put the
        # ceiling 4 times too low for a 4-bit checkpoint; 4-bit weights keep it an upper bound.
        cell.scheme = W4A16
    cell.spec_depth, cell.spec_method, cell.draft_int4 = 0, None, False
    modelled = step_model(cell, Inputs(), cell.prompt_tokens + DECODE_WINDOW / 2)
    if modelled is None:
        return None
    step, _, layout = modelled
    link = hardware.interconnect.bandwidth_gb_s.value if hardware.interconnect else None

    def plain(of: StepModel) -> float:
        return step_ceiling(
            of,
            bandwidth_gb_s=hardware.memory_bandwidth_gb_s.value,
            cards=cell.cards,
            spec_depth=0,
            tokens_per_step=1.0,
            latency_us=ALLREDUCE_LATENCY_US,
            link_gb_s=link,
        ).tok_s

    @cache  # a ladder's points share a few depths (one per content class)
    def ceiling_at(context_tokens: int) -> float:
        deeper = step_model(cell, Inputs(), context_tokens)
        return plain(deeper[0]) if deeper is not None else plain(step)

    # floors: a step yields at most depth + 1 tokens; a screened arm's depth is unknown, so what its
    # counters recorded (as for its rates)
    per_step = factor if packet.provenance.kind == "screened" else depth + 1.0
    return ArmLimits(
        plain(step),
        factor,
        why,
        per_step,
        cache(prefill_floor(cell, layout, step, link)),  # an arm's rows share one length per prompt of the suite
        token_compute_ms(cell, layout, step, link),
        ceiling_at,
        step.target_bytes,
    )


def _acceptance_length(arm: Arm) -> float | None:
    metrics = [s.spec_metrics for s in arm.servers if s.spec_metrics is not None and s.spec_metrics.drafts]
    if not metrics:
        return None
    return 1 + sum(m.accepted_tokens for m in metrics) / sum(m.drafts for m in metrics)


def _depth_text(depth: int) -> str:
    return f" × (depth + 1 = {depth + 1})" if depth else ""


def _n(value: float) -> str:
    """A figure for a message: 1,234,567 / 61 / 2.56."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


# --- entry point ----------------------------------------------------------------------------


def physics_problems(packet: Packet, recipe: Recipe | None, hardware: Hardware | None) -> list[Problem]:
    """The ceiling and the floors of every arm. Skipped where the projection knows too little of
    the model, except for a measured packet, which must always be checkable."""
    if hardware is None or recipe is None:
        return []  # the loader reports the missing entry
    if not catalog_facts(recipe).known() and not packet.identity.model.synthetic:
        return []  # catalog/checks/facts.py refuses a real model the catalog has no facts for
    problems: list[Problem] = []
    energy = list(windows(packet))
    for index, arm in enumerate(packet.arms):
        limits = arm_limits(packet, arm, hardware, recipe)
        if limits is None:
            if packet.provenance.kind == "measured" and hardware.memory_bandwidth_gb_s.value > 0:
                problems.append(
                    (
                        f"arms[{index}]",
                        f"arm {arm.id!r}: the projection cannot compute a physical ceiling (no architecture facts,"
                        " weight_bytes or parameter count for the model), so its rates cannot be checked",
                    )
                )
            continue
        problems += _ceiling_problems(packet, index, arm, limits)
        problems += _floor_problems(packet, index, arm, limits, hardware.id)
        problems += _startup_problems(index, arm, limits, hardware)
        problems += memory_floor_problems(energy, index, arm, limits.step_bytes, limits.tokens_per_step, hardware)
    return problems


def _startup_problems(index: int, arm: Arm, limits: ArmLimits, hardware: Hardware) -> list[Problem]:
    """No server starts sooner than its cards can take in the weights: a server answers only once
    every weight is in its cards' memory, and writing them there takes at least one read of them at
    the cards' nominal memory bandwidth (the least step time, which reads the weights a step touches
    once, ÷ CEILING_MARGIN as every floor's decode part). The catalog has no figure for the host's
    disk or link, so the bound counts the cards' memory alone (a real start also reads the weights
    from disk and compiles: tens of seconds)."""
    least_s = limits.step_ms / CEILING_MARGIN / 1000.0
    return [
        (
            f"arms[{index}].servers[{j}].startup_s",
            f"{server.startup_s:.3g} s is less than the {least_s:.3g} s one read of the arm's weights takes at"
            f" {hardware.id}'s memory bandwidth ({hardware.memory_bandwidth_gb_s.value:,.0f} GB/s a card,"
            f" ÷ {CEILING_MARGIN}): a server answers only once its weights are in the cards' memory",
        )
        for j, server in enumerate(arm.servers)
        if server.startup_s is not None and 0 <= server.startup_s < least_s  # a negative one: figure_problems
    ]


# --- the ceiling ----------------------------------------------------------------------------


def _ceiling_problems(packet: Packet, index: int, arm: Arm, limits: ArmLimits) -> list[Problem]:
    plain, factor, why, depth = limits.plain_tok_s, limits.factor, limits.why, arm.config.spec_depth
    where = f"arms[{index}]"
    # (field, rate, tokens per target step allowed, how that is written)
    rates: list[tuple[str, float | None, float, str]] = [
        (f"{where}.servers[{j}].decode_tok_s", server.decode_tok_s, factor, why) for j, server in enumerate(arm.servers)
    ]
    rates.append((f"{where}.published_figure", arm.published_figure, factor, why))
    # the oracle's rates, quoted beside a speculative arm: no speculation
    rates += [(f"{where}.oracle_decode_tok_s[{k}]", v, 1.0, "") for k, v in enumerate(arm.oracle_decode_tok_s)]
    # load sweeps: each user's decode rate under batching is at most the single-stream one
    rates += [(field, rate, depth + 1.0, _depth_text(depth)) for field, rate in per_user_rates(packet, arm.id)]
    problems: list[Problem] = []
    # context ladders: each point against the ceiling with its depth in the KV cache, which every
    # step reads; acceptance differs from the suite's, so only depth + 1 bounds a speculative arm
    for i, ladder in enumerate(packet.ladders):
        for k, point in enumerate(ladder.context if ladder.arm == arm.id else []):
            at = limits.ceiling_at(point.depth_tokens)
            allowed = at * (depth + 1.0) * CEILING_MARGIN
            if point.decode_tok_s is not None and point.decode_tok_s > allowed:
                problems.append(
                    (
                        f"ladders[{i}].context[{k}].decode_tok_s",
                        f"decode rate {_n(point.decode_tok_s)} tok/s exceeds the physical ceiling {_n(at)} tok/s"
                        f" with {point.depth_tokens:,} tokens of context{_depth_text(depth)} × margin"
                        f" {CEILING_MARGIN:g} (= {_n(allowed)} tok/s)",
                    )
                )
    for field, rate, tokens, text in rates:
        allowed = plain * tokens * CEILING_MARGIN
        if rate is not None and rate > allowed:
            problems.append(
                (
                    field,
                    f"decode rate {_n(rate)} tok/s exceeds the physical ceiling {_n(plain)} tok/s{text}"
                    f" × margin {CEILING_MARGIN:g} (= {_n(allowed)} tok/s)",
                )
            )
    return problems


# --- the floors -----------------------------------------------------------------------------


def _floor_problems(packet: Packet, index: int, arm: Arm, limits: ArmLimits, card: str) -> list[Problem]:
    where = f"arms[{index}]"
    on = f"on {arm.config.tensor_parallel_size} × {card}"
    problems: list[Problem] = []
    for j, server in enumerate(arm.servers):
        for k, row in enumerate(server.rows):
            times = row.token_times_us
            if not times:
                continue
            first = limits.first_token_ms(row.prompt_tokens)
            if times[0] / 1000.0 < first:
                problems.append(
                    (
                        f"{where}.servers[{j}].rows[{k}].token_times_us[0]",
                        _too_soon("first token", times[0] / 1000.0, first, row.prompt_tokens, 1, on),
                    )
                )
                continue
            last = first + limits.decode_ms(len(times))
            if times[-1] / 1000.0 < last:
                problems.append(
                    (
                        f"{where}.servers[{j}].rows[{k}].token_times_us[{len(times) - 1}]",
                        _too_soon("last token", times[-1] / 1000.0, last, row.prompt_tokens, len(times), on, limits),
                    )
                )
        if not server.rows and server.ttft_ms is not None and 0 <= server.ttft_ms < limits.first_token_ms(1):
            problems.append(
                (f"{where}.servers[{j}].ttft_ms", _too_soon("TTFT", server.ttft_ms, limits.first_token_ms(1), 1, 1, on))
            )
    for k, ttft in enumerate(arm.published_ttft_ms):
        if 0 <= ttft < limits.first_token_ms(1):  # a negative one: figure_problems
            problems.append(
                (f"{where}.published_ttft_ms[{k}]", _too_soon("TTFT", ttft, limits.first_token_ms(1), 1, 1, on))
            )
    for i, ladder in enumerate(packet.ladders):
        if ladder.arm != arm.id:
            continue
        for k, point in enumerate(ladder.context):
            least = limits.first_token_ms(point.depth_tokens)
            if point.ttft_ms is not None and 0 <= point.ttft_ms < least:
                problems.append(
                    (
                        f"ladders[{i}].context[{k}].ttft_ms",
                        _too_soon("TTFT", point.ttft_ms, least, point.depth_tokens, 1, on),
                    )
                )
        for k, concurrent in enumerate(ladder.concurrency):
            each = concurrent.completion_tokens / concurrent.users  # the longest user ran at least this many
            least = limits.last_token_ms(1, each)
            if 0 < concurrent.wall_s * 1000.0 < least:
                problems.append(
                    (
                        f"ladders[{i}].concurrency[{k}].wall_s",
                        f"is {concurrent.wall_s * 1000.0:,.3f} ms, but {concurrent.users} users' "
                        f"{concurrent.completion_tokens:,} tokens ({_n(each)} each) take at least {least:,.3f} ms"
                        f" {on} ({_decode_text(limits)})",
                    )
                )
            elif 0 < concurrent.wall_s * 1000.0 < limits.compute_ms(concurrent.completion_tokens):
                problems.append(
                    (
                        f"ladders[{i}].concurrency[{k}].wall_s",
                        _too_busy(concurrent.wall_s * 1000.0, concurrent.completion_tokens, limits, on),
                    )
                )
        if ladder.load is not None:
            problems += _load_floor_problems(f"ladders[{i}].load", ladder.load.levels, limits, on)
    return problems


def _load_floor_problems(where: str, levels: list[LoadLevel], limits: ArmLimits, on: str) -> list[Problem]:
    """Each request of a load level: its first token no sooner than a prefill, its last no sooner
    than its tokens' decode steps after that (a one-token prompt: the sweep records no prompt size)."""
    problems: list[Problem] = []
    first = limits.first_token_ms(1)
    for j, level in enumerate(levels):
        tokens = sum(request.output_tokens for request in level.requests)
        if 0 < level.duration_s * 1000.0 < limits.compute_ms(tokens):
            problems.append(
                (f"{where}.levels[{j}].duration_s", _too_busy(level.duration_s * 1000.0, tokens, limits, on))
            )
        for k, request in enumerate(level.requests):
            # the field is named only where a problem is (a level's requests are hundreds per packet)
            if request.ttft_ms is not None and request.ttft_ms < first:
                problems.append(
                    (
                        f"{where}.levels[{j}].requests[{k}].ttft_ms",
                        _too_soon("first token", request.ttft_ms, first, 1, 1, on),
                    )
                )
                break  # one per level
            last = first + limits.decode_ms(request.output_tokens)
            if request.e2e_ms is not None and request.e2e_ms < last:
                problems.append(
                    (
                        f"{where}.levels[{j}].requests[{k}].e2e_ms",
                        _too_soon("last token", request.e2e_ms, last, 1, request.output_tokens, on, limits),
                    )
                )
                break
    return problems


def _too_busy(at_ms: float, tokens: int, limits: ArmLimits, on: str) -> str:
    return (
        f"is {at_ms:,.3f} ms, but its {tokens:,} tokens take at least {limits.compute_ms(tokens):,.3f} ms of compute"
        f" {on} ({limits.token_compute_ms:.4g} ms a token at peak compute, the FLOPs of a one-token prefill,"
        f" ÷ margin {FLOOR_MARGIN:g}; batching shares the weights' reads, not their arithmetic)"
    )


def _decode_text(limits: ArmLimits) -> str:
    return (
        f"one step {limits.step_ms:,.3f} ms at the physical ceiling, {limits.tokens_per_step:g} token(s) per step at"
        f" most, ÷ margin {CEILING_MARGIN:g}"
    )


def _too_soon(
    what: str, at_ms: float, least_ms: float, prompt: int, tokens: int, on: str, limits: ArmLimits | None = None
) -> str:
    prefill = f"a prefill of {prompt:,} prompt token(s) {on} takes at least {least_ms:,.3f} ms"
    prefill += f" (÷ margin {FLOOR_MARGIN:g})"
    if limits is not None:
        prefill = (
            f"a prefill of {prompt:,} prompt token(s) and {tokens - 1:,} more tokens {on} take at least"
            f" {least_ms:,.3f} ms (prefill ÷ margin {FLOOR_MARGIN:g}; {_decode_text(limits)})"
        )
    return f"{what} {at_ms:,.3f} ms after sending, but {prefill}"
