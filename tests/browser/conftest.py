"""One built fixture site, one static server and one Debian Chromium for the whole session.

Playwright never downloads a browser here: it drives /usr/bin/chromium (installed by
scripts/ensure-chromium.sh when missing)."""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builder.cli import run  # noqa: E402
from tests.builder.factory import write_catalog  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    data, packets = write_catalog(root)
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def base_url(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    # Module-scoped: playwright's sync API keeps an event loop running in this thread, and every
    # later asyncio.run (the runner's client, the real-vLLM tests) fails while it lives.
    if not CHROMIUM.exists():
        subprocess.run([str(REPO / "scripts" / "ensure-chromium.sh")], check=False)
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (scripts/ensure-chromium.sh)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


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
