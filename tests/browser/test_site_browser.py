"""The built site in a real browser: charts draw (the Plotly bundle fetched only when one comes near),
or without JavaScript their tables stand in their place; no page scrolls sideways on a phone and no
chart label is clipped there; filters keep their state in the URL, the command builder and copy
buttons work, and nothing logs an error."""

from __future__ import annotations

import pytest

from catalog.recipes.compose import Selection, compose
from catalog.store.repository import load_catalog

pytestmark = pytest.mark.browser

FAMILY = "models/fixture-7b/index.html"


BUNDLE = "assets/vendor/plotly-basic.min.js"
PHONE = {"width": 390, "height": 800}
# One page of every kind.
KINDS = [
    "index.html",
    FAMILY,
    "recipes/fixture-7b/index.html",
    "hardware/index.html",
    "hardware/arc_pro_b70/index.html",
    "methodology/index.html",
]


def _every_page(built) -> list[str]:
    return sorted(p.relative_to(built).as_posix() for p in built.rglob("*.html"))


def _wait_for_charts(page) -> int:
    """Scroll to each chart (they draw only when near the viewport) and wait until it is drawn."""
    ids = page.eval_on_selector_all("[data-chart]", "nodes => nodes.map(n => n.dataset.chart)")
    assert ids
    for chart_id in ids:
        page.locator(f"#chart-{chart_id}").scroll_into_view_if_needed()
        page.wait_for_selector(f'[data-chart="{chart_id}"].js-plotly-plot .main-svg', timeout=15_000)
    return len(ids)


def test_family_page_draws_every_chart(page, base_url):
    page.goto(base_url + FAMILY)
    drawn = _wait_for_charts(page)
    assert drawn == page.locator("figure.chart").count()
    # withheld points are a separate, hollow trace in the drawn chart too
    assert page.locator(".js-plotly-plot .legendtext", has_text="withheld (not published)").count() >= 1
    assert page.problems == []


def test_plotly_is_fetched_only_when_a_chart_comes_near(browser, base_url):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url))
    page.goto(base_url + FAMILY, wait_until="networkidle")
    first = page.locator("figure.chart").first
    assert first.bounding_box()["y"] > PHONE["height"] + 400  # below the fold, past the margin
    assert not [u for u in fetched if "plotly" in u]
    assert page.locator("[data-chart][data-state]").count() == 0
    first.scroll_into_view_if_needed()
    page.wait_for_selector("figure.chart .js-plotly-plot .main-svg", timeout=15_000)
    assert [u for u in fetched if "plotly" in u] == [base_url + BUNDLE]
    _wait_for_charts(page)
    assert [u for u in fetched if "plotly" in u] == [base_url + BUNDLE]  # once for every chart
    context.close()


def test_a_drawn_chart_collapses_its_table_and_an_undrawn_one_keeps_it(page, base_url):
    page.goto(base_url + FAMILY)
    for figure in page.locator("figure.chart").all():
        assert figure.locator("details.chart-table").get_attribute("open") is not None
        assert not figure.locator("[data-chart]").is_visible()
    _wait_for_charts(page)
    for figure in page.locator("figure.chart").all():
        assert figure.locator("[data-chart]").is_visible()
        assert figure.locator("details.chart-table").get_attribute("open") is None
        assert figure.locator("details.chart-table summary").is_visible()
    assert page.problems == []


def test_a_table_opened_after_its_chart_drew_is_shown_whole(browser, base_url):
    """Before the chart draws, its table holds the chart's height and scrolls in it; opened after
    the chart drew, it is the reader's: shown whole, not a box scrolling inside a box."""
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.goto(base_url + FAMILY)
    _wait_for_charts(page)
    hidden = {}
    for figure in page.locator("figure.chart:has(details.chart-table)").all():
        figure.locator("details.chart-table summary").click()
        box = figure.locator("details.chart-table > .scroll")
        hidden[figure.get_attribute("id")] = box.evaluate("node => node.scrollHeight - node.clientHeight")
    assert hidden and max(hidden.values()) <= 1, hidden
    context.close()


def test_the_methodology_page_fits_the_narrowest_phone(browser, base_url):
    """Its docstrings name dotted module paths, one long word each: they wrap at 320 px."""
    context = browser.new_context(viewport={"width": 320, "height": 568})
    page = context.new_page()
    page.goto(base_url + "methodology/index.html")
    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    context.close()


def test_without_javascript_every_chart_is_its_open_table(browser, base_url):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    page.goto(base_url + FAMILY)
    figures = page.locator("figure.chart").all()
    assert figures
    for figure in figures:
        assert not figure.locator("[data-chart]").is_visible()  # no blank box
        assert figure.locator("details.chart-table table tbody tr").first.is_visible()
    assert "needs JavaScript" not in page.locator("#measured").inner_text()
    page.goto(base_url + "index.html")
    assert page.locator("[data-noscript-filters]").is_visible()
    context.close()


def test_when_the_bundle_fails_the_tables_stay(browser, base_url):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.route("**/plotly-basic.min.js", lambda route: route.abort())
    page.goto(base_url + FAMILY)
    for figure in page.locator("figure.chart").all():
        figure.scroll_into_view_if_needed()
        plot = figure.locator("[data-chart]")
        page.wait_for_function("e => e.dataset.state === 'failed'", arg=plot.element_handle())
        assert not plot.is_visible()
        assert figure.locator("details.chart-table tbody tr").first.is_visible()
    context.close()


