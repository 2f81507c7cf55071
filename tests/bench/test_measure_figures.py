"""The measurement benchmark's figures from its pairs (bench/measure_bench.py), without a server:
a figure that cannot be computed is reported missing with its reason, never a crash (an idle,
fast host streamed tokens 1..100 of a completion in one read, server_decode_rate was None, and
`make bench` died formatting it with `:.1f`)."""

from __future__ import annotations

from typing import Any

from bench.common import NO_DECODE_RATE
from bench.measure_bench import _benchmark, round_line
from catalog.model.metrics import decode_rate
from testkit.samples import make_rows


def _pairs(n_tokens: int) -> list[dict[str, Any]]:
    pairs = []
    for row in make_rows(ms_per_token=20.0, n_tokens=n_tokens):
        ours = {
            "row": row,
            "decode_tok_s": decode_rate(row.token_times_us),
            "tpot_ms": 20.0,
            "ttft_ms": 40.0,
            "e2e_s": 2.0,
            "tokens": n_tokens,
            "prompt_tokens": 30,
        }
        peer = {"tpot_ms": 20.2, "ttft_ms": 41.0, "tokens": n_tokens, "duration_s": 2.1, "prompt_tokens": 30}
        pairs.append({"round": 0, "prompt": row.prompt_id, "class": row.class_id, "ours": ours, "peer": peer})
        pairs[-1]["load_average"] = [0.1, 0.1, 0.1]
    return pairs


def test_a_round_without_a_decode_rate_is_reported_missing_not_a_crash() -> None:
    short = _pairs(n_tokens=60)  # under 101 tokens: no decode rate for any prompt
    assert round_line(short, 0, 1).startswith(f"measurement: round 1/1: ours: {NO_DECODE_RATE}, peer 1/TPOT")
    benchmark = _benchmark(short, ["python", "-m", "x"], 60.0, 60, 1)
    decode = benchmark.figures[0]
    assert decode.ours is None and decode.met is None and decode.note == f"missing, {NO_DECODE_RATE}"
    assert benchmark.figure("median TPOT, same definition both sides").ours == 20.0  # the rest stands


def test_a_full_round_has_every_figure() -> None:
    full = _pairs(n_tokens=120)
    assert "tok/s decode, peer 1/TPOT" in round_line(full, 0, 1)
    benchmark = _benchmark(full, ["python"], 60.0, 120, 1)
    assert all(figure.ours is not None for figure in benchmark.figures)
    assert benchmark.figures[0].met is not None
