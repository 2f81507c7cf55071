"""runner.http11.LoopbackTransport, the transport new_http_client mounts (bench/ showed httpx's
default one made the client the bottleneck): exact bytes on the wire (vLLM's, from
testkit/fake_vllm/wire.py), split anywhere."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from runner.client import ClientError, chat_completion, new_http_client, stream_completion
from runner.http11 import LoopbackTransport
from testkit.fake_vllm.wire import LAST_CHUNK, STREAM_HEAD, http_chunk, sse, token_chunk, usage_chunk

HEAD = STREAM_HEAD


def event(payload: dict[str, Any] | str) -> bytes:
    return http_chunk(sse(payload))


def token(ids: list[int], finish: str | None = None) -> bytes:
    return event(token_chunk(ids, "x" * len(ids), finish))


def stream_bytes(count: int = 3) -> bytes:
    tokens = b"".join(token([10 + i], "length" if i == count - 1 else None) for i in range(count))
    return HEAD + tokens + event(usage_chunk(2, count)) + event("[DONE]") + LAST_CHUNK


Reply = Callable[[bytes], list[bytes]]


@asynccontextmanager
async def raw_server(reply: Reply, pause_s: float = 0.0) -> AsyncIterator[dict[str, object]]:
    """Answers each request on a connection with reply(request) written piece by piece."""
    state: dict[str, object] = {"connections": 0, "requests": []}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] = int(state["connections"]) + 1  # type: ignore[call-overload]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                body = await reader.readexactly(length)
                state["requests"].append(json.loads(body))  # type: ignore[attr-defined, union-attr]
                for piece in reply(body):
                    if piece == b"CLOSE":
                        writer.close()
                        return
                    writer.write(piece)
                    await writer.drain()
                    if pause_s:
                        await asyncio.sleep(pause_s)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    state["url"] = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server:
        yield state


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_bytes_split_at_every_offset_give_the_same_tokens() -> None:
    whole = stream_bytes()
    for cut in range(len(HEAD) - 5, len(whole), 7):

        async def go(cut: int = cut) -> list[int]:
            async with raw_server(lambda _: [whole[:cut], whole[cut:]], pause_s=0.002) as srv:
                result = await stream_completion(str(srv["url"]), "m", "hi", 3, 1)
                return result.token_ids

        assert run(go()) == [10, 11, 12], cut


def test_tokens_of_one_read_share_its_time_and_later_reads_are_later() -> None:
    whole = stream_bytes(4)
    first_two = whole.index(token([12]))

    async def go() -> list[float]:
        async with raw_server(lambda _: [whole[:first_two], whole[first_two:]], pause_s=0.05) as srv:
            return (await stream_completion(str(srv["url"]), "m", "hi", 4, 1)).token_times_s

    times = run(go())
    assert isinstance(times, list)
    assert times[0] == times[1] < times[2] == times[3]
    assert times[2] - times[1] >= 0.04


def test_one_client_reuses_its_connection_and_survives_an_idle_close() -> None:
    whole = stream_bytes()
    calls = {"n": 0}

    def reply(_: bytes) -> list[bytes]:
        calls["n"] += 1
        return [whole, b"CLOSE"] if calls["n"] == 2 else [whole]  # the server drops keep-alive after 2

    async def go() -> int:
        async with raw_server(reply) as srv, new_http_client(max_in_flight=1) as http:
            for _ in range(3):
                result = await stream_completion(str(srv["url"]), "m", "hi", 3, 1, http=http)
                assert result.token_ids == [10, 11, 12]
            return int(srv["connections"])  # type: ignore[call-overload, no-any-return]

    assert run(go()) == 2


def test_content_length_reply_and_error_status() -> None:
    reply_body = json.dumps({"choices": [{"message": {"content": "42"}}]}).encode()
    ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(reply_body),
        reply_body,
    )
    busy = b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy"

    async def go() -> str:
        async with raw_server(lambda _: [ok]) as srv:
            return await chat_completion(str(srv["url"]), "m", "6*7?", 8, 1)  # type: ignore[return-value]

    assert run(go()).content == "42"  # type: ignore[attr-defined]

    async def fail() -> None:
        async with raw_server(lambda _: [busy]) as srv:
            await stream_completion(str(srv["url"]), "m", "hi", 3, 1)

    with pytest.raises(ClientError, match=r"HTTP 503 .*busy"):
        run(fail())


def test_truncated_chunk_and_read_timeout_raise_client_errors() -> None:
    whole = stream_bytes()

    async def truncated() -> None:
        async with raw_server(lambda _: [whole[: len(HEAD) + 40], b"CLOSE"]) as srv:
            await stream_completion(str(srv["url"]), "m", "hi", 3, 1)

    with pytest.raises(ClientError, match="RemoteProtocolError"):
        run(truncated())

    async def silent() -> None:
        transport = LoopbackTransport(max_connections=1)
        async with (
            raw_server(lambda _: [HEAD]) as srv,
            httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(0.2)) as http,
        ):
            await stream_completion(str(srv["url"]), "m", "hi", 3, 1, http=http)

    with pytest.raises(ClientError, match="ReadTimeout"):
        run(silent())


def test_a_client_stalled_after_its_write_never_reads_a_time_shorter_than_the_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A process descheduled between handing the request to the socket and reading the clock
    # (CI: a 458-token prefill read as 0.13 ms, refused by the physics floor) must count from
    # before the write: the server can answer during the stall, and the time grows, never shrinks.
    import time

    from runner import http11

    stall_s = 0.05
    made = http11._Connection.connection_made

    def stalling(self: http11._Connection, transport: asyncio.BaseTransport) -> None:
        made(self, transport)
        write = transport.write  # type: ignore[attr-defined]

        def write_then_stall(data: bytes) -> None:
            write(data)
            time.sleep(stall_s)  # the server's reply lands in the socket meanwhile

        transport.write = write_then_stall  # type: ignore[attr-defined]

    monkeypatch.setattr(http11._Connection, "connection_made", stalling)
    whole = stream_bytes()

    async def go() -> float:
        async with raw_server(lambda _: [whole]) as srv:
            return (await stream_completion(str(srv["url"]), "m", "hi", 3, 1)).ttft_s

    ttft = run(go())
    assert isinstance(ttft, float) and ttft >= stall_s
