"""Benchmark 4: a built model page in Debian's headless Chromium, until every chart is drawn.

The site is the smallest synthetic catalog the builder benchmark built (21 packets on the page it
loads: the group's one-added build leaves one more in the first family), or, where no builder run
left it, the same site built first (builder_bench.ensure_browser_site), served from a local
http.server. Timing is the page's own clock: performance.now() (ms since
navigation start) at the first animation frame where every `[data-chart]` element has become
a drawn Plotly chart (`.js-plotly-plot .main-svg`, as tests/browser waits for it). Cold loads
use a fresh browser context each time (empty cache); warm loads reload in one context (shared
assets such as the Plotly bundle cached). Charts draw only when scrolled near, so each load
scrolls to the first chart as soon as the document is parsed, then to each next one once the one
before is drawn (on the old page, which drew every chart at once, scrolling changed nothing).

Targets (issue 30): the chart's numbers table painted with the page, in the place the chart will
take, and no layout shift when the chart replaces it (the Layout Instability API's `layout-shift`
entries, summed over the load: 0); the first chart drawn under 1 s cold on an idle machine (the
table is what a reader sees until then). And the family page's transfer, cold, with every
script and every chart drawn, under 600 KB as a static host sends it (gzip: the loopback server
sends raw bytes, so the figure is the gzip size of every fetched file; the raw total is in the
details); the HTML of every page of the site under 100 KB.

Benchmark 4b, the family page's height: the repository's own Qwen3.5 9B page (the site `make site`
builds from data/ and packets/), laid out at 1280 px with every chart drawn, under 5,000 px; its
height on a phone (390 px) and without JavaScript are recorded beside it.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from statistics import median
from typing import Any
from urllib.parse import urlparse

from bench.builder_bench import BROWSER_SITE, ensure_browser_site
from bench.common import OUT, REPO, Log
from bench.results import Benchmark, Figure
from testkit.local_browser import CHROMIUM, CHROMIUM_ARGS, LAYOUT_SHIFTS, chromium, serve_folder

FIRST_MS, TRANSFER_KB, HTML_KB = 1000.0, 600.0, 100.0
HEIGHT_PX = 5000.0
HEIGHT_PAGE = "models/qwen3.5-9b/index.html"
REPOSITORY_SITE = OUT / "site-repository"
FIRST_DRAWN = "() => document.querySelector('[data-chart].js-plotly-plot .main-svg') !== null"
SCROLL_FIRST = "() => document.querySelector('figure.chart').scrollIntoView()"
# the first frame after the first chart is scrolled into view: its table laid out in the chart's place?
TABLE_PAINTED = """() => new Promise(resolve => requestAnimationFrame(() => {
  const figure = document.querySelector('figure.chart');
  const table = figure.querySelector('.chart-table[open] > .scroll');
  resolve({ms: performance.now(), table: !!table && table.getBoundingClientRect().height > 0,
           drawn: !!figure.querySelector('.js-plotly-plot')});
}))"""
ALL_DRAWN = """() => {
  const charts = [...document.querySelectorAll('[data-chart]')];
  return charts.length > 0 && charts.every(n => n.classList.contains('js-plotly-plot') && n.querySelector('.main-svg'));
}"""


def _load(page: Any, url: str) -> dict[str, float]:
    page.add_init_script(LAYOUT_SHIFTS)
    page.goto(url, wait_until="domcontentloaded")
    page.evaluate(SCROLL_FIRST)
    table = page.evaluate(TABLE_PAINTED)
    page.wait_for_function(FIRST_DRAWN, timeout=60_000, polling="raf")
    first = float(page.evaluate("performance.now()"))
    for figure in page.query_selector_all("figure.chart"):  # each chart draws when scrolled near
        figure.scroll_into_view_if_needed()
        page.wait_for_function("f => f.querySelector('.main-svg') !== null", arg=figure, polling="raf")
    page.wait_for_function(ALL_DRAWN, timeout=60_000, polling="raf")
    drawn = float(page.evaluate("performance.now()"))
    timing = page.evaluate(
        "(() => { const n = performance.getEntriesByType('navigation')[0];"
        " return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, bytes: n.transferSize}; })()"
    )
    charts = int(page.evaluate("document.querySelectorAll('[data-chart]').length"))
    page.wait_for_timeout(100)  # layout-shift entries arrive after the frame that shifted
    return {
        "table_painted_ms": table["ms"],
        "table_in_place": bool(table["table"] and not table["drawn"]),
        "layout_shift": float(sum(page.evaluate("window.layoutShifts.map(s => s.value)"))),
        "first_chart_ms": first,
        "charts_drawn_ms": drawn,
        "dom_content_loaded_ms": timing["dcl"],
        "load_ms": timing["load"],
        "charts": charts,
    }


def transfer(site: Path, page: Any, url: str) -> dict[str, float]:
    """Every file a cold load of `url` fetches (charts drawn), raw and gzipped, in KB."""
    fetched: list[str] = []
    page.on("requestfinished", lambda request: fetched.append(urlparse(request.url).path))
    _load(page, url)
    files = [site / path.lstrip("/") for path in dict.fromkeys(fetched)]
    files = [f for f in files if f.is_file()]
    return {
        "files": len(files),
        "raw_kb": sum(f.stat().st_size for f in files) / 1024,
        "gzip_kb": sum(len(gzip.compress(f.read_bytes(), 6)) for f in files) / 1024,
    }


def page_height(browser: Any, url: str, width: int, javascript: bool = True) -> int:
    """The page's laid-out height in CSS px at `width`, once every chart is drawn (with JavaScript)."""
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=javascript)
    page = context.new_page()
    if javascript:
        _load(page, url)  # every chart drawn: their number tables collapse under them
    else:
        page.goto(url)
    height = int(page.evaluate("document.documentElement.scrollHeight"))
    context.close()
    return height


