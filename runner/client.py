"""Measuring client for vLLM's OpenAI-compatible API.

`stream_completion` times every token of one streamed `/v1/completions` request. Tokens are
counted from the `token_ids` each chunk carries (`return_token_ids: true`), never from chunk
counts: with speculative decoding one chunk carries several tokens, and each of them gets the
chunk's arrival time. Many requests can share one `httpx.AsyncClient` from `new_http_client`
(one pooled connection per request in flight).

The client must never be the bottleneck (bench/, docs/performance.md): `new_http_client` mounts
`runner.http11.LoopbackTransport` for http://, which hands over everything that arrived in one
socket read together with the read's time, and the events of one read are parsed with a single
`json.loads`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import httpx

from runner.http11 import ARRIVED_EXTENSION, SENT_EXTENSION, LoopbackTransport

DEFAULT_TIMEOUT_S = 600.0
JSON_HEADERS = {"content-type": "application/json", "accept-encoding": "identity"}
SSE_DATA_PREFIX = b"data:"
SSE_IGNORED_FIELDS = (b"event:", b"id:", b"retry:", b":")
SHOWN_CHARS = 200
JSON_BATCH = 64


class ClientError(Exception):
    """A request failed or its response broke the expected protocol; the message says how."""


@dataclass(frozen=True)
class StreamResult:
    """One streamed completion. Times are seconds since the request was written to the socket,
    and a token's time is that of the socket read that brought it (with new_http_client; with
    another httpx client: since just before the request was built, and when the bytes were
    parsed). So the client's own queueing, before the send or behind other streams' parsing,
    never counts as server time.

    token_times_s has one entry per token; tokens that arrived in the same chunk share it.
    chunk_count counts chunks that carried at least one token.
    cached_tokens is None when the server did not report prompt_tokens_details (it needs
    --enable-prompt-tokens-details).
    """

    token_ids: list[int]
    text: str
    ttft_s: float
    token_times_s: list[float]
    e2e_s: float
    chunk_count: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None
    finish_reason: str | None
    prompt_token_ids: list[int] | None
    sent_at: float = 0.0  # perf_counter() when the request was written: where the times above count from


def new_http_client(max_in_flight: int = 64, timeout_s: float = DEFAULT_TIMEOUT_S) -> httpx.AsyncClient:
    """An AsyncClient whose pool holds one connection per request in flight."""
    return httpx.AsyncClient(
        transport=LoopbackTransport(max_connections=max_in_flight),
        timeout=httpx.Timeout(timeout_s, connect=30.0),
        trust_env=False,  # never route loopback measurements through a proxy
    )


def completion_payload(
    model: str, prompt: str | list[int], max_tokens: int, seed: int, temperature: float
) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": 1.0,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
        "return_token_ids": True,
    }


async def stream_completion(
    base_url: str,
    model: str,
    prompt: str | list[int],
    max_tokens: int,
    seed: int,
    temperature: float = 0.0,
    *,
    http: httpx.AsyncClient | None = None,
) -> StreamResult:
    """POST a streaming /v1/completions request and time each token. Raises ClientError."""
    url = base_url.rstrip("/") + "/v1/completions"
    body = json.dumps(completion_payload(model, prompt, max_tokens, seed, temperature)).encode()
    owned = http is None
    client = http if http is not None else new_http_client(max_in_flight=1)
    try:
        return await _stream(client, url, body)
    finally:
        if owned:
            await client.aclose()


async def _stream(http: httpx.AsyncClient, url: str, body: bytes) -> StreamResult:
    sent_at = perf_counter()
    stream = _StreamState(sent_at)
    try:
        hooks = {SENT_EXTENSION: stream.request_sent, ARRIVED_EXTENSION: stream.data_arrived}
        async with http.stream("POST", url, content=body, headers=JSON_HEADERS, extensions=hooks) as response:
            if response.status_code != 200:
                detail = (await response.aread()).decode("utf-8", errors="replace")
                raise ClientError(f"HTTP {response.status_code} from POST {url}: {_shorten(detail)}")
            async for data in response.aiter_bytes():
                stream.feed(data, stream.arrival())
            stream.feed_rest(perf_counter())
    except httpx.HTTPError as exc:
        raise ClientError(
            f"connection to {url} failed after {len(stream.token_ids)} tokens: "
            f"{type(exc).__name__}: {_shorten(str(exc))}"
        ) from exc
    return stream.result(perf_counter() - stream.sent_at)


class _StreamState:
    """Accumulates SSE events of one completion stream.

    `feed` takes whatever arrived in one read: every complete line in it shares the read's
    arrival time, and the JSON events among them are decoded with one `json.loads` call."""

    def __init__(self, sent_at: float) -> None:
        self.sent_at = sent_at
        self.arrived_at: float | None = None
        self.pending = b""
        self.token_ids: list[int] = []
        self.token_times: list[float] = []
        self.text_parts: list[str] = []
        self.ttft: float | None = None
        self.chunk_count = 0
        self.finish_reason: str | None = None
        self.prompt_token_ids: list[int] | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False

    def request_sent(self, at: float) -> None:
        """The transport wrote the request: token times count from here."""
        self.sent_at = at

    def data_arrived(self, at: float) -> None:
        """The transport says when the socket read of the next piece of body happened."""
        self.arrived_at = at

    def arrival(self) -> float:
        """The read time of the piece being fed; now, when the transport does not say."""
        at, self.arrived_at = self.arrived_at, None
        return perf_counter() if at is None else at

    def feed(self, data: bytes, arrived_at: float) -> None:
        pending = self.pending + data if self.pending else data
        if b"\n" not in data:
            self.pending = pending
            return
        *lines, self.pending = pending.split(b"\n")
        self._feed_lines(lines, arrived_at)

    def feed_rest(self, arrived_at: float) -> None:
        """The end of the body: a last line without its newline still counts."""
        rest, self.pending = self.pending, b""
        if rest.strip():
            self._feed_lines([rest], arrived_at)

    def _feed_lines(self, lines: list[bytes], arrived_at: float) -> None:
        payloads: list[bytes] = []
        for raw_line in lines:
            line = raw_line.rstrip(b"\r")
            if not line:
                continue
            if not line.startswith(SSE_DATA_PREFIX):
                if line.startswith(SSE_IGNORED_FIELDS):
                    continue
                self._feed_payloads(payloads, arrived_at)
                raise ClientError(f"malformed SSE line: {_shorten(line)}")
            payloads.append(line[len(SSE_DATA_PREFIX) :].strip())
        self._feed_payloads(payloads, arrived_at)

    def _feed_payloads(self, payloads: list[bytes], arrived_at: float) -> None:
        """Events in order; a run of JSON events is decoded in one call, [DONE] ends the stream."""
        start = 0
        for index, data in enumerate(payloads):
            if data == b"[DONE]":
                self._feed_json(payloads[start:index], arrived_at)
                if self.done:
                    raise ClientError(f"data after [DONE]: {_shorten(b'data: ' + data)}")
                self.done = True
                start = index + 1
        self._feed_json(payloads[start:], arrived_at)
        payloads.clear()

    def _feed_json(self, payloads: list[bytes], arrived_at: float) -> None:
        if not payloads:
            return
        if self.done:
            raise ClientError(f"data after [DONE]: {_shorten(b'data: ' + payloads[0])}")
        # Batches small enough that their decoded events (about four containers each) stay under
        # the garbage collector's 700-allocation threshold: a read of hundreds of events decoded
        # at once kept triggering collections, about a seventh of the client's CPU per token.
        for start in range(0, len(payloads), JSON_BATCH):
            self._feed_json_batch(payloads[start : start + JSON_BATCH], arrived_at)

    def _feed_json_batch(self, payloads: list[bytes], arrived_at: float) -> None:
        events: Any = None
        if len(payloads) > 1:
            try:
                events = json.loads(b"[" + b",".join(payloads) + b"]")
            except ValueError:
                events = None
            if not isinstance(events, list) or len(events) != len(payloads):
                events = None  # decode one by one to name the bad event
        if events is None:
            events = [_decode_event(data) for data in payloads]
        for data, event in zip(payloads, events, strict=True):
            if type(event) is not dict:
                raise ClientError(f"stream event is not a JSON object: {_shorten(data)}")
            self._feed_event(event, arrived_at)

    def _feed_event(self, event: dict[str, Any], arrived_at: float) -> None:
        if "error" in event:
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise ClientError(f"server reported an error mid-stream: {_shorten(str(message))}")
        choices = event.get("choices")
        if choices:
            for choice in choices:
                self._feed_choice(choice, arrived_at)
        usage = event.get("usage")
        if usage:
            self.usage = usage

    def _feed_choice(self, choice: dict[str, Any], arrived_at: float) -> None:
        if choice.get("index", 0) != 0:
            raise ClientError(f"unexpected choice index {choice.get('index')!r} (n must be 1)")
        text = choice.get("text") or ""
        ids = choice.get("token_ids")
        if ids is None:
            if text:
                raise ClientError("chunk has text but no token_ids: server ignored return_token_ids")
        elif type(ids) is not list or not (
            (len(ids) == 1 and type(ids[0]) is int) or all(type(token) is int for token in ids)
        ):
            raise ClientError(f"token_ids is not a list of integers: {_shorten(str(ids))}")
        elif ids:
            elapsed = arrived_at - self.sent_at
            if self.ttft is None:
                self.ttft = elapsed
            if len(ids) == 1:
                self.token_ids.append(ids[0])
                self.token_times.append(elapsed)
            else:
                self.token_ids.extend(ids)
                self.token_times.extend([elapsed] * len(ids))
            self.chunk_count += 1
        if text:
            self.text_parts.append(text)
        if self.prompt_token_ids is None and choice.get("prompt_token_ids") is not None:
            self.prompt_token_ids = list(choice["prompt_token_ids"])
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def result(self, e2e_s: float) -> StreamResult:
        count = len(self.token_ids)
        if not self.done:
            raise ClientError(f"stream ended without [DONE] after {count} tokens")
        if self.usage is None:
            raise ClientError("stream ended without a usage chunk (include_usage not honoured)")
        if self.ttft is None:
            raise ClientError("stream carried no tokens")
        completion_tokens = _usage_int(self.usage, "completion_tokens")
        if completion_tokens != count:
            raise ClientError(f"stream carried {count} token ids but usage.completion_tokens is {completion_tokens}")
        details = self.usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return StreamResult(
            token_ids=self.token_ids,
            text="".join(self.text_parts),
            ttft_s=self.ttft,
            token_times_s=self.token_times,
            e2e_s=e2e_s,
            chunk_count=self.chunk_count,
            prompt_tokens=_usage_int(self.usage, "prompt_tokens"),
            completion_tokens=completion_tokens,
            cached_tokens=cached if isinstance(cached, int) else None,
            finish_reason=self.finish_reason,
            prompt_token_ids=self.prompt_token_ids,
            sent_at=self.sent_at,
        )


@dataclass(frozen=True)
class ChatReply:
    """One non-streaming chat answer. `content` is None when the server sent `content: null`:
    a reasoning parser (`--reasoning-parser qwen3`) put everything it got in `reasoning`
    because the model never closed `</think>`. `reasoning` is that text (vLLM 0.32 calls the
    field `reasoning`, older servers `reasoning_content`), None when there is none."""

    content: str | None
    reasoning: str | None
    finish_reason: str | None


async def chat_completion(
    base_url: str,
    model: str,
    prompt: str,
    max_tokens: int,
    seed: int,
    temperature: float = 0.0,
    *,
    http: httpx.AsyncClient | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> ChatReply:
    """Non-streaming /v1/chat/completions with one user message. A null content is an answer
    (the caller judges it), not a protocol error; a content of another type is."""
    url = base_url.rstrip("/") + "/v1/chat/completions"
    payload: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "top_p": 1.0,
        "seed": seed,
    }
    if chat_template_kwargs is not None:
        payload["chat_template_kwargs"] = chat_template_kwargs
    owned = http is None
    client = http if http is not None else new_http_client(max_in_flight=1)
    try:
        response = await client.post(url, json=payload)
    except httpx.HTTPError as exc:
        raise ClientError(f"POST {url} failed: {type(exc).__name__}: {_shorten(str(exc))}") from exc
    finally:
        if owned:
            await client.aclose()
    if response.status_code != 200:
        raise ClientError(f"HTTP {response.status_code} from POST {url}: {_shorten(response.text)}")
    try:
        choice = response.json()["choices"][0]
        message = choice["message"]
        content = message.get("content")
        reasoning = message.get("reasoning")
        if reasoning is None:
            reasoning = message.get("reasoning_content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise ClientError(f"unexpected chat response: {_shorten(response.text)}") from None
    if content is not None and not isinstance(content, str):
        raise ClientError(f"chat reply content is not text: {_shorten(str(content))}")
    if reasoning is not None and not isinstance(reasoning, str):
        raise ClientError(f"chat reply reasoning is not text: {_shorten(str(reasoning))}")
    finish = choice.get("finish_reason")
    return ChatReply(content, reasoning, finish if isinstance(finish, str) else None)


def _decode_event(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise ClientError(f"malformed JSON in stream: {_shorten(data)}") from None


def _usage_int(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    if not isinstance(value, int):
        raise ClientError(f"usage.{key} missing or not an integer: {_shorten(json.dumps(usage))}")
    return value


def _shorten(text: str | bytes) -> str:
    shown = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    return repr(shown if len(shown) <= SHOWN_CHARS else shown[:SHOWN_CHARS] + "...")
