"""The protocol's arithmetic: decode rate, class-balanced median, divergence, gate comparison."""

from __future__ import annotations

import pytest

from catalog.model.arrays import to_uint32
from catalog.model.metrics import (
    class_balanced_median,
    compare_rows,
    decode_rate,
    first_divergence,
    no_rate_because,
    server_decode_rate,
    server_ttft_ms,
)
from catalog.model.packet import PromptRow


def row(prompt_id: str, class_id: str, ids: list[int], times_us: list[int] | None = None) -> PromptRow:
    times = times_us if times_us is not None else [1000 * i for i in range(len(ids))]
    return PromptRow(
        prompt_id=prompt_id,
        class_id=class_id,
        token_ids=to_uint32(ids),
        token_times_us=to_uint32(times),
        prompt_tokens=10,
        completion_tokens=len(ids),
    )


def steady(n: int, ms: float, ttft: float = 50.0) -> list[int]:
    """Token times in integer microseconds after the request was sent, `ms` apart."""
    return [round((ttft + i * ms) * 1000) for i in range(n)]


# --- decode_rate ---------------------------------------------------------------------------


def test_decode_rate_single_token_events() -> None:
    # token 1 at 60 ms, token 100 at 1050 ms (in µs): 99 intervals over 0.99 s
    assert decode_rate(steady(101, 10.0)) == pytest.approx(100.0)
    assert decode_rate(steady(512, 20.0)) == pytest.approx(50.0)


def test_decode_rate_ignores_ttft_and_tokens_after_100() -> None:
    times = steady(101, 10.0)
    slow_first = [5_000_000, *[t + 4_950_000 for t in times[1:]]]
    assert decode_rate(slow_first) == pytest.approx(100.0)
    assert decode_rate([*times, 99_999_000, 123_456_000]) == pytest.approx(100.0)


