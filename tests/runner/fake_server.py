"""A scripted streaming server on loopback, for unit-testing the client's parsing and failures.

Each POST to /v1/completions pops the next `Script` from the server's queue and plays it:
raw SSE byte chunks written one by one with an optional pause between them, then either a
clean end of the chunked body or an abrupt connection drop. Built on aiohttp's low-level
StreamResponse, so every chunk reaches the socket as written.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Script:
    chunks: list[bytes] = field(default_factory=list)
    status: int = 200
    pause_s: float = 0.0
    drop_connection: bool = False  # close the socket instead of finishing the body
    chat_reply: dict[str, Any] | None = None


def sse(event: dict[str, Any] | str) -> bytes:
    data = event if isinstance(event, str) else json.dumps(event)
    return f"data: {data}\n\n".encode()


def token_chunk(
    token_ids: list[int],
    text: str,
    finish_reason: str | None = None,
    prompt_token_ids: list[int] | None = None,
) -> dict[str, Any]:
    """A chunk shaped like vLLM 0.32's CompletionStreamResponse with return_token_ids."""
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
        "prompt_token_ids": prompt_token_ids,
        "token_ids": token_ids,
    }
    return {"id": "cmpl-fake", "object": "text_completion", "model": "demo", "choices": [choice]}


def usage_chunk(prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = 0) -> dict[str, Any]:
    """cached_tokens None: no prompt_tokens_details at all, as vLLM sent before PR #44383
    whenever nothing was cached."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {"id": "cmpl-fake", "choices": [], "usage": usage}


def chat_reply(content: str | None, reasoning: str | None = None, field: str = "reasoning") -> dict[str, Any]:
    """A non-streaming chat response shaped like vLLM's ChatCompletionResponse. vLLM 0.32 names
    the reasoning text `reasoning`; older servers `reasoning_content` (pass it as `field`)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": []}
    if reasoning is not None:
        message[field] = reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "demo",
        "choices": [{"index": 0, "message": message, "finish_reason": "length", "logprobs": None}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 24, "total_tokens": 33},
    }


class FakeServer:
    """Runs an aiohttp app in a background thread; use as a context manager."""

    def __init__(self) -> None:
        self.scripts: deque[Script] = deque()
        self.requests: list[dict[str, Any]] = []
        self.metrics_texts: deque[str] = deque()  # one per GET /metrics, the last one repeats
        # When set, each request's script is made from its JSON body instead of popped from the queue.
        self.responder: Callable[[dict[str, Any]], Script] | None = None
        self.arrivals: list[float] = []  # perf_counter() of each POST's arrival (one clock per process)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def add(self, script: Script) -> None:
        self.scripts.append(script)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/completions", self._play)
        app.router.add_post("/v1/chat/completions", self._play)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        await web.SockSite(self._runner, listener).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        if not self.metrics_texts:
            return web.Response(status=404, text="no /metrics here")
        text = self.metrics_texts.popleft() if len(self.metrics_texts) > 1 else self.metrics_texts[0]
        return web.Response(text=text, content_type="text/plain")

    async def _play(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append(time.perf_counter())
        body = await request.json()
        self.requests.append(body)
        script = self.responder(body) if self.responder is not None else self.scripts.popleft()
        if script.chat_reply is not None:
            return web.json_response(script.chat_reply, status=script.status)
        if script.status != 200:
            return web.Response(status=script.status, text="engine exploded: out of KV cache")
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for chunk in script.chunks:
            await response.write(chunk)
            if script.pause_s:
                await asyncio.sleep(script.pause_s)
        if script.drop_connection:
            assert request.transport is not None
            request.transport.abort()
            return response
        await response.write_eof()
        return response
