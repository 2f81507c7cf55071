"""The measuring client against a scripted local server: parsing, timing and failure paths."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from runner.client import (
    ChatReply,
    ClientError,
    StreamResult,
    chat_completion,
    new_http_client,
    stream_completion,
)
from runner.metrics_scrape import scrape_counters
from testkit.fake_vllm.server import FakeVllm, Script
from testkit.fake_vllm.wire import chat_reply, sse, token_chunk, usage_chunk


@pytest.fixture()
def fake() -> Iterator[FakeVllm]:
    with FakeVllm() as server:
        yield server


def run_stream(server: FakeVllm, max_tokens: int = 16) -> StreamResult:
    return asyncio.run(stream_completion(server.base_url, "demo", "hi", max_tokens, seed=7))


def good_chunks() -> list[bytes]:
    """Five tokens in three chunks (one single, one triple, one single) plus usage."""
    return [
        sse(token_chunk([11], "a", prompt_token_ids=[1, 2, 3])),
        sse(token_chunk([12, 13, 14], "bcd")),
        sse(token_chunk([15], "e", finish_reason="length")),
        sse(usage_chunk(prompt_tokens=3, completion_tokens=5)),
        sse("[DONE]"),
    ]


def test_multi_token_chunks_give_one_time_per_token(fake: FakeVllm) -> None:
    fake.add(Script(chunks=good_chunks(), pause_s=0.05))
    result = run_stream(fake)
    assert result.token_ids == [11, 12, 13, 14, 15]
    assert result.text == "abcde"
    assert len(result.token_times_s) == 5
    assert result.token_times_s[1] == result.token_times_s[2] == result.token_times_s[3]
    assert result.token_times_s[0] < result.token_times_s[1] < result.token_times_s[4]
    assert result.token_times_s[1] - result.token_times_s[0] >= 0.04
    assert result.ttft_s == result.token_times_s[0]
    assert result.e2e_s >= result.token_times_s[-1]
    assert result.chunk_count == 3
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (3, 5, 0)
    assert result.finish_reason == "length"
    assert result.prompt_token_ids == [1, 2, 3]


def test_request_asks_for_token_ids_usage_and_greedy(fake: FakeVllm) -> None:
    fake.add(Script(chunks=good_chunks()))
    run_stream(fake, max_tokens=512)
    sent = fake.requests[0]
    assert sent["return_token_ids"] is True
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert (sent["temperature"], sent["top_p"], sent["seed"], sent["max_tokens"]) == (0, 1, 7, 512)


def test_event_split_across_network_writes_is_reassembled(fake: FakeVllm) -> None:
    whole = b"".join(good_chunks())
    fake.add(Script(chunks=[whole[:37], whole[37:120], whole[120:]], pause_s=0.01))
    assert run_stream(fake).token_ids == [11, 12, 13, 14, 15]


def test_empty_first_chunk_does_not_count_as_first_token(fake: FakeVllm) -> None:
    # The empty chunk comes at once and the first token a pause later: counted from the empty
    # chunk, TTFT would be about 0. The pause is long enough that a client descheduled between
    # writing the request and noting the time (a loaded host) still sees most of it.
    fake.add(Script(chunks=[sse(token_chunk([], "")), *good_chunks()], pause_s=0.4))
    result = run_stream(fake)
    assert result.chunk_count == 3
    assert result.ttft_s >= 0.2


def test_cached_tokens_reported(fake: FakeVllm) -> None:
    chunks = good_chunks()
    chunks[3] = sse(usage_chunk(prompt_tokens=3, completion_tokens=5, cached_tokens=2))
    fake.add(Script(chunks=chunks))
    assert run_stream(fake).cached_tokens == 2


def test_missing_prompt_tokens_details_gives_none(fake: FakeVllm) -> None:
    """vLLM before PR #44383 left prompt_tokens_details out when nothing was cached: unknown."""
    chunks = good_chunks()
    chunks[3] = sse(usage_chunk(prompt_tokens=3, completion_tokens=5, cached_tokens=None))
    fake.add(Script(chunks=chunks))
    assert run_stream(fake).cached_tokens is None


def test_missing_done_raises(fake: FakeVllm) -> None:
    fake.add(Script(chunks=good_chunks()[:-1]))
    with pytest.raises(ClientError, match=r"without \[DONE\] after 5 tokens"):
        run_stream(fake)


def test_http_500_raises_with_status_and_body(fake: FakeVllm) -> None:
    fake.add(Script(status=500))
    with pytest.raises(ClientError, match=r"HTTP 500 .*out of KV cache"):
        run_stream(fake)


def test_malformed_json_line_raises_with_the_line(fake: FakeVllm) -> None:
    fake.add(Script(chunks=[*good_chunks()[:2], b'data: {"choices": [\n\n']))
    with pytest.raises(ClientError, match=r"malformed JSON in stream: '\{\"choices\": \['"):
        run_stream(fake)


def test_long_offending_line_is_truncated(fake: FakeVllm) -> None:
    fake.add(Script(chunks=[b"data: {" + b"x" * 5000 + b"\n\n"]))
    with pytest.raises(ClientError) as caught:
        run_stream(fake)
    assert len(str(caught.value)) < 300


