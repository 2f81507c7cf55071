"""Fixtures: one fixture catalog built once per session (most tests only read it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from builder.cli import run
from tests.builder.factory import write_catalog

FIXED_EPOCH = "1767225600"  # 2026-01-01


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("catalog")
    data, packets = write_catalog(root)
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def page(built: Path) -> Callable[[str], BeautifulSoup]:
    def parse(relative: str) -> BeautifulSoup:
        return BeautifulSoup((built / relative).read_text(encoding="utf-8"), "lxml")

    return parse


@pytest.fixture(scope="session")
def api(built: Path) -> Callable[[str], dict[str, object]]:
    def load(relative: str) -> dict[str, object]:
        return json.loads((built / relative).read_text(encoding="utf-8"))

    return load
