"""The load sweep's arithmetic against hand-computed cases, and the rules its models enforce."""

from __future__ import annotations

import math
import random

import pytest
from pydantic import ValidationError

from catalog.model.delivery import TOKENS_PER_READ_BOUND
from catalog.model.load_sweep import (
    ALONE_BOUND,
    LoadLevel,
    LoadRequest,
    LoadSweep,
    Percentiles,
    Slo,
    percentile,
    poisson_offsets_ms,
)
from catalog.model.packet import Ladder


def request(prompt: str = "p1", **fields: object) -> LoadRequest:
    values: dict[str, object] = {"planned_ms": 0.0, "sent_ms": 0.0, "ttft_ms": 100.0, "e2e_ms": 400.0}
    values |= {"output_tokens": 16, "tpot_ms": 20.0, "identical_to_oracle": True}
    values |= fields
    return LoadRequest(prompt_id=prompt, **values)  # type: ignore[arg-type]


def closed(requests: list[LoadRequest], users: int = 2, duration_s: float = 2.0) -> LoadLevel:
    return LoadLevel(mode="closed", users=users, duration_s=duration_s, client_cpu_s=0.1, requests=requests)


def test_percentile_interpolates_between_closest_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == pytest.approx(2.5)  # rank 1.5
    assert percentile(values, 90) == pytest.approx(3.7)  # rank 2.7
    assert percentile(values, 99) == pytest.approx(3.97)  # rank 2.97
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 99) == 7.0


def test_percentile_refuses_nothing_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_poisson_schedule_is_cumulative_exponential_gaps_of_the_seed() -> None:
    draw = random.Random(11)
    gaps = [-math.log(1.0 - draw.random()) / 4.0 * 1000.0 for _ in range(3)]
    expected = [round(sum(gaps[: i + 1]), 3) for i in range(3)]
    assert poisson_offsets_ms(4.0, 3, 11) == pytest.approx(expected, abs=1e-3)
    assert poisson_offsets_ms(4.0, 3, 11) == poisson_offsets_ms(4.0, 3, 11)
    assert poisson_offsets_ms(4.0, 3, 12) != poisson_offsets_ms(4.0, 3, 11)


def test_poisson_schedule_mean_rate_is_the_rate() -> None:
    offsets = poisson_offsets_ms(5.0, 5000, 1)
    assert 5000 / (offsets[-1] / 1000.0) == pytest.approx(5.0, rel=0.05)


def test_level_figures_from_its_rows() -> None:
    level = closed(
        [
            request(ttft_ms=100.0, e2e_ms=400.0, tpot_ms=20.0, output_tokens=16),
            request(ttft_ms=300.0, e2e_ms=900.0, tpot_ms=40.0, output_tokens=16),
            request(
                error="connection reset",
                ttft_ms=None,
                e2e_ms=None,
                tpot_ms=None,
                output_tokens=0,
                identical_to_oracle=None,
            ),
        ]
    )
    assert level.output_tokens == 32
    assert level.aggregate_tok_s == 16.0
    assert level.per_user_tok_s == pytest.approx((50.0 + 25.0) / 2)
    assert level.failed == 1
    assert level.ttft == Percentiles(p50_ms=200.0, p90_ms=280.0, p99_ms=298.0)
    assert level.identical == 2
    assert not level.all_identical  # a failed request is not an identical output


def test_goodput_counts_planned_requests_meeting_every_slo() -> None:
    level = closed(
        [
            request(ttft_ms=100.0, tpot_ms=20.0, e2e_ms=400.0),  # meets all
            request(ttft_ms=600.0, tpot_ms=20.0, e2e_ms=900.0),  # ttft too slow
            request(ttft_ms=100.0, tpot_ms=60.0, e2e_ms=1000.0),  # tpot too slow
            request(error="timeout", ttft_ms=None, e2e_ms=None, tpot_ms=None, identical_to_oracle=None),
        ],
        users=4,
    )
    assert level.goodput(Slo(ttft_ms=500, tpot_ms=50)) == 0.25
    assert level.goodput(Slo(ttft_ms=500)) == 0.5
    assert level.goodput(Slo()) == 0.75  # no objective: every completed request counts


def test_a_request_without_a_figure_the_slo_names_misses_it() -> None:
    level = closed([request(tpot_ms=None, output_tokens=1)])
    assert level.goodput(Slo(tpot_ms=50)) == 0.0
    assert level.goodput(Slo(ttft_ms=500)) == 1.0


def test_schedule_lag_marks_a_level_unusable() -> None:
    on_time = closed([request(planned_ms=10.0, sent_ms=10.5), request(planned_ms=20.0, sent_ms=21.0)])
    late = closed([request(planned_ms=10.0, sent_ms=10.5), request(planned_ms=20.0, sent_ms=60.0)])
    assert on_time.usable(10.0, ())
    assert not late.usable(10.0, ())
    assert late.lag.p99_ms == pytest.approx(0.5 + (40.0 - 0.5) * 0.99)


