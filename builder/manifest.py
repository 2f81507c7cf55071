"""site/.catalog-build.json: what the site is, as a file of the site (the same bytes on every
machine): the hash of its inputs, its build date, the sha256 of every other file, how many packets
it publishes and the warnings its build gave."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from builder import routes
from catalog.model.base import StrictModel


class Manifest(StrictModel):
    inputs: str = Field(description="sha256 over every input (data, packets, templates, code, options).")
    context: str = Field(description="The same without the packets: what an incremental rebuild must share.")
    build_date: str = Field(description="The date every page shows.")
    files: dict[str, str] = Field(description="sha256 of every file of the site but this one.")
    packets: int = Field(ge=0, description="How many packets the site publishes.")
    warnings: list[str] = Field(description="The build's warnings, in the order they were said.")

    def to_bytes(self) -> bytes:
        # compact: json's C encoder does not indent, and a site's manifest lists 60,000 files
        return (json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":")) + "\n").encode()


def read_manifest(out: Path) -> Manifest | None:
    """The manifest of the site in `out`; None without one this build can read."""
    try:
        return Manifest.model_validate_json((out / routes.BUILD_MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None


def packets_in_site(out: Path, manifest: Manifest | None) -> int:
    """How many packets the site in `out` publishes: its manifest's count (as read), else the
    packet files it holds (a site without a manifest this build can read); 0 for no site."""
    if manifest is not None:
        return manifest.packets
    folder = out / routes.PACKETS_FOLDER
    return sum(1 for p in folder.glob("*.json") if routes.is_packet_json(f"{routes.PACKETS_FOLDER}/{p.name}"))
