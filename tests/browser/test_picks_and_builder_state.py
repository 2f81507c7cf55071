"""The index filter picks a result per family (or says none matches), and the pages pre-rendered for
one card or one quantization show, without JavaScript, exactly what the script shows for that
choice; the recipe builder restores its choice from the address and its copy buttons copy exactly
the command on screen."""

from __future__ import annotations

from dataclasses import replace

import pytest

from builder.views.recipe import with_depth
from catalog.recipes.compose import Selection, compose
from catalog.store.repository import load_catalog

pytestmark = pytest.mark.browser

RECIPE = "recipes/fixture-7b/index.html"


def _card(page):  # type: ignore[no-untyped-def]
    return page.locator("[data-family-list] > li").filter(has=page.locator("h3", has_text="Fixture 7B"))


def _shown_pick(page):  # type: ignore[no-untyped-def]
    card = _card(page)
    picks = card.locator(".pick:not([hidden])")
    assert picks.count() == 1
    return picks.first


def _best_row(page, hw: str, quant: str) -> str:  # type: ignore[no-untyped-def]
    """The no-JS table's figure for the fixture family on that card and quantization."""
    row = page.locator(f'#by-result tbody tr[data-hw="{hw}"][data-quant="{quant}"]', has_text="Fixture 7B")
    assert row.count() == 1
    return " ".join(row.locator("td").nth(3).text_content().split())


def test_index_filter_shows_the_best_matching_result(page, base_url):  # type: ignore[no-untyped-def]
    page.goto(base_url + "index.html")
    default = " ".join(_shown_pick(page).locator(".family-value").text_content().split())
    page.select_option("select[name=quant]", "bf16")
    pick = _shown_pick(page)
    figure = " ".join(pick.locator(".family-value").text_content().split())
    # the best BF16 result, not the family's headline (a W4A16 one)
    assert figure == _best_row(page, "arc_pro_b70", "bf16") and figure != default
    assert "BF16" in pick.inner_text() and "best matching result" in pick.inner_text()
    assert page.locator("[data-count]").inner_text() == "1 of 2 families · 1 with a matching result"
    # a shared link restores the same pick
    page.goto(base_url + "index.html#quant=w4a16&hw=arc_pro_b70")
    figure = " ".join(_shown_pick(page).locator(".family-value").text_content().split())
    assert figure == _best_row(page, "arc_pro_b70", "w4a16")
    assert page.problems == []


def test_index_filter_says_when_no_result_matches(page, base_url):  # type: ignore[no-untyped-def]
    # the family has packets on the H100 and in BF16, so it stays listed, but no published result
    # is both: the card says so instead of showing a figure that does not match
    page.goto(base_url + "index.html")
    page.select_option("select[name=hw]", "h100_sxm")
    page.select_option("select[name=quant]", "bf16")
    assert _card(page).is_visible()
    pick = _shown_pick(page)
    assert pick.get_attribute("data-pick") == "none"
    text = " ".join(pick.inner_text().split())
    assert "no matching result" in text
    # it names the filters it was asked for
    assert "H100" in pick.locator("[data-none-detail]").inner_text() and "BF16" in text
    assert "0 with a matching result" in page.locator("[data-count]").inner_text()
    # clearing the filters brings the headline back
    page.select_option("select[name=hw]", "")
    page.select_option("select[name=quant]", "")
    assert _shown_pick(page).get_attribute("data-pick") == "default"
    assert page.problems == []


def _expected(built, *, variant: str, hw: str, features: list[str], tp: int, depth: int):  # type: ignore[no-untyped-def]
    catalog = load_catalog(built.parent / "data", built.parent / "packets")
    recipe = catalog.recipes["fixture-7b"]
    command = compose(
        recipe, Selection(variant=variant, hardware=catalog.hardware[hw], features=features, tensor_parallel_size=tp)
    ).redacted()
    # the fixture's recorded digest is not a full sha256, so the image is not pinned
    return replace(command, args=with_depth(command.args, depth))


