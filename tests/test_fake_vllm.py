"""The fake vLLM server itself (testkit/fake_vllm): its fast token events are the bytes of the
chunk format, and its plain routes answer as vLLM's do."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testkit.fake_vllm.server import FakeVllm
from testkit.fake_vllm.wire import TokenEvents, compact, sse, token_chunk
from tests.profiles import examples


@settings(max_examples=examples(50), deadline=None)
@given(
    token_id=st.integers(0, 2**31),
    text=st.text(),
    last=st.booleans(),
    prompt_ids=st.none() | st.lists(st.integers(0, 2**31), max_size=5),
    model=st.text(min_size=1),
)
def test_token_events_are_the_chunk_formats_bytes(
    token_id: int, text: str, last: bool, prompt_ids: list[int] | None, model: str
) -> None:
    events = TokenEvents("cmpl-7", model, 1234)
    expected = token_chunk(
        [token_id], text, "length" if last else None, prompt_ids, request_id="cmpl-7", model=model, created=1234
    )
    event = events.event(token_id, compact(text), last, prompt_ids)
    assert event == sse(expected)
    assert json.loads(event.removeprefix(b"data: ")) == expected


@pytest.fixture()
def fake() -> Iterator[FakeVllm]:
    with FakeVllm(model="local/demo", version="0.32.0") as server:
        yield server


def test_plain_routes_answer_as_vllms(fake: FakeVllm) -> None:
    with httpx.Client(base_url=fake.base_url, trust_env=False) as http:
        assert http.get("/health").status_code == 200
        assert http.get("/version").json() == {"version": "0.32.0"}
        (card,) = http.get("/v1/models").json()["data"]
        assert (card["id"], card["object"], card["owned_by"]) == ("local/demo", "model", "vllm")
        assert http.get("/metrics").status_code == 404  # nothing to show until a test gives it text
        fake.metrics_texts.extend(["first 1\n", "then 2\n"])
        assert [http.get("/metrics").text for _ in range(3)] == ["first 1\n", "then 2\n", "then 2\n"]
        fake.loading = True
        assert [http.get(path).status_code for path in ("/health", "/v1/models")] == [503, 503]
