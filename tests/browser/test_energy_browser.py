"""Energy in a real browser: on a 390 px phone the family page (hero, scorecard entries, the
energy-vs-throughput chart) and the recipe page's cost block fit without sideways scrolling; the
cost per million tokens follows the price typed in, in the page; without JavaScript every energy
figure and the formula are still there to read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.model.packet import Packet
from testkit.local_browser import serve_folder
from tests.browser.test_site_browser import LABELS_OUTSIDE, PHONE
from tests.builder.factory import LOAD_FAMILY

pytestmark = pytest.mark.browser

FAMILY = f"models/{LOAD_FAMILY}/index.html"
RECIPE = f"recipes/{LOAD_FAMILY}/index.html"


@pytest.fixture(scope="module")
def load_url(load_site: tuple[Path, Packet]) -> Iterator[str]:
    with serve_folder(load_site[0]) as url:
        yield url


def test_energy_fits_a_phone_and_its_chart_draws(browser, load_url) -> None:
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(load_url + FAMILY)
    assert page.locator(".headline-energy").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.locator("#chart-load-energy").scroll_into_view_if_needed()
    page.wait_for_selector('[data-chart="load-energy"].js-plotly-plot .main-svg', timeout=15_000)
    plot = page.locator('[data-chart="load-energy"]')
    assert plot.evaluate(LABELS_OUTSIDE) == []
    assert plot.locator("path.point").count() > 5
    page.goto(load_url + RECIPE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert problems == []
    context.close()


def test_the_cost_follows_the_price_typed_in_without_leaving_the_page(browser, load_url) -> None:
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    requests: list[str] = []
    page.goto(load_url + RECIPE)
    sent = ("document", "xhr", "fetch", "ping", "eventsource", "websocket")  # not the favicon a tab fetches lazily
    page.on("request", lambda request: requests.append(request.url) if request.resource_type in sent else None)
    outputs = page.locator("output[data-cost]")
    assert outputs.first.text_content() == "enter a price"
    price = page.locator("input[data-price]")
    price.fill("0.36")
    joules = float(outputs.first.get_attribute("data-j") or "0")
    expected = joules * 0.36 / 3.6
    shown = outputs.first.text_content() or ""
    assert shown.startswith("$") and float(shown[1:]) == pytest.approx(expected, rel=0.01)
    price.press("Enter")  # nothing is submitted: the field is in no form
    assert page.url.endswith(RECIPE) and requests == []
    context.close()


def test_without_javascript_the_figures_and_the_formula_are_there(browser, load_url) -> None:
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    page = context.new_page()
    page.goto(load_url + FAMILY)
    assert "J/token" in (page.locator(".headline-energy").text_content() or "")
    assert page.locator("#chart-load-energy table").count() == 1  # the chart's numbers as a table
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.goto(load_url + RECIPE)
    block = page.locator("#energy-cost")
    assert "J/token × price ÷ 3.6" in (block.text_content() or "")
    assert page.locator("output[data-cost]").count() == 2
    context.close()
