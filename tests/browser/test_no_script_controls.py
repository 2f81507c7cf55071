"""Without JavaScript a page shows no control that would do nothing: copy buttons, the index's
filter and sort selects and the recipe's command builder are hidden in the HTML and shown by
site.js, so a reader without scripts sees the commands and the filter links, not inert buttons.
With JavaScript every one of them is there again."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

PAGES = ["index.html", "models/fixture-7b/index.html", "recipes/fixture-7b/index.html"]
CONTROLS = "button, select, input, textarea"


def _visible(page: Any) -> list[str]:
    return [
        handle.evaluate("e => e.outerHTML.slice(0, 120)")
        for handle in page.query_selector_all(CONTROLS)
        if handle.is_visible()
    ]


@pytest.mark.parametrize("path", PAGES)
def test_a_page_without_javascript_shows_no_inert_control(browser: Any, base_url: str, path: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, java_script_enabled=False)
    page = context.new_page()
    page.goto(base_url + path)
    assert _visible(page) == []
    context.close()


@pytest.mark.parametrize("path", PAGES)
def test_with_javascript_the_controls_are_shown(browser: Any, base_url: str, path: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(base_url + path)
    page.wait_for_load_state("load")
    shown = _visible(page)
    assert any('class="copy"' in c for c in shown) or path == "index.html", shown
    if path == "index.html":
        assert page.locator("select[name=sort]").is_visible()
    if path.startswith("recipes/"):
        assert page.locator("select[name=hardware]").is_visible()
    context.close()
