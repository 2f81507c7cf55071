"""axe-core, run inside the page in headless Chromium, finds no serious or critical violation on
any kind of page: the family page with its charts drawn and without JavaScript (tables in place of
charts), a packet page, the recipe page with its command builder, the index with its filter.

axe-core is the copy the pinned `axe-playwright-python` release ships (requirements/dev.txt), so
the rules do not move under the test; the script is injected into the page, not fetched. And every
use of a glossary term carries its definition once site.js has run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_site_browser import FAMILY, KINDS

pytestmark = pytest.mark.browser

AXE_VERSION = "4.12.1"
SERIOUS = ("serious", "critical")


def _axe_source() -> str:
    import axe_playwright_python

    script = Path(axe_playwright_python.__file__).with_name("axe.min.js").read_text(encoding="utf-8")
    assert f"axe v{AXE_VERSION}" in script[:200], "requirements/dev.txt pins the axe-core this test was written for"
    return script


def _serious_violations(page) -> list[str]:  # type: ignore[no-untyped-def]
    page.add_script_tag(content=_axe_source())
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in result["violations"]
        if v["impact"] in SERIOUS
    ]


def _draw_every_chart(page) -> None:  # type: ignore[no-untyped-def]
    for figure in page.locator("figure.chart").all():
        figure.scroll_into_view_if_needed()
        figure.locator(".main-svg").first.wait_for(timeout=15_000)


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_no_serious_violation_on_any_kind_of_page(browser, base_url, built, width):  # type: ignore[no-untyped-def]
    # on a phone the wide tables scroll sideways: a keyboard must be able to reach them
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    packet = sorted(p.relative_to(built).as_posix() for p in built.glob("packets/*/index.html"))[0]
    problems = {}
    for path in [*KINDS, packet]:
        page.goto(base_url + path)
        if path == FAMILY:
            _draw_every_chart(page)
        found = _serious_violations(page)
        if found:
            problems[path] = found
    assert problems == {}
    context.close()


def test_no_serious_violation_without_the_sites_scripts_on_a_phone(browser, base_url):  # type: ignore[no-untyped-def]
    # the site's scripts blocked (axe itself must run): the page a reader without JavaScript gets
    context = browser.new_context(viewport={"width": 390, "height": 800})
    page = context.new_page()
    page.route("**/*.js", lambda route: route.abort())
    page.goto(base_url + FAMILY)
    assert page.locator("details.chart-table[open]").count() == page.locator("figure.chart").count()
    assert _serious_violations(page) == []
    context.close()


def test_every_use_of_a_term_shows_its_definition(page, base_url):  # type: ignore[no-untyped-def]
    """The page writes a term's definition once, at its first use; site.js gives it to every later
    use, so hovering any MTP on the page explains it."""
    page.goto(base_url + FAMILY)
    terms = page.eval_on_selector_all("abbr.term", "nodes => nodes.map(n => [n.textContent, n.title])")
    assert len(terms) > len(dict(terms))  # some terms are used more than once
    definitions: dict[str, set[str]] = {}
    for word, title in terms:
        definitions.setdefault(word, set()).add(title)
    assert all(len(titles) == 1 and "" not in titles for titles in definitions.values()), definitions