def family_height(log: Log) -> Benchmark:
    """The repository's 9B family page, built as `make site` builds it, against its height target."""
    from builder.cli import run as build

    if build(
        ["build", "--data", str(REPO / "data"), "--packets", str(REPO / "packets"), "--out", str(REPOSITORY_SITE)]
    ):
        raise RuntimeError("the repository's site did not build")
    with serve_folder(REPOSITORY_SITE) as base_url, chromium() as browser:
        url = base_url + HEIGHT_PAGE
        wide = page_height(browser, url, 1280)
        phone = page_height(browser, url, 390)
        plain = page_height(browser, url, 1280, javascript=False)
    log(f"browser: {HEIGHT_PAGE}: {wide} px tall at 1280 px, {phone} px at 390 px, {plain} px without JavaScript")
    return Benchmark(
        id="browser.family-height",
        group="browser",
        title="The Qwen3.5 9B family page's height, every chart drawn",
        figures=[
            Figure(
                name="height at 1280 px",
                unit="px",
                ours=wide,
                better="lower",
                target=f"< {HEIGHT_PX:g} px",
                met=wide < HEIGHT_PX,
                note="the repository's own site; was about 8,900 px before the answer-first page",
            ),
            Figure(name="height at 390 px (phone)", unit="px", ours=phone, better="lower"),
            Figure(name="height at 1280 px without JavaScript", unit="px", ours=plain, better="lower"),
        ],
        details={"page": HEIGHT_PAGE},
    )


def largest_html(site: Path) -> tuple[str, float]:
    path = max(site.rglob("*.html"), key=lambda p: p.stat().st_size)
    return path.relative_to(site).as_posix(), path.stat().st_size / 1024


def run(quick: bool, log: Log) -> list[Benchmark]:
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh (a browser is never downloaded)")
    pages = sorted(ensure_browser_site(log).glob("models/*/index.html"))
    target = pages[0].relative_to(BROWSER_SITE).as_posix()
    repeats = 2 if quick else 5
    cold, warm = [], []
    with serve_folder(BROWSER_SITE) as base_url, chromium() as browser:
        for _ in range(repeats):
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            cold.append(_load(context.new_page(), base_url + target))
            context.close()
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        sent = transfer(BROWSER_SITE, context.new_page(), base_url + target)
        context.close()
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        _load(page, base_url + target)  # fill the cache
        for _ in range(repeats):
            warm.append(_load(page, base_url + target))
        context.close()
    first_ms = median(r["first_chart_ms"] for r in cold)
    table_ms = median(r["table_painted_ms"] for r in cold)
    in_place = all(r["table_in_place"] for r in cold)
    shift = max(r["layout_shift"] for r in [*cold, *warm])
    biggest, biggest_kb = largest_html(BROWSER_SITE)
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
                    name="first chart's numbers table painted, cold cache",
                    unit="ms",
                    ours=table_ms,
                    better="lower",
                    target="painted with the page, in the chart's place",
                    met=in_place,
                    note="median of fresh contexts: the first frame after it is scrolled into view at DOMContentLoaded;"
                    f" {'in every load' if in_place else 'NOT in every load'} the table filled the chart's place and"
                    " the chart had not drawn",
                ),
                Figure(
                    name="layout shift while the charts replace their tables",
                    unit="CLS",
                    ours=shift,
                    better="lower",
                    target="0 (nothing moves)",
                    met=shift == 0.0,
                    note="the largest sum of layout-shift entries over one load, cold or warm, until every chart drew",
                ),
                Figure(
                    name="first chart drawn, cold cache",
                    unit="ms",
                    ours=first_ms,
                    better="lower",
                    target=f"< {FIRST_MS:g} ms",
                    met=first_ms < FIRST_MS,
                    note="median of fresh contexts on loopback; every chart scrolled into view at DOMContentLoaded",
                ),
                Figure(
                    name="family page transfer, cold, gzip",
                    unit="KB",
                    ours=sent["gzip_kb"],
                    better="lower",
                    target=f"< {TRANSFER_KB:g} KB",
                    met=sent["gzip_kb"] < TRANSFER_KB,
                    note=f"HTML, CSS, scripts and the Plotly bundle, every chart drawn; {sent['raw_kb']:.0f} KB raw",
                ),
                Figure(
                    name="largest page HTML",
                    unit="KB",
                    ours=biggest_kb,
                    better="lower",
                    target=f"< {HTML_KB:g} KB",
                    met=biggest_kb < HTML_KB,
                    note=biggest,
                ),
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
            details={
                "page": target,
                "transfer": sent,
                "largest_html": biggest,
                "cold": cold,
                "warm": warm,
                "chromium": str(CHROMIUM),
                "args": CHROMIUM_ARGS,
            },
        ),
        family_height(log),
    ]
