"""Verify once per content: a verified packet's summary, cached under the sha256 of its bytes.

A summary is the verified `Packet` with every prompt row's token arrays cut to the first
`KEPT_TOKENS` values: what every page shows (TTFT is token 0, the decode rate tokens 1..100, the
preview the first two dozen ids) without the rest of the arrays, which are most of a packet's
memory. Only the cross-packet checks of a reproduction need whole arrays; the loader reads those
few packets whole again (catalog/store/repository.py).

The cache lives in the user's cache folder (`$XDG_CACHE_HOME/llm-serving-catalog/summaries/`,
else `~/.cache/...`), one file per packet content. Its key covers everything the verdict is a
function of: the packet's bytes, its file name (the id check), its signature envelope's bytes,
the key ring (data/keys.yaml), --allow-unsigned, and the verifier itself (the source of every
catalog module and the versions of the libraries it validates with). So an entry can never be
stale: any change to one of them is another key. Only packets that verified with no problem are
stored, each as its summary and, beside it, its record (catalog/store/record.py: the summary without
its prompt rows, what a family's views read) and its listing (catalog/store/listing.py: what the rest
of the site reads). Beside an entry, an empty `.checked` file records that
the content also passed the checks against data/ (catalog/checks/cross_check.py), under a key that adds
the digest of every data file. A load that passes keeps every listing it read in one file
(`SummaryCache.listings`), under a name that adds the same digest, for the next load to read at once.
Entries are pickles, trusted like the Python bytecode cache beside them: whoever can write the
user's cache folder can already change the code that runs.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel

from catalog.errors import CatalogError
from catalog.files import read_bytes, write_file
from catalog.model.metrics import MIN_COMPLETION_TOKENS
from catalog.model.packet import Packet, PromptRow
from catalog.packets.canonical import sha256_hex
from catalog.packets.layout import signature_path
from catalog.store.documents import ModelT, load_file

KEPT_TOKENS = MIN_COMPLETION_TOKENS  # tokens 0..100: TTFT, the decode window, the id preview
CATALOG_SOURCE = Path(__file__).resolve().parent.parent
VERIFIER = "catalog.store.repository"  # loads data/ and verifies packets, for the builder and make verify
_IMPORT = re.compile(
    r"^[ \t]*(?:import[ \t]+(?P<module>catalog(?:\.\w+)*)|from[ \t]+(?P<package>catalog(?:\.\w+)*)[ \t]+import[ \t]+"
    r"(?P<names>\([^)]*\)|[^\n#]+))",
    re.MULTILINE,
)
VERIFIER_LIBRARIES = ("pydantic", "pydantic-core", "cryptography", "securesystemslib", "pyyaml")
FORMAT = 1  # bump when the stored form changes
KnownDigest = Callable[[Path], str | None]  # a file's sha256 when already known, else None
# an entry's kinds: the summary, its record (catalog/store/record.py) and listing (catalog/store/listing.py)
SUMMARY = "pickle"
RECORD = "record"
LISTED = "listed"
LISTINGS = "listings"  # the folder of the listing files (SummaryCache.listings)


def summarize(packet: Packet) -> Packet:
    """The packet with each row's token arrays cut to their first KEPT_TOKENS values (no other
    field changes; the seal is kept). A copy, not re-validated: its rows no longer hold as many
    ids as completion_tokens says, which is the point."""
    arms = [
        arm.model_copy(
            update={"servers": [s.model_copy(update={"rows": [_cut(r) for r in s.rows]}) for s in arm.servers]}
        )
        for arm in packet.arms
    ]
    return packet.model_copy(update={"arms": arms})


def _cut(row: PromptRow) -> PromptRow:
    if len(row.token_ids) <= KEPT_TOKENS:
        return row
    return row.model_copy(
        update={"token_ids": row.token_ids[:KEPT_TOKENS], "token_times_us": row.token_times_us[:KEPT_TOKENS]}
    )


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-serving-catalog" / "summaries"


def verifier_sources(entry: str = VERIFIER) -> list[Path]:
    """The source of every catalog module verification runs: `entry` and, transitively, each
    catalog module it imports (read from its import lines, the ones inside functions too), with
    the packages they sit in. Editing anything else (the builder, a test helper) keeps the cache."""
    found: set[Path] = set()
    pending = [entry]
    while pending:
        for path in _module_files(pending.pop()):
            if path in found:
                continue
            found.add(path)
            for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
                if match["module"]:
                    pending.append(match["module"])
                    continue
                pending.append(match["package"])
                names = match["names"].strip("()").split(",")
                pending += [f"{match['package']}.{name.split(' as ')[0].strip()}" for name in names if name.strip()]
    return sorted(found)


def _module_files(dotted: str) -> list[Path]:
    """The file of a catalog module and the __init__.py of each package above it (all run when
    it is imported); none for a name that is not a catalog module (a class, a function)."""
    parts = dotted.split(".")[1:]
    module = CATALOG_SOURCE.joinpath(*parts)
    own = [module / "__init__.py", module.with_suffix(".py")] if parts else [CATALOG_SOURCE / "__init__.py"]
    files = [path for path in own if path.is_file()]
    if not files:
        return []
    return files + [CATALOG_SOURCE.joinpath(*parts[:depth], "__init__.py") for depth in range(len(parts))]


def verifier_digest() -> str:
    """sha256 of the verifier: the source of the catalog modules it runs (`verifier_sources`), the
    validating libraries, Python."""
    digest = hashlib.sha256(f"format {FORMAT}\0python {sys.version_info[:2]}\0".encode())
    for path in verifier_sources():
        digest.update(f"{path.relative_to(CATALOG_SOURCE).as_posix()}\0".encode())
        digest.update(path.read_bytes())
    for library in VERIFIER_LIBRARIES:
        try:
            version = metadata.version(library)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{library}={version}\0".encode())
    return digest.hexdigest()


def unpickled(stored: bytes) -> object | None:
    """A cache entry's object; None when its bytes no longer unpickle (another library version)."""
    try:
        found: object = pickle.loads(stored)  # noqa: S301 - the user's own cache
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError, IndexError):
        return None
    return found


