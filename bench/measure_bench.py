"""Benchmark 2: measurement agreement on a real vLLM CPU server, ours against `vllm bench serve`.

One server, started the way runner/attempt.py starts an oracle arm of the demo model (recipe
base args, plan.PROTOCOL_ARGS, --max-num-seqs 1, LocalRuntime's argv), serves both clients,
single stream, the twelve prompts of the strict suite at temperature 0 with a 512-token cap.
The clients take turns prompt by prompt (ours then the peer, then the peer first on the next
prompt), so a change of load on this shared machine hits both sides of every pair alike; a
full run does the suite twice. The peer reads the same prompts from a file in its `sharegpt` dataset format (raw prompt
text, no chat template, not shuffled, output length fixed at 512): its `custom` (JSONL) format
needs pandas, which the vLLM CPU environment does not install. Both clients send the same
prompt text with the same sampling fields, apart from each client's own extras.

Definitions differ, and the benchmark reports each side's own figure and the bridge between:
- ours: decode rate of a prompt = 99 / (t[100] - t[1]) (catalog.model.metrics), the server's figure
  the class-balanced median over the prompts;
- vLLM: TPOT of a request = (E2E - TTFT) / (n - 1), i.e. every interval after the first token,
  and 1 / median TPOT as its decode rate; its "output throughput" = all tokens / benchmark
  duration (TTFT included).
The bridge: the same TPOT computed from our own token times, which must match the peer's.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any

from bench.common import (
    DEMO_MODEL,
    NO_DECODE_RATE,
    OUT,
    REPO,
    VLLM_PYTHON,
    Log,
    Worker,
    load_average,
    median_or_none,
    peer_worker,
)
from bench.results import Benchmark, Figure
from catalog.model.metrics import decode_rate, server_decode_rate
from catalog.recipes.suite import Suite, SuitePrompt
from catalog.store.repository import load_catalog
from runner.attempt import prompt_row
from runner.client import new_http_client, stream_completion
from runner.identity import local_runtime_identity
from runner.plan import CampaignRequest, plan_arms
from runner.runtime import LocalRuntime
from runner.server import VllmServer, find_free_port

MAX_TOKENS = 512
QUICK_MAX_TOKENS = 256  # quick runs: the first prompt of each class, 256 tokens (still > 101)
SEED = 1234
PEER_NAME = "vllm bench serve (vLLM 0.32.0 CPU), the strict suite as a sharegpt-format dataset"


def _server(run_dir: Path) -> tuple[VllmServer, str, list[str]]:
    catalog = load_catalog(REPO / "data", REPO / "packets")
    request = CampaignRequest(model="demo", hardware="cpu_generic", depths=[0])
    arm = plan_arms(request, catalog.recipes["demo"], catalog.hardware["cpu_generic"], "data/models/demo.yaml")[0]
    port = find_free_port()
    _, facts = local_runtime_identity(VLLM_PYTHON, "cpu")  # the entrypoint the runner would use
    runtime = LocalRuntime(VLLM_PYTHON, DEMO_MODEL, facts.entrypoint, offline=True)
    argv = runtime.argv(arm.command, port)
    env = {**arm.command.env, **runtime.server_env()}
    server = VllmServer(argv, port=port, run_dir=run_dir, env=env, health_deadline_s=900.0)
    return server, arm.command.model_id, argv


def _suite() -> Suite:
    return load_catalog(REPO / "data", REPO / "packets").suites["strict-v1"]


def _quick_suite(suite: Suite) -> Suite:
    """One prompt per class (class-balanced medians stay defined)."""
    firsts: dict[str, Any] = {}
    for prompt in suite.prompts:
        firsts.setdefault(prompt.class_, prompt)
    return suite.model_copy(update={"prompts": list(firsts.values())})


async def _ours(base_url: str, model: str, prompt: SuitePrompt, max_tokens: int) -> dict[str, Any]:
    async with new_http_client(max_in_flight=1) as http:
        result = await stream_completion(base_url, model, prompt.prompt, max_tokens, SEED, http=http)
    row = prompt_row(prompt.id, prompt.class_, result)
    times = result.token_times_s
    return {
        "row": row,
        "decode_tok_s": decode_rate(row.token_times_us),
        "tpot_ms": 1000 * (times[-1] - times[0]) / (len(times) - 1),  # vLLM's TPOT, from our token times
        "ttft_ms": 1000 * result.ttft_s,
        "e2e_s": result.e2e_s,
        "tokens": result.completion_tokens,
        "prompt_tokens": result.prompt_tokens,
    }


def _peer_request(base_url: str, model: str, prompt: SuitePrompt, label: str, max_tokens: int) -> dict[str, Any]:
    dataset = OUT / "peer" / f"{prompt.id}.sharegpt.json"
    dataset.parent.mkdir(parents=True, exist_ok=True)
    conversation = {
        "id": prompt.id,
        "conversations": [{"from": "human", "value": prompt.prompt}, {"from": "gpt", "value": "-"}],
    }
    dataset.write_text(json.dumps([conversation]))
    argv = [
        "--backend",
        "vllm",
        "--base-url",
        base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        str(DEMO_MODEL),
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(dataset),
        "--sharegpt-output-len",
        str(max_tokens),
        "--disable-shuffle",
        "--num-prompts",
        "1",
        "--max-concurrency",
        "1",
        "--temperature",
        "0",
        "--top-p",
        "1",
        "--extra-body",
        json.dumps({"seed": SEED}),
        "--disable-tqdm",
        "--ready-check-timeout-sec",
        "0",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(OUT / "peer"),
        "--result-filename",
        f"{label}.json",
    ]
    return {"label": label, "argv": argv, "mark_url": None}


def _peer(peer: Worker, base_url: str, model: str, prompt: SuitePrompt, label: str, max_tokens: int) -> dict[str, Any]:
    peer.run(_peer_request(base_url, model, prompt, label, max_tokens))
    saved = json.loads((OUT / "peer" / f"{label}.json").read_text())
    if saved["failed"] or saved["completed"] != 1:
        raise RuntimeError(f"vllm bench serve failed on {prompt.id}: {saved.get('errors')}")
    return {
        "tpot_ms": 1000 * (saved["latencies"][0] - saved["ttfts"][0]) / (saved["output_lens"][0] - 1),
        "reported_tpot_ms": saved["median_tpot_ms"],
        "ttft_ms": 1000 * saved["ttfts"][0],
        "duration_s": saved["duration"],
        "tokens": saved["total_output_tokens"],
        "prompt_tokens": saved["input_lens"][0],
    }


def run(quick: bool, log: Log, meanwhile: Callable[[], object] | None = None) -> list[Benchmark]:
    """`meanwhile`: unmeasured preparation (generating the builder's catalog) to overlap with the
    minute or more a vLLM CPU server takes to start."""
    rounds = 1 if quick else 2
    run_dir = OUT / "vllm" / time.strftime("%Y%m%d-%H%M%S")
    server, model, argv = _server(run_dir)
    suite = _quick_suite(_suite()) if quick else _suite()
    max_tokens = QUICK_MAX_TOKENS if quick else MAX_TOKENS
    log(f"measurement: starting vLLM ({' '.join(argv[1:4])} ...) and the peer client in parallel")
    with ThreadPoolExecutor(max_workers=3) as pool:
        peer_start = pool.submit(peer_worker)
        server_start = pool.submit(server.start)
        if meanwhile is not None:
            pool.submit(meanwhile).result()
        peer = peer_start.result()
        server_start.result()
    pairs: list[dict[str, Any]] = []
    try:
        log(f"measurement: vLLM ready in {server.startup_s:.0f} s, peer in {peer.ready_s:.0f} s")
        asyncio.run(_warm_up(server.base_url, model))
        for round_index in range(rounds):
            for index, prompt in enumerate(suite.prompts):
                ours_first = (index + round_index) % 2 == 0
                label = f"measure-r{round_index}-{prompt.id}"
                pair: dict[str, Any] = {"round": round_index, "prompt": prompt.id, "class": prompt.class_}
                for side in ("ours", "peer") if ours_first else ("peer", "ours"):
                    if side == "ours":
                        pair["ours"] = asyncio.run(_ours(server.base_url, model, prompt, max_tokens))
                    else:
                        pair["peer"] = _peer(peer, server.base_url, model, prompt, label, max_tokens)
                pair["load_average"] = load_average()
                pairs.append(pair)
            log(round_line(pairs, round_index, rounds))
    finally:
        server.stop()
    return [_benchmark(pairs, argv, server.startup_s, max_tokens, rounds)]


async def _warm_up(base_url: str, model: str) -> None:
    """One short request first, so neither client pays for the server's first-request setup."""
    async with new_http_client(max_in_flight=1) as http:
        await stream_completion(base_url, model, "Warm up.", 16, SEED, http=http)


def round_line(pairs: list[dict[str, Any]], round_index: int, rounds: int) -> str:
    """One round's progress line; a figure that cannot be computed is said, never formatted."""
    mine = [p for p in pairs if p["round"] == round_index]
    ours = server_decode_rate([p["ours"]["row"] for p in mine])
    peer_tpot = median(p["peer"]["tpot_ms"] for p in mine)
    said = f"ours {ours:.1f} tok/s decode" if ours is not None else f"ours: {NO_DECODE_RATE}"
    return f"measurement: round {round_index + 1}/{rounds}: {said}, peer 1/TPOT {1000 / peer_tpot:.1f} tok/s"


def _benchmark(
    pairs: list[dict[str, Any]], argv: list[str], startup_s: float | None, max_tokens: int, rounds: int
) -> Benchmark:
    """The figures of the pairs. A figure that cannot be computed (a round without a decode rate)
    is reported missing with its reason: the rest of the run stands."""
    per_round = []
    for round_index in range(rounds):
        mine = [p for p in pairs if p["round"] == round_index]
        per_round.append(
            {
                "ours_decode_tok_s": server_decode_rate([p["ours"]["row"] for p in mine]),
                "peer_tpot_ms": median(p["peer"]["tpot_ms"] for p in mine),
                "ours_tpot_ms": median(p["ours"]["tpot_ms"] for p in mine),
                "ours_ttft_ms": median(p["ours"]["ttft_ms"] for p in mine),
                "peer_ttft_ms": median(p["peer"]["ttft_ms"] for p in mine),
                "ours_output_tok_s": sum(p["ours"]["tokens"] for p in mine) / sum(p["ours"]["e2e_s"] for p in mine),
                "peer_output_tok_s": sum(p["peer"]["tokens"] for p in mine)
                / sum(p["peer"]["duration_s"] for p in mine),
            }
        )

    def mid(key: str) -> float:
        return float(median(r[key] for r in per_round))

    ours_decode, peer_tpot = median_or_none([r["ours_decode_tok_s"] for r in per_round]), mid("peer_tpot_ms")
    peer_rate = 1000.0 / peer_tpot
    rated = [p for p in pairs if p["ours"]["decode_tok_s"] is not None]
    paired = median_or_none([p["ours"]["decode_tok_s"] * p["peer"]["tpot_ms"] / 1000 for p in rated])
    definitions = median_or_none([p["ours"]["decode_tok_s"] * p["ours"]["tpot_ms"] / 1000 for p in rated])
    unrated = len(pairs) - len(rated)
    skipped = f"; {unrated} prompt(s) left out: {NO_DECODE_RATE}" if unrated else ""
    first_round = [p for p in pairs if p["round"] == 0]
    identical = all(
        p["ours"]["row"].token_ids == q["ours"]["row"].token_ids
        for p in pairs
        for q in first_round
        if p["prompt"] == q["prompt"]
    )
    same_lengths = all(p["ours"]["tokens"] == p["peer"]["tokens"] for p in pairs)
    same_prompts = all(p["ours"]["prompt_tokens"] == p["peer"]["prompt_tokens"] for p in pairs)
    return Benchmark(
        id="measurement.vllm-cpu-demo",
        group="measurement",
        title="Single-stream decode rate on real vLLM CPU (demo model, strict suite)",
        peer=PEER_NAME,
        figures=[
            Figure(
                name="decode rate (ours: tokens 1..100, class-balanced median; peer: 1 / median TPOT)",
                unit="tok/s",
                ours=ours_decode,
                peer=peer_rate,
                better="closer",
                target="within ±3 %",
                met=None if ours_decode is None else abs(ours_decode / peer_rate - 1) <= 0.03,
                note="definitions differ (window, summary); the TPOT row compares like for like"
                if ours_decode is not None
                else f"missing, {NO_DECODE_RATE}",
            ),
            Figure(
                name="decode rate, prompt by prompt (median of ours / peer's 1 / TPOT)",
                unit="ratio",
                ours=paired,
                better="closer",
                note=f"each pair measured back to back on the same prompt{skipped}",
            ),
            Figure(
                name="definitions alone: our decode rate / our 1 / TPOT, same requests",
                unit="ratio",
                ours=definitions,
                better="closer",
                note="tokens 1..100 against every interval after the first, from one client's token times: no noise"
                + skipped,
            ),
            Figure(
                name="median TPOT, same definition both sides",
                unit="ms",
                ours=mid("ours_tpot_ms"),
                peer=peer_tpot,
                better="closer",
                note="ours recomputed from our token times as (t[n-1] - t[0]) / (n - 1)",
            ),
            Figure(name="median TTFT", unit="ms", ours=mid("ours_ttft_ms"), peer=mid("peer_ttft_ms"), better="closer"),
            Figure(
                name="output throughput (all tokens / time)",
                unit="tok/s",
                ours=mid("ours_output_tok_s"),
                peer=mid("peer_output_tok_s"),
                better="closer",
                note="includes TTFT: lower than either decode figure",
            ),
        ],
        details={
            "server_argv": argv[1:],
            "server_startup_s": startup_s,
            "max_tokens": max_tokens,
            "prompts": len(first_round),
            "rounds": rounds,
            "outputs_identical_across_our_rounds": identical,
            "completion_lengths_equal_both_clients": same_lengths,
            "prompt_lengths_equal_both_clients": same_prompts,
            "per_round": per_round,
            "pairs": [
                {
                    "round": p["round"],
                    "prompt": p["prompt"],
                    "ours_decode_tok_s": p["ours"]["decode_tok_s"],
                    "ours_tpot_ms": p["ours"]["tpot_ms"],
                    "peer_tpot_ms": p["peer"]["tpot_ms"],
                    "ours_ttft_ms": p["ours"]["ttft_ms"],
                    "peer_ttft_ms": p["peer"]["ttft_ms"],
                    "tokens": p["ours"]["tokens"],
                    "load_average": p["load_average"],
                }
                for p in pairs
            ],
        },
    )
