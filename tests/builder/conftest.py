"""Fixtures: one fixture catalog built once per session (most tests only read it)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builder.cli import run  # noqa: E402
from tests.builder.factory import write_catalog  # noqa: E402

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