def _unpickled(stored: bytes) -> BaseModel | None:
    found = unpickled(stored)
    return found if isinstance(found, BaseModel) else None


def store_pickled(target: Path, entry: object) -> bool:
    """Write a cache entry atomically; whether it was stored (a cache that cannot be written only
    makes the next build slower)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_file(target, pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL), durable=False)
    except (OSError, CatalogError):
        return False
    return True


@dataclass(frozen=True)
class SummaryCache:
    """Where summaries are kept, and the part of every key that is the same for the whole run
    (verifier, key ring, options); picklable, so worker processes use it too."""

    root: Path
    context: str

    @classmethod
    def for_run(
        cls, keys_file: Path, allow_unsigned: bool, root: Path | None = None, host_keys: frozenset[str] = frozenset()
    ) -> SummaryCache:
        """`host_keys`: this host's own keys a local build admits (KeyRing.host_ids)."""
        try:
            keys = sha256_hex(keys_file.read_bytes())
        except OSError:
            keys = "unreadable"
        admitted = ",".join(sorted(host_keys))
        context = hashlib.sha256(f"{verifier_digest()}\0{keys}\0{allow_unsigned}\0{admitted}".encode()).hexdigest()
        return cls(root or cache_root(), context)

    def key(self, path: Path, data: bytes | None = None, known: KnownDigest | None = None) -> str:
        """The entry's key for the packet at `path` (its bytes `data`, read here when not given).
        `known` gives a file's sha256 when the caller has it already (the builder: by stat
        fingerprint, builder/stamp.py), so gigabytes of packets are not read again to key them."""
        content = known(path) if known is not None else None
        if content is None:
            content = sha256_hex(data if data is not None else read_bytes(path))
        envelope = signature_path(path)
        signed = known(envelope) if known is not None else None
        if signed is None:
            try:
                signed = sha256_hex(envelope.read_bytes()) if envelope.exists() else "none"
            except OSError:
                signed = "unreadable"
        return self._keyed(path.name, content, signed)

    def key_if_known(self, path: Path, known: KnownDigest) -> str | None:
        """`key`, when `known` has the packet's sha256: the packet is not opened (nor its
        signature, when `known` has it too). None when the packet's is not known, or its
        signature cannot be read."""
        content = known(path)
        if content is None:
            return None
        signed = known(signature_path(path))
        if signed is None:  # none beside it, or not hashed yet: looked for as `key` does
            try:
                return self.key(path, known=known)
            except CatalogError:
                return None
        return self._keyed(path.name, content, signed)

    def _keyed(self, name: str, content: str, signed: str) -> str:
        line = f"{self.context}\0{name}\0{content}\0{signed}"
        return hashlib.sha256(line.encode()).hexdigest()

    def load_model(self, model: type[ModelT], path: Path) -> ModelT:
        """`load_file`, once per content: a data file's validated model (a recipe: YAML parsing is
        most of its cost) kept under the sha256 of its bytes; a file in error is never kept."""
        try:
            data = read_bytes(path)  # refuses a FIFO, which would block
        except CatalogError:
            return load_file(model, path)  # which names the problem
        key = hashlib.sha256(f"{self.context}\0{model.__qualname__}\0{sha256_hex(data)}".encode()).hexdigest()
        found = self.get(key)
        if isinstance(found, model):
            return found
        loaded = load_file(model, path)
        self.put(key, loaded)
        return loaded

    def _file(self, key: str, kind: str = SUMMARY) -> Path:
        return self.root / key[:2] / f"{key}.{kind}"

    def get(self, key: str, kind: str = SUMMARY) -> BaseModel | None:
        stored = self.get_bytes(key, kind)
        return None if stored is None else _unpickled(stored)

    def get_bytes(self, key: str, kind: str = SUMMARY) -> bytes | None:
        """An entry as stored: a worker passes it on to the process that keeps it, unpickled once."""
        try:
            return self._file(key, kind).read_bytes()
        except OSError:
            return None

    @staticmethod
    def decode(stored: bytes) -> Packet | None:
        found = _unpickled(stored)
        return found if isinstance(found, Packet) else None

    def _verdict_file(self, key: str, data_digest: str) -> Path:
        verdict = hashlib.sha256(f"{key}\0{data_digest}".encode()).hexdigest()
        return self.root / verdict[:2] / f"{verdict}.checked"

    def has_verdict(self, key: str, data_digest: str) -> bool:
        """Whether the content under `key` passed the checks against exactly this data/ before."""
        return bool(data_digest) and self._verdict_file(key, data_digest).exists()

    def put_verdict(self, key: str, data_digest: str) -> None:
        if not data_digest:
            return
        target = self._verdict_file(key, data_digest)
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            target.touch()
        except OSError:
            pass

    def _listings_file(self, data_digest: str) -> Path:
        name = hashlib.sha256(f"{self.context}\0{data_digest}".encode()).hexdigest()
        return self.root / LISTINGS / f"{name}.pickle"

    def listings(self, data_digest: str) -> dict[str, object]:
        """What the last load with this verifier, key ring, options and data/ listed, by content
        key, in one file (20,000 entries read at once, not one file each): a key in it was
        verified, and passed the checks against exactly this data/."""
        if not data_digest:
            return {}
        try:
            found = unpickled(self._listings_file(data_digest).read_bytes())
        except OSError:
            return {}
        return found if isinstance(found, dict) else {}

    def keep_listings(self, data_digest: str, listings: dict[str, object]) -> None:
        if data_digest:
            store_pickled(self._listings_file(data_digest), listings)

    def put(self, key: str, summary: object, kind: str = SUMMARY) -> bool:
        """Store atomically; whether it was stored (if not, the builder holds the summary itself)."""
        return store_pickled(self._file(key, kind), summary)
