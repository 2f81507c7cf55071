"""The spare: the site a build replaced, kept in the cache (stamp.spare_site) so the next build
assembles its site in it instead of making every folder and link of a new one. Taken when the
build starts (locked, moved beside the output folder as its staging folder) and listed on a
thread while the site is built; given back if the build publishes nothing. A site that replaced
none leaves one made from it at the end (`seed`); a build that finds none (the cache was lost)
makes one from the current site on that thread.

Nothing in it is trusted: a file stays only when it is the very inode the current site holds and
unchanged, so the bytes the current site was just checked to hold; anything else is removed."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

from builder.tree import Entry, walk


class SpareEntry(NamedTuple):
    """An entry of the spare: its kind ("file", "folder", "odd"), the (inode, device) of a file or
    folder, and a folder's stat as taken before it was listed."""

    relative: str
    kind: str
    path: str
    inode: tuple[int, int] | None = None
    stat: os.stat_result | None = None


@dataclass(frozen=True)
class Cleared:
    """What clear() left of the spare: the files kept, the folders left (with their stat, when
    the listing took one) and the folders it removed an entry from."""

    kept: set[str]
    folders: dict[str, os.stat_result | None]
    emptied: set[str]


@dataclass(frozen=True)
class Spare:
    """Where the site a build replaces is kept (`home`), and when this build took the one kept
    there, the folder it now is (`folder`, beside the output) and its listing (`listing`)."""

    home: Path
    folder: Path | None = None
    listing: Future[list[SpareEntry]] | None = None


@contextmanager
def borrowed(home: Path, staging: Path, site: Path) -> Iterator[Spare]:
    """The spare moved over `staging` (an empty folder beside the output) and locked, listed on a
    thread. Without one to take (none yet, another build holds it, or it cannot move there:
    another file system), `site`'s folders are made again in `staging` and its files linked, on
    the thread, as if `site` had been kept. `Spare(home)` when there is no site: the spare is
    not taken. Whatever publishing did not use goes home (or is removed)."""
    if not os.path.isdir(site):
        yield from _stale_removed(home, staging)
        return
    fd = _claimed(home, staging)
    if fd is None:
        fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)
        made = partial(_cloned, site, staging)
    else:
        made = partial(_listed, staging)
    try:
        with ThreadPoolExecutor(max_workers=1) as making:
            yield Spare(home, staging, making.submit(made))
    finally:
        if os.path.lexists(staging) and not moved(staging, home):  # not swapped in: home
            shutil.rmtree(staging, ignore_errors=True)
        os.close(fd)


def _listed(folder: Path) -> list[SpareEntry]:
    """Every entry under `folder`, each folder followed by what it holds. A folder is stat'ed; a
    file is not (63,000 of them at 1000 x 20): its inode is the one its folder's listing gives and
    its device is its folder's. Only a file mounted over a name of the spare, which takes root,
    is not seen for what it is."""
    found: list[SpareEntry] = []
    try:
        root = os.lstat(folder)
    except OSError:
        return found
    stack = _scanned(SpareEntry("", "folder", str(folder), (root.st_ino, root.st_dev)))
    while stack:
        entry = stack.pop()
        found.append(entry)
        if entry.kind == "folder":
            stack.extend(_scanned(entry))
    return found


def _scanned(folder: SpareEntry) -> list[SpareEntry]:
    """What `folder` holds, in reverse (popped in order off a stack); an odd entry when it cannot
    be listed."""
    assert folder.inode is not None
    prefix, device = (folder.relative + "/" if folder.relative else ""), folder.inode[1]
    try:
        with os.scandir(folder.path) as listing:
            entries = list(listing)
    except OSError:
        return [SpareEntry(folder.relative or ".", "odd", folder.path)]
    found = []
    for entry in entries:
        relative = prefix + entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                found.append(SpareEntry(relative, "folder", entry.path, (st.st_ino, st.st_dev), st))
            elif entry.is_file(follow_symlinks=False):
                found.append(SpareEntry(relative, "file", entry.path, (entry.inode(), device)))
            else:
                found.append(SpareEntry(relative, "odd", entry.path))
        except OSError:
            found.append(SpareEntry(relative, "odd", entry.path))
    found.reverse()
    return found


