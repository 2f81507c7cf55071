"""The no-op proof (builder/build.py `plan`, builder/memory.py `Proof`): a build whose inputs and
site have the stats the last build recorded does nothing, and reads no byte to know it; any
change to either defeats it, and the build after it is the one a full build makes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder import assemble, inputs
from builder.cli import run
from builder.memory import Cache
from catalog.packets.seal import write_packet
from tests.builder.counting import file_reads
from tests.builder.factory import measured_parts, write_catalog
from tests.catalog.factories import seal_parts


def _build(data: Path, packets: Path, out: Path, *extra: str) -> int:
    return run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    monkeypatch.setattr(inputs, "RACY_NS", 0)  # the fixture's files are seconds old at most
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree")
    out = tmp_path / "site"
    assert _build(data, packets, out) == 0
    return data, packets, out


def _must_not_load(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a no-op loaded the catalog")

    monkeypatch.setattr(assemble, "load", refuse)


def test_a_no_op_reads_no_file_and_loads_nothing(built, monkeypatch, capsys):
    data, packets, out = built
    read = file_reads(monkeypatch)
    _must_not_load(monkeypatch)
    capsys.readouterr()
    assert _build(data, packets, out) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    assert read == []


def test_a_no_op_says_the_warnings_of_the_build_it_proves_and_strict_fails_on_them(built, monkeypatch, capsys):
    data, packets, out = built
    capsys.readouterr()
    _must_not_load(monkeypatch)
    assert _build(data, packets, out, "--strict") == 1
    err = capsys.readouterr().err
    assert "warning: empty-1b: no packets" in err and "--strict" in err


def test_an_input_touched_but_not_changed_is_hashed_once_and_the_no_op_holds(built, monkeypatch, capsys):
    data, packets, out = built
    recipe = data / "models" / "empty-1b.yaml"
    recipe.write_bytes(recipe.read_bytes())  # new stat, same bytes
    read = file_reads(monkeypatch)
    _must_not_load(monkeypatch)
    capsys.readouterr()
    assert _build(data, packets, out) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    assert read == [recipe]
    read.clear()
    assert _build(data, packets, out) == 0
    assert read == []  # its new stat was kept


@pytest.mark.parametrize("change", ["edit", "stray", "remove", "stray folder"])
def test_any_change_to_the_site_defeats_the_no_op_and_the_build_puts_it_right(built, tmp_path, change, capsys):
    data, packets, out = built
    before = _snapshot(out)
    page = out / "methodology" / "index.html"
    if change == "edit":
        page.write_bytes(page.read_bytes().replace(b"<html", b"<HTML", 1))
    elif change == "stray":
        (out / "stray.html").write_text("not the builder's")
    elif change == "remove":
        page.unlink()
    else:
        (out / "models" / "stray").mkdir()
    capsys.readouterr()
    assert _build(data, packets, out) == 0
    assert "unchanged" not in capsys.readouterr().out
    assert _snapshot(out) == before
    assert not (out / "models" / "stray").exists()


def test_a_new_packet_defeats_the_no_op(built, capsys):
    data, packets, out = built
    write_packet(seal_parts(measured_parts().model_copy(update={"title": "again"})), packets)
    capsys.readouterr()
    assert _build(data, packets, out) == 0
    assert "unchanged" not in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated"])
def test_a_lost_or_damaged_record_costs_one_full_build(built, tmp_path, damage, capsys):
    data, packets, out = built
    cache = Cache.of(out)
    for record in (cache.proof, cache.memory):
        if damage == "missing":
            record.unlink()
        elif damage == "garbage":
            record.write_bytes(b"not a pickle")
        else:
            record.write_bytes(record.read_bytes()[:40])
    capsys.readouterr()
    assert _build(data, packets, out) == 0
    assert "unchanged" not in capsys.readouterr().out
    assert _build(data, packets, out) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out


def test_an_input_folder_behind_a_link_is_proven_through_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(inputs, "RACY_NS", 0)
    data, packets = write_catalog(tmp_path / "tree")
    linked = tmp_path / "linked-data"
    os.symlink(data, linked)
    out = tmp_path / "site"
    assert _build(linked, packets, out) == 0
    capsys.readouterr()
    assert _build(linked, packets, out) == 0
    assert "inputs and files unchanged" in capsys.readouterr().out
    recipe = data / "models" / "empty-1b.yaml"
    recipe.write_text(recipe.read_text().replace("A family nobody has measured", "Still nobody"))
    assert _build(linked, packets, out) == 0
    assert "Still nobody" in (out / "models" / "empty-1b" / "index.html").read_text()
