"""Real vLLM CPU servers serving the generated demo model, measured through our own client."""

from __future__ import annotations

import asyncio

import pytest

from catalog.checks.canaries import verdict
from catalog.model.packet import CanaryResult
from runner.attempt import cache_check, canary_template_kwargs, prompt_row, run_canaries
from runner.client import StreamResult, chat_completion, new_http_client, stream_completion
from runner.metrics_scrape import scrape_counters
from runner.server import VllmServer
from runner.settings import MeasurementSettings
from testkit.samples import canary_set, strict_suite

pytestmark = pytest.mark.e2e

PROMPT = "Write a short incident retrospective for a database outage, with action items."
MAX_TOKENS = 160  # enough for the protocol's 100-token decode window, short enough to be quick
SEED = 1234


def complete(server: VllmServer, prompt: str = PROMPT, max_tokens: int = MAX_TOKENS) -> StreamResult:
    model = server.served_models[0]
    return asyncio.run(stream_completion(server.base_url, model, prompt, max_tokens, SEED))


def test_streaming_completion_carries_one_time_per_token(plain_server: VllmServer) -> None:
    result = complete(plain_server)
    assert result.completion_tokens == MAX_TOKENS >= 100
    assert len(result.token_ids) == len(result.token_times_s) == MAX_TOKENS
    # One token per chunk, unless a loaded host makes the server coalesce steps.
    assert 0 < result.chunk_count <= MAX_TOKENS
    assert result.token_times_s == sorted(result.token_times_s)
    assert 0 < result.ttft_s == result.token_times_s[0] <= result.e2e_s
    assert result.finish_reason == "length"
    assert result.cached_tokens == 0
    assert result.prompt_token_ids is not None
    assert result.prompt_tokens == len(result.prompt_token_ids) > 5
    assert result.text.strip()


def test_repeated_request_gives_identical_token_ids(plain_server: VllmServer) -> None:
    first, second = complete(plain_server), complete(plain_server)
    assert first.token_ids == second.token_ids
    assert second.cached_tokens == 0  # prefix caching is off: nothing reused


def test_metrics_count_generated_tokens(plain_server: VllmServer) -> None:
    before = scrape_counters(plain_server.base_url)
    complete(plain_server, max_tokens=120)
    delta = scrape_counters(plain_server.base_url).minus(before)
    assert delta.generation_tokens == 120
    assert delta.prompt_tokens > 0
    assert delta.spec_drafts is None  # no speculative decoding configured


def test_chat_completion_uses_the_chat_template(plain_server: VllmServer) -> None:
    model = plain_server.served_models[0]
    reply = asyncio.run(chat_completion(plain_server.base_url, model, "What is 6 * 7?", 24, SEED))
    again = asyncio.run(chat_completion(plain_server.base_url, model, "What is 6 * 7?", 24, SEED))
    assert reply.content and reply == again
    assert reply.reasoning is None  # no reasoning parser on this server


def test_ngram_speculation_matches_plain_output_and_reports_counters(
    plain_server: VllmServer, ngram_server: VllmServer
) -> None:
    oracle = complete(plain_server)
    before = scrape_counters(ngram_server.base_url)
    speculative = complete(ngram_server)
    delta = scrape_counters(ngram_server.base_url).minus(before)
    print(f"\n[e2e] ngram: {speculative.chunk_count} chunks for {MAX_TOKENS} tokens, {delta}")
    assert speculative.token_ids == oracle.token_ids
    # Served without --enable-prompt-tokens-details, like vLLM before PR #44383: cached_tokens is
    # unknown, and the prefix-cache counters over the request show the cache stayed cold.
    assert speculative.cached_tokens is None
    check = cache_check([prompt_row("p", "c", speculative)], delta)
    assert check.source == "metrics" and check.prefix_cache_hits == 0
    assert delta.generation_tokens == MAX_TOKENS
    assert delta.spec_drafts is not None and delta.spec_drafts > 0
    assert delta.spec_draft_tokens is not None and delta.spec_draft_tokens >= delta.spec_drafts
    assert delta.spec_accepted_tokens is not None
    assert sorted(delta.spec_accepted_per_position) == [0, 1, 2]
    assert sum(delta.spec_accepted_per_position.values()) == delta.spec_accepted_tokens
    if delta.spec_accepted_tokens > 0:
        assert speculative.chunk_count < MAX_TOKENS  # accepted drafts arrive in one chunk with their step


def _canaries(server: VllmServer, template_kwargs: dict[str, object] | None) -> list[CanaryResult]:
    settings = MeasurementSettings(strict_suite(), canary_set(), MAX_TOKENS, SEED, 60.0)

    async def run() -> list[CanaryResult]:
        async with new_http_client(max_in_flight=1) as http:
            return await run_canaries(server.base_url, server.served_models[0], settings, http, template_kwargs)

    return asyncio.run(run())


def test_canaries_of_a_reasoning_server(ngram_server: VllmServer) -> None:
    """--reasoning-parser qwen3: with thinking on (the parser's default) the tiny model never
    closes </think>, so the reply's content is null and its text is reasoning. The runner's
    canaries turn thinking off and get answers; left on, each canary fails, saying why, and
    verify judges the record the same way."""
    model = ngram_server.served_models[0]
    thinking = asyncio.run(chat_completion(ngram_server.base_url, model, "What is 6 * 7?", 24, SEED))
    assert thinking.content is None and thinking.reasoning

    answered = _canaries(ngram_server, canary_template_kwargs(["--reasoning-parser", "qwen3"]))
    assert all(result.reasoning is None for result in answered)
    assert all(output.strip() for result in answered for output in result.outputs)
    assert next(r for r in answered if r.id == "repeat-8").passed  # deterministic, so one output

    unanswered = _canaries(ngram_server, None)
    by_id = {canary.id: canary for canary in canary_set().canaries}
    for result in unanswered:
        assert not result.passed and "reasoning instead" in result.detail, result
        assert result.reasoning and all(result.reasoning)
        assert verdict(by_id[result.id], result.outputs, result.reasoning) == (result.passed, result.detail)
