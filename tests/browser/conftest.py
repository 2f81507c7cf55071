"""The fixture catalog `built` (tests/conftest.py) served from loopback, and a fresh tab of the
shared `browser` per test that records console errors in `page.problems`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.local_browser import serve_folder


@pytest.fixture(scope="session")
def base_url(built: Path) -> Iterator[str]:
    with serve_folder(built) as url:
        yield url


@pytest.fixture
def context(browser, base_url):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url.rstrip("/"))
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    tab = context.new_page()
    tab.problems = []
    tab.on("console", lambda m: tab.problems.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: tab.problems.append(str(e)))
    return tab
