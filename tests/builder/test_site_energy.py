"""Energy on the site: J per output token and tok/s per W beside every measured speed whose window
is valid (scorecards, the hero, the index), an energy-vs-throughput chart for load sweeps, "energy
invalid: why" and "energy not measured" elsewhere, the packet page's samples and rules, and the
recipe page's cost per million tokens (worked out in the page; the figures are in its HTML)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from builder.views.arms import ladder_views
from builder.views.energy import NOT_MEASURED, absent, energy_facts, one_absence
from catalog.model.energy import EnergySetup
from catalog.model.packet import Packet
from catalog.packets.layout import is_signature
from catalog.packets.verify import read_packet
from tests.builder.factory import ENERGY_GAP_LEVEL, LOAD_FAMILY, REPO

FAMILY = f"models/{LOAD_FAMILY}/index.html"
RECIPE = f"recipes/{LOAD_FAMILY}/index.html"


@pytest.fixture(scope="module")
def soup(load_site: tuple[Path, Packet]) -> Callable[[str], BeautifulSoup]:
    return lambda path: BeautifulSoup((load_site[0] / path).read_text(encoding="utf-8"), "lxml")


def words(node: object) -> str:
    return " ".join(node.get_text(" ").split())  # type: ignore[attr-defined]


def arm_j_per_token(packet: Packet, arm_index: int) -> float:
    """The arm's energy over its output tokens, from the packet's own windows."""
    windows = [s.energy for s in packet.arms[arm_index].servers]
    energy = sum(w.figures.energy_j for w in windows if w and w.figures)
    tokens = sum(sum(r.completion_tokens for r in s.rows) for s in packet.arms[arm_index].servers)
    return energy / tokens


def test_the_hero_shows_the_headline_arms_energy_per_token(soup, load_site) -> None:
    hero = soup(FAMILY).select_one(".headline-energy")
    assert hero is not None
    value = hero.select_one("data.num[value]")
    assert value is not None
    assert "J/token" in words(hero) and "tok/s/W" in words(hero) and "W average" in words(hero)
    # the headline is the fastest arm that passed: the speculative one
    j_per_token = {round(arm_j_per_token(load_site[1], i), 2) for i in range(2)}
    assert round(float(value["value"]), 2) in j_per_token


def test_every_measured_scorecard_entry_carries_its_energy(soup) -> None:
    entries = soup(FAMILY).select(".scorecard .entry")
    measured = [e for e in entries if "state-measured" in e["class"]]
    assert measured
    for entry in measured:
        energy = entry.select_one(".entry-energy .energy-valid")
        assert energy is not None and "J/token" in words(energy), words(entry)


def test_an_energy_vs_throughput_chart_draws_each_valid_level(soup, load_site) -> None:
    page = soup(FAMILY)
    chart = page.select_one("#chart-load-energy")
    assert chart is not None
    script = page.select_one("#chart-data-load-energy")
    assert script is not None
    figure = json.loads(script.string or "")
    ys = [y for trace in figure["data"] for y in trace.get("y", [])]
    levels = sum(len(ladder.load.levels) for ladder in load_site[1].ladders if ladder.load)
    assert len(ys) == levels - 1  # every level but the one whose energy is invalid
    assert chart.select_one("table") is not None  # the same numbers for readers without JavaScript


def test_a_level_with_invalid_energy_says_why_in_its_table(soup) -> None:
    rows = soup(FAMILY).select(f'.load-level[data-level="{ENERGY_GAP_LEVEL}"]')
    invalid = [r.select_one(".energy-invalid") for r in rows if r.select_one(".energy-invalid")]
    assert len(invalid) == 1
    assert words(invalid[0]) == "energy invalid: gap"
    assert invalid[0]["title"].startswith("energy invalid: gap: 6.0 s without a power sample on device 0")


def test_the_index_shows_energy_beside_the_headline_and_each_pick(soup) -> None:
    card = next(li for li in soup("index.html").select("li.family") if LOAD_FAMILY in str(li.select_one("a")))
    picks = card.select(".pick")
    with_energy = [p for p in picks if p.select_one(".energy-valid")]
    assert with_energy and with_energy[0]["data-pick"] == "default"
    assert all("J/token" in words(p.select_one(".energy-valid")) for p in with_energy)


def test_the_index_table_of_best_results_carries_their_energy(soup) -> None:
    rows = [r for r in soup("index.html").select("#by-result tbody tr") if f"models/{LOAD_FAMILY}/" in str(r)]
    assert rows and all("J/token" in words(r) for r in rows)


def test_the_packet_page_lists_sources_rules_idle_and_each_servers_figures(soup, load_site) -> None:
    page = soup(f"packets/{load_site[1].id}/index.html")
    energy = words(page.select_one("#energy"))
    assert "xpu-smi dump power.draw (card, W)" in energy and "hwmon energy1_input (card, µJ)" in energy
    assert "no gap over 3 s" in energy and "idle baseline device 0: 31.86 W" in energy
    server = words(page.select_one("details.server"))
    assert "energy counter" in server and "energy above idle" in server and "W peak" in server


def test_a_campaign_without_energy_says_energy_not_measured(page) -> None:
    family = page("models/fixture-7b/index.html")
    hero = family.select_one(".headline-energy")
    assert hero is not None and words(hero) == "energy not measured"
    cells = family.select(".scorecard .entry.state-measured .entry-energy")
    assert cells and all(words(c) == "energy not measured" for c in cells)


def test_the_recipe_page_prices_each_measured_result_in_the_page(soup, load_site) -> None:
    recipe = soup(RECIPE)
    block = recipe.select_one("#energy-cost")
    assert block is not None
    price = block.select_one("input[data-price]")
    assert price is not None and price.find_parent("form") is None  # never submitted anywhere
    outputs = block.select("output[data-cost]")
    assert len(outputs) == 2  # both arms of the measured campaign
    assert {round(float(o["data-j"]), 2) for o in outputs} == {
        round(arm_j_per_token(load_site[1], i), 2) for i in range(2)
    }
    assert "J/token × price ÷ 3.6" in words(block)


def test_a_recipe_without_energy_says_there_is_nothing_to_price(page) -> None:
    block = page("recipes/fixture-7b/index.html").select_one("#energy-cost")
    assert block is not None and "no energy figure to price" in words(block)
    assert block.select_one("input") is None


def test_the_methodology_page_explains_energy(page) -> None:
    section = page("methodology/index.html").select_one("#energy")
    assert section is not None
    text = words(section)
    assert re.search(r"trapezoid", text) and "counter wrap" in text


def test_a_ladder_without_energy_says_why_once_not_on_every_row() -> None:
    demo = next(p for p in sorted((REPO / "packets").glob("demo-bf16-*.json")) if not is_signature(p))
    packet = read_packet(demo, None)  # a CPU campaign: no card energy source, one reason for every row
    ladders = [v for v in ladder_views(packet) if v.kind == "concurrency"]
    assert ladders
    for view in ladders:
        assert "energy" not in view.columns and view.energy_absent.startswith(f"{NOT_MEASURED}: ")
        assert not any(NOT_MEASURED in str(cell) for row in view.rows for cell in row)
    [fact] = energy_facts(None, packet)  # a server's: the word; the packet's Energy section says why
    assert fact.value == NOT_MEASURED and "Energy section" in fact.note
    read = packet.model_copy(update={"energy": EnergySetup(sources=["xpu-smi: power, W"])})
    [fact] = energy_facts(None, read)  # energy read for the campaign, none for this server: no reason to point to
    assert fact.value == NOT_MEASURED and fact.note == ""
    assert one_absence([absent("a"), absent("a")]) == f"{NOT_MEASURED}: a"
    assert one_absence([absent("a"), absent("b")]) == one_absence([absent("a"), None]) == ""
