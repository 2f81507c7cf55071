"""The no-op proven by snapshots (builder/snapshot.py): what it skips, and what still defeats it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder import snapshot, stamp, tree
from builder.cli import run
from catalog.packets.layout import is_signature
from catalog.packets.seal import write_packet
from tests.builder.counting import file_reads
from tests.builder.factory import REPO, repeat_parts, write_catalog
from tests.catalog.factories import seal_parts


def _build(data: Path, packets: Path, out: Path, *extra: str) -> int:
    return run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra])


@pytest.fixture
def catalog(tmp_path: Path) -> tuple[Path, Path]:
    return write_catalog(tmp_path)


@pytest.fixture
def built(tmp_path: Path, catalog: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(stamp, "RACY_NS", 0)  # the fixture's files are seconds old at most
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    return out


def _refuse(monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a no-op the snapshots prove used {what}")

    monkeypatch.setattr(stamp, what, refused)


def test_a_build_snapshots_every_entry_of_the_site_it_wrote(built):
    recorded = snapshot.Seen.load(built).site
    walked = snapshot.of_site(built)
    assert recorded is not None and walked is not None
    assert set(recorded.snapshot.listing[snapshot.SITE]) == set(walked.listing[snapshot.SITE])
    assert recorded.snapshot.holds({snapshot.SITE: str(built)})


def test_a_no_op_reads_no_fingerprint_table_manifest_or_file(built, catalog, monkeypatch, capsys):
    _refuse(monkeypatch, "unchanged")
    _refuse(monkeypatch, "recorded")
    monkeypatch.setattr(stamp.Fingerprints, "known", property(lambda self: pytest.fail("the table was parsed")))
    read = file_reads(monkeypatch)
    capsys.readouterr()
    assert _build(*catalog, built) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    assert read == []


def test_the_recorded_warnings_still_fail_a_strict_no_op(built, catalog, monkeypatch, capsys):
    _refuse(monkeypatch, "unchanged")
    assert _build(*catalog, built, "--strict") == 1
    assert "warning: empty-1b: no packets" in capsys.readouterr().err


def test_a_touched_input_is_looked_up_and_the_no_op_still_holds(built, catalog, monkeypatch, capsys):
    packet = next(p for p in sorted(catalog[1].glob("*.json")) if not is_signature(p))
    os.utime(packet)  # new mtime and ctime, the same bytes
    capsys.readouterr()
    assert _build(*catalog, built) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    _refuse(monkeypatch, "unchanged")  # and the next no-op is proven by the new snapshot
    assert _build(*catalog, built) == 0


def test_a_build_after_a_proven_input_hash_still_knows_every_input(built, catalog):
    """A site edit fails the site's snapshot but not the inputs': the build that follows still
    needs each input's sha256 (packets are read by it), and the fingerprints must keep them."""
    inputs = {str(p.resolve()) for folder in catalog for p in folder.rglob("*") if p.is_file()}
    (built / "index.html").write_text("hand edit")
    assert _build(*catalog, built) == 0
    assert inputs <= stamp.Fingerprints.load(built).known.keys()


def test_a_no_op_proven_through_the_manifest_keeps_every_input_fingerprint(built, catalog, capsys):
    """A touched site file fails the site's snapshot, so the manifest proves the no-op and the
    touched file is hashed again; the inputs, proven by their snapshot, were not looked up, and
    their fingerprints must survive the table being saved."""
    inputs = {str(p.resolve()) for folder in catalog for p in folder.rglob("*") if p.is_file()}
    os.utime(built / "index.html")
    capsys.readouterr()
    assert _build(*catalog, built) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    assert inputs <= stamp.Fingerprints.load(built).known.keys()


def test_a_rebuild_that_trusts_the_sites_snapshot_keeps_its_fingerprints(built, catalog):
    """A one-packet rebuild takes the current site as its snapshot proves it, without looking its
    files up (publishing compares them through their fingerprints): the fingerprints of the files
    it keeps must survive, or the next check of the site (a hand edit, --check) reads each again."""
    data, packets = catalog
    write_packet(seal_parts(repeat_parts(1)), packets)
    assert _build(data, packets, built) == 0
    site_files = {str(p.resolve()) for p in built.rglob("*") if p.is_file() and p.name != stamp.MANIFEST}
    assert site_files <= stamp.Fingerprints.load(built).known.keys()  # the manifest is read, never looked up


@pytest.mark.parametrize("change", ["stray file", "stray folder", "removed page", "edited page"])
def test_any_change_to_the_site_defeats_its_snapshot(built, catalog, change, capsys):
    index = built / "index.html"
    before = index.read_bytes()
    if change == "stray file":
        (built / "models" / "stray.html").write_text("x")
    elif change == "stray folder":
        (built / "models" / "stray").mkdir()
        (built / "models" / "stray" / "index.html").write_text("x")
    elif change == "removed page":
        (built / "methodology" / "index.html").unlink()
    else:
        index.write_bytes(before.replace(b"<html", b"<HTML", 1))
    capsys.readouterr()
    assert _build(*catalog, built) == 0
    assert "up to date" not in capsys.readouterr().out
    assert index.read_bytes() == before
    assert not (built / "models" / "stray.html").exists() and not (built / "models" / "stray").exists()


