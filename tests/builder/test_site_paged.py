"""Listings that grow with the catalog (the index, its filter pages, a card's page) show at most
FAMILIES_PER_PAGE families a page, linked page to page; Pagefind's index of every family is built
into the site. Here a page holds one family, so the committed catalog's few families page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from builder import routes, site
from builder.cli import run
from builder.views import common, index
from catalog.packets.seal import write_packet
from catalog.store.repository import load_data
from tests.builder.factory import REPO, measured_parts, write_catalog
from tests.catalog.factories import seal_parts


@pytest.fixture
def one_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "FAMILIES_PER_PAGE", 1)
    monkeypatch.setattr(site, "FAMILIES_PER_PAGE", 1)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")


def _build(data: Path, packets: Path, out: Path, *extra: str) -> None:
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out), *extra]) == 0


def _soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def _families(path: Path) -> list[str]:
    return [str(a["href"]) for a in _soup(path).select("[data-family-list] > li h3 a")]


def _pages(first: Path) -> list[Path]:
    """A listing's pages, followed from its first page by each pager's link to the next."""
    pages = [first]
    while (following := _soup(pages[-1]).select_one('nav.pager a[rel="next"]')) is not None:
        pages.append((pages[-1].parent / str(following["href"])).resolve())
        assert len(pages) <= 1000, "the pages' next links go round"
    return pages


def test_the_index_lists_every_family_a_page_at_a_time(one_a_page, tmp_path):
    out = tmp_path / "site"
    _build(REPO / "data", REPO / "packets", out)
    recipes = sorted(p.stem for p in (REPO / "data" / "models").glob("*.yaml"))
    pages = _pages(out / routes.INDEX)
    assert [p.name for p in pages] == [routes.index_page(n) for n in range(1, len(recipes) + 1)]
    listed = [href for page in pages for href in _families(page)]
    assert sorted(listed) == sorted(routes.family_page(slug) for slug in recipes)
    assert all(len(_families(page)) == 1 for page in pages)
    sitemap = (out / routes.SITEMAP).read_text()
    assert all(f"<loc>{routes.index_page(n)}</loc>" in sitemap for n in range(2, len(recipes) + 1))


def test_a_filter_page_lists_only_the_families_it_matches_a_page_at_a_time(one_a_page, tmp_path):
    out = tmp_path / "site"
    _build(REPO / "data", REPO / "packets", out)
    for first in out.glob("filter/*/*/index.html"):
        pages = _pages(first)
        listed = [href for page in pages for href in _families(page)]
        assert len(listed) == len(set(listed)) == len(pages)
        assert not [li for page in pages for li in _soup(page).select("[data-family-list] > li[hidden]")]


def test_every_listing_page_knows_it_is_partial_and_where_each_filter_lists_every_match(one_a_page, tmp_path):
    """What site.js reads on a paged catalog (tests/browser/test_paged_filters.py drives it): each
    page marks itself paged, and each card or quantization offered links its filter's listing and
    says how many families that listing holds."""
    out = tmp_path / "site"
    _build(REPO / "data", REPO / "packets", out)
    listing_pages = [*_pages(out / routes.INDEX), *out.glob("filter/*/*/index*.html")]
    offered = 0
    for page in listing_pages:
        form = _soup(page).select_one("form[data-filters]")
        assert form is not None and form.has_attr("data-paged")
        table = _soup(page).select_one("details.by-result")  # its rows are this page's families'
        assert table is not None and table.get_text(" ", strip=True).count("among the families on this page") == 1
        for option in form.select("option[data-href]"):
            first = (page.parent / str(option["data-href"])).resolve()
            assert first.is_file()
            assert int(str(option["data-families"])) == sum(len(_families(p)) for p in _pages(first))
            offered += 1
    assert offered >= 4


def _answers(path: Path) -> dict[str, tuple[list[str], str]]:
    """Each card's answer on a page: its rows' families, and its link to more."""
    found = {}
    for answer in _soup(path).select("[data-answer-hw]"):
        rows = [str(a["href"]) for a in answer.select("tbody tr td:first-child a")]
        more = answer.select_one("p a")
        found[str(answer["data-answer-hw"])] = (rows, more.get_text(" ", strip=True) if more else "")
    return found


def test_every_page_answers_for_every_family_not_its_own_alone(one_a_page, monkeypatch, tmp_path):
    """A card's answer on a page of a paged catalog is the one the whole index gives (its fastest
    result over every family), cut to ANSWER_ROWS, with how many more the card's listing holds: a
    page holding none of the card's families does not say that no model has a result there."""
    whole = tmp_path / "whole"
    monkeypatch.setattr(common, "FAMILIES_PER_PAGE", 1000)
    monkeypatch.setattr(site, "FAMILIES_PER_PAGE", 1000)
    _build(REPO / "data", REPO / "packets", whole)
    expected = _answers(whole / routes.INDEX)
    assert any(len(rows) > 1 for rows, _ in expected.values()), "a card of the committed catalog answers twice"
    monkeypatch.setattr(common, "FAMILIES_PER_PAGE", 1)
    monkeypatch.setattr(site, "FAMILIES_PER_PAGE", 1)
    monkeypatch.setattr(index, "ANSWER_ROWS", 1)
    out = tmp_path / "site"
    _build(REPO / "data", REPO / "packets", out)
    for page in _pages(out / routes.INDEX):
        shown = _answers(page)
        assert shown.keys() == expected.keys()
        for card, (rows, _) in expected.items():
            assert shown[card][0] == rows[:1]
            more = len(rows) - 1
            assert shown[card][1].startswith(f"{more} more famil") if more else shown[card][1] == ""


