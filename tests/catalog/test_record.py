"""The builder holds each cached packet as its record (its summary without prompt rows) and reads
the summary back for the packet's own page: the rows a record stands in for are never silently
empty, and a summary read back is the one the record was made from, or refused."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from catalog.errors import CatalogError
from catalog.projection.cells import cell_for_arm
from catalog.recipes.hardware import HardwareFile
from catalog.store.cache import summarize
from catalog.store.documents import load_file
from catalog.store.record import RowsElsewhere, RowsNotHeld, is_record, prompt_sizes, record
from catalog.store.repository import load_catalog
from tests.builder.factory import write_catalog


@pytest.fixture
def catalog_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return write_catalog(tmp_path / "tree")


def _cache_entries(kind: str) -> list[Path]:
    import os

    return sorted((Path(os.environ["XDG_CACHE_HOME"]) / "llm-serving-catalog" / "summaries").rglob(f"*.{kind}"))


def test_a_record_keeps_how_many_rows_and_their_prompt_sizes_and_refuses_the_rows(catalog_dirs):
    data, packets = catalog_dirs
    whole = load_catalog(data, packets)
    with_rows = [p for p in whole.packets.values() if any(s.rows for a in p.arms for s in a.servers)]
    assert with_rows
    for packet in with_rows:
        made = record(summarize(packet))
        assert is_record(made) and not is_record(packet)
        assert made.identity == packet.identity and made.seal == packet.seal
        for arm, made_arm in zip(packet.arms, made.arms, strict=True):
            for server, held in zip(arm.servers, made_arm.servers, strict=True):
                assert isinstance(held.rows, RowsElsewhere)
                assert len(held.rows) == len(server.rows) and bool(held.rows) == bool(server.rows)
                assert prompt_sizes(held.rows) == prompt_sizes(server.rows) == [r.prompt_tokens for r in server.rows]
                if server.rows:
                    with pytest.raises(RowsNotHeld):
                        next(iter(held.rows))
                    with pytest.raises(RowsNotHeld):
                        held.rows[0]
        assert pickle.loads(pickle.dumps(made)) == made


def test_the_projection_reads_the_same_inputs_from_a_record(catalog_dirs):
    data, packets = catalog_dirs
    whole = load_catalog(data, packets)
    hardware = load_file(HardwareFile, data / "hardware.yaml").by_id()
    compared = 0
    for packet in whole.packets.values():
        made = record(summarize(packet))
        card = hardware.get(packet.identity.host.hardware)
        if card is None:
            continue
        recipe = whole.recipes.get(packet.identity.model.slug)
        for arm, made_arm in zip(packet.arms, made.arms, strict=True):
            from_record = cell_for_arm(made, made_arm, card, recipe)
            from_rows = cell_for_arm(packet, arm, card, recipe)
            assert (from_record is None) == (from_rows is None)
            if from_record is not None and from_rows is not None:
                assert replace(from_record, packet=None, arm=None) == replace(from_rows, packet=None, arm=None)
                compared += bool(from_rows.prompt_source.endswith("prompt rows"))
    assert compared


def test_a_cached_load_holds_records_and_reads_each_summary_back(catalog_dirs):
    data, packets = catalog_dirs
    whole = load_catalog(data, packets)
    for _ in range(2):  # verified, then from the cache
        held = load_catalog(data, packets, summaries=True, use_cache=True)
        assert all(is_record(p) for p in held.packets.values())
        assert {i: held.summary(i) for i in held.packets} == {i: summarize(p) for i, p in whole.packets.items()}


def test_a_summary_the_cache_lost_is_verified_again_and_a_changed_file_is_refused(catalog_dirs):
    data, packets = catalog_dirs
    held = load_catalog(data, packets, summaries=True, use_cache=True)
    for entry in _cache_entries("pickle"):
        entry.unlink()  # recipes too: they are not read back
    packet_id = sorted(held.packets)[0]
    assert held.summary(packet_id) == summarize(load_catalog(data, packets).packets[packet_id])
    path = held.packet_paths[packet_id]
    path.write_bytes(path.read_bytes().replace(b'"seed":', b'"seed": ', 1))
    with pytest.raises(CatalogError) as refused:
        held.summary(packet_id)
    assert refused.value.file == str(path) or Path(str(refused.value.file)) == path
    assert "changed while the site was built" in str(refused.value)


def test_without_a_cache_the_summaries_are_held(catalog_dirs):
    data, packets = catalog_dirs
    held = load_catalog(data, packets, summaries=True)
    assert held.summaries is None
    assert not any(is_record(p) for p in held.packets.values())
    assert _cache_entries("record") == []


def test_a_cache_that_cannot_be_written_leaves_the_summaries_held(catalog_dirs, monkeypatch):
    """A record is only held when its summary is in the cache to be read back; otherwise the
    build holds the summary itself (slower to load, never missing rows)."""
    from catalog.store import reading as packet_reading
    from catalog.store.cache import SummaryCache

    monkeypatch.setattr(packet_reading, "PACKETS_PER_WORKER", 10**9)
    monkeypatch.setattr(SummaryCache, "put", lambda *_args, **_kwargs: False)
    data, packets = catalog_dirs
    whole = load_catalog(data, packets)
    held = load_catalog(data, packets, summaries=True, use_cache=True)
    assert held.summaries is None
    assert {i: held.summary(i) for i in held.packets} == {i: summarize(p) for i, p in whole.packets.items()}
