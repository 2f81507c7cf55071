"""Writing the site: every path checked to stay inside the output folder, the new site assembled
in a staging folder beside the old one and swapped in whole (one renameat2 exchange), so a failed
or killed build leaves the old site intact and a reader sees the old site or the new one.

The site a build replaces is kept in the cache as the spare (`Cache.spare`): the next build that
keeps most of the site assembles its new site in it, so that a rebuild adding one packet at 1000 x
20 makes a handful of files instead of 21,000 folders and 63,000 links (15 s on this machine's disk
when it is busy: bench/FINDINGS.md). Nothing in the spare is trusted: a file stays only when it is
the very inode the current site holds at that path (which the build proved unchanged), anything
else is removed. A first site leaves a spare made from it (`seed`) for the same reason.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import glob
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from builder import routes
from builder.inputs import site_entries
from catalog.errors import CatalogError
from catalog.files import file_sha256

NEW, OLD = ".new-", ".old-"  # sibling folders `.site.new-*` (being built) and `.site.old-*` (retired)
AT_FDCWD = -100
RENAME_EXCHANGE = 2


class Targets:
    """Absolute paths of files under one root, each refused if it could escape the root (a plain
    relative path whose links, if any, resolve inside it). Each folder is resolved once: a site
    has tens of thousands of files in as many folders, and resolving a whole path costs a system
    call per component."""

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
        """`of(relative)`, its folder created (once per folder; a file in its way is removed)."""
        target = self.of(relative)
        if target.parent not in self._made:
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
            except FileExistsError:  # a file where a folder belongs (an odd spare): replaced
                _remove(_blocking(target.parent))
                target.parent.mkdir(parents=True, exist_ok=True)
            self._made.add(target.parent)
        return target

    def _folder(self, folder: str, relative: str) -> Path:
        found = self._folders.get(folder)
        if found is None:
            parent, _, name = folder.rpartition("/")
            found = self._folder(parent, relative) / name
            if found.is_symlink():
                found = found.resolve()
                if not found.is_relative_to(self.base) or found == self.base:
                    raise CatalogError(f"refusing to write {relative!r}: it resolves outside {self.base}")
            self._folders[folder] = found
        return found


def _blocking(folder: Path) -> Path:
    """The first path above (and including) `folder` that is not a folder."""
    for parent in reversed([folder, *folder.parents]):
        if parent.exists() and not parent.is_dir():
            return parent
    return folder


def _remove(path: Path | str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        with suppress(FileNotFoundError):
            os.unlink(path)


def _write(target: Path, content: bytes) -> None:
    """A new file at `target`, in a folder that exists. What stands there already is removed, never
    written through: in a spare it may be another name of a published file (a hard link)."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        _remove(target)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
    except OSError as error:  # as catalog.files says it: no space left, ...
        raise CatalogError(f"cannot write: {error.strerror or error}", file=target) from None


def stage(target: Path, source: Path) -> os.stat_result:
    """`source` (a packet) at `target`: linked when both are on one file system, so publishing
    5.5 GB of packets copies nothing; copied otherwise. Returns the staged file's stat: the file
    the build then reads and verifies is the one it publishes, and a change to it before the swap
    (an edit through the link) is caught by that stat (builder/build.py). Left as it is when it
    is `source` already (a file kept from the site: linking again would only move its ctime)."""
    with suppress(OSError):
        there = os.lstat(target)
        if os.path.samestat(there, os.stat(source)):
            return there
    with suppress(FileNotFoundError):
        _remove(target)
    try:
        os.link(source, target, follow_symlinks=True)  # a packet that is a link: the file it names
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        shutil.copyfile(source, target)  # another file system: the kernel copies
    return os.lstat(target)


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


# ---- the staging folder: new, or the spare taken ----


@contextmanager
def staging(out: Path, spare: Path) -> Iterator[Path]:
    """A folder beside `out` to assemble the new site in, locked while this build lives (so a
    concurrent build's clean_leftovers spares it): the spare moved there, unless another build
    holds it or it cannot move (another file system). A spare taken goes back if the build fails;
    a new folder is removed."""
    folder = _made_beside(out, NEW)
    fd = _locked(spare)
    if fd is not None and not _moved(spare, folder):
        os.close(fd)
        fd = None
    taken = fd is not None
    if fd is None:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel however the process ends
    try:
        yield folder
    except BaseException:
        if not (taken and _moved(folder, spare)):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        os.close(fd)