def test_a_new_packet_defeats_the_inputs_snapshot(built, catalog, capsys):
    data, packets = catalog
    added = write_packet(seal_parts(repeat_parts(1)), packets)
    capsys.readouterr()
    assert _build(data, packets, built) == 0
    assert "up to date" not in capsys.readouterr().out
    assert (built / "packets" / added.name).read_bytes() == added.read_bytes()


def test_an_unreadable_or_missing_record_costs_one_slower_no_op(built, catalog, capsys):
    snapshot.Seen.path_for(built).write_text("{not json")
    assert _build(*catalog, built) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    assert snapshot.Seen.load(built).site is not None  # written again by the no-op that proved the site
    snapshot.Seen.path_for(built).unlink()
    assert _build(*catalog, built) == 0
    assert snapshot.Seen.load(built).site is not None


def test_a_snapshot_no_longer_holds_once_an_entry_is_gone_or_odd(built):
    taken = snapshot.of_site(built)
    assert taken is not None and taken.holds({snapshot.SITE: str(built)})
    (built / "methodology" / "index.html").unlink()
    assert not taken.holds({snapshot.SITE: str(built)})
    os.mkfifo(built / "pipe")
    assert snapshot.of_site(built) is None  # neither file nor folder: only a full check judges it


def _clock_that_does_not_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshots see no size or time change, as when a write lands in the same clock tick as the
    hash before it and keeps the size (git's "racy clean" case)."""
    real = snapshot.line

    def line(relative: str, st: os.stat_result, sha: str | None = None) -> str:
        return real(relative, st, sha) if sha is not None else f"{relative}\0{st.st_mode}\0{st.st_ino}\n"

    monkeypatch.setattr(snapshot, "line", line)


@pytest.mark.parametrize("racy", [True, False])
def test_a_file_hashed_within_the_racy_window_is_taken_by_content(catalog, monkeypatch, racy):
    monkeypatch.setattr(stamp, "RACY_NS", 10**18 if racy else 0)
    _clock_that_does_not_tick(monkeypatch)
    data, packets = catalog

    def inputs(seen: snapshot.RootsSeen | None) -> stamp.Inputs:
        return stamp.input_hash(data, packets, REPO / "templates", "", stamp.Fingerprints(), seen=seen)

    first = inputs(None)
    assert first.roots is not None
    assert bool(first.roots.snapshot.recheck) == racy
    recipe = data / "models" / "fixture-7b.yaml"
    text = recipe.read_text()
    recipe.write_text(text.replace("a", "b", 1))
    again = inputs(first.roots)
    # outside the window a fingerprint vouches for the bytes: that is why the window exists
    assert (again.sha256 != first.sha256) == racy


@pytest.mark.parametrize("behind_a_link", ["packets", "site"])
def test_a_folder_behind_a_link_is_snapshot_through_it(tmp_path, catalog, monkeypatch, capsys, behind_a_link):
    """A link's own stat does not move when an entry is added in the folder it names: a root is
    taken by the folder it leads to, as the walk and the build see it."""
    monkeypatch.setattr(stamp, "RACY_NS", 0)
    data, packets = catalog
    linked = tmp_path / "packets-link"
    linked.symlink_to(packets)
    real_site = tmp_path / "real-site"
    real_site.mkdir()
    out = tmp_path / "site-link"
    out.symlink_to(real_site)
    assert _build(data, linked, out) == 0
    if behind_a_link == "packets":
        write_packet(seal_parts(repeat_parts(1)), packets)
    else:
        (real_site / "stray.html").write_text("not built")
    capsys.readouterr()
    assert _build(data, linked, out) == 0
    assert "up to date" not in capsys.readouterr().out
    assert not (real_site / "stray.html").exists()


def test_an_entry_added_to_a_root_fails_its_snapshot_before_any_entry_is_stated(tmp_path, monkeypatch):
    """Adding a packet moves the packets folder's times: the inputs' snapshot fails on that one
    stat, not after a stat of each of its 40,000 entries."""
    root = tmp_path / "root"
    root.mkdir()
    for number in range(20):
        (root / f"{number}.json").write_text("{}")
    os.utime(root, ns=(10**18, 10**18))  # so the entry added below moves its mtime within any clock tick
    taking = snapshot.Taking()
    taking.root("packets", snapshot.root_stat(str(root)))
    for entry in tree.walk(str(root)):
        assert entry.stat is not None
        taking.entry("packets", entry.relative, entry.stat)
    taken = taking.done()
    kept = snapshot.Snapshot.from_json(taken.as_json())  # as the next run reads it
    assert taken.holds({"packets": str(root)}) and kept.holds({"packets": str(root)})
    (root / "new.json").write_text("{}")
    stated: list[str] = []
    real = os.lstat

    def counting(path: str, *args: object, **kwargs: object) -> os.stat_result:
        stated.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", counting)
    assert not kept.holds({"packets": str(root)})
    assert stated == []
