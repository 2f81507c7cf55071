"""Fixtures for the catalog tests. `tests.catalog.factories` builds realistic packets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `from tests.catalog.factories import ...` under any pytest invocation
    sys.path.insert(0, str(REPO))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A private copy of data/ whose keys.yaml lists the test keys, with an empty packets/ beside it."""
    from tests.catalog.factories import signed_data

    signed_data(tmp_path / "data")
    (tmp_path / "packets").mkdir()
    return tmp_path
