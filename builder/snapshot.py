"""A no-op rebuild in well under a second at 20,000 packets.

stamp.py proves a site current file by file: it walks every folder and looks each file's sha256
up by its stat fingerprint in a table of 100,000 entries. A snapshot proves the same for a whole
tree at once: one sha256 over the stat of every entry, folders included, taken when the content of
each file was known (the build that wrote it, or a hash outside the racy window). It is taken
again without listing a folder: each entry it lists is stat'ed by name. Equal snapshots mean that
no file was written or replaced (its own fingerprint) and that no entry was added, removed or
renamed in any folder (the folder's mtime and ctime move on each); so what was proven then holds.

What a snapshot proved is kept in the cache beside the fingerprints, for each output folder: the
input folders' hash (RootsSeen) and the site's inputs and warnings (SiteSeen). Stdlib only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import tree

Listing = Mapping[str, tuple[str, ...]]  # a root's name -> its entries, relative to it, as walked


def line(relative: str, st: os.stat_result, sha: str | None = None) -> str:
    """An entry as a snapshot takes it: its stat fingerprint, or (`sha`) its content."""
    if sha is not None:
        return f"{relative}\0={sha}\n"
    return f"{relative}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n"


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """The digest of a set of named folders, and what taking it again needs: their entries, and
    those to compare by content (`recheck`: files within the racy window when hashed). `heads`:
    each folder's own line, which fails it on one stat when an entry was added or removed."""

    digest: str
    listing: Listing
    recheck: Listing = field(default_factory=dict)
    heads: Mapping[str, str] = field(default_factory=dict)

    def holds(self, roots: Mapping[str, str]) -> bool:
        """True when the folders `roots` (name -> path, the names this was taken with) are as they
        were: every entry stat'ed by name, no folder listed."""
        return (
            bool(self.digest)
            and self._heads_hold(roots)
            and digest_of(roots, self.listing, self.recheck) == self.digest
        )

    def _heads_hold(self, roots: Mapping[str, str]) -> bool:
        try:
            return all(
                line(f"/{name}", root_stat(root)) == self.heads[name]
                for name, root in roots.items()
                if name in self.heads
            )
        except OSError:
            return False

    def entries_if_held(self, name: str, root: str) -> dict[str, os.stat_result] | None:
        """Every entry of the folder `root` (this snapshot's one root, `name`) by its relative
        path, with its stat as taken now, when the folder is as it was; None otherwise."""
        stats: dict[str, os.stat_result] = {}
        if self.digest and digest_of({name: root}, self.listing, self.recheck, stats) == self.digest:
            return stats
        return None

    def as_json(self) -> dict[str, Any]:  # not dataclasses.asdict: it deep-copies 100,000 names
        body = {"digest": self.digest, "listing": dict(self.listing), "recheck": dict(self.recheck)}
        return {**body, "heads": dict(self.heads)}

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Snapshot:
        listing = {str(name): tuple(map(str, entries)) for name, entries in body["listing"].items()}
        recheck = {str(name): tuple(map(str, entries)) for name, entries in body["recheck"].items()}
        heads = {str(name): str(head) for name, head in body.get("heads", {}).items()}
        return cls(str(body["digest"]), listing, recheck, heads)


def digest_of(
    roots: Mapping[str, str],
    listing: Listing,
    recheck: Listing,
    stats: dict[str, os.stat_result] | None = None,
    settled: Mapping[str, os.stat_result] | None = None,
) -> str:
    """The digest of the entries in `listing`, each by os.lstat now (in `recheck`: by content);
    "" when one is gone or unreadable. A root is stat'ed through a link (`root_stat`). With one
    root only: `stats` receives each entry's stat, by its path relative to the root; `settled`
    gives the stat of entries known not to have changed since it was taken (not taken again)."""
    lines = []
    lstat = os.lstat
    settled = settled or {}
    try:
        for name, root in roots.items():
            lines.append(line(f"/{name}", root_stat(root)))
            prefix, again = root + "/", frozenset(recheck.get(name, ()))
            for relative in listing.get(name, ()):
                path = prefix + relative
                st = settled.get(relative) or lstat(path)
                if stats is not None:
                    stats[relative] = st
                if again and relative in again:
                    lines.append(line(relative, st, tree.file_sha256(Path(path))))
                else:
                    lines.append(line(relative, st))
    except OSError:
        return ""
    return _digest(lines)


def root_stat(root: str) -> os.stat_result:
    """A root folder's stat, through a link: the walk lists the folder a link leads to, and only
    that folder's times move when an entry is added in it."""
    return os.stat(root)


