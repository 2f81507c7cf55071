"""Many people at once, built from a packet with load sweeps: the family page's frontier and latency
charts (a point per level per configuration, diverging and lagging levels drawn apart, hollow and
labelled, the projection dashed), goodput at the recorded objectives, the packet page's per-level
table with the numbers of catalog.model.load_sweep's properties, and the JSON API carrying the same numbers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup, Tag

from builder.format import fmt, num
from builder.views.glossary import INLINE, terms_in
from builder.views.load_sweep import DIFFERS, UNUSABLE
from catalog.model.load_sweep import LoadLevel, LoadSweep
from catalog.model.packet import Packet
from catalog.store.repository import load_catalog
from testkit.samples import ORACLE_ARM, SPEC_ARM
from tests.builder.factory import LOAD_DIVERGES, LOAD_FAMILY, LOAD_LAGS
from tests.builder.test_routes import internal_links

FAMILY = f"models/{LOAD_FAMILY}/index.html"


@pytest.fixture(scope="module")
def screened(load_site: tuple[Path, Packet]) -> Packet:
    site = load_site[0].parent
    return next(
        p for p in load_catalog(site / "data", site / "packets").packets.values() if p.state.value == "screened"
    )


@pytest.fixture(scope="module")
def soup(load_site: tuple[Path, Packet]) -> Callable[[str], BeautifulSoup]:
    return lambda path: BeautifulSoup((load_site[0] / path).read_text(encoding="utf-8"), "lxml")


def _sweep(packet: Packet, arm: str) -> LoadSweep:
    ladder = next(ladder for ladder in packet.ladders if ladder.kind == "load" and ladder.arm == arm)
    assert ladder.load is not None
    return ladder.load


def _figure(page: BeautifulSoup, chart_id: str) -> dict[str, list[dict[str, Any]]]:
    script = page.select_one(f"#chart-{chart_id} script#chart-data-{chart_id}")
    assert script is not None, chart_id
    figure: dict[str, list[dict[str, Any]]] = json.loads(script.string or "")
    return figure


def _series(packet: Packet, arm: str) -> str:
    return f"{packet.identity.model.quantization_label} · {packet.arm(arm).label}"


def _name(trace: dict[str, object]) -> str:
    return str(trace["name"]).replace("<br>", " ")


def test_the_section_draws_the_frontier_energy_and_latency_charts(soup) -> None:
    section = soup(FAMILY).select_one("#concurrency")
    assert section.select_one("#load") is not None and section.select_one(".gap") is None
    ids = [figure["id"] for figure in section.select("figure.chart")]
    assert ids == ["chart-load-frontier", "chart-load-energy", "chart-load-latency-users", "chart-load-latency-rate"]


def test_a_point_per_level_per_configuration(soup, load_site) -> None:
    _, packet = load_site
    figure = _figure(soup(FAMILY), "load-frontier")
    for arm in (ORACLE_ARM, SPEC_ARM):
        sweep, series = _sweep(packet, arm), _series(packet, arm)
        mine = [t for t in figure["data"] if _name(t).startswith(series) and "projected" not in _name(t)]
        flagged = [
            (x, y)
            for t in figure["data"]
            if _name(t) in (DIFFERS, UNUSABLE)
            for x, y, hover in zip(t["x"], t["y"], t["hovertext"], strict=True)
            if hover.startswith(series.replace("&", "&amp;"))
        ]
        drawn = sorted([(x, y) for t in mine for x, y in zip(t["x"], t["y"], strict=True)] + flagged)
        expected = sorted((float(fmt(lv.per_user_tok_s or 0)), float(fmt(lv.aggregate_tok_s))) for lv in sweep.levels)
        assert drawn == expected


def _only(figure: dict[str, list[dict[str, object]]], name: str) -> dict[str, object]:
    found = [t for t in figure["data"] if _name(t) == name]
    assert len(found) == 1, name
    return found[0]


@pytest.mark.parametrize(
    ("arm", "label", "flag", "word"),
    [(SPEC_ARM, LOAD_DIVERGES, DIFFERS, "differs"), (ORACLE_ARM, LOAD_LAGS, UNUSABLE, "unusable")],
)
def test_a_diverging_or_lagging_level_is_hollow_labelled_and_never_in_the_line(
    soup, load_site, arm: str, label: str, flag: str, word: str
) -> None:
    _, packet = load_site
    level = next(lv for lv in _sweep(packet, arm).levels if lv.label == label)
    figure = _figure(soup(FAMILY), "load-frontier")
    apart = _only(figure, flag)
    assert apart["marker"]["symbol"] == "circle-open" and apart["mode"] == "markers+text"  # type: ignore[index]
    assert apart["text"] == [word] and apart["y"] == [float(fmt(level.aggregate_tok_s))]
    line = _only(figure, _series(packet, arm))
    assert float(fmt(level.aggregate_tok_s)) not in line["y"]  # type: ignore[operator]
    notes = " ".join(n.get_text() for n in soup(FAMILY).select("#chart-load-frontier .note"))
    assert (flag if word in flag else f"{word}: {flag}") in notes  # the word once: never "unusable: level unusable"
    assert f"{word}: {word}" not in notes and f"{word}: level {word}" not in notes


def test_the_projection_is_a_dashed_series_beside_the_measured_one(soup, load_site) -> None:
    _, packet = load_site
    figure = _figure(soup(FAMILY), "load-frontier")
    projected = _only(figure, f"{_series(packet, ORACLE_ARM)} (projected)")
    assert projected["line"]["dash"] == "dash"  # type: ignore[index]
    closed = [lv for lv in _sweep(packet, ORACLE_ARM).levels if lv.mode == "closed"]
    assert len(projected["x"]) == len(closed)  # type: ignore[arg-type]
    # no speculative projection under load: no dashed series for the MTP arm
    assert not [t for t in figure["data"] if _name(t) == f"{_series(packet, SPEC_ARM)} (projected)"]


def test_latency_chart_has_ttft_and_itl_percentiles_per_level(soup, load_site) -> None:
    _, packet = load_site
    sweep = _sweep(packet, ORACLE_ARM)
    figure = _figure(soup(FAMILY), "load-latency-users")
    assert figure["layout"]["yaxis"]["type"] == "log"  # type: ignore[index, call-overload]
    p99 = _only(figure, f"{_series(packet, ORACLE_ARM)} · TTFT p99")
    alone = packet.arm(ORACLE_ARM).server_values
    usable = [lv for lv in sweep.levels if lv.mode == "closed" and lv.usable(sweep.lag_bound_ms, alone)]
    assert p99["x"] == [lv.users for lv in usable]
    assert p99["y"] == [float(fmt(lv.ttft.p99_ms)) for lv in usable if lv.ttft]


def test_goodput_names_its_objectives(soup) -> None:
    captions = [c.get_text(" ") for c in soup(FAMILY).select("#load .load-caption")]
    assert len(captions) == 3
    assert all("goodput at TTFT ≤ 500 ms and TPOT ≤ 50 ms" in " ".join(c.split()) for c in captions)


def _cells(row: Tag) -> list[str]:
    return [" ".join(cell.get_text(" ").split()) for cell in row.find_all(["th", "td"])]


def _n(value: float | None, places: int = 2) -> str:
    return "—" if value is None else str(num(value, places))


def _expected_row(level: LoadLevel, sweep: LoadSweep) -> dict[str, str]:
    ttft, itl, e2e = level.ttft, level.itl_ms, level.e2e
    assert ttft and itl and e2e
    return {
        "completed": f"{len(level.completed)} / {level.failed}",
        "aggregate": f"{_n(level.aggregate_tok_s)} tok/s",
        "per user": f"{_n(level.per_user_tok_s)} tok/s",
        "ttft": f"{_n(ttft.p50_ms)} / {_n(ttft.p90_ms)} / {_n(ttft.p99_ms)}",
        "itl": f"{_n(itl.p50_ms)} / {_n(itl.p90_ms)} / {_n(itl.p99_ms)}",
        "e2e": f"{_n(e2e.p50_ms)} / {_n(e2e.p99_ms)}",
        "goodput": f"{_n(level.goodput(sweep.slo) * 100, 1)} %",
    }


def test_the_packet_page_table_holds_the_models_numbers(soup, load_site) -> None:
    _, packet = load_site
    page = soup(f"packets/{packet.id}/index.html")
    for arm in (ORACLE_ARM, SPEC_ARM):
        sweep, alone = _sweep(packet, arm), packet.arm(arm).server_values
        rows = page.select(f"#load-{arm}-full tbody tr")
        assert len(rows) == len(sweep.levels)
        for row, level in zip(rows, sweep.levels, strict=True):
            cells = _cells(row)
            assert cells[0].startswith(level.label)
            assert dict(zip(_expected_row(level, sweep), cells[1:8], strict=True)) == _expected_row(level, sweep)
            assert cells[8].startswith(f"{level.identical} of {len(level.completed)}")
            assert row["data-usable"] == ("yes" if level.usable(sweep.lag_bound_ms, alone) else "no")
            divergence = level.first_diverging_request
            if divergence is not None:
                assert row["data-identity"] == "differs"
                assert f"first at {divergence.prompt_id} @ token {divergence.first_divergence}" in cells[8]
            assert cells[9].startswith(_n(level.lag.p99_ms))
            why = level.unusable_because(sweep.lag_bound_ms, alone)
            said = [r.get_text() for r in row.select(".reason") if r.get_text().startswith("unusable")]
            assert said == ([] if why is None else [f"unusable: {why}"])
    # the level the sweep's client lagged on says so in words
    lagged = page.select_one(f'#load-{ORACLE_ARM}-full tr[data-level="{LOAD_LAGS}"]')
    assert "unusable: client lag p99" in lagged.get_text()


def test_the_packet_page_defines_every_new_term(soup, load_site) -> None:
    _, packet = load_site
    page = soup(f"packets/{packet.id}/index.html")
    used = terms_in(page.main.get_text(" "))
    assert {"goodput", "TTFT", "ITL", "p99", "closed loop", "open loop", "client lag"} <= used
    assert used - {a.get_text() for a in page.select("abbr.term[title]")} == set()
    # a term's definition is written at its first use (site.js copies it to later uses)
    assert all(a["title"] == INLINE[a.get_text()].short for a in page.select("abbr.term[title]"))


def test_the_api_carries_every_level(load_site) -> None:
    site, packet = load_site
    family = json.loads((site / f"api/models/{LOAD_FAMILY}.json").read_text())["family"]
    # the screened import has an arm of the same id: take this packet's sweeps
    sweeps = {s["arm"]: s for s in family["load"]["sweeps"] if s["href"].startswith(f"packets/{packet.id}/")}
    for arm in (ORACLE_ARM, SPEC_ARM):
        sweep, alone = _sweep(packet, arm), packet.arm(arm).server_values
        rows = sweeps[arm]["rows"]
        assert [r["level"] for r in rows] == [lv.label for lv in sweep.levels]
        for row, level in zip(rows, sweep.levels, strict=True):
            assert row["aggregate_tok_s"] == float(fmt(level.aggregate_tok_s))
            assert row["per_user_tok_s"] == float(fmt(level.per_user_tok_s or 0))
            assert row["ttft_p99_ms"] == float(fmt(level.ttft.p99_ms if level.ttft else 0))
            assert row["goodput_pct"] == float(fmt(level.goodput(sweep.slo) * 100, 1))
            assert row["identical"] == level.identical and row["usable"] == level.usable(sweep.lag_bound_ms, alone)
            assert (row["flag"] is not None) == (level.label == {SPEC_ARM: LOAD_DIVERGES, ORACLE_ARM: LOAD_LAGS}[arm])
        projected = [r["measured_over_projected"] for r in rows]
        assert all(p is not None for p in projected) == (arm == ORACLE_ARM)


def test_a_family_without_load_sweeps_still_says_not_measured(soup) -> None:
    section = soup("models/fixture-7b/index.html").select_one("#concurrency")
    assert section.select_one("#load") is None
    empty = soup("models/empty-1b/index.html").select_one("#concurrency .gap")
    assert empty is not None and "not measured" in empty.get_text()


def test_an_imported_curve_is_speed_only_and_says_so(soup, screened) -> None:
    series = f"{_series(screened, ORACLE_ARM)} (screened, speed only)"
    figure = _figure(soup(FAMILY), "load-frontier")
    line = _only(figure, series)
    levels = _sweep(screened, ORACLE_ARM).levels
    assert line["y"] == [float(fmt(lv.aggregate_tok_s)) for lv in sorted(levels, key=lambda lv: lv.per_user_tok_s or 0)]
    page = soup(f"packets/{screened.id}/index.html")
    rows = page.select(f"#load-{ORACLE_ARM}-full tbody tr")
    assert len(rows) == len(levels)
    for row in rows:
        cells = _cells(row)
        assert row["data-identity"] == "not checked" and cells[8] == "not checked"
        assert cells[9] == "not recorded by the source" and cells[10] == "not recorded"
        assert row["data-usable"] == "yes" and "load-flagged" not in row["class"]
    caption = page.select_one(f"#load-{ORACLE_ARM}-full-caption").get_text(" ")
    assert "speed only" in caption and "seed" not in caption


def test_every_link_of_the_load_pages_resolves(load_site, screened) -> None:
    site, packet = load_site
    for path in (FAMILY, f"packets/{packet.id}/index.html", f"packets/{screened.id}/index.html"):
        page = site / path
        for link in internal_links(BeautifulSoup(page.read_text(encoding="utf-8"), "lxml")):
            parts = urlsplit(link)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file(), (path, link)
            if parts.fragment and target.suffix == ".html":
                found = BeautifulSoup(target.read_text(encoding="utf-8"), "lxml").find(id=parts.fragment)
                assert found is not None, (path, link)
