"""Data warnings: what a valid catalog holds that a reader should know, but that does not make it
invalid (a family with no packets, a published arm without its fresh-server pair).

Loading returns them (`Catalog.warnings`); `python -m catalog.verify` and the builder print them
and fail on them under --strict. This module is the one home of their wording: views only show
the gaps they describe.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the builder's command line prints warnings before it imports any model
    from catalog.packet import Packet
    from catalog.recipe import Recipe


def lint(recipes: Mapping[str, Recipe], packets: Mapping[str, Packet]) -> list[str]:
    """Every data warning of a loaded catalog, families first, then packets, each sorted by id."""
    families = {packet.identity.model.slug for packet in packets.values()}
    warnings = [
        f"{slug}: no packets; the family page shows labelled gaps" for slug in sorted(recipes) if slug not in families
    ]
    for packet_id, packet in sorted(packets.items()):
        for arm in packet.arms:
            if arm.state.published and len(arm.server_values) < 2:
                warnings.append(f"{packet_id}: arm {arm.id} is published without a fresh-server pair")
    return warnings


def report(warnings: list[str], strict: bool) -> bool:
    """Print warnings one line each on stderr; True when --strict makes them fatal."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if strict and warnings:
        print(f"error: {len(warnings)} warning(s) and --strict", file=sys.stderr)
        return True
    return False