def _locked(folder: Path) -> int | None:
    """`folder` opened and locked; None when it cannot be opened or another build holds it."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError:
        os.close(fd)
        return None


def keep_only(folder: Path, kept: Mapping[str, tuple[str, int]]) -> None:
    """Make `folder` (the staging folder) hold exactly the `kept` files (relative path -> the
    current site's file and its inode), each that very inode, and the folders above them: a file
    that is another is removed and the site's linked there; everything else is removed."""
    needed = set(site_entries(list(kept))) - kept.keys()  # the folders above the kept files
    present: set[str] = set()
    stack = [""]
    while stack:
        prefix = stack.pop()
        with os.scandir(os.path.join(folder, prefix)) as listing:
            entries = list(listing)
        for entry in entries:
            relative = prefix + entry.name
            if entry.is_dir(follow_symlinks=False) and relative in needed:
                stack.append(relative + "/")
            elif entry.is_file(follow_symlinks=False) and kept.get(relative, ("", -1))[1] == entry.inode():
                present.add(relative)
            else:
                _remove(entry.path)
    targets = Targets(folder)
    for relative in sorted(kept.keys() - present):
        os.link(kept[relative][0], targets.made(relative))


def _made_beside(out: Path, infix: str) -> Path:
    """A new empty folder beside the site `out` (`.<name><infix>...`), named so clean_leftovers
    knows it for a build's own."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}{infix}", dir=out.parent))
    except OSError as error:  # a read-only or special file system, no space, no permission
        raise CatalogError(f"cannot write the site: {error.strerror or error}", file=out) from None


# ---- the swap: the site is the old one or the new one at every instant, even under SIGKILL ----


def publish(folder: Path, out: Path, spare: Path) -> None:
    """Swap the assembled site in. The site it replaced becomes the spare (or, when the spare's
    place is taken, is removed); a site that replaced none leaves a spare made from it."""
    os.chmod(folder, 0o755)  # noqa: S103 - a published web root is world-readable
    if _swap(folder, out):
        with suppress(OSError):
            spare.parent.mkdir(parents=True, exist_ok=True)
        if not _moved(folder, spare):
            shutil.rmtree(folder, ignore_errors=True)
    else:
        seed(out, spare)


def seed(site: Path, spare: Path) -> None:
    """The spare made from `site`: its folders made again and its files linked (the same inodes),
    so the next build, a rebuild of a few pages, makes neither. Skipped when a spare is there
    already; on a failure (another file system) none is left."""
    try:
        spare.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(spare)
    except OSError:
        return
    try:
        for root, folders, files in os.walk(site):
            into = os.path.join(spare, os.path.relpath(root, site))
            for name in folders:
                os.mkdir(os.path.join(into, name))
            for name in files:
                os.link(os.path.join(root, name), os.path.join(into, name))
    except OSError:
        shutil.rmtree(spare, ignore_errors=True)


def _moved(folder: Path, to: Path) -> bool:
    try:
        os.rename(folder, to)
        return True
    except OSError:
        return False


def clean_leftovers(out: Path) -> None:
    """Remove what a killed build left beside `out`: staging folders, and retired sites (one is
    put back first when `out` itself is missing: a build killed mid-swap without renameat2)."""
    prefix = f".{glob.escape(out.name)}"  # a missing parent folder globs nothing
    for leftover in [*sorted(out.parent.glob(prefix + OLD + "*")), *sorted(out.parent.glob(prefix + NEW + "*"))]:
        fd = _locked(leftover)  # none: a live build holds it
        if fd is None:
            continue
        os.close(fd)
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


def _swap(staging: Path, out: Path) -> bool:
    """Put the new site in place, the old one left at `staging`; False when there was none."""
    if not os.path.lexists(out):
        os.rename(staging, out)  # nothing to replace: the new site appears whole
        return False
    if _exchange(staging, out):
        return True
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}{OLD}", dir=out.parent))
    retired.rmdir()
    os.rename(out, retired)  # killed before the next line: the next build puts `retired` back
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(retired, out)
        raise
    os.rename(retired, staging)
    return True


def differences(built: Mapping[str, str], out: Path) -> list[str]:
    """One line per file of the site in `out` that would change (`built`: relative path -> sha256):
    what `--check` reports."""
    found = [Path(root, name) for root, _, names in os.walk(out) for name in names]
    sha256_of = {path.relative_to(out).as_posix(): file_sha256(path) for path in found}
    lines = [
        f"{'differs' if relative in sha256_of else 'missing'}: {relative}"
        for relative in sorted(built)
        if sha256_of.get(relative) != built[relative]
    ]
    return lines + [f"extra: {relative}" for relative in sorted(sha256_of.keys() - built.keys())]
