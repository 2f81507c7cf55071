"""The build pipeline, one small step each: load and validate, build views, render, write.

Everything is rendered into memory (path -> bytes) before a single byte is written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path

from builder import TEMPLATES, routes
from builder.api import family_api, models_api
from builder.families import Family, family_views
from builder.incremental import Previous, packet_places, pages_to_render
from builder.output import check_output_folder, differences, swap_in
from builder.pages import Page, PageCosts, render_pages
from builder.seo import family_jsonld, sitemap
from builder.views.common import SiteContext
from builder.views.hardware import hardware_cards, hardware_view
from builder.views.index import IndexView, filtered_index_views, index_view
from builder.views.methodology import methodology_view
from builder.views.packet import packet_view
from builder.views.recipe import recipe_view
from catalog.errors import CatalogError
from catalog.packets.layout import signature_path
from catalog.store.cache import KnownDigest
from catalog.store.repository import Catalog, load_catalog


@dataclass(frozen=True)
class BuildResult:
    """`files`: bytes, or a file to copy verbatim (a packet; a page a worker rendered into
    `scratch`, which the caller removes once the site is published)."""

    files: dict[str, bytes | Path]
    warnings: list[str]
    costs: PageCosts = field(default_factory=PageCosts)
    scratch: Path | None = None
    rendered_in: Path | None = None  # the folder whose files are this build's own pages (movable)
    build_date: str = ""
    page_warnings: dict[str, list[str]] = field(default_factory=dict)  # recorded for incremental rebuilds
    digests: dict[str, str] = field(default_factory=dict)  # sha256 of pages written into `scratch` or kept
    packet_places: dict[str, list[str | None]] = field(default_factory=dict)  # incremental.packet_places
    to_keep: Callable[[], None] | None = None  # what the load leaves for the cache (Catalog.to_keep)


def build_date(catalog: Catalog, environ: dict[str, str] | None = None) -> date:
    """SOURCE_DATE_EPOCH when set; otherwise the newest date the inputs carry, so two builds of
    the same inputs agree without the variable."""
    env = os.environ if environ is None else environ
    epoch = env.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch:
        try:
            return datetime.fromtimestamp(int(epoch), tz=UTC).date()
        except (ValueError, OverflowError, OSError):
            raise CatalogError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, not {epoch!r}") from None
    dates = [r.meta.date_updated for r in catalog.recipes.values()]
    dates += [p.created.date() for p in catalog.listing.values() if p.created]
    return max(dates, default=date(1970, 1, 1))


def _view(make: Callable[..., object], *args: object) -> dict[str, object]:
    """A page's view, built where the page is rendered (a worker), so its cost is the page's."""
    return {"view": make(*args)}


def _packet_context(packet_id: str, ctx: SiteContext) -> dict[str, object]:
    """A packet page shows its prompt rows: its summary is read here, in the worker rendering it."""
    return {"view": packet_view(ctx.catalog.summary(packet_id), ctx)}


def _hardware_cards(ctx: SiteContext) -> dict[str, object]:
    return {"cards": hardware_cards(ctx.catalog)}


def _family_context(family: Family, ctx: SiteContext) -> dict[str, object]:
    """A family page's view, read from the cache in the worker rendering it (builder/families.py)."""
    view = family.view(ctx)
    return {"view": view, "jsonld": family_jsonld(view, ctx)}


def _index(families: list[Family], ctx: SiteContext) -> IndexView:
    return index_view([f.card for f in families], ctx.catalog.hardware, [q for f in families for q in f.quantizations])


def pages(ctx: SiteContext, families: list[Family], index: IndexView) -> list[Page]:
    """Every page; `index`: the index's view (`_index`), which the models API shares."""
    catalog = ctx.catalog
    hardware = catalog.hardware
    found = [
        Page(
            routes.INDEX,
            "index.html",
            {"view": index},
            "Choose a model",
            "Honest LLM serving performance: every number from a sealed evidence packet.",
        ),
        *[
            Page(
                path,
                "index.html",
                {"view": view},
                f"Choose a model: {view.chosen_words}",
                f"Every model family with a result for {view.chosen_words}, each with its best matching result.",
            )
            for path, view in filtered_index_views(index).items()
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
            partial(_hardware_cards, ctx),
            "Hardware",
            "Cards, memory and bandwidth, each figure with its source.",
        ),
        Page(routes.NOT_FOUND, "404.html", {}, "Not found", "This page does not exist."),
    ]
    for family in families:
        found.append(
            Page(
                routes.family_page(family.slug),
                "family.html",
                partial(_family_context, family, ctx),
                family.card.title,
                family.card.description,
            )
        )
    for slug, recipe in sorted(catalog.recipes.items()):
        found.append(
            Page(
                routes.recipe_page(slug),
                "recipe.html",
                partial(_view, recipe_view, recipe, ctx),
                f"{recipe.meta.title} recipe",
                recipe.meta.description,
            )
        )
    for packet_id, listed in sorted(catalog.listing.items()):
        found.append(
            Page(
                routes.packet_page(packet_id),
                "packet.html",
                partial(_packet_context, packet_id, ctx),
                listed.title,
                f"Evidence packet {packet_id}",
            )
        )
    by_slug = {family.slug: family.card for family in families}
    for hw_id, hw in sorted(hardware.items()):
        found.append(
            Page(
                routes.hardware_page(hw_id),
                "hardware.html",
                partial(_view, hardware_view, hw, ctx, by_slug),
                hw.name,
                f"{hw.name}: specs and results",
            )
        )
    return found


