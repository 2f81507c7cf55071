"""Families and pages made on every core (builder/assemble.py) are the bytes one process makes, and
the per-kind page costs cover every page."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from builder import assemble
from builder.cli import run
from catalog import forked
from tests.builder.factory import write_catalog


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: pages are rendered in one process")
def test_a_build_on_every_core_is_the_build_one_process_makes(tmp_path, monkeypatch, capsys):
    data, packets = write_catalog(tmp_path)
    argv = ["build", "--data", str(data), "--packets", str(packets)]
    assert run([*argv, "--out", str(tmp_path / "one")]) == 0
    one_said = capsys.readouterr().err
    monkeypatch.setattr(assemble, "PACKETS_PER_WORKER", 1)  # every family in a worker
    monkeypatch.setattr(assemble, "PAGES_PER_WORKER", 1)  # and the site's pages
    pools: list[int] = []
    real_pool = forked.ProcessPoolExecutor  # type: ignore[attr-defined]

    def counting_pool(max_workers: int, mp_context: object) -> object:
        pools.append(max_workers)
        return real_pool(max_workers=max_workers, mp_context=mp_context)  # type: ignore[call-overload]

    monkeypatch.setattr(forked, "ProcessPoolExecutor", counting_pool)
    assert run([*argv, "--out", str(tmp_path / "two")]) == 0
    assert len(pools) == 2 and min(pools) >= 2  # the families' pass and the site's pages
    assert _snapshot(tmp_path / "one") == _snapshot(tmp_path / "two")
    assert capsys.readouterr().err == one_said  # the same warnings, in the same order
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert run([*argv, "--out", str(tmp_path / "two"), "--check"]) == 0


def test_page_costs_name_every_kind_with_its_page_count(tmp_path):
    data, packets = write_catalog(tmp_path)
    timings = tmp_path / "timings.json"
    site = tmp_path / "site"
    argv = ["build", "--data", str(data), "--packets", str(packets), "--out", str(site), "--timings", str(timings)]
    assert run(argv) == 0
    recorded = json.loads(timings.read_text())
    report = recorded["pages"]
    assert set(recorded["phases_s"]) == {"plan", "load", "views", "render", "publish", "remember"}
    assert all(seconds >= 0 for seconds in recorded["phases_s"].values())
    assert report["packet"]["pages"] == len(list(site.glob("packets/*/index.html")))
    assert report["family"]["pages"] == len(list(site.glob("models/*/index.html")))
    assert sum(k["pages"] for k in report.values()) == len(list(site.rglob("*.html")))
    assert all(k["cpu_ms_per_page"] > 0 for k in report.values())
