"""A loaded catalog's views as a build makes them, for tests of views and of what the pages and
the API make of them (builder/assemble.py makes them where each family's pages are rendered)."""

from __future__ import annotations

import os
from datetime import date

from builder.pages import Page
from builder.site import build_date, family_pages, site_pages
from builder.views.common import SiteContext
from builder.views.family import FamilyView, family_view
from builder.views.index import FamilyCard, IndexView, family_card, index_view
from builder.views.recipe import recipe_evidence
from catalog.store.repository import Catalog


def site_context(catalog: Catalog, when: date | None = None) -> SiteContext:
    created = [listed.created for listed in catalog.listing.values()]
    return SiteContext(catalog, when or build_date(catalog.recipes, created, os.environ))


def family_views(ctx: SiteContext) -> dict[str, FamilyView]:
    return {slug: family_view(slug, recipe, ctx).view for slug, recipe in sorted(ctx.catalog.recipes.items())}


def family_cards(ctx: SiteContext) -> dict[str, FamilyCard]:
    return {slug: family_card(view, ctx.catalog.hardware) for slug, view in family_views(ctx).items()}


def index_of(ctx: SiteContext) -> IndexView:
    views = family_views(ctx)
    cards = [family_card(view, ctx.catalog.hardware) for view in views.values()]
    return index_view(cards, ctx.catalog.hardware, [q for view in views.values() for q in view.quantizations])


def every_page(ctx: SiteContext) -> list[Page]:
    """Every page of the catalog's site, each with what it declares it depends on."""
    views = family_views(ctx)
    cards = {slug: family_card(view, ctx.catalog.hardware) for slug, view in views.items()}
    index = index_view(list(cards.values()), ctx.catalog.hardware, [q for v in views.values() for q in v.quantizations])
    found = site_pages(ctx, cards, index, {slug: recipe_evidence(ctx, slug) for slug in ctx.catalog.recipes})
    for slug, view in views.items():
        found += family_pages(view, ctx.catalog.packets_of(slug), ctx)
    return found
