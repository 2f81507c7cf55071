"""Benchmark 1c: the load sweep's client is not the bottleneck (docs/measuring.md, the lag bound).

Our load sweep's level runner (bench/load_sweep_worker.py) and `vllm bench serve`'s client take turns
against one fast local server (bench/fastserver.py) in paced mode: first token 50 ms after a
request arrives, then one every 10 ms per stream (100 tok/s per user), so at 64 users the
client reads 6,400 tokens a second while it keeps the schedule. Two levels:

- closed loop, 64 users (`--max-concurrency 64` for the peer);
- open loop at the highest rate: the Poisson rate that keeps about 64 requests in flight
  (64 / (TTFT + max_tokens x ITL)), `--request-rate` for the peer.

Figures per level:
- schedule lag p99: ours from its own records (sent minus planned, as the packet keeps it);
  closed loop also, for both clients alike, as the server saw it: each request's arrival after
  the 64th minus the finish of the request whose slot it took (the k-th finish frees the slot
  of arrival 64 + k). The peer records no planned send times, so its open-loop lag is not known;
- client CPU per request: CPU time of the client process over the level / requests.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from statistics import median
from typing import Any

from bench.client_bench import PEER_NAME, ClientPlan, FastServer, _peer_request
from bench.common import OUT, Log, Worker, peer_worker
from bench.results import Benchmark, Figure
from catalog.model.load_sweep import LAG_BOUND_MS, percentile

USERS = 64
MODEL = "local/demo-qwen3-tiny"


@dataclass(frozen=True)
class LoadPlan:
    requests: int = 256
    max_tokens: int = 256
    rounds: int = 3
    ttft_s: float = 0.05
    itl_s: float = 0.01

    @classmethod
    def quick(cls) -> LoadPlan:
        return cls(requests=128, max_tokens=64, rounds=1)

    @property
    def highest_rate(self) -> float:
        return round(USERS / (self.ttft_s + self.max_tokens * self.itl_s), 1)


def run(quick: bool, log: Log) -> list[Benchmark]:
    plan = LoadPlan.quick() if quick else LoadPlan()
    (OUT / "peer").mkdir(parents=True, exist_ok=True)
    server = FastServer(OUT / "logs" / "fastserver-load.log")
    ours = None
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        ours = Worker([sys.executable, "-m", "bench.load_sweep_worker"], "LOAD-RUN ", OUT / "logs" / "load-ours.log")
        peer = peer_worker()
        server.mode(plan.ttft_s, plan.itl_s)
        for round_index in range(plan.rounds):
            for level in ("closed", "open"):
                sides = ["ours", "peer"] if round_index % 2 == 0 else ["peer", "ours"]
                for side in sides:
                    label = f"load-r{round_index}-{level}-{side}"
                    if side == "ours":
                        result = _ours(server, ours, plan, label, level)
                    else:
                        result = _peer(server, peer, plan, label, level, round_index)
                    samples.setdefault((side, level), []).append(result)
                    log(
                        f"load: round {round_index + 1}/{plan.rounds} {level} {side}: lag p99 "
                        f"{_shown(result.get('lag_p99_ms'))} ms, {result['cpu_ms_per_request']:.2f} ms CPU/request, "
                        f"{result['failed']} failed"
                    )
        records = _records_by_label(server.log(emits=False))
    finally:
        if ours is not None:
            ours.close()
        server.mode(0.0, 0.0)
        server.stop()
    for (_, level), runs in samples.items():
        for result in runs:
            if level == "closed":
                result["server_lag_p99_ms"] = _server_slot_lag_p99(records.get(result["label"], []))
    return [_benchmark(plan, level, samples) for level in ("closed", "open")]


def _ours(server: FastServer, worker: Worker, plan: LoadPlan, label: str, level: str) -> dict[str, Any]:
    request: dict[str, Any] = {
        "base_url": server.base_url,
        "model": MODEL,
        "mark_url": server.base_url + "/bench/mark",
        "label": label,
        "requests": plan.requests,
        "max_tokens": plan.max_tokens,
    }
    request |= {"users": USERS} if level == "closed" else {"rate_rps": plan.highest_rate}
    result = worker.run(request)
    result["cpu_ms_per_request"] = 1000 * result["cpu_s"] / result["requests"]
    return result


def _peer(server: FastServer, worker: Worker, plan: LoadPlan, label: str, level: str, seed: int) -> dict[str, Any]:
    request = _peer_request(server, label, USERS, plan.requests, plan.max_tokens, ClientPlan(), seed, False)
    if level == "open":
        at = request["argv"].index("--max-concurrency")
        del request["argv"][at : at + 2]
        request["argv"] += ["--request-rate", str(plan.highest_rate)]
    result = worker.run(request)
    return {
        "label": label,
        "cpu_s": result["cpu_s"],
        "requests": result["requests"],
        "failed": _peer_failed(label),
        "cpu_ms_per_request": 1000 * result["cpu_s"] / max(result["requests"], 1),
        "lag_p99_ms": None,  # vllm bench serve records no planned send times
    }


def _peer_failed(label: str) -> int:
    saved = json.loads((OUT / "peer" / f"{label}.json").read_text())
    return int(saved.get("failed", 0))


def _records_by_label(server_log: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    labels = {s["segment"]: s["label"] for s in server_log["segments"]}
    by_label: dict[str, list[dict[str, Any]]] = {}
    for record in server_log["records"]:
        by_label.setdefault(labels[record["segment"]], []).append(record)
    return by_label


def _server_slot_lag_p99(records: list[dict[str, Any]]) -> float | None:
    """Closed loop as the server saw it: arrival 64 + k minus finish k, in ms (p99)."""
    arrivals = sorted(r["arrival"] for r in records)
    finishes = sorted(r["finish"] for r in records if r["finish"] is not None)
    gaps = [1000 * (arrivals[USERS + k] - finishes[k]) for k in range(min(len(arrivals) - USERS, len(finishes)))]
    return percentile(gaps, 99) if gaps else None


def _shown(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "—"


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return float(median(values)) if values else None


def _benchmark(plan: LoadPlan, level: str, samples: dict[tuple[str, str], list[dict[str, Any]]]) -> Benchmark:
    ours, peer = samples[("ours", level)], samples[("peer", level)]
    lag = _median(ours, "lag_p99_ms")
    what = f"{USERS} users (closed loop)" if level == "closed" else f"{plan.highest_rate:g} req/s (open loop)"
    figures = [
        Figure(
            name="schedule lag p99",
            unit="ms",
            ours=lag,
            peer=None,
            better="lower",
            target=f"≤ {LAG_BOUND_MS:g} ms (the lag bound)",
            met=lag is not None and lag <= LAG_BOUND_MS,
            note="sent minus planned, from the client's own records (the packet's lag)",
        ),
        Figure(
            name="client CPU per request",
            unit="ms",
            ours=_median(ours, "cpu_ms_per_request"),
            peer=_median(peer, "cpu_ms_per_request"),
            better="lower",
            note=f"{plan.max_tokens} tokens a request",
        ),
    ]
    if level == "closed":
        figures.insert(
            1,
            Figure(
                name="slot refill lag p99, server-seen",
                unit="ms",
                ours=_median(ours, "server_lag_p99_ms"),
                peer=_median(peer, "server_lag_p99_ms"),
                better="lower",
                note="a request's arrival minus the finish of the one whose slot it took",
            ),
        )
    return Benchmark(
        id=f"load.{level}",
        group="load",
        title=f"Load sweep client at {what}",
        peer=PEER_NAME,
        figures=figures,
        details={
            "requests": plan.requests,
            "max_tokens": plan.max_tokens,
            "server_ttft_s": plan.ttft_s,
            "server_itl_s": plan.itl_s,
            "rounds": plan.rounds,
            "failed": {"ours": sum(r["failed"] for r in ours), "peer": sum(r["failed"] for r in peer)},
            "ours_runs": ours,
            "peer_runs": peer,
        },
    )
