"""A family measured many times over: the page shows one result per configuration and state, keeps
every packet listed and reachable, and stays small."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from builder.cli import run
from catalog.model.packet import Packet
from catalog.packets.seal import write_packet
from tests.builder.factory import repeat_parts, write_catalog
from tests.catalog.factories import seal_parts

REPEATS = 9
FAMILY = "models/fixture-7b/index.html"


@pytest.fixture(scope="module")
def repeated(tmp_path_factory: pytest.TempPathFactory) -> tuple[BeautifulSoup, list[Packet], Path]:
    root = tmp_path_factory.mktemp("repeats")
    data, packets_dir = write_catalog(root, empty_family=False)
    repeats = [seal_parts(repeat_parts(i)) for i in range(REPEATS)]
    for sealed in repeats:
        write_packet(sealed, packets_dir)
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets_dir), "--out", str(out)]) == 0
    return BeautifulSoup((out / FAMILY).read_text(encoding="utf-8"), "lxml"), [s.packet for s in repeats], out


def _cell(soup: BeautifulSoup, depth: str, cards: str) -> BeautifulSoup:
    """The card's one scorecard: a row per quantization and card count, a column per depth."""
    matrix = soup.select_one("section.matrix#matrix-quant-depth-arc_pro_b70")
    row = f"W4A16 · {cards}"
    return matrix.select_one(f'td[data-row="{row}"][data-col="{depth}"]')  # type: ignore[return-value, union-attr]


def test_every_packet_stays_listed_and_linked(repeated):
    soup, repeats, _ = repeated
    section = soup.select_one("#packets")
    for packet in repeats:
        anchor = section.select_one(f"#packet-{packet.id}")
        assert anchor is not None, packet.id
        assert anchor.select_one(f'a[href$="packets/{packet.id}/index.html"]') is not None
    # one line each, every packet: the repeats, the fixture packet, the imported one
    rows = section.select("table.packet-list tbody tr")
    assert len(rows) == REPEATS + 2


def test_a_cell_shows_one_result_per_state_and_counts_the_repeats(repeated):
    soup, _, _ = repeated
    measured = _cell(soup, "NGRAM3", "TP1")
    assert len(measured.select(".entry.state-measured")) == 1
    assert measured.select_one("a.more").get_text(strip=True) == f"+{REPEATS} repeats"  # type: ignore[union-attr]
    withheld = _cell(soup, "NGRAM5", "TP1")
    # the withheld repeats are not hidden behind anything: one withheld entry, never a value slot
    assert len(withheld.select(".entry.state-withheld")) == 1
    assert withheld.select_one(".entry.state-withheld .cell-value") is None


def test_the_headline_result_is_the_one_its_cell_shows(repeated):
    soup, _, _ = repeated
    hero_link = soup.select_one(".headline a[href*='packets/']")["href"]
    packet_id = hero_link.split("packets/")[1].split("/")[0]
    shown = [a["href"] for a in soup.select("section.matrix .entry a.evidence")]
    assert any(packet_id in href for href in shown)


def test_charts_and_projection_do_not_grow_with_repeats(repeated):
    soup, _, out = repeated
    labels = [(tr["class"][0], tr.td.get_text(strip=True)) for tr in soup.select("#projection table tbody tr")]
    assert labels and len(labels) == len(set(labels))  # one row per configuration and state, not per packet
    points = [p for c in soup.select("figure.chart table tbody tr") for p in [c.get_text(" ", strip=True)]]
    assert points and len(points) == len(set(points))
    assert (out / FAMILY).stat().st_size < 100_000


def test_a_result_refused_as_a_repeat_never_leads(repeated):
    """The repeats here are one measurement sealed ten times over (their servers share their timings):
    which is the original cannot be told, so none counts. The page's headline and its "run this" card
    never come from one of them, nor does the verdict quote their figure, and their cell lists them
    without a figure, saying why (catalog/checks/repeats.py)."""
    soup, repeats, _ = repeated
    hero = soup.select_one(".headline a[href*='packets/']")["href"].split("packets/")[1].split("/")[0]
    run = soup.select_one(".run-this a.run-arm")["href"].split("packets/")[1].split("/")[0]
    copies = {p.id for p in repeats} | {
        a["href"].split("packets/")[1].split("/")[0] for a in soup.select("#history .gap a[href*='packets/']")
    }
    assert len(copies) == REPEATS + 1  # the fixture's own packet is one more sealing of it
    assert hero not in copies and run not in copies
    cell = _cell(soup, "NGRAM3", "TP1")
    entry = cell.select_one(".entry.state-measured")
    assert entry is not None and entry.select_one(".cell-value") is None
    why = entry.select_one(".entry-why .reason")
    assert why is not None and why.get_text(strip=True) == "not counted: refused as a repeat"
    assert "copies of one another" in str(why["title"])
    evidence = entry.select_one("a.evidence")
    assert evidence is not None and any(c in str(evidence["href"]) for c in copies)
    quoted = {a["data-packet"] for a in soup.select("#verdict a.figure[data-kind='tok_s']")}
    assert quoted and not quoted & copies
