"""Rebuild only what changed packets change: the pages `routes.pages_affected_by` names for each
added, re-signed or removed packet are rendered again; every other page is kept, byte for byte,
from the site being replaced. A removed packet changes the pages it changed when it was added:
the manifest records each packet's family, card and the packet it reproduces (`packet_places`).

Only when that is sure to give the bytes a full build gives: the current site is intact (every
file its manifest records is there, none touched since; a stray file is not taken into the new
site, so it does not matter), it was built from the same everything-but-
the-packets (data, templates, code, libraries, options: `stamp.Inputs.context`), on the same
build date, and its manifest recorded what each packet removed since was on. Anything else is a
full build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from builder import routes
from builder.tree import file_sha256
from builder.views.common import SiteContext
from catalog.packets.layout import signature_path
from catalog.store.repository import Catalog


class Was(NamedTuple):
    """What a removed packet was on: its family, its card, the packet it reproduced."""

    slug: str
    hardware: str
    reproduces: str | None


def packet_places(catalog: Catalog) -> dict[str, list[str | None]]:
    """Each packet's family, card and the packet it reproduces, for the manifest (`Was`)."""
    return {i: [p.slug, p.hardware, p.reproduces] for i, p in sorted(catalog.listing.items())}


@dataclass(frozen=True)
class Previous:
    """The site a build replaces, as its manifest records it."""

    out: Path
    files: dict[str, str]
    context: str
    build_date: str
    page_warnings: dict[str, list[str]]
    # sha256 of an input file as this build first read it: through fingerprints, no re-read
    digest: Callable[[Path], str] = field(default=file_sha256, compare=False)
    packets: dict[str, Was] = field(default_factory=dict)  # `packet_places`, as recorded

    @classmethod
    def from_manifest(
        cls, out: Path, recorded: dict[str, object], digest: Callable[[Path], str] = file_sha256
    ) -> Previous | None:
        files, said = recorded.get("files"), recorded.get("page_warnings")
        context, built = recorded.get("context"), recorded.get("build_date")
        if not (isinstance(files, dict) and isinstance(said, dict)):
            return None
        if not (isinstance(context, str) and isinstance(built, str) and context and built):
            return None  # a site from before these were recorded
        warnings = {str(page): [str(w) for w in listed] for page, listed in said.items() if isinstance(listed, list)}
        files = {str(k): str(v) for k, v in files.items()}
        return cls(out, files, context, built, warnings, digest, _packets(recorded.get("packet_places")))


def _packets(recorded: object) -> dict[str, Was]:
    """The manifest's `packet_places`, each entry checked; one not well formed is left out (its
    removal is then a full build)."""
    if not isinstance(recorded, dict):
        return {}
    return {
        str(packet_id): Was(*was)
        for packet_id, was in recorded.items()
        if isinstance(was, list)
        and len(was) == 3
        and all(isinstance(v, str) for v in was[:2])
        and (was[2] is None or isinstance(was[2], str))
    }


def _packet_ids(files: dict[str, str]) -> set[str]:
    return {
        path.removeprefix(f"{routes.PACKETS_FOLDER}/").removesuffix(".json")
        for path in files
        if routes.is_packet_json(path)
    }


def pages_to_render(previous: Previous | None, context: str, ctx: SiteContext) -> set[str] | None:
    """The pages this build must render when the rest can be kept from `previous`; None: all."""
    if previous is None or previous.context != context:
        return None
    if previous.build_date != ctx.build_date.isoformat():
        return None  # every page carries the build date
    catalog = ctx.catalog
    removed = _packet_ids(previous.files) - catalog.listing.keys()
    if not removed <= previous.packets.keys():
        return None  # a site that did not record what they were on
    affected: set[str] = set()
    filtered = {path for path in previous.files if routes.is_filtered_index(path)}
    for packet_id in sorted(removed):
        was = previous.packets[packet_id]
        reproduced = catalog.listing.get(was.reproduces) if was.reproduces else None
        cards = {was.hardware} | ({reproduced.hardware} if reproduced else set())
        affected |= routes.pages_affected_by(
            packet_id, was.slug, sorted(cards), reproduces=was.reproduces, filtered_indexes=filtered
        )
    for packet_id, packet in catalog.listing.items():
        envelope = signature_path(catalog.packet_paths[packet_id])
        signed = previous.digest(envelope) if packet.signed else None
        same = previous.files.get(routes.packet_json(packet_id)) == packet.sha256
        if same and previous.files.get(routes.packet_signature(packet_id)) == signed:
            continue
        original = catalog.listing.get(packet.reproduces) if packet.reproduces else None
        cards = {packet.hardware} | ({original.hardware} if original else set())
        affected |= routes.pages_affected_by(
            packet_id,
            packet.slug,
            sorted(cards),
            reproduces=packet.reproduces,
            filtered_indexes=filtered,
        )
    return affected
