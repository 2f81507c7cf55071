"""Drive the runner's client (runner.client.stream_completion with one shared new_http_client)
against a server, as a subprocess of the benchmark, so its CPU time is its own.

    python -m bench.client_worker     # then one JSON run per line on stdin

It prints `READY` once imported. Each line read is a run: {"base_url", "model", "mark_url" or
null, "label", "concurrency", "num_prompts", "max_tokens", "prompt_words", "warmup": bool,
"keep_times": bool}. It answers with one line `OURS-RUN {json}`: wall time from before the first
request to after the last (the span `vllm bench serve` measures), CPU time of this process over
the same span (getrusage RUSAGE_SELF, all threads), tokens counted from token ids, and per
request: when it was written (perf_counter; the origin of its token times), TTFT, decode rate
(catalog.model.metrics.decode_rate) and the prompt's tag, to match it with the fast server's emit log.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
import urllib.request
from typing import Any

from catalog.model.metrics import decode_rate
from runner.client import new_http_client, stream_completion

FILLER = [
    *[
        "summarise",
        "the",
        "incident",
        "timeline",
        "and",
        "list",
        "the",
        "action",
        "items",
        "with",
        "owners",
        "and",
        "due",
        "dates",
    ],
    *[
        "for",
        "the",
        "payments",
        "database",
        "outage",
        "including",
        "customer",
        "impact",
        "root",
        "cause",
        "and",
        "factors",
    ],
]


def prompt_text(label: str, index: int, words: int) -> str:
    body = " ".join(FILLER[i % len(FILLER)] for i in range(words))
    return f"[bench {label} {index}] {body}"


def tag_of(label: str, index: int) -> str:
    return f"[bench {label} {index}]"


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _mark(url: str | None, label: str) -> None:
    if not url:
        return
    request = urllib.request.Request(url, data=json.dumps({"label": label}).encode(), method="POST")
    request.add_header("content-type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


async def run_one(base_url: str, model: str, run: dict[str, Any]) -> dict[str, Any]:
    concurrency = int(run["concurrency"])
    label = str(run["label"])
    async with new_http_client(max_in_flight=concurrency) as http:
        if run.get("warmup"):
            # open the pool's connections first, as a long-lived client would have them
            await asyncio.gather(
                *[
                    stream_completion(base_url, model, prompt_text(label + "-warmup", i, 8), 2, 1, http=http)
                    for i in range(concurrency)
                ]
            )
        semaphore = asyncio.Semaphore(concurrency)
        requests: list[dict[str, Any]] = []

        async def one(index: int) -> int:
            async with semaphore:
                prompt = prompt_text(label, index, int(run["prompt_words"]))
                result = await stream_completion(base_url, model, prompt, int(run["max_tokens"]), 1234, http=http)
                sent = time.perf_counter() - result.e2e_s  # when the request was written (token time 0)
                times_us = [round(t * 1e6) for t in result.token_times_s]
                requests.append(
                    {
                        "tag": tag_of(label, index),
                        "sent": sent,
                        "ttft_s": result.ttft_s,
                        "e2e_s": result.e2e_s,
                        "tokens": len(result.token_ids),
                        "chunks": result.chunk_count,
                        "decode_tok_s": decode_rate(times_us),
                        "token_times_s": result.token_times_s if run.get("keep_times") else None,
                    }
                )
                return result.completion_tokens

        cpu0, started = _cpu_s(), time.perf_counter()
        counts = await asyncio.gather(*[one(i) for i in range(int(run["num_prompts"]))])
        finished, cpu1 = time.perf_counter(), _cpu_s()
    return {
        "label": label,
        "concurrency": concurrency,
        "started": started,
        "finished": finished,
        "wall_s": finished - started,
        "cpu_s": cpu1 - cpu0,
        "tokens": sum(counts),
        "requests": sorted(requests, key=lambda r: r["sent"]),
    }


def main() -> None:
    print("READY", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        run = json.loads(line)
        _mark(run.get("mark_url"), str(run["label"]))
        result = asyncio.run(run_one(run["base_url"], run["model"], run))
        print("OURS-RUN " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