def test_no_page_scrolls_sideways_on_a_phone(browser, base_url, built):
    pages = _every_page(built)
    for kind in [*KINDS, "packets/"]:
        assert any(p.startswith(kind) for p in pages), kind
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    wide = {}
    for path in pages:
        page.goto(base_url + path)
        if path == FAMILY:
            _wait_for_charts(page)
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[path] = width
    assert wide == {}
    context.close()


LABELS_OUTSIDE = """node => {
  const svg = node.querySelector('.main-svg').getBoundingClientRect();
  const labels = '.legendtext, .xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .textpoint text';
  const out = r => r.left < svg.left - 1 || r.right > svg.right + 1 || r.top < svg.top - 1 || r.bottom > svg.bottom + 1;
  return [...node.querySelectorAll(labels)]
    .map(t => [t.textContent, t.getBoundingClientRect()])
    .filter(([, r]) => r.width > 0 && out(r))
    .map(([text]) => text);
}"""


def test_no_chart_label_is_clipped_on_a_phone(browser, base_url):
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.goto(base_url + FAMILY)
    _wait_for_charts(page)
    for plot in page.locator("[data-chart]").all():
        assert plot.evaluate(LABELS_OUTSIDE) == [], plot.get_attribute("data-chart")
    context.close()


def test_family_page_works_from_file_url(page, built):
    page.goto((built / FAMILY).as_uri())
    _wait_for_charts(page)
    assert page.problems == []


def test_every_page_loads_without_console_errors(page, base_url, built):
    for path in sorted(built.rglob("*.html")):
        page.goto(base_url + path.relative_to(built).as_posix())
    assert page.problems == []


def test_index_filter_changes_list_and_url_and_survives_reload(page, base_url):
    page.goto(base_url + "index.html")
    cards = page.locator("[data-family-list] > li")
    assert cards.count() == 2
    page.select_option("select[name=quant]", "w4a16")
    visible = page.locator("[data-family-list] > li:not([hidden]) h3")
    assert visible.all_inner_texts() == ["Fixture 7B"]
    assert "quant=w4a16" in page.url
    # a result filter also counts the families that have a matching result, not only those listed
    assert page.locator("[data-count]").inner_text() == "1 of 2 families · 1 with a matching result"
    page.reload()
    assert page.locator("select[name=quant]").input_value() == "w4a16"
    assert page.locator("[data-family-list] > li:not([hidden]) h3").all_inner_texts() == ["Fixture 7B"]
    page.select_option("select[name=quant]", "")
    page.select_option("select[name=sort]", "name")
    assert "sort=name" in page.url and "quant" not in page.url
    assert page.locator("[data-family-list] > li h3").all_inner_texts() == ["Empty 1B", "Fixture 7B"]
    page.select_option("select[name=grade]", "none")
    page.select_option("select[name=state]", "measured")
    assert page.locator("[data-empty]").is_visible()
    assert page.problems == []


def test_a_cards_answer_goes_when_a_quantization_or_method_is_chosen(page, base_url):
    """A card's answer is its fastest result of any quantization or method: with either chosen it
    would answer another question, so it and its section go; a card chosen keeps its own."""
    page.goto(base_url + "index.html")
    answers = page.locator("[data-answer-hw]:not([hidden])")
    every = answers.count()
    assert every >= 1 and page.locator("#answers").is_visible()
    card = answers.first.get_attribute("data-answer-hw")
    assert card is not None
    page.select_option("select[name=hw]", card)
    assert [answers.nth(i).get_attribute("data-answer-hw") for i in range(answers.count())] == [card]
    page.select_option("select[name=quant]", "w4a16")
    assert answers.count() == 0 and not page.locator("#answers").is_visible()
    page.select_option("select[name=quant]", "")
    page.select_option("select[name=hw]", "")
    assert answers.count() == every
    assert page.problems == []


def test_index_filter_from_a_shared_link(page, base_url):
    page.goto(base_url + "index.html#hw=h100_sxm&sort=name")
    assert page.locator("select[name=hw]").input_value() == "h100_sxm"
    assert page.locator("[data-family-list] > li:not([hidden]) h3").all_inner_texts() == ["Fixture 7B"]


def test_command_builder_follows_python_composition(page, base_url, built):
    catalog = load_catalog(built.parent / "data", built.parent / "packets")
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


def test_the_search_finds_a_family_from_any_page_and_links_to_it(page, base_url):
    """Pagefind's interface is fetched when the box is first used (builder/search.py); a result
    links to the family page from the site's root, whatever folder the search was made from."""
    assert "pagefind-ui.js" not in page.content()
    for start in ("index.html", "filter/quant/bf16/index.html"):
        page.goto(base_url + start)
        page.focus("[data-search-input]")
        page.wait_for_selector(".pagefind-ui__search-input")
        page.fill(".pagefind-ui__search-input", "Fixture 7B")
        page.wait_for_selector(".pagefind-ui__result-link")
        href = page.get_attribute(".pagefind-ui__result-link", "href")
        assert href is not None and href.endswith("models/fixture-7b/index.html"), href
    page.click(".pagefind-ui__result-link")
    page.wait_for_load_state()
    assert page.url == base_url + "models/fixture-7b/index.html"
    assert page.problems == []


def test_the_search_is_not_offered_on_a_page_opened_from_disk(page, built):
    page.goto((built / "index.html").as_uri())
    assert page.is_hidden("[data-search]")
