"""Whole-suite settings and the fixtures every folder shares (tests/README.md lists them):
`built`, the fixture catalog of tests/builder/factory.py built once per session,
`repository_built`, the repository's own catalog built once, `browser`, Debian's Chromium, and
`vllm_shim`, a `python` that runs the fake vLLM (testkit/fake_vllm) as the runner runs vLLM.
Tests keep their caches and signing keys to themselves."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.model.packet import Packet
from testkit.fake_vllm import python_for_fake
from testkit.local_browser import chromium, ensure_chromium
from tests import profiles  # noqa: F401 - registers the hypothesis profiles before --hypothesis-profile loads one


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


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture catalog (tests/builder/factory.py) built once: its site/ folder, with data/ and
    packets/ beside it. Read it; a test that changes files builds its own with write_catalog."""
    from builder.cli import run
    from tests.builder.factory import write_catalog

    root = tmp_path_factory.mktemp("catalog")
    data, packets = write_catalog(root)
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def load_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Packet]:
    """The fixture catalog with load sweeps (measured and screened) built once: its site/ folder
    (data/ and packets/ beside it) and the measured packet carrying the sweeps. Read only."""
    from builder.cli import run
    from catalog.store.repository import load_catalog
    from tests.builder.factory import load_parts, write_catalog

    root = tmp_path_factory.mktemp("load")
    data, packets = write_catalog(root, load=True)
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0
    packet = next(p for p in load_catalog(data, packets).packets.values() if p.title == load_parts().title)
    return out, packet


@pytest.fixture(scope="session")
def repository_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site the repository's own data/ and packets/ build, built once. Read only."""
    from builder.cli import run

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("repository") / "site"
    assert run(["build", "--data", str(repo / "data"), "--packets", str(repo / "packets"), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium driven by playwright (testkit/local_browser.py). Missing, it skips the test
    locally but fails it in CI (env CI set), as the real-vLLM tests do. Module-scoped: while
    playwright lives, every later asyncio.run in this thread (the runner's client) fails."""
    if not ensure_chromium():
        message = "Debian's chromium is not installed (scripts/ensure-chromium.sh)"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must not skip the browser tests)")
        pytest.skip(message)
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="session")
def vllm_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A "python" whose `-m vllm.entrypoints.openai.api_server` is the fake vLLM server: what
    runner.runtime.LocalRuntime runs, so the runner's real code path drives it."""
    return python_for_fake(tmp_path_factory.mktemp("shim"))
