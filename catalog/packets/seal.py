"""Sealing, reading and writing packets: the one place their bytes are made and checked.

Canonical form (what `packet_bytes` writes and `read_packet` demands): the packet's
`model_dump(mode="json")` encoded by catalog.packets.canonical.canonical_json (keys sorted, no
whitespace, UTF-8 unescaped, floats in Python's shortest round-trip repr, integers plain, no
NaN), then one newline; token ids and times are base64 text (catalog/model/arrays.py). A file whose
bytes differ from that form of its own content is refused, so a value can never be read one way
and hashed another, and no field can be coerced ("false" for false, 1 for 1.0). The digest is
sha256 of the file's bytes. tests/catalog/test_packet_format.py holds a golden vector.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from catalog.errors import CatalogError
from catalog.files import write_file
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
from catalog.packets.keys import KeyRing
from catalog.packets.layout import signature_path
from catalog.packets.signing import HostKey, sign_packet, signer_key_id, verify_packet_signature
from catalog.store.documents import parse_json, reject_lone_surrogates, validation_error

MIGRATE_HINT = "schema 1: run `python -m catalog migrate` to re-seal it as schema 2"


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


def packet_bytes(packet: Packet) -> bytes:
    return canonical_json(packet.model_dump(mode="json")) + b"\n"


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


def read_bytes(path: Path) -> bytes:
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block the read for ever
            raise CatalogError("not a regular file", file=path)
        return path.read_bytes()
    except OSError as error:
        raise CatalogError(f"cannot read: {error.strerror}", file=path) from None


def read_packet(path: Path, keys: KeyRing | None, *, allow_unsigned: bool = False) -> Packet:
    """Load and check a packet file: schema 2, canonical bytes, the name its digest gives, and a
    signature by a known key of the right role (`keys` None checks no signature: migration and
    tests of the format only)."""
    data = read_bytes(path)
    packet = _validated(data, path)
    canonical = packet_bytes(packet)
    if canonical != data:
        raise CatalogError(_first_difference(canonical, data), file=path)
    digest = sha256_hex(data)
    ident = packet_id(packet.identity.model.slug, packet.identity.model.quantization, digest)
    if path.name != f"{ident}.json":
        raise CatalogError(
            f"file name should be {ident}.json (the id its bytes hash to): the file was edited or renamed",
            file=path,
            field="id",
        )
    signer = _check_signature(packet, path, digest, keys, allow_unsigned) if keys is not None else None
    packet._seal = PacketSeal(sha256=digest, id=ident, signed_by=signer)
    return packet


def _validated(data: bytes, path: Path) -> Packet:
    try:
        return Packet.model_validate_json(data, strict=True)
    except ValidationError as error:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise CatalogError(f"not UTF-8 text ({bad.reason} at byte {bad.start})", file=path) from None
        document = parse_json(text, path)  # a syntax error is reported as such, with its line
        reject_lone_surrogates(document, path, text)  # pydantic's parser says only "Invalid JSON"
        if isinstance(document, dict) and document.get("schema_version") == 1:
            raise CatalogError(MIGRATE_HINT, file=path, field="schema_version") from None
        raise validation_error(error, path, text) from None


def _first_difference(expected: bytes, actual: bytes) -> str:
    at = next((i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b), None)
    if at is None:
        at = min(len(expected), len(actual))
    want = expected[max(0, at - 20) : at + 20].decode("utf-8", errors="replace")
    found = actual[max(0, at - 20) : at + 20].decode("utf-8", errors="replace")
    return (
        f"not in canonical form at byte {at} (expected {want!r}, found {found!r}): the bytes must be exactly "
        "what sealing writes, so no value can be read one way and hashed another"
    )


def _check_signature(packet: Packet, path: Path, digest: str, keys: KeyRing, allow_unsigned: bool) -> str | None:
    envelope_path = signature_path(path)
    if not envelope_path.exists() and not envelope_path.is_symlink():
        if allow_unsigned:
            return None
        raise CatalogError(
            f"unsigned: no {envelope_path.name} beside it (a local build may pass --allow-unsigned)",
            file=path,
            field="signature",
        )
    envelope = read_bytes(envelope_path)
    if allow_unsigned and signer_key_id(envelope, envelope_path) not in keys.by_id():
        return None  # this host's own key, not listed yet: a local packet like an unsigned one
    role = "measurer" if packet.provenance.kind == "measured" else "importer"
    made_on = packet.created.date() if packet.created else None
    return verify_packet_signature(envelope, digest, path.name, keys, role=role, file=envelope_path, made_on=made_on).id
