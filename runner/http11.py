"""A lean HTTP/1.1 transport for httpx, for the measuring client's plain-http streams.

httpx's default transport (httpcore + h11) hands a streamed body over one HTTP chunk at a time,
through several layers per chunk. vLLM writes one chunk per token, so at 64 streams the client
spent most of its CPU there and became the bottleneck (bench/, docs/performance.md). This
transport reads with an asyncio protocol and yields, per socket read, the de-chunked bytes of
every complete or partial chunk in it.

It speaks what the runner needs and nothing more: plain `http://`, keep-alive with a pool of at
most `max_connections` connections, Content-Length, chunked and read-to-close bodies. Errors are
httpx's own exception types, so callers handle them as before. An `https://` URL is handed to
httpx's default transport, created on first use (building its TLS context costs ~0.1 s of CPU,
which every new client paid before, loopback or not).

Timing hooks, as request extensions (callables given time.perf_counter() values):
- SENT_EXTENSION: called once the request's bytes are handed to the socket, with the time taken
  just before they were, so a caller times from the send itself, not from before its own
  request-building work (with 64 requests started at once, that work queues behind the other
  requests). Before, not after: a client descheduled between the write and the clock read (seen
  in CI, a two-core host beside a vLLM CPU server) stamped the send after the server had answered,
  and a 458-token prefill read as 0.13 ms, which the catalog's physics floor rightly refused.
  Stamped before, a stall there can only lengthen a time, never make one impossible;
- ARRIVED_EXTENSION: called just before each piece of the body is yielded, with the time the
  socket read that delivered it happened, so a busy consumer's parsing backlog never delays a
  token's timestamp.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from time import perf_counter
from typing import Any

import httpx

MAX_HEAD_BYTES = 64 * 1024
SENT_EXTENSION = "runner.request_sent"
ARRIVED_EXTENSION = "runner.data_arrived"
Hook = Callable[[float], None]


class _Connection(asyncio.Protocol):
    """One TCP connection; `data_received` only stamps, queues and wakes the reader."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.segments: deque[tuple[float, bytes]] = deque()  # (read time, bytes), oldest first
        self.eof = False
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.segments.append((perf_counter(), data))
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing() and not self.eof and not self.segments

    async def more(self, timeout: float | None) -> None:
        """Wait until new bytes or the end of the connection arrive; raise ReadTimeout."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout("timed out waiting for the server"))


class _Body(httpx.AsyncByteStream):
    """The response body: one piece per socket read, de-chunked."""

    def __init__(
        self,
        transport: LoopbackTransport,
        key: tuple[str, int],
        conn: _Connection,
        framing: tuple[str, int],
        timeout: float | None,
        on_arrival: Hook | None,
    ) -> None:
        self._transport = transport
        self._key = key
        self._conn = conn
        self._framing = framing[0]  # "length", "chunked" or "close"
        # "length": body bytes left; "chunked": data bytes left in this chunk (> 0), or the next
        # thing expected: 0 a size line, -2 the CRLF after chunk data, -3 trailers after the last
        self._remaining = framing[1]
        self._timeout = timeout
        self._on_arrival = on_arrival
        self._carry = b""  # bytes of an incomplete chunk-size line, waiting for the next read
        self._done = self._framing == "length" and self._remaining == 0
        self.keep_alive = True
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        segments = conn.segments
        while not self._done:
            if not segments:
                if conn.eof:
                    self.keep_alive = False
                    if self._framing == "close":
                        self._done = True
                        break
                    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
                await conn.more(self._timeout)
                continue
            arrived_at, data = segments.popleft()
            if self._carry:
                data, self._carry = self._carry + data, b""
            piece = self._take(data)
            if piece:
                if self._on_arrival is not None:
                    self._on_arrival(arrived_at)
                yield piece

    def _take(self, data: bytes) -> bytes:
        if self._framing == "close":
            return data
        if self._framing == "length":
            piece = data[: self._remaining]
            self._carry = data[len(piece) :]  # anything past the body: the connection is not reused
            self._remaining -= len(piece)
            self._done = self._remaining == 0
            return piece
        return self._take_chunked(data)

    def _take_chunked(self, data: bytes) -> bytes:
        parts: list[bytes] = []
        pos = 0
        size = len(data)
        remaining = self._remaining
        while pos < size:
            if remaining > 0:
                end = pos + remaining
                if end > size:
                    parts.append(data[pos:])
                    remaining = end - size
                    pos = size
                    break
                parts.append(data[pos:end])
                pos = end
                remaining = -2
            elif remaining == -2:
                if size - pos < 2:
                    break
                if data[pos : pos + 2] != b"\r\n":
                    raise httpx.RemoteProtocolError("malformed chunked body: no CRLF after chunk data")
                pos += 2
                remaining = 0
            elif remaining == -3:
                line_end = data.find(b"\r\n", pos)
                if line_end < 0:
                    break
                empty = line_end == pos
                pos = line_end + 2
                if empty:
                    self._done = True
                    break
            else:
                line_end = data.find(b"\r\n", pos)
                if line_end < 0:
                    if size - pos > 1024:
                        raise httpx.RemoteProtocolError("malformed chunked body: chunk size line too long")
                    break
                try:
                    chunk_size = int(data[pos:line_end], 16)
                except ValueError:
                    chunk_size = _chunk_size_with_extension(data[pos:line_end])
                pos = line_end + 2
                end = pos + chunk_size
                if chunk_size and end + 2 <= size and data[end : end + 2] == b"\r\n":
                    parts.append(data[pos:end])  # the usual case: the whole chunk is here
                    pos = end + 2
                    continue
                remaining = chunk_size if chunk_size else -3
        self._remaining = remaining
        self._carry = data[pos:]
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        reusable = self._done and self.keep_alive and not self._carry
        self._transport._release(self._key, self._conn, reusable)


class LoopbackTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio for plain http:// URLs, at most `max_connections` at a time."""

    def __init__(self, max_connections: int) -> None:
        self._max_connections = max_connections
        self._slots: asyncio.Semaphore | None = None
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._fallback: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            if self._fallback is None:
                limits = httpx.Limits(max_connections=self._max_connections)
                self._fallback = httpx.AsyncHTTPTransport(limits=limits)
            return await self._fallback.handle_async_request(request)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_connections)
        slots = self._slots
        await _with_timeout(slots.acquire(), timeouts.get("pool"), httpx.PoolTimeout)
        key = (url.host, url.port or 80)
        on_sent: Hook | None = request.extensions.get(SENT_EXTENSION)
        try:
            body = await request.aread()
            head = _request_head(request, len(body))
            for attempt in range(2):
                conn, reused = await self._connection(key, timeouts.get("connect"))
                try:
                    assert conn.transport is not None
                    sending = perf_counter()
                    conn.transport.write(head + body)
                    if on_sent is not None:
                        on_sent(sending)
                    status, headers = await _read_head(conn, timeouts.get("read"))
                except httpx.RemoteProtocolError:
                    conn.close()
                    if reused and attempt == 0 and not conn.segments:
                        continue  # the server closed an idle keep-alive connection: retry once, fresh
                    raise
                except BaseException:
                    conn.close()
                    raise
                break
        except BaseException:
            slots.release()
            raise
        stream = _Body(
            self,
            key,
            conn,
            _framing(request.method, status, headers),
            timeouts.get("read"),
            request.extensions.get(ARRIVED_EXTENSION),
        )
        if _header(headers, b"connection").lower() == b"close":
            stream.keep_alive = False
        return httpx.Response(status, headers=headers, stream=stream, extensions={"http_version": b"HTTP/1.1"})

    async def _connection(self, key: tuple[str, int], timeout: float | None) -> tuple[_Connection, bool]:
        idle = self._idle.get(key, [])
        while idle:
            conn = idle.pop()
            if conn.usable:
                return conn, True
            conn.close()
        loop = asyncio.get_running_loop()
        try:
            _, conn = await _with_timeout(
                loop.create_connection(_Connection, key[0], key[1]), timeout, httpx.ConnectTimeout
            )
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        return conn, False

    def _release(self, key: tuple[str, int], conn: _Connection, reusable: bool) -> None:
        if reusable and conn.usable:
            self._idle.setdefault(key, []).append(conn)
        else:
            conn.close()
        if self._slots is not None:
            self._slots.release()

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for conn in connections:
                conn.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()


