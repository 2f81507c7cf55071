"""The family page: hero from the headline rule, withheld never shown as measured, every number
in the API, JSON-LD, labelled gaps."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

from builder.format import fmt
from catalog.checks.selection import headline
from catalog.packets.layout import is_signature
from catalog.store.repository import load_catalog

FAMILY = "models/fixture-7b/index.html"


def _numbers(value: object) -> set[Decimal]:
    found: set[Decimal] = set()
    if isinstance(value, bool):
        return found
    if isinstance(value, int | float):
        found.add(Decimal(repr(value)))
    elif isinstance(value, dict):
        for item in value.values():
            found |= _numbers(item)
    elif isinstance(value, list):
        for item in value:
            found |= _numbers(item)
    return found


def test_hero_is_the_headline_rule_formatted(built, page):
    catalog = load_catalog(built.parent / "data", built.parent / "packets")
    lead = headline(catalog.packets_of("fixture-7b"), list(catalog.packets.values()))
    assert lead is not None
    hero = page(FAMILY).select_one(".headline")
    assert hero.select_one(".headline-value data.num")["value"] == fmt(lead.decode_tok_s)
    assert lead.packet.id in hero.get_text()
    assert "Evidence " + lead.grade in hero.get_text()
    # the headline is the centre of the pair, and both fresh-server values are shown
    shown = {d["value"] for d in hero.select(".headline-meta data.num")}
    assert {fmt(min(lead.arm.server_values)), fmt(max(lead.arm.server_values))} <= shown


def test_withheld_cells_have_no_value_in_the_value_slot(page):
    soup = page(FAMILY)
    withheld = soup.select(".scorecard .entry.state-withheld")
    assert withheld, "the fixture has a withheld arm"
    for entry in withheld:
        assert entry.select_one(".cell-value") is None
        assert entry.select_one(".badge-withheld").get_text(strip=True) == "Withheld"
        assert "G3" in entry.select_one(".reason").get_text()
        struck = entry.select_one(".withheld-value")
        assert "withheld" in struck.get_text() and struck.select_one("s data.num") is not None
    # every cell's class is its best entry's state: a cell holding only withheld entries is withheld
    for cell in soup.select(".scorecard td.cell"):
        states = {e["class"][1] for e in cell.select(".entry")}
        if states == {"state-withheld"}:
            assert "state-withheld" in cell["class"]


def test_measured_cells_show_value_and_pair(page):
    entries = page(FAMILY).select(".scorecard .entry.state-measured")
    assert entries
    for entry in entries:
        assert entry.select_one(".cell-value data.num") is not None
        assert entry.select_one(".range") is not None
        assert entry.select_one("a.evidence")["href"].startswith("../../packets/")


def test_untested_combinations_are_listed(page):
    soup = page(FAMILY)
    untested_cells = soup.select(".scorecard td.cell.state-untested")
    listed = [li.get_text() for li in soup.select(".untested li")]
    assert untested_cells and len(listed) == len(untested_cells)
    assert "W4A16 · TP2 · NGRAM3" in listed


def test_withheld_points_are_hollow_and_never_on_a_measured_line(page):
    soup = page(FAMILY)
    charts = soup.select("script[id^=chart-data-]")
    assert charts
    hollow = 0
    for script in charts:
        figure = json.loads(script.string)
        for trace in figure["data"]:
            if trace["name"].startswith("withheld"):
                hollow += 1
                assert trace["marker"]["symbol"] == "circle-open"
                assert set(trace["text"]) == {"withheld"}
            else:
                assert trace["marker"].get("symbol") is None
    assert hollow >= 1
    for row in soup.select(".chart-table tr.state-withheld"):
        centre = row.find_all("td")[2]
        assert centre.select_one(".withheld-value") is not None


def test_every_number_on_the_page_is_in_the_api(built, page):
    soup = page(FAMILY)
    on_page = {Decimal(d["value"]) for d in soup.select("data.num")}
    assert len(on_page) > 20
    api = json.loads((built / "api/models/fixture-7b.json").read_text())
    missing = on_page - _numbers(api)
    assert not missing, f"numbers on the page but not in the API: {sorted(missing)}"


def test_chart_points_match_their_tables(page):
    soup = page(FAMILY)
    for figure_el in soup.select("figure.chart"):
        figure = json.loads(figure_el.select_one("script[id^=chart-data-]").string)
        drawn = {Decimal(repr(y)) for t in figure["data"] if not t["name"].startswith("withheld") for y in t["y"]}
        tabled = {
            Decimal(d["value"])
            for row in figure_el.select("tbody tr")
            for d in row.find_all("td")[2].select("data.num")
            if not row.select_one(".withheld-value")
        }
        assert drawn == tabled


def test_jsonld_dataset_parses_and_is_escaped(built):
    html = (built / FAMILY).read_text()
    match = re.search(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)
    assert match
    assert "<" not in match.group(1)
    data = json.loads(match.group(1))
    assert data["@type"] == "Dataset"
    assert data["creator"]["name"] == "Fixture Labs <script>alert(1)</script>"  # decoded from \u003c
    packet_files = [p for p in (built / "packets").glob("*.json") if not is_signature(p)]
    assert sorted(data["isBasedOn"]) == sorted(p.name[:-5] for p in packet_files)


def test_open_graph_and_twitter_tags(page):
    soup = page(FAMILY)
    for name in ("og:title", "og:description", "og:type"):
        assert soup.find("meta", property=name)["content"]
    assert soup.find("meta", attrs={"name": "twitter:card"})["content"] == "summary"


def test_sections_in_reference_order(page):
    ids = [s.get("id") for s in page(FAMILY).select("main > section, main > nav")]
    assert ids == [
        "hero",
        "signals",
        "packets",
        "classified",
        "measured",
        "history",  # repeats and history (builder/views/repeats.py), beside the measured results
        "concurrency",
        "projection",
        "fine-print",
        None,
    ]


def _packet_page(page, state):  # type: ignore[no-untyped-def]
    """The packet page of the family's first packet in `state` (its row links to it)."""
    row = page(FAMILY).select_one(f"table.packet-list tr.state-{state}")
    return page(row.select_one("a")["href"].removeprefix("../../"))


