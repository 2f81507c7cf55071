"""The protocol's arithmetic, shared by the runner (which computes) and verify (which recomputes).

Definitions:
- decode rate of one completion: 99 intervals / (t[100] - t[1]), t[i] the arrival time of token i
  (0-based; token 0 is the first token, whose wait is TTFT). Tokens are counted from token ids,
  so a chunk carrying k tokens contributes k events with one arrival time. None when tokens
  1..100 were read in bursts (catalog.model.delivery): then the span timed the delivery.
- class-balanced median: the median within each class, then the median of the class medians.
- centre of a pair: the mean of the two fresh servers' class-balanced medians.
- inter-token latency (ITL), load levels: the gaps between *distinct* arrival times, one per chunk
  after the first, as `vllm bench serve` counts it. Tokens that arrive together (one chunk carries
  several: speculative decoding emits up to k+1 per step, and the server merges chunks when it
  falls behind) add no gap of zero; ITL is per chunk, so with speculation it is larger than the
  time per token. TPOT stays per token: (t[last] - t[0]) / (tokens - 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from catalog.model.delivery import times_read_in_bursts
from catalog.model.packet import Divergence, DivergenceCause, GateResult, PromptRow

DECODE_WINDOW = 100
MIN_COMPLETION_TOKENS = DECODE_WINDOW + 1


def decode_rate(token_times_us: Sequence[int]) -> float | None:
    """Tokens per second over tokens 1..100; None when the completion has none (`no_rate_because`)."""
    if no_rate_because(token_times_us) is not None:
        return None
    return (DECODE_WINDOW - 1) / ((token_times_us[DECODE_WINDOW] - token_times_us[1]) / 1e6)


def no_rate_because(token_times_us: Sequence[int]) -> str | None:
    """Why a completion gives no decode rate, in words (the runner's progress and verification say
    it); None when it gives one. Too short for the window, or its window read in bursts (one read
    is the instant completion), or times that do not ascend across it."""
    if len(token_times_us) < MIN_COMPLETION_TOKENS:
        return f"fewer than {MIN_COMPLETION_TOKENS} tokens"
    window = token_times_us[1 : DECODE_WINDOW + 1]
    if times_read_in_bursts(window):
        reads = len(set(window))
        return f"tokens 1..{DECODE_WINDOW} read in bursts ({reads} read{'' if reads == 1 else 's'})"
    if token_times_us[DECODE_WINDOW] <= token_times_us[1]:
        return f"tokens 1..{DECODE_WINDOW} with no time between the first and the last"
    return None


def arrival_gaps(times: Sequence[float]) -> list[float]:
    """ITL samples of one stream: the gap from each distinct arrival time to the next (times in
    any unit, ascending; tokens sharing an arrival count once)."""
    gaps: list[float] = []
    previous: float | None = None
    for at in times:
        if previous is not None and at != previous:
            gaps.append(at - previous)
        previous = at
    return gaps


def class_balanced_median(values_by_class: dict[str, list[float]]) -> float:
    if not values_by_class or any(not v for v in values_by_class.values()):
        raise ValueError("every class needs at least one value")
    return median(median(values) for values in values_by_class.values())


def server_decode_rate(rows: Sequence[PromptRow]) -> float | None:
    """Class-balanced median decode rate of one server; None if any prompt has no rate."""
    by_class: dict[str, list[float]] = {}
    for row in rows:
        rate = decode_rate(row.token_times_us)
        if rate is None:
            return None
        by_class.setdefault(row.class_id, []).append(rate)
    return class_balanced_median(by_class) if by_class else None


def server_ttft_ms(rows: Sequence[PromptRow]) -> float | None:
    """Median TTFT; None when a row has no token (it has no first-token time)."""
    values = [row.ttft_ms for row in rows]
    if not values or any(v is None for v in values):
        return None
    return median(v for v in values if v is not None)


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """Index of the first differing token; the shorter length if one is a prefix; None if equal."""
    if a == b:  # the usual case, compared at C speed
        return None
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def divergence(a: Sequence[int], b: Sequence[int]) -> Divergence | None:
    """Where two outputs part and the token each had there (None: a side had already ended)."""
    index = first_divergence(a, b)
    if index is None:
        return None
    return Divergence(
        index=index, token=int(a[index]) if index < len(a) else None, other=int(b[index]) if index < len(b) else None
    )


def compare_rows(
    gate: str,
    against: str,
    left: Sequence[PromptRow],
    right: Sequence[PromptRow],
    server: str | None = None,
    cause: DivergenceCause | None = None,
) -> GateResult:
    """Gate result over prompts matched by id; a prompt missing on one side counts as diverging at 0
    (with no token on the missing side). `cause`: what the comparison isolates (a repeat of the
    same configuration, speculation at the same batch shape, or another batch shape)."""
    right_by_id = {row.prompt_id: row for row in right}
    found: list[Divergence | None] = []
    for row in left:
        other = right_by_id.get(row.prompt_id)
        if other is None:
            first = int(row.token_ids[0]) if len(row.token_ids) else None
            found.append(Divergence(index=0, token=first, other=None))
        else:
            found.append(divergence(row.token_ids, other.token_ids))
    exact = sum(d is None for d in found)
    return GateResult(
        gate=gate,
        against=against,
        server=server,
        exact=exact,
        total=len(found),
        passed=exact == len(found),
        first_divergence=[d.index if d is not None else None for d in found],
        divergences=found if exact < len(found) else [],
        cause=cause,
    )