def test_non_sse_line_raises(fake: FakeVllm) -> None:
    fake.add(Script(chunks=[b"<html>proxy error</html>\n"]))
    with pytest.raises(ClientError, match="malformed SSE line"):
        run_stream(fake)


def test_connection_drop_mid_stream_raises(fake: FakeVllm) -> None:
    fake.add(Script(chunks=good_chunks()[:2], drop_connection=True, pause_s=0.02))
    with pytest.raises(ClientError, match="failed after 4 tokens"):
        run_stream(fake)


def test_token_count_mismatch_with_usage_raises(fake: FakeVllm) -> None:
    chunks = good_chunks()
    chunks[3] = sse(usage_chunk(prompt_tokens=3, completion_tokens=6))
    fake.add(Script(chunks=chunks))
    with pytest.raises(ClientError, match=r"5 token ids but usage\.completion_tokens is 6"):
        run_stream(fake)


def test_missing_usage_raises(fake: FakeVllm) -> None:
    chunks = good_chunks()
    del chunks[3]
    fake.add(Script(chunks=chunks))
    with pytest.raises(ClientError, match="without a usage chunk"):
        run_stream(fake)


def test_text_without_token_ids_raises(fake: FakeVllm) -> None:
    chunk = {"choices": [{"index": 0, "text": "a", "finish_reason": None}]}
    fake.add(Script(chunks=[sse(chunk), sse("[DONE]")]))
    with pytest.raises(ClientError, match="ignored return_token_ids"):
        run_stream(fake)


def test_error_event_mid_stream_raises_with_server_message(fake: FakeVllm) -> None:
    error = {"error": {"message": "request aborted by engine", "code": 500}}
    fake.add(Script(chunks=[*good_chunks()[:2], sse(error), sse("[DONE]")]))
    with pytest.raises(ClientError, match="mid-stream: 'request aborted by engine'"):
        run_stream(fake)


def test_concurrent_streams_share_one_client(fake: FakeVllm) -> None:
    for _ in range(8):
        fake.add(Script(chunks=good_chunks(), pause_s=0.05))

    async def run_all() -> list[StreamResult]:
        async with new_http_client(max_in_flight=8) as http:
            return await asyncio.gather(
                *(stream_completion(fake.base_url, "demo", "hi", 16, 7, http=http) for _ in range(8))
            )

    results = asyncio.run(run_all())
    assert [result.token_ids for result in results] == [[11, 12, 13, 14, 15]] * 8
    # Each stream pauses 0.25 s in total: concurrent, not serialised (2 s).
    assert max(result.e2e_s for result in results) < 1.5


def test_chat_completion_returns_reply_text(fake: FakeVllm) -> None:
    reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}}]}
    fake.add(Script(chat_reply=reply))
    answer = asyncio.run(chat_completion(fake.base_url, "demo", "6*7?", 8, seed=1))
    assert answer == ChatReply(content="42", reasoning=None, finish_reason=None)
    assert fake.requests[0]["messages"] == [{"role": "user", "content": "6*7?"}]
    assert fake.requests[0]["temperature"] == 0
    assert "chat_template_kwargs" not in fake.requests[0]


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_null_content_is_an_answer_with_its_reasoning(fake: FakeVllm, field: str) -> None:
    """--reasoning-parser qwen3 with thinking on: a reply that never closes </think> comes back
    with content null and the text in `reasoning` (vLLM 0.32) or `reasoning_content` (older)."""
    fake.add(Script(chat_reply=chat_reply(None, "<think>six times seven", field=field)))
    answer = asyncio.run(
        chat_completion(fake.base_url, "demo", "6*7?", 8, seed=1, chat_template_kwargs={"enable_thinking": False})
    )
    assert answer == ChatReply(content=None, reasoning="<think>six times seven", finish_reason="length")
    assert fake.requests[0]["chat_template_kwargs"] == {"enable_thinking": False}


def test_chat_content_of_another_type_is_a_protocol_error(fake: FakeVllm) -> None:
    fake.add(Script(chat_reply=chat_reply(None) | {"choices": [{"message": {"content": ["4", "2"]}}]}))
    with pytest.raises(ClientError, match="content is not text"):
        asyncio.run(chat_completion(fake.base_url, "demo", "6*7?", 8, seed=1))


DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture()
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable httpx reads points at a dead address, and nothing is exempt."""
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, DEAD_PROXY)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("dead_proxy")
def test_requests_to_our_servers_ignore_proxy_settings(fake: FakeVllm) -> None:
    fake.add(Script(chunks=good_chunks()))
    fake.add(Script(chat_reply=chat_reply("42")))
    fake.metrics_texts.append('vllm:generation_tokens_total{engine="0"} 12.0\n')
    assert run_stream(fake).token_ids == [11, 12, 13, 14, 15]
    assert asyncio.run(chat_completion(fake.base_url, "demo", "6*7?", 8, seed=1)).content == "42"
    assert scrape_counters(fake.base_url).generation_tokens == 12


def test_chat_completion_http_error_raises(fake: FakeVllm) -> None:
    fake.add(Script(status=503))
    with pytest.raises(ClientError, match="HTTP 503"):
        asyncio.run(chat_completion(fake.base_url, "demo", "hi", 8, seed=1))
