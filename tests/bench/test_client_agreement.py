"""The client bench's timing agreement (bench/client_bench.py) from synthetic paced rounds, without
a server: a round where no request has a decode rate reports the decode figures missing, with the
reason, instead of crashing. (On a loaded 2-core host our client fell behind a c=64 paced stream,
read ten tokens at a time, every request's decode rate was None, median([]) raised and the whole
client group was lost.)"""

from __future__ import annotations

from typing import Any

from bench.client_bench import ClientPlan, _agreement_benchmarks
from bench.common import NO_DECODE_RATE
from catalog.model.metrics import decode_rate

TOKENS = 128
PLAN = ClientPlan(levels=(4,), paced_prompts=(3,), paced_max_tokens=TOKENS, paced_rounds=2)


def _request(tag: str, per_read: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One request our client read `per_read` tokens at a time, and the server's record of it
    (first token 100 ms after the request arrived, then one every 10 ms)."""
    emits = [0.1 + 0.01 * k for k in range(TOKENS)]
    reads = [emits[min(k // per_read * per_read + per_read - 1, TOKENS - 1)] + 0.001 for k in range(TOKENS)]
    request = {
        "tag": tag,
        "sent": 0.0,
        "ttft_s": reads[0],
        "decode_tok_s": decode_rate([round(t * 1e6) for t in reads]),
        "token_times_s": reads,
    }
    return request, {"prompt_key": f"{tag} filler", "emits": emits, "arrival": 0.0, "seq": 0}


def _paced(per_read_by_round: list[list[int]]) -> dict[str, Any]:
    paced: dict[str, Any] = {"server": {"segments": [], "records": []}}
    for r, reads in enumerate(per_read_by_round):
        label = f"paced-r{r}-c4-ours"
        pairs = [_request(f"[r{r}-{i}]", per_read) for i, per_read in enumerate(reads)]
        paced[label] = {"requests": [request for request, _ in pairs]}
        paced["server"]["segments"].append({"segment": label, "label": label})
        paced["server"]["records"] += [{**record, "segment": label} for _, record in pairs]
        peer = f"paced-r{r}-c4-peer"
        paced["server"]["segments"].append({"segment": peer, "label": peer})
        paced["server"]["records"].append({**pairs[0][1], "segment": peer})
        paced[peer] = {"ttfts": [0.101], "latencies": [0.101 + 0.01 * (TOKENS - 1)], "output_lens": [TOKENS]}
    return paced


def test_a_round_where_no_request_has_a_decode_rate_reports_the_decode_figures_missing() -> None:
    # round 1: every read carries 10 tokens (over the 8 a read allows): no decode rate anywhere
    (benchmark,) = _agreement_benchmarks(PLAN, _paced([[1, 1, 1], [10, 10, 10]]))
    ratio = benchmark.figure("decode rate client / server")
    p95 = benchmark.figure("decode rate p95 |error|")
    assert ratio.ours is None and ratio.met is None and p95.ours is None
    assert ratio.note is not None and ratio.note.endswith(f"(3 of 6 request(s) had none): {NO_DECODE_RATE}")
    assert p95.note is not None and p95.note.startswith("missing: a round where no request had one")
    ttft = benchmark.figure("TTFT client / server")
    assert ttft.ours is not None and ttft.met is not None  # the rest of the round stands
    assert benchmark.details["ours_rounds"][1]["decode_ratio"] is None


def test_requests_without_a_decode_rate_are_left_out_and_counted() -> None:
    (benchmark,) = _agreement_benchmarks(PLAN, _paced([[1, 1, 10], [1, 1, 1]]))
    ratio = benchmark.figure("decode rate client / server")
    assert ratio.ours is not None and ratio.met is not None
    assert ratio.note is not None and ratio.note.endswith(f"; 1 of 6 request(s) left out: {NO_DECODE_RATE}")
    assert benchmark.details["ours"]["requests"] == 6 and benchmark.details["ours"]["decode_unrated"] == 1


def test_every_request_with_a_decode_rate_says_nothing_left_out() -> None:
    (benchmark,) = _agreement_benchmarks(PLAN, _paced([[1, 1, 1], [1, 1, 1]]))
    ratio = benchmark.figure("decode rate client / server")
    assert ratio.ours is not None and ratio.met is True and ratio.note is not None and "left out" not in ratio.note
    assert benchmark.figure("decode rate p95 |error|").note is None
