"""A fast streaming completions server on loopback: vLLM's exact SSE chunks, as fast as it can.

Stdlib only (asyncio protocols, no HTTP framework), so it costs a few microseconds per token
and the client under test is the bottleneck. Every request streams `max_tokens` tokens in the
chunk format vLLM 0.32 writes (one HTTP chunk per SSE event, token ids in every chunk, the
prompt's token ids in the first chunk when `return_token_ids` is set, a usage chunk when
`stream_options.include_usage` is set, then `data: [DONE]`). That format and the HTTP layer are
the tests' fake vLLM's (testkit/fake_vllm/wire.py, http.py), written once.

Why not the fake itself: it plays each request as a script, one socket write per event (so a
test's chunks reach the socket as it wrote them), and that is too slow to keep our client the
bottleneck. `python -m bench.server_speed --quick` (2026-12-04 14:30 UTC, 2 cores, load average
6.0-6.8 from other work) gave, at one stream in flight, 11,274 tok/s absorbed from the fake
against 20,866 from this server, and at 64 streams 6.9 µs of server CPU per token against 3.0
here while our client spent 9.7-11.9: the fake would have set the pace, and taken CPU from the
client on a two-core host. Five other runs between 14:22 and 14:31 agreed: the fake 8,200-11,800
tok/s at one stream, this server 15,000-33,000; at 16 and 64 streams the fake's CPU per token
2.1-3 times this server's. This server writes 64 events per socket write instead, and keeps the
emit log below.

Two pacing modes, set per run with POST /bench/mode {"ttft_s": .., "itl_s": ..}:
- throughput (both 0): an engine loop writes BURST tokens (one event each) to every stream per
  step; a stream whose socket is full waits until its client has read (flow control).
- paced: the first token `ttft_s` after the request arrived, then one every `itl_s`.

The server records when it received each request and when it wrote each token
(time.perf_counter, i.e. CLOCK_MONOTONIC, comparable across processes on Linux):
GET /emit-log?since=N[&emits=0] returns those records. POST /bench/mark {"label": ..} starts a new
segment so one log can hold several runs.

    python -m bench.fastserver [--port 0]   # prints {"port": N} on stdout when listening
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from testkit.fake_vllm.http import Connection, Request, bind, listen
from testkit.fake_vllm.wire import DONE, LAST_CHUNK, TokenEvents, http_chunk, model_list, sse, usage_chunk

MODEL = "local/demo-qwen3-tiny"
MODEL_ROOT = "models/demo"
VOCAB = 4096
FINGERPRINT = "vllm-0.32.0-32ef0823"
BURST = 64
WORDS = [
    "",
    "the",
    "service",
    "latency",
    "rose",
    "after",
    "deploy",
    "and",
    "the",
    "pool",
    "of",
    "connections",
    "reached",
    "its",
    "limit",
    "so",
    "requests",
    "queued",
    "behind",
    "the",
    "primary",
    "database",
    "while",
    "on",
    "call",
    "engineers",
    "rolled",
    "back",
    "the",
    "change",
    "and",
    "wrote",
    "action",
    "items",
    "for",
    "capacity",
    "planning",
    "review",
    "budget",
    "owner",
    "due",
    "date",
    "retry",
    "backoff",
    "timeout",
    "alert",
][1:]


@dataclass
class Record:
    """One completion request as the server saw it."""

    seq: int
    segment: int
    prompt_key: str
    prompt_tokens: int
    max_tokens: int
    arrival: float
    emits: list[float] = field(default_factory=list)
    finish: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "segment": self.segment,
            "prompt_key": self.prompt_key,
            "prompt_tokens": self.prompt_tokens,
            "max_tokens": self.max_tokens,
            "arrival": self.arrival,
            "emits": self.emits,
            "finish": self.finish,
        }


class State:
    def __init__(self) -> None:
        self.ttft_s = 0.0
        self.itl_s = 0.0
        self.records: list[Record] = []
        self.segments: list[dict[str, Any]] = [{"segment": 0, "label": "start", "at": time.perf_counter(), "seq": 0}]
        self.request_counter = 0
        # Token texts, JSON-encoded once.
        self.texts = [json.dumps((" " if i % 3 else "") + WORDS[i % len(WORDS)]).encode() for i in range(1024)]


STATE = State()


def _token_id(seq: int, index: int) -> int:
    return (seq * 7919 + index * 31 + 11) % VOCAB


DONE_CHUNK = http_chunk(DONE)


class Completion:
    """Builds the byte chunks of one streamed completion."""

    def __init__(self, seq: int, model: str, prompt_ids: list[int] | None, prompt_tokens: int, created: int) -> None:
        self.seq = seq
        self.prompt_ids = prompt_ids
        self.prompt_tokens = prompt_tokens
        self.request_id = f"cmpl-{seq:016x}"
        self.model = model
        self.created = created
        self.events = TokenEvents(self.request_id, model, created)

    def token(self, index: int, last: bool) -> bytes:
        prompt_ids = self.prompt_ids if index == 0 else None
        text = STATE.texts[index % len(STATE.texts)]
        return http_chunk(self.events.event(_token_id(self.seq, index), text, last, prompt_ids))

    def usage(self, completion_tokens: int) -> bytes:
        chunk = usage_chunk(
            self.prompt_tokens,
            completion_tokens,
            0,
            request_id=self.request_id,
            model=self.model,
            created=self.created,
            system_fingerprint=FINGERPRINT,
        )
        return http_chunk(sse(chunk))


def _prompt_tokens(prompt: Any) -> tuple[int, list[int] | None, str]:
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return len(prompt), list(prompt), json.dumps(prompt[:16])
    text = prompt if isinstance(prompt, str) else json.dumps(prompt)
    count = max(1, len(text) // 4)  # about four bytes per token, as BPE on English text
    ids = [(ord(c) * 13 + i) % VOCAB for i, c in enumerate(text[: count * 4 : 4])]
    return count, ids, text[:96]


async def handle(request: Request, connection: Connection) -> None:
    if request.method == "POST" and request.path == "/v1/completions":
        await _completion(connection, request.json(), request.arrival)
    elif request.method == "GET" and request.path == "/v1/models":
        connection.json(200, model_list(MODEL, root=MODEL_ROOT, max_model_len=4096))
    elif request.method == "GET" and request.path in ("/health", "/metrics"):
        connection.text(200, "")
    elif request.method == "GET" and request.path == "/emit-log":
        since = int(request.query.get("since", ["0"])[0])
        connection.json(200, _log(since, request.query.get("emits", ["1"])[0] != "0"))
    elif request.method == "POST" and request.path == "/bench/mode":
        options = request.json()
        STATE.ttft_s = float(options.get("ttft_s", 0.0))
        STATE.itl_s = float(options.get("itl_s", 0.0))
        connection.json(200, {"ttft_s": STATE.ttft_s, "itl_s": STATE.itl_s})
    elif request.method == "POST" and request.path == "/bench/mark":
        label = str(request.json().get("label", ""))
        segment = {"segment": len(STATE.segments), "label": label, "at": time.perf_counter()}
        segment["seq"] = STATE.request_counter
        STATE.segments.append(segment)
        connection.json(200, segment)
    else:
        connection.json(404, {"error": {"message": f"no route {request.method} {request.path}", "code": 404}})


async def _completion(connection: Connection, request: dict[str, Any], arrival: float) -> None:
    STATE.request_counter += 1
    seq = STATE.request_counter
    max_tokens = int(request.get("max_tokens") or 16)
    prompt_tokens, prompt_ids, key = _prompt_tokens(request.get("prompt", ""))
    record = Record(seq, len(STATE.segments) - 1, key, prompt_tokens, max_tokens, arrival)
    STATE.records.append(record)
    want_ids = bool(request.get("return_token_ids"))
    usage = bool((request.get("stream_options") or {}).get("include_usage"))
    completion = Completion(
        seq, str(request.get("model") or MODEL), prompt_ids if want_ids else None, prompt_tokens, int(time.time())
    )
    if not request.get("stream"):
        connection.json(400, {"error": {"message": "this benchmark server only streams", "code": 400}})
        return
    connection.start_stream()
    job = Job(connection, record, completion, usage)
    if STATE.ttft_s or STATE.itl_s:
        await _paced(job, STATE.ttft_s, STATE.itl_s)
    else:
        await ENGINE.run_job(job)


async def _paced(job: Job, ttft_s: float, itl_s: float) -> None:
    """First token ttft_s after arrival, then one every itl_s (timers, no busy waiting)."""
    clock = time.perf_counter
    arrival = job.record.arrival
    connection = job.connection
    await asyncio.sleep(max(0.0, arrival + ttft_s - clock()))
    first = clock()
    for index in range(job.record.max_tokens):
        if index:
            await asyncio.sleep(max(0.0, first + index * itl_s - clock()))
        await connection.drain()
        if connection.closed:
            return
        job.emit()


class Job:
    """One streamed completion: `emit` writes its next token (and the tail after the last)."""

    def __init__(self, connection: Connection, record: Record, completion: Completion, usage: bool) -> None:
        self.connection = connection
        self.record = record
        self.completion = completion
        self.usage = usage
        self.index = 0
        self.done: asyncio.Future[None] | None = None

    def emit(self, count: int = 1) -> bool:
        """Write the next `count` tokens (one SSE event each) in one socket write; True when the
        completion is finished. Every token of the write gets the write's time."""
        record = self.record
        index = self.index
        end = min(record.max_tokens, index + count)
        last = end == record.max_tokens
        token = self.completion.token
        chunks = [token(i, i == record.max_tokens - 1) for i in range(index, end)]
        if last:
            chunks.append((self.completion.usage(record.max_tokens) if self.usage else b"") + DONE_CHUNK + LAST_CHUNK)
        now = time.perf_counter()
        record.emits.extend([now] * (end - index))
        self.connection.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        self.index = end
        if last:
            record.finish = time.perf_counter()
        return last


