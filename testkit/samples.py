"""Synthetic but internally consistent packet parts, for tests and the builder benchmark.

Every stored figure is computed by catalog.model.metrics from the rows and every canary verdict by
catalog.checks.canaries from its answers, so `catalog.checks.evidence` re-derives the same values and
`load_catalog` accepts the sealed packet exactly as it accepts the runner's. Nothing here is
ever published: `seal` these parts with a throwaway key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from catalog.checks.canaries import judge
from catalog.model.arrays import to_uint32
from catalog.model.load_sweep import (
    LoadLevel,
    LoadRequest,
    LoadServerMetrics,
    LoadSweep,
    Percentiles,
    Slo,
    poisson_offsets_ms,
)
from catalog.model.metrics import compare_rows, server_decode_rate, server_ttft_ms
from catalog.model.packet import ArmParts, GateResult, Ladder, PacketParts, PromptRow, ServerRun
from catalog.recipes.suite import Canary, CanarySet, Suite
from catalog.store.documents import load_file

DATA = Path(__file__).resolve().parents[1] / "data"
N_TOKENS = 120  # over the 101 a decode rate needs
ORACLE_ARM = "tp1-mtp0"
SPEC_ARM = "tp1-mtp2"
SAME_SERVER = "the arm's second fresh server"


@cache
def strict_suite() -> Suite:
    return load_file(Suite, DATA / "suites" / "strict-v1.json")


@cache
def canary_set() -> CanarySet:
    return load_file(CanarySet, DATA / "suites" / "canaries-v1.json")


def token_ids(prompt_index: int, n: int = N_TOKENS) -> list[int]:
    return [(prompt_index * 7919 + i * 31) % 151_000 for i in range(n)]


def _jitter_us(ms_per_token: float, prompt_index: int, step: int) -> int:
    """0 to 199 µs of lateness per chunk, fixed by the server's pace, the prompt and the step: real
    token times are never exact multiples of one step (catalog/checks/independence.py refuses two
    servers whose times are one line apart), and a test's rows stay the same on every run."""
    x = ((round(ms_per_token * 1000) * 1_000_003 + prompt_index) * 1_000_033 + step) & 0xFFFFFFFF
    x = ((x ^ (x >> 13)) * 0x5BD1E995) & 0xFFFFFFFF  # a murmur-style mix: no two paces share a pattern
    return (x ^ (x >> 15)) % 200


