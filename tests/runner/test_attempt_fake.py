"""One attempt's measuring against the scripted server: canaries of a reasoning model, and cache
zero shown from /metrics where the server's usage has no prompt_tokens_details."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from catalog.checks.canaries import verdict
from catalog.checks.evidence import shows_cache_zero
from catalog.model.packet import CacheCheck, CanaryResult, PromptRow, ServerRun
from runner import attempt
from runner.attempt import AttemptInvalid, cache_check, canary_template_kwargs, run_canaries
from runner.client import new_http_client
from runner.metrics_scrape import VllmCounters
from runner.settings import MeasurementSettings
from testkit.fake_vllm.server import FakeVllm, Script
from testkit.fake_vllm.wire import chat_reply, sse, token_chunk, usage_chunk
from testkit.samples import canary_set, make_rows, strict_suite

TOKENS = 101  # the protocol's least completion
METRICS = """\
vllm:generation_tokens_total{{engine="0",model_name="demo"}} {generated}
vllm:prompt_tokens_total{{engine="0",model_name="demo"}} 100.0
vllm:prefix_cache_queries_total{{engine="0",model_name="demo"}} {queries}
vllm:prefix_cache_hits_total{{engine="0",model_name="demo"}} {hits}
vllm:external_prefix_cache_hits_total{{engine="0",model_name="demo"}} 7.0
"""


@pytest.fixture()
def fake() -> Iterator[FakeVllm]:
    with FakeVllm() as server:
        yield server


def settings() -> MeasurementSettings:
    return MeasurementSettings(strict_suite(), canary_set(), TOKENS, 1234, 60.0)


def canary_requests() -> int:
    return sum(c.repeats or 1 for c in canary_set().canaries)


def canaries_of(fake: FakeVllm, kwargs: dict[str, object] | None) -> list[CanaryResult]:
    async def run() -> list[CanaryResult]:
        async with new_http_client(max_in_flight=1) as http:
            return await run_canaries(fake.base_url, "demo", settings(), http, kwargs)

    return asyncio.run(run())


def test_thinking_reply_is_a_failed_canary_with_its_reasoning(fake: FakeVllm) -> None:
    """--reasoning-parser qwen3, thinking on: content null, the text in `reasoning`. The attempt
    goes on; every canary fails saying so, and verify judges the same from the record."""
    for _ in range(canary_requests()):
        fake.add(Script(chat_reply=chat_reply(None, "<think>let me see, 37 times 43")))
    results = canaries_of(fake, canary_template_kwargs([]))
    assert fake.requests[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert [r.passed for r in results] == [False] * len(canary_set().canaries)
    for result in results:
        assert set(result.outputs) == {""}
        assert result.reasoning == ["<think>let me see, 37 times 43"] * len(result.outputs)
        assert "no content" in result.detail and "reasoning" in result.detail
        canary = next(c for c in canary_set().canaries if c.id == result.id)
        assert verdict(canary, result.outputs, result.reasoning) == (result.passed, result.detail)


def test_empty_answers_fail_even_the_repeat_canary(fake: FakeVllm) -> None:
    """Eight null answers are "one output" to a naive repeat check: never a pass."""
    for _ in range(canary_requests()):
        fake.add(Script(chat_reply=chat_reply(None)))
    repeat = next(r for r in canaries_of(fake, None) if r.id == "repeat-8")
    assert not repeat.passed and repeat.detail == "answer 1 of 8 is empty"
    assert repeat.reasoning is None


def test_answers_without_reasoning_record_no_reasoning_field() -> None:
    """Packets written before the field existed keep their bytes: absent is left out."""
    result = CanaryResult(id="multiply", outputs=["1591"], passed=True, detail="all expected text present")
    assert "reasoning" not in result.model_dump(mode="json")
    with pytest.raises(ValueError, match="one entry per output"):
        CanaryResult(id="multiply", outputs=["1591"], passed=True, reasoning=["a", "b"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], {"enable_thinking": False}),
        (["--default-chat-template-kwargs", '{"enable_thinking": false}'], {"enable_thinking": False}),
        (['--default-chat-template-kwargs={"enable_thinking": true}'], {"enable_thinking": True}),
        (
            ["--default-chat-template-kwargs", '{"reasoning_effort": "low"}', "--max-model-len", "8192"],
            {"enable_thinking": False, "reasoning_effort": "low"},
        ),
    ],
)
def test_canaries_honour_the_recipe_template_kwargs(args: list[str], expected: dict[str, object]) -> None:
    assert canary_template_kwargs(args) == expected


def test_template_kwargs_that_are_not_an_object_are_refused() -> None:
    with pytest.raises(AttemptInvalid, match="not a JSON object"):
        canary_template_kwargs(["--default-chat-template-kwargs", "[1]"])


def _rows(cached: int | None) -> list[PromptRow]:
    return [row.model_copy(update={"cached_tokens": cached}) for row in make_rows(ms_per_token=20.0)]


def _delta(hits: float | None, queries: float | None = 1200.0) -> VllmCounters:
    return VllmCounters(
        generation_tokens=1212, prompt_tokens=1200, prefix_cache_queries=queries, prefix_cache_hits=hits
    )


def test_cache_zero_from_usage_when_every_row_reports_it() -> None:
    assert cache_check(_rows(0), _delta(0)) == CacheCheck(
        source="usage", prefix_cache_queries=1200, prefix_cache_hits=0
    )
    assert cache_check(_rows(0), _delta(None, None)).source == "usage"


def test_missing_prompt_tokens_details_is_unknown_and_proven_by_the_counters() -> None:
    assert cache_check(_rows(None), _delta(0)) == CacheCheck(
        source="metrics", prefix_cache_queries=1200, prefix_cache_hits=0
    )


def test_a_leak_is_refused_whichever_witness_shows_it() -> None:
    with pytest.raises(AttemptInvalid, match="prefix caching leaked"):
        cache_check(_rows(3), _delta(0))
    with pytest.raises(AttemptInvalid, match=r"prefix_cache_hits rose by 128 .*leaked"):
        cache_check(_rows(None), _delta(128))
    with pytest.raises(AttemptInvalid, match=r"cannot be shown.*no vllm:prefix_cache_hits"):
        cache_check(_rows(None), _delta(None, None))


def test_verify_accepts_cache_zero_shown_by_the_counters_only() -> None:
    run = ServerRun(
        label="A", rows=_rows(None), cache_zero=True, cache_check=CacheCheck(source="metrics", prefix_cache_hits=0)
    )
    assert shows_cache_zero(run)
    assert not shows_cache_zero(run.model_copy(update={"cache_check": None}))
    assert not shows_cache_zero(
        run.model_copy(update={"cache_check": CacheCheck(source="metrics", prefix_cache_hits=2)})
    )
    with pytest.raises(ValueError, match="prefix_cache_hits"):
        CacheCheck(source="metrics")


def _completion(prompt_index: int) -> Script:
    ids = [(prompt_index * 31 + i) % 5000 for i in range(TOKENS)]
    chunks = [sse(token_chunk([token], "x")) for token in ids]
    chunks.append(sse(usage_chunk(prompt_tokens=40, completion_tokens=TOKENS, cached_tokens=None)))
    chunks.append(sse("[DONE]"))
    return Script(chunks=chunks)


def test_an_older_vllm_attempt_records_how_cache_zero_was_shown(fake: FakeVllm) -> None:
    """No prompt_tokens_details on any row (vLLM before PR #44383): the attempt is not refused as a
    leak; /metrics before and after the suite show no hit, and the record says that is the proof."""
    for _ in range(canary_requests()):
        fake.add(Script(chat_reply=chat_reply('1591 {"name": "x"}')))
    suite = strict_suite()
    for index, _ in enumerate(suite.prompts):
        fake.add(_completion(index))
    fake.metrics_texts.extend(
        [
            METRICS.format(generated=0.0, queries=50.0, hits=0.0),
            METRICS.format(generated=1212.0, queries=530.0, hits=0.0),
        ]
    )
    arm = SimpleNamespace(id="tp1-oracle", command=SimpleNamespace(model_id="demo", args=[]))
    run, _ = asyncio.run(attempt._measure(fake.base_url, arm, "A", settings(), lambda _: None))  # type: ignore[arg-type]
    assert all(row.cached_tokens is None for row in run.rows)
    assert run.cache_zero is True
    assert run.cache_check == CacheCheck(source="metrics", prefix_cache_queries=480, prefix_cache_hits=0)
    assert shows_cache_zero(run)


def _streamed(prompt_index: int, burst: bool) -> Script:
    """A completion a token a write, 1 ms apart; `burst`: tokens 1..100 in one write after the
    first, as a server (or a client) that fell behind delivers them."""
    script = _completion(prompt_index)
    if not burst:
        return Script(chunks=script.chunks, pause_s=0.001)
    first, *rest = script.chunks
    return Script(chunks=[first, b"".join(rest)], pause_s=0.001)


def test_a_server_without_a_decode_rate_is_said_with_the_prompt_and_why(fake: FakeVllm) -> None:
    """Tokens 1..100 of one prompt reached the client at once: that prompt's line says why it has
    no rate, and a line at the end says the server has none (a long run's reader looks there)."""
    for _ in range(canary_requests()):
        fake.add(Script(chat_reply=chat_reply('1591 {"name": "x"}')))
    suite = strict_suite()
    for index, _ in enumerate(suite.prompts):
        fake.add(_streamed(index, burst=index == 3))
    generated = float(TOKENS * len(suite.prompts))
    fake.metrics_texts.extend(
        [
            METRICS.format(generated=0.0, queries=0.0, hits=0.0),
            METRICS.format(generated=generated, queries=480.0, hits=0.0),
        ]
    )
    arm = SimpleNamespace(id="tp1-oracle", command=SimpleNamespace(model_id="demo", args=[]))
    said: list[str] = []
    run, _ = asyncio.run(attempt._measure(fake.base_url, arm, "A", settings(), said.append))  # type: ignore[arg-type]
    assert run.decode_tok_s is None
    prompt_line = next(line for line in said if line.startswith(f"tp1-oracle server A: prompt 4/{len(suite.prompts)}"))
    assert "no rate: tokens 1..100 read in bursts (" in prompt_line
    (summary,) = [line for line in said if "NO DECODE RATE" in line]
    assert summary.startswith("tp1-oracle server A: NO DECODE RATE: ") and "prompts give none (first: " in summary
    assert summary.endswith("a quieter host measures them")
