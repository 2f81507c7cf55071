"""Sealing and writing packets: the one place their bytes are made (catalog/packets/verify.py
is the one place they are checked).

Canonical form (what `packet_bytes` writes and `read_packet` demands): the packet's
`model_dump(mode="json")` encoded by catalog.packets.canonical.canonical_json (keys sorted, no
whitespace, UTF-8 unescaped, floats in Python's shortest round-trip repr, integers plain, no
NaN), then one newline; token ids and times are base64 text (catalog/model/arrays.py). A file whose
bytes differ from that form of its own content is refused, so a value can never be read one way
and hashed another, and no field can be coerced ("false" for false, 1 for 1.0). The digest is
sha256 of the file's bytes. tests/catalog/test_packet_format.py holds a golden vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from catalog.errors import CatalogError
from catalog.files import write_file
from catalog.model.arrays import AS_READ
from catalog.model.packet import (
    SCHEMA_VERSION,
    Arm,
    ArmParts,
    Packet,
    PacketParts,
    PacketSeal,
    State,
    arm_state,
    packet_id,
    packet_state,
)
from catalog.packets.canonical import canonical_json, sha256_hex
from catalog.packets.layout import signature_path
from catalog.packets.signing import HostKey, sign_packet
from catalog.store.documents import validation_error


@dataclass(frozen=True)
class Sealed:
    """A sealed packet with the exact bytes of its file and of its signature envelope."""

    packet: Packet
    data: bytes
    envelope: bytes | None

    @property
    def file_name(self) -> str:
        return f"{self.packet.id}.json"


def seal(parts: PacketParts, key: HostKey | None) -> Sealed:
    """Derive states, encode the canonical bytes, digest, id and signature: every writer's one
    way to make a packet. `key` None makes an unsigned packet, publishable only in local builds."""
    kind = parts.provenance.kind
    arms = [_sealed_arm(kind, arm) for arm in parts.arms]
    body = parts.model_dump(exclude={"arms"})
    packet = Packet.model_validate(
        {**body, "schema_version": SCHEMA_VERSION, "arms": arms, "state": packet_state(kind, arms)}
    )
    data = packet_bytes(packet)
    digest = sha256_hex(data)
    ident = packet_id(packet.identity.model.slug, packet.identity.model.quantization, digest)
    envelope = sign_packet(digest, f"{ident}.json", key) if key is not None else None
    packet._seal = PacketSeal(sha256=digest, id=ident, signed_by=key.key_id if key is not None else None)
    return Sealed(packet, data, envelope)


def _sealed_arm(kind: str, parts: ArmParts) -> Arm:
    state = arm_state(kind, parts)
    reason = parts.withheld_reason
    if state == State.WITHHELD and not reason:
        reason = "; ".join(g.summary for g in parts.failed_gates)
    return Arm.model_validate({**parts.model_dump(), "withheld_reason": reason, "state": state})


def parts_of(packet: Packet) -> PacketParts:
    """A packet's parts again, to derive a changed packet from it (a reproduction, a migration)."""
    arms = [ArmParts.model_validate(a.model_dump(exclude={"state"})) for a in packet.arms]
    return PacketParts.model_validate({**packet.model_dump(exclude={"schema_version", "state", "arms"}), "arms": arms})


def packet_bytes(packet: Packet, *, as_read: bool = False) -> bytes:
    """The packet's canonical bytes. `as_read`: a packet just validated from the bytes being
    checked, whose arrays are written back as the text they were read from (catalog/model/arrays.py)."""
    return canonical_json(packet.model_dump(mode="json", context=AS_READ if as_read else None)) + b"\n"


def made_from(source: Path, error: ValidationError) -> CatalogError:
    """An importer's input that validated but makes an invalid packet: the error names the input
    file and the packet field, instead of a pydantic traceback."""
    problem = validation_error(error, source, None)
    return CatalogError(f"the packet made from it is invalid: {problem.message}", file=source, field=problem.field)


def write_packet(sealed: Sealed, directory: Path) -> Path:
    """The signature first: a crash between the two writes leaves no unsigned packet behind."""
    path = directory / sealed.file_name
    if sealed.envelope is not None:
        write_file(signature_path(path), sealed.envelope)
    write_file(path, sealed.data)
    return path
