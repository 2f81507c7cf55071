"""The build pipeline, one small step each: load and validate, build views, render, write.

Everything is rendered into memory (path -> bytes) before a single byte is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from builder import TEMPLATES, routes
from builder.api import family_api, models_api
from builder.output import check_output_folder, differences, publish, safe_target
from builder.render import make_environment, render_page
from builder.seo import family_jsonld, sitemap
from builder.views.common import SiteContext
from builder.views.family import FamilyView, family_view
from builder.views.hardware import hardware_view
from builder.views.index import filtered_index_views, index_view
from builder.views.methodology import methodology_view
from builder.views.packet import packet_view
from builder.views.recipe import recipe_view
from catalog.errors import CatalogError
from catalog.layout import signature_path
from catalog.repository import Catalog, load_catalog


@dataclass(frozen=True)
class Page:
    path: str
    template: str
    context: dict[str, object] = field(default_factory=dict)
    title: str = ""
    description: str = ""


@dataclass(frozen=True)
class BuildResult:
    files: dict[str, bytes | Path]
    warnings: list[str]


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
    dates += [p.created.date() for p in catalog.packets.values() if p.created]
    return max(dates, default=date(1970, 1, 1))


def family_views(ctx: SiteContext) -> list[FamilyView]:
    return [family_view(slug, recipe, ctx) for slug, recipe in sorted(ctx.catalog.recipes.items())]


def pages(ctx: SiteContext, families: list[FamilyView]) -> list[Page]:
    catalog = ctx.catalog
    hardware = catalog.hardware
    index = index_view(families, hardware)
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
            {"view": methodology_view()},
            "Methodology",
            "How every number is measured, gated, graded and chosen.",
        ),
        Page(
            routes.HARDWARE_INDEX,
            "hardware_index.html",
            {"cards": [hardware_view(h, ctx) for h in sorted(hardware.values(), key=lambda h: h.name)]},
            "Hardware",
            "Cards, memory and bandwidth, each figure with its source.",
        ),
        Page(routes.NOT_FOUND, "404.html", {}, "Not found", "This page does not exist."),
    ]
    for view in families:
        found.append(
            Page(
                routes.family_page(view.slug),
                "family.html",
                {"view": view, "jsonld": family_jsonld(view, ctx)},
                view.title,
                view.description,
            )
        )
    for slug, recipe in sorted(catalog.recipes.items()):
        found.append(
            Page(
                routes.recipe_page(slug),
                "recipe.html",
                {"view": recipe_view(recipe, ctx)},
                f"{recipe.meta.title} recipe",
                recipe.meta.description,
            )
        )
    for packet_id, packet in sorted(catalog.packets.items()):
        found.append(
            Page(
                routes.packet_page(packet_id),
                "packet.html",
                {"view": packet_view(packet, ctx)},
                packet.title,
                f"Evidence packet {packet_id}",
            )
        )
    for hw_id, hw in sorted(hardware.items()):
        found.append(
            Page(
                routes.hardware_page(hw_id),
                "hardware.html",
                {"view": hardware_view(hw, ctx)},
                hw.name,
                f"{hw.name}: specs and results",
            )
        )
    return found


def render_pages(found: list[Page], ctx: SiteContext, templates: Path) -> dict[str, bytes]:
    env = make_environment(templates)
    site = {"build_date": ctx.build_date.isoformat(), "base_url": ctx.base_url}
    return {
        page.path: render_page(
            env,
            page.template,
            page.path,
            {
                **page.context,
                "site": site,
                "title": page.title,
                "description": page.description,
                "canonical": ctx.absolute(page.path),
            },
        )
        for page in found
    }


def data_files(ctx: SiteContext, families: list[FamilyView]) -> dict[str, bytes | Path]:
    stamp = ctx.build_date.isoformat()
    files: dict[str, bytes | Path] = {routes.MODELS_API: models_api(index_view(families, ctx.catalog.hardware), stamp)}
    files.update({routes.family_api(v.slug): family_api(v, stamp) for v in families})
    for packet_id, path in sorted(ctx.catalog.packet_paths.items()):
        files[routes.packet_json(packet_id)] = path  # copied verbatim: the bytes the digest covers
        if ctx.catalog.packets[packet_id].signed:
            files[routes.packet_signature(packet_id)] = signature_path(path)
    return files


def asset_files(assets: Path) -> dict[str, bytes | Path]:
    return {
        routes.asset(p.relative_to(assets).as_posix()): p.read_bytes() for p in sorted(assets.rglob("*")) if p.is_file()
    }


def build_files(
    data: Path, packets: Path, *, templates: Path = TEMPLATES, base_url: str = "", allow_unsigned: bool = False
) -> BuildResult:
    catalog = load_catalog(data, packets, allow_unsigned=allow_unsigned)
    ctx = SiteContext(catalog, build_date(catalog), base_url, warnings=list(catalog.warnings))
    families = family_views(ctx)
    found = pages(ctx, families)
    files: dict[str, bytes | Path] = {**render_pages(found, ctx, templates)}
    files.update(data_files(ctx, families))
    files.update(asset_files(templates / routes.ASSETS_FOLDER))
    files[routes.SITEMAP] = sitemap([p.path for p in found if p.path != routes.NOT_FOUND], ctx)
    return BuildResult(dict(sorted(files.items())), ctx.warnings)


def check_paths(files: Mapping[str, object], out: Path) -> None:
    for relative in files:
        safe_target(out, relative)


__all__ = ["BuildResult", "build_files", "check_output_folder", "check_paths", "differences", "publish"]
