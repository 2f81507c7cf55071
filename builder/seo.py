"""Search and sharing: the JSON-LD Dataset of a family page, and sitemap.xml."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from builder import routes
from builder.views.common import SiteContext
from builder.views.family import FamilyView
from builder.views.results import GATE_NAMES
from catalog.model.packet import Packet

# Provenance kinds in the order a technique is listed: evidence of this runner first.
_KINDS = ("measured", "imported", "screened")


def variables(packets: Sequence[Packet]) -> list[str]:
    """What the family's packets hold a figure of, among the arms a page may show a figure of
    (withheld ones never): a decode speed, a time to first token (its servers' or the figures its
    source printed), an aggregate speed (a concurrency ladder or a load sweep with a level)."""
    shown = [(p, a) for p in packets for a in p.arms if a.state.has_speed]
    ids = {(p.id, a.id) for p, a in shown}
    held = {
        "decode tokens per second": any(a.decode_tok_s is not None or a.published_figure is not None for _, a in shown),
        "time to first token (ms)": any(a.ttft_ms is not None for _, a in shown),
        "aggregate tokens per second": any(
            (p.id, ladder.arm) in ids and (bool(ladder.concurrency) or ladder.load is not None)
            for p in packets
            for ladder in p.ladders
        ),
    }
    return [name for name, present in held.items() if present]


def techniques(packets: Sequence[Packet]) -> list[str]:
    """How the family's figures were obtained, one line per provenance its packets have: whose runs
    (this runner's, or the named sources'), and the identity gates their arms carry, by name."""
    lines = []
    for kind in _KINDS:
        group = [p for p in packets if p.provenance.kind == kind]
        if not group:
            continue
        gates = sorted({g.gate for p in group for a in p.arms for g in a.gates})
        sources = sorted({p.provenance.source.name for p in group if p.provenance.source is not None})
        who = (
            "measured by this catalog's runner on fresh servers over a fixed prompt suite"
            if kind == "measured"
            else f"figures {kind} from {', '.join(sources) or 'a named source'}, as the source printed them"
        )
        carried = ", ".join(GATE_NAMES.get(g, g) for g in gates)
        lines.append(f"{who}; identity gates carried: {carried}" if gates else f"{who}; no identity gate")
    return lines


def family_jsonld(view: FamilyView, packets: Sequence[Packet], ctx: SiteContext) -> dict[str, Any]:
    """The Dataset of a family page: what it measured and how, generated from its packets
    (`packets`, the family's), never a fixed claim an imported family would inherit."""
    data: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": "Dataset",
        "name": f"{view.title} serving performance",
        "description": view.description or f"Serving performance results of {view.title}",
        "keywords": ["LLM serving", "vLLM", "decode throughput", "speculative decoding", view.title],
        "dateModified": ctx.build_date.isoformat(),
        "variableMeasured": variables(packets),
        "measurementTechnique": techniques(packets),
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
