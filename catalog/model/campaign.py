"""A fleet campaign's cell id (CampaignRef.cell): the one rule the runner (runner/fleet/cells.py)
and the catalog share."""

from __future__ import annotations

from catalog.packets.canonical import canonical_sha256


def cell_id(measures: object) -> str:
    """12 hex digits of the hash of what a cell measures."""
    return canonical_sha256(measures)[:12]