def _chunk_size_with_extension(line: bytes) -> int:
    try:
        return int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise httpx.RemoteProtocolError(f"malformed chunked body: bad chunk size line {line[:40]!r}") from None


async def _with_timeout(awaitable: Any, timeout: float | None, error: type[httpx.TimeoutException]) -> Any:
    if timeout is None:
        return await awaitable
    try:
        # Not asyncio.wait_for: on Python 3.11 it swallows a cancellation (Ctrl-C) that arrives as
        # the awaited call completes, and the campaign then runs on to the end (gh-86296).
        async with asyncio.timeout(timeout):
            return await awaitable
    except TimeoutError:
        raise error(f"timed out after {timeout} s") from None


def _request_head(request: httpx.Request, body_length: int) -> bytes:
    lines = [request.method.encode() + b" " + request.url.raw_path + b" HTTP/1.1"]
    has_length = False
    for name, value in request.headers.raw:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            continue  # the body is sent whole, with its length
        if lowered == b"content-length":
            has_length = True
            value = str(body_length).encode()
        lines.append(name + b": " + value)
    if not has_length and (body_length or request.method in ("POST", "PUT", "PATCH")):
        lines.append(b"Content-Length: " + str(body_length).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _read_head(conn: _Connection, timeout: float | None) -> tuple[int, list[tuple[bytes, bytes]]]:
    """Parse the status line and headers; body bytes read with them go back to the queue's front,
    stamped with the time of the read that brought them."""
    buffer = b""
    arrived_at = 0.0
    while True:
        while conn.segments:
            arrived_at, data = conn.segments.popleft()
            buffer += data
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            break
        if len(buffer) > MAX_HEAD_BYTES:
            raise httpx.RemoteProtocolError("response head too long")
        if conn.eof:
            raise httpx.RemoteProtocolError("server disconnected without sending a response")
        await conn.more(timeout)
    if end + 4 < len(buffer):
        conn.segments.appendleft((arrived_at, buffer[end + 4 :]))
    status_line, *header_lines = buffer[:end].split(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise httpx.RemoteProtocolError(f"malformed status line {status_line[:80]!r}")
    headers = []
    for line in header_lines:
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        headers.append((name.strip(), value.strip()))
    status = int(parts[1])
    if status < 200:  # 1xx interim responses (100 Continue): skip to the real one
        return await _read_head(conn, timeout)
    return status, headers


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes:
    for key, value in headers:
        if key.lower() == name:
            return value
    return b""


def _framing(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> tuple[str, int]:
    if method == "HEAD" or status in (204, 304):
        return "length", 0
    if b"chunked" in _header(headers, b"transfer-encoding").lower():
        return "chunked", 0
    length = _header(headers, b"content-length")
    if length:
        try:
            return "length", int(length)
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad content-length {length[:40]!r}") from None
    return "close", 0
