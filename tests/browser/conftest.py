"""One built fixture site, one static server and one Debian Chromium for the whole session.

Playwright never downloads a browser here: it drives /usr/bin/chromium (installed by
scripts/ensure-chromium.sh when missing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.local_browser import chromium, ensure_chromium, serve_folder
from builder.cli import run
from tests.builder.factory import write_catalog


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    data, packets = write_catalog(root)
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def base_url(site: Path) -> Iterator[str]:
    with serve_folder(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    # Module-scoped: while playwright lives, every later asyncio.run in this thread (the runner's
    # client, the real-vLLM tests) fails.
    if not ensure_chromium():
        pytest.skip("Debian's chromium is not installed (scripts/ensure-chromium.sh)")
    with chromium() as launched:
        yield launched


@pytest.fixture
def context(browser, base_url):  # type: ignore[no-untyped-def]
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url.rstrip("/"))
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):  # type: ignore[no-untyped-def]
    tab = context.new_page()
    tab.problems = []
    tab.on("console", lambda m: tab.problems.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: tab.problems.append(str(e)))
    return tab
