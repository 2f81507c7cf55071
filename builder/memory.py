"""What a build proved, kept in the cache for the next build of the same output folder.

`Proof`: the stat of every input file with its sha256, and the stat of every entry of the site as
published. With it the next build proves a no-op by stat'ing files, no byte read (builder/build.py
`plan`); it is all a no-op reads, so this module and the proof's are stdlib only (a no-op is
proven before the heavy imports). `Memory`: the site's manifest (builder/manifest.py), every
packet's listing and every family's index card, with which a build that adds a packet makes that
family's pages again and keeps the rest. Both are this machine's (paths, inodes), never the site's.
Losing them costs one full build, nothing else; they are pickles, trusted like the Python bytecode
beside them. `Cache` is the one owner of every path under the cache folder.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from catalog.errors import CatalogError
from catalog.files import write_file

if TYPE_CHECKING:
    from builder.manifest import Manifest
    from builder.views.index import FamilyCard
    from builder.views.recipe import RecipeEvidence
    from catalog.store.listing import Listed

FORMAT = 5  # bump when Proof's or Memory's fields change: an older one is then a full build

Stat = tuple[int, int, int, int, int]  # mode, size, mtime_ns, ctime_ns, inode
Kept = TypeVar("Kept", "Proof", "Memory")


def stat_of(st: os.stat_result) -> Stat:
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


class FileSeen(NamedTuple):
    """An input file as a build saw it: its stat, and its sha256. `stat` is None when the file was
    hashed within a second of its last change (git's "racy clean" case): it is hashed again. A
    tuple: the proof holds 41,000 at 1000 x 20, and unpickled as dataclasses they took 0.25 s of
    a 1 s no-op (0.14 s as tuples)."""

    stat: tuple[int, int, int, int] | None  # size, mtime_ns, ctime_ns, inode
    sha256: str


@dataclass(frozen=True)
class FamilyMade:
    """A family as the site shows it beyond its own pages: its index card (its entry of the
    models API too), the quantizations it names, the warnings its view gave, its packets, and what its
    recipe page shows of them (energy costs, command differences)."""

    card: FamilyCard
    quantizations: list[str]
    warnings: list[str]
    packets: tuple[str, ...]
    recipe_evidence: RecipeEvidence


@dataclass(frozen=True)
class Proof:
    settings: str  # options, library versions, Python: builder/inputs.py settings()
    inputs: dict[str, FileSeen]  # "<root>/<relative path>" -> the file as seen
    site: dict[str, Stat]  # every entry of the site by relative path ("" the site itself), as published
    warnings: tuple[str, ...]  # the build's, said again by a no-op (and judged by --strict)
    format: int = FORMAT


@dataclass(frozen=True)
class Memory:
    manifest: Manifest
    listing: dict[str, Listed]
    families: dict[str, FamilyMade]
    format: int = FORMAT


@dataclass(frozen=True)
class Cache:
    """Where the cache keeps what it keeps for the output folder `out`: the build's memory and the
    spare (builder/output.py), each named by the folder's real path."""

    root: Path
    key: str

    @classmethod
    def of(cls, out: Path) -> Cache:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-serving-catalog"
        return cls(root, hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:24])

    @property
    def proof(self) -> Path:
        return self.root / f"builder-proof-{self.key}.pickle"

    @property
    def memory(self) -> Path:
        return self.root / f"builder-memory-{self.key}.pickle"

    @property
    def spare(self) -> Path:
        return self.root / f"builder-spare-{self.key}"

    def recall(self, kind: type[Kept]) -> Kept | None:
        """The proof or the memory kept, when it is of this FORMAT."""
        found = _unpickled(self.proof if kind is Proof else self.memory)
        return found if isinstance(found, kind) and found.format == FORMAT else None

    def keep(self, proof: Proof, memory: Memory | None = None) -> None:
        """Each written whole or not at all (`memory` None: the one kept stays); a cache that
        cannot be written only makes the next build slower."""
        for path, kept in ((self.memory, memory), (self.proof, proof)):
            if kept is None:
                continue
            try:
                self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
                write_file(path, pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL), durable=False)
            except (OSError, CatalogError):
                pass


def _unpickled(path: Path) -> object:
    try:
        return pickle.loads(path.read_bytes())  # noqa: S301 - the user's own cache
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError, IndexError):
        return None
