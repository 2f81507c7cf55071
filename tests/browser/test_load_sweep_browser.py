"""Load sweeps in a real browser on a phone: the frontier chart draws (its hollow, labelled levels
too), no chart label is clipped, and neither the family page nor the packet page with its wide
per-level table scrolls sideways at 390 px (the table scrolls in its own box)."""

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


@pytest.fixture(scope="module")
def load_url(load_site: tuple[Path, Packet]) -> Iterator[str]:
    with serve_folder(load_site[0]) as url:
        yield url


def test_the_frontier_draws_and_nothing_scrolls_sideways_on_a_phone(browser, load_url, load_site) -> None:
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(load_url + FAMILY)
    for chart_id in ("load-frontier", "load-latency-users", "load-latency-rate"):
        page.locator(f"#chart-{chart_id}").scroll_into_view_if_needed()
        page.wait_for_selector(f'[data-chart="{chart_id}"].js-plotly-plot .main-svg', timeout=15_000)
        plot = page.locator(f'[data-chart="{chart_id}"]')
        assert plot.evaluate(LABELS_OUTSIDE) == [], chart_id
    frontier = page.locator('[data-chart="load-frontier"]')
    assert frontier.locator(".legendtext", has_text="outputs differ from the oracle").count() == 1
    assert frontier.locator("path.point").count() > 10
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.goto(load_url + f"packets/{load_site[1].id}/index.html")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    box = page.locator(".load-table").first
    assert box.evaluate("node => node.scrollWidth > node.clientWidth")  # the table scrolls in its own box
    assert problems == []
    context.close()
