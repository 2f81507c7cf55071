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
    from catalog.recipes.recipe import Recipe
    from catalog.store.listing import Listed


def lint(recipes: Mapping[str, Recipe], listing: Mapping[str, Listed]) -> list[str]:
    """Every data warning of a loaded catalog, families first, then packets, each sorted by id."""
    families = {listed.slug for listed in listing.values()}
    warnings = [
        f"{slug}: no packets; the family page shows labelled gaps" for slug in sorted(recipes) if slug not in families
    ]
    for packet_id, listed in sorted(listing.items()):
        for arm_id in listed.unpaired_arms:
            warnings.append(f"{packet_id}: arm {arm_id} is published without a fresh-server pair")
    return warnings


def report(warnings: list[str], strict: bool) -> bool:
    """Print warnings one line each on stderr; True when --strict makes them fatal."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if strict and warnings:
        print(f"error: {len(warnings)} warning(s) and --strict", file=sys.stderr)
        return True
    return False
