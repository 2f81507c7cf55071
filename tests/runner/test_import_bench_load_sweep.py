"""`import-bench` with several `vllm bench serve --save-detailed` files (tests/fixtures/bench_serve):
one screened packet whose one arm carries a load curve, a level per file, signed with the importer
key, that loads as `python -m catalog.verify` loads it and builds into the family page's load
section as a speed-only curve; what cannot be a curve is refused in one line naming file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from builder.cli import run as build
from builder.format import fmt
from catalog.errors import UserError, exit_on_user_error
from catalog.model.packet import Packet, State
from catalog.store.repository import load_catalog
from runner import cli as runner_cli
from runner.import_bench import import_bench
from tests.catalog.factories import signed_data
from tests.runner.test_import_bench import FIXTURES, bench_options

ONE_USER = FIXTURES / "single-stream.json"
TWO_USERS = FIXTURES / "concurrency-2.json"
DEFAULT = FIXTURES / "default-run.json"


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A data/ copy trusting the session's test keys, and an empty packets folder."""
    packets = tmp_path / "packets"
    packets.mkdir()
    return signed_data(tmp_path / "data"), packets


def _read(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _written(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _import(places: tuple[Path, Path], *results: Path, **changes: Any) -> Packet:
    data, packets = places
    catalog = load_catalog(data, packets)
    return import_bench(bench_options(*results, packets=packets, **changes), catalog)


def test_several_detailed_files_seal_one_screened_load_curve(places: tuple[Path, Path]) -> None:
    packet = _import(places, TWO_USERS, ONE_USER, slo={"ttft_ms": 13.0})
    assert packet.state == State.SCREENED and packet.provenance.kind == "screened"
    assert packet.provenance.tool == "vllm bench serve --save-result --save-detailed"
    (arm,) = packet.arms
    assert arm.id == "tp1-load" and arm.decode_tok_s is None  # no single-stream rate is made up
    (ladder,) = packet.ladders
    assert ladder.kind == "load" and ladder.arm == arm.id and ladder.load is not None
    sweep = ladder.load
    assert [level.users for level in sweep.levels] == [1, 2]  # ordered by users, whatever the file order
    assert sweep.slo.ttft_ms == 13.0 and sweep.requests_per_level == 8
    for level, path in zip(sweep.levels, (ONE_USER, TWO_USERS), strict=True):
        source = _read(path)
        assert level.aggregate_tok_s == pytest.approx(source["output_throughput"])
        assert level.ttft is not None and level.ttft.p50_ms == pytest.approx(source["median_ttft_ms"], abs=1e-3)
        assert all(r.identical_to_oracle is None for r in level.requests)  # speed only
    assert packet.workload.max_tokens == 32
    # what `python -m catalog.verify` does: every hash, signature and consistency check, no unsigned
    data, packets = places
    reloaded = load_catalog(data, packets)
    assert list(reloaded.packets) == [packet.id] and reloaded.packets[packet.id].signed


def test_open_loop_files_need_no_recorded_schedule(places: tuple[Path, Path], tmp_path: Path) -> None:
    """Another client's Poisson arrivals are not ours: planned times are its send times, and the
    consistency check of our schedule does not hold an imported curve (catalog/checks/load_sweep.py)."""
    source = _read(TWO_USERS) | {"max_concurrency": None}
    files = [_written(tmp_path / f"rate-{rate}.json", source | {"request_rate": rate}) for rate in (8.0, 2.0)]
    packet = _import(places, *files)
    (ladder,) = packet.ladders
    assert ladder.load is not None
    assert [(lv.mode, lv.rate_rps) for lv in ladder.load.levels] == [("open", 2.0), ("open", 8.0)]
    assert all(r.planned_ms == r.sent_ms for lv in ladder.load.levels for r in lv.requests)
    assert list(load_catalog(*places).packets) == [packet.id]


def test_one_file_with_load_is_a_curve_of_one_level(places: tuple[Path, Path]) -> None:
    packet = _import(places, TWO_USERS, load=True)
    assert packet.ladders[0].load is not None and [lv.label for lv in packet.ladders[0].load.levels] == ["2 users"]


def _refusal(places: tuple[Path, Path], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    data, packets = places
    options = ["--model", "demo", "--hardware", "cpu_generic", "--source", "CI"]
    with pytest.raises(SystemExit) as done:
        exit_on_user_error(
            lambda: runner_cli.run(["--data", str(data), "--packets", str(packets), "import-bench", *argv, *options])
        )()
    assert done.value.code == 1
    assert not list(packets.iterdir()), "a refused curve left a packet"
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err.removeprefix("error: ").rstrip("\n")


def test_what_cannot_be_a_curve_is_refused_in_one_line(
    places: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    no_lists = _refusal(places, [str(ONE_USER), str(DEFAULT)], capsys)
    assert no_lists.startswith(f"{DEFAULT}: ttfts: no per-request lists (run vllm bench serve with --save-detailed)")
    twice = _refusal(places, [str(TWO_USERS), str(TWO_USERS)], capsys)
    assert twice == f"{TWO_USERS}: max_concurrency: a second level of 2 users (the first: {TWO_USERS})"
    other = _written(tmp_path / "other-model.json", _read(TWO_USERS) | {"model_id": "someone/else"})
    mixed = _refusal(places, [str(ONE_USER), str(other)], capsys)
    assert mixed.startswith(f"{other}: model_id: benchmarks model 'someone/else'")
    assert _refusal(places, [str(DEFAULT), "--slo", "ttft_ms=500"], capsys).startswith("--slo: is a load curve setting")


def test_the_curve_builds_into_the_family_page_as_speed_only(places: tuple[Path, Path], tmp_path: Path) -> None:
    packet = _import(places, ONE_USER, TWO_USERS)
    data, packets = places
    site = tmp_path / "site"
    assert build(["build", "--data", str(data), "--packets", str(packets), "--out", str(site)]) == 0
    family = BeautifulSoup((site / "models/demo/index.html").read_text(encoding="utf-8"), "lxml")
    section = family.select_one("#concurrency #load")
    assert section is not None
    script = section.select_one("#chart-load-frontier script#chart-data-load-frontier")
    assert script is not None
    traces = json.loads(script.string or "")["data"]
    (line,) = [t for t in traces if str(t["name"]).replace("<br>", " ").endswith("(screened, speed only)")]
    ladder = packet.ladders[0].load
    assert ladder is not None
    by_user_rate = sorted(ladder.levels, key=lambda lv: lv.per_user_tok_s or 0)
    assert line["y"] == [float(fmt(lv.aggregate_tok_s)) for lv in by_user_rate]
    page = BeautifulSoup((site / f"packets/{packet.id}/index.html").read_text(encoding="utf-8"), "lxml")
    rows = page.select(f"#load-{packet.arms[0].id}-full tbody tr")
    assert len(rows) == 2 and all(row["data-identity"] == "not checked" for row in rows)


def test_a_refused_level_names_its_file_in_process(places: tuple[Path, Path], tmp_path: Path) -> None:
    backwards = _read(TWO_USERS)
    backwards["latencies"][3] = -0.5
    bad = _written(tmp_path / "backwards.json", backwards)
    with pytest.raises(UserError) as refused:
        _import(places, ONE_USER, bad)
    assert str(refused.value).startswith(f"{bad}: latencies[3]: makes an invalid load level")
