"""Benchmark 1: client overhead and timing agreement, ours against `vllm bench serve`'s client.

Both clients run as long-lived subprocesses against one fast local server (bench/fastserver.py)
and take turns, level by level, so a burst of load from elsewhere on the machine hits both
sides alike. Full runs repeat every level in alternating order (ours first, then the peer
first) and report medians.

Throughput mode: the server streams as fast as the client reads. Figures per level:
- tokens per second absorbed: completion tokens / (last response end - first request start);
- client CPU per token: getrusage(RUSAGE_SELF) of the client process over the same span;
- the server's CPU utilisation over each run (near 100 % would mean the server, not the
  client, was the limit).

Paced mode: first token 100 ms after the request arrives, then one every 10 ms. The server logs
when it wrote every token; our TTFT and decode rate (tokens 1..100, catalog.model.metrics) are compared
with the same quantities computed from the server's own timestamps, request by request.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any, Protocol

from bench.common import (
    DEMO_MODEL,
    NO_DECODE_RATE,
    OUT,
    REPO,
    CpuSampler,
    Log,
    Worker,
    child_env,
    http_json,
    load_average,
    median_or_none,
    peer_worker,
    stop_server,
)
from bench.results import Benchmark, Figure
from catalog.model.metrics import decode_rate

MODEL = "local/demo-qwen3-tiny"
PEER_NAME = "vllm bench serve (vLLM 0.32.0 CPU), --backend vllm"
# vllm/benchmarks/lib/endpoint_request_func.py (0.32.0), async_request_openai_completions: every
# network read is strip()ped before StreamedResponseHandler buffers it, so a read that ends just
# after "data:" or "data: " glues that prefix to the next event and json.loads raises; the request
# is counted failed though the server sent all of it. A client that falls behind (a loaded
# machine) gets more, shorter reads. tests/bench/test_peer_stream_split.py holds this.
PEER_FAILED_NOTE = (
    "vLLM's client failed {count} request(s) the server sent in full: it strips each network read "
    "before splitting events, so a read ending just after 'data:' breaks an event; its tokens/s counts "
    "only the requests it kept"
)


@dataclass(frozen=True)
class ClientPlan:
    levels: tuple[int, ...] = (1, 16, 64)
    prompts: tuple[int, ...] = (128, 256, 512)
    rounds: int = 5
    max_tokens: int = 512
    input_tokens: int = 128
    paced_prompts: tuple[int, ...] = (4, 16, 64)
    paced_max_tokens: int = 256
    paced_rounds: int = 3
    ttft_s: float = 0.1
    itl_s: float = 0.01

    @classmethod
    def quick(cls) -> ClientPlan:
        return cls(prompts=(32, 64, 128), rounds=2, paced_prompts=(2, 16, 64), paced_max_tokens=128, paced_rounds=1)


class FastServer:
    def __init__(self, log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.fastserver"],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=REPO,
            env=child_env(),
        )
        assert self.process.stdout is not None
        info = json.loads(self.process.stdout.readline())
        self.port = int(info["port"])
        self.pid = int(info["pid"])
        self.base_url = f"http://127.0.0.1:{self.port}"

    def mode(self, ttft_s: float, itl_s: float) -> None:
        http_json(self.base_url + "/bench/mode", {"ttft_s": ttft_s, "itl_s": itl_s})

    def log(self, emits: bool) -> dict[str, Any]:
        result: dict[str, Any] = http_json(f"{self.base_url}/emit-log?emits={int(emits)}", timeout=300)
        return result

    def stop(self) -> None:
        stop_server(self.process, self._log)


class Served(Protocol):
    """A server a client run is sent to (bench/server_speed.py sends them to the tests' fake too)."""

    base_url: str


def _ours_request(
    server: Served, label: str, level: int, prompts: int, max_tokens: int, plan: ClientPlan, paced: bool
) -> dict[str, Any]:
    return {
        "base_url": server.base_url,
        "model": MODEL,
        "mark_url": server.base_url + "/bench/mark",
        "label": label,
        "concurrency": level,
        "num_prompts": prompts,
        "max_tokens": max_tokens,
        "prompt_words": plan.input_tokens,  # about one token per filler word on the server's count
        "warmup": paced,
        "keep_times": paced,
    }


def _peer_request(
    server: FastServer,
    label: str,
    level: int,
    prompts: int,
    max_tokens: int,
    plan: ClientPlan,
    seed: int,
    detailed: bool,
) -> dict[str, Any]:
    argv = [
        "--backend",
        "vllm",
        "--base-url",
        server.base_url,
        "--endpoint",
        "/v1/completions",
        "--model",
        MODEL,
        "--tokenizer",
        str(DEMO_MODEL),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(plan.input_tokens),
        "--random-output-len",
        str(max_tokens),
        "--random-range-ratio",
        "0",
        "--num-prompts",
        str(prompts),
        "--max-concurrency",
        str(level),
        "--temperature",
        "0",
        "--seed",
        str(seed),
        "--disable-tqdm",
        "--ready-check-timeout-sec",
        "0",
        "--save-result",
        "--result-dir",
        str(OUT / "peer"),
        "--result-filename",
        f"{label}.json",
    ]
    if detailed:
        argv.append("--save-detailed")
    return {"label": label, "argv": argv, "mark_url": server.base_url + "/bench/mark"}


def _timed(sampler: CpuSampler, worker: Worker, request: dict[str, Any]) -> dict[str, Any]:
    """Run one measured run; the server's CPU utilisation over the run's request window."""
    result = worker.run(request)
    time.sleep(2.5 * sampler.interval_s)  # a sample after the window's end
    result["server_cpu_util"] = sampler.utilisation(result["started"], result["finished"])
    return result


def _peer_result(label: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((OUT / "peer" / f"{label}.json").read_text())
    return data


def run(quick: bool, log: Log) -> list[Benchmark]:
    plan = ClientPlan.quick() if quick else ClientPlan()
    (OUT / "peer").mkdir(parents=True, exist_ok=True)
    server = FastServer(OUT / "logs" / "fastserver.log")
    sampler = CpuSampler(server.pid)
    ours = None
    try:
        log(f"client: fast server on {server.base_url}; starting both clients")
        ours = Worker([sys.executable, "-m", "bench.client_worker"], "OURS-RUN ", OUT / "logs" / "ours.log")
        peer = peer_worker()
        log(f"client: ours ready in {ours.ready_s:.1f} s, peer (imports vLLM) in {peer.ready_s:.1f} s")
        server.mode(0.0, 0.0)
        samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for round_index in range(plan.rounds):
            for level, prompts in zip(plan.levels, plan.prompts, strict=True):
                sides = ["ours", "peer"] if round_index % 2 == 0 else ["peer", "ours"]
                for side in sides:
                    label = f"tp-r{round_index}-c{level}-{side}"
                    if side == "ours":
                        request = _ours_request(server, label, level, prompts, plan.max_tokens, plan, paced=False)
                        result = _timed(sampler, ours, request)
                        result.pop("requests", None)
                    else:
                        request = _peer_request(
                            server, label, level, prompts, plan.max_tokens, plan, round_index, False
                        )
                        result = _timed(sampler, peer, request)
                        saved = _peer_result(label)
                        result.update(
                            tokens=saved["total_output_tokens"],
                            failed=saved["failed"],
                            peer_duration_s=saved["duration"],
                            peer_output_throughput=saved["output_throughput"],
                        )
                        result["wall_s"] = result["finished"] - result["started"]
                    result["tok_s"] = result["tokens"] / result["wall_s"]
                    result["cpu_us_per_token"] = result["cpu_s"] / result["tokens"] * 1e6
                    samples.setdefault((side, level), []).append(result)
                    log(
                        f"client: round {round_index + 1}/{plan.rounds} c={level} {side}: "
                        f"{result['tok_s']:,.0f} tok/s, {result['cpu_us_per_token']:.1f} µs CPU/token, "
                        f"server CPU {result['server_cpu_util']:.0%}"
                    )
        emitted = _tokens_by_segment(server.log(emits=False))
        paced = _paced_runs(server, ours, peer, plan, log)
    finally:
        if ours is not None:
            ours.close()
        sampler.stop()
        server.stop()
    return _throughput_benchmarks(plan, samples, emitted) + _agreement_benchmarks(plan, paced)


def _tokens_by_segment(server_log: dict[str, Any]) -> dict[str, int]:
    labels = {s["segment"]: s["label"] for s in server_log["segments"]}
    counts: dict[str, int] = {}
    for record in server_log["records"]:
        label = labels[record["segment"]]
        counts[label] = counts.get(label, 0) + record["tokens"]
    return counts


def _paced_runs(server: FastServer, ours: Worker, peer: Worker, plan: ClientPlan, log: Log) -> dict[str, Any]:
    server.mode(plan.ttft_s, plan.itl_s)
    results: dict[str, Any] = {}
    for round_index in range(plan.paced_rounds):
        for level, prompts in zip(plan.levels, plan.paced_prompts, strict=True):
            label = f"paced-r{round_index}-c{level}-ours"
            request = _ours_request(server, label, level, prompts, plan.paced_max_tokens, plan, True)
            results[label] = ours.run(request)
            label = f"paced-r{round_index}-c{level}-peer"
            request = _peer_request(server, label, level, prompts, plan.paced_max_tokens, plan, round_index, True)
            request["argv"] += ["--num-warmups", str(level)]  # open its connections first, as ours does
            peer.run(request)
            results[label] = _peer_result(label)
            results[label]["load_average"] = load_average()
            log(f"client: paced round {round_index + 1}/{plan.paced_rounds} c={level} done (ours and peer)")
    results["server"] = server.log(emits=True)
    server.mode(0.0, 0.0)
    return results


def _median(samples: list[dict[str, Any]], key: str) -> float:
    return float(median(s[key] for s in samples))


def _throughput_benchmarks(
    plan: ClientPlan,
    samples: dict[tuple[str, int], list[dict[str, Any]]],
    emitted: dict[str, int],
) -> list[Benchmark]:
    benchmarks = []
    for level in plan.levels:
        ours, peer = samples[("ours", level)], samples[("peer", level)]
        tok_ours, tok_peer = _median(ours, "tok_s"), _median(peer, "tok_s")
        cpu_ours, cpu_peer = _median(ours, "cpu_us_per_token"), _median(peer, "cpu_us_per_token")
        # Every token the server wrote was counted by the client, or went with a request the client
        # itself reported failed (each request is exactly max_tokens long: --random-range-ratio 0).
        tokens_ok = all(
            s["tokens"] + s.get("failed", 0) * plan.max_tokens == emitted.get(f"tp-r{r}-c{level}-{side}")
            for side, runs in (("ours", ours), ("peer", peer))
            for r, s in enumerate(runs)
        )
        peer_failed = sum(int(s.get("failed", 0)) for s in peer)
        benchmarks.append(
            Benchmark(
                id=f"client.c{level}",
                group="client",
                title=f"Client overhead, {level} stream{'s' if level > 1 else ''} in flight",
                peer=PEER_NAME,
                figures=[
                    Figure(
                        name="tokens/s absorbed",
                        unit="tok/s",
                        ours=tok_ours,
                        peer=tok_peer,
                        better="higher",
                        target="≥ 1.0× peer",
                        met=tok_ours >= tok_peer,
                        note=PEER_FAILED_NOTE.format(count=peer_failed) if peer_failed else None,
                    ),
                    Figure(
                        name="client CPU per token",
                        unit="µs",
                        ours=cpu_ours,
                        peer=cpu_peer,
                        better="lower",
                        target="≤ peer (≥ 1.0× advantage)",
                        met=cpu_ours <= cpu_peer,
                    ),
                    Figure(
                        name="server CPU utilisation",
                        unit="%",
                        ours=100 * _median(ours, "server_cpu_util"),
                        peer=100 * _median(peer, "server_cpu_util"),
                        better="closer",
                        note="well under 100 %: the client, not the server, set the pace",
                    ),
                ],
                details={
                    "prompts": plan.prompts[plan.levels.index(level)],
                    "max_tokens": plan.max_tokens,
                    "input_tokens": plan.input_tokens,
                    "rounds": plan.rounds,
                    "tokens_match_server_log": tokens_ok,
                    "peer_failed_requests": peer_failed,
                    "ours_runs": [_brief(s) for s in ours],
                    "peer_runs": [_brief(s) for s in peer],
                },
            )
        )
    return benchmarks


def _brief(sample: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "tok_s",
        "cpu_us_per_token",
        "wall_s",
        "cpu_s",
        "tokens",
        "failed",
        "server_cpu_util",
        "peer_output_throughput",
    )
    return {k: round(sample[k], 4) for k in keys if k in sample}


def _agreement_benchmarks(plan: ClientPlan, paced: dict[str, Any]) -> list[Benchmark]:
    server_log = paced["server"]
    labels = {s["segment"]: s["label"] for s in server_log["segments"]}
    by_segment: dict[str, list[dict[str, Any]]] = {}
    for record in server_log["records"]:
        by_segment.setdefault(labels[record["segment"]], []).append(record)
    benchmarks = []
    for level in plan.levels:
        rounds_ours, rounds_peer = [], []
        for r in range(plan.paced_rounds):
            label = f"paced-r{r}-c{level}"
            rounds_ours.append(_ours_agreement(paced[f"{label}-ours"], by_segment.get(f"{label}-ours", [])))
            rounds_peer.append(_peer_agreement(paced[f"{label}-peer"], by_segment.get(f"{label}-peer", [])))
        ours = _median_round(rounds_ours)
        peer = _median_round(rounds_peer)
        decode_note = _decode_note(ours)
        benchmarks.append(
            Benchmark(
                id=f"agreement.c{level}",
                group="agreement",
                title=f"Timing agreement with the server's emit log, {level} stream{'s' if level > 1 else ''}",
                peer=PEER_NAME,
                figures=[
                    Figure(
                        name="TTFT client / server",
                        unit="ratio",
                        ours=ours["ttft_ratio"],
                        peer=peer["ttft_ratio"],
                        better="closer",
                        target="within ±2 %",
                        met=abs(ours["ttft_ratio"] - 1) <= 0.02,
                        note="median over requests; the peer's is the ratio of medians",
                    ),
                    Figure(
                        name="decode rate client / server",
                        unit="ratio",
                        ours=ours["decode_ratio"],
                        peer=peer["decode_ratio"],
                        better="closer",
                        target="within ±2 %",
                        met=None if ours["decode_ratio"] is None else abs(ours["decode_ratio"] - 1) <= 0.02,
                        note="ours: tokens 1..100 (catalog.model.metrics); peer: 1 / TPOT against the server's TPOT"
                        + decode_note,
                    ),
                    Figure(
                        name="TTFT p95 |error|",
                        unit="%",
                        ours=ours["ttft_p95_error_pct"],
                        better="lower",
                    ),
                    Figure(
                        name="decode rate p95 |error|",
                        unit="%",
                        ours=ours["decode_p95_error_pct"],
                        better="lower",
                        note=decode_note.removeprefix("; ") or None,
                    ),
                    Figure(
                        name="token delivery lag, median",
                        unit="ms",
                        ours=ours["lag_median_ms"],
                        better="lower",
                        note="client arrival minus server write time, same clock",
                    ),
                    Figure(
                        name="TTFT gap: request transit, median",
                        unit="ms",
                        ours=ours["request_transit_median_ms"],
                        better="lower",
                        note="server's read of the request minus our send; with the first-token lag below it is"
                        " the whole TTFT gap (one clock: client TTFT = transit + server TTFT + first-token lag)",
                    ),
                    Figure(
                        name="TTFT gap: first-token delivery lag, median",
                        unit="ms",
                        ours=ours["first_token_lag_median_ms"],
                        better="lower",
                        note="our read of the first token minus the server's write of it",
                    ),
                ],
                details={
                    "server_ttft_s": plan.ttft_s,
                    "server_itl_s": plan.itl_s,
                    "max_tokens": plan.paced_max_tokens,
                    "prompts": plan.paced_prompts[plan.levels.index(level)],
                    "rounds": plan.paced_rounds,
                    "ours": ours,
                    "peer": peer,
                    "ours_rounds": rounds_ours,
                    "peer_rounds": rounds_peer,
                },
            )
        )
    return benchmarks


def _median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (a burst of load elsewhere spoils one round, not all),
    missing (None) where a round could not compute it, as the measurement bench reports it; each
    count summed over the rounds."""
    return {
        key: sum(r[key] for r in rounds) if isinstance(value, int) else median_or_none([r[key] for r in rounds])
        for key, value in rounds[0].items()
    }


def _decode_note(ours: dict[str, Any]) -> str:
    """Why our decode figures are missing, or how many requests they leave out: '' when none."""
    unrated = ours["decode_unrated"]
    if not unrated:
        return ""
    counted = f"{unrated} of {ours['requests']} request(s)"
    if ours["decode_ratio"] is None:
        return f"; missing: a round where no request had one ({counted} had none): {NO_DECODE_RATE}"
    return f"; {counted} left out: {NO_DECODE_RATE}"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ours_agreement(run: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    by_tag = {r["prompt_key"].split("]")[0] + "]": r for r in records}
    ttft: list[float] = []
    decode: list[float] = []
    lags: list[float] = []
    transit: list[float] = []
    first_lag: list[float] = []
    for request in run["requests"]:
        record = by_tag[request["tag"]]
        emits = record["emits"]
        transit.append(record["arrival"] - request["sent"])
        first_lag.append(request["sent"] + request["ttft_s"] - emits[0])
        server_ttft = emits[0] - record["arrival"]
        server_decode = decode_rate([round((e - emits[0]) * 1e6) for e in emits])
        ttft.append(request["ttft_s"] / server_ttft)
        if server_decode and request["decode_tok_s"]:
            decode.append(request["decode_tok_s"] / server_decode)
        lags.extend(request["sent"] + t - e for t, e in zip(request["token_times_s"], emits, strict=True))
    return {
        "requests": len(run["requests"]),
        "decode_unrated": len(run["requests"]) - len(decode),
        "ttft_ratio": float(median(ttft)),
        "decode_ratio": median_or_none(decode),  # None: no request of the round has a decode rate
        "ttft_p95_error_pct": 100 * _percentile([abs(r - 1) for r in ttft], 0.95),
        "decode_p95_error_pct": 100 * _percentile([abs(r - 1) for r in decode], 0.95) if decode else None,
        "lag_median_ms": 1000 * float(median(lags)),
        "lag_p99_ms": 1000 * _percentile(lags, 0.99),
        "request_transit_median_ms": 1000 * float(median(transit)),
        "request_transit_max_ms": 1000 * max(transit),
        "first_token_lag_median_ms": 1000 * float(median(first_lag)),
        "first_token_lag_max_ms": 1000 * max(first_lag),
    }


def _peer_agreement(saved: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    records = sorted(records, key=lambda r: r["seq"])[-len(saved["ttfts"]) :]  # after its warm-up requests
    server_ttft = [r["emits"][0] - r["arrival"] for r in records]
    server_tpot = [(r["emits"][-1] - r["emits"][0]) / (len(r["emits"]) - 1) for r in records]
    peer_tpot = [
        (latency - ttft) / (n - 1)
        for latency, ttft, n in zip(saved["latencies"], saved["ttfts"], saved["output_lens"], strict=True)
        if n > 1
    ]
    return {
        "requests": len(saved["ttfts"]),
        "ttft_ratio": float(median(saved["ttfts"]) / median(server_ttft)),
        "decode_ratio": float(median(server_tpot) / median(peer_tpot)),
        "mean_tpot_ms": saved.get("mean_tpot_ms"),
        "median_ttft_ms": saved.get("median_ttft_ms"),
    }
