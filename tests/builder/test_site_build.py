"""Build properties: deterministic, --check, --strict, atomic replacement, no writes outside the
output folder, SOURCE_DATE_EPOCH."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from builder import assemble, inputs, output
from builder.cli import run
from builder.output import Targets, check_output_folder
from catalog.errors import CatalogError
from catalog.packets.layout import is_signature
from catalog.store import reading
from tests.builder.counting import file_reads
from tests.builder.factory import REPO, write_catalog


def _build(data: Path, packets: Path, out: Path, *extra: str) -> int:
    return run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra])


def _packet_file(packets: Path, prefix: str = "fixture-7b-w4a16-") -> Path:
    """A packet file, never its signature beside it."""
    return next(p for p in sorted(packets.glob(f"{prefix}*.json")) if not is_signature(p))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def catalog(tmp_path: Path) -> tuple[Path, Path]:
    return write_catalog(tmp_path)


def test_two_builds_are_byte_identical(tmp_path, catalog, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert _build(*catalog, tmp_path / "one") == 0
    assert _build(*catalog, tmp_path / "two") == 0
    one, two = _snapshot(tmp_path / "one"), _snapshot(tmp_path / "two")
    assert one.keys() == two.keys()
    assert [k for k in one if one[k] != two[k]] == []


@pytest.mark.slow
def test_build_in_a_fresh_process_is_identical(tmp_path, catalog, monkeypatch):
    """Hash seeds and import order differ between processes; the output must not."""
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert _build(*catalog, tmp_path / "here") == 0
    data, packets = catalog
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    env.pop("SOURCE_DATE_EPOCH", None)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "builder",
            "build",
            "--data",
            str(data),
            "--packets",
            str(packets),
            "--out",
            str(tmp_path / "there"),
        ],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    assert _snapshot(tmp_path / "here") == _snapshot(tmp_path / "there")


def test_check_passes_when_current_and_names_stale_files(tmp_path, catalog, capsys):
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    capsys.readouterr()
    assert _build(*catalog, out, "--check") == 0
    (out / "index.html").write_text("edited")
    (out / "stray.txt").write_text("x")
    (out / "methodology/index.html").unlink()
    assert _build(*catalog, out, "--check") == 1
    err = capsys.readouterr().err
    assert "differs: index.html" in err
    assert "extra: stray.txt" in err
    assert "missing: methodology/index.html" in err
    assert (out / "index.html").read_text() == "edited"  # --check writes nothing


def test_strict_fails_on_warnings_and_writes_nothing(tmp_path, catalog, capsys):
    out = tmp_path / "site"
    assert _build(*catalog, out, "--strict") == 1
    err = capsys.readouterr().err
    assert "warning: empty-1b: no packets" in err
    assert all(line.startswith(("warning: ", "error: ")) for line in err.splitlines())
    assert not out.exists()


def test_rebuild_with_nothing_changed_touches_nothing(tmp_path, catalog):
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    inode = (out / "index.html").stat().st_ino
    assert _build(*catalog, out) == 0  # how fast: bench/builder_bench.py's no-op figure
    assert (out / "index.html").stat().st_ino == inode


def test_changed_input_replaces_the_site_whole(tmp_path, catalog):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out) == 0
    (out / "leftover.html").write_text("old")
    recipe = data / "models" / "empty-1b.yaml"
    recipe.write_text(recipe.read_text().replace("A family nobody has measured", "Still nobody"))
    assert _build(data, packets, out) == 0
    assert "Still nobody" in (out / "models/empty-1b/index.html").read_text()
    assert not (out / "leftover.html").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site")] == []


def test_invalid_input_leaves_the_old_site(tmp_path, catalog):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out) == 0
    before = _snapshot(out)
    victim = _packet_file(packets)
    _replace(victim, victim.read_text().replace('"max_tokens":512', '"max_tokens":513'))
    with pytest.raises(CatalogError, match="the id its bytes hash to"):
        _build(data, packets, out)
    assert _snapshot(out) == before


def _replace(path: Path, text: str) -> None:
    """A new file in place of `path`, as packets are written (catalog.files.write_file) and as git
    checks files out: the site's hard link keeps the bytes it published."""
    new = path.with_name(path.name + ".new")
    new.write_text(text)
    new.replace(path)


def test_a_packet_edited_in_place_is_the_sites_copy_too_and_the_next_build_refuses_it(tmp_path, catalog):
    """The site's packet files are hard links of packets/ (publishing copies nothing): a packet
    edited in place is edited there too, and the next build refuses it, naming the file."""
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out) == 0
    victim = _packet_file(packets)
    victim.write_text(victim.read_text().replace('"max_tokens":512', '"max_tokens":513'))
    assert (out / "packets" / victim.name).read_bytes() == victim.read_bytes()
    with pytest.raises(CatalogError, match="the id its bytes hash to") as caught:
        _build(data, packets, out)
    assert caught.value.file == str(victim)


