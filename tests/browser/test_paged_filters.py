"""On a catalog of more families than a page holds, a page of the index lists only some of them, so
filtering it in place would hide the matches on other pages and count only its own. A choice of
card or quantization goes to that filter's pre-rendered listing (every family it matches); any
other choice, or another order, is applied in place, the count says it is this page's, and the
pager keeps it. Here a page holds one family: the fixture catalog's two (Fixture 7B, the faster,
then Empty 1B) page."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from builder import routes, site
from builder.cli import run
from builder.views import common
from testkit.local_browser import serve_folder
from tests.builder.factory import write_catalog

W4A16 = routes.filtered_index("quant", "w4a16")
B70 = routes.filtered_index("hw", "arc_pro_b70")
LISTED = "[data-family-list] > li:not([hidden]) h3"


@pytest.fixture(scope="module")
def paged_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("paged")
    data, packets = write_catalog(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(common, "FAMILIES_PER_PAGE", 1)
        patch.setattr(site, "FAMILIES_PER_PAGE", 1)
        assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(root / "site")]) == 0
    with serve_folder(root / "site") as url:
        yield url


def _path(page, base: str) -> str:
    return str(page.url).removeprefix(base).split("#")[0]


def test_a_card_or_quantization_chosen_on_a_page_goes_to_every_family_it_matches(page, paged_url):
    page.goto(paged_url + routes.index_page(2))
    assert page.locator(LISTED).all_inner_texts() == ["Empty 1B"]
    assert page.locator("[data-count]").inner_text() == "2 of 2 families"  # the listing's, not the page's
    page.select_option("select[name=quant]", "w4a16")
    page.wait_for_url(paged_url + W4A16)
    assert page.locator(LISTED).all_inner_texts() == ["Fixture 7B"]
    assert page.locator("select[name=quant]").input_value() == "w4a16"
    assert page.locator("[data-count]").inner_text() == "1 of 2 families · 1 with a matching result"
    page.select_option("select[name=quant]", "")  # any quantization: the index again
    page.wait_for_url(paged_url + routes.INDEX)
    assert page.locator(LISTED).all_inner_texts() == ["Fixture 7B"]
    assert page.problems == []


def test_another_choice_stays_on_the_page_says_so_and_the_pager_keeps_it(page, paged_url):
    page.goto(paged_url + routes.INDEX)
    page.select_option("select[name=grade]", "none")  # no pre-rendered page: filtered here
    assert _path(page, paged_url) == routes.INDEX and "grade=none" in page.url
    assert page.locator(LISTED).all_inner_texts() == []
    assert page.locator("[data-count]").inner_text() == "0 of the 1 families on this page (page 1 of 2)"
    page.click("nav.pager a")
    page.wait_for_url(paged_url + routes.index_page(2) + "#grade=none")
    assert page.locator("select[name=grade]").input_value() == "none"
    assert page.locator(LISTED).all_inner_texts() == ["Empty 1B"]
    page.select_option("select[name=grade]", "")
    assert page.locator("[data-count]").inner_text() == "2 of 2 families"
    page.select_option("select[name=sort]", "name")  # an order of this page's families only: said
    assert page.locator("[data-count]").inner_text() == "1 of the 1 families on this page (page 2 of 2)"
    assert page.problems == []


def test_a_second_choice_on_a_filter_page_is_applied_among_its_families(page, paged_url):
    page.goto(paged_url + W4A16)
    page.select_option("select[name=grade]", "none")
    assert _path(page, paged_url) == W4A16
    assert page.locator("select[name=quant]").input_value() == "w4a16"
    assert page.locator("[data-count]").inner_text() == (
        "0 of the 1 families matching W4A16 · 0 with a matching result"
    )
    assert page.problems == []


def test_a_link_to_a_choice_a_page_shows_in_part_goes_to_its_listing(page, paged_url):
    page.goto(paged_url + routes.index_page(2) + "#hw=arc_pro_b70&sort=name")
    page.wait_for_url(paged_url + B70 + "#sort=name")
    assert page.locator("select[name=hw]").input_value() == "arc_pro_b70"
    assert page.locator("select[name=sort]").input_value() == "name"
    assert page.locator(LISTED).all_inner_texts() == ["Fixture 7B"]
    assert page.problems == []


def test_a_choice_put_in_the_hash_of_an_open_page_goes_to_its_listing(page, paged_url):
    page.goto(paged_url + routes.index_page(2))
    page.evaluate("window.location.hash = 'quant=w4a16'")
    page.wait_for_url(paged_url + W4A16)
    assert page.locator(LISTED).all_inner_texts() == ["Fixture 7B"]
    assert page.problems == []