def _stale_removed(home: Path, staging: Path) -> Iterator[Spare]:
    """A full build into nothing: a new folder costs less than emptying a spare, and a spare kept
    home is of a site that is gone (none of its files is a site's any more): it is removed on a
    thread while this site is built, so publishing leaves a fresh one (`seed`)."""
    fd = _claimed(home, staging)
    if fd is None:
        os.rmdir(staging)
        yield Spare(home)
        return
    try:
        with ThreadPoolExecutor(max_workers=1) as removing:
            removing.submit(shutil.rmtree, staging, True)
            yield Spare(home)
    finally:
        os.close(fd)


def _cloned(site: Path, staging: Path) -> list[SpareEntry]:
    """What `staging` holds once `site`'s folders are made in it and its regular files linked."""
    made = []
    root = str(staging)
    for entry in walk(str(site), ordered=False):
        path = os.path.join(root, entry.relative)
        try:
            if entry.kind == "folder":
                os.mkdir(path)
            elif entry.kind == "file":
                os.link(entry.path, path)
            else:
                continue
            st = os.lstat(path)
            made.append(SpareEntry(entry.relative, entry.kind, path, (st.st_ino, st.st_dev)))
        except OSError:
            continue  # not made: the new site's file is written there
    return made


def _claimed(home: Path, staging: Path) -> int | None:
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released by the kernel however the process ends
        os.rename(home, staging)
        return fd
    except OSError:
        os.close(fd)
        return None


def moved(folder: Path, to: Path) -> bool:
    try:
        os.rename(folder, to)
        return True
    except OSError:
        return False


def retire(old_site: Path, spare: Spare | None) -> None:
    """The site just replaced becomes the spare, unless there is none to keep or one is home
    already (a concurrent build's); otherwise it is removed."""
    if spare is not None:
        with suppress(OSError):  # the rename below fails too, and the old site is removed
            spare.home.parent.mkdir(parents=True, exist_ok=True)
    if spare is None or not moved(old_site, spare.home):
        shutil.rmtree(old_site, ignore_errors=True)


def seed(site: Path, files: Iterable[str], spare: Spare | None) -> None:
    """A site that replaced none (the first, or one built into an emptied folder) leaves a spare
    all the same, its folders made and its files linked (the same inodes) once here, so the
    next build, a rebuild of a few pages, makes neither. Skipped when a spare is home already;
    on a failure (another file system) none is left."""
    if spare is None:
        return
    home = spare.home
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(home)
    except OSError:
        return
    try:
        made: set[str] = set()
        for relative in sorted(files):
            folder = relative.rpartition("/")[0]
            if folder and folder not in made:
                os.makedirs(home / folder, exist_ok=True)
                made.add(folder)
            os.link(site / relative, home / relative)
    except OSError:
        shutil.rmtree(home, ignore_errors=True)


def clear(
    listing: list[SpareEntry], files: Mapping[str, object], present: dict[str, Entry], changed: set[str]
) -> Cleared:
    """Remove from the spare (`listing`: its entries, each folder before what it holds)
    everything the new site does not hold as it stands there."""
    folders: set[str] = set()
    for relative in files:
        folder = relative.rpartition("/")[0]
        while folder and folder not in folders:
            folders.add(folder)
            folder = folder.rpartition("/")[0]
    kept: set[str] = set()
    left: dict[str, os.stat_result | None] = {}
    emptied: set[str] = set()
    gone = ""  # a folder just removed (with a trailing slash): all of it went with it
    for entry in listing:
        relative = entry.relative
        if gone and (relative + "/").startswith(gone):
            continue
        if entry.kind == "folder" and relative in folders:
            left[relative] = entry.stat
            continue
        if relative in files and relative not in changed and _same_inode(entry, present.get(relative)):
            kept.add(relative)
            continue
        emptied.add(relative.rpartition("/")[0])
        if entry.kind == "folder":
            shutil.rmtree(entry.path)
            gone = relative + "/"
        else:
            try:
                os.unlink(entry.path)
            except IsADirectoryError:  # a folder the listing could not read
                shutil.rmtree(entry.path)
                gone = relative + "/"
            except FileNotFoundError:
                pass
    return Cleared(kept, left, emptied)


def _same_inode(entry: SpareEntry, current: Entry | None) -> bool:
    if current is None or entry.kind != "file" or current.kind != "file" or current.stat is None:
        return False
    return entry.inode == (current.stat.st_ino, current.stat.st_dev)