def test_failure_while_writing_leaves_the_old_site(tmp_path, catalog, monkeypatch):
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out) == 0
    before = _snapshot(out)
    recipe = data / "models" / "empty-1b.yaml"
    recipe.write_text(recipe.read_text().replace("A family nobody has measured", "Changed"))
    calls = {"n": 0}
    real_write = output._write

    def failing_write(path: Path, content: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError("disk full")
        real_write(path, content)

    monkeypatch.setattr(output, "_write", failing_write)
    with pytest.raises(CatalogError, match="cannot write the site: disk full"):
        _build(data, packets, out)
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site")] == []


@pytest.mark.parametrize("bad", ["../escape.html", "/etc/passwd", "a/../../x", "a//b", "", ".", "a\\b"])
def test_paths_outside_the_output_are_refused(tmp_path, bad):
    with pytest.raises(CatalogError):
        Targets(tmp_path / "site").of(bad)


def test_symlink_escape_is_refused(tmp_path):
    out = tmp_path / "site"
    (out / "assets").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (out / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CatalogError):
        Targets(out).of("link/x.html")


def test_a_page_routed_out_of_the_site_is_refused_and_nothing_is_written_outside(tmp_path):
    staging = tmp_path / "staging"
    staging.mkdir()
    for bad in ("../outside.html", "a/../../outside.html"):
        with pytest.raises(CatalogError):
            Targets(staging).made(bad)
    assert not (tmp_path / "outside.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["staging"]


def test_output_folder_that_holds_inputs_is_refused(tmp_path, catalog):
    data, packets = catalog
    with pytest.raises(CatalogError, match="contains"):
        check_output_folder(tmp_path, [data, packets])
    not_a_site = tmp_path / "notes"
    not_a_site.mkdir()
    (not_a_site / "precious.txt").write_text("keep")
    with pytest.raises(CatalogError, match="does not look like a built site"):
        _build(data, packets, not_a_site)
    assert (not_a_site / "precious.txt").read_text() == "keep"


def test_source_date_epoch_sets_the_build_date(tmp_path, catalog, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    assert _build(*catalog, tmp_path / "default") == 0
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert _build(*catalog, tmp_path / "epoch") == 0

    def shown(folder: Path) -> str:
        soup = BeautifulSoup((folder / "index.html").read_text(), "lxml")
        return soup.select_one("footer time")["datetime"]  # type: ignore[index, return-value]

    # without the variable: the newest date the inputs carry (the measured packet's created day)
    assert shown(tmp_path / "default") == "2026-05-06"
    assert shown(tmp_path / "epoch") == "1970-01-01"


def test_bad_source_date_epoch_is_a_user_error(tmp_path, catalog, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(CatalogError, match="SOURCE_DATE_EPOCH"):
        _build(*catalog, tmp_path / "site")


@pytest.mark.slow
def test_cli_prints_catalog_errors_without_traceback(tmp_path, catalog):
    data, packets = catalog
    (data / "models" / "broken.yaml").write_text("meta: [unclosed\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "builder",
            "build",
            "--data",
            str(data),
            "--packets",
            str(packets),
            "--out",
            str(tmp_path / "site"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: ")
    assert "broken.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def test_noop_rebuild_skips_rendering_but_not_hand_edits(tmp_path, catalog, capsys, monkeypatch):
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    before = _snapshot(out)

    def must_not_load(*args, **kwargs):
        raise AssertionError("a no-op rebuild loaded the catalog")

    monkeypatch.setattr(assemble, "load", must_not_load)
    capsys.readouterr()
    assert _build(*catalog, out) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    assert _build(*catalog, out, "--strict") == 1  # the recorded warnings still count
    assert "warning: empty-1b: no packets" in capsys.readouterr().err
    monkeypatch.undo()
    (out / "index.html").write_text("hand edit")
    assert _build(*catalog, out) == 0
    assert _snapshot(out) == before


def test_manifest_records_every_file(tmp_path, catalog):
    import json

    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    recorded = json.loads((out / ".catalog-build.json").read_text())
    assert set(recorded["files"]) == set(_snapshot(out)) - {".catalog-build.json"}
    assert recorded["warnings"] == [w for w in recorded["warnings"] if w]


def test_no_op_rebuild_reads_no_file_through_fingerprints(tmp_path, catalog, monkeypatch):
    monkeypatch.setattr(inputs, "RACY_NS", 0)  # the fixture's files are seconds old at most
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    read = file_reads(monkeypatch)
    assert _build(*catalog, out) == 0
    assert read == []


def test_a_file_changed_within_the_racy_window_is_hashed_again(tmp_path, catalog, monkeypatch):
    monkeypatch.setattr(inputs, "RACY_NS", 10**18)  # as if every input had been written just now
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    read = file_reads(monkeypatch)
    assert _build(*catalog, out) == 0
    assert any(p.suffix == ".json" and p.parent.name == "packets" for p in read)


def _rewrite_keeping_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    before = path.stat()
    content = path.read_bytes()
    assert len(old) == len(new) and old in content
    path.write_bytes(content.replace(old, new, 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # only ctime still tells


def test_a_packet_edited_behind_the_fingerprints_is_still_caught(tmp_path, catalog, monkeypatch, capsys):
    monkeypatch.setattr(inputs, "RACY_NS", 0)
    data, packets = catalog
    out = tmp_path / "site"
    assert _build(data, packets, out) == 0
    victim = _packet_file(packets)
    _rewrite_keeping_size_and_mtime(victim, b'"seed":7', b'"seed":8')
    with pytest.raises(CatalogError, match="the id its bytes hash to"):
        _build(data, packets, out)


def test_a_site_file_edited_behind_the_fingerprints_is_rebuilt(tmp_path, catalog, monkeypatch):
    monkeypatch.setattr(inputs, "RACY_NS", 0)
    out = tmp_path / "site"
    assert _build(*catalog, out) == 0
    page = out / "index.html"
    original = page.read_bytes()
    _rewrite_keeping_size_and_mtime(page, b"<html", b"<HTML")
    assert _build(*catalog, out) == 0
    assert page.read_bytes() == original


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_a_packet_changed_while_the_site_is_built_is_refused(tmp_path, catalog, monkeypatch, keep_mtime):
    """The pages were rendered from what was verified; a copy of other bytes must not be published.
    The copy is checked through the source's fingerprint, which the edit's ctime moves even when
    size and mtime are put back."""
    monkeypatch.setattr(inputs, "RACY_NS", 0)  # the packet was hashed a moment ago: trust its fingerprint
    data, packets = catalog
    victim = _packet_file(packets)
    real_load = assemble.load

    def build_then_edit(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_load(*args, **kwargs)
        if keep_mtime:
            _rewrite_keeping_size_and_mtime(victim, b'"seed":7', b'"seed":8')
        else:
            edited = victim.read_text().replace('"seed":7', '"seed":8')
            assert edited != victim.read_text()
            victim.write_text(edited)
        return result

    monkeypatch.setattr(assemble, "load", build_then_edit)
    out = tmp_path / "site"
    with pytest.raises(CatalogError, match="changed while the site was being built") as caught:
        _build(data, packets, out)
    assert caught.value.file == str(victim)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".site")] == []


def test_targets_resolve_each_folder_once_and_still_refuse_a_link_out(tmp_path):
    out = tmp_path / "site"
    (out / "inside").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (out / "link").symlink_to(tmp_path / "elsewhere")
    (out / "alias").symlink_to(out / "inside")
    targets = Targets(out)
    for _ in range(2):  # the second time from the folder cache
        with pytest.raises(CatalogError, match="resolves outside"):
            targets.of("link/x.html")
        assert targets.of("alias/y.html") == (out / "inside" / "y.html").resolve()
    assert targets.of("packets/a/index.html") == out.resolve() / "packets" / "a" / "index.html"


def _whole_file_hint(path: Path) -> datetime | None:
    data = path.read_bytes()
    at = data.rfind(b',"created":"')
    return None if at < 0 else datetime.fromisoformat(data[at + 12 : data.find(b'"', at + 12)].decode())


def test_the_created_hint_read_from_a_packets_tail_is_the_one_its_whole_file_gives(tmp_path, catalog, monkeypatch):
    _, packets = catalog
    paths = [p for p in sorted(packets.glob("*.json")) if not is_signature(p)]
    demo = next(p for p in sorted((REPO / "packets").glob("demo-bf16-*.json")) if not is_signature(p))
    data = demo.read_bytes()
    assert len(data) - data.rfind(b',"created":"') > reading.CREATED_TAIL  # its ladders follow `created`
    for tail in (reading.CREATED_TAIL, 64):  # 64: the key before every packet's tail, each read whole again
        monkeypatch.setattr(reading, "CREATED_TAIL", tail)
        for path in [*paths, demo]:
            assert reading.created_hint(path) == _whole_file_hint(path), (tail, path.name)
    assert sum(_whole_file_hint(p) is not None for p in [*paths, demo]) >= 2  # a measured packet names its day
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert reading.created_hint(fifo) is None  # refused unread, never a blocked build