def make_row(
    prompt_index: int,
    *,
    ms_per_token: float,
    ttft_ms: float = 40.0,
    chunk: int = 1,
    ids: Sequence[int] | None = None,
    cached_tokens: int = 0,
) -> PromptRow:
    """One strict-suite prompt. With `chunk` > 1 tokens arrive `chunk` at a time (speculative
    decoding): tokens of one chunk share an arrival time, as they do on the wire."""
    prompt = strict_suite().prompts[prompt_index]
    tokens = list(ids) if ids is not None else token_ids(prompt_index)
    steps = [(i + chunk - 1) // chunk for i in range(len(tokens))]
    times = [
        round((ttft_ms + step * chunk * ms_per_token) * 1000) + _jitter_us(ms_per_token, prompt_index, step)
        for step in steps
    ]
    return PromptRow(
        prompt_id=prompt.id,
        class_id=prompt.class_,
        token_ids=to_uint32(tokens),
        token_times_us=to_uint32(times),
        prompt_tokens=200 + 10 * prompt_index,
        completion_tokens=len(tokens),
        cached_tokens=cached_tokens,
        finish_reason="length",
    )


def make_rows(
    *,
    ms_per_token: float,
    chunk: int = 1,
    diverge: Mapping[int, int] | None = None,
    ttft_ms: float = 40.0,
    n_tokens: int = N_TOKENS,
) -> list[PromptRow]:
    """Twelve rows; `diverge` maps a prompt index to the token index where this server's output
    differs from the shared reference tokens."""
    rows = []
    for index in range(len(strict_suite().prompts)):
        ids = token_ids(index, n_tokens)
        if diverge and index in diverge:
            ids[diverge[index]] += 1
        # a per-prompt spread so the class-balanced median is not trivial
        rows.append(
            make_row(index, ms_per_token=ms_per_token + 0.25 * index, chunk=chunk, ids=ids, ttft_ms=ttft_ms + index)
        )
    return rows


def canary_answers(canary: Canary, passing: bool) -> list[str]:
    """Answers a model could give: right ones, or wrong ones of the usual kind."""
    if canary.kind == "repeat":
        runs = canary.repeats or 1
        return ["A checksum detects corrupted data."] * runs if passing else ["yes", *["no"] * (runs - 1)]
    if canary.kind == "contains":
        return [" ".join(canary.expect or [])] if passing else ["I cannot help with that."]
    keys = {"string": "box", "integer": 6, "number": 1.5, "array": ["blue"], "object": {}, "boolean": True}
    if not passing:
        return ["Sure! Here is the object you asked for."]
    return [json.dumps({key: keys[kind] for key, kind in (canary.expect_keys or {}).items()})]


def make_server(label: str, rows: list[PromptRow], *, canaries_pass: bool = True) -> ServerRun:
    return ServerRun(
        label=label,
        status="ok",
        decode_tok_s=server_decode_rate(rows),
        ttft_ms=server_ttft_ms(rows),
        rows=rows,
        canaries=[judge(c, canary_answers(c, canaries_pass)) for c in canary_set().canaries],
        cache_zero=all(row.cached_tokens == 0 for row in rows),
        startup_s=61.5,
    )


@dataclass(frozen=True)
class PlannedArm:
    """An arm's id, label and ArmConfig fields (over make_arm's defaults), as a plan records them."""

    id: str
    label: str
    config: Mapping[str, Any]


def arm_argv(model: str, tp: int, method: str | None, depth: int, *head: str) -> list[str]:
    """`vllm serve MODEL` with `head` (the recipe's own flags), the card count, the protocol's flags
    and the speculative config of an arm at `depth`."""
    argv = ["vllm", "serve", model, *head]
    if tp > 1:
        argv += ["--tensor-parallel-size", str(tp)]
    argv += ["--no-enable-prefix-caching", "--max-num-seqs", "1"]
    if depth:
        argv += ["--speculative-config", json.dumps({"method": method, "num_speculative_tokens": depth})]
    return argv


def make_arm(
    arm_id: str,
    label: str,
    *,
    servers: list[ServerRun],
    gates: list[GateResult],
    tp: int = 1,
    spec_depth: int = 0,
    spec_method: str = "mtp",
    config: Mapping[str, Any] | None = None,
    withheld_reason: str | None = None,
    model: str = "Qwen/Qwen3.5-9B",
) -> ArmParts:
    """An arm's parts serving `model`; `config` replaces fields of the default arm config (argv, env,
    ...). The default argv states the arm's own card count and speculative config, as a recorded
    command does (catalog/checks/commands.py holds it to them)."""
    return ArmParts.model_validate(
        {
            "id": arm_id,
            "label": label,
            "config": {
                "tensor_parallel_size": tp,
                "spec_method": spec_method if spec_depth else None,
                "spec_depth": spec_depth,
                "argv": arm_argv(model, tp, spec_method if spec_depth else None, spec_depth),
                "env": {},
                **(config or {}),
            },
            "servers": servers,
            "gates": gates,
            "withheld_reason": withheld_reason,
        }
    )


def identity(*, slug: str = "qwen3.5-9b", variant: str = "default", hardware: str = "arc_pro_b70") -> dict[str, Any]:
    return {
        "model": {
            "slug": slug,
            "variant": variant,
            "repo": "Qwen/Qwen3.5-9B",
            "revision": "0123456789abcdef0123456789abcdef01234567",
            "quantization": "bf16",
            "quantization_label": "BF16",
            "weight_bytes": 19_300_000_000,
        },
        "runtime": {"platform": "xpu", "version": "0.17.1", "label": "vLLM 0.17.1 XPU"},
        "host": {"hardware": hardware, "card_count": 1, "boot_id": "4f0c2b1e-boot"},
    }


def workload() -> dict[str, Any]:
    return {
        "suite_id": "strict-v1",
        "suite_sha256": strict_suite().sha256,
        "canary_set_id": "canaries-v1",
        "canary_set_sha256": canary_set().sha256,
        "max_tokens": 512,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 1234,
    }


def measured_parts(
    *,
    spec: bool = True,
    g3_diverges: bool = False,
    title: str = "Qwen3.5-9B BF16 on one Arc Pro B70",
    ms_per_token: float = 20.0,
    n_tokens: int = N_TOKENS,
    identity_overrides: Mapping[str, Any] | None = None,
    planned: Sequence[PlannedArm] | None = None,
    **identity_kw: str,
) -> PacketParts:
    """A measured campaign: an oracle arm (two fresh servers, G1) and, with `spec`, an MTP arm
    (two servers, G2 between them and G3 of each against the oracle). With `g3_diverges`, the
    speculative server A drifts on one prompt: G2 and G3-A fail and that arm is withheld.
    `planned`: the oracle's and the speculative arm's id, label and config as a runner's plan records
    them (bench/catalog_gen.py passes runner.plan's for its recipe); by default Qwen3.5's MTP pair."""
    ident = identity(**identity_kw)
    for part, values in (identity_overrides or {}).items():
        ident[part] = {**ident[part], **values}
    model = ident["model"]["repo"]
    oracle_plan, spec_plan = planned or (
        PlannedArm(ORACLE_ARM, "1 card, no speculative decoding", {}),
        PlannedArm(SPEC_ARM, "1 card, MTP depth 2", {"spec_depth": 2}),
    )
    oracle_a = make_rows(ms_per_token=ms_per_token, n_tokens=n_tokens)
    oracle_b = make_rows(ms_per_token=ms_per_token + 0.05, n_tokens=n_tokens)
    arms = [
        make_arm(
            oracle_plan.id,
            oracle_plan.label,
            servers=[make_server("A", oracle_a), make_server("B", oracle_b)],
            gates=[compare_rows("G1", SAME_SERVER, oracle_a, oracle_b)],
            model=model,
            config=oracle_plan.config,
        )
    ]
    if spec:
        depth = int(spec_plan.config.get("spec_depth", 2))
        drift = {4: 57} if g3_diverges else None
        chunk = depth + 1  # every draft accepted: the drafts and the target's own token arrive together
        spec_a = make_rows(ms_per_token=ms_per_token * 0.6, chunk=chunk, diverge=drift, n_tokens=n_tokens)
        spec_b = make_rows(ms_per_token=ms_per_token * 0.6 + 0.05, chunk=chunk, n_tokens=n_tokens)
        gates = [
            compare_rows("G2", SAME_SERVER, spec_a, spec_b),
            compare_rows("G3", oracle_plan.id, spec_a, oracle_a, server="A"),
            compare_rows("G3", oracle_plan.id, spec_b, oracle_a, server="B"),
        ]
        servers = [make_server("A", spec_a), make_server("B", spec_b)]
        arms.append(
            make_arm(
                spec_plan.id,
                spec_plan.label,
                servers=servers,
                gates=gates,
                spec_depth=depth,
                model=model,
                config=spec_plan.config,
            )
        )
    return PacketParts.model_validate(
        {
            "title": title,
            "created": "2026-11-30T10:15:00Z",
            "provenance": {"kind": "measured", "tool": "runner 0.1.0"},
            "identity": ident,
            "workload": workload(),
            "arms": arms,
        }
    )


def published_arm(
    arm_id: str,
    values: Sequence[float],
    *,
    tp: int = 1,
    spec_depth: int = 0,
    gates: Sequence[tuple[str, int | None, int, bool]] = (),
    against: str = ORACLE_ARM,
) -> ArmParts:
    """An arm carrying only published values (no rows); gates as (gate, exact, total, passed)."""
    servers = [ServerRun(label=chr(ord("A") + i), decode_tok_s=v) for i, v in enumerate(values)]
    gate_results = [
        GateResult(
            gate=g,
            against=against if g == "G3" else SAME_SERVER,
            server="A" if g == "G3" else None,
            exact=e,
            total=t,
            passed=p,
        )
        for g, e, t, p in gates
    ]
    return make_arm(arm_id, f"arm {arm_id}", servers=servers, gates=gate_results, tp=tp, spec_depth=spec_depth)


def published_parts(
    arms: list[ArmParts], *, provenance: str = "imported", title: str = "imported campaign"
) -> PacketParts:
    """An imported or screened packet (source named) around `published_arm` arms."""
    return PacketParts.model_validate(
        {
            "title": title,
            "provenance": {
                "kind": provenance,
                "source": {
                    "name": "reference catalog",
                    "url": "https://example.org/r",
                    "published": "2026-11-20",
                    "retrieved": "2026-11-21",
                },
            },
            "identity": identity(),
            "workload": {"suite_id": "strict-v1", "max_tokens": 512},
            "arms": arms,
        }
    )


LOAD_USERS = (1, 2, 4, 8, 16, 32)
LOAD_RATES = (2.0, 8.0)
LOAD_SLO = Slo(ttft_ms=500.0, tpot_ms=50.0)
LOAD_OUTPUT_TOKENS = 120
DIVERGES_AT = 57
LATE_MS = 25.0  # how late a lagging level's client sends: beyond LAG_BOUND_MS


def _load_request(
    index: int, *, planned_ms: float, lag_ms: float, ttft_ms: float, tpot_ms: float, diverges: bool, checked: bool
) -> LoadRequest:
    prompts = strict_suite().prompts
    spread = 1.0 + 0.04 * (index % 5)  # requests of a level differ a little, as real ones do
    ttft, tpot = ttft_ms * spread, tpot_ms * spread
    return LoadRequest(
        prompt_id=prompts[index % len(prompts)].id,
        planned_ms=round(planned_ms, 3),
        sent_ms=round(planned_ms + lag_ms, 3),
        ttft_ms=round(ttft, 3),
        e2e_ms=round(ttft + (LOAD_OUTPUT_TOKENS - 1) * tpot, 3),
        output_tokens=LOAD_OUTPUT_TOKENS,
        tpot_ms=round(tpot, 3),
        identical_to_oracle=not diverges if checked else None,
        first_divergence=DIVERGES_AT if diverges else None,
    )


def _load_level(
    label: str,
    plans: list[tuple[float, float]],
    *,
    in_flight: float,
    ms_per_token: float,
    diverging: int,
    lagging: bool,
    users: int | None = None,
    rate_rps: float | None = None,
    checked: bool = True,
) -> LoadLevel:
    """A level whose latencies grow with the requests in flight: TTFT queues behind the batch,
    each decode step slows as the batch reads more KV cache."""
    tpot = ms_per_token * (1.0 + 0.05 * (in_flight - 1))
    ttft = 40.0 + 12.0 * (in_flight - 1)
    requests, finished = [], 0.0
    free_at = [0.0] * (users or 0)  # a closed loop's user sends again when its last request finished
    for i, (planned, _) in enumerate(plans):
        if users:
            planned = free_at[i % users]
        lag = LATE_MS if lagging and i % 2 else 0.2
        request = _load_request(
            i, planned_ms=planned, lag_ms=lag, ttft_ms=ttft, tpot_ms=tpot, diverges=i < diverging, checked=checked
        )
        requests.append(request)
        finished = max(finished, request.sent_ms + (request.e2e_ms or 0.0))
        if users:
            free_at[i % users] = request.sent_ms + (request.e2e_ms or 0.0)
    return LoadLevel(
        mode="closed" if users else "open",
        users=users,
        rate_rps=rate_rps,
        duration_s=round(finished / 1000.0, 3),
        client_cpu_s=round(0.002 * len(plans) * (2.0 if lagging else 1.0), 3),
        itl_ms=Percentiles(p50_ms=round(tpot, 3), p90_ms=round(tpot * 1.3, 3), p99_ms=round(tpot * 2.1, 3)),
        requests=requests,
        server=LoadServerMetrics(
            peak_running=float(min(in_flight, 64)),
            peak_waiting=0.0,
            peak_kv_cache_usage=round(min(1.0, 0.015 * in_flight), 4),
            preemptions=0,
        ),
    )


def _closed_plans(users: int, count: int, ms_per_request: float) -> list[tuple[float, float]]:
    """A first guess of each request's due time (request i belongs to user i % users); _load_level
    moves each to when its user's previous request finished."""
    return [((i // users) * ms_per_request, 0.0) for i in range(count)]


def make_load_sweep(
    *,
    ms_per_token: float = 30.0,
    users: Sequence[int] = LOAD_USERS,
    rates: Sequence[float] = LOAD_RATES,
    requests_per_level: int = 24,
    diverge: Mapping[str, int] | None = None,
    lagging: Sequence[str] = (),
    seed: int = 7,
    slo: Slo = LOAD_SLO,
    checked: bool = True,
) -> LoadSweep:
    """A load sweep whose figures behave as a real card's: aggregate tok/s rises with users while
    each user's rate falls. `diverge` maps a level label ("8 users", "2 req/s") to how many of its
    requests differ from the oracle; levels in `lagging` have a client later than the lag bound.
    Without `checked` no output was compared with the oracle (an imported curve's)."""
    levels = []
    for n in users:
        e2e = 40.0 + 12.0 * (n - 1) + (LOAD_OUTPUT_TOKENS - 1) * ms_per_token * (1.0 + 0.05 * (n - 1))
        label = f"{n} users"
        levels.append(
            _load_level(
                label,
                _closed_plans(n, requests_per_level, e2e * 1.1),
                in_flight=float(n),
                ms_per_token=ms_per_token,
                diverging=(diverge or {}).get(label, 0),
                lagging=label in lagging,
                users=n,
                checked=checked,
            )
        )
    for rate in rates:
        single = 40.0 + (LOAD_OUTPUT_TOKENS - 1) * ms_per_token
        in_flight = max(1.0, rate * single / 1000.0)  # Little's law at the single-stream latency
        label = f"{rate:g} req/s"
        offsets = poisson_offsets_ms(rate, requests_per_level, seed)
        levels.append(
            _load_level(
                label,
                [(o, 0.0) for o in offsets],
                in_flight=in_flight,
                ms_per_token=ms_per_token,
                diverging=(diverge or {}).get(label, 0),
                lagging=label in lagging,
                rate_rps=rate,
                checked=checked,
            )
        )
    return LoadSweep(seed=seed, requests_per_level=requests_per_level, slo=slo, levels=levels)


def with_load(parts: PacketParts, sweeps: Mapping[str, LoadSweep]) -> PacketParts:
    """`parts` with a load ladder per arm id in `sweeps`."""
    ladders = [*parts.ladders, *(Ladder(arm=arm, kind="load", load=sweep) for arm, sweep in sweeps.items())]
    return parts.model_copy(update={"ladders": ladders})
