"""Test packets: testkit.samples builds the typed parts (the one packet factory); this module
seals them with the test session's throwaway keys (`seal_parts`) and offers the dict forms tests
edit before sealing (as a forger would).

`measured_draft()` is the unsealed JSON-form dict (to edit), `seal_draft(draft)` seals an edited
one, `measured_packet()` is a sealed Packet; `published_draft()` builds packets without rows.
Keys: `test_key(role)` is created under the session's private XDG_CONFIG_HOME (tests/conftest.py),
and `signed_data(dest)` copies data/ with those keys added to keys.yaml, so a catalog loaded from
it accepts the test packets' signatures.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from catalog.model.packet import Packet, PacketParts
from catalog.packets.seal import Sealed, seal
from catalog.packets.signing import HostKey, host_key
from catalog.recipes.hardware import HardwareFile
from catalog.recipes.overlay import load_overlay
from catalog.recipes.recipe import Recipe
from catalog.store.documents import load_file
from testkit.samples import (
    DATA,
    N_TOKENS,
    ORACLE_ARM,
    SPEC_ARM,
    canary_set,
    identity,
    make_row,
    make_rows,
    make_server,
    measured_parts,
    published_parts,
    strict_suite,
    token_ids,
    workload,
)
from testkit.samples import published_arm as published_arm_parts

__all__ = [
    "DATA",
    "N_TOKENS",
    "ORACLE_ARM",
    "SPEC_ARM",
    "canary_set",
    "identity",
    "make_row",
    "make_rows",
    "make_server",
    "strict_suite",
    "token_ids",
    "workload",
]

REPO = DATA.parent
UNSEALED = ("schema_version", "state")


@cache
def catalog_recipe(slug: str) -> Recipe:
    """data/models/<slug>.yaml as the catalog loads it: with its overlay (variants, facts) merged."""
    recipe = load_file(Recipe, DATA / "models" / f"{slug}.yaml")
    overlay = DATA / "overlays" / f"{slug}.yaml"
    if not overlay.exists():
        return recipe
    hardware = load_file(HardwareFile, DATA / "hardware.yaml").hardware
    return load_overlay(overlay, {slug: recipe}, hardware)


def test_key(role: str = "measurer") -> HostKey:
    return host_key(role=role)


def other_lab_key() -> HostKey:
    """A second measurer key, another lab's: what a reproduction that counts toward a grade is signed with."""
    return host_key(role="measurer", config_dir=test_key().path.parent / "other-lab")


def session_key_entries() -> str:
    """The keys.yaml entries of the session's measurer and importer test keys, and another lab's."""
    keys = [(test_key(role), f"test session ({role})") for role in ("measurer", "importer")]
    keys.append((other_lab_key(), "test session (another lab's measurer)"))
    return "".join(key.keys_yaml_entry(owner, dated=False) for key, owner in keys)


def keys_yaml() -> str:
    """A test catalog's keys.yaml: its throwaway keys are undated (they vouch for any day)."""
    return "schema_version: 1\ntest_catalog: true\nkeys:\n" + session_key_entries()


def signed_data(dest: Path) -> Path:
    """A copy of data/ whose keys.yaml lists the test keys; returns `dest`."""
    shutil.copytree(DATA, dest, dirs_exist_ok=True)
    (dest / "keys.yaml").write_text(keys_yaml(), encoding="utf-8")
    return dest


def key_for(provenance: str) -> HostKey:
    return test_key("measurer" if provenance == "measured" else "importer")


def seal_parts(parts: PacketParts, *, signed: bool = True, key: HostKey | None = None) -> Sealed:
    """Seal with `key`, else the test key of the packet's role (measurer or importer), or unsigned
    (a local build's packet)."""
    return seal(parts, (key or key_for(parts.provenance.kind)) if signed else None)


def draft_of(document: dict[str, Any]) -> dict[str, Any]:
    """A JSON-form packet, sealed before or not, without what sealing derives (its states): the
    draft a forger edits and seals again."""
    body = {k: v for k, v in document.items() if k not in (*UNSEALED, "id", "sha256")}
    body["arms"] = [{k: v for k, v in arm.items() if k != "state"} for arm in document["arms"]]
    return body


def sealed(draft: dict[str, Any], *, signed: bool = True, key: HostKey | None = None) -> Sealed:
    """Seal a JSON-form dict, sealed before or not: stored states are dropped and derived again."""
    return seal_parts(PacketParts.model_validate(draft_of(draft)), signed=signed, key=key)


def seal_draft(draft: dict[str, Any], *, signed: bool = True, key: HostKey | None = None) -> Packet:
    return sealed(draft, signed=signed, key=key).packet


def measured_draft(**kw: Any) -> dict[str, Any]:
    return measured_parts(**kw).model_dump(mode="json")


def measured_packet(**kw: Any) -> Packet:
    return seal(measured_parts(**kw), test_key("measurer")).packet


def published_arm(
    arm_id: str,
    values: Sequence[float],
    *,
    tp: int = 1,
    spec_depth: int = 0,
    gates: Sequence[tuple[str, int | None, int, bool]] = (),
) -> dict[str, Any]:
    return published_arm_parts(arm_id, values, tp=tp, spec_depth=spec_depth, gates=gates).model_dump(mode="json")


def published_draft(
    arms: list[dict[str, Any]], *, provenance: str = "imported", title: str = "imported campaign"
) -> dict[str, Any]:
    from catalog.model.packet import ArmParts

    typed = [ArmParts.model_validate({k: v for k, v in a.items() if k != "state"}) for a in arms]
    return published_parts(typed, provenance=provenance, title=title).model_dump(mode="json")
