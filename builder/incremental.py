"""Rebuild only what new packets change: the pages `routes.pages_affected_by` names for each added
or re-signed packet are rendered again; every other page is kept, byte for byte, from the site
being replaced.

Only when that is sure to give the bytes a full build gives: the current site is intact (every
file its manifest records is there, none touched since; a stray file is not taken into the new
site, so it does not matter), it was built from the same everything-but-
the-packets (data, templates, code, libraries, options: `stamp.Inputs.context`), on the same
build date, with no warning (a kept page's warnings would not be heard again), and no packet was
removed (its pages' data is gone with it). Anything else is a full build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from builder import routes
from builder.tree import file_sha256
from builder.views.common import SiteContext
from catalog.layout import signature_path


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
        return cls(out, {str(k): str(v) for k, v in files.items()}, context, built, warnings, digest)


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
    if _packet_ids(previous.files) - catalog.packets.keys():
        return None
    affected: set[str] = set()
    filtered = {path for path in previous.files if routes.is_filtered_index(path)}
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
