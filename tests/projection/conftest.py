"""Fixtures for the projection tests. `tests.projection.helpers` builds cards and packets."""

from __future__ import annotations

import pytest

from catalog.store.repository import Catalog
from tests.projection.helpers import repo_catalog


@pytest.fixture
def catalog() -> Catalog:
    return repo_catalog()
