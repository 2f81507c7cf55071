"""The fake as vLLM's own process: what `python -m vllm.entrypoints.openai.api_server ...` runs
when testkit/fake_vllm/shim is on PYTHONPATH (`testkit.fake_vllm.PYTHONPATH`), so the runner's
real code path (runner.server.VllmServer, runner.runtime) starts, measures and stops it.

It reads --host, --port, --model, --served-model-name and --speculative-config. Its answers
are deterministic (a completion's token ids derive from its prompt), so oracle gates pass: a
completion streams up to FAKE_VLLM_ANSWER_TOKENS tokens (fewer when max_tokens is lower), one
per chunk, then the usage chunk when asked for and [DONE]; a chat request gets one short answer.
/metrics counts the tokens served (and, with a speculative config, drafts). Like vLLM it logs its
non-default arguments at startup (an api key included) and starts a child process in its own
process group (vLLM's engine core). Told by environment variables how to misbehave:

FAKE_VLLM_FAULT         exit_on_start | never_ready | exit_mid_suite | ignore_sigterm
FAKE_VLLM_FAULT_SERVER  apply the fault only to the Nth server started (1-based; default: all)
FAKE_VLLM_EXIT_AFTER    completions served before exit_mid_suite dies mid-stream (default 3)
FAKE_VLLM_TOKEN_DELAY   seconds between streamed chunks (default 0.001)
FAKE_VLLM_PREFILL_DELAY seconds before a completion's first chunk (default 0.02: a real prefill's
                        time, so its packets keep the catalog's physical floors, catalog/checks/physics.py)
FAKE_VLLM_ANSWER_TOKENS most tokens a completion streams (default 120)
FAKE_VLLM_VERSION       what GET /version answers (default 0.0.fake)
FAKE_VLLM_STUBBORN      1: the engine child ignores SIGTERM whatever the fault
FAKE_VLLM_LOG_ENV       comma-separated variable names whose values the server prints at startup
                        (the worst a real server could do with a token it was given)
FAKE_VLLM_PIDS          a folder: each server writes `<pid>` files for itself and its child, and
                        `started` gets a line per server (the ordinal FAKE_VLLM_FAULT_SERVER uses)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testkit.fake_vllm.server import Crash, FakeVllm, Script
from testkit.fake_vllm.wire import DONE, TokenEvents, chat_reply, compact, sse, usage_chunk

ENGINE_CHILD = "import signal, time\nif {ignore}:\n    signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n"
CRASH_AT_CHUNK = 10
VOCAB = 151_000


def option(argv: list[str], name: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def token_ids(prompt: object, count: int) -> list[int]:
    seed = hashlib.sha256(json.dumps(prompt).encode()).digest()
    return [(seed[i % 32] * 257 + i * 31) % VOCAB for i in range(count)]


@dataclass
class Engine:
    """What each request answers, and the counters /metrics shows."""

    model: str
    speculative: bool
    answer_tokens: int
    token_delay_s: float
    crash_after: int | None  # exit_mid_suite: completions served before one dies mid-stream
    prefill_delay_s: float = 0.02
    completions: int = 0
    generated: int = 0
    prompt_tokens: int = 0

    def respond(self, body: dict[str, Any]) -> Script:
        if "messages" in body:
            asked = str(body["messages"][-1]["content"])
            answer = (
                '{"name": "pencils", "count": 6, "tags": ["blue"]}'
                if "JSON" in asked
                else "1591 amber falcon 7 crosses the quiet river at dawn"
            )
            return Script(chat_reply=chat_reply(answer, finish_reason="stop", model=self.model))
        self.completions += 1
        count = min(int(body.get("max_tokens") or self.answer_tokens), self.answer_tokens)
        ids = token_ids(body.get("prompt"), count)
        prompt_tokens = len(str(body.get("prompt"))) // 4 + 1
        events = TokenEvents("cmpl-fake", self.model, 0)
        chunks = [events.event(token, compact(f" t{token}"), i == count - 1) for i, token in enumerate(ids)]
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(sse(usage_chunk(prompt_tokens, count, 0, model=self.model)))
        chunks.append(DONE)
        self.generated += count
        self.prompt_tokens += prompt_tokens
        crash = None
        if self.crash_after is not None and self.completions > self.crash_after:
            crash = Crash(CRASH_AT_CHUNK, f"FATAL: engine core died on request {self.completions}")
        return Script(chunks=chunks, pause_s=self.token_delay_s, prefill_s=self.prefill_delay_s, crash=crash)

    def metrics(self) -> str:
        label = f'{{model_name="{self.model}"}}'
        lines = [
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{label} {self.generated}.0",
            f"vllm:prompt_tokens_total{label} {self.prompt_tokens}.0",
        ]
        if self.speculative:
            drafts = self.generated // 2
            lines += [
                f"vllm:spec_decode_num_drafts_total{label} {drafts}.0",
                f"vllm:spec_decode_num_draft_tokens_total{label} {drafts * 3}.0",
                f"vllm:spec_decode_num_accepted_tokens_total{label} {drafts}.0",
            ]
        return "\n".join(lines) + "\n"


def ordinal(pids: str | None) -> int:
    """This server's place among those started with the same FAKE_VLLM_PIDS folder (1-based)."""
    if not pids:
        return 1
    with open(os.path.join(pids, "started"), "a+") as handle:
        handle.write(f"{os.getpid()}\n")
        handle.seek(0)
        return len(handle.read().split())


