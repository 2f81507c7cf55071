"""How every browser check here sees a built site: Debian's Chromium driven by playwright (never a
downloaded browser; scripts/ensure-chromium.sh installs it), headless, and the site served from
loopback. Used by tests/browser, tests/adversarial and bench/browser_bench.py."""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# An init script: every layout shift not caused by input, from the first paint, into
# `window.layoutShifts` as {value, moved} (the Layout Instability API,
# https://wicg.github.io/layout-instability/). A page loaded again in one context runs it again:
# the first to run in a document observes.
LAYOUT_SHIFTS = """if (!window.layoutShifts) {
  window.layoutShifts = [];
  new PerformanceObserver(list => {
    for (const e of list.getEntries()) {
      if (!e.hadRecentInput) {
        const moved = e.sources.map(s => s.node ? s.node.nodeName + '.' + s.node.className : '?');
        window.layoutShifts.push({value: e.value, moved: moved});
      }
    }
  }).observe({type: 'layout-shift', buffered: true});
}"""


def ensure_chromium() -> bool:
    """True when Debian's chromium is there, after trying to install it once."""
    if not CHROMIUM.exists():
        subprocess.run([str(REPO / "scripts" / "ensure-chromium.sh")], check=False)
    return CHROMIUM.exists()


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched playwright Browser. Playwright's sync API keeps an event loop running in this
    thread while it lives: an asyncio.run in the same thread fails until it is closed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """A static server for `folder` on a free loopback port; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