def test_responses_read_in_one_go_mark_a_level_unusable() -> None:
    """A client descheduled for a whole response (a loaded host) reads its tokens in one go: no
    decode rate, and no schedule lag to show it. The level is flagged by that lag, not trusted."""
    behind = closed([request(), request("p2", tpot_ms=None, output_tokens=101)])
    assert behind.read_in_bursts == 1 and behind.lag.p99_ms < 10.0
    assert not behind.usable(10.0, ())
    assert closed([request(tpot_ms=None, output_tokens=1)]).usable(10.0, ())  # one token: nothing to read late


def test_a_level_with_a_response_read_in_one_go_has_no_per_user_rate() -> None:
    """The client's reads timed the other responses too: their median is no user's decode rate."""
    behind = closed([request(tpot_ms=0.004), request("p2", tpot_ms=None, output_tokens=101)])
    assert behind.per_user_tok_s is None
    assert closed([request(tpot_ms=0.004), request("p2")]).per_user_tok_s == pytest.approx((250_000 + 50) / 2)


# CI's real CPU campaign on a loaded host (a424a06): the 4-user level of the oracle arm's sweep, as
# sealed. Every response's first token came after 257 ms and the other 100 within 4 ms, in two reads.
CI_BURST_LEVEL = [(0.191, 257.054, 261.072, 0.039365), (0.296, 256.99, 261.23, 0.039016)]
CI_BURST_LEVEL += [(0.389, 256.932, 261.201, 0.038689), (0.48, 256.867, 261.166, 0.038452)]


def ci_burst_level(reads: int | None) -> LoadLevel:
    rows = [
        request(f"p{k}", sent_ms=sent, ttft_ms=ttft, e2e_ms=e2e, output_tokens=101, tpot_ms=tpot, reads=reads)
        for k, (sent, ttft, e2e, tpot) in enumerate(CI_BURST_LEVEL)
    ]
    return closed(rows, users=4, duration_s=0.48)


def test_responses_read_in_bursts_mark_a_level_unusable() -> None:
    """Three reads for 101 tokens: the server made them over 257 ms, the client timed 4 ms. Without
    the reads recorded (an imported sweep) the rows alone cannot tell, and physics is the backstop."""
    burst = ci_burst_level(reads=3)
    assert burst.read_in_bursts == 4 and burst.lag.p99_ms < 10.0
    assert burst.per_user_tok_s is None and not burst.usable(10.0, ())
    unknown = ci_burst_level(reads=None)
    assert unknown.read_in_bursts == 0 and unknown.per_user_tok_s == pytest.approx(
        (1000 / 0.038689 + 1000 / 0.039016) / 2
    )


def test_an_unusable_level_says_why() -> None:
    assert ci_burst_level(reads=3).unusable_because(10.0, ()) == "4 of 4 responses read in bursts, so no decode rate"
    late = closed([request(planned_ms=0.0, sent_ms=40.0), request("p2")])
    assert late.unusable_because(10.0, ()) == f"client lag p99 {late.lag.p99_ms:.1f} ms over the 10 ms bound"
    assert ci_burst_level(reads=101).unusable_because(10.0, ()) is None and ci_burst_level(reads=101).usable(10.0, ())


def test_a_user_served_faster_than_alone_marks_a_level_unusable() -> None:
    """Batching never serves a user faster than one alone on the same arm: a per-user rate over
    ALONE_BOUND times the arm's faster fresh server is not the engine's. Physics lets such a rate
    through on a CPU host, whose ceiling is about 20 times what it serves."""
    level = closed([request(tpot_ms=10.0), request("p2", tpot_ms=10.0)])  # 100 tok/s a user
    assert ALONE_BOUND == 2.0 and level.per_user_tok_s == pytest.approx(100.0)
    assert level.usable(10.0, [50.0, 40.0])  # at the bound: the faster server counts
    assert level.usable(10.0, ())  # the arm's rate not known: nothing to compare
    why = "100.0 tok/s per user, over 2 × the 49.0 tok/s of one user alone: batching never serves a user faster"
    assert level.faster_than_alone([49.0, 40.0]) == why and level.unusable_because(10.0, [49.0, 40.0]) == why
    assert level.behind_because(10.0) is None  # the client kept up: only the rate is wrong
    late = closed([request(planned_ms=0.0, sent_ms=40.0, tpot_ms=10.0), request("p2", tpot_ms=10.0)])
    assert late.unusable_because(10.0, [49.0]) == late.behind_because(10.0)  # the client's lag said first
    no_rate = ci_burst_level(reads=3)  # read in bursts: no per-user rate to hold to the arm's
    assert no_rate.faster_than_alone([1.0]) is None


