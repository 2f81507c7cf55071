"""Resuming a campaign from its finished attempts, and the concurrency ladder's identity check,
on schema-2 records (token arrays are array('I'), times integer microseconds)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from catalog.canonical import pretty_json
from catalog.files import write_file
from catalog.packet import ServerRun
from catalog.samples import make_rows, make_server, strict_suite
from runner import ladders
from runner.attempt import Workload, attempt_paths, finished_attempt
from runner.client import StreamResult


def _record(run_dir: Path, run: ServerRun | dict[str, Any]) -> Path:
    path, _ = attempt_paths(run_dir, "tp1-oracle", "A")
    document = run.model_dump(mode="json") if isinstance(run, ServerRun) else run
    write_file(path, pretty_json(document))  # as runner/attempt.py records it
    return path


def test_a_finished_attempt_is_reused_as_recorded(tmp_path: Path) -> None:
    run = make_server("A", make_rows(ms_per_token=20.0))
    _record(tmp_path, run)
    reused = finished_attempt(tmp_path, "tp1-oracle", "A")
    assert reused == run
    assert reused is not None and reused.rows[0].token_times_us == run.rows[0].token_times_us


def test_a_failed_attempt_is_measured_again(tmp_path: Path) -> None:
    _record(tmp_path, ServerRun(label="A", status="failed", error="boom"))
    assert finished_attempt(tmp_path, "tp1-oracle", "A") is None


def test_an_attempt_recorded_by_a_schema_1_runner_is_measured_again(tmp_path: Path) -> None:
    """Schema 1 rows held times in milliseconds and derived rates, and canaries no answers: such a
    record cannot go into a schema-2 packet, so that server is measured again, and the runner says why."""
    current = make_server("A", make_rows(ms_per_token=20.0)).model_dump(mode="json")
    rows = [
        {
            **{k: v for k, v in row.items() if k != "token_times_us"},
            "token_ids": [1862, 1983, 2357],
            "completion_tokens": 3,
            "token_times_ms": [132.649, 141.523, 150.468],
            "ttft_ms": 132.649,
            "decode_tok_s": None,
        }
        for row in current["rows"]
    ]
    canaries = [{"id": c["id"], "passed": c["passed"], "detail": c["detail"]} for c in current["canaries"]]
    _record(tmp_path, {**current, "rows": rows, "canaries": canaries})
    said: list[str] = []
    assert finished_attempt(tmp_path, "tp1-oracle", "A", said.append) is None
    (message,) = said
    assert "tp1-oracle server A" in message and "measuring again" in message


def test_concurrency_ladder_compares_outputs_with_the_oracle_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Oracle rows hold array('I'), the client returns lists: equal tokens must count as identical."""
    oracle_rows = make_rows(ms_per_token=20.0)
    by_prompt = {row.prompt_id: row.token_ids.tolist() for row in oracle_rows}
    prompts = {p.prompt: p.id for p in strict_suite().prompts}
    calls = {"made": 0}  # c1 is call 1, c2 calls 2-3, c4 calls 4-7: c8 and up from call 8

    async def fake_stream(base_url: str, model: str, prompt: str, *args: Any, **kwargs: Any) -> StreamResult:
        ids = list(by_prompt[prompts[prompt]])
        calls["made"] += 1
        if calls["made"] >= 8:
            ids[5] += 1  # from c8 on, the arm's output differs
        return StreamResult(
            token_ids=ids,
            text="",
            ttft_s=0.04,
            token_times_s=[0.04 + 0.02 * i for i in range(len(ids))],
            e2e_s=0.04 + 0.02 * len(ids),
            chunk_count=len(ids),
            prompt_tokens=10,
            completion_tokens=len(ids),
            cached_tokens=0,
            finish_reason="length",
            prompt_token_ids=None,
        )

    monkeypatch.setattr(ladders, "stream_completion", fake_stream)
    arm = SimpleNamespace(id="tp1-ngram3", command=SimpleNamespace(model_id="demo"))
    workload = Workload(strict_suite(), None, 120, 1234, 60.0)  # type: ignore[arg-type]
    ladder = asyncio.run(ladders._concurrency("http://127.0.0.1:9", arm, oracle_rows, workload, lambda _: None))  # type: ignore[arg-type]
    identical = {point.users: point.identical_to_oracle for point in ladder.concurrency}
    assert identical == {1: True, 2: True, 4: True, 8: False, 16: False, 32: False, 64: False}
    assert json.loads(pretty_json(ladder.model_dump(mode="json")))["kind"] == "concurrency"
