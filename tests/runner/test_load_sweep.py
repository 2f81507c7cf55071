"""The load sweep's scheduler and per-request/per-level records against a scripted streaming
server (testkit/fake_vllm): outputs checked against the oracle per request, open-loop
requests sent on their Poisson schedule however slow the server, failures recorded, finished
levels kept for a resume, /metrics folded into gauge peaks and counter deltas."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from catalog.model.load_sweep import Slo, poisson_offsets_ms
from catalog.model.metrics import first_divergence
from catalog.model.packet import Ladder, PromptRow
from catalog.recipes.compose import LaunchCommand
from runner import ladders, load_sweep
from runner.client import ClientError, StreamResult
from runner.load_sweep_metrics import MetricsSummary, read_wanted
from runner.plan import LoadSweepOptions
from runner.runtime import LocalRuntime
from runner.settings import MeasurementSettings
from testkit.fake_vllm.server import FakeVllm, Script
from testkit.fake_vllm.wire import sse, token_chunk, usage_chunk
from testkit.samples import make_rows, strict_suite

SUITE = strict_suite()
TOKENS = 6  # every answer and oracle output is this long (max_tokens)
ORACLE_ROWS = make_rows(ms_per_token=20.0, n_tokens=TOKENS)
ORACLE = {row.prompt_id: row.token_ids.tolist() for row in ORACLE_ROWS}
PROMPT_IDS = {p.prompt: p.id for p in SUITE.prompts}


def answer(ids: list[int], pause_s: float = 0.0, status: int = 200) -> Script:
    chunks = [sse(token_chunk([token], f" t{token}")) for token in ids]
    chunks += [sse(usage_chunk(9, len(ids))), sse("[DONE]")]
    return Script(chunks=chunks, pause_s=pause_s, status=status)


def oracle_answer(body: dict[str, Any], pause_s: float = 0.0) -> Script:
    return answer(ORACLE[PROMPT_IDS[body["prompt"]]], pause_s)


@pytest.fixture()
def server() -> Iterator[FakeVllm]:
    with FakeVllm() as fake:
        fake.responder = oracle_answer
        yield fake


def sweep(
    fake: FakeVllm,
    tmp_path: Path,
    said: list[str] | None = None,
    oracle: list[PromptRow] = ORACLE_ROWS,
    alone: Sequence[float] = (),
    **options: Any,
) -> Ladder:
    arm = SimpleNamespace(id="tp1-oracle", command=SimpleNamespace(model_id="demo"))
    settings = MeasurementSettings(SUITE, None, len(oracle[0].token_ids), 1234, 60.0)  # type: ignore[arg-type]
    load = LoadSweepOptions.model_validate({"users": [1, 2], "rates_rps": [20.0], "requests_per_level": 5} | options)
    kept = load_sweep.levels_path(tmp_path, "tp1-oracle")
    run = load_sweep.run_load_sweep(
        fake.base_url,
        arm,  # type: ignore[arg-type]
        oracle,
        settings,
        load,
        64,
        kept,
        (said if said is not None else []).append,
        alone,
    )
    return asyncio.run(run)


def test_levels_record_every_request_and_its_identity(server: FakeVllm, tmp_path: Path) -> None:
    said: list[str] = []
    ladder = sweep(server, tmp_path, said)
    assert ladder.kind == "load" and ladder.load is not None
    levels = ladder.load.levels
    assert [(level.mode, level.users, level.rate_rps) for level in levels] == [
        ("closed", 1, None),
        ("closed", 2, None),
        ("open", None, 20.0),
    ]
    for level in levels:
        assert [r.prompt_id for r in level.requests] == [SUITE.prompts[k].id for k in range(5)]
        assert all(r.identical_to_oracle and r.output_tokens == TOKENS for r in level.requests)
        assert level.all_identical and level.client_cpu_s >= 0
        # ITL is counted between distinct arrivals: none where a whole stream came in one read
        assert level.itl_ms is None or level.itl_ms.p50_ms > 0
        assert all(r.ttft_ms is not None and r.e2e_ms is not None and r.e2e_ms >= r.ttft_ms for r in level.requests)
    # closed loop at one user: each request is due when the one before it finished
    c1 = levels[0].requests
    for before, after in itertools.pairwise(c1):
        assert after.planned_ms == pytest.approx(before.sent_ms + (before.e2e_ms or 0), abs=1.0)
    assert levels[2].requests[0].planned_ms == poisson_offsets_ms(20.0, 5, 1)[0]
    lines = [line for line in said if line.startswith("tp1-oracle load ")]
    assert len(lines) == 3 and all("identical to the oracle" in line and "lag p99" in line for line in lines)
    assert "5/5 identical" in lines[0]


def test_a_divergent_output_names_its_first_different_token(server: FakeVllm, tmp_path: Path) -> None:
    def differs(body: dict[str, Any]) -> Script:
        ids = ORACLE[PROMPT_IDS[body["prompt"]]]
        return (
            answer([*ids[:3], ids[3] + 1, *ids[4:]])
            if PROMPT_IDS[body["prompt"]] == SUITE.prompts[1].id
            else answer(ids)
        )

    server.responder = differs
    level = sweep(server, tmp_path, users=[1], rates_rps=[50.0]).load.levels[0]  # type: ignore[union-attr]
    second = level.requests[1]
    assert second.identical_to_oracle is False and second.first_divergence == 3
    assert level.identical == 4 and not level.all_identical
    assert level.first_diverging_request is second


def test_responses_delivered_in_bursts_leave_a_level_without_a_per_user_rate(server: FakeVllm, tmp_path: Path) -> None:
    """The loaded CI host's delivery replayed through the real client: each response's first token,
    then its other 39 tokens in two writes 20 ms apart. The client times at most three reads, so the level
    has no per-user rate (39 tokens over 20 ms would say 1,950 tok/s) and its line says why."""
    rows = make_rows(ms_per_token=20.0, n_tokens=40)
    oracle = {row.prompt_id: row.token_ids.tolist() for row in rows}

    def bursts(body: dict[str, Any]) -> Script:
        ids = oracle[PROMPT_IDS[body["prompt"]]]
        events = [sse(token_chunk([token], f" t{token}")) for token in ids]
        end = sse(usage_chunk(9, len(ids))) + sse("[DONE]")
        return Script(chunks=[events[0], b"".join(events[1:20]), b"".join(events[20:]) + end], pause_s=0.02)

    server.responder = bursts
    said: list[str] = []
    level = sweep(server, tmp_path, said, rows, users=[1], rates_rps=[20.0], requests_per_level=3).load.levels[0]  # type: ignore[union-attr]
    # three writes, read in three reads or fewer (a loaded host can join two): a burst either way
    assert all(r.reads is not None and r.reads <= 3 for r in level.requests) and level.read_in_bursts == 3
    assert level.per_user_tok_s is None and level.all_identical
    assert "; UNUSABLE: 3 of 3 responses read in bursts, so no decode rate" in said[0]


def test_a_user_served_faster_than_alone_is_said_unusable(server: FakeVllm, tmp_path: Path) -> None:
    """The arm's servers decoded 10 tok/s alone; this server streams a token every 5 ms (about
    200 tok/s): no batch serves a user faster than alone, so the progress line flags the level."""
    server.responder = lambda body: oracle_answer(body, pause_s=0.005)
    said: list[str] = []
    options: dict[str, Any] = {"users": [1], "rates_rps": [20.0], "requests_per_level": 3}
    level = sweep(server, tmp_path, said, alone=[10.0, 8.0], **options).load.levels[0]  # type: ignore[union-attr]
    line = next(line for line in said if line.startswith("tp1-oracle load 1 user"))
    assert "; UNUSABLE: " in line
    if not level.read_in_bursts:  # a loaded host may join reads: then that reason is said first
        assert level.per_user_tok_s is not None and level.per_user_tok_s > 20.0
        assert f"{level.per_user_tok_s:.1f} tok/s per user, over 2 × the 10.0 tok/s of one user alone" in line
        said.clear()
        sweep(server, tmp_path / "alone-faster", said, alone=[1e6], **options)
        assert not any("of one user alone" in line for line in said)


def test_open_loop_sends_on_schedule_while_the_server_is_slow(server: FakeVllm, tmp_path: Path) -> None:
    """Every request streams for ~0.5 s; arrivals at 40/s are ~25 ms apart: each is sent at its
    planned time, long before the requests ahead of it finish."""
    server.responder = lambda body: oracle_answer(body, pause_s=0.1)
    ladder = sweep(server, tmp_path, users=[1], rates_rps=[40.0], requests_per_level=8)
    level = ladder.load.levels[-1]  # type: ignore[union-attr]
    planned = poisson_offsets_ms(40.0, 8, 1)
    assert [r.planned_ms for r in level.requests] == planned
    assert all(r.lag_ms < 50.0 for r in level.requests), [r.lag_ms for r in level.requests]
    first = level.requests[0]
    assert first.e2e_ms is not None and first.e2e_ms > 400
    assert level.requests[-1].sent_ms < first.sent_ms + first.e2e_ms  # sent while the first still streamed
    assert level.duration_s * 1000 >= planned[-1] - planned[0]


def test_a_failed_request_is_recorded_not_fatal(server: FakeVllm, tmp_path: Path) -> None:
    def fails_once(body: dict[str, Any]) -> Script:
        if PROMPT_IDS[body["prompt"]] == SUITE.prompts[2].id:
            return Script(status=500)
        return oracle_answer(body)

    server.responder = fails_once
    level = sweep(server, tmp_path, users=[2], rates_rps=[50.0]).load.levels[0]  # type: ignore[union-attr]
    failed = level.requests[2]
    assert failed.error is not None and "HTTP 500" in failed.error and "\n" not in failed.error
    assert failed.ttft_ms is None and failed.identical_to_oracle is None and failed.output_tokens == 0
    assert level.failed == 1 and len(level.completed) == 4
    assert level.goodput(Slo()) == pytest.approx(0.8)


def test_a_level_where_every_request_fails_stops_the_sweep(server: FakeVllm, tmp_path: Path) -> None:
    server.responder = lambda body: Script(status=500)
    with pytest.raises(ClientError, match="every request at 1 user failed: HTTP 500"):
        sweep(server, tmp_path, users=[1])


def test_levels_that_do_not_fit_are_skipped_and_said(server: FakeVllm, tmp_path: Path) -> None:
    said: list[str] = []
    ladder = sweep(server, tmp_path, said, users=[1, 8], requests_per_level=4)
    assert [level.users for level in ladder.load.levels if level.mode == "closed"] == [1]  # type: ignore[union-attr]
    assert "tp1-oracle load 8 users: skipped, more users than the 4 requests" in said


def test_open_rates_default_to_fractions_of_the_highest_closed_level(server: FakeVllm, tmp_path: Path) -> None:
    said: list[str] = []
    ladder = sweep(server, tmp_path, said, users=[1, 2], rates_rps=None, requests_per_level=4)
    sweep_ = ladder.load
    assert sweep_ is not None and sweep_.open_rates_from_users == 2
    basis = sweep_.levels[1]
    rate = len(basis.completed) / basis.duration_s
    expected = sorted({round(f * rate, 3) for f in (0.25, 0.5, 0.75, 1.0)})
    assert [level.rate_rps for level in sweep_.levels if level.mode == "open"] == expected
    assert any("open-loop rates" in line and "fractions of the 2 users level" in line for line in said)


def test_finished_levels_are_kept_and_reused(server: FakeVllm, tmp_path: Path) -> None:
    first = sweep(server, tmp_path)
    said: list[str] = []
    served = len(server.requests)
    again = sweep(server, tmp_path, said)
    assert again == first and len(server.requests) == served  # nothing sent again
    assert said.count("tp1-oracle load 1 user: finished earlier, reusing") == 1
    changed = sweep(server, tmp_path, said, requests_per_level=3)  # another plan: measured again
    assert all(len(level.requests) == 3 for level in changed.load.levels)  # type: ignore[union-attr]


def test_request_row_uses_per_token_times_never_chunks() -> None:
    """Three tokens arrive in one read at 30 ms, the fourth at 60 ms: TPOT (60-10)/3 ms."""
    times = [0.010, 0.030, 0.030, 0.030, 0.060]
    result = StreamResult([1, 2, 3, 4, 5], "", 0.010, times, 0.061, 3, 9, 5, 0, "length", None, sent_at=100.0)
    row = load_sweep.request_row("p1", 2.0, result, 99.9, [1, 2, 3, 4, 5])
    assert row.tpot_ms == pytest.approx(12.5) and row.ttft_ms == 10.0 and row.e2e_ms == 61.0
    assert row.sent_ms == pytest.approx(100.0) and row.identical_to_oracle and row.first_divergence is None
    assert row.reads == 3 and not row.read_in_bursts  # the reads a stranger needs to tell a burst
    assert load_sweep._gaps_ms(times) == pytest.approx([20.0, 30.0])  # per arrival: no zero gaps inside a read
    one = StreamResult([7], "", 0.01, [0.01], 0.01, 1, 9, 1, 0, "length", None, sent_at=100.0)
    assert load_sweep.request_row("p1", 0.0, one, 99.9, [7, 8]).tpot_ms is None
    times = [0.257] + [0.259] * 50 + [0.261] * 50
    burst = StreamResult(list(range(101)), "", 0.257, times, 0.261, 3, 9, 101, 0, "length", None, sent_at=100.0)
    row = load_sweep.request_row("p1", 0.0, burst, 99.9, None)
    assert row.reads == 3 and row.read_in_bursts  # CI's loaded host: 101 tokens in three reads


@pytest.mark.parametrize(
    ("tokens", "expected", "divergence"),
    [([1, 2, 3], [1, 2, 3], None), ([1, 9, 3], [1, 2, 3], 1), ([1, 2], [1, 2, 3], 2), ([1, 2, 3, 4], [1, 2, 3], 3)],
)
def test_first_divergence(tokens: list[int], expected: list[int], divergence: int | None) -> None:
    assert first_divergence(tokens, expected) == divergence


METRICS_BEFORE = """# HELP vllm:num_requests_running Number of requests.
vllm:num_requests_running{engine="0",model_name="demo"} 0.0
vllm:num_requests_waiting{engine="0",model_name="demo"} 0.0
vllm:kv_cache_usage_perc{engine="0",model_name="demo"} 0.0
vllm:num_preemptions_total{engine="0",model_name="demo"} 3.0
vllm:generation_tokens_total{engine="0",model_name="demo"} 100.0
"""
LABELS = '{engine="0",model_name="demo"}'
METRICS_DURING = METRICS_BEFORE.replace(f"running{LABELS} 0.0", f"running{LABELS} 4.0").replace(
    f"usage_perc{LABELS} 0.0", f"usage_perc{LABELS} 0.25"
)
METRICS_AFTER = METRICS_BEFORE.replace("3.0", "5.0")


def test_metrics_fold_into_gauge_peaks_and_counter_deltas() -> None:
    summary = MetricsSummary()
    for text in (METRICS_BEFORE, METRICS_DURING, METRICS_AFTER):
        summary.add(read_wanted(text))
    metrics = summary.metrics()
    assert metrics is not None
    assert (metrics.peak_running, metrics.peak_waiting, metrics.peak_kv_cache_usage) == (4.0, 0.0, 0.25)
    assert metrics.preemptions == 2
    assert metrics.spec_drafted_tokens is None and metrics.spec_accepted_tokens is None  # absent: None
    assert MetricsSummary().metrics() is None


def test_a_level_records_the_servers_metrics(server: FakeVllm, tmp_path: Path) -> None:
    server.metrics_texts.extend([METRICS_BEFORE, METRICS_DURING.replace("3.0", "5.0")])  # at the start, then after
    level = sweep(server, tmp_path, users=[1], rates_rps=[50.0], requests_per_level=2).load.levels[0]  # type: ignore[union-attr]
    assert level.server is not None and level.server.preemptions == 2 and level.server.peak_running == 4.0


def test_a_server_without_metrics_leaves_them_none(server: FakeVllm, tmp_path: Path) -> None:
    level = sweep(server, tmp_path, users=[1], rates_rps=[50.0], requests_per_level=2).load.levels[0]  # type: ignore[union-attr]
    assert level.server is None


class _LadderServerAt:
    """Stands in for VllmServer in runner.ladders: the fake streaming server is the ladder server."""

    url = ""

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        self.base_url = _LadderServerAt.url

    def __enter__(self) -> _LadderServerAt:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_the_load_ladder_runs_on_the_arms_ladder_server_and_resumes(
    server: FakeVllm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LADDERS=load through runner.ladders: levels above the server's --max-num-seqs are skipped
    and said, the finished ladder is written beside the others and reused by a rerun."""
    _LadderServerAt.url = server.base_url
    monkeypatch.setattr(ladders, "VllmServer", _LadderServerAt)
    monkeypatch.setattr(ladders, "ladder_command", lambda arm: arm.command)
    command = LaunchCommand("demo", ["--max-num-seqs", "2"], {})
    arm = SimpleNamespace(id="tp1-oracle", spec_depth=0, command=command)
    runtime = LocalRuntime(Path("python"))  # VllmServer is a stand-in: nothing is started
    settings = MeasurementSettings(SUITE, None, TOKENS, 1234, 60.0)  # type: ignore[arg-type]
    load = LoadSweepOptions(users=[1, 4], rates_rps=[50.0], requests_per_level=4)

    def run(said: list[str]) -> list[Ladder]:
        done, _ = ladders.run_ladders(
            ["load"],
            arm,  # type: ignore[arg-type]
            ORACLE_ROWS,
            {},
            runtime,  # type: ignore[arg-type]
            settings,
            tmp_path,
            4096,
            said.append,
            load=load,
        )
        return done

    said: list[str] = []
    (ladder,) = run(said)
    assert [(lv.users, lv.rate_rps) for lv in ladder.load.levels] == [(1, None), (None, 50.0)]  # type: ignore[union-attr]
    assert "tp1-oracle load 4 users: skipped, the server runs at most 2 sequences" in said
    assert ladder.argv == ["vllm", "serve", "demo", "--max-num-seqs", "2"]  # the ladder server's own command
    assert ladders.ladder_path(tmp_path, "tp1-oracle", "load").exists()
    again: list[str] = []
    assert run(again) == [ladder]
    assert "tp1-oracle load ladder: finished earlier, reusing" in again
