"""The catalog a user understands in ten seconds: glossary, words not ids, compact cells, index
picks per result, re-run commands that match the packet, grouped numbers, sitemap URLs."""

from __future__ import annotations

import re
from pathlib import Path

from bs4 import BeautifulSoup

from builder.views.glossary import BY_TERM, INLINE, terms_in

REPO = Path(__file__).resolve().parents[2]

FAMILY = "models/fixture-7b/index.html"


def _text(soup) -> str:
    for tag in soup(["script", "style"]):
        tag.decompose()
    return soup.select_one("main").get_text(" ")  # type: ignore[no-any-return]


def test_methodology_has_the_one_glossary(page):
    soup = page("methodology/index.html")
    entries = soup.select("#glossary dl.glossary .fact")
    assert {e.select_one("dfn").get_text() for e in entries} == set(BY_TERM)
    for term in ("MTP", "TP", "oracle", "arm", "G1", "G2", "G3", "W4A16", "FP8-dynamic", "draft head", "ceiling"):
        assert term in BY_TERM
    assert "utilisation" in BY_TERM and all(f"Evidence {g}" in BY_TERM for g in "ABCD")


# Where an <abbr> cannot go or would change what a reader copies: a select's options, commands.
NOT_WRAPPED = ("abbr", "option", "pre", "script", "style", "dfn")


def _bare_terms(soup) -> list[str]:
    """Each glossary term in the page's main text that is not inside its <abbr>."""
    bare = []
    for text in soup.main.find_all(string=True):
        if text.find_parent(NOT_WRAPPED) is None:
            bare += [f"{term} in {text.parent.name}: {text.strip()[:60]}" for term in sorted(terms_in(str(text)))]
    return bare


def _pages_with_terms(built) -> list[str]:
    kinds = ("packets/*/index.html", "hardware/*/index.html")
    return [FAMILY, "index.html", *sorted(str(p.relative_to(built)) for k in kinds for p in built.glob(k))]


def test_every_term_a_page_uses_is_defined_inline(page, built):
    """Every occurrence of a glossary term on the family page (measured tables, chart titles and
    the projection included), the index, packet and hardware pages is an <abbr> with its
    definition, except in a select's options and in commands."""
    for path in _pages_with_terms(built):
        soup = page(path)
        assert _bare_terms(soup) == [], path
        # a definition is written once, at the term's first use; later uses get it from site.js
        titled: list[str] = []
        for abbr in soup.select("abbr.term"):
            if abbr.has_attr("title"):
                assert abbr["title"] == BY_TERM[abbr.get_text()].short, (path, abbr)
                titled.append(abbr.get_text())
            assert abbr.get_text() in titled, (path, "used before its definition", abbr)
        if path == FAMILY:
            assert len(titled) == len(set(titled)), "each definition once per page"
            used = {a.get_text() for a in soup.select("#measured abbr.term, #projection abbr.term")}
            assert {"MTP", "TTFT", "ceiling", "utilisation", "optimisation band"} <= used


def test_the_qwen_family_pages_define_every_term_they_use(repository_built):
    for slug in ("qwen3.5-9b", "qwen3.5-4b"):
        content = (repository_built / f"models/{slug}/index.html").read_bytes()
        assert _bare_terms(BeautifulSoup(content, "lxml")) == [], slug


def test_optimisation_bands_are_defined_only_where_they_name_a_band(page):
    soup = page(FAMILY)
    bands = [a for a in soup.select("#projection abbr.term[title]") if a["title"].startswith("optimisation band:")]
    assert bands and all(not INLINE.get(a.get_text()) for a in bands)


def test_pages_show_words_not_arm_ids(page, built):
    # catalog.projection names an input's arm by id; the page puts the arm's label in its place
    for path in [FAMILY, *sorted(str(p.relative_to(built)) for p in built.glob("packets/*/index.html"))]:
        assert not re.search(r"\btp\d+-[a-z0-9-]+", _text(page(path))), path
    # ids stay in anchors
    assert page(FAMILY).select('a.evidence[href*="#arm-tp"]')


