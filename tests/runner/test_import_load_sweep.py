"""A `vllm bench serve --save-detailed` file as a speed-only load level: catalog.model.load_sweep's figures from
its rows equal the tool's own summary, nothing is identity-checked, and what is not a load level
(a burst, a file without per-request lists) is refused in one line naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catalog.errors import UserError
from catalog.packets.seal import seal
from runner.import_load_sweep import bench_level, bench_sweep
from testkit.samples import ORACLE_ARM, published_arm, published_parts, with_load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench_serve"
DETAILED = FIXTURES / "single-stream.json"
DEFAULT = FIXTURES / "default-run.json"
TWO_USERS = FIXTURES / "concurrency-2.json"


def _read(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize(("path", "users"), [(DETAILED, 1), (TWO_USERS, 2)])
def test_a_detailed_run_gives_the_tools_own_figures(path: Path, users: int) -> None:
    data = _read(path)
    level = bench_level(data, path)
    assert level.mode == "closed" and level.users == users and level.label == ("1 user" if users == 1 else "2 users")
    assert level.aggregate_tok_s == pytest.approx(data["output_throughput"])
    assert level.ttft is not None and level.itl_ms is not None
    assert level.ttft.p50_ms == pytest.approx(data["median_ttft_ms"], abs=1e-3)
    assert level.ttft.p99_ms == pytest.approx(data["p99_ttft_ms"], abs=1e-3)
    assert level.itl_ms.p50_ms == pytest.approx(data["median_itl_ms"], abs=1e-6)
    assert level.itl_ms.p99_ms == pytest.approx(data["p99_itl_ms"], abs=1e-6)
    assert len(level.requests) == data["completed"] and level.failed == 0
    assert all(r.identical_to_oracle is None for r in level.requests)  # never identity-checked


def test_a_finite_rate_without_concurrency_is_an_open_loop() -> None:
    data = _read(DETAILED) | {"request_rate": 4.0, "max_concurrency": None}
    level = bench_level(data, DETAILED)
    assert level.mode == "open" and level.rate_rps == 4.0 and level.label == "4 req/s"


@pytest.mark.parametrize(
    ("path", "changes", "field", "words"),
    [
        (DEFAULT, {}, "ttfts", "no per-request lists (run vllm bench serve with --save-detailed): skipped"),
        (DETAILED, {"max_concurrency": None}, "request_rate", "a burst, not a load level"),
        (DETAILED, {"request_rate": 2.0}, "request_rate", "neither a closed nor an open loop"),
    ],
)
def test_what_is_not_a_load_level_is_refused_in_one_line(
    path: Path, changes: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(UserError) as refused:
        bench_level(_read(path) | changes, path)
    message = str(refused.value)
    assert message.startswith(f"{path}: {field}: ") and words in message and "\n" not in message


def test_a_curve_of_files_seals_as_a_screened_load_ladder() -> None:
    data = _read(DETAILED)
    two_users = data | {"max_concurrency": 2}
    sweep = bench_sweep([(DETAILED, two_users), (DETAILED, data)])
    assert [level.users for level in sweep.levels] == [1, 2]
    parts = published_parts([published_arm(ORACLE_ARM, [40.0, 41.0])], provenance="screened")
    packet = seal(with_load(parts, {ORACLE_ARM: sweep}), None).packet
    assert packet.state.value == "screened" and packet.ladders[0].load == sweep
    short = data | {key: data[key][:4] for key in ("ttfts", "latencies", "output_lens", "itls", "start_times")}
    with pytest.raises(UserError, match="num_prompts"):
        bench_sweep([(DETAILED, data), (DETAILED, short | {"max_concurrency": 2})])


def test_two_files_of_one_level_or_an_impossible_row_are_refused_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(UserError) as twice:
        bench_sweep([(DETAILED, _read(DETAILED)), (TWO_USERS, _read(TWO_USERS)), (tmp_path, _read(TWO_USERS))])
    assert str(twice.value) == f"{tmp_path}: max_concurrency: a second level of 2 users (the first: {TWO_USERS})"
    data = _read(TWO_USERS)
    backwards = data | {"latencies": [-1.0, *data["latencies"][1:]]}
    with pytest.raises(UserError) as impossible:
        bench_sweep([(TWO_USERS, backwards)])
    assert str(impossible.value).startswith(f"{TWO_USERS}: latencies[0]: makes an invalid load level: ")
    assert "\n" not in str(impossible.value)
