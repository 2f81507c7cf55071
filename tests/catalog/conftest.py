"""Fixtures for the catalog tests. `tests.catalog.factories` builds realistic packets."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A private copy of data/ whose keys.yaml lists the test keys, with an empty packets/ beside it."""
    from tests.catalog.factories import signed_data

    signed_data(tmp_path / "data")
    (tmp_path / "packets").mkdir()
    return tmp_path
