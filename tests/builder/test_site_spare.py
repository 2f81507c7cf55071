"""The spare (builder/output.py, `Cache.spare`): the site a build replaced waits in the cache, and
the next build assembles its site in it. What the spare holds is never trusted: a file stays only
when it is the very inode the current site holds and unchanged; anything else in it goes."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest

from builder import assemble, inputs, output
from builder.cli import run
from builder.memory import Cache
from builder.pages import Page
from catalog.errors import CatalogError
from catalog.packets.seal import write_packet
from tests.builder.counting import file_reads
from tests.builder.factory import measured_parts, write_catalog
from tests.catalog.factories import seal_parts

KEPT_PAGE = "methodology/index.html"  # a page no new packet changes


def _build(data: Path, packets: Path, out: Path, *extra: str) -> None:
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra]) == 0


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _folders(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_dir()}


def _add_campaign(packets: Path, title: str) -> Path:
    return write_packet(seal_parts(measured_parts().model_copy(update={"title": title})), packets)


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}"))


def _full_build(data: Path, packets: Path, tmp_path: Path) -> dict[str, bytes]:
    fresh = tmp_path / "fresh"
    _build(data, packets, fresh, "--full")
    return _snapshot(fresh)


@pytest.fixture
def rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A catalog built, then rebuilt after a new packet: the first site waits as the spare."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    out = tmp_path / "site"
    _build(data, packets, out)
    _add_campaign(packets, "Fixture 7B, a second campaign")
    _build(data, packets, out)
    assert Cache.of(out).spare.is_dir()
    return data, packets, out


def test_the_next_site_is_assembled_in_the_spare_and_is_the_full_builds(rebuilt, tmp_path):
    data, packets, out = rebuilt
    spare = Cache.of(out).spare
    before, spare_folder, site_folder = _snapshot(out), spare.stat().st_ino, out.stat().st_ino
    kept_ctime = (out / KEPT_PAGE).stat().st_ctime_ns
    _add_campaign(packets, "Fixture 7B, a third campaign")
    _build(data, packets, out)
    assert out.stat().st_ino == spare_folder  # the spare became the site, the site the spare
    assert spare.stat().st_ino == site_folder and _snapshot(spare) == before
    assert (out / KEPT_PAGE).stat().st_ctime_ns == kept_ctime  # neither rewritten nor linked again
    assert _snapshot(out) == _full_build(data, packets, tmp_path)
    assert _folders(out) == _folders(tmp_path / "fresh")
    assert _siblings(out) == []


def _forge(spare: Path) -> None:
    """Everything a spare could hold that the next site must not."""
    page = spare / KEPT_PAGE
    page.unlink()
    page.write_text("forged: another file at the name of a page the next build keeps")
    (spare / "stray.html").write_text("not in the site")
    (spare / "stray-folder" / "deep").mkdir(parents=True)
    (spare / "stray-folder" / "deep" / "x.html").write_text("not in the site")
    (spare / "assets" / "link.js").symlink_to("/etc/hostname")
    index = spare / "index.html"
    index.unlink()
    (index / "inside").mkdir(parents=True)  # a folder where a file goes
    packets = sorted((spare / "packets").glob("*.json"))
    packets[0].unlink()
    packets[0].symlink_to(packets[1])


def test_whatever_the_spare_holds_the_site_is_the_full_builds(rebuilt, tmp_path):
    data, packets, out = rebuilt
    _forge(Cache.of(out).spare)
    _add_campaign(packets, "Fixture 7B, a third campaign")
    _build(data, packets, out)
    assert _snapshot(out) == _full_build(data, packets, tmp_path)
    assert _folders(out) == _folders(tmp_path / "fresh")
    assert not any(p.is_symlink() for p in out.rglob("*"))


def test_a_spare_file_edited_in_place_is_caught_through_the_site_it_shares_it_with(rebuilt, tmp_path, monkeypatch):
    """A spare file unchanged since the last build is the site's own inode: editing it edits the
    site, whose fingerprint (ctime) tells, even with size and mtime put back."""
    monkeypatch.setattr(inputs, "RACY_NS", 0)
    data, packets, out = rebuilt
    shared = Cache.of(out).spare / KEPT_PAGE
    assert shared.stat().st_ino == (out / KEPT_PAGE).stat().st_ino
    before = shared.stat()
    content = shared.read_bytes()
    shared.write_bytes(content.replace(b"<html", b"<HTML", 1))
    os.utime(shared, ns=(before.st_atime_ns, before.st_mtime_ns))
    _add_campaign(packets, "Fixture 7B, a third campaign")
    _build(data, packets, out)
    assert (out / KEPT_PAGE).read_bytes() == content
    assert _snapshot(out) == _full_build(data, packets, tmp_path)


def test_a_spare_another_build_holds_is_left_alone(rebuilt, tmp_path):
    data, packets, out = rebuilt
    spare = Cache.of(out).spare
    (spare / "marker").write_text("the other build's")
    fd = os.open(spare, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _add_campaign(packets, "Fixture 7B, a third campaign")
        _build(data, packets, out)
    finally:
        os.close(fd)
    assert (spare / "marker").read_text() == "the other build's"
    assert _snapshot(out) == _full_build(data, packets, tmp_path)
    assert _siblings(out) == []


def test_a_failed_build_leaves_the_site_and_puts_the_spare_back(rebuilt, monkeypatch):
    data, packets, out = rebuilt
    spare = Cache.of(out).spare
    before, spare_folder = _snapshot(out), spare.stat().st_ino

    def failing_write(path: Path, content: bytes) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(output, "_write", failing_write)
    _add_campaign(packets, "Fixture 7B, a third campaign")
    with pytest.raises(CatalogError, match="cannot write the site: disk full"):
        _build(data, packets, out)
    assert _snapshot(out) == before
    assert spare.stat().st_ino == spare_folder
    assert _siblings(out) == []


@pytest.mark.parametrize("bad", ["../outside.html", "packets/../../outside.html", "/tmp/outside.html"])
def test_a_path_out_of_the_site_is_refused_when_assembling_in_the_spare(rebuilt, monkeypatch, bad):
    """Every file is written through a checked path: a page routed out of the site fails the
    build, writes nothing outside, and leaves the site and the spare."""
    data, packets, out = rebuilt
    spare = Cache.of(out).spare
    before, spare_folder = _snapshot(out), spare.stat().st_ino
    real_pages = assemble.site_pages  # type: ignore[attr-defined]

    def pages_out_of_the_site(*args: object, **kwargs: object) -> list[Page]:
        return [*real_pages(*args, **kwargs), Page(bad, "404.html", {}, "out", "of the site")]  # type: ignore[arg-type]

    monkeypatch.setattr(assemble, "site_pages", pages_out_of_the_site)
    _add_campaign(packets, "Fixture 7B, a third campaign")
    with pytest.raises(CatalogError, match="refusing to write"):
        _build(data, packets, out)
    assert _snapshot(out) == before
    assert not (out.parent / "outside.html").exists() and not Path("/tmp/outside.html").exists()
    assert spare.stat().st_ino == spare_folder
    assert _siblings(out) == []


def test_after_a_rebuild_in_the_spare_a_no_op_reads_no_file(rebuilt, monkeypatch):
    """Files left in place keep the fingerprints looked up while publishing; the rest get new ones."""
    monkeypatch.setattr(inputs, "RACY_NS", 0)
    data, packets, out = rebuilt
    _add_campaign(packets, "Fixture 7B, a third campaign")
    _build(data, packets, out)
    read = file_reads(monkeypatch)
    _build(data, packets, out)
    assert read == []


def test_a_stray_file_in_the_site_neither_stops_an_incremental_build_nor_survives_it(rebuilt, tmp_path):
    data, packets, out = rebuilt
    (out / "stray.html").write_text("not the builder's")
    (out / "models" / "stray").mkdir()
    timings = tmp_path / "timings.json"
    _add_campaign(packets, "Fixture 7B, a third campaign")
    _build(data, packets, out, "--timings", str(timings))
    rendered = json.loads(timings.read_text())["pages"]
    assert rendered["packet"]["pages"] == 1 and "methodology" not in rendered  # incremental
    assert _snapshot(out) == _full_build(data, packets, tmp_path)
    assert _folders(out) == _folders(tmp_path / "fresh")


def test_a_rebuild_after_the_cache_was_removed_keeps_a_spare_again(rebuilt, tmp_path):
    data, packets, out = rebuilt
    cache = Cache.of(out).spare.parent
    shutil.rmtree(cache)  # what a user clearing ~/.cache does
    before = _snapshot(out)
    _add_campaign(packets, "Fixture 7B, a third campaign")
    _build(data, packets, out, "--no-cache")  # nothing else makes the cache folder again first
    assert _snapshot(Cache.of(out).spare) == before
    assert _snapshot(out) == _full_build(data, packets, tmp_path)


def test_without_a_spare_the_site_is_built_in_a_new_folder_and_leaves_one(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    out = tmp_path / "site"
    _build(data, packets, out)
    shutil.rmtree(Cache.of(out).spare)  # the spare lost, what the build remembered kept
    before = _snapshot(out)
    _add_campaign(packets, "Fixture 7B, a second campaign")
    _build(data, packets, out)
    assert _snapshot(out) == _full_build(data, packets, tmp_path)
    assert _folders(out) == _folders(tmp_path / "fresh")
    assert _snapshot(Cache.of(out).spare) == before
    assert _siblings(out) == []


def test_a_first_build_leaves_a_spare_so_the_first_rebuild_makes_no_folder_again(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    out = tmp_path / "site"
    _build(data, packets, out)
    spare = Cache.of(out).spare
    assert _snapshot(spare) == _snapshot(out) and _folders(spare) == _folders(out)
    assert (spare / KEPT_PAGE).stat().st_ino == (out / KEPT_PAGE).stat().st_ino  # links, not copies
    spare_folder = spare.stat().st_ino
    _add_campaign(packets, "Fixture 7B, a second campaign")
    _build(data, packets, out)
    assert out.stat().st_ino == spare_folder
    assert _snapshot(out) == _full_build(data, packets, tmp_path)


def test_a_build_into_an_emptied_folder_replaces_the_spare_of_the_site_that_went(tmp_path, monkeypatch):
    """The spare of a site removed by hand shares no file with any site: it is removed while the
    new site is built, and the new site leaves a spare of its own (so the next rebuild keeps it)."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    out = tmp_path / "site"
    _build(data, packets, out)
    shutil.rmtree(out)
    _build(data, packets, out)
    spare = Cache.of(out).spare
    assert (spare / KEPT_PAGE).stat().st_ino == (out / KEPT_PAGE).stat().st_ino
    assert _siblings(out) == []
    spare_folder = spare.stat().st_ino
    _add_campaign(packets, "Fixture 7B, a second campaign")
    _build(data, packets, out)
    assert out.stat().st_ino == spare_folder
    assert _snapshot(out) == _full_build(data, packets, tmp_path)


