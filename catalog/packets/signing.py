"""Packet signatures: who vouches for a packet's bytes.

A packet's digest proves its bytes did not change; it does not say who produced them. The
measuring host therefore signs the digest with its own Ed25519 key, in a DSSE envelope holding an
in-toto Statement (standard formats that other tools verify too), and the catalog accepts the
packet only if the signing key is listed in data/keys.yaml for that role, at that date.

The private key never enters the repository: it lives in `$XDG_CONFIG_HOME/llm-serving-catalog/`
(default `~/.config/...`), created on first use with mode 0600, or in the PEM file that the
environment variable CATALOG_SIGNING_KEY names (a CI secret, a second host's copy). Encoding,
signing and verifying are securesystemslib's and pyca/cryptography's, never written here.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, NoReturn, cast

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from pydantic import Field
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import UnverifiedSignatureError
from securesystemslib.signer import CryptoSigner

from catalog.errors import CatalogError
from catalog.files import write_file
from catalog.model.base import StrictModel
from catalog.packets.canonical import canonical_json
from catalog.packets.keys import KEYS_FILE, ROLES, KeyEntry, KeyRing, Role, sslib_key_of
from catalog.store.documents import parse_json, validate_as

ENV_KEY = "CATALOG_SIGNING_KEY"
CONFIG_FOLDER = "llm-serving-catalog"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://llm-serving-catalog.invalid/packet-signature/v1"
REPO = Path(__file__).resolve().parents[2]
_SHA256 = re.compile(r"[0-9a-f]{64}")
_BASE64 = r"^[A-Za-z0-9+/]*={0,2}$"


@dataclass(frozen=True)
class HostKey:
    """A private signing key and the role it signs for."""

    signer: CryptoSigner
    role: Role
    path: Path

    @property
    def key_id(self) -> str:
        return self.signer.public_key.keyid

    @property
    def public_hex(self) -> str:
        return cast(str, self.signer.public_key.keyval["public"])

    def keys_yaml_entry(self, owner: str, *, dated: bool = True) -> str:
        """The item to paste under `keys:` in data/keys.yaml (JSON strings are YAML strings).
        Dated, it vouches for packets made from today on; undated, for any (test catalogs)."""
        if not owner.strip():
            raise CatalogError("the key's owner must not be empty", field="owner")
        valid_from = f"    valid_from: {datetime.now(UTC).date().isoformat()}\n" if dated else ""
        return (
            f"  - id: {json.dumps(self.key_id)}\n"
            f"    public_key: {json.dumps(self.public_hex)}\n"
            f"    owner: {json.dumps(owner)}\n"
            f"    role: {self.role}\n" + valid_from
        )

    @classmethod
    def load(cls, path: Path, role: str = "measurer") -> HostKey:
        """The key in a PEM (PKCS#8, unencrypted) file that only its owner may read."""
        _refuse_inside_repo(path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise CatalogError("no such signing key file", file=path) from None
        except OSError as error:
            raise CatalogError(f"cannot read the signing key: {error.strerror}", file=path) from None
        with os.fdopen(fd, "rb") as handle:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise CatalogError("the signing key is not a regular file", file=path)
            if mode & 0o077:
                raise CatalogError(
                    f"the signing key is open to group or others (mode {stat.S_IMODE(mode):o}): chmod 600 it",
                    file=path,
                )
            pem = handle.read()
        try:
            private_key = load_pem_private_key(pem, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise CatalogError("not an unencrypted PEM private key", file=path) from None
        if not isinstance(private_key, Ed25519PrivateKey):
            raise CatalogError("not an Ed25519 private key", file=path)
        return cls(CryptoSigner(private_key), _role(role), path)


def host_key(role: str = "measurer", config_dir: Path | None = None) -> HostKey:
    """This host's key for `role`: from `config_dir` if given, else the PEM file CATALOG_SIGNING_KEY
    names, else `$XDG_CONFIG_HOME/llm-serving-catalog/<role>.pem`, created there on first use."""
    role = _role(role)
    if config_dir is None and os.environ.get(ENV_KEY):
        return HostKey.load(Path(os.environ[ENV_KEY]), role)
    path = (config_dir or _config_home() / CONFIG_FOLDER) / f"{role}.pem"
    if not path.exists():
        _create_key(path)
    return HostKey.load(path, role)


HOST_KEY_NOTE = "signed by this host's key, not yet listed in data/keys.yaml"


def host_public_keys(config_dir: Path | None = None) -> list[KeyEntry]:
    """This host's own signing keys, read from where `host_key` keeps them (never made here): the
    PEM file CATALOG_SIGNING_KEY names (as a measurer's), else each role's file under the config
    folder. A file that cannot be read as a key is left out: it signs nothing here."""
    if config_dir is None and os.environ.get(ENV_KEY):
        paths = [(Path(os.environ[ENV_KEY]), "measurer")]
    else:
        folder = config_dir or _config_home() / CONFIG_FOLDER
        paths = [(folder / f"{role}.pem", role) for role in ROLES]
    found = []
    for path, role in paths:
        if not path.is_file():
            continue
        try:
            key = HostKey.load(path, role)
        except CatalogError:
            continue
        # undated on purpose: it vouches only in this host's local build, labelled there, for what this
        # host made with it whenever that was (a key file's date says when it was copied, not made)
        found.append(
            KeyEntry(id=key.key_id, public_key=key.public_hex, owner=HOST_KEY_NOTE, role=key.role, valid_from=date.min)
        )
    return found


def _role(role: str) -> Role:
    if role not in ROLES:
        raise CatalogError(f"unknown key role {role!r}: expected one of {', '.join(ROLES)}", field="role")
    return role


def _config_home() -> Path:
    configured = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(configured) if os.path.isabs(configured) else Path.home() / ".config"


def _refuse_inside_repo(path: Path) -> None:
    if path.resolve().is_relative_to(REPO):
        raise CatalogError("a private key must not live inside the repository, where it could be committed", file=path)


def _create_key(path: Path) -> None:
    """A new key, written whole (a temporary file linked into place) and never over another."""
    _refuse_inside_repo(path)
    signer = CryptoSigner.generate_ed25519()
    try:
        if not path.parent.is_dir():
            path.parent.mkdir(mode=0o700, parents=True)
            os.chmod(path.parent, 0o700)
        write_file(path, signer.private_bytes, mode=0o600, overwrite=False)
    except FileExistsError:
        pass  # another process created it first: use that key
    except CatalogError as error:
        raise CatalogError(
            f"cannot create the signing key: {error.message.removeprefix('cannot write: ')}", file=path
        ) from None
    except OSError as error:
        raise CatalogError(f"cannot create the signing key: {error.strerror or error}", file=path) from None


def _statement(digest: str, packet_name: str, role: str) -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": packet_name, "digest": {"sha256": digest}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"role": role},
    }


def sign_packet(digest: str, packet_name: str, key: HostKey) -> bytes:
    """The signature file's bytes: canonical JSON of the DSSE envelope, then a newline.

    Ed25519 signatures are deterministic and nothing here holds a time, so re-signing the same
    packet with the same key gives the same bytes."""
    if not _SHA256.fullmatch(digest):
        raise ValueError(f"digest must be 64 lowercase hex characters, not {digest!r}")
    envelope = Envelope(canonical_json(_statement(digest, packet_name, key.role)), PAYLOAD_TYPE, {})
    envelope.sign(key.signer)
    return canonical_json(envelope.to_dict()) + b"\n"


class _SignatureDoc(StrictModel):
    keyid: str = Field(description="Id of the signing key, as in data/keys.yaml.")
    sig: str = Field(pattern=_BASE64, description="The signature over DSSE's PAE of the payload, base64.")


class _EnvelopeDoc(StrictModel):
    payload: str = Field(pattern=_BASE64, description="The in-toto Statement, base64.")
    payloadType: str = Field(description="How to read the payload: always application/vnd.in-toto+json.")
    signatures: list[_SignatureDoc] = Field(description="Exactly one signature.")


def _read_envelope(data: bytes, file: Path) -> Envelope:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CatalogError(f"not UTF-8 text ({error.reason} at byte {error.start})", file=file) from None
    document = parse_json(text, file)
    if not isinstance(document, dict) or not {"payload", "payloadType", "signatures"} & document.keys():
        raise CatalogError("not a DSSE envelope: expected payload, payloadType and signatures", file=file)
    checked = validate_as(_EnvelopeDoc, document, file, text)
    try:
        return Envelope.from_dict(checked.model_dump())
    except ValueError as error:
        raise CatalogError(f"not a DSSE envelope: {error}", file=file, field="signatures") from None


def signer_key_id(envelope: bytes, file: Path) -> str | None:
    """The key id an envelope claims, before any check (to tell a local key from a forgery)."""
    signatures = _read_envelope(envelope, file).signatures
    return next(iter(signatures), None)


def verify_packet_signature(
    envelope: bytes,
    digest: str,
    packet_name: str,
    keys: KeyRing,
    *,
    role: str,
    file: Path,
    made_on: date | None = None,
) -> KeyEntry:
    """The data/keys.yaml entry of the key that signed this packet's digest for `role`; a
    CatalogError naming `file` and the field at fault for anything else.

    A key vouches for the packets made within its validity dates: `made_on` is the day the
    packet says it was made (its `created`, which the signature covers), today when it says
    none. So a key that expires leaves its earlier packets valid; a revoked one (compromised)
    vouches for nothing any more."""

    def refuse(message: str, field: str) -> NoReturn:
        raise CatalogError(message, file=file, field=field)

    parsed = _read_envelope(envelope, file)
    if parsed.payload_type != PAYLOAD_TYPE:
        refuse(f"payloadType is {parsed.payload_type!r}, not {PAYLOAD_TYPE!r}", "payloadType")
    if not parsed.signatures:
        refuse("unsigned: the envelope holds no signature", "signatures")
    if len(parsed.signatures) > 1:
        refuse(f"{len(parsed.signatures)} signatures: a packet is signed by exactly one key", "signatures")
    keyid = next(iter(parsed.signatures))
    entry = keys.by_id().get(keyid)
    where = "signatures[0].keyid"
    if entry is None:
        refuse(f"unknown key {keyid}: add its line to {KEYS_FILE}", where)
    today = made_on or datetime.now(UTC).date()
    if entry.revoked is not None:
        refuse(f"key {keyid} ({entry.owner}) was revoked on {entry.revoked}", where)
    if entry.valid_from is not None and today < entry.valid_from:
        refuse(f"key {keyid} ({entry.owner}) is not valid before {entry.valid_from}", where)
    if entry.valid_until is not None and today > entry.valid_until:
        refuse(f"key {keyid} ({entry.owner}) expired on {entry.valid_until}", where)
    if entry.role != role:
        refuse(f"key {keyid} ({entry.owner}) has role {entry.role}; this packet needs a key with role {role}", where)
    try:
        parsed.verify([sslib_key_of(entry.public_key)], 1)
    except UnverifiedSignatureError:
        refuse(f"bad signature by key {keyid}: the envelope was altered after signing", "signatures[0].sig")
    _check_statement(parsed.payload, digest, packet_name, role, refuse)
    return entry


def _check_statement(
    payload: bytes, digest: str, packet_name: str, role: str, refuse: Callable[[str, str], NoReturn]
) -> None:
    """The signed statement names this packet, by name and digest, for this role, and nothing else."""
    try:
        statement = json.loads(payload)
    except (UnicodeDecodeError, ValueError, RecursionError):
        refuse("the signed payload is not JSON", "payload")
    subject = statement.get("subject") if isinstance(statement, dict) else None
    if not (isinstance(subject, list) and len(subject) == 1 and isinstance(subject[0], dict)):
        refuse("the signed statement must name exactly one subject", "payload.subject")
    if subject[0].get("name") != packet_name:
        refuse(
            f"signs packet {subject[0].get('name')!r}, not {packet_name!r}: a signature cannot move between packets",
            "payload.subject[0].name",
        )
    signed_digest = subject[0].get("digest")
    if signed_digest != {"sha256": digest}:
        signed = signed_digest.get("sha256") if isinstance(signed_digest, dict) else signed_digest
        refuse(
            f"signs sha256 {signed}, not this packet's {digest}: the packet changed after signing",
            "payload.subject[0].digest.sha256",
        )
    if statement != _statement(digest, packet_name, role):
        refuse(f"not a {role} packet-signature statement ({STATEMENT_TYPE}, {PREDICATE_TYPE})", "payload")