def test_coverage_chips_come_from_the_packet(page):
    card = _packet_page(page, "measured")
    chips = [li.get_text() for li in card.select(".chips li")]
    for chip in (
        "decode",
        "TTFT",
        "TP1",
        "TP2",
        "no speculation",
        "NGRAM3/5",
        "identity",
        "ladders c1-c8",
        "context 2K-4K",
        "cache-zero",
        "canaries",
        "per-prompt rows",
    ):
        assert chip in chips
    imported = _packet_page(page, "imported")
    imported_chips = [li.get_text() for li in imported.select(".chips li")]
    assert "cache-zero" not in imported_chips and "per-prompt rows" not in imported_chips


def test_concurrency_is_charted_when_a_packet_has_a_ladder(page):
    section = page(FAMILY).select_one("#concurrency")
    assert section.select_one("figure.chart") is not None
    assert section.select_one(".gap") is None


def test_family_without_packets_renders_labelled_gaps(page, api):
    soup = page("models/empty-1b/index.html")
    assert soup.select_one("#hero .gap") is not None
    for section in ("packets", "classified", "measured", "concurrency", "projection"):
        assert soup.select_one(f"#{section} .gap"), section
    assert "no packet of this family carries a concurrency ladder" in soup.select_one("#concurrency").get_text().lower()
    assert api("api/models/empty-1b.json")["family"]["hero"] is None


def test_imported_arm_without_values_renders(page):
    entries = page(FAMILY).select(".scorecard .entry.state-imported")
    assert any(e.select_one(".cell-empty") for e in entries)


def test_links_are_relative(built):
    """So the site works from file:// and under any prefix; the 404 page alone, which a server
    answers at every missing address, links from the site's root (builder/render.py url)."""
    for path in built.rglob("*.html"):
        soup_text = path.read_text()
        rooted = 'href="/' in soup_text or 'src="/' in soup_text
        assert rooted == (path.name == "404.html"), path


def test_plotly_bundle_copied_once_never_inlined(built):
    assert (built / "assets/vendor/plotly-basic.min.js").stat().st_size > 1_000_000
    for path in built.rglob("*.html"):
        assert path.stat().st_size < 1_000_000, path
    soup_html = (built / FAMILY).read_text()
    assert 'data-plotly="../../assets/vendor/plotly-basic.min.js"' in soup_html


def test_single_measured_cell_matrix(tmp_path: Path):
    from builder.cli import run
    from catalog.packets.seal import write_packet
    from tests.builder.factory import measured_parts, write_catalog
    from tests.catalog.factories import seal_parts

    data, packets = write_catalog(tmp_path, packets=False, empty_family=False)
    parts = measured_parts()
    write_packet(seal_parts(parts.model_copy(update={"arms": parts.arms[:1], "ladders": []})), packets)
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(tmp_path / "site")]) == 0
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((tmp_path / "site" / FAMILY).read_text(), "lxml")
    assert len(soup.select(".scorecard .entry.state-measured")) >= 1
    assert soup.select_one("#measured .gap") is not None  # nothing to compare: a labelled gap
    assert soup.select_one("#concurrency .gap") is not None


def test_each_index_pick_is_the_headline_rule_over_its_matching_results(built, api):
    """The family view picks every filter's result in one pass; each must be what
    catalog.checks.selection's rule chooses among the qualified results the filter matches."""
    from itertools import product

    from builder import routes
    from builder.views.results import label_key
    from catalog.checks.grade import evidence_grade
    from catalog.checks.selection import Headline, lead_of, qualified

    catalog = load_catalog(built.parent / "data", built.parent / "packets")
    checked = 0
    for slug in sorted(catalog.recipes):
        packets = catalog.packets_of(slug)
        reproductions = catalog.reproductions(packets)
        candidates = [
            (Headline(p, a, evidence_grade(p, reproductions)), label_key(p.identity.model.quantization_label))
            for p in packets
            for a in p.arms
            if qualified(a)
        ]
        family = api(f"api/models/{slug}.json")["family"]
        assert isinstance(family, dict)
        expected = {}
        for c, quant in candidates:
            for hw, q, spec in product(
                ("", c.packet.identity.host.hardware), ("", quant), ("", c.arm.config.spec_method or "none")
            ):
                key = f"{hw}|{q}|{spec}"
                if key in expected:
                    continue
                matching = [
                    m
                    for m, m_quant in candidates
                    if hw in ("", m.packet.identity.host.hardware)
                    and q in ("", m_quant)
                    and spec in ("", m.arm.config.spec_method or "none")
                ]
                lead = lead_of(matching)
                assert lead is not None
                expected[key] = routes.packet_page(lead.packet.id, lead.arm.id)
        assert sorted(family["pick_for"]) == sorted(expected), slug
        for key, href in expected.items():
            assert family["picks"][family["pick_for"][key]]["href"] == href, (slug, key)
            checked += 1
    assert checked > 3  # the fixture catalog has results on more than one card, build and method