def _editing_during_the_build(monkeypatch: pytest.MonkeyPatch, page: Path) -> bytes:
    """Edit `page` in place once the first build from now has checked the site and rendered its
    pages, its size and mtime put back: only its ctime tells. Returns what it held."""
    content, real = page.read_bytes(), assemble.load
    edits = [1]

    def building(*args: object, **kwargs: object) -> object:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        if not edits:
            return result
        edits.pop()
        before = page.stat()
        page.write_bytes(content.replace(b"<html", b"<HTML", 1))
        os.utime(page, ns=(before.st_atime_ns, before.st_mtime_ns))
        return result

    monkeypatch.setattr(assemble, "load", building)
    return content


def test_a_site_page_edited_while_the_site_is_built_is_refused_then_put_back(rebuilt, tmp_path, monkeypatch):
    """The current site was proven intact when the build began (its snapshot held) and a kept page
    is taken from it; publishing checks it again, so one edited since is refused, naming it, and
    the site is left as it was. The next build finds the site edited and builds it whole."""
    monkeypatch.setattr(inputs, "RACY_NS", 0)
    data, packets, out = rebuilt
    page = out / KEPT_PAGE
    content = _editing_during_the_build(monkeypatch, page)
    added = _add_campaign(packets, "Fixture 7B, a third campaign")
    with pytest.raises(CatalogError, match="changed while the site was being built") as refused:
        _build(data, packets, out)
    assert str(page) in str(refused.value)
    assert page.read_bytes() != content and not (out / "packets" / added.stem).exists()
    _build(data, packets, out)
    assert page.read_bytes() == content
    assert _snapshot(out) == _full_build(data, packets, tmp_path)
