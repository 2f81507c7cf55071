"""The fake vLLM OpenAI server: every POST to /v1/completions or /v1/chat/completions plays a
`Script`, taken from the queue (`add`) or made from the request's JSON body by `responder`.

A script streams raw SSE byte chunks, each its own HTTP chunk in its own socket write, with an
optional pause after each; then it ends the chunked body, or drops the connection, or (as its
own process) exits as vLLM does when its engine core dies. A script with a status other than
200 answers that status and an error text; one with `chat_reply` answers that JSON. GET /health,
/version, /v1/models and /metrics answer as vLLM's do; `loading` makes every GET a 503, as a
server still loading its model.

In a test: `with FakeVllm() as fake:` serves on a free loopback port from a background thread
(`fake.base_url`). As vLLM's own process: testkit/fake_vllm/process.py.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from testkit.fake_vllm.http import Connection, Request, bind, listen
from testkit.fake_vllm.wire import model_list

COMPLETIONS = ("/v1/completions", "/v1/chat/completions")
ERROR_TEXT = "engine exploded: out of KV cache"


@dataclass(frozen=True)
class Crash:
    """The server's process prints `message` and exits with `exit_code` once `after_chunks`
    chunks of the stream are written. Only where the fake is its own process (process.py)."""

    after_chunks: int
    message: str
    exit_code: int = 17


@dataclass
class Script:
    """One request's answer (see the module's docstring)."""

    chunks: list[bytes] = field(default_factory=list)
    status: int = 200
    pause_s: float = 0.0  # after every chunk
    prefill_s: float = 0.0  # before the first chunk: the prompt's prefill (no token comes sooner)
    drop_connection: bool = False  # close the socket instead of finishing the body
    chat_reply: dict[str, Any] | None = None
    crash: Crash | None = None


class FakeVllm:
    """vLLM's OpenAI server as far as our clients see it; answers come from scripts."""

    def __init__(
        self, model: str = "demo", version: str = "0.0.fake", log: Callable[[str], None] | None = None
    ) -> None:
        self.model = model
        self.version = version
        self.log = log  # one line per request, as uvicorn's access log
        self.loading = False
        self.scripts: deque[Script] = deque()
        # When set, each request's script is made from its JSON body instead of taken from the queue.
        self.responder: Callable[[dict[str, Any]], Script] | None = None
        self.requests: list[dict[str, Any]] = []  # every POST's JSON body, in order of arrival
        self.metrics_texts: deque[str] = deque()  # one per GET /metrics, the last one repeats
        self.metrics_source: Callable[[], str] | None = None  # instead of metrics_texts
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, script: Script) -> None:
        self.scripts.append(script)

    # ---- serving ----

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen in the running event loop; OSError if the address is taken."""
        sock = bind(host, port)
        self.port = sock.getsockname()[1]
        self._server, self._connections = await listen(sock, self.handle)

    async def stop(self) -> None:
        """Stop listening and drop every open connection, mid-stream or idle."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.abort()
        await asyncio.sleep(0)

    def __enter__(self) -> FakeVllm:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._loop is not None and self._thread is not None
        asyncio.run_coroutine_threadsafe(self.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        left = asyncio.all_tasks(self._loop)  # handlers still pausing between chunks
        for task in left:
            task.cancel()
        if left:
            self._loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        self._loop.close()

    # ---- answering ----

    async def handle(self, request: Request, connection: Connection) -> None:
        if request.method == "POST" and request.path in COMPLETIONS:
            await self._answer(request, connection)
        elif request.method != "GET":
            self._reply_json(request, connection, 404, {"error": {"message": "Not Found", "code": 404}})
        elif self.loading:
            self._reply_text(request, connection, 503, "loading")
        elif request.path == "/health":
            self._reply_text(request, connection, 200, "")
        elif request.path == "/version":
            self._reply_json(request, connection, 200, {"version": self.version})
        elif request.path == "/v1/models":
            self._reply_json(request, connection, 200, model_list(self.model))
        elif request.path == "/metrics" and (text := self._metrics_text()) is not None:
            self._reply_text(request, connection, 200, text)
        else:
            self._reply_text(request, connection, 404, f"no {request.path} here")

    def _metrics_text(self) -> str | None:
        if self.metrics_source is not None:
            return self.metrics_source()
        if not self.metrics_texts:
            return None
        return self.metrics_texts.popleft() if len(self.metrics_texts) > 1 else self.metrics_texts[0]

    async def _answer(self, request: Request, connection: Connection) -> None:
        body = request.json()
        self.requests.append(body)
        script = self.responder(body) if self.responder is not None else self.scripts.popleft()
        self._access(request, connection, script.status)
        if script.chat_reply is not None:
            connection.json(script.status, script.chat_reply)
            return
        if script.status != 200:
            connection.text(script.status, ERROR_TEXT)
            return
        connection.start_stream()
        if script.prefill_s:
            await asyncio.sleep(script.prefill_s)
        for index, chunk in enumerate(script.chunks):
            if script.crash is not None and index == script.crash.after_chunks:
                print(script.crash.message, flush=True)
                os._exit(script.crash.exit_code)
            await connection.drain()
            if connection.closed:
                return
            if chunk:  # an empty HTTP chunk would end the body
                connection.write_event(chunk)
            if script.pause_s:
                await asyncio.sleep(script.pause_s)
        if script.drop_connection:
            connection.abort()
        else:
            connection.end_stream()

    def _access(self, request: Request, connection: Connection, status: int) -> None:
        if self.log is not None:
            self.log(f'INFO:     {connection.peer} - "{request.method} {request.path} HTTP/1.1" {status}')

    def _reply_json(self, request: Request, connection: Connection, status: int, value: Any) -> None:
        self._access(request, connection, status)
        connection.json(status, value)

    def _reply_text(self, request: Request, connection: Connection, status: int, text: str) -> None:
        self._access(request, connection, status)
        connection.text(status, text)
