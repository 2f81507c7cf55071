"""A chart draws where its numbers table stood: the table is painted with the page in the height the
chart will take (templates/macros.html, assets/style.css), and the chart replaces it there
(assets/charts.js), so drawing a chart moves nothing on the page, on a wide screen or a phone, for
a chart with its own table and for one whose numbers are in the load sweep's tables further down.

Layout shifts are read as Chromium reports them to the page (the Layout Instability API's
`layout-shift` entries: https://wicg.github.io/layout-instability/), buffered from the first paint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from catalog.model.packet import Packet
from testkit.local_browser import LAYOUT_SHIFTS, serve_folder
from tests.browser.test_site_browser import FAMILY, PHONE
from tests.builder.factory import LOAD_FAMILY

pytestmark = pytest.mark.browser

WIDE = {"width": 1280, "height": 900}
BUNDLE = "**/plotly-basic.min.js"
RESERVED = """figure => {
  const table = figure.querySelector('.chart-table[open] > .scroll');
  const plot = figure.querySelector('[data-chart]');
  return {
    table: table ? table.getBoundingClientRect().height : null,
    plot: getComputedStyle(plot).display === 'none' ? null : plot.getBoundingClientRect().height,
    drawn: plot.classList.contains('js-plotly-plot'),
  };
}"""


@pytest.fixture(scope="module")
def load_url(load_site: tuple[Path, Packet]) -> Iterator[str]:
    with serve_folder(load_site[0]) as url:
        yield url


def _draw_each(page: Any, url: str) -> list[dict[str, Any]]:
    """Every chart's place as the page first laid it out (the Plotly bundle held back until then, so
    no chart has drawn yet on a slow machine either), then each chart scrolled near and drawn."""
    held: list[Any] = []
    page.route(BUNDLE, lambda route: held.append(route))
    page.goto(url, wait_until="domcontentloaded")
    figures = page.locator("figure.chart").all()
    assert figures
    before = [figure.evaluate(RESERVED) for figure in figures]
    page.unroute(BUNDLE)
    for route in held:
        route.continue_()
    for figure in figures:
        figure.scroll_into_view_if_needed()
        figure.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=15_000)
    return before


@pytest.mark.parametrize(("site", "path"), [("fixture", FAMILY), ("load", f"models/{LOAD_FAMILY}/index.html")])
@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["wide", "phone"])
def test_drawing_the_charts_moves_nothing_on_the_page(browser, base_url, load_url, site, path, viewport) -> None:
    context = browser.new_context(viewport=viewport)
    context.add_init_script(LAYOUT_SHIFTS)
    page = context.new_page()
    before = _draw_each(page, (base_url if site == "fixture" else load_url) + path)
    after = [figure.evaluate(RESERVED) for figure in page.locator("figure.chart").all()]
    page.wait_for_timeout(200)  # entries are delivered after the frame that shifted
    assert page.evaluate("window.layoutShifts") == []
    for held, drawn in zip(before, after, strict=True):
        assert not held["drawn"] and drawn["drawn"]
        # the place held before the chart drew (its open table, or an empty box when its numbers
        # are further down) is the height the chart drew at
        assert drawn["plot"] == pytest.approx(held["table"] if held["table"] is not None else held["plot"], abs=0.5)
    context.close()


def test_until_the_chart_draws_its_table_fills_the_charts_place(browser, base_url) -> None:
    context = browser.new_context(viewport=WIDE)
    page = context.new_page()
    page.route(BUNDLE, lambda route: None)  # held back: no chart draws
    page.goto(base_url + FAMILY, wait_until="domcontentloaded")
    for figure in page.locator("figure.chart").all():
        figure.scroll_into_view_if_needed()
        place = figure.evaluate(RESERVED)
        height = figure.evaluate("f => parseFloat(getComputedStyle(f).getPropertyValue('--chart-height'))")
        assert place["table"] == pytest.approx(height, abs=0.5) and place["plot"] is None
        assert figure.locator(".chart-table tbody tr").first.is_visible()
    context.close()


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["wide", "phone"])
def test_a_phone_chart_has_no_toolbar_over_its_plot(browser, base_url, viewport) -> None:
    """Plotly's toolbar sits over the top right of the plot; on a phone, where a tap shows it and the
    plot has 16 px above it, it would cover the lines. Wide screens keep it (zoom, download)."""
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    _draw_each(page, base_url + FAMILY)
    toolbars = page.locator("figure.chart .modebar").count()
    assert (toolbars == 0) if viewport is PHONE else (toolbars == page.locator("figure.chart").count())
    context.close()
