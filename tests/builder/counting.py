"""Patches that record what a build does in this process, for tests that assert it did not do
something again: read a file's bytes to hash it, make a family's view, or read a packet."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder import assemble, inputs


def file_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every input file the build reads to hash it (builder/inputs.py), in order."""
    read: list[Path] = []
    real = inputs.file_sha256  # type: ignore[attr-defined]

    def counting(path: Path) -> str:
        read.append(path)
        return real(path)

    monkeypatch.setattr(inputs, "file_sha256", counting)
    return read


def family_views_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The slug of every family view the build makes (in this process: no worker is forked)."""
    monkeypatch.setattr(assemble, "PACKETS_PER_WORKER", 10**9)
    made: list[str] = []
    real = assemble.family_view  # type: ignore[attr-defined]

    def counting(slug: str, *args: object) -> object:
        made.append(slug)
        return real(slug, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(assemble, "family_view", counting)
    return made


def packets_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file name of every packet the build reads and verifies (in this process)."""
    monkeypatch.setattr(assemble, "PACKETS_PER_WORKER", 10**9)
    read: list[str] = []
    real = assemble.read_one  # type: ignore[attr-defined]

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        read.append(path.name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(assemble, "read_one", counting)
    return read
