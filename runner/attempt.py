"""One fresh server: start, canaries, strict suite with /metrics before and after, teardown.

The result is a ServerRun (the packet's own model) saved atomically beside the server log, so
an interrupted campaign resumes from the attempts that finished.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from time import perf_counter

import httpx

from catalog.checks.canaries import judge
from catalog.checks.energy import server_tokens
from catalog.errors import UserError
from catalog.files import write_file
from catalog.model.arrays import to_uint32
from catalog.model.metrics import (
    MIN_COMPLETION_TOKENS,
    decode_rate,
    no_rate_because,
    server_decode_rate,
    server_ttft_ms,
)
from catalog.model.packet import CacheCheck, CanaryResult, PromptRow, ServerFacts, ServerRun, SpecMetrics
from catalog.packets.canonical import pretty_json
from catalog.recipes.command_facts import command_facts
from catalog.recipes.compose import flag_groups, flag_name
from catalog.recipes.suite import Suite
from catalog.store.documents import load_file
from runner.client import ClientError, StreamResult, chat_completion, new_http_client, stream_completion
from runner.energy.meter import describe
from runner.metrics_scrape import MetricsError, VllmCounters, scrape_counters
from runner.plan import ArmPlan
from runner.runtime import Runtime
from runner.server import ServerError, VllmServer, find_free_port
from runner.server_facts import read_server_facts
from runner.settings import MeasurementSettings, Progress

TEMPLATE_KWARGS_FLAG = "--default-chat-template-kwargs"
# Canaries ask short questions with a few dozen tokens to answer in: a reasoning model that
# thinks first (Qwen3.5 with --reasoning-parser qwen3) never reaches the answer.
CANARY_TEMPLATE_KWARGS: dict[str, object] = {"enable_thinking": False}


class AttemptInvalid(Exception):
    """The server ran, but its answers break a protocol rule (short completion, cache hit...)."""


def attempt_paths(run_dir: Path, arm_id: str, label: str) -> tuple[Path, Path]:
    folder = run_dir / arm_id
    return folder / f"server-{label}.json", folder / f"server-{label}.log"


def finished_attempt(run_dir: Path, arm_id: str, label: str, progress: Progress | None = None) -> ServerRun | None:
    """The attempt's ServerRun if it finished. One recorded by an earlier runner (packet schema 1:
    times in milliseconds, no canary answers to judge again) cannot go into a packet now: that
    server is measured again."""
    result_path, _ = attempt_paths(run_dir, arm_id, label)
    if not result_path.exists():
        return None
    try:
        run = load_file(ServerRun, result_path)
    except UserError as error:
        if progress is not None:
            progress(
                f"{arm_id} server {label}: {result_path.name} is not a record this runner can use, measuring again "
                f"({error.field or 'record'}: {error.message})"
            )
        return None
    return run if run.status == "ok" else None


def run_attempt(
    arm: ArmPlan, label: str, runtime: Runtime, settings: MeasurementSettings, run_dir: Path, progress: Progress
) -> ServerRun:
    """Measure one fresh server; a failure is recorded (status failed, log tail) and re-raised."""
    result_path, log_path = attempt_paths(run_dir, arm.id, label)
    server_dir = result_path.parent / f"server-{label}"
    if server_dir.exists():
        shutil.rmtree(server_dir)  # a retried attempt gets an empty compile cache again
    port = find_free_port()
    runtime.prepare(server_dir)
    server = VllmServer(
        runtime.argv(arm.command, port, attempt=f"{arm.id}-{label}", server_dir=server_dir),
        port=port,
        run_dir=server_dir,
        env={**arm.command.env, **runtime.server_env()},
        log_path=log_path,
        health_deadline_s=settings.health_deadline_s,
    )
    try:
        progress(f"{arm.id} server {label}: starting on port {port} (log {log_path})")
        with server:
            progress(f"{arm.id} server {label}: ready after {server.startup_s or 0:.0f} s")
            resolved = resolved_facts(server.base_url, log_path, arm)
            run, (started, ended) = asyncio.run(_measure(server.base_url, arm, label, settings, progress))
            energy = None
            if settings.energy is not None:
                energy = settings.energy.window(started, ended, arm_cards(arm), server_tokens(run))
                progress(f"{arm.id} server {label}: {describe(energy)}")
            run = run.model_copy(
                update={
                    "startup_s": server.startup_s,
                    "log": log_path.name,
                    "server_version": server.version,
                    "energy": energy,
                    "resolved": resolved,
                }
            )
    except (ServerError, ClientError, MetricsError, AttemptInvalid) as error:
        tail = getattr(error, "log_tail", "") or server.log_tail()
        failed = ServerRun(label=label, status="failed", error=f"{error}\n{tail}".strip(), log=log_path.name)
        write_file(result_path, pretty_json(failed.model_dump(mode="json")))
        raise
    write_file(result_path, pretty_json(run.model_dump(mode="json")))
    return run


def arm_cards(arm: ArmPlan) -> int:
    """The cards one server of the arm spans, as vLLM reads the command (-tp 2 too; compose writes TP
    above 1): pipeline and data parallel sizes count too, though verification refuses them above 1."""
    return command_facts(arm.command.argv()).cards


async def _measure(
    base_url: str, arm: ArmPlan, label: str, settings: MeasurementSettings, progress: Progress
) -> tuple[ServerRun, tuple[float, float]]:
    """The server's run, and the strict suite's window on the client's clock (first request sent
    to last token received)."""
    model = arm.command.model_id
    async with new_http_client(max_in_flight=1) as http:
        canaries = await run_canaries(base_url, model, settings, http, canary_template_kwargs(arm.command.args))
        failed = [c for c in canaries if not c.passed]
        if failed:
            progress(f"{arm.id} server {label}: canary {failed[0].id} failed: {failed[0].detail}")
        before = scrape_counters(base_url)
        rows: list[PromptRow] = []
        silent: list[tuple[str, str]] = []  # (prompt id, why it gives no rate)
        class_of = settings.suite.class_of()
        started = perf_counter()
        for index, prompt in enumerate(settings.suite.prompts, start=1):
            result = await stream_completion(
                base_url, model, prompt.prompt, settings.max_tokens, settings.seed, http=http
            )
            row = prompt_row(prompt.id, class_of[prompt.id], result)
            rows.append(row)
            row_rate = decode_rate(row.token_times_us)
            if row_rate is None:
                silent.append((prompt.id, no_rate_because(row.token_times_us) or ""))
            rate = f"{row_rate:.1f} tok/s" if row_rate is not None else f"no rate: {silent[-1][1]}"
            progress(
                f"{arm.id} server {label}: prompt {index}/{len(settings.suite.prompts)}, "
                f"{row.completion_tokens} tokens, {rate}"
            )
        ended = perf_counter()
        _check_rows(rows, settings.suite)  # a completion too short refuses the attempt in its own words
        if silent:  # said once more at the end, where a reader of a long run looks
            progress(
                f"{arm.id} server {label}: NO DECODE RATE: {len(silent)} of {len(rows)} prompts give none "
                f"(first: {silent[0][0]!r}, {silent[0][1]}), so the server has no rate; "
                "tokens read in bursts reached the client late (it or vLLM's API process fell behind the stream): "
                "a quieter host measures them"
            )
        after = scrape_counters(base_url)
    delta = after.minus(before)
    cache = cache_check(rows, delta)
    run = ServerRun(
        label=label,
        decode_tok_s=server_decode_rate(rows),
        ttft_ms=server_ttft_ms(rows),
        rows=rows,
        canaries=canaries,
        cache_zero=True,
        cache_check=cache,
        spec_metrics=spec_metrics(delta),
    )
    return run, (started, ended)


def prompt_row(prompt_id: str, class_id: str, result: StreamResult) -> PromptRow:
    return PromptRow(
        prompt_id=prompt_id,
        class_id=class_id,
        token_ids=to_uint32(result.token_ids),
        token_times_us=to_uint32(round(t * 1e6) for t in result.token_times_s),
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cached_tokens=result.cached_tokens,
        finish_reason=result.finish_reason,
    )


def resolved_facts(base_url: str, log_path: Path, arm: ArmPlan) -> ServerFacts | None:
    """What vLLM resolved for this server (runner/server_facts.py); an arm switch the server said
    it does not know makes the attempt invalid: the arm would be recorded as what it did not run."""
    facts = read_server_facts(base_url, log_path, arm.command.env)
    ignored = [name for name in (facts.unknown_env if facts else []) if name in arm.command.env]
    if ignored:
        raise AttemptInvalid(
            f'the server ignored {", ".join(ignored)}: it logged "Unknown vLLM environment variable detected"'
        )
    return facts


def _check_rows(rows: list[PromptRow], suite: Suite) -> None:
    short = [r.prompt_id for r in rows if r.completion_tokens < MIN_COMPLETION_TOKENS]
    if short:
        raise AttemptInvalid(f"completions under {MIN_COMPLETION_TOKENS} tokens: {', '.join(short)}")
    missing = {c.id for c in suite.classes} - {r.class_id for r in rows}
    if missing:
        raise AttemptInvalid(f"no completion for class {sorted(missing)[0]!r}")


def cache_check(rows: list[PromptRow], suite_delta: VllmCounters) -> CacheCheck:
    """Show that no prompt token of the suite came from the prefix cache, or refuse the attempt.

    Every row's usage.prompt_tokens_details.cached_tokens is the first witness. vLLM before the
    fix for issue #44377 left prompt_tokens_details out when nothing was cached, so a row without it says
    "unknown", not "leaked": there the vllm:prefix_cache_hits counter, over the suite, must not
    have moved."""
    cached = [r.prompt_id for r in rows if r.cached_tokens]
    if cached:
        raise AttemptInvalid(f"cached_tokens is not 0 (prefix caching leaked) on: {', '.join(cached)}")
    queries, hits = suite_delta.prefix_cache_queries, suite_delta.prefix_cache_hits
    counted = {
        "prefix_cache_queries": None if queries is None else round(queries),
        "prefix_cache_hits": None if hits is None else round(hits),
    }
    if hits is not None and hits != 0:
        raise AttemptInvalid(f"vllm:prefix_cache_hits rose by {hits:g} over the suite (prefix caching leaked)")
    unknown = [r.prompt_id for r in rows if r.cached_tokens is None]
    if not unknown:
        return CacheCheck(source="usage", **counted)
    if hits is None:
        raise AttemptInvalid(
            f"cache zero cannot be shown: the usage of {', '.join(unknown)} has no prompt_tokens_details "
            "and /metrics has no vllm:prefix_cache_hits counter"
        )
    return CacheCheck(source="metrics", **counted)


def canary_template_kwargs(args: list[str]) -> dict[str, object]:
    """What canary requests pass as chat_template_kwargs: thinking off, unless the arm's own
    --default-chat-template-kwargs (the last one, as vLLM reads it) says otherwise; every key
    the recipe sets is sent as the recipe sets it."""
    recipe: dict[str, object] = {}
    for group in flag_groups(args):
        if flag_name(group[0]) != TEMPLATE_KWARGS_FLAG:
            continue
        text = group[0].split("=", 1)[1] if "=" in group[0] else (group[1] if len(group) > 1 else "")
        try:
            value = json.loads(text)
        except ValueError:
            raise AttemptInvalid(f"{TEMPLATE_KWARGS_FLAG} is not JSON: {text[:200]!r}") from None
        if not isinstance(value, dict):
            raise AttemptInvalid(f"{TEMPLATE_KWARGS_FLAG} is not a JSON object: {text[:200]!r}")
        recipe = value
    return {**CANARY_TEMPLATE_KWARGS, **recipe}


async def run_canaries(
    base_url: str,
    model: str,
    settings: MeasurementSettings,
    http: httpx.AsyncClient,
    template_kwargs: dict[str, object] | None = None,
) -> list[CanaryResult]:
    """Every canary, judged as answered. A null content is recorded as "" and fails its canary,
    with the reasoning text the server returned instead (when it returned any)."""
    results = []
    for canary in settings.canaries.canaries:
        runs = canary.repeats or 1
        replies = [
            await chat_completion(
                base_url,
                model,
                canary.prompt,
                canary.max_tokens,
                settings.seed,
                http=http,
                chat_template_kwargs=template_kwargs,
            )
            for _ in range(runs)
        ]
        outputs = [reply.content or "" for reply in replies]
        reasoning = [reply.reasoning or "" for reply in replies]
        results.append(judge(canary, outputs, reasoning if any(reasoning) else None))
    return results


def spec_metrics(delta: VllmCounters) -> SpecMetrics | None:
    if delta.spec_drafts is None:
        return None
    return SpecMetrics(
        drafts=round(delta.spec_drafts),
        draft_tokens=round(delta.spec_draft_tokens or 0),
        accepted_tokens=round(delta.spec_accepted_tokens or 0),
        accepted_per_position=[round(v) for _, v in sorted(delta.spec_accepted_per_position.items())],
    )
