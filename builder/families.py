"""Every family's view, made once per content (builder/view_cache.py), and what the rest of the
site needs of it. The index, its filter pages, the hardware pages and the models API need a
family's index card; only its own page needs its whole view (charts, tables, projections: 70 KB a
family at 1000 x 20). So a build holds each family's card, and the whole view is read from the
cache where the family's page is rendered, or made again there if the cache lost it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

from builder.api import family_api, models_entry
from builder.pages import PageCosts
from builder.view_cache import VIEW, ViewCache
from builder.views.common import SiteContext
from builder.views.family import FamilyView, family_view
from builder.views.index import FamilyCard, family_card
from catalog.forked import forked_map
from catalog.recipes.recipe import Recipe
from catalog.store.repository import collector_paused

FAMILIES_PER_WORKER = 16  # a family view costs milliseconds: fewer are not worth a worker


@dataclass(frozen=True)
class Family:
    """A family as the build holds it: its index card, the warnings its view gave, the CPU making
    it took, its JSON API file, and its whole view (`held`; None: in `cache` under `key`)."""

    card: FamilyCard
    quantizations: list[str]  # as the recipe and packets name them (the card holds their label keys)
    said: list[str]
    seconds: float
    api: bytes | None
    held: FamilyView | None = None
    cache: ViewCache | None = None
    key: str | None = None
    api_entry: str | None = None  # its entry of the models API (api.models_entry)

    @property
    def slug(self) -> str:
        return self.card.slug

    def view(self, ctx: SiteContext) -> FamilyView:
        """The whole view: held, read from the cache, or (lost from it) made again, its warnings
        not said twice."""
        if self.held is not None:
            return self.held
        if self.cache is not None and self.key is not None:
            found = self.cache.get(self.key, VIEW)
            if isinstance(found, FamilyView):
                return found
        shared, ctx.warnings = ctx.warnings, []
        try:
            return family_view(self.slug, ctx.catalog.recipes[self.slug], ctx)
        finally:
            ctx.warnings = shared


def family_views(
    ctx: SiteContext, costs: PageCosts | None = None, apis: dict[str, bytes] | None = None, context: str = ""
) -> list[Family]:
    """Every family, on every core when there are many (`costs` gets the CPU they took; `apis`
    each family's JSON API file, made where its view is); each family's warnings are said in
    family order, as one process would say them. With the build's `context` (stamp.Inputs), a
    family made before for the same content is taken from the cache (builder/view_cache.py)."""
    started = time.process_time()
    items = sorted(ctx.catalog.recipes.items())
    cache = ViewCache.for_build(context, ctx.build_date.isoformat(), apis is not None)
    keys = [cache.key(slug, ctx.catalog) if cache is not None else None for slug, _ in items]
    found: dict[int, Family] = {}
    if cache is not None:
        with collector_paused():  # 1,000 cards, all kept until the build ends
            for index, key in enumerate(keys):
                held = cache.get(key) if key is not None else None
                if isinstance(held, Family):
                    found[index] = held
    todo = [i for i in range(len(items)) if i not in found]
    make = partial(_made, ctx, apis is not None, cache)
    work = [(*items[i], keys[i]) for i in todo]
    found.update(zip(todo, forked_map(make, work, per_worker=FAMILIES_PER_WORKER), strict=True))
    made = [found[i] for i in range(len(items))]
    for family in made:
        for warning in family.said:
            ctx.warn(warning)
        if apis is not None and family.api is not None:
            apis[family.slug] = family.api
    if costs is not None:  # counted to the family pages: the views are shared with the index and API
        made_here = sum(made[i].seconds for i in todo)
        costs.add("family", made_here + time.process_time() - started, pages=0)
    return made


def _made(ctx: SiteContext, with_api: bool, cache: ViewCache | None, item: tuple[str, Recipe, str | None]) -> Family:
    """One family, made (in a worker, when there are many); its whole view goes to the cache and
    comes back only when it cannot be kept there."""
    started = time.process_time()
    slug, recipe, key = item
    shared, ctx.warnings = ctx.warnings, []
    try:
        view = family_view(slug, recipe, ctx)
    finally:
        said, ctx.warnings = ctx.warnings, shared
    api = family_api(view, ctx.build_date.isoformat()) if with_api else None
    card = family_card(view, ctx.catalog.hardware)
    entry = models_entry(card) if with_api else None
    family = Family(card, view.quantizations, said, time.process_time() - started, api, view, api_entry=entry)
    if cache is None or key is None or not cache.put(key, view, VIEW):
        return family
    kept = Family(card, view.quantizations, said, family.seconds, api, None, cache, key, entry)
    cache.put(key, kept)
    return kept
