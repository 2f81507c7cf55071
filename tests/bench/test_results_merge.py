"""`python -m bench --only X` merges into the results file (Results.merged_into): the selected
groups' benchmarks are replaced, every other group's kept with the run that measured it, and a
kept group is not listed as skipped. (It used to overwrite bench/results.json with the selected
groups alone, and docs/performance.md with it, wiping every other group's committed figures.)"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.results import NOT_SELECTED, Benchmark, Figure, Group, Host, Results

FULL = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
BUILDER_ONLY = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)
CLIENT_ONLY = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _benchmark(id_: str, group: Group, ours: float) -> Benchmark:
    return Benchmark(id=id_, group=group, title=id_, figures=[Figure(name="f", unit="s", ours=ours)])


def _results(created: datetime, command: str, benchmarks: list[Benchmark], skipped: list[str]) -> Results:
    load = [float(created.day)] * 3
    host = Host(cpu_count=2, cpu_model="test", memory_gb=1.0, python="3.11", vllm=None, load_average_start=load)
    return Results(created=created, quick=False, command=command, host=host, benchmarks=benchmarks, skipped=skipped)


def _full_run() -> Results:
    benchmarks = [
        _benchmark("measurement.demo", "measurement", 1.0),
        _benchmark("client.c1", "client", 1.0),
        _benchmark("agreement.c1", "agreement", 1.0),
        _benchmark("builder.10x20", "builder", 1.0),
        _benchmark("builder.gone", "builder", 1.0),  # no longer made by the builder group
        _benchmark("browser.model-page", "browser", 1.0),
    ]
    return _results(FULL, "python -m bench", benchmarks, ["load: failed: RuntimeError: no"])


def _builder_run() -> Results:
    skipped = [f"{group}: {NOT_SELECTED}" for group in ("measurement", "client", "load")]
    skipped.append("browser: failed: RuntimeError: no chromium")
    benchmarks = [_benchmark("builder.10x20", "builder", 2.0), _benchmark("builder.new", "builder", 2.0)]
    return _results(BUILDER_ONLY, "python -m bench --only builder,browser", benchmarks, skipped)


def test_only_the_selected_groups_are_replaced_and_the_record_says_which_run_measured_each() -> None:
    earlier = _full_run()
    merged = _builder_run().merged_into(earlier)

    by_id = {b.id: b for b in merged.benchmarks}
    assert [b.id for b in merged.benchmarks] == [
        "measurement.demo",
        "client.c1",
        "agreement.c1",
        "builder.10x20",
        "builder.new",
        "browser.model-page",
    ]  # the full run's order; the builder group replaced whole ("builder.gone" is not mixed in)
    for kept in earlier.benchmarks:
        if kept.group != "builder":
            assert by_id[kept.id] == kept  # nothing of a group this run did not measure is lost
    assert by_id["builder.10x20"].figures[0].ours == 2.0

    (full,) = merged.earlier_runs
    assert (full.created, full.command, full.host) == (FULL, "python -m bench", earlier.host)
    assert full.groups == ["measurement", "client", "browser"]
    assert full.benchmarks == ["measurement.demo", "client.c1", "agreement.c1", "browser.model-page"]
    assert (merged.created, merged.command) == (BUILDER_ONLY, "python -m bench --only builder,browser")

    # a kept group is not skipped; one with no figures is; a failed re-measurement says whose figures stay
    assert merged.skipped == [
        f"load: {NOT_SELECTED}",
        "browser: failed: RuntimeError: no chromium (the figures shown are the run of 2026-12-01 10:00 UTC)",
    ]


def test_a_second_merge_keeps_each_group_with_the_run_that_measured_it(tmp_path: Path) -> None:
    once = _builder_run().merged_into(_full_run())
    client = _results(CLIENT_ONLY, "python -m bench --only client", [_benchmark("client.c1", "client", 3.0)], [])
    twice = client.merged_into(once)

    assert {b.id: b.figures[0].ours for b in twice.benchmarks} == {
        "measurement.demo": 1.0,
        "client.c1": 3.0,
        "builder.10x20": 2.0,
        "builder.new": 2.0,
        "browser.model-page": 1.0,
    }  # agreement.c1 went with its group: the client run made none this time
    runs = {run.created: (run.groups, run.benchmarks) for run in twice.earlier_runs}
    assert runs == {
        FULL: (["measurement", "browser"], ["measurement.demo", "browser.model-page"]),
        BUILDER_ONLY: (["builder"], ["builder.10x20", "builder.new"]),
    }
    twice.write(tmp_path / "results.json")
    assert Results.read(tmp_path / "results.json") == twice


def test_a_quick_run_is_never_merged_into_a_full_one() -> None:
    quick = _builder_run().model_copy(update={"quick": True})
    with pytest.raises(ValueError, match="never merged"):
        quick.merged_into(_full_run())


def test_python_m_bench_only_merges_into_the_results_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import __main__ as bench_main
    from bench import browser_bench

    path = tmp_path / "results.json"
    _full_run().write(path)
    monkeypatch.setattr(browser_bench, "run", lambda quick, log: [_benchmark("browser.model-page", "browser", 5.0)])
    assert bench_main.main(["--only", "browser", "--results", str(path), "--no-docs"]) == 0

    written = Results.read(path)
    assert {b.id: b.figures[0].ours for b in written.benchmarks}["browser.model-page"] == 5.0
    assert len(written.benchmarks) == len(_full_run().benchmarks)
    assert [run.groups for run in written.earlier_runs] == [["measurement", "client", "builder"]]
    assert written.skipped == [f"load: {NOT_SELECTED}"]
    assert bench_main.main(["--only", "browser", "--quick", "--results", str(path), "--no-docs"]) == 2
