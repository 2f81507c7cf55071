"""Writing the site: every path checked to stay inside the output folder, the new site assembled
in a temporary sibling folder and swapped in whole, so a failed build leaves the old site intact.
The site a build replaces is kept as the next build's staging folder (builder/spare.py)."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import glob
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from builder import routes
from builder.snapshot import SITE, Snapshot
from builder.spare import Cleared, Spare, borrowed, clear, retire, seed
from builder.tree import Entry, file_sha256, walk
from catalog.errors import CatalogError
from catalog.files import write_file

COPY_THREADS = 4  # enough to keep two cores' worth of kernel copying busy
_DIGESTING = threading.Lock()


@dataclass(frozen=True)
class Copy:
    """A file published byte for byte (a packet), never held in memory; `sha256` is what it held
    when the build began, so a file changed while the site was built is refused, not published."""

    source: Path
    sha256: str
    movable: bool = False  # a page rendered into this build's scratch folder: moved in, not copied


Content = bytes | Copy
Files = Mapping[str, Content]


@dataclass(frozen=True)
class Recorded:
    """The current site as the build that wrote it proved it: its snapshot, and the sha256 of each
    of its files (its manifest). While the snapshot holds, every file holds what the manifest says."""

    snapshot: Snapshot
    files: Mapping[str, str]


class Digest(Protocol):
    """sha256 of a file; `st`, its stat when the caller has it (saves a system call)."""

    def __call__(self, path: str | Path, st: os.stat_result | None = None, /) -> str: ...


def safe_target(root: Path, relative: str) -> Path:
    """The absolute path of `relative` under `root`; refuses anything that could escape it."""
    return Targets(root).of(relative)


class Targets:
    """Absolute paths of files under one root, each refused if it could escape the root (a plain
    relative path whose links, if any, resolve inside it). Each folder is resolved once: a site
    has tens of thousands of files in as many folders, and resolving a whole path costs a system
    call per component. Files are only written into a fresh staging folder, where nothing stands
    at their names yet, so only folders are followed."""

    def __init__(self, root: Path) -> None:
        self.base = root.resolve()
        self._folders: dict[str, Path] = {"": self.base}
        self._made: set[Path] = set()

    def of(self, relative: str) -> Path:
        parts = relative.split("/")
        if not relative or relative.startswith("/") or "\\" in relative or any(p in ("", ".", "..") for p in parts):
            raise CatalogError(f"refusing to write {relative!r}: not a plain path inside the output folder")
        return self._folder("/".join(parts[:-1]), relative) / parts[-1]

    def made(self, relative: str) -> Path:
        """`of(relative)`, its folder created (once per folder)."""
        target = self.of(relative)
        if target.parent not in self._made:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(target.parent)
        return target

    def _folder(self, folder: str, relative: str) -> Path:
        found = self._folders.get(folder)
        if found is None:
            parent, _, name = folder.rpartition("/")
            found = self._folders[folder] = self._inside(self._folder(parent, relative) / name, relative)
        return found

    def _inside(self, path: Path, relative: str) -> Path:
        if not path.is_symlink():
            return path
        target = path.resolve()
        if not target.is_relative_to(self.base) or target == self.base:
            raise CatalogError(f"refusing to write {relative!r}: it resolves outside {self.base}")
        return target


def check_output_folder(out: Path, protected: Iterable[Path]) -> None:
    """Refuse an output folder whose replacement would destroy something that is not a built site."""
    resolved = out.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise CatalogError(f"refusing to use {resolved} as the output folder")
    for path in protected:
        p = path.resolve()
        if p == resolved or p.is_relative_to(resolved):
            raise CatalogError(f"refusing to build into {out}: it contains {path}")
    if resolved.exists() and not resolved.is_dir():
        raise CatalogError(f"output {out} exists and is not a folder")
    if resolved.is_dir() and any(resolved.iterdir()) and not (resolved / routes.INDEX).is_file():
        raise CatalogError(f"refusing to replace {out}: it is not empty and does not look like a built site")


def _present(out: Path) -> dict[str, Entry]:
    """Every entry of `out` but its folders, by relative path, with the stat the scan gives."""
    if not out.is_dir():
        return {}
    return {entry.relative: entry for entry in walk(str(out), ordered=False) if entry.kind != "folder"}


def _looked_up(out: Path, relatives: Iterable[str]) -> dict[str, Entry]:
    """The entries of `out` at these relative paths (one stat each, links not followed): cheaper
    than listing every folder of a site where most folders hold a single page."""
    found = {}
    root = str(out)
    for relative in relatives:
        path = os.path.join(root, relative)
        try:
            st = os.lstat(path)
        except OSError:  # absent, or a file where a folder of the path should be
            continue
        found[relative] = Entry(relative, "file" if stat.S_ISREG(st.st_mode) else "odd", path, st)
    return found


def _as_recorded(out: Path, recorded: Recorded) -> tuple[dict[str, Entry], set[str]] | None:
    """When `recorded`'s snapshot of `out` holds (one stat per entry, no folder listed): the files
    it records, with their stats, and every entry of `out` but its folders; None otherwise."""
    stats = recorded.snapshot.entries_if_held(SITE, os.fspath(out))
    if stats is None:
        return None
    root = os.fspath(out)
    present = {
        relative: Entry(relative, "file", os.path.join(root, relative), st)
        for relative, st in stats.items()
        if relative in recorded.files and stat.S_ISREG(st.st_mode)
    }
    return present, {relative for relative, st in stats.items() if not stat.S_ISDIR(st.st_mode)}


def _sha256_of(content: Content) -> str:
    return content.sha256 if isinstance(content, Copy) else hashlib.sha256(content).hexdigest()


def _same(entry: Entry | None, content: Content, digest: Digest | None) -> bool:
    """True when `entry` is a regular file holding `content` (through `digest` when given: a
    fingerprint lookup instead of a read, and the fingerprint is fresh for the next build)."""
    if entry is None or entry.kind != "file" or entry.stat is None:
        return False
    try:
        if isinstance(content, Copy):
            return (digest or _read_digest)(entry.path, entry.stat) == content.sha256
        if entry.stat.st_size != len(content):
            return False
        if digest is not None:
            return digest(entry.path, entry.stat) == hashlib.sha256(content).hexdigest()
        return Path(entry.path).read_bytes() == content
    except OSError:
        return False


def _read_digest(path: str | Path, st: os.stat_result | None = None) -> str:
    return file_sha256(Path(path))


def differences(files: Files, out: Path, *, digest: Digest | None = None) -> list[str]:
    """One line per file that would change: what `--check` reports."""
    present = _present(out)
    lines = []
    for relative in sorted(files):
        if relative not in present:
            lines.append(f"missing: {relative}")
        elif not _same(present[relative], files[relative], digest):
            lines.append(f"differs: {relative}")
    lines += [f"extra: {relative}" for relative in sorted(present.keys() - files.keys())]
    return lines


def _write(target: Path, content: Content, digest: Digest | None = None) -> None:
    """Into `target`, whose folder exists and where nothing stands: an existing file may be
    another name of a published one (a hard link), never to be written through."""
    if isinstance(content, Copy) and content.movable:
        try:
            os.replace(content.source, target)  # same file system: the page is renamed, never copied
            return
        except OSError:
            pass  # another file system: copied and checked below
    if isinstance(content, Copy):
        shutil.copyfile(content.source, target)  # the kernel copies; the bytes never pass through Python
        # With fingerprints, the source is re-hashed only if it was written since it was hashed.
        with _DIGESTING:  # copies run on threads; the fingerprint table is not theirs to share
            copied = digest(content.source) if digest is not None else file_sha256(target)
        if copied != content.sha256:
            raise CatalogError("changed while the site was being built: build again", file=content.source)
    else:
        write_file(target, content)


@dataclass(frozen=True)
class SwapResult:
    """What publishing did: `changed` files hold new bytes; `touched` are every file whose inode
    is new or had its ctime moved (written, or linked from the site replaced), so their
    fingerprints are new. A file neither names is the very inode the replaced site held."""

    changed: int
    touched: frozenset[str] = frozenset()
    settled: Mapping[str, os.stat_result] = field(default_factory=dict)  # stats that still hold: snapshot.of_written


def swap_in(
    files: Files,
    out: Path,
    *,
    digest: Digest | None = None,
    spare: Spare | None = None,
    recorded: Recorded | None = None,
    hashes: Mapping[str, str] | None = None,
) -> SwapResult:
    """Make `out` hold exactly `files`. `digest` (sha256 of a file, e.g. through fingerprints)
    compares files without reading them; `recorded`, while its snapshot still holds, without even
    that (`hashes`: the sha256 of files the caller has taken already, not taken again). An `out`
    that is a link is followed: the folder it names is replaced, the link stays.
    The new site is assembled in a staging folder beside `out` and swapped in whole: with `spare`
    (spare_taken), in the spare, and the site replaced becomes the next spare."""
    out = real_output(out)
    clean_leftovers(out)
    if spare is not None and spare.listing is not None:
        wait([spare.listing])  # the thread listing it would slow every stat below threefold (raises in _replace)
    proven = _as_recorded(out, recorded) if recorded is not None else None
    if proven is not None and recorded is not None:
        present, strays = proven
        taken = hashes or {}
        changed = {r for r in files if r not in present or recorded.files[r] != (taken.get(r) or _sha256_of(files[r]))}
    else:
        present = _looked_up(out, files)
        changed = {r for r in files if not _same(present.get(r), files[r], digest)}
        strays = None
    if not changed and out.is_dir() and not (_present(out).keys() if strays is None else strays) - files.keys():
        return SwapResult(0)
    try:
        return _replace(files, out, present, changed, digest, spare)
    except OSError as error:  # a read-only or special file system, no space, no permission
        raise CatalogError(f"cannot write the site: {error.strerror or error}", file=out) from None


@contextmanager
def spare_taken(out: Path, home: Path) -> Iterator[Spare]:
    """The spare kept at `home` taken for this build (builder/spare.py), until it ends."""
    out = real_output(out)
    staging = _made_beside(out, NEW)
    with borrowed(home, staging, out) as spare:
        yield spare


def _replace(
    files: Files, out: Path, present: dict[str, Entry], changed: set[str], digest: Digest | None, spare: Spare | None
) -> SwapResult:
    out.parent.mkdir(parents=True, exist_ok=True)
    with _staging(out, spare) as staging:
        os.chmod(staging, 0o755)  # noqa: S103 - a published web root is world-readable
        listing = spare.listing.result() if spare is not None and spare.listing is not None else None
        cleared = clear(listing, files, present, changed) if listing is not None else None
        kept = cleared.kept if cleared is not None else set()
        _fill(staging, files, present, changed, kept, digest)
        if not _swap(staging, out, spare):
            seed(out, files, spare)  # no site was replaced to become the next build's spare
    touched = frozenset(files.keys() - kept)
    return SwapResult(len(changed), touched, _settled(cleared, files, touched, present) if cleared else {})


def _settled(
    cleared: Cleared, files: Files, written: frozenset[str], present: dict[str, Entry]
) -> dict[str, os.stat_result]:
    """The stats taken while publishing that still hold for the new site: a file kept in the
    spare is the inode the replaced site held, as its stat then; a folder of the spare nothing
    was added to or removed from, as its listing found it."""
    made = {folder for relative in files for folder in _folders_of(relative)} - cleared.folders.keys()
    altered = cleared.emptied | {r.rpartition("/")[0] for r in written} | {f.rpartition("/")[0] for f in made}
    settled = {f: st for f, st in cleared.folders.items() if st is not None and f not in altered}
    for relative in cleared.kept:
        st = present[relative].stat
        if st is not None:
            settled[relative] = st
    return settled


def _folders_of(relative: str) -> Iterator[str]:
    folder = relative.rpartition("/")[0]
    while folder:
        yield folder
        folder = folder.rpartition("/")[0]


@contextmanager
def _staging(out: Path, spare: Spare | None) -> Iterator[Path]:
    """The taken spare (locked by spare_taken, which gives it back on failure), or a new folder
    beside `out`, locked (which tells a concurrent build's clean_leftovers this one is alive)
    and removed on failure."""
    if spare is not None and spare.folder is not None:
        yield spare.folder
        return
    staging = _made_beside(out, NEW)
    try:
        with _lock_folder(staging):
            yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _fill(
    staging: Path, files: Files, present: dict[str, Entry], changed: set[str], kept: set[str], digest: Digest | None
) -> None:
    """Packets are copied on threads while the rest is written: the kernel does the copying, with
    the GIL released, and a cold build copies thousands of them."""
    with ThreadPoolExecutor(max_workers=COPY_THREADS) as copying:
        copies = [
            copying.submit(_write, target, content, digest)
            for target, content in _written(staging, files, present, changed, kept, digest)
        ]
        for copy in copies:
            copy.result()  # the first error, after every copy has ended


def _written(
    staging: Path,
    files: Files,
    present: dict[str, Entry],
    changed: set[str],
    kept: set[str],
    digest: Digest | None,
) -> Iterator[tuple[Path, Copy]]:
    """Links what is unchanged, writes pages, and yields the packets left to copy."""
    targets = Targets(staging)
    for relative in sorted(files.keys() - kept):
        target = targets.made(relative)
        if relative not in changed:
            try:
                os.link(present[relative].path, target)  # unchanged: share the old file's bytes, no rewrite
                continue
            except OSError:
                pass
        content = files[relative]
        if isinstance(content, Copy) and not content.movable:
            yield target, content
        else:
            _write(target, content, digest)


def _made_beside(out: Path, infix: str) -> Path:
    """A new empty folder beside the site `out` (`.<name><infix>...`), named so clean_leftovers
    knows it for a build's own."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}{infix}", dir=out.parent))
    except OSError as error:  # a read-only or special file system, no space, no permission
        raise CatalogError(f"cannot write the site: {error.strerror or error}", file=out) from None


@contextmanager
def scratch_folder(out: Path) -> Iterator[Path]:
    """A folder beside `out` for pages rendered before the site is assembled (so publishing moves
    them in); locked while this build lives, so a concurrent build's clean_leftovers spares it and
    a killed build's is removed like a staging folder."""
    out = real_output(out)
    scratch = _made_beside(out, f"{NEW}pages-")
    try:
        with _lock_folder(scratch):
            yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ---- the swap: the site is the old one or the new one at every instant, even under SIGKILL ----

NEW, OLD = ".new-", ".old-"  # sibling folders `.site.new-*` (being built) and `.site.old-*` (retired)
AT_FDCWD = -100
RENAME_EXCHANGE = 2


def real_output(out: Path) -> Path:
    """The folder to replace: a link is followed (its target is replaced, the link kept)."""
    return out.resolve() if out.is_symlink() else out


@contextmanager
def _lock_folder(folder: Path) -> Iterator[None]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel however the process ends
        yield
    finally:
        os.close(fd)


def _abandoned(folder: Path) -> bool:
    """True when no live build holds `folder` (the build that made it was killed)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def clean_leftovers(out: Path) -> None:
    """Remove what a killed build left beside `out`: staging folders, and retired sites (one is
    put back first when `out` itself is missing: a build killed mid-swap without renameat2)."""
    parent = out.parent
    if not parent.is_dir():
        return
    for leftover in sorted(parent.glob(f".{glob.escape(out.name)}{OLD}*")) + sorted(
        parent.glob(f".{glob.escape(out.name)}{NEW}*")
    ):
        if not _abandoned(leftover):
            continue
        if OLD in leftover.name and not os.path.lexists(out) and (leftover / routes.INDEX).is_file():
            os.rename(leftover, out)
        else:
            shutil.rmtree(leftover, ignore_errors=True)


def _exchange(staging: Path, out: Path) -> bool:
    """Swap the two folders in one system call (Linux renameat2); False where it is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(AT_FDCWD, os.fsencode(staging), AT_FDCWD, os.fsencode(out), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # an old kernel or a file system that cannot exchange
    raise OSError(code, os.strerror(code), str(out))


def _swap(staging: Path, out: Path, spare: Spare | None = None) -> bool:
    """Put the new site in place; False when there was no site to replace."""
    if not os.path.lexists(out):
        os.rename(staging, out)  # nothing to replace: the new site appears whole
        return False
    if _exchange(staging, out):
        retire(staging, spare)  # it holds the old site now
        return True
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}{OLD}", dir=out.parent))
    retired.rmdir()
    os.rename(out, retired)  # killed before the next line: the next build puts `retired` back
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(retired, out)
        raise
    retire(retired, spare)
    return True
