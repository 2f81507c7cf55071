"""Fixtures for the projection tests. `tests.projection.helpers` builds cards and packets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `from tests.projection.helpers import ...` under any pytest invocation
    sys.path.insert(0, str(REPO))

from catalog.repository import Catalog  # noqa: E402
from tests.projection.helpers import repo_catalog  # noqa: E402


@pytest.fixture
def catalog() -> Catalog:
    return repo_catalog()
