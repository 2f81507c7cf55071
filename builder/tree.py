"""The build machine's files: a folder tree walked with the stat the scan gives (strings, not Path
objects: a site holds 100,000 files), a file's sha256, and where the cache keeps what it keeps
for an output folder. Stdlib only, as catalog.files and catalog.errors are: the no-op check
imports it before anything heavy."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from catalog.errors import CatalogError
from catalog.files import file_sha256, write_file

__all__ = ["Entry", "cached", "file_sha256", "store_json", "walk"]


def cached(out: Path, kind: str, suffix: str = "") -> Path:
    """What the cache keeps for the output folder `out` (one of each kind per folder)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm-serving-catalog"
    key = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:24]
    return cache / f"builder-{kind}-{key}{suffix}"


def store_json(target: Path, body: object) -> None:
    """Write a cache file atomically, as compact JSON; a cache that cannot be written only makes
    the next build slower."""
    with contextlib.suppress(CatalogError):
        write_file(target, json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n", durable=False)


class Entry(NamedTuple):
    """One entry of a folder scan: its name relative to the root, its kind ("file": regular,
    "folder", "odd": anything else or unreadable), its path, and the stat of a file or folder."""

    relative: str
    kind: str
    path: str
    stat: os.stat_result | None = None


def walk(folder: str, ordered: bool = True) -> Iterator[Entry]:
    """Every entry under `folder`, depth first, links not followed (sorted by name when `ordered`)."""
    stack = _scanned(folder, "", ordered)
    stack.reverse()
    while stack:
        entry = stack.pop()
        yield entry
        if entry.kind == "folder":
            inside = _scanned(entry.path, entry.relative + "/", ordered)
            inside.reverse()
            stack.extend(inside)


def _scanned(folder: str, prefix: str, ordered: bool) -> list[Entry]:
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except OSError:
        return [Entry(prefix.rstrip("/") or ".", "odd", folder)]
    if ordered:
        entries.sort(key=_name)
    found = []
    for entry in entries:
        if entry.name == "__pycache__":
            continue
        relative = prefix + entry.name
        try:
            if entry.is_dir(follow_symlinks=False):  # its stat taken before it is listed (snapshot.py)
                found.append(Entry(relative, "folder", entry.path, entry.stat(follow_symlinks=False)))
            elif entry.is_file(follow_symlinks=False):
                found.append(Entry(relative, "file", entry.path, entry.stat(follow_symlinks=False)))
            else:
                found.append(Entry(relative, "odd", entry.path))
        except OSError:
            found.append(Entry(relative, "odd", entry.path))
    return found


_name = attrgetter("name")
