"""Fixtures reading the fixture catalog `built` once per session (tests/conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from bs4 import BeautifulSoup


@pytest.fixture(scope="session")
def page(built: Path) -> Callable[[str], BeautifulSoup]:
    def parse(relative: str) -> BeautifulSoup:
        return BeautifulSoup((built / relative).read_text(encoding="utf-8"), "lxml")

    return parse


@pytest.fixture(scope="session")
def api(built: Path) -> Callable[[str], dict[str, object]]:
    def load(relative: str) -> dict[str, object]:
        loaded: dict[str, object] = json.loads((built / relative).read_text(encoding="utf-8"))
        return loaded

    return load
