"""Whole-suite settings: tests keep their caches to themselves."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The builder's fingerprint cache goes under $XDG_CACHE_HOME: never the user's own."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache-home"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture(autouse=True)
def private_cache_per_test(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own cache folder: a packet summary one test's build cached never spares
    another test's verification (a test that patches the verifier must see it run)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache-home")))


@pytest.fixture(scope="session", autouse=True)
def private_config_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Signing keys are made under $XDG_CONFIG_HOME on first use: tests get throwaway ones, and
    the user's own key (or a CATALOG_SIGNING_KEY) is never used to sign a test packet."""
    saved = {name: os.environ.get(name) for name in ("XDG_CONFIG_HOME", "CATALOG_SIGNING_KEY")}
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config-home"))
    os.environ.pop("CATALOG_SIGNING_KEY", None)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
