"""Fast no-op rebuilds: a manifest in the output records a hash of every input and of every file
written. When both still match, the build has nothing to do and skips loading and rendering.

Content hashes are the identity; reading gigabytes of packets to re-hash them on every rebuild is
not. So, like git's index, `Fingerprints` remembers each file's sha256 under its stat fingerprint
(size, mtime_ns, ctime_ns, inode) in a cache file per output folder, under
`$XDG_CACHE_HOME/llm-serving-catalog/` (not in the site: it names paths of the build machine, and
two builds must stay byte-identical; not beside it: the builder writes nowhere but its output).
Losing the cache costs one slower rebuild, nothing else (it also keeps the site a build
replaced, `spare_site`, for the next build to assemble its site in: output.py). Any write to
a file moves its ctime, which no user tool can set back, so a matching fingerprint means the same
bytes. A file changed within a second of being fingerprinted is not trusted (git's "racy clean"
case) and is re-hashed next time.

Stdlib only, so the check runs before the heavy imports (pydantic models, plotly, jinja).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from stat import S_ISREG
from typing import Any

from builder import routes, tree
from builder.snapshot import RootsSeen, Taking, root_stat

MANIFEST = routes.BUILD_MANIFEST
SOURCE = Path(__file__).resolve().parent.parent
LIBRARIES = ("jinja2", "markupsafe", "markdown-it-py", "plotly", "pydantic", "pyyaml")
RACY_NS = 1_000_000_000


def _fingerprint(path: str | Path, st: os.stat_result | None = None) -> list[int]:
    st = st or os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class Fingerprints:
    """sha256 of files by stat fingerprint, loaded from and saved to an output folder."""

    def __init__(self, known: dict[str, list[object]] | None = None, source: Path | None = None) -> None:
        self._known = known
        self._source = source
        self.fresh: dict[str, list[object]] = {}
        self.at_start: dict[str, str] = {}
        self.hashed_bytes = 0
        self._real_folders: dict[str, str] = {}

    @staticmethod
    def path_for(out: Path) -> Path:
        return tree.cached(out, "fingerprints", ".json")

    @classmethod
    def load(cls, out: Path) -> Fingerprints:
        """The table kept for `out`, read at its first lookup: a no-op that snapshots prove
        (snapshot.py) never parses its 100,000 entries."""
        return cls(source=cls.path_for(out))

    @property
    def known(self) -> dict[str, list[object]]:
        if self._known is None:
            try:
                known = json.loads(self._source.read_text(encoding="utf-8")) if self._source else {}
            except (OSError, ValueError):
                known = {}
            self._known = known if isinstance(known, dict) else {}
        return self._known

    def _key(self, path: str | Path) -> str:
        """The file's absolute path with its folder's links resolved (once per folder as written:
        resolving every file's path costs a system call per path component)."""
        folder, name = os.path.split(os.fspath(path))
        return os.path.join(self._real_folder(folder), name)

    def _real_folder(self, folder: str) -> str:
        """A folder with its links resolved: its parent's, resolved once, and one check that the
        folder itself is not a link (a site's pages sit in thousands of folders of one parent)."""
        real = self._real_folders.get(folder)
        if real is None:
            parent, name = os.path.split(folder)
            if name in ("", ".", "..") or parent == folder or os.path.islink(folder):
                real = os.path.realpath(folder)
            else:
                real = os.path.join(self._real_folder(parent), name)
            self._real_folders[folder] = real
        return real

    def sha256(self, path: str | Path, st: os.stat_result | None = None, key: str | None = None) -> str:
        """`st` and `key` (`_key` of the path): what a folder scan already knows, passed to save
        system calls."""
        key = key or self._key(path)
        sha = self._sha256(path, key, st)
        self.at_start.setdefault(key, sha)
        return sha

    def sha256_if_known(self, path: Path) -> str | None:
        """What this run already took of the file (hashing the inputs), or None: never reads it."""
        return self.at_start.get(self._key(path))

    def sha256_at_start(self, path: Path) -> str:
        """What the file held when this run first looked at it (the inputs: before loading)."""
        return self.at_start.get(self._key(path)) or self.sha256(path)

    def _sha256(self, path: str | Path, key: str, st: os.stat_result | None) -> str:
        fingerprint = _fingerprint(path, st)
        for table in (self.fresh, self.known):
            entry = table.get(key)
            if isinstance(entry, list) and entry[:4] == fingerprint and isinstance(entry[4], str):
                self.fresh[key] = entry
                return entry[4]
        sha = tree.file_sha256(Path(path))
        self.hashed_bytes += fingerprint[0]
        if time.time_ns() - fingerprint[2] > RACY_NS:
            self.fresh[key] = [*fingerprint, sha]
        return sha

    def keep(self, root: Path, relatives: Iterable[str]) -> None:
        """Carry over what the table knows of these files under `root`, whether or not this run
        looked them up (an entry whose fingerprint no longer matches is never used)."""
        real_root = os.path.realpath(root)
        for relative in relatives:
            key = os.path.join(real_root, relative)
            entry = self.known.get(key)
            if entry is not None:
                self.fresh.setdefault(key, entry)

    def record(self, path: Path, sha: str) -> None:
        """A file this build just wrote with known content."""
        self.fresh[self._key(path)] = [*_fingerprint(path), sha]

    def save(self, out: Path, *, keep_unseen: bool = False) -> None:
        """Keep what this run saw; entries for files it did not look at are dropped, unless
        `keep_unseen` (a run whose input hash a snapshot proved looked no input up)."""
        tree.store_json(self.path_for(out), {**self.known, **self.fresh} if keep_unseen else self.fresh)


def spare_site(out: Path) -> Path:
    """Where the site a build replaced waits to become the next build's staging folder
    (output.swap_in): most of its folders and files are already what the next site holds."""
    return tree.cached(out, "spare")


INPUT_SUFFIXES = frozenset({".json", ".yaml", ".yml"})
CODE = frozenset({"builder", "catalog"})


@dataclass(frozen=True)
class Inputs:
    """The hash of everything the output is a function of, and the entries no fingerprint can
    vouch for (a FIFO, a link, a folder named like an input file, a missing or unreadable folder):
    while there is any, the no-op fast path is off and the full build judges them."""

    sha256: str
    irregular: tuple[str, ...] = ()
    context: str = ""  # the same hash without the packets: what an incremental rebuild must share
    roots: RootsSeen | None = None  # the folders' part, and the snapshot vouching for it; None while irregular


def _root_lines(
    name: str, root: str, known: Fingerprints, irregular: list[str], taking: Taking, now: int
) -> Iterator[bytes]:
    """What `root` adds to the input hash: a line per entry (name, kind, sha256 of a file; of the
    code, its .py files only). Each entry also goes into the snapshot `taking`: by its stat, or,
    hashed within the racy window (`now`), by its content."""
    try:
        st = root_stat(root)  # before the folder is listed: what is added after moves its mtime
    except OSError:
        st = None
    if st is None or not os.path.isdir(root):
        irregular.append(root)
        yield f"{name}\0missing\0".encode()
        return
    taking.root(name, st)
    real_root = os.path.realpath(root)
    code = name in CODE
    for relative, kind, path, st in tree.walk(root):
        counted = not code or (kind == "file" and relative.endswith(".py"))
        sha = None
        if counted and kind == "file":
            try:
                sha = known.sha256(path, st, os.path.join(real_root, relative))
            except OSError:
                kind = "odd"  # unreadable: the full build names it
        if counted and (kind == "odd" or (kind == "folder" and os.path.splitext(relative)[1] in INPUT_SUFFIXES)):
            irregular.append(path)
        if st is not None and kind != "odd":
            racy = sha is not None and now - st.st_ctime_ns <= RACY_NS
            taking.entry(name, relative, st, sha if racy else None)
        if counted:
            yield f"{name}/{relative}\0{kind}\0{sha or ''}\0".encode()


def _hashed(roots: dict[str, str], known: Fingerprints, irregular: list[str]) -> RootsSeen:
    """The input folders' hash, with the packets and without, and their snapshot."""
    digest, context, taking = hashlib.sha256(), hashlib.sha256(), Taking()
    now = time.time_ns()
    for name, root in roots.items():
        for line in _root_lines(name, root, known, irregular, taking, now):
            digest.update(line)
            if name != "packets":
                context.update(line)
    return RootsSeen(taking.done(), digest.hexdigest(), context.hexdigest())


def input_hash(
    data: Path,
    packets: Path,
    templates: Path,
    base_url: str,
    known: Fingerprints,
    *,
    allow_unsigned: bool = False,
    host_keys: tuple[str, ...] = (),
    seen: RootsSeen | None = None,
) -> Inputs:
    """Everything the output is a function of: inputs, templates, the code, library versions,
    options. `seen`: the folders' part as an earlier run found it, taken as it is while its
    snapshot holds."""
    roots = {
        "data": os.fspath(data),
        "packets": os.fspath(packets),
        "templates": os.fspath(templates),
        "builder": os.fspath(SOURCE / "builder"),
        "catalog": os.fspath(SOURCE / "catalog"),
    }
    irregular: list[str] = []
    if seen is None or not seen.snapshot.holds(roots):
        seen = _hashed(roots, known, irregular)
    rest = [f"{library}={_version(library)}" for library in LIBRARIES]
    options = {
        "base_url": base_url,
        "allow_unsigned": allow_unsigned,  # a local site must not pass for the one a plain build refuses
        "host_keys": list(host_keys),  # likewise a site showing this host's own, unlisted keys' packets
        "epoch": os.environ.get("SOURCE_DATE_EPOCH", "").strip(),
        "python": list(sys.version_info[:2]),
    }
    rest.append(json.dumps(options, sort_keys=True))
    digest = hashlib.sha256("\0".join([seen.sha256, *rest]).encode()).hexdigest()
    context = hashlib.sha256("\0".join([seen.context, *rest]).encode()).hexdigest()
    return Inputs(digest, tuple(irregular), context, None if irregular else seen)


def _version(library: str) -> str:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "absent"


def packet_count(relatives: Iterable[str]) -> int:
    """How many packets a site's files publish (each as packets/<id>.json, beside its signature)."""
    return sum(1 for r in relatives if routes.is_packet_json(r))


def manifest(
    inputs: str,
    file_hashes: dict[str, str],
    warnings: list[str],
    *,
    context: str = "",
    build_date: str = "",
    page_warnings: dict[str, list[str]] | None = None,
    packet_places: dict[str, list[str | None]] | None = None,
) -> bytes:
    body = {
        "inputs": inputs,
        "context": context,
        "build_date": build_date,
        "page_warnings": page_warnings or {},
        "packet_places": packet_places or {},
        "files": dict(sorted(file_hashes.items())),
        "packets": packet_count(file_hashes),
        "warnings": warnings,
    }
    # compact: json's C encoder does not indent, and a site's manifest lists 60,000 files
    return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode()


def packets_in_site(out: Path, manifest: dict[str, Any] | None = None) -> int:
    """How many packets the site in `out` was built from: its manifest's count (`manifest`: as
    the caller read it already), else the packet files it holds (a site from before the count was
    recorded); 0 for no site."""
    try:
        recorded = manifest if manifest is not None else json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        count = recorded.get("packets")
        return count if isinstance(count, int) else packet_count(recorded["files"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        folder = out / routes.PACKETS_FOLDER
        if not folder.is_dir():
            return 0
        return packet_count(f"{routes.PACKETS_FOLDER}/{p.name}" for p in folder.glob("*.json"))


def recorded(out: Path) -> dict[str, Any] | None:
    """The manifest of the site in `out`, as read; None without a readable one."""
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def unchanged(
    out: Path, inputs: Inputs, known: Fingerprints, manifest: dict[str, Any] | None = None
) -> list[str] | None:
    """The recorded warnings when `out` was built from exactly these inputs and no file in it has
    been touched since; None when a real build is needed (always, while an input is irregular).
    `manifest`: the site's, when the caller has read it (`recorded`)."""
    if inputs.irregular:
        return None
    manifest = manifest or recorded(out)
    if manifest is None or manifest.get("inputs") != inputs.sha256:
        return None
    manifest = intact(out, known, manifest)
    return None if manifest is None else [str(w) for w in manifest.get("warnings", [])]


def intact(
    out: Path, known: Fingerprints, manifest: dict[str, Any] | None = None, *, strays: bool = True
) -> dict[str, Any] | None:
    """The manifest of the site in `out` when it holds exactly the files it records, none touched
    since; None otherwise (no site, a hand edit, a stray file, a link). `manifest`: as in
    `unchanged`. `strays=False`: only the files recorded are looked at, one stat each, no folder
    listed: enough for a build that takes nothing else from the site (incremental.py)."""
    manifest = manifest or recorded(out)
    if manifest is None:
        return None
    try:
        expected: dict[str, str] = manifest["files"]
        real_out = os.path.realpath(out)
        if strays:
            present = {entry.relative: entry for entry in tree.walk(str(out), ordered=False) if entry.kind != "folder"}
            if present.keys() != set(expected) | {MANIFEST}:
                return None
        for relative, sha in expected.items():
            if strays:
                path, st = present[relative].path, present[relative].stat
            else:
                path = os.path.join(out, relative)
                st = os.lstat(path)
            key = os.path.join(real_out, relative)
            if st is None or not S_ISREG(st.st_mode) or known.sha256(path, st, key) != sha:
                return None
        return manifest
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