def test_scorecard_cells_are_compact(page):
    soup = page(FAMILY)
    for entry in soup.select(".scorecard .entry"):
        main = entry.select_one(".entry-main")
        assert main is not None and main.select_one(".badge") and main.select_one("a.evidence")
        assert "data-depth" in entry.attrs and "data-tp" in entry.attrs
    for entry in soup.select(".scorecard .entry.state-estimated, .scorecard .entry.state-untested"):
        assert entry.select_one(".cell-value .num") is None or "state-estimated" in entry["class"]
    # no run-together words between a cell's spans
    assert not re.search(r"[a-z)][A-Z]", " ".join(e.get_text("") for e in soup.select(".entry-why")) or "")


def test_source_said_once_per_card(page):
    for card in page(FAMILY).select("article.packet-card"):
        assert card.get_text(" ").count("not measured by this runner") <= 1


def test_index_carries_a_pick_per_result_filter(page):
    import json

    soup = page("index.html")
    for family in soup.select("[data-family-list] > li"):
        picks = json.loads(family["data-picks"])
        shown = {p["data-pick"] for p in family.select(".pick")}
        assert "default" in shown and "none" in shown
        assert {str(i) for i in picks.values()} <= shown
        for key in picks:
            assert key.count("|") == 2
    rows = soup.select("#by-result tbody tr[data-hw]")
    assert rows and all(r.select_one("data.num") for r in rows)


def test_packet_rerun_commands_match_the_packet(page, built):
    for path in sorted(built.glob("packets/*/index.html")):
        soup = page(str(path.relative_to(built)))
        section = soup.select_one("#reproduce")
        commands = [c.get_text() for c in section.select("pre code")]
        variant = next(
            (
                f.select_one("dd").get_text()
                for f in soup.select("#identity .fact")
                if f.dt.get_text() == "recipe variant"
            ),
            "",
        )
        if variant.startswith("none"):
            assert commands == [] and "cannot be re-run" in section.get_text()
            continue
        measure = [c for c in commands if c.startswith("make measure")]
        assert measure and all(
            f"VARIANT={variant}" in c and "HW=" in c and "TP=" in c and "DEPTHS=" in c for c in measure
        )


def test_sitemap_is_absolute_with_a_base_url(tmp_path):
    from builder.cli import run
    from tests.builder.factory import write_catalog

    data, packets = write_catalog(tmp_path)
    out = tmp_path / "site"
    assert (
        run(
            [
                "build",
                "--data",
                str(data),
                "--packets",
                str(packets),
                "--out",
                str(out),
                "--base-url",
                "https://x.test/c/",
            ]
        )
        == 0
    )
    locs = re.findall(r"<loc>([^<]+)</loc>", (out / "sitemap.xml").read_text())
    assert locs and all(loc.startswith("https://x.test/c/") for loc in locs)


def test_recipe_guide_code_blocks_have_copy_buttons(page, built):
    for path in sorted(built.glob("recipes/*/index.html")):
        soup = page(str(path.relative_to(built)))
        for pre in soup.select("#guide pre"):
            button = pre.find_next_sibling("button")
            assert button is not None and button["data-copy"] == pre["id"]
        assert soup.select_one("select[name=tp]") is not None


def test_a_filter_page_per_card_and_quantization_linked_without_javascript(page, built):
    from builder.routes import filtered_index as filtered_index_path

    soup = page("index.html")
    links = [a["href"] for a in soup.select("noscript [data-noscript-filters] a, [data-noscript-filters] a")]
    options = {
        (s["name"], o["value"]) for s in soup.select("select[name=hw], select[name=quant]") for o in s.select("option")
    }
    expected = {filtered_index_path(name, value) for name, value in options if value}
    assert set(links) == expected and all((built / link).is_file() for link in links)
    assert filtered_index_path("quant", "w4a16") == "filter/quant/w4a16/index.html"
    # a long free-text label never becomes a long path
    assert re.fullmatch(r"filter/quant/v-[0-9a-f]{10}/index\.html", filtered_index_path("quant", "x" * 40 + "-pwn3d"))
