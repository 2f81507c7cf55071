"""Hardware views: one row per family on a card, the index's pick, and a row without a figure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from builder.routes import packet_page
from builder.views.common import SiteContext
from builder.views.hardware import NO_PICK_REASON, hardware_cards, hardware_view
from builder.views.index import best_pick
from catalog.store.repository import load_catalog
from tests.builder.factory import write_catalog
from tests.builder.made import family_cards, site_context


def _context(tmp_path: Path) -> SiteContext:
    return site_context(load_catalog(*write_catalog(tmp_path)))


def test_a_family_row_is_the_index_pick_for_the_card(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    families = family_cards(ctx)
    view = hardware_view(ctx.catalog.hardware["arc_pro_b70"], ctx, families)
    [row] = view.families
    pick = best_pick(families["fixture-7b"], {"hw": "arc_pro_b70"})
    assert pick is not None and pick.hardware_id == "arc_pro_b70"
    assert (row.value, row.evidence.href, row.state, row.quantization) == (
        pick.value,
        pick.href,
        pick.state,
        pick.quant_label,
    )
    assert row.packets.value == 2 and view.packet_count.value == 2 and row.reason is None


def test_a_family_without_a_qualified_result_links_its_best_evidenced_packet(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    families = {slug: replace(card, picks=[], pick_for={}) for slug, card in family_cards(ctx).items()}
    view = hardware_view(ctx.catalog.hardware["arc_pro_b70"], ctx, families)
    [row] = view.families
    measured = next(p for p in ctx.catalog.packets.values() if p.state.value == "measured")
    assert row.value is None and row.cards is None and row.reason == NO_PICK_REASON
    assert (row.state, row.evidence.href, row.evidence.label) == ("measured", packet_page(measured.id), measured.id)
    assert row.packets.value == 2


def test_a_card_without_packets_has_no_rows_and_the_index_counts_each_card(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    families = family_cards(ctx)
    assert hardware_view(ctx.catalog.hardware["h100_sxm"], ctx, families).families == []
    counts = {c.id: (c.families.value, c.packets.value) for c in hardware_cards(ctx.catalog)}
    assert counts == {h: (1, 2) if h == "arc_pro_b70" else (0, 0) for h in ctx.catalog.hardware}


def test_a_cards_figures_read_as_its_source_gives_them(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    for card in ctx.catalog.hardware.values():
        specs = {fact.label: str(fact.value) for fact in hardware_view(card, ctx, {}).specs}
        if card.compute_tops_int8 is not None:
            figure = card.compute_tops_int8.value  # 197 in data/hardware.yaml is 197 TOPS, not 197.00
            assert specs["INT8 compute"] == (str(int(figure)) if float(figure).is_integer() else repr(figure))
        assert not any(value.endswith(".00") for value in specs.values()), specs
