"""Every page of the site, declared where it is made with what it depends on (pages.py): a
family's own pages (its page and its packets' pages, made where its packets are held) and the
site's (recipes, index and filters, hardware, methodology, 404), made from every packet's listing
and every family's index card. Also the build date, which every page shows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from functools import cache, partial

from builder import routes
from builder.pages import ANY_PACKET, Context, Page, card_key, family_key, packet_key, view_key
from builder.seo import family_jsonld
from builder.views.common import FAMILIES_PER_PAGE, SiteContext, page_numbers
from builder.views.family import FamilyView
from builder.views.hardware import hardware_cards, hardware_pages, listed_on_card
from builder.views.index import FamilyCard, IndexView, listings
from builder.views.methodology import methodology_view
from builder.views.packet import heading, packet_view
from builder.views.recipe import NO_EVIDENCE, RecipeEvidence, recipe_view
from catalog.errors import CatalogError
from catalog.model.packet import Packet
from catalog.recipes.recipe import Recipe


def build_date(recipes: Mapping[str, Recipe], created: list[datetime | None], environ: Mapping[str, str]) -> date:
    """SOURCE_DATE_EPOCH when set; otherwise the newest date the inputs carry (the recipes' and the
    packets' `created`), so two builds of the same inputs agree without the variable."""
    epoch = environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch:
        try:
            return datetime.fromtimestamp(int(epoch), tz=UTC).date()
        except (ValueError, OverflowError, OSError):
            raise CatalogError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, not {epoch!r}") from None
    dates = [r.meta.date_updated for r in recipes.values()] + [c.date() for c in created if c]
    return max(dates, default=date(1970, 1, 1))


def family_pages(view: FamilyView, packets: list[Packet], ctx: SiteContext) -> list[Page]:
    """A family's page and each of its packets' pages: a packet page shows the packet and the
    packets reproducing it (its grade, its "reproduced by" links), which are of its family."""
    family = Page(
        routes.family_page(view.slug),
        "family.html",
        {"view": view, "jsonld": family_jsonld(view, packets, ctx)},
        view.title,
        view.description,
        frozenset({family_key(view.slug)}),
    )
    return [family] + [
        Page(
            routes.packet_page(packet.id),
            "packet.html",
            partial(_view, packet_view, packet, ctx),
            heading(packet, ctx),
            f"Evidence packet {packet.id}",
            frozenset({packet_key(packet.id)}),
        )
        for packet in sorted(packets, key=lambda p: p.id)
    ]


def _view(make: Callable[..., object], *args: object) -> Context:
    """A page's view, made where the page is rendered, so its cost is the page's."""
    return {"view": make(*args)}


def site_pages(
    ctx: SiteContext, cards: Mapping[str, FamilyCard], index: IndexView, evidence: Mapping[str, RecipeEvidence]
) -> list[Page]:
    """Every page but the families': a listing of families depends on its view, the hardware index on
    any packet, a recipe page on its family's (its configurations list packets, its docker command pins the
    image a packet recorded, its energy costs and command differences (`evidence`, by family) come from its packets), a
    card's page on the packets measured on it."""
    catalog = ctx.catalog
    every = frozenset({ANY_PACKET})
    found = [
        *[
            Page(
                path,
                "index.html",
                {"view": view},
                "Choose a model"
                + (f": {view.chosen_words}" if view.chosen else "")
                + (f" (page {view.pager.number})" if view.pager else ""),
                f"Every model family with a result for {view.chosen_words}, each with its best matching result."
                if view.chosen  # the index filtered on one value
                else "Honest LLM serving performance: every number from a sealed evidence packet.",
                frozenset({view_key(path)}),
            )
            for path, view in listings(index).items()
        ],
        Page(
            routes.METHODOLOGY,
            "methodology.html",
            partial(_view, methodology_view),
            "Methodology",
            "How every number is measured, gated, graded and chosen.",
        ),
        Page(
            routes.HARDWARE_INDEX,
            "hardware_index.html",
            lambda: {"cards": hardware_cards(catalog)},
            "Hardware",
            "Cards, memory and bandwidth, each figure with its source.",
            every,
        ),
        Page(routes.NOT_FOUND, "404.html", {"link_root": ctx.site_root()}, "Not found", "This page does not exist."),
    ]
    for slug, recipe in sorted(catalog.recipes.items()):
        found.append(
            Page(
                routes.recipe_page(slug),
                "recipe.html",
                partial(_view, recipe_view, recipe, ctx, evidence.get(slug, NO_EVIDENCE)),
                f"{recipe.meta.title} recipe",
                recipe.meta.description,
                frozenset({family_key(slug)}),
            )
        )
    for hw_id, hw in sorted(catalog.hardware.items()):
        views = cache(partial(hardware_pages, hw, ctx, cards))  # made for the first of its pages rendered
        listed = listed_on_card(catalog, hw_id)
        for number in page_numbers(listed):
            found.append(
                Page(
                    routes.hardware_page(hw_id, number),
                    "hardware.html",
                    partial(_page_of, views, routes.hardware_page(hw_id, number)),
                    hw.name + (f" (page {number})" if listed > FAMILIES_PER_PAGE else ""),
                    f"{hw.name}: specs and results",
                    frozenset({card_key(hw_id)}),
                )
            )
    return found


def _page_of(views: Callable[[], Mapping[str, object]], path: str) -> Context:
    return {"view": views()[path]}
