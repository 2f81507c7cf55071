"""A withheld arm's ladders are never rendered as measured: an arm that failed G3 carries a
concurrency point ("8 users · 540.24 aggregate tok/s · identical to oracle: yes") and a load sweep;
on its packet page every figure of them is struck beside the word "withheld", the marker the family
page gives a withheld point (`.withheld-value` holding `<s>`), and its load table on the family
page is marked the same way. The published oracle arm's ladders, in the same packet, carry no
marker (builder/views/load_sweep.py `WithheldNum`, builder/views/arms.py `ladder_views`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag

from builder.cli import run
from catalog.model.packet import ConcurrencyPoint, Ladder
from catalog.packets.seal import write_packet
from testkit.samples import ORACLE_ARM, SPEC_ARM, make_load_sweep, measured_parts, with_load
from tests.catalog.factories import seal_parts, signed_data

WITHHELD_POINT = ConcurrencyPoint(users=8, completion_tokens=8 * 120, wall_s=1.777, identical_to_oracle=True)
HONEST_POINT = ConcurrencyPoint(users=2, completion_tokens=2 * 120, wall_s=2.6, identical_to_oracle=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A catalog of one measured packet whose MTP arm failed G3 (withheld), each arm carrying a
    concurrency ladder and a load sweep; built once. Its site folder and the packet's id."""
    root = tmp_path_factory.mktemp("withheld-ladders")
    data = signed_data(root / "data")
    packets = root / "packets"
    packets.mkdir()
    parts = with_load(
        measured_parts(g3_diverges=True),
        {ORACLE_ARM: make_load_sweep(), SPEC_ARM: make_load_sweep(ms_per_token=12.0)},
    )
    ladders = [
        Ladder(arm=ORACLE_ARM, kind="concurrency", concurrency=[HONEST_POINT]),
        Ladder(arm=SPEC_ARM, kind="concurrency", concurrency=[WITHHELD_POINT]),
        *parts.ladders,
    ]
    sealed = seal_parts(parts.model_copy(update={"ladders": ladders}))
    assert sealed.packet.arm(SPEC_ARM).state.value == "withheld"
    assert sealed.packet.arm(ORACLE_ARM).state.value == "measured"
    write_packet(sealed, packets)
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0
    return out, sealed.packet.id


def _page(site: Path, relative: str) -> BeautifulSoup:
    return BeautifulSoup((site / relative).read_text(encoding="utf-8"), "lxml")


def _ladder_table(page: BeautifulSoup, kind: str, arm: str) -> Tag:
    """The packet page's `kind` ladder table of `arm` (the table after its heading)."""
    section = page.select_one("#ladders")
    assert section is not None
    for heading in section.find_all("h3"):
        link = heading.select_one(f'a[href="#arm-{arm}"]')
        if link is not None and heading.get_text(" ", strip=True).lower().startswith(kind):
            table = heading.find_next("table")
            assert isinstance(table, Tag)
            return table
    raise AssertionError(f"no {kind} ladder of {arm} on the packet page")


def _figure_cells(table: Tag) -> list[Tag]:
    """Every body cell that holds a figure (an absent one reads '—')."""
    cells = [td for td in table.select("tbody td") if td.get_text(strip=True) not in ("", "—")]
    assert cells
    return cells


def _struck(cell: Tag) -> bool:
    """Every figure of the cell sits in `.withheld-value` beside the word, inside <s>."""
    marks = cell.select(".withheld-value")
    if not marks or not all(m.get_text(" ", strip=True).startswith("withheld") and m.s for m in marks):
        return False
    numbers = cell.select("data.num")
    return all(n.find_parent("s") is not None for n in numbers)


def test_the_withheld_arms_concurrency_point_is_struck(built: tuple[Path, str]) -> None:
    site, packet_id = built
    table = _ladder_table(_page(site, f"packets/{packet_id}/index.html"), "concurrency", SPEC_ARM)
    cells = _figure_cells(table)
    assert all(_struck(cell) for cell in cells), [c.decode() for c in cells if not _struck(c)]
    aggregate = table.find("data", attrs={"value": "540.24"})
    assert aggregate is not None and aggregate.find_parent(class_="withheld-value") is not None
    claims = [c for c in cells if c.get_text(" ", strip=True).endswith("yes")]
    assert claims and all(c.select_one(".withheld-value s") for c in claims)  # "identical to oracle: yes"


def test_the_withheld_arms_load_sweep_is_struck_on_the_packet_page(built: tuple[Path, str]) -> None:
    site, packet_id = built
    table = _ladder_table(_page(site, f"packets/{packet_id}/index.html"), "load sweep", SPEC_ARM)
    cells = _figure_cells(table)
    assert all(_struck(cell) for cell in cells), [c.decode() for c in cells if not _struck(c)][:3]


def test_the_withheld_arms_load_table_is_struck_on_the_family_page(built: tuple[Path, str]) -> None:
    site, _ = built
    table = _page(site, "models/qwen3.5-9b/index.html").select_one(f"table#load-{SPEC_ARM}")
    assert table is not None
    cells = _figure_cells(table)
    assert all(_struck(cell) for cell in cells), [c.decode() for c in cells if not _struck(c)][:3]


def test_the_packet_page_says_the_ladders_are_withheld(built: tuple[Path, str]) -> None:
    site, packet_id = built
    section = _page(site, f"packets/{packet_id}/index.html").select_one("#ladders")
    assert section is not None
    headings = [h for h in section.find_all("h3") if h.select_one(f'a[href="#arm-{SPEC_ARM}"]')]
    assert len(headings) == 2 and all(h.select_one(".badge-withheld") for h in headings)


def test_the_published_arms_ladders_carry_no_marker(built: tuple[Path, str]) -> None:
    site, packet_id = built
    page = _page(site, f"packets/{packet_id}/index.html")
    for kind in ("concurrency", "load sweep"):
        table = _ladder_table(page, kind, ORACLE_ARM)
        assert _figure_cells(table) and table.select_one(".withheld-value") is None, kind
    family = _page(site, "models/qwen3.5-9b/index.html").select_one(f"table#load-{ORACLE_ARM}")
    assert family is not None and family.select_one(".withheld-value") is None
