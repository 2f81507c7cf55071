"""Patches that record what a build does in this process, for tests that assert it did not do
something again: read a file's bytes to hash it, make a family's view, or read a packet's record."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder import families as families_module
from builder import tree
from catalog.model.packet import Packet
from catalog.store.reading import Summaries


def file_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file the build reads to hash it (tree.file_sha256), in order."""
    read: list[Path] = []
    real = tree.file_sha256

    def counting(path: Path) -> str:
        read.append(path)
        return real(path)

    monkeypatch.setattr(tree, "file_sha256", counting)
    return read


def family_views_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The slug of every family view the build makes (in this process: no worker is forked)."""
    monkeypatch.setattr(families_module, "FAMILIES_PER_WORKER", 10**9)
    made: list[str] = []
    real = families_module.family_view  # type: ignore[attr-defined]

    def counting(slug: str, *args: object) -> object:
        made.append(slug)
        return real(slug, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(families_module, "family_view", counting)
    return made


def records_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The id of every packet whose record (catalog/store/record.py) the build reads from the cache."""
    read: list[str] = []
    real = Summaries.record

    def counting(self: Summaries, packet_id: str, path: Path) -> Packet:
        read.append(packet_id)
        return real(self, packet_id, path)

    monkeypatch.setattr(Summaries, "record", counting)
    return read
