"""Family views kept per content (builder/view_cache.py): a damaged entry is made again, and a
change to anything but the packets (here, a recipe) is another key."""

from __future__ import annotations

import os
from pathlib import Path

from builder.cli import run
from tests.builder.counting import family_views_made
from tests.builder.factory import write_catalog


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _entries() -> list[Path]:
    return sorted((Path(os.environ["XDG_CACHE_HOME"]) / "llm-serving-catalog" / "views").rglob("*.pickle"))


def test_a_damaged_entry_is_made_again_and_an_edited_recipe_is_another_key(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    made = family_views_made(monkeypatch)
    data, packets = write_catalog(tmp_path / "tree")
    argv = ["build", "--data", str(data), "--packets", str(packets)]
    families = len(list((data / "models").glob("*.yaml")))
    assert run([*argv, "--out", str(tmp_path / "one")]) == 0
    assert len(made) == families and len(_entries()) == families
    for entry in _entries():
        entry.write_bytes(b"damaged")
    made.clear()
    assert run([*argv, "--out", str(tmp_path / "two")]) == 0
    assert len(made) == families
    assert _snapshot(tmp_path / "one") == _snapshot(tmp_path / "two")
    made.clear()
    recipe = sorted((data / "models").glob("*.yaml"))[0]
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("meta:", "meta:  # edited", 1), encoding="utf-8")
    assert run([*argv, "--out", str(tmp_path / "three")]) == 0
    assert len(made) == families  # data/ is part of every family's key


def test_views_taken_from_the_cache_are_read_with_the_collector_paused(tmp_path, monkeypatch):
    """1,000 families unpickled while the collector runs cost three times as much: they are read
    paused, then frozen, like records."""
    import gc

    from builder.view_cache import ViewCache

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    argv = ["build", "--data", str(data), "--packets", str(packets)]
    assert run([*argv, "--out", str(tmp_path / "one")]) == 0
    collecting: list[bool] = []
    real = ViewCache.get

    def reading(self: ViewCache, key: str, kind: str = "") -> object | None:
        if not kind:  # a family's card; its whole view is read where its page is rendered
            collecting.append(gc.isenabled())
        return real(self, key, kind)

    monkeypatch.setattr(ViewCache, "get", reading)
    assert run([*argv, "--out", str(tmp_path / "two")]) == 0
    assert collecting and not any(collecting)
    assert gc.isenabled()


def _whole_view_reads(monkeypatch) -> list[str]:
    """The key of every whole family view (not its index card) read from the cache."""
    from builder.view_cache import VIEW, ViewCache

    read: list[str] = []
    real = ViewCache.get

    def reading(self: ViewCache, key: str, kind: str = "") -> object | None:
        if kind == VIEW:
            read.append(key)
        return real(self, key, kind)

    monkeypatch.setattr(ViewCache, "get", reading)
    return read


def test_a_one_packet_rebuild_reads_the_whole_view_of_its_family_only(tmp_path, monkeypatch):
    """Every page but a family's own needs its index card, not its charts, tables and projections
    (70 KB a family at 1000 x 20): a rebuild reads the whole views of the family pages it renders."""
    from builder import site as site_module
    from builder.families import Family, family_views
    from tests.builder.test_site_incremental import _add_campaign, _build

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    site = tmp_path / "site"
    _build(data, packets, site, tmp_path / "t0.json")
    read = _whole_view_reads(monkeypatch)
    held: list[object] = []
    real = family_views

    def holding(*args: object, **kwargs: object) -> list[Family]:
        made = real(*args, **kwargs)  # type: ignore[arg-type]
        held.extend(family.held for family in made if family.held is not None)
        return made

    monkeypatch.setattr(site_module, "family_views", holding)
    _add_campaign(packets, "Fixture 7B, the same campaign again")
    rendered = _build(data, packets, site, tmp_path / "t1.json")
    families = len(list((data / "models").glob("*.yaml")))
    assert rendered.get("family") == 1 < families
    assert held == [] and len(read) == 1


def test_a_whole_view_the_cache_lost_is_made_again_where_its_page_is_rendered(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    argv = ["build", "--data", str(data), "--packets", str(packets)]
    assert run([*argv, "--out", str(tmp_path / "one")]) == 0
    for view in (Path(os.environ["XDG_CACHE_HOME"]) / "llm-serving-catalog" / "views").rglob("*.view"):
        view.unlink()
    read = _whole_view_reads(monkeypatch)
    assert run([*argv, "--out", str(tmp_path / "two"), "--full"]) == 0
    assert read  # sought, not found: made again
    assert _snapshot(tmp_path / "one") == _snapshot(tmp_path / "two")
