"""One fake vLLM OpenAI server for the tests, and the wire format bench's fast server shares.

- wire.py: the bytes vLLM 0.32 sends (SSE chunks, usage, chat replies, HTTP framing), read from
  its source;
- http.py: the small asyncio HTTP/1.1 server under the fake (and under bench/fastserver.py);
- server.py: `FakeVllm`, scripted per request (`Script`: chunks, pauses, drops, status, chat
  replies), with /health, /version, /v1/models and /metrics; in a test, `with FakeVllm() as fake`;
- process.py: the same server as vLLM's own process, with its faults;
- shim/: a `vllm.entrypoints.openai.api_server` module that starts process.py; `python_for_fake`
  writes a `python` that finds it, as runner.runtime runs `python -m vllm.entrypoints.openai.api_server`.

Stdlib only: a fake container runs it under the system Python.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHIM = Path(__file__).resolve().parent / "shim"
PYTHONPATH = f"{SHIM}{os.pathsep}{REPO}"  # the shim's `vllm` first, then testkit itself


def python_for_fake(folder: Path) -> Path:
    """A `python` in `folder` whose `-m vllm.entrypoints.openai.api_server` is the fake."""
    python = folder / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{PYTHONPATH}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python