class Taking:
    """A snapshot taken along a walk: each root's stat before its entries are listed, then every
    entry's stat as the walk gives it (or its content's sha256)."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._listing: dict[str, list[str]] = {}
        self._recheck: dict[str, list[str]] = {}
        self._heads: dict[str, str] = {}

    def root(self, name: str, st: os.stat_result) -> None:
        self._heads[name] = line(f"/{name}", st)
        self._lines.append(self._heads[name])
        self._listing[name] = []

    def entry(self, name: str, relative: str, st: os.stat_result, sha: str | None = None) -> None:
        self._lines.append(line(relative, st, sha))
        self._listing[name].append(relative)
        if sha is not None:
            self._recheck.setdefault(name, []).append(relative)

    def done(self) -> Snapshot:
        listing = {name: tuple(entries) for name, entries in self._listing.items()}
        recheck = {name: tuple(entries) for name, entries in self._recheck.items()}
        return Snapshot(_digest(self._lines), listing, recheck, dict(self._heads))


SITE = "site"


def of_site(out: Path) -> Snapshot | None:
    """The snapshot of every entry in the site folder `out`, walked; None when an entry cannot be
    read or is neither a file nor a folder."""
    taking = Taking()
    try:
        taking.root(SITE, root_stat(os.fspath(out)))
    except OSError:
        return None
    for entry in tree.walk(str(out)):
        if entry.kind == "odd" or entry.stat is None:
            return None
        taking.entry(SITE, entry.relative, entry.stat)
    return taking.done()


def of_written(out: Path, files: Iterable[str], settled: Mapping[str, os.stat_result] | None = None) -> Snapshot | None:
    """The snapshot of a site a build has just made hold exactly `files` (output.swap_in): those
    files and their folders, stat'ed by name rather than walked (`settled`: the stats publishing
    took that still hold); None when one is missing."""
    entries: set[str] = set()
    for relative in files:
        entries.add(relative)
        folder = relative.rpartition("/")[0]
        while folder and folder not in entries:
            entries.add(folder)
            folder = folder.rpartition("/")[0]
    listing = {SITE: tuple(sorted(entries))}
    digest = digest_of({SITE: os.fspath(out)}, listing, {}, settled=settled)
    return Snapshot(digest, listing) if digest else None


@dataclass(frozen=True)
class SiteSeen:
    """A site proven intact, the inputs it was built from, and the warnings its build gave."""

    snapshot: Snapshot
    inputs: str
    warnings: tuple[str, ...] = ()

    def holds(self, out: Path, inputs: str) -> bool:
        return inputs == self.inputs and self.snapshot.holds({SITE: os.fspath(out)})


@dataclass(frozen=True)
class RootsSeen:
    """What the input folders hashed to (with and without the packets), and their snapshot: while
    it holds, the hash holds, and no file needs its fingerprint looked up (stamp.input_hash)."""

    snapshot: Snapshot
    sha256: str
    context: str


@dataclass(frozen=True)
class Seen:
    """What the last run proved of the output folder `out`: its inputs and its site."""

    roots: RootsSeen | None = None
    site: SiteSeen | None = None

    def proved(self, roots: RootsSeen | None) -> bool:
        """True when `roots` (stamp.Inputs.roots) is this record's own, taken as it was because its
        snapshot held: no input's sha256 was looked up to get it."""
        return self.roots is not None and roots is self.roots

    @staticmethod
    def path_for(out: Path) -> Path:
        return tree.cached(out, "snapshots", ".json")

    @classmethod
    def load(cls, out: Path) -> Seen:
        """The record kept for `out`; an empty one when it is missing or unreadable (one slower run)."""
        try:
            body = json.loads(cls.path_for(out).read_text(encoding="utf-8"))
            roots, site = body["roots"], body["site"]
            return cls(
                RootsSeen(Snapshot.from_json(roots["snapshot"]), str(roots["sha256"]), str(roots["context"]))
                if roots
                else None,
                SiteSeen(Snapshot.from_json(site["snapshot"]), str(site["inputs"]), tuple(map(str, site["warnings"])))
                if site
                else None,
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return cls()

    def save(self, out: Path) -> None:
        roots, site = self.roots, self.site
        body = {
            "roots": roots and {"snapshot": roots.snapshot.as_json(), "sha256": roots.sha256, "context": roots.context},
            "site": site and {"snapshot": site.snapshot.as_json(), "inputs": site.inputs, "warnings": site.warnings},
        }
        tree.store_json(self.path_for(out), body)
