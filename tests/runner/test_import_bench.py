"""`import-bench` on files `vllm bench serve --save-result` really wrote (tests/fixtures/bench_serve):
a default run is a throughput run, a concurrency-ladder point, never a single-stream rate."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest

from catalog.errors import UserError
from catalog.model.packet import State
from catalog.store.documents import load_file
from catalog.store.repository import load_catalog
from runner.import_bench import BenchServeResult, ImportTarget, NotImportable, import_bench, screened_parts

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "bench_serve"
PARTS = ImportTarget(
    slug="demo",
    variant="default",
    quantization="bf16",
    hardware="cpu_generic",
    platform="cpu",
    cards=1,
    source="this repository's CI",
)


def bench_options(*results: Path, packets: Path, **changes: Any) -> argparse.Namespace:
    """What `python -m runner import-bench` parses, for the demo model on a generic CPU."""
    chosen = {"model": "demo", "variant": "default", "hardware": "cpu_generic", "cards": 1, "source": "CI"}
    chosen |= {"load": False, "slo": None} | changes
    return argparse.Namespace(results=list(results), packets=packets, **chosen)


def result(name: str, **changes: Any) -> BenchServeResult:
    document = json.loads((FIXTURES / name).read_text())
    return BenchServeResult.model_validate({**document, **changes})


def test_the_real_layout_is_read() -> None:
    run = result("default-run.json")
    assert run.request_rate == "inf" and math.isinf(run.rate)
    assert (run.burstiness, run.max_concurrency, run.num_prompts) == (1.0, None, 200)
    assert (run.completed, run.failed, run.total_output_tokens) == (200, 0, 6400)
    assert run.median_ttft_ms is not None and run.median_tpot_ms is not None and run.median_itl_ms is not None
    assert set(run.percentiles) == {"ttft", "tpot", "itl"} and set(run.percentiles["ttft"]) == {"99"}
    assert run.output_lens == []  # per-request lists need --save-detailed
    assert result("single-stream.json").output_lens == [32] * 8


def test_a_default_run_is_a_throughput_point_not_a_single_stream_rate() -> None:
    run = result("default-run.json")
    parts = screened_parts(run, PARTS)
    (arm,) = parts.arms
    assert arm.id == "tp1-c200" and "throughput run at 200" in arm.label
    (server,) = arm.servers
    assert server.decode_tok_s is None and server.ttft_ms is None
    assert arm.decode_tok_s is None
    (ladder,) = parts.ladders
    (point,) = ladder.concurrency
    assert (ladder.kind, point.users, point.completion_tokens, point.wall_s) == ("concurrency", 200, 6400, run.duration)
    assert point.aggregate_tok_s == pytest.approx(run.output_throughput)
    assert "all 200 released at once" in parts.title
    assert arm.note is not None
    assert "request rate inf, burstiness 1.00, no max concurrency; 200 completed, 0 failed" in arm.note
    assert "TTFT median" in arm.note and "p99" in arm.note


def test_max_concurrency_above_one_is_a_point_at_that_many_users() -> None:
    parts = screened_parts(result("default-run.json", max_concurrency=16), PARTS)
    assert parts.ladders[0].concurrency[0].users == 16 and parts.arms[0].servers[0].decode_tok_s is None


def test_one_request_at_a_time_is_a_single_stream_rate() -> None:
    run = result("single-stream.json")
    parts = screened_parts(run, PARTS)
    (arm,) = parts.arms
    assert run.median_tpot_ms is not None
    assert arm.servers[0].decode_tok_s == pytest.approx(1000.0 / run.median_tpot_ms)
    assert arm.servers[0].ttft_ms == run.median_ttft_ms
    assert parts.ladders == [] and parts.workload.max_tokens == 32


def test_runs_that_measured_no_fixed_load_are_refused() -> None:
    with pytest.raises(NotImportable, match=r"open-loop run at 50\.00 req/s without --max-concurrency"):
        screened_parts(result("default-run.json", request_rate=50.0), PARTS)
    with pytest.raises(NotImportable, match="3 of 203 requests failed"):
        screened_parts(result("default-run.json", failed=3), PARTS)


@pytest.mark.parametrize("name", ["default-run.json", "single-stream.json"])
def test_import_bench_seals_a_consistent_screened_packet(name: str, tmp_path: Path) -> None:
    packets = tmp_path / "packets"
    packets.mkdir()
    catalog = load_catalog(REPO / "data", packets, allow_unsigned=True)
    packet = import_bench(bench_options(FIXTURES / name, packets=packets), catalog)
    assert packet.state == State.SCREENED
    reloaded = load_catalog(REPO / "data", packets, allow_unsigned=True)
    assert list(reloaded.packets) == [packet.id]


def test_a_refusal_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "rate.json"
    bad.write_text(json.dumps({**json.loads((FIXTURES / "default-run.json").read_text()), "request_rate": 5}))
    catalog = load_catalog(REPO / "data", REPO / "packets")
    options = bench_options(bad, packets=tmp_path)
    with pytest.raises(UserError, match="open-loop") as caught:
        import_bench(options, catalog)
    assert caught.value.file == str(bad)
    assert load_file(BenchServeResult, bad).request_rate == 5