def test_a_cards_page_lists_its_families_a_page_at_a_time(one_a_page, tmp_path):
    out = tmp_path / "site"
    _build(REPO / "data", REPO / "packets", out)
    paged = [p for p in out.glob("hardware/*/index.html") if len(_pages(p)) > 1]
    by_family = 0
    for first in paged:
        pages = _pages(first)
        each = [[str(a["href"]) for a in _soup(page).select("#results tbody tr td:first-child a")] for page in pages]
        rows = [row for shown in each for row in shown]
        assert len(rows) == len(set(rows)) and all(len(shown) <= 1 for shown in each)
        assert [bool(shown) for shown in each] == [True] * len(rows) + [False] * (len(pages) - len(rows))
        assert all(_soup(page).select_one("[data-search]") is not None for page in pages)
        by_family += len(rows) > 1
    assert by_family, "a card of the committed catalog has more than one family"


def test_a_cards_page_lists_the_recipes_naming_it_a_page_at_a_time(one_a_page, tmp_path):
    """The recipes naming a card are paged with its families (1,000 recipes on every page of a card
    made each of them grow with the catalog): each page holds its share, every recipe once."""
    out = tmp_path / "site"
    _build(REPO / "data", REPO / "packets", out)
    recipes = load_data(REPO / "data").recipes
    checked = 0
    for hw_id in load_data(REPO / "data").hardware:
        naming = sorted(routes.recipe_page(slug) for slug, r in recipes.items() if hw_id in r.meta.hardware)
        pages = _pages(out / routes.hardware_page(hw_id))
        listed = [str(a["href"]).replace("../", "") for page in pages for a in _soup(page).select("#recipes li a")]
        assert sorted(listed) == naming
        assert all(len(_soup(page).select("#recipes li")) <= 1 for page in pages)
        if len(naming) > 1:
            assert len(pages) >= len(naming)
            checked += 1
        for page in pages[len(naming) :] if naming else []:  # past its recipes, a page says where they are
            section = _soup(page).select_one("#recipes")
            assert section is not None and "listed on the pages before this one" in section.get_text()
    assert checked, "a card of the committed catalog is named by more than one recipe"


def test_every_family_is_in_the_search_index_and_the_manifest_lists_its_files(tmp_path):
    out = tmp_path / "site"
    _build(REPO / "data", REPO / "packets", out)
    files = json.loads((out / routes.BUILD_MANIFEST).read_text())["files"]
    search = sorted(p for p in files if p.startswith("pagefind/"))
    assert "pagefind/pagefind.js" in search and "pagefind/pagefind-ui.js" in search
    assert sorted(p.relative_to(out).as_posix() for p in (out / "pagefind").rglob("*") if p.is_file()) == search
    fragments = [p for p in search if p.startswith("pagefind/fragment/")]
    assert len(fragments) == len(list((REPO / "data" / "models").glob("*.yaml")))
    assert _soup(out / routes.INDEX).select_one("[data-search][data-bundle='pagefind/']") is not None
    assert _soup(out / routes.INDEX).select_one("form[data-filters][data-paged]") is None  # one page: whole


def test_a_new_packet_on_a_paged_site_gives_the_full_build(one_a_page, tmp_path):
    data, packets = write_catalog(tmp_path / "tree")
    out = tmp_path / "site"
    _build(data, packets, out)
    write_packet(seal_parts(measured_parts().model_copy(update={"title": "again"})), packets)
    _build(data, packets, out)
    full = tmp_path / "full"
    _build(data, packets, full, "--full")

    def snapshot(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    assert snapshot(out) == snapshot(full)


@pytest.mark.parametrize(
    ("number", "shown"),
    [
        (1, "[1] 2 3 … 50"),
        (4, "1 2 3 [4] 5 6 … 50"),
        (25, "1 … 23 24 [25] 26 27 … 50"),
        (50, "1 … 48 49 [50]"),
    ],
)
def test_a_pager_links_the_ends_and_the_pages_near_this_one(number: int, shown: str) -> None:
    """Not every page: at 1,000 families a page 50 links each, at 20,000 a thousand, and a page's
    cost would grow with the catalog; the previous and next pages are always one click away."""
    pager = common.Pager.of(50 * common.FAMILIES_PER_PAGE, number, lambda n: f"page/{n}/")
    assert pager is not None and pager.pages == 50
    words = ["…" if link is None else f"[{link.label}]" if not link.href else link.label for link in pager.links]
    assert " ".join(words) == shown
    assert all(link is None or link.href in ("", f"page/{link.label}/") for link in pager.links)
    assert (pager.previous.href if pager.previous else None) == (f"page/{number - 1}/" if number > 1 else None)
    assert (pager.next.href if pager.next else None) == (f"page/{number + 1}/" if number < 50 else None)
    assert common.Pager.of(common.FAMILIES_PER_PAGE, 1, str) is None  # one page: no pager
    per, total = common.FAMILIES_PER_PAGE, 50 * common.FAMILIES_PER_PAGE - 3
    last = common.Pager.of(total, 50, str)  # which families the page holds, the last page short
    assert last is not None and last.holds == f"{49 * per + 1}–{total} of {total:,}"
