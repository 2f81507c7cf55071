"""The built site in a real browser: charts draw, filters keep their state in the URL, the
command builder and copy buttons work, and nothing logs an error."""

from __future__ import annotations

import pytest

from catalog.compose import Selection, compose
from catalog.repository import load_catalog

pytestmark = pytest.mark.browser

FAMILY = "models/fixture-7b/index.html"


def _wait_for_charts(page) -> int:
    ids = page.eval_on_selector_all("[data-chart]", "nodes => nodes.map(n => n.dataset.chart)")
    assert ids
    for chart_id in ids:
        page.wait_for_selector(f'[data-chart="{chart_id}"].js-plotly-plot .main-svg', timeout=15_000)
    return len(ids)


def test_family_page_draws_every_chart(page, base_url):
    page.goto(base_url + FAMILY)
    drawn = _wait_for_charts(page)
    assert drawn == page.locator("figure.chart").count()
    # withheld points are a separate, hollow trace in the drawn chart too
    assert page.locator(".js-plotly-plot .legendtext", has_text="withheld (not published)").count() >= 1
    assert page.problems == []


def test_family_page_works_from_file_url(page, site):
    page.goto((site / FAMILY).as_uri())
    _wait_for_charts(page)
    assert page.problems == []


def test_every_page_loads_without_console_errors(page, base_url, site):
    for path in sorted(site.rglob("*.html")):
        page.goto(base_url + path.relative_to(site).as_posix())
    assert page.problems == []


def test_index_filter_changes_list_and_url_and_survives_reload(page, base_url):
    page.goto(base_url + "index.html")
    cards = page.locator("[data-family-list] > li")
    assert cards.count() == 2
    page.select_option("select[name=quant]", "w4a16")
    visible = page.locator("[data-family-list] > li:not([hidden]) h2")
    assert visible.all_inner_texts() == ["Fixture 7B"]
    assert "quant=w4a16" in page.url
    # a result filter also counts the families that have a matching result, not only those listed
    assert page.locator("[data-count]").inner_text() == "1 of 2 families · 1 with a matching result"
    page.reload()
    assert page.locator("select[name=quant]").input_value() == "w4a16"
    assert page.locator("[data-family-list] > li:not([hidden]) h2").all_inner_texts() == ["Fixture 7B"]
    page.select_option("select[name=quant]", "")
    page.select_option("select[name=sort]", "name")
    assert "sort=name" in page.url and "quant" not in page.url
    assert page.locator("[data-family-list] > li h2").all_inner_texts() == ["Empty 1B", "Fixture 7B"]
    page.select_option("select[name=grade]", "none")
    page.select_option("select[name=state]", "measured")
    assert page.locator("[data-empty]").is_visible()
    assert page.problems == []


def test_index_filter_from_a_shared_link(page, base_url):
    page.goto(base_url + "index.html#hw=h100_sxm&sort=name")
    assert page.locator("select[name=hw]").input_value() == "h100_sxm"
    assert page.locator("[data-family-list] > li:not([hidden]) h2").all_inner_texts() == ["Fixture 7B"]


def test_command_builder_follows_python_composition(page, base_url, site):
    catalog = load_catalog(site.parent / "data", site.parent / "packets")
    recipe = catalog.recipes["fixture-7b"]
    page.goto(base_url + "recipes/fixture-7b/index.html")
    page.check("input[name=variant][value=int4]")
    page.select_option("select[name=hardware]", "arc_pro_b70")
    page.check("input[name=feature][value=spec_decoding]")
    page.uncheck("input[name=feature][value=tool_calling]")
    expected = compose(
        recipe, Selection(variant="int4", hardware=catalog.hardware["arc_pro_b70"], features=["spec_decoding"])
    )
    assert page.locator("#builder-shell").inner_text() == expected.shell_multiline()
    # one flag per line (the fixture records no full sha256 digest, so the image is not pinned)
    assert page.locator("#builder-docker").inner_text() == expected.docker_multiline()
    page.select_option("select[name=hardware]", "generic")
    assert not page.locator("[data-docker-block]").is_visible()
    assert page.problems == []


def test_copy_button_puts_the_command_on_the_clipboard(page, base_url):
    page.goto(base_url + "recipes/fixture-7b/index.html")
    expected = page.locator("#builder-shell").inner_text()
    page.click("button[data-copy=builder-shell]")
    page.wait_for_function("document.querySelector('button[data-copy=builder-shell]').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == expected


def test_copy_falls_back_without_the_clipboard_api(page, base_url):
    page.add_init_script(
        """
        Object.defineProperty(navigator, 'clipboard', {value: undefined});
        const real = document.execCommand.bind(document);
        document.execCommand = (name) => {
            window.__copied = document.activeElement && document.activeElement.value;
            return real(name) || true;
        };
        """
    )
    page.goto(base_url + "recipes/fixture-7b/index.html")
    page.click("button[data-copy=builder-shell]")
    page.wait_for_function("window.__copied !== undefined")
    assert page.evaluate("window.__copied") == page.locator("#builder-shell").inner_text()
    assert page.problems == []
