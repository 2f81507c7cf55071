"""Resuming a campaign from its finished attempts, and the concurrency ladder's identity check,
on schema-2 records (token arrays are array('I'), times integer microseconds)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from catalog.errors import UserError
from catalog.files import write_file
from catalog.model.packet import ContextPoint, Ladder, ServerRun
from catalog.packets.canonical import pretty_json
from catalog.recipes.compose import LaunchCommand
from runner import ladders
from runner.attempt import attempt_paths, finished_attempt
from runner.client import StreamResult
from runner.runtime import LocalRuntime
from runner.server import ServerError
from runner.settings import MeasurementSettings
from testkit.samples import make_rows, make_server, strict_suite


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
    arm = SimpleNamespace(id="tp1-ngram3", spec_depth=3, command=SimpleNamespace(model_id="demo"))
    settings = MeasurementSettings(strict_suite(), None, 120, 1234, 60.0)  # type: ignore[arg-type]
    ladder, _ = asyncio.run(ladders._concurrency("http://127.0.0.1:9", arm, oracle_rows, settings, lambda _: None))  # type: ignore[arg-type]
    identical = {point.users: point.identical_to_oracle for point in ladder.concurrency}
    assert identical == {1: True, 2: True, 4: True, 8: False, 16: False, 32: False, 64: False}
    assert all(point.divergence is None for point in ladder.concurrency)  # no plain-model ladder to tell apart
    assert json.loads(pretty_json(ladder.model_dump(mode="json")))["kind"] == "concurrency"


class _FakeLadderServer:
    """Stands in for VllmServer in runner.ladders: checks the folder it is given, like the real
    one (a non-empty compile cache refuses to start), or fails to start."""

    started: list[Path] = []

    def __init__(self, argv: list[str], *, port: int, run_dir: Path, fail: str = "", **kwargs: Any) -> None:
        self.run_dir, self.fail = run_dir, fail
        self.base_url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> _FakeLadderServer:
        cache = self.run_dir / "compile-cache"
        if self.fail:
            raise ServerError(self.fail, "the log tail\nsecond line")
        if cache.exists() and any(cache.iterdir()):
            raise ServerError(f"compile cache {cache} is not empty; use a fresh run dir")
        cache.mkdir(parents=True)
        _FakeLadderServer.started.append(self.run_dir)
        return self

    def __exit__(self, *exc: object) -> None:
        return None


ORACLE_OUTPUTS = {(2048, "prose"): [5, 6, 7], (2048, "code"): [8, 9]}


def _ladder_arm(arm_id: str, depth: int) -> Any:
    command = LaunchCommand("demo", [], {})
    return SimpleNamespace(id=arm_id, spec_depth=depth, command=command)


@pytest.fixture()
def fake_ladders(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Ladders without vLLM: the context ladder of an arm 'measures' ORACLE_OUTPUTS, and compares
    them with the oracle outputs it is given, as the real one does."""
    seen: dict[str, Any] = {}
    _FakeLadderServer.started = []
    monkeypatch.setattr(ladders, "VllmServer", _FakeLadderServer)
    monkeypatch.setattr(ladders, "ladder_command", lambda arm: arm.command)

    async def context(base_url: str, arm: Any, oracle: dict[Any, Any], *args: Any) -> tuple[Ladder, dict[Any, Any]]:
        seen[arm.id] = dict(oracle)
        points = [
            ContextPoint(
                depth_tokens=depth,
                content_class=cls,
                decode_tok_s=100.0,
                ttft_ms=5.0,
                identical_to_oracle=None if arm.spec_depth == 0 else oracle.get((depth, cls)) == ids,
            )
            for (depth, cls), ids in ORACLE_OUTPUTS.items()
        ]
        return Ladder(arm=arm.id, kind="context", context=points), dict(ORACLE_OUTPUTS)

    monkeypatch.setattr(ladders, "_context", context)
    return seen


def _run(arm: Any, run_dir: Path, oracle: dict[Any, Any], said: list[str]) -> tuple[list[Ladder], dict[Any, Any]]:
    runtime = LocalRuntime(Path("python"))  # VllmServer is a stand-in: nothing is started
    settings = MeasurementSettings(strict_suite(), None, 120, 1234, 60.0)  # type: ignore[arg-type]
    return ladders.run_ladders(["context"], arm, [], oracle, runtime, settings, run_dir, 4096, said.append)  # type: ignore[arg-type]