def test_decode_rate_multi_token_chunks_count_tokens_not_chunks() -> None:
    # Speculative decoding: three tokens per chunk, chunks 30 ms apart, tokens of a chunk share a
    # timestamp. t[i] = 30 ms * ceil(i / 3): t[1] = 30 ms, t[100] = 30 * 34 = 1020 ms -> 99 / 0.99 s = 100 tok/s.
    times = [30_000 * -(-i // 3) for i in range(101)]
    assert times[1:4] == [30_000, 30_000, 30_000]
    assert times[100] == 1_020_000
    assert decode_rate(times) == pytest.approx(100.0)
    # The same chunks counted as events would give a third of that rate; make sure we do not.
    assert decode_rate(times) != pytest.approx(33.0 / 0.99)


def test_decode_rate_pairs_of_equal_timestamps() -> None:
    # Two tokens per chunk, 40 ms apart: t[1] = 40, t[100] = 40 * 50 = 2000; 99 / 1.96 s.
    times = [40_000 * -(-i // 2) for i in range(150)]
    assert decode_rate(times) == pytest.approx(99 / 1.96)


@pytest.mark.parametrize("n", [0, 1, 2, 50, 100])
def test_decode_rate_needs_101_tokens(n: int) -> None:
    assert decode_rate(steady(n, 10.0)) is None


def test_decode_rate_exactly_101_tokens() -> None:
    assert decode_rate(steady(101, 5.0)) == pytest.approx(200.0)


def test_decode_rate_zero_span_is_none() -> None:
    # everything in one chunk after the first token: no measurable interval
    assert decode_rate([10_000] + [20_000] * 100) is None


def test_decode_rate_read_in_bursts_is_none() -> None:
    """Tokens 1..100 in reads of more than TOKENS_PER_READ_BOUND (8) on average: the span timed the
    delivery (CI's loaded host sent 100 tokens in two reads 4 ms apart: 25,000 tok/s on a CPU)."""
    assert decode_rate([257_000] + [259_000] * 50 + [261_000] * 50) is None
    twelve = [0] + [1_000 * -(-i // 9) for i in range(1, 101)]  # reads of 9 tokens, the last of 1
    assert len(set(twelve[1:])) == 12 and decode_rate(twelve) is None
    thirteen = [0] + [1_000 * -(-i // 8) for i in range(1, 101)]  # reads of 8 tokens: a deep draft's steps
    assert len(set(thirteen[1:])) == 13 and decode_rate(thirteen) == pytest.approx(99 / 0.012)
    # clock went backwards
    assert decode_rate([10_000, 30_000] + [20_000] * 99) is None


def test_no_rate_says_why() -> None:
    """The words the runner's progress and verification give for a completion without a rate."""
    assert no_rate_because(steady(101, 5.0)) is None
    assert no_rate_because(steady(50, 10.0)) == "fewer than 101 tokens"
    assert no_rate_because([10_000] + [20_000] * 100) == "tokens 1..100 read in bursts (1 read)"
    assert (
        no_rate_because([0] + [1_000 * -(-i // 50) for i in range(1, 101)]) == "tokens 1..100 read in bursts (2 reads)"
    )
    backwards = [0, *range(100_000, 0, -1_000)]  # a hundred distinct times, descending
    assert no_rate_because(backwards) == "tokens 1..100 with no time between the first and the last"
    assert decode_rate(backwards) is None


# --- class-balanced median -----------------------------------------------------------------


def test_class_balanced_median_hand_computed() -> None:
    # class medians: ops 20 (of 10, 20, 90), code 45 (mean of 40 and 50), prose 7 -> median 20
    values = {"ops": [90.0, 10.0, 20.0], "code": [40.0, 50.0], "prose": [7.0]}
    assert class_balanced_median(values) == 20.0


def test_class_balanced_median_even_class_count() -> None:
    # medians 2, 15, 5, 100 -> sorted 2, 5, 15, 100 -> (5 + 15) / 2
    values = {"a": [1.0, 2.0, 3.0], "b": [10.0, 20.0], "c": [5.0], "d": [100.0]}
    assert class_balanced_median(values) == 10.0


def test_class_balanced_median_differs_from_pooled_median() -> None:
    # Six prompts of one class cannot outvote a class of one: pooled median 1.0, balanced 50.5.
    values = {"big": [1.0] * 6, "small": [100.0]}
    assert class_balanced_median(values) == 50.5


def test_class_balanced_median_rejects_empty_input() -> None:
    with pytest.raises(ValueError, match="every class"):
        class_balanced_median({})
    with pytest.raises(ValueError, match="every class"):
        class_balanced_median({"a": [1.0], "b": []})


def test_server_decode_rate_is_class_balanced() -> None:
    rows = [
        row("p1", "ops", list(range(101)), steady(101, 10.0)),  # 100 tok/s
        row("p2", "ops", list(range(101)), steady(101, 5.0)),  # 200 tok/s
        row("p3", "ops", list(range(101)), steady(101, 2.5)),  # 400 tok/s -> ops median 200
        row("p4", "code", list(range(101)), steady(101, 20.0)),  # 50 tok/s -> code median 50
        row("p5", "prose", list(range(101)), steady(101, 4.0)),  # 250 tok/s
    ]
    assert server_decode_rate(rows) == pytest.approx(200.0)


def test_server_decode_rate_none_when_a_prompt_is_short_or_no_rows() -> None:
    rows = [row("p1", "ops", list(range(101)), steady(101, 10.0)), row("p2", "ops", list(range(99)), steady(99, 5.0))]
    assert server_decode_rate(rows) is None
    assert server_decode_rate([]) is None


def test_server_ttft_is_the_median_of_rows() -> None:
    rows = [row(f"p{i}", "c", [1], [t]) for i, t in enumerate([30_000, 10_000, 20_000, 1_000_000])]
    assert [r.ttft_ms for r in rows] == [30.0, 10.0, 20.0, 1000.0]  # the first token's time, in ms
    assert server_ttft_ms(rows) == 25.0
    assert server_ttft_ms([]) is None


# --- first_divergence ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], None),
        ([], [], None),
        ([1, 2, 3], [9, 2, 3], 0),
        ([1, 2, 3], [1, 2, 4], 2),
        ([1, 2, 3, 4], [1, 5, 3, 6], 1),
        ([1, 2], [1, 2, 3], 2),
        ([1, 2, 3], [1, 2], 2),
        ([], [7], 0),
    ],
)
def test_first_divergence(a: list[int], b: list[int], expected: int | None) -> None:
    assert first_divergence(a, b) == expected
    assert first_divergence(b, a) == expected


# --- compare_rows --------------------------------------------------------------------------


def test_compare_rows_all_identical() -> None:
    left = [row("p1", "a", [1, 2, 3]), row("p2", "b", [4, 5])]
    right = [row("p2", "b", [4, 5]), row("p1", "a", [1, 2, 3])]  # matched by id, not position
    gate = compare_rows("G1", "B", left, right)
    assert (gate.gate, gate.against, gate.server) == ("G1", "B", None)
    assert (gate.exact, gate.total, gate.passed) == (2, 2, True)
    assert gate.first_divergence == [None, None]
    assert gate.summary == "G1 2/2 vs B"


def test_compare_rows_divergence_and_missing_prompt() -> None:
    left = [row("p1", "a", [1, 2, 3]), row("p2", "b", [4, 5, 6]), row("p3", "c", [7])]
    right = [row("p1", "a", [1, 2, 3]), row("p2", "b", [4, 5, 0])]  # p3 missing on the right
    gate = compare_rows("G3", "tp1-mtp0", left, right, server="A")
    assert (gate.exact, gate.total, gate.passed) == (1, 3, False)
    assert gate.first_divergence == [None, 2, 0]
    assert gate.server == "A"
    assert gate.summary == "G3 server A 1/3 vs tp1-mtp0"


def test_compare_rows_prefix_counts_as_divergence() -> None:
    gate = compare_rows("G2", "B", [row("p1", "a", [1, 2, 3])], [row("p1", "a", [1, 2])])
    assert (gate.exact, gate.passed, gate.first_divergence) == (0, False, [2])
