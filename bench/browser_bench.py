"""Benchmark 4: a built model page in Debian's headless Chromium, until every chart is drawn.

The site is the smallest synthetic catalog the builder benchmark built (20 packets on the page),
served from a local http.server. Timing is the page's own clock: performance.now() (ms since
navigation start) at the first animation frame where every `[data-chart]` element has become
a drawn Plotly chart (`.js-plotly-plot .main-svg`, as tests/browser waits for it). Cold loads
use a fresh browser context each time (empty cache); warm loads reload in one context (shared
assets such as plotly.min.js cached).
"""

from __future__ import annotations

from statistics import median
from typing import Any

from bench.builder_bench import BROWSER_SITE
from bench.common import Log
from bench.local_browser import CHROMIUM, CHROMIUM_ARGS, chromium, serve_folder
from bench.results import Benchmark, Figure

ALL_DRAWN = """() => {
  const charts = [...document.querySelectorAll('[data-chart]')];
  return charts.length > 0 && charts.every(n => n.classList.contains('js-plotly-plot') && n.querySelector('.main-svg'));
}"""


def _load(page: Any, url: str) -> dict[str, float]:
    page.goto(url, wait_until="commit")
    page.wait_for_function(ALL_DRAWN, timeout=60_000, polling="raf")
    drawn = float(page.evaluate("performance.now()"))
    timing = page.evaluate(
        "(() => { const n = performance.getEntriesByType('navigation')[0];"
        " return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, bytes: n.transferSize}; })()"
    )
    charts = int(page.evaluate("document.querySelectorAll('[data-chart]').length"))
    return {
        "charts_drawn_ms": drawn,
        "dom_content_loaded_ms": timing["dcl"],
        "load_ms": timing["load"],
        "charts": charts,
    }


def run(quick: bool, log: Log) -> list[Benchmark]:
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh (a browser is never downloaded)")
    pages = sorted(BROWSER_SITE.glob("models/*/index.html"))
    if not pages:
        raise RuntimeError(f"no built site at {BROWSER_SITE}: the builder benchmark builds it first")
    target = pages[0].relative_to(BROWSER_SITE).as_posix()
    repeats = 2 if quick else 5
    cold, warm = [], []
    with serve_folder(BROWSER_SITE) as base_url, chromium() as browser:
        for _ in range(repeats):
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            cold.append(_load(context.new_page(), base_url + target))
            context.close()
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        _load(page, base_url + target)  # fill the cache
        for _ in range(repeats):
            warm.append(_load(page, base_url + target))
        context.close()
    cold_ms = median(r["charts_drawn_ms"] for r in cold)
    warm_ms = median(r["charts_drawn_ms"] for r in warm)
    log(f"browser: {target}: every chart drawn after {cold_ms:.0f} ms cold, {warm_ms:.0f} ms warm")
    page_kb = (BROWSER_SITE / target).stat().st_size / 1024
    return [
        Benchmark(
            id="browser.model-page",
            group="browser",
            title=f"Model page in headless Chromium until every chart is drawn ({cold[0]['charts']} charts)",
            figures=[
                Figure(
                    name="all charts drawn, cold cache",
                    unit="ms",
                    ours=cold_ms,
                    better="lower",
                    note="median of fresh contexts; performance.now() at the first frame with every chart drawn",
                ),
                Figure(name="all charts drawn, warm cache", unit="ms", ours=warm_ms, better="lower"),
                Figure(
                    name="DOMContentLoaded, cold",
                    unit="ms",
                    ours=median(r["dom_content_loaded_ms"] for r in cold),
                    better="lower",
                ),
                Figure(name="page HTML", unit="KB", ours=page_kb, better="lower"),
            ],
            details={"page": target, "cold": cold, "warm": warm, "chromium": str(CHROMIUM), "args": CHROMIUM_ARGS},
        )
    ]
