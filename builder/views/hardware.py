"""Hardware pages: a card's specs with the source of every figure, and one row per model family
with a packet on it (measured, imported, screened or withheld): the family's best published result
there, by the rule the index's card filter uses (builder/views/index.py best_pick), so a page's size
follows the families, not the packets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial

from builder import routes
from builder.format import Num, as_given, num
from builder.views.common import Fact, Link, Pager, SiteContext, page_numbers, page_of
from builder.views.index import FamilyCard, best_pick
from builder.views.results import STATE_LABELS
from catalog.recipes.hardware import Hardware
from catalog.store.listing import Listed
from catalog.store.repository import Catalog

NO_PICK_REASON = "no result on this card qualifies for a figure (two servers, every gate passed)"


@dataclass(frozen=True)
class FamilyRow:
    """One family on the card: its best published result there, or without one its best-evidenced
    packet (no figure); either way the packet the row comes from is linked."""

    family: Link
    evidence: Link
    quantization: str
    cards: Num | None
    state: str
    state_label: str
    value: Num | None
    reason: str | None
    packets: Num


@dataclass(frozen=True)
class RecipeOnCard:
    """A recipe that names the card, and what it says of it (verified, untested, ...)."""

    link: Link
    status: str


@dataclass(frozen=True)
class HardwareView:
    id: str
    name: str
    vendor: str
    platform: str
    generation: str
    specs: list[Fact]
    notes: str | None
    families: list[FamilyRow]
    packet_count: Num
    recipes: list[RecipeOnCard]
    family_count: int = 0  # every family on the card, of which `families` is a page's share
    recipe_count: int = 0  # every recipe naming the card, of which `recipes` is a page's share
    pager: Pager | None = None


@dataclass(frozen=True)
class HardwareCard:
    """A card on the hardware index: names, headline figures and counts, no result rows."""

    id: str
    name: str
    vendor: str
    platform: str
    memory: Num
    bandwidth: Num
    families: Num
    packets: Num


def _memory(hw: Hardware) -> Num:
    return as_given(hw.memory_gb.value, f"GB {hw.memory_type}")


def _bandwidth(hw: Hardware) -> Num:
    return as_given(hw.memory_bandwidth_gb_s.value, "GB/s")


def _specs(hw: Hardware) -> list[Fact]:
    facts = [
        Fact("memory", _memory(hw), hw.memory_gb.source),
        Fact("memory bandwidth", _bandwidth(hw), hw.memory_bandwidth_gb_s.source),
    ]
    if hw.compute_tflops_bf16:
        facts.append(
            Fact("BF16 compute", as_given(hw.compute_tflops_bf16.value, "TFLOPS"), hw.compute_tflops_bf16.source)
        )
    if hw.compute_tops_int8:
        facts.append(Fact("INT8 compute", as_given(hw.compute_tops_int8.value, "TOPS"), hw.compute_tops_int8.source))
    if hw.interconnect:
        ic = hw.interconnect
        facts.append(
            Fact(f"interconnect ({ic.name})", as_given(ic.bandwidth_gb_s.value, "GB/s"), ic.bandwidth_gb_s.source)
        )
    facts.append(Fact("docker image", hw.docker_image or "none", "the image the command builder uses on this card"))
    return facts


def _family_row(slug: str, on_card: list[Listed], view: FamilyCard | None, hw_id: str) -> FamilyRow:
    family = Link(view.title if view else slug, routes.family_page(slug))
    packets = num(len(on_card), 0)
    pick = best_pick(view, {"hw": hw_id}) if view else None
    if pick is not None:
        return FamilyRow(
            family=family,
            evidence=Link(pick.label, pick.href),
            quantization=pick.quant_label,
            cards=num(pick.cards, 0),
            state=pick.state,
            state_label=pick.state_label,
            value=pick.value,
            reason=None,
            packets=packets,
        )
    best = min(on_card, key=lambda p: p.state.rank)  # the first in id order among the best-evidenced
    return FamilyRow(
        family=family,
        evidence=Link(best.id, routes.packet_page(best.id)),
        quantization=best.quantization_label,
        cards=None,
        state=best.state.value,
        state_label=STATE_LABELS[best.state.value],
        value=None,
        reason=NO_PICK_REASON,
        packets=packets,
    )


def _fastest_first(row: FamilyRow) -> tuple[float, str]:
    return (-(row.value.value if row.value else -1.0), row.family.label.lower())


def listed_on_card(catalog: Catalog, hw_id: str) -> int:
    """How far a card's listings run: its families and the recipes naming it, paged together (a
    page holds each one's share), so neither makes a page grow with the catalog."""
    naming = sum(1 for recipe in catalog.recipes.values() if hw_id in recipe.meta.hardware)
    return max(len(catalog.families_on(hw_id)), naming)


def hardware_pages(hw: Hardware, ctx: SiteContext, families: Mapping[str, FamilyCard]) -> dict[str, HardwareView]:
    """A card's page, or its pages when more families ran on it, or more recipes name it, than a
    page holds, by path."""
    whole = hardware_view(hw, ctx, families)
    count, pages = listed_on_card(ctx.catalog, hw.id), {}
    for number in page_numbers(count):
        pager = Pager.of(count, number, partial(routes.hardware_page, hw.id))
        if pager is None:
            pages[routes.hardware_page(hw.id, number)] = whole
            continue
        shown = replace(whole, families=page_of(whole.families, number), recipes=page_of(whole.recipes, number))
        pages[routes.hardware_page(hw.id, number)] = replace(shown, pager=pager)
    return pages


def hardware_view(hw: Hardware, ctx: SiteContext, families: Mapping[str, FamilyCard]) -> HardwareView:
    catalog = ctx.catalog
    on_card = catalog.families_on(hw.id)
    rows = [_family_row(slug, packets, families.get(slug), hw.id) for slug, packets in on_card.items()]
    recipes = [
        RecipeOnCard(Link(recipe.meta.title, routes.recipe_page(slug)), recipe.meta.hardware[hw.id])
        for slug, recipe in sorted(catalog.recipes.items())
        if hw.id in recipe.meta.hardware
    ]
    return HardwareView(
        id=hw.id,
        name=hw.name,
        vendor=hw.vendor,
        platform=hw.platform,
        generation=hw.generation,
        specs=_specs(hw),
        notes=hw.notes,
        families=sorted(rows, key=_fastest_first),
        packet_count=num(sum(map(len, on_card.values())), 0),
        recipes=recipes,
        family_count=len(rows),
        recipe_count=len(recipes),
    )


def hardware_cards(catalog: Catalog) -> list[HardwareCard]:
    """The hardware index's rows, by name: counts looked up in the catalog, no hardware view built."""
    cards = []
    for hw in sorted(catalog.hardware.values(), key=lambda h: h.name):
        on_card = catalog.families_on(hw.id)
        cards.append(
            HardwareCard(
                id=hw.id,
                name=hw.name,
                vendor=hw.vendor,
                platform=hw.platform,
                memory=_memory(hw),
                bandwidth=_bandwidth(hw),
                families=num(len(on_card), 0),
                packets=num(sum(map(len, on_card.values())), 0),
            )
        )
    return cards
