"""Search and sharing: the JSON-LD Dataset of a family page, and sitemap.xml."""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from builder import routes
from builder.views.common import SiteContext
from builder.views.family import FamilyView


def family_jsonld(view: FamilyView, ctx: SiteContext) -> dict[str, Any]:
    data: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": "Dataset",
        "name": f"{view.title} serving performance",
        "description": view.description or f"Serving measurements of {view.title}",
        "keywords": ["LLM serving", "vLLM", "decode throughput", "speculative decoding", view.title],
        "dateModified": ctx.build_date.isoformat(),
        "variableMeasured": ["decode tokens per second", "time to first token (ms)", "aggregate tokens per second"],
        "measurementTechnique": "fresh-server pairs over a fixed prompt suite with token-exact oracle gates",
        "isBasedOn": [p.id for p in view.packets],
        "distribution": [
            {
                "@type": "DataDownload",
                "encodingFormat": "application/json",
                "contentUrl": ctx.absolute(view.api_href)
                or routes.relative(routes.family_page(view.slug), view.api_href),
            }
        ],
    }
    if view.provider:
        data["creator"] = {"@type": "Organization", "name": view.provider}
    url = ctx.absolute(routes.family_folder(view.slug))
    if url:
        data["url"] = url
    return data


def sitemap(paths: list[str], ctx: SiteContext) -> bytes:
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">']
    for path in sorted(paths):
        loc = ctx.absolute(path) or path
        lines.append(f"  <url><loc>{escape(loc)}</loc><lastmod>{ctx.build_date.isoformat()}</lastmod></url>")
    lines.append("</urlset>")
    return ("\n".join(lines) + "\n").encode("utf-8")
