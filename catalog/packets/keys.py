"""The public keys whose signatures the catalog trusts: `data/keys.yaml`.

A packet's signature is only as good as the list of keys it is checked against, so the list is
reviewed like code: each key says who holds it, what it may sign (a measurer key signs measured
packets, an importer key imported ones) and when it may sign. The id is derived from the public
key, and checked, so an entry cannot pair one key's id with another key's bytes.

Who holds a key (`owner`) also decides what counts as an independent reproduction: one owner's
second key is the same voice (catalog/checks/grade.py `one_voice`). Owners are compared as
`owner_key` normalises them (case, Unicode compatibility forms and runs of whitespace aside);
verification puts the signer's on the packet's seal (catalog/packets/verify.py).
"""

from __future__ import annotations

import unicodedata
from datetime import date
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import Field, PrivateAttr, StringConstraints, model_validator
from securesystemslib.signer import SSlibKey

from catalog.model.base import FieldError, Sha256, StrictModel
from catalog.store.documents import load_file

KEYS_FILE = Path("data/keys.yaml")
Role = Literal["measurer", "importer"]
ROLES: tuple[Role, ...] = ("measurer", "importer")
Ed25519Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


def owner_key(owner: str) -> str:
    """An owner's text as compared: NFKC, case folded, runs of whitespace one space, trimmed."""
    return " ".join(unicodedata.normalize("NFKC", owner).casefold().split())


@cache  # a key ring holds a few keys, and every packet's signature is checked against one
def sslib_key_of(public_hex: str) -> SSlibKey:
    """securesystemslib's key for raw Ed25519 public bytes, with its default (derived) keyid.

    ValueError if the bytes are not an Ed25519 public key."""
    return SSlibKey.from_crypto(Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_hex)))


class KeyEntry(StrictModel):
    id: Sha256 = Field(description="securesystemslib's keyid of public_key (sha256 of its canonical form), hex.")
    public_key: Ed25519Hex = Field(description="The Ed25519 public key: 32 bytes, 64 lowercase hex characters.")
    owner: Annotated[str, StringConstraints(min_length=1, max_length=200)] = Field(
        description="Who holds the private key (free text: a person, a host, a CI job)."
    )
    role: Role = Field(description="What the key may sign: measured packets (measurer) or imported ones (importer).")
    valid_from: date | None = Field(default=None, description="First day (UTC) signatures by this key are accepted.")
    valid_until: date | None = Field(default=None, description="Last day (UTC) signatures by this key are accepted.")
    revoked: date | None = Field(
        default=None,
        description="Day the key was revoked: signatures carry no time, so from then on none of them is accepted.",
    )
    note: str | None = Field(default=None, description="Free text for reviewers: why the key was added or revoked.")

    @property
    def owner_key(self) -> str:
        """The owner as compared: `Ann Lab` and ` ann  lab` are one owner."""
        return owner_key(self.owner)

    @model_validator(mode="after")
    def _consistent(self) -> KeyEntry:
        try:
            keyid = sslib_key_of(self.public_key).keyid
        except ValueError:
            raise FieldError("not an Ed25519 public key", "public_key") from None
        if keyid != self.id:
            raise FieldError(f"does not match public_key, whose keyid is {keyid}", "id")
        if self.valid_from and self.valid_until and self.valid_from > self.valid_until:
            raise FieldError(f"valid_from {self.valid_from} is after valid_until {self.valid_until}", "valid_from")
        return self


class KeyRing(StrictModel):
    schema_version: Literal[1] = Field(description="Format version of data/keys.yaml.")
    keys: list[KeyEntry] = Field(description="Every key whose signatures are accepted, revoked ones included.")
    test_catalog: bool = Field(
        default=False,
        description="A catalog made by tests or benchmarks, whose throwaway keys may leave valid_from out;"
        " never set in a published catalog.",
    )
    # Ids of this host's own keys, added by `with_host_keys` for a local build: never from the file.
    _host_ids: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="after")
    def _unique_ids(self) -> KeyRing:
        seen: set[str] = set()
        for index, entry in enumerate(self.keys):
            if entry.id in seen:
                raise FieldError(f"key {entry.id} is listed twice", "keys", index, "id")
            seen.add(entry.id)
        return self

    @model_validator(mode="after")
    def _dated(self) -> KeyRing:
        """A key vouches for what was made while it was valid: without a first day, a key made
        today would vouch for a campaign dated last year."""
        if self.test_catalog:
            return self
        for index, entry in enumerate(self.keys):
            if entry.valid_from is None:
                raise FieldError(
                    f"key {entry.id} ({entry.owner}) has no valid_from: every {entry.role} key says the first day"
                    " it vouches for (undated keys only in a test catalog)",
                    "keys",
                    index,
                    "valid_from",
                )
        return self

    @classmethod
    def empty(cls) -> KeyRing:
        return cls(schema_version=1, keys=[])

    def by_id(self) -> dict[str, KeyEntry]:
        return {entry.id: entry for entry in self.keys}

    @property
    def host_ids(self) -> frozenset[str]:
        """This host's own keys that data/keys.yaml does not list (admitted by a local build only)."""
        return self._host_ids

    def with_host_keys(self, entries: list[KeyEntry]) -> KeyRing:
        """This ring and this host's own keys that it does not list yet, marked as such: a local
        build on a measuring host shows the packets they signed, labelled; `make check`, `make
        verify` and CI never call this, so they refuse them."""
        listed = {entry.id for entry in self.keys}
        added = [entry for entry in entries if entry.id not in listed]
        ring = KeyRing(schema_version=1, keys=[*self.keys, *added], test_catalog=self.test_catalog)
        ring._host_ids = frozenset(entry.id for entry in added)
        return ring


def load_keys(path: Path = KEYS_FILE) -> KeyRing:
    return load_file(KeyRing, path)
