"""A fake `python -m vllm.entrypoints.openai.api_server` for the adversarial tests.

It speaks just enough of vLLM's OpenAI server for the runner's real code path: /health,
/v1/models, /metrics, streaming /v1/completions with token ids and usage, and non-streaming
/v1/chat/completions. Output is deterministic (token ids derive from the prompt), so gates pass.

Like vLLM it logs its non-default arguments at startup (api key included) and starts a child
process in its own process group (vLLM's engine core). Told by environment variables how to
misbehave:

FAKE_VLLM_FAULT         exit_on_start | never_ready | exit_mid_suite | ignore_sigterm
FAKE_VLLM_FAULT_SERVER  apply the fault only to the Nth server started (1-based; default: all)
FAKE_VLLM_EXIT_AFTER    completions served before exit_mid_suite dies mid-stream (default 3)
FAKE_VLLM_TOKEN_DELAY   seconds between streamed tokens (default 0.001)
FAKE_VLLM_STUBBORN      1: the engine child ignores SIGTERM whatever the fault
FAKE_VLLM_LOG_ENV       comma-separated variable names whose values the server prints at startup
                        (the worst a real server could do with a token it was given)
FAKE_VLLM_PIDS          a folder: each server writes `<pid>` files for itself and its child, and
                        `started` gets a line per server (the ordinal FAKE_VLLM_FAULT_SERVER uses)
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

N_TOKENS = 120
PIDS = os.environ.get("FAKE_VLLM_PIDS")


def _ordinal() -> int:
    if not PIDS:
        return 1
    with open(os.path.join(PIDS, "started"), "a+") as handle:
        handle.write(f"{os.getpid()}\n")
        handle.seek(0)
        return len(handle.read().split())


ORDINAL = _ordinal()
_ONLY = os.environ.get("FAKE_VLLM_FAULT_SERVER")
FAULT = os.environ.get("FAKE_VLLM_FAULT", "") if _ONLY in (None, "", str(ORDINAL)) else ""
EXIT_AFTER = int(os.environ.get("FAKE_VLLM_EXIT_AFTER", "3"))
TOKEN_DELAY = float(os.environ.get("FAKE_VLLM_TOKEN_DELAY", "0.001"))
CHILD = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN) if {ignore} else None\ntime.sleep(600)\n"


def option(name: str, default: str | None = None) -> str | None:
    argv = sys.argv[1:]
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


PORT = int(option("--port", "8000") or 8000)
HOST = option("--host", "127.0.0.1") or "127.0.0.1"
SERVED = option("--served-model-name") or option("--model") or "fake"
SPECULATIVE = option("--speculative-config") is not None
STATE = {"completions": 0, "generated": 0, "prompt": 0}
LOCK = threading.Lock()


def token_ids(prompt: object) -> list[int]:
    seed = hashlib.sha256(json.dumps(prompt).encode()).digest()
    return [(seed[i % 32] * 257 + i * 31) % 151_000 for i in range(N_TOKENS)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        print("INFO:", self.address_string(), format % args, flush=True)

    def _json(self, body: object, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _text(self, text: str, status: int = 200) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if FAULT == "never_ready":
            self._text("loading", 503)
        elif self.path == "/health":
            self._text("")
        elif self.path == "/version":
            self._json({"version": os.environ.get("FAKE_VLLM_VERSION", "0.0.fake")})
        elif self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": SERVED, "object": "model"}]})
        elif self.path == "/metrics":
            lines = [
                "# TYPE vllm:generation_tokens_total counter",
                f'vllm:generation_tokens_total{{model_name="{SERVED}"}} {STATE["generated"]}.0',
                f'vllm:prompt_tokens_total{{model_name="{SERVED}"}} {STATE["prompt"]}.0',
            ]
            if SPECULATIVE:
                drafts = STATE["generated"] // 2
                lines += [
                    f'vllm:spec_decode_num_drafts_total{{model_name="{SERVED}"}} {drafts}.0',
                    f'vllm:spec_decode_num_draft_tokens_total{{model_name="{SERVED}"}} {drafts * 3}.0',
                    f'vllm:spec_decode_num_accepted_tokens_total{{model_name="{SERVED}"}} {drafts}.0',
                ]
            self._text("\n".join(lines) + "\n")
        else:
            self._json({"error": "not found"}, 404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if self.path == "/v1/chat/completions":
            content = body["messages"][-1]["content"]
            reply = (
                "1591 amber falcon 7 crosses the quiet river at dawn"
                if "JSON" not in content
                else ('{"name": "pencils", "count": 6, "tags": ["blue"]}')
            )
            self._json({"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]})
        elif self.path == "/v1/completions":
            self._stream(body)
        else:
            self._json({"error": "not found"}, 404)

    def _chunk(self, payload: str) -> None:
        data = f"data: {payload}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, body: dict[str, Any]) -> None:
        with LOCK:
            STATE["completions"] += 1
            number = STATE["completions"]
        ids = token_ids(body.get("prompt"))[: int(body.get("max_tokens", N_TOKENS))]
        prompt_tokens = len(str(body.get("prompt"))) // 4 + 1
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for index, token in enumerate(ids):
            if FAULT == "exit_mid_suite" and number > EXIT_AFTER and index == 10:
                print(f"FATAL: engine core died on request {number}", flush=True)
                os._exit(17)
            last = index == len(ids) - 1
            choice = {
                "index": 0,
                "text": f" t{token}",
                "token_ids": [token],
                "finish_reason": "length" if last else None,
            }
            self._chunk(json.dumps({"id": "cmpl-fake", "object": "text_completion", "choices": [choice]}))
            time.sleep(TOKEN_DELAY)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(ids),
            "total_tokens": prompt_tokens + len(ids),
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        self._chunk(json.dumps({"id": "cmpl-fake", "choices": [], "usage": usage}))
        self._chunk("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        with LOCK:
            STATE["generated"] += len(ids)
            STATE["prompt"] += prompt_tokens


def main() -> None:
    # vLLM prints its non-default arguments, the API key among them: the log is not a safe place.
    print(f"INFO: vLLM API server version 0.0.fake; args: {sys.argv[1:]}", flush=True)
    for name in filter(None, os.environ.get("FAKE_VLLM_LOG_ENV", "").split(",")):
        print(f"DEBUG: environment {name}={os.environ.get(name)}", flush=True)
    ignore = FAULT == "ignore_sigterm"
    stubborn = ignore or os.environ.get("FAKE_VLLM_STUBBORN") == "1"
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(ignore=stubborn)])
    if PIDS:
        for pid in (os.getpid(), child.pid):
            open(os.path.join(PIDS, str(pid)), "w").close()
    if ignore:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: (child.terminate(), sys.exit(0)))  # type: ignore[func-returns-value]
    if FAULT == "exit_on_start":
        print("ERROR: fake engine failed to allocate KV cache", flush=True)
        child.terminate()
        sys.exit(3)
    server = ThreadingHTTPServer((HOST, PORT), Handler)
    server.daemon_threads = True
    print(f"INFO: Uvicorn running on http://{HOST}:{PORT}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