def test_a_speculative_stream_is_not_a_burst() -> None:
    """Up to 1 + num_speculative_tokens tokens a read is how a speculative server streams."""
    spec = request(output_tokens=101, ttft_ms=100.0, e2e_ms=600.0, tpot_ms=5.0, reads=101 // TOKENS_PER_READ_BOUND + 1)
    assert not spec.read_in_bursts
    assert request(output_tokens=101, ttft_ms=100.0, e2e_ms=600.0, tpot_ms=5.0, reads=12).read_in_bursts
    failed = request(error="HTTP 500", ttft_ms=None, e2e_ms=None, output_tokens=0, tpot_ms=None)
    assert not failed.read_in_bursts and closed([failed, request("p2")]).usable(10.0, ())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"reads": 17}, "more reads than tokens"),
        ({"reads": 1}, "one read has no tpot_ms, and two or more reads have one"),
        ({"reads": 2, "tpot_ms": None}, "one read has no tpot_ms, and two or more reads have one"),
    ],
)
def test_reads_tell_the_same_story_as_the_times(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        request("p1", **fields)


def test_a_request_without_reads_writes_none() -> None:
    """Packets sealed before reads were recorded keep their canonical bytes."""
    assert "reads" not in request().model_dump(mode="json")
    assert request(reads=16).model_dump(mode="json")["reads"] == 16


def test_divergence_names_the_first_request_that_differs() -> None:
    level = closed([request(), request("p2", identical_to_oracle=False, first_divergence=7)])
    assert level.first_diverging_request is not None and level.first_diverging_request.prompt_id == "p2"
    assert level.first_diverging_request.first_divergence == 7


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"planned_ms": 50.0, "sent_ms": 10.0}, "sent before it was due"),
        ({"ttft_ms": None}, "completed request needs ttft_ms"),
        ({"ttft_ms": 500.0, "e2e_ms": 400.0}, "ends before its first token"),
        ({"first_divergence": 3}, "divergence needs identical_to_oracle false"),
    ],
)
def test_incoherent_requests_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        request(**fields)  # type: ignore[arg-type]


def test_a_level_has_one_mode() -> None:
    with pytest.raises(ValidationError, match="rate_rps"):
        LoadLevel(mode="open", users=4, duration_s=1, client_cpu_s=0, requests=[request()])
    with pytest.raises(ValidationError, match="users"):
        LoadLevel(mode="closed", rate_rps=2.0, duration_s=1, client_cpu_s=0, requests=[request()])


def test_every_level_holds_the_planned_request_count() -> None:
    with pytest.raises(ValidationError, match="requests_per_level"):
        LoadSweep(seed=1, requests_per_level=3, levels=[closed([request(), request()])])


def test_a_load_ladder_carries_its_sweep_and_round_trips() -> None:
    sweep = LoadSweep(seed=1, requests_per_level=1, slo=Slo(ttft_ms=500), levels=[closed([request()], users=1)])
    ladder = Ladder(arm="tp1-mtp0", kind="load", load=sweep)
    assert Ladder.model_validate(ladder.model_dump(mode="json")) == ladder
    with pytest.raises(ValidationError, match="load"):
        Ladder(arm="tp1-mtp0", kind="load")
    with pytest.raises(ValidationError, match="load"):
        Ladder(arm="tp1-mtp0", kind="concurrency", load=sweep)


def test_older_ladders_keep_their_bytes() -> None:
    dumped = Ladder(arm="tp1-mtp0", kind="concurrency").model_dump(mode="json")
    assert "load" not in dumped


def test_a_shortened_duration_is_refused() -> None:
    """Shrinking duration_s would inflate the aggregate rate: every request must end inside it."""
    with pytest.raises(ValidationError, match="ends after the level's duration_s"):
        closed([request(sent_ms=0.0, e2e_ms=400.0)], users=1, duration_s=0.2)
    assert closed([request(sent_ms=0.0, e2e_ms=400.0)], users=1, duration_s=0.4).aggregate_tok_s == 40.0


def test_a_tpot_the_request_could_not_have_had_is_refused() -> None:
    with pytest.raises(ValidationError, match="exceeds e2e_ms"):
        closed([request(ttft_ms=100.0, tpot_ms=40.0, e2e_ms=400.0, output_tokens=16)], users=1)


def test_a_closed_loop_never_has_more_requests_in_flight_than_users() -> None:
    one_after_another = [request(sent_ms=0.0, e2e_ms=400.0), request(planned_ms=400.0, sent_ms=400.0, e2e_ms=400.0)]
    assert closed(one_after_another, users=1).failed == 0
    overlapping = [request(sent_ms=0.0, e2e_ms=400.0), request(planned_ms=100.0, sent_ms=100.0, e2e_ms=400.0)]
    with pytest.raises(ValidationError, match=r"more requests in flight at once than its users \(1\)"):
        closed(overlapping, users=1)
    assert closed(overlapping, users=2).failed == 0
