"""Packets are read on every core when there are many: the result, errors included, must be
exactly what a one-process read gives, each error still naming its file and field."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from catalog import forked
from catalog.errors import CatalogError, CatalogErrors
from catalog.packets.layout import is_signature
from catalog.store import reading as packet_reading
from catalog.store.repository import load_catalog
from tests.builder.factory import write_catalog


def test_catalog_errors_survive_pickling_between_processes():
    error = CatalogError("bad", file="packets/x.json", field="arms[0].gates[1]", line=7)
    again = pickle.loads(pickle.dumps(error))
    assert (again.message, again.file, again.field, again.line) == ("bad", "packets/x.json", "arms[0].gates[1]", 7)
    many = pickle.loads(pickle.dumps(CatalogErrors([error, error])))
    assert [str(e) for e in many.errors] == [str(error)] * 2


def _outcome(data: Path, packets: Path) -> tuple[list[str], list[str]]:
    try:
        catalog = load_catalog(data, packets)
    except CatalogErrors as many:
        return [], [str(e) for e in many.errors]
    except CatalogError as one:
        return [], [str(one)]
    return sorted(catalog.packets), []


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: loading stays in one process")
def test_parallel_read_gives_what_a_sequential_read_gives(tmp_path, monkeypatch):
    data, packets = write_catalog(tmp_path)
    measured = next(p for p in packets.glob("fixture-7b-w4a16-*.json") if not is_signature(p))
    edited = measured.read_text().replace('"seed":7', '"seed":8')
    assert edited != measured.read_text()
    (packets / "broken-copy.json").write_text(edited)
    sequential = _outcome(data, packets)
    # the edited bytes hash to another digest than the file name carries
    assert sequential[1] and any("broken-copy.json: id: file name should be" in e for e in sequential[1])

    spawned: list[int] = []
    real_pool = forked.ProcessPoolExecutor  # type: ignore[attr-defined]

    def counting_pool(max_workers: int, mp_context: object) -> object:
        spawned.append(max_workers)
        return real_pool(max_workers=max_workers, mp_context=mp_context)  # type: ignore[call-overload]

    monkeypatch.setattr(packet_reading, "PACKETS_PER_WORKER", 1)
    monkeypatch.setattr(forked, "ProcessPoolExecutor", counting_pool)
    assert _outcome(data, packets) == sequential
    assert spawned and spawned[0] >= 2

    (packets / "broken-copy.json").unlink()
    assert _outcome(data, packets)[0] == sorted(p.stem for p in packets.glob("*.json") if not is_signature(p))