class Engine:
    """Throughput mode: every step writes BURST tokens (one SSE event each, in one socket write)
    to each stream whose client keeps up, then yields once to the event loop. Streams whose socket
    is full skip steps until their client has read; when all are blocked the engine sleeps.
    (One write per event would make the server's send() calls, not the client, the bottleneck;
    a client that is behind receives many events per read either way.)"""

    def __init__(self) -> None:
        self.jobs: list[Job] = []
        self.wake: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None

    async def run_job(self, job: Job) -> None:
        loop = asyncio.get_running_loop()
        if self.wake is None:
            self.wake = asyncio.Event()
            self.task = loop.create_task(self._loop())
        job.done = loop.create_future()
        self.jobs.append(job)
        self.wake.set()
        await job.done

    async def _loop(self) -> None:
        assert self.wake is not None
        while True:
            if not self.jobs:
                self.wake.clear()
                await self.wake.wait()
                continue
            wrote = False
            finished = []
            for job in self.jobs:
                connection = job.connection
                if connection.closed:
                    finished.append(job)
                elif connection.can_write.is_set():
                    wrote = True
                    if job.emit(BURST):
                        finished.append(job)
            for job in finished:
                self.jobs.remove(job)
                if job.done is not None and not job.done.done():
                    job.done.set_result(None)
            if wrote:
                await asyncio.sleep(0)
            else:  # every client is behind: wait for one to drain (its connection calls nudge)
                self.wake.clear()
                await self.wake.wait()

    def nudge(self) -> None:
        """A connection drained or closed: a waiting engine looks at its jobs again."""
        if self.wake is not None:
            self.wake.set()


ENGINE = Engine()


def _log(since: int, emits: bool) -> dict[str, Any]:
    """Requests after `since`; with emits=0 only each request's token count, not its times."""
    records = []
    for record in STATE.records:
        if record.seq > since:
            entry = record.as_json()
            entry["tokens"] = len(record.emits)
            if not emits:
                del entry["emits"]
            records.append(entry)
    return {"pid": os.getpid(), "segments": STATE.segments, "records": records}


async def serve(port: int) -> None:
    sock = bind("127.0.0.1", port)
    bound = sock.getsockname()[1]
    server, _ = await listen(sock, handle, on_writable=ENGINE.nudge)
    print(json.dumps({"port": bound, "pid": os.getpid()}), flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args(argv)
    try:
        asyncio.run(serve(options.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