def data_files(
    ctx: SiteContext, families: list[Family], index: IndexView, apis: dict[str, bytes] | None = None
) -> dict[str, bytes | Path]:
    """The JSON API (`apis`: family files already made) and the packets with their signatures."""
    stamp = ctx.build_date.isoformat()
    made = apis or {}
    entries = {f.slug: f.api_entry for f in families}
    files: dict[str, bytes | Path] = {routes.MODELS_API: models_api(index, stamp, entries)}
    files.update({routes.family_api(f.slug): made.get(f.slug) or family_api(f.view(ctx), stamp) for f in families})
    for packet_id, path in sorted(ctx.catalog.packet_paths.items()):
        files[routes.packet_json(packet_id)] = path  # copied verbatim: the bytes the digest covers
        if ctx.catalog.listing[packet_id].signed:
            files[routes.packet_signature(packet_id)] = signature_path(path)
    return files


def asset_files(assets: Path) -> dict[str, bytes | Path]:
    return {
        routes.asset(p.relative_to(assets).as_posix()): p.read_bytes() for p in sorted(assets.rglob("*")) if p.is_file()
    }


def build_files(
    data: Path,
    packets: Path,
    *,
    templates: Path = TEMPLATES,
    base_url: str = "",
    allow_unsigned: bool = False,
    host_keys: bool = False,
    use_cache: bool = False,
    scratch: Path | None = None,
    previous: Previous | None = None,
    context: str = "",
    known: KnownDigest | None = None,
) -> BuildResult:
    """Load, view and render everything. Pages rendered by workers are files in `scratch` (the
    caller's folder), or in a temporary folder of their own (`BuildResult.scratch`) when none is
    given, which the caller removes. With `previous` (the site being replaced) and this build's
    `context` (stamp.Inputs.context), pages no new packet affects are kept from it (incremental.py).
    `known`: the sha256 of input files already hashed (stamp.Fingerprints), not read again."""
    costs = PageCosts()
    step = time.perf_counter()
    catalog = load_catalog(
        data,
        packets,
        allow_unsigned=allow_unsigned,
        summaries=True,
        use_cache=use_cache,
        known=known,
        keep_later=True,
        host_keys=host_keys,
    )
    costs.phase("load", step)
    ctx = SiteContext(catalog, build_date(catalog), base_url, warnings=list(catalog.warnings))
    step = time.perf_counter()
    apis: dict[str, bytes] = {}
    families = family_views(ctx, costs, apis, context)
    costs.phase("family views", step)
    index = _index(families, ctx)
    found = pages(ctx, families, index)
    render_only = pages_to_render(previous, context, ctx)
    kept: dict[str, bytes | Path] = {}
    if render_only is not None and previous is not None:
        kept = {p.path: previous.out / p.path for p in found if p.path not in render_only and p.path in previous.files}
        found_to_render = [p for p in found if p.path not in kept]
    else:
        found_to_render = found
    own = scratch is None
    folder = Path(tempfile.mkdtemp(prefix="catalog-pages-")) if scratch is None else scratch
    try:
        step = time.perf_counter()
        rendered, said, digests = render_pages(found_to_render, ctx, templates, folder, costs)
        costs.phase("render", step)
    except BaseException:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if previous is not None:  # a kept page is what the manifest of the site it comes from says
        digests.update({path: previous.files[path] for path in kept})
    page_warnings: dict[str, list[str]] = {}
    for page in found:  # each page's warnings in page order; a kept page's as the site recorded them
        source = previous.page_warnings if previous is not None and page.path in kept else said
        page_warnings[page.path] = source.get(page.path, [])
        for warning in page_warnings[page.path]:
            ctx.warn(warning)
    files: dict[str, bytes | Path] = {**kept, **rendered}
    step = time.perf_counter()
    files.update(data_files(ctx, families, index, apis))
    files.update(asset_files(templates / routes.ASSETS_FOLDER))
    files[routes.SITEMAP] = sitemap([p.path for p in found if p.path != routes.NOT_FOUND], ctx)
    costs.phase("api, assets, sitemap", step)
    if own and not any(isinstance(p, Path) and p.is_relative_to(folder) for p in files.values()):
        shutil.rmtree(folder, ignore_errors=True)
        return BuildResult(
            dict(sorted(files.items())),
            ctx.warnings,
            costs,
            None,
            None,
            ctx.build_date.isoformat(),
            said_by(page_warnings),
            digests,
            packet_places(ctx.catalog),
            catalog.to_keep,
        )
    return BuildResult(
        dict(sorted(files.items())),
        ctx.warnings,
        costs,
        folder if own else None,
        folder,
        ctx.build_date.isoformat(),
        said_by(page_warnings),
        digests,
        packet_places(ctx.catalog),
        catalog.to_keep,
    )


def said_by(page_warnings: dict[str, list[str]]) -> dict[str, list[str]]:
    return {path: said for path, said in sorted(page_warnings.items()) if said}


__all__ = ["BuildResult", "Page", "build_files", "check_output_folder", "differences", "swap_in"]
