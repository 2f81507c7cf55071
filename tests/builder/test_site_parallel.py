"""Pages rendered on every core (builder/pages.py) are the bytes and warnings one process gives,
and the per-kind page costs cover every page."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder import families, output, pages
from builder.cli import run
from builder.site import build_files
from catalog import forked
from tests.builder.factory import write_catalog


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: pages are rendered in one process")
def test_pages_rendered_in_workers_are_the_pages_one_process_renders(tmp_path, monkeypatch):
    data, packets = write_catalog(tmp_path)
    one = build_files(data, packets)
    assert one.scratch is None and all(isinstance(v, bytes) for k, v in one.files.items() if k.endswith(".html"))
    monkeypatch.setattr(pages, "PAGES_PER_WORKER", 1)
    monkeypatch.setattr(pages, "CHUNK", 1)
    monkeypatch.setattr(families, "FAMILIES_PER_WORKER", 1)  # family views made in workers too
    pools: list[int] = []
    real_pool = forked.ProcessPoolExecutor  # type: ignore[attr-defined]

    def counting_pool(max_workers: int, mp_context: object) -> object:
        pools.append(max_workers)
        return real_pool(max_workers=max_workers, mp_context=mp_context)  # type: ignore[call-overload]

    monkeypatch.setattr(forked, "ProcessPoolExecutor", counting_pool)
    many = build_files(data, packets)
    assert pools and pools[0] >= 2
    assert many.scratch is not None
    rendered = {k: v for k, v in many.files.items() if isinstance(v, Path) and v.is_relative_to(many.scratch)}
    assert rendered and all(k.endswith(".html") for k in rendered)
    assert {k: rendered[k].read_bytes() if k in rendered else v for k, v in many.files.items()} == one.files
    assert many.warnings == one.warnings
    assert many.costs.count == one.costs.count


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: pages are rendered in one process")
def test_a_parallel_build_publishes_the_same_site_and_leaves_no_scratch(tmp_path, monkeypatch):
    data, packets = write_catalog(tmp_path)
    argv = ["build", "--data", str(data), "--packets", str(packets)]
    assert run([*argv, "--out", str(tmp_path / "one")]) == 0
    monkeypatch.setattr(pages, "PAGES_PER_WORKER", 1)
    moved: list[str] = []
    real_replace = os.replace

    def replace(source: str, target: str) -> None:
        moved.append(str(target))
        real_replace(source, target)

    monkeypatch.setattr(output.os, "replace", replace)  # type: ignore[attr-defined]
    assert run([*argv, "--out", str(tmp_path / "two")]) == 0
    assert _snapshot(tmp_path / "one") == _snapshot(tmp_path / "two")
    pages_moved = [m for m in moved if m.endswith(".html")]  # renamed into the new site, not copied
    assert len(pages_moved) == len(list((tmp_path / "two").rglob("*.html")))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # the scratch folder is gone
    assert run([*argv, "--out", str(tmp_path / "two"), "--check"]) == 0


def test_page_costs_name_every_kind_with_its_page_count(tmp_path):
    import json

    data, packets = write_catalog(tmp_path)
    timings = tmp_path / "timings.json"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(tmp_path / "site")]) == 0
    site = tmp_path / "site"
    (site / "index.html").write_text("edited")  # not a no-op: the build renders again
    argv = ["build", "--data", str(data), "--packets", str(packets), "--out", str(site), "--timings", str(timings)]
    assert run(argv) == 0
    recorded = json.loads(timings.read_text())
    report = recorded["pages"]
    assert set(recorded["phases_s"]) == {"load", "family views", "render", "api, assets, sitemap", "hash, publish"}
    assert all(seconds >= 0 for seconds in recorded["phases_s"].values())
    assert report["packet"]["pages"] == len(list(site.glob("packets/*/index.html")))
    assert report["family"]["pages"] == len(list(site.glob("models/*/index.html")))
    assert sum(k["pages"] for k in report.values()) == len(list(site.rglob("*.html")))
    assert all(k["cpu_ms_per_page"] > 0 for k in report.values())
