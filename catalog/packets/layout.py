"""How packet files and their signatures are named: stdlib only, so the builder's no-op check
can count packets before the heavy imports."""

from __future__ import annotations

from pathlib import Path

SIGNATURE_SUFFIX = ".dsse.json"


def is_signature(path: Path) -> bool:
    return path.name.endswith(SIGNATURE_SUFFIX)


def signature_path(packet_path: Path) -> Path:
    return packet_path.with_name(packet_path.name.removesuffix(".json") + SIGNATURE_SUFFIX)