def fault(env: Mapping[str, str], place: int) -> str:
    """The fault this server plays: FAKE_VLLM_FAULT, unless FAKE_VLLM_FAULT_SERVER names another."""
    only = env.get("FAKE_VLLM_FAULT_SERVER")
    return env.get("FAKE_VLLM_FAULT", "") if only in (None, "", str(place)) else ""


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    env = os.environ
    host = option(argv, "--host") or "127.0.0.1"
    port = int(option(argv, "--port") or 8000)
    served = option(argv, "--served-model-name") or option(argv, "--model") or "fake"
    version = env.get("FAKE_VLLM_VERSION", "0.0.fake")
    failing = fault(env, ordinal(env.get("FAKE_VLLM_PIDS")))
    # vLLM prints its non-default arguments, the API key among them: the log is not a safe place.
    print(f"INFO: vLLM API server version {version}; args: {argv}", flush=True)
    for name in filter(None, env.get("FAKE_VLLM_LOG_ENV", "").split(",")):
        print(f"DEBUG: environment {name}={env.get(name)}", flush=True)
    ignore = failing == "ignore_sigterm"
    stubborn = ignore or env.get("FAKE_VLLM_STUBBORN") == "1"
    child = subprocess.Popen([sys.executable, "-c", ENGINE_CHILD.format(ignore=stubborn)])
    if pids := env.get("FAKE_VLLM_PIDS"):
        for pid in (os.getpid(), child.pid):
            Path(pids, str(pid)).touch()
    if ignore:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if failing == "exit_on_start":
        print("ERROR: fake engine failed to allocate KV cache", flush=True)
        child.terminate()
        sys.exit(3)
    engine = Engine(
        served,
        option(argv, "--speculative-config") is not None,
        int(env.get("FAKE_VLLM_ANSWER_TOKENS", "120")),
        float(env.get("FAKE_VLLM_TOKEN_DELAY", "0.001")),
        int(env.get("FAKE_VLLM_EXIT_AFTER", "3")) if failing == "exit_mid_suite" else None,
        float(env.get("FAKE_VLLM_PREFILL_DELAY", "0.02")),
    )
    server = FakeVllm(served, version, log=lambda line: print(line, flush=True))
    server.responder = engine.respond
    server.metrics_source = engine.metrics
    server.loading = failing == "never_ready"
    try:
        asyncio.run(serve(server, host, port, stop_on_sigterm=not ignore))
    except OSError as error:  # as uvicorn says it
        print(f"ERROR:    [Errno {error.errno}] error while attempting to bind on address ({host!r}, {port}): "
              f"{(error.strerror or '').lower()}", flush=True)  # fmt: skip
        child.terminate()
        sys.exit(1)
    child.terminate()


async def serve(server: FakeVllm, host: str, port: int, stop_on_sigterm: bool) -> None:
    await server.start(host, port)
    print(f"INFO: Uvicorn running on http://{host}:{port}", flush=True)
    stopped = asyncio.Event()
    if stop_on_sigterm:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
    await stopped.wait()
    await server.stop()
