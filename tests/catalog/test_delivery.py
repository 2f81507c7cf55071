"""catalog.model.delivery: the burst rule, and its sampled form equal to counting every read."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.model.delivery import TOKENS_PER_READ_BOUND, read_in_bursts, times_read_in_bursts


def test_one_read_or_reads_over_the_bound_are_bursts() -> None:
    assert read_in_bursts(2, 1) and read_in_bursts(101, 3)  # CI's loaded host: 101 tokens, 3 reads
    assert not read_in_bursts(1, 1)  # one token: nothing to read late
    assert not read_in_bursts(101, 13) and read_in_bursts(101, 12)  # 13 x 8 = 104 >= 101 > 96
    assert not read_in_bursts(101, 101)


# Ascending arrival times: each read's time, repeated for the tokens it carried; reads of about
# the bound's size, where sampling and counting could part.
near = st.integers(min_value=TOKENS_PER_READ_BOUND - 2, max_value=TOKENS_PER_READ_BOUND + 2)
reads_of = st.lists(st.one_of(near, st.integers(min_value=1, max_value=3 * TOKENS_PER_READ_BOUND)), max_size=40)


@settings(max_examples=400)
@given(reads_of, st.integers(min_value=0, max_value=10))
def test_sampling_agrees_with_counting_every_read(carried: list[int], start: int) -> None:
    times = [start + read for read, tokens in enumerate(carried) for _ in range(tokens)]
    assert times_read_in_bursts(times) == read_in_bursts(len(times), len(set(times)))


def test_sampling_agrees_on_the_cases_that_decide() -> None:
    """A read of 9 tokens between single ones (a sample repeats, the count decides), and 12 or 13
    reads for 100 tokens (either side of the bound)."""
    nine = [0] * 1 + [1] * 9 + list(range(2, 92))
    assert len(nine) == 100 and not times_read_in_bursts(nine)
    twelve = [i // 9 for i in range(100)]  # reads of 9 tokens, the last of 1: 12 reads
    thirteen = [i // 8 for i in range(100)]  # reads of 8 tokens, the last of 4: 13 reads
    assert times_read_in_bursts(twelve) and not times_read_in_bursts(thirteen)
    assert times_read_in_bursts([5, 5]) and not times_read_in_bursts([5]) and not times_read_in_bursts([])
