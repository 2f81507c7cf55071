"""The repository's own data/ and packets/ build, and keep the properties the fixture tests check."""

from __future__ import annotations

import json
from decimal import Decimal

from bs4 import BeautifulSoup

from builder.format import fmt
from catalog.checks.selection import headline
from catalog.store.repository import load_catalog
from tests.builder.factory import LOAD_FAMILY, REPO


def test_every_family_hero_follows_the_rule(repository_built):
    catalog = load_catalog(REPO / "data", REPO / "packets")
    for slug in catalog.recipes:
        soup = BeautifulSoup((repository_built / f"models/{slug}/index.html").read_text(), "lxml")
        lead = headline(catalog.packets_of(slug), list(catalog.packets.values()))
        value = soup.select_one(".headline-value data.num")
        if lead is None:
            assert value is None and soup.select_one("#hero .gap") is not None
        else:
            assert value["value"] == fmt(lead.decode_tok_s)  # type: ignore[index]


def test_withheld_results_never_look_measured(repository_built):
    for path in repository_built.glob("models/*/index.html"):
        soup = BeautifulSoup(path.read_text(), "lxml")
        for entry in soup.select(".entry.state-withheld"):
            assert entry.select_one(".cell-value") is None
            assert entry.select_one(".badge-withheld") is not None


def test_page_numbers_are_in_the_api(repository_built):
    def numbers(value: object) -> set[Decimal]:
        if isinstance(value, bool):
            return set()
        if isinstance(value, int | float):
            return {Decimal(repr(value))}
        items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
        return set().union(*(numbers(v) for v in items)) if items else set()

    for path in repository_built.glob("models/*/index.html"):
        slug = path.parent.name
        on_page = {Decimal(d["value"]) for d in BeautifulSoup(path.read_text(), "lxml").select("data.num")}  # type: ignore[arg-type]
        api = json.loads((repository_built / f"api/models/{slug}.json").read_text())
        assert on_page <= numbers(api), (slug, sorted(on_page - numbers(api)))


def test_a_sweep_without_energy_says_why_once_not_in_every_row(repository_built):
    # the committed demo campaign ran on the CPU: no card energy source for any of its levels
    soup = BeautifulSoup((repository_built / "models/demo/index.html").read_text(), "lxml")
    tables = soup.select("table[id^=load-]")
    assert tables
    for table in tables:
        caption = soup.select_one(f"#{table['aria-describedby']}")
        assert caption is not None and "energy not measured: no card energy source" in caption.get_text(" ")
        headers = [th.get_text(" ", strip=True) for th in table.select("thead th")]
        assert not any(h.startswith("energy") for h in headers)
        assert all(len(row.select("th, td")) == len(headers) for row in table.select("tbody tr"))
        assert table.select_one(".energy-absent") is None


def test_a_sweep_with_energy_keeps_its_column(load_site):
    soup = BeautifulSoup((load_site[0] / f"models/{LOAD_FAMILY}/index.html").read_text(), "lxml")
    table = soup.select_one("table[id^=load-]")
    assert table is not None
    assert any(th.get_text(" ", strip=True).startswith("energy") for th in table.select("thead th"))