def test_an_interrupted_ladder_starts_again_on_an_empty_folder(tmp_path: Path, fake_ladders: dict[str, Any]) -> None:
    leftover = tmp_path / "tp1-oracle" / "ladder-server" / "compile-cache" / "inductor"
    leftover.mkdir(parents=True)  # what an interrupted ladder server left
    (done,), _ = _run(_ladder_arm("tp1-oracle", 0), tmp_path, {}, [])
    assert done.kind == "context" and _FakeLadderServer.started == [tmp_path / "tp1-oracle" / "ladder-server"]
    assert not leftover.exists()


def test_on_resume_the_oracle_context_outputs_are_read_back(tmp_path: Path, fake_ladders: dict[str, Any]) -> None:
    """The oracle's context ladder finished before an interruption; the speculative arm's, run
    after the resume, compares with the oracle's recorded outputs, not with nothing."""
    oracle, spec = _ladder_arm("tp1-oracle", 0), _ladder_arm("tp1-ngram3", 3)
    _, first = _run(oracle, tmp_path, {}, [])
    said: list[str] = []
    _FakeLadderServer.started = []
    _, resumed = _run(oracle, tmp_path, {}, said)  # the resumed campaign: nothing is measured
    assert _FakeLadderServer.started == [] and "tp1-oracle context ladder: finished earlier, reusing" in said
    assert resumed == first == ORACLE_OUTPUTS
    (spec_ladder,), _ = _run(spec, tmp_path, resumed, [])
    assert fake_ladders["tp1-ngram3"] == ORACLE_OUTPUTS
    assert all(point.identical_to_oracle for point in spec_ladder.context)


def test_lost_context_outputs_are_an_error_naming_the_file(tmp_path: Path, fake_ladders: dict[str, Any]) -> None:
    oracle = _ladder_arm("tp1-oracle", 0)
    _run(oracle, tmp_path, {}, [])
    ladders.context_outputs_path(tmp_path, oracle.id).unlink()
    with pytest.raises(UserError, match="outputs were not kept") as caught:
        _run(oracle, tmp_path, {}, [])
    assert caught.value.file == str(ladders.context_outputs_path(tmp_path, oracle.id))


def test_a_ladder_failure_is_one_line_naming_the_run_folder(
    tmp_path: Path, fake_ladders: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: Any, **kwargs: Any) -> _FakeLadderServer:
        return _FakeLadderServer(*args, **kwargs, fail="vLLM server exited with code 1 during startup")

    monkeypatch.setattr(ladders, "VllmServer", failing)
    with pytest.raises(UserError) as caught:
        _run(_ladder_arm("tp1-oracle", 0), tmp_path, {}, [])
    error = caught.value
    assert "\n" not in error.message
    assert "tp1-oracle ladder failed, no packet written" in error.message and str(tmp_path) in error.message
    assert "exited with code 1" in error.message
    assert error.file == str(tmp_path / "tp1-oracle" / "ladder-server.log")


def test_a_concurrency_divergence_is_told_batch_shape_or_speculative() -> None:
    """A speculative arm at 64 sequences against the sequential oracle: the plain model's outputs at
    the same level tell a batch-shape divergence (it gave the same) from a speculative one."""
    mine = [[1, 2, 3], [4, 5, 6]]
    assert ladders.divergence_cause(mine, [[1, 2, 3], [4, 5, 6]], speculative=True) == "batch shape"
    assert ladders.divergence_cause(mine, [[1, 2, 3], [4, 5, 7]], speculative=True) == "speculative"
    assert ladders.divergence_cause(mine, None, speculative=True) is None  # no plain-model ladder: cannot say
    assert ladders.divergence_cause(mine, None, speculative=False) == "batch shape"  # the oracle arm's own ladder


def test_concurrency_levels_are_the_requested_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    oracle_rows = make_rows(ms_per_token=20.0)
    by_prompt = {p.prompt: row.token_ids.tolist() for p, row in zip(strict_suite().prompts, oracle_rows, strict=True)}

    async def fake_stream(base_url: str, model: str, prompt: str, *args: Any, **kwargs: Any) -> StreamResult:
        ids = by_prompt[prompt]
        times = [0.01 * (i + 1) for i in range(len(ids))]
        return StreamResult(ids, "", 0.01, times, 1.0, len(ids), 10, len(ids), 0, "length", None)

    monkeypatch.setattr(ladders, "stream_completion", fake_stream)
    arm: Any = SimpleNamespace(id="tp1-oracle", spec_depth=0, command=SimpleNamespace(model_id="demo"))
    settings = MeasurementSettings(strict_suite(), None, 120, 1234, 60.0)  # type: ignore[arg-type]
    ladder, _ = asyncio.run(
        ladders._concurrency("http://127.0.0.1:9", arm, oracle_rows, settings, lambda _: None, [1, 2])
    )
    assert [point.users for point in ladder.concurrency] == [1, 2]
    assert all(point.identical_to_oracle for point in ladder.concurrency)