LISTED = """() => [...document.querySelectorAll('[data-family-list] > li')].filter(li => !li.hidden).map(li => [
  li.querySelector('h3').textContent.trim(),
  [...li.querySelectorAll('.pick')].filter(p => !p.hidden).map(p => p.textContent.replace(/\\s+/g, ' ').trim())
])"""


def _listing(page) -> tuple[object, str]:  # type: ignore[no-untyped-def]
    return page.evaluate(LISTED), page.locator("[data-count]").text_content()


def test_prerendered_filter_pages_show_what_the_script_shows(browser, base_url, built):  # type: ignore[no-untyped-def]
    static = browser.new_context(java_script_enabled=False)
    without = static.new_page()
    without.goto(base_url + "index.html")
    links = without.locator("[data-noscript-filters] a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert {h.split("/")[1] for h in hrefs} == {"hw", "quant"} and len(hrefs) >= 4
    scripted = browser.new_context()
    page = scripted.new_page()
    for href in hrefs:
        name = href.split("/")[1]
        without.goto(base_url + href)
        value = without.locator(f"select[name={name}] option[selected]").get_attribute("value")
        listed, count = _listing(without)
        page.goto(base_url + f"index.html#{name}={value}")
        assert _listing(page) == (listed, count), href
        # the pre-rendered page with the script: the same, and its choice is selected
        page.goto(base_url + href)
        assert _listing(page) == (listed, count), href
        assert page.locator(f"select[name={name}]").input_value() == value
    # another choice on a pre-rendered page is the index's, in its address
    page.select_option("select[name=hw]", "")
    page.wait_for_url("**/index.html#quant=*")
    assert page.locator("select[name=quant]").input_value() == value
    static.close()
    scripted.close()


def test_builder_restores_its_choice_from_the_address(page, base_url, built):  # type: ignore[no-untyped-def]
    page.goto(base_url + RECIPE + "#variant=int4&hw=arc_pro_b70&features=spec_decoding&tp=2&depth=5")
    assert page.locator("input[name=variant][value=int4]").is_checked()
    assert page.locator("select[name=hardware]").input_value() == "arc_pro_b70"
    assert page.locator("select[name=tp]").input_value() == "2"
    assert page.locator("select[name=depth]").input_value() == "5"
    assert page.locator("input[name=feature][value=spec_decoding]").is_checked()
    assert not page.locator("input[name=feature][value=tool_calling]").is_checked()
    expected = _expected(built, variant="int4", hw="arc_pro_b70", features=["spec_decoding"], tp=2, depth=5)
    shell = page.locator("#builder-shell").inner_text()
    assert shell == expected.shell_multiline()
    assert "--tensor-parallel-size 2" in shell and '"num_speculative_tokens":5' in shell
    assert page.locator("#builder-docker").inner_text() == expected.docker_multiline()
    # a change is written back to the address, and the link holds it
    page.select_option("select[name=depth]", "2")
    assert "depth=2" in page.url and "tp=2" in page.url
    assert "depth=2" in (page.locator("[data-builder-link]").get_attribute("href") or "")
    page.reload()
    assert page.locator("select[name=depth]").input_value() == "2"
    expected = _expected(built, variant="int4", hw="arc_pro_b70", features=["spec_decoding"], tp=2, depth=2)
    assert page.locator("#builder-shell").inner_text() == expected.shell_multiline()
    # without speculation the depth does not apply
    page.uncheck("input[name=feature][value=spec_decoding]")
    assert page.locator("select[name=depth]").is_disabled()
    assert "--speculative-config" not in page.locator("#builder-shell").inner_text()
    assert page.problems == []


@pytest.mark.parametrize("block", ["builder-shell", "builder-docker"])
def test_copy_copies_exactly_the_displayed_command(page, base_url, block):  # type: ignore[no-untyped-def]
    page.goto(base_url + RECIPE + "#variant=int4&hw=arc_pro_b70&features=tool_calling,spec_decoding&tp=2&depth=4")
    shown = page.locator(f"#{block}").inner_text()
    assert '"num_speculative_tokens":4' in shown
    page.click(f"button[data-copy={block}]")
    page.wait_for_function(f"document.querySelector('button[data-copy={block}]').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == shown
    assert page.problems == []
