"""Sealing, reading and writing packets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from catalog.canonical import pretty_json
from catalog.errors import CatalogError
from catalog.files import write_file
from catalog.loading import read_document, validate_as, validation_error
from catalog.packet import Packet, packet_hash, packet_id

_PLACEHOLDER_HASH = "0" * 64


def seal(draft: dict[str, Any]) -> Packet:
    """Validate a packet's content, then stamp its hash and id. `draft` has no id or sha256."""
    unsealed = Packet.model_validate({**draft, "id": "unsealed", "sha256": _PLACEHOLDER_HASH})
    digest = packet_hash(unsealed.model_dump(mode="json"))
    model = unsealed.identity.model
    return unsealed.model_copy(update={"sha256": digest, "id": packet_id(model.slug, model.quantization, digest)})


def made_from(source: Path, error: ValidationError) -> CatalogError:
    """An importer's input that validated but makes an invalid packet: the error names the input
    file and the packet field, instead of a pydantic traceback."""
    problem = validation_error(error, source, None)
    return CatalogError(f"the packet made from it is invalid: {problem.message}", file=source, field=problem.field)


def packet_json(packet: Packet) -> str:
    return pretty_json(packet.model_dump(mode="json"))


def write_packet(packet: Packet, directory: Path) -> Path:
    path = directory / f"{packet.id}.json"
    write_file(path, packet_json(packet))
    return path


def read_packet(path: Path) -> Packet:
    """Load and check the seal: the hash re-computes, the id derives from it, the name is the id."""
    text, data = read_document(path)
    packet = validate_as(Packet, data, path, text)
    actual = packet.content_hash()
    if actual != packet.sha256:
        raise CatalogError(
            f"content does not match its hash (stored {packet.sha256[:12]}..., computed {actual[:12]}...): "
            "the file was edited after sealing",
            file=path,
            field="sha256",
        )
    if packet.id != packet.expected_id():
        raise CatalogError(f"id should be {packet.expected_id()!r}", file=path, field="id")
    if path.name != f"{packet.id}.json":
        raise CatalogError(f"file name should be {packet.id}.json", file=path, field="id")
    return packet
