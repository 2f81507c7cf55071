"""How a packet file is verified: the one function every reader calls (`verify`).

In order: the file is no larger than a packet may be (catalog/checks/bounds.py: refused unread)
and is read as bytes (a regular file only); its content validates as a schema-2 packet with
strict types; the bytes are exactly the canonical form of that content
(catalog/packets/seal.py); its name is the id its digest gives; its signature is by a key of
data/keys.yaml with the role its provenance needs, valid on the day the packet is judged as of
(catalog/packets/signing.py, catalog/checks/dates.py); then its figures are derived again from
its raw rows (catalog/checks/evidence.py) and checked against each other, time, independence,
workload and bounds (catalog/checks/consistency.py); and, given data/ as loaded (`reference`),
what it claims against data/ (its model's facts, physics on its card, its identity, its suite:
catalog/checks/cross_check.py), on the whole packet. Every reader (`make verify`, the builder, a
local `--allow-unsigned` build) reads packets through catalog/store/reading.py, which calls
`verify` with data/; nothing of a packet is cached, so each is verified whole on every read. A
signature says who vouches, never that the content is possible: none of these checks is skipped
for a signed packet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from catalog.checks.bounds import size_problem
from catalog.checks.consistency import packet_problems
from catalog.checks.cross_check import Reference, cross_check, located
from catalog.checks.dates import signed_day
from catalog.checks.evidence import evidence_problems
from catalog.errors import CatalogError, CatalogErrors
from catalog.files import read_bytes
from catalog.model.packet import Packet, PacketSeal, packet_id
from catalog.packets.canonical import sha256_hex
from catalog.packets.keys import KeyRing
from catalog.packets.layout import signature_path
from catalog.packets.seal import packet_bytes
from catalog.packets.signing import signer_key_id, verify_packet_signature
from catalog.store.documents import parse_json, reject_lone_surrogates, validation_error

MIGRATE_HINT = "schema 1: run `python -m catalog migrate` to re-seal it as schema 2"


@dataclass(frozen=True)
class Verified:
    """A packet whose every check passed."""

    packet: Packet


@dataclass(frozen=True)
class Refused:
    """Why a packet file is refused: every problem found, each naming the file and the field; the
    packet as read when its bytes, name and signature held but what it says did not. `problems`
    are the packet's own; `against_data` what it claims that data/ contradicts (kept apart: a
    second copy of a packet reports only the first)."""

    problems: list[CatalogError]
    packet: Packet | None = None
    against_data: list[CatalogError] = field(default_factory=list)


def verify(
    path: Path,
    keys: KeyRing | None = None,
    *,
    allow_unsigned: bool = False,
    now: datetime | None = None,
    signatures: bool = True,
    reference: Reference | None = None,
    read: Staged | None = None,
) -> Verified | Refused:
    """Read one packet and check everything it says: on its own, and, with `reference` (data/ as
    loaded), against data/ (catalog/checks/cross_check.py), always on the whole packet (its every
    row: the floors and the vocabulary read them). The costly part of loading, independent of
    every other packet. `signatures` False checks no signature: only where data/keys.yaml failed to
    load (that one error fails the load; every packet's signature error would repeat it). `read`:
    its bytes and its signature's, as the caller read them (the builder: from the copies it
    publishes, their size checked before they were read); `path` still names the file."""
    try:
        packet = read_packet(
            path, (keys or KeyRing.empty()) if signatures else None, allow_unsigned=allow_unsigned, read=read
        )
    except CatalogErrors as many:
        return Refused(many.errors)
    except CatalogError as error:
        return Refused([error])
    evidence = evidence_problems(packet) if packet.provenance.kind == "measured" else []
    reported = {where for where, _ in evidence}  # a gate evidence cannot pair is not reported twice
    consistency = [p for p in packet_problems(packet, now or datetime.now(UTC)) if p[0] not in reported]
    problems = located([*evidence, *consistency], path)
    against_data = cross_check(packet, path, reference) if reference is not None else []
    return Refused(problems, packet, against_data) if problems or against_data else Verified(packet)


@dataclass(frozen=True)
class Staged:
    """A packet's bytes and its signature envelope's (None: there is none), read by the caller."""

    data: bytes
    envelope: bytes | None


def read_packet(
    path: Path, keys: KeyRing | None, *, allow_unsigned: bool = False, read: Staged | None = None
) -> Packet:
    """The packet a file holds, its bytes checked: schema 2, canonical bytes, the name its digest
    gives, and a signature by a known key of the right role (`keys` None checks no signature:
    migration and tests of the format only). `verify` calls it, then checks the content."""
    if read is None:
        check_size(path)
    data = read.data if read is not None else read_bytes(path)
    packet = _validated(data, path)
    canonical = packet_bytes(packet, as_read=True)
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
    signer = _check_signature(packet, path, digest, keys, allow_unsigned, read) if keys is not None else None
    host = signer if keys is not None and signer in keys.host_ids else None
    listed = keys.by_id().get(signer) if keys is not None and signer is not None and not host else None
    packet._seal = PacketSeal(
        sha256=digest,
        id=ident,
        signed_by=None if host else signer,
        host_key=host,
        signed_owner=listed.owner_key if listed is not None else None,
    )
    return packet


def check_size(path: Path) -> None:
    """Refuse a file larger than a packet may be before a byte of it is read (catalog/checks/bounds.py)."""
    try:
        size = path.stat().st_size
    except OSError as error:
        raise CatalogError(f"cannot read: {error.strerror}", file=path) from None
    too_large = size_problem(size)
    if too_large is not None:
        raise CatalogError(too_large, file=path, field="file")


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


def _check_signature(
    packet: Packet, path: Path, digest: str, keys: KeyRing, allow_unsigned: bool, read: Staged | None
) -> str | None:
    envelope_path = signature_path(path)
    absent = read.envelope is None if read is not None else not (envelope_path.exists() or envelope_path.is_symlink())
    if absent:
        if allow_unsigned:
            return None
        raise CatalogError(
            f"unsigned: no {envelope_path.name} beside it (a local build may pass --allow-unsigned)",
            file=path,
            field="signature",
        )
    envelope = read.envelope if read is not None and read.envelope is not None else read_bytes(envelope_path)
    if allow_unsigned and signer_key_id(envelope, envelope_path) not in keys.by_id():
        return None  # this host's own key, not listed yet: a local packet like an unsigned one
    role = "measurer" if packet.provenance.kind == "measured" else "importer"
    return verify_packet_signature(
        envelope, digest, path.name, keys, role=role, file=envelope_path, made_on=signed_day(packet)
    ).id
