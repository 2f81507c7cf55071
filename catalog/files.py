"""The one way files are written (whole or not at all) and read, and the one way a file's sha256 is taken."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

from catalog.errors import CatalogError

CHUNK = 1 << 20


def write_file(
    path: Path, content: str | bytes, *, mode: int = 0o644, overwrite: bool = True, durable: bool = True
) -> None:
    """Write atomically: a temporary file in the same folder, then renamed over `path` (or, with
    `overwrite` False, linked to it: FileExistsError when another process wrote it first).

    A crash or a full disk leaves either the old file or the new one, never a partial one; a
    failed write is a CatalogError naming the file and the reason (no space left, ...).
    `durable` syncs the bytes to disk before the rename; a cache entry, which only makes the next
    build faster, skips it."""
    try:
        _write_atomically(path, content, mode, overwrite, durable)
    except FileExistsError:
        if overwrite:
            raise CatalogError("cannot write: the file exists", file=path) from None
        raise
    except OSError as error:
        raise CatalogError(f"cannot write: {error.strerror or error}", file=path) from None


def _write_atomically(path: Path, content: str | bytes, mode: int, overwrite: bool, durable: bool) -> None:
    data = content.encode("utf-8") if isinstance(content, str) else content
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode != 0o600:
            os.chmod(tmp_name, mode)
        if overwrite:
            os.replace(tmp_name, path)
        else:
            os.link(tmp_name, path)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


def read_tail(path: Path, size: int) -> bytes:
    """A regular file's last `size` bytes (all of them when it is shorter); errors as `read_bytes`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens without blocking, and is refused
    except OSError as error:
        raise CatalogError(f"cannot read: {error.strerror}", file=path) from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise CatalogError("not a regular file", file=path)
        start = max(found.st_size - size, 0)
        return os.pread(fd, found.st_size - start, start)
    except OSError as error:
        raise CatalogError(f"cannot read: {error.strerror}", file=path) from None
    finally:
        os.close(fd)


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes (a FIFO would block the read for ever); a CatalogError naming the
    file when it cannot be read."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise CatalogError("not a regular file", file=path)
        return path.read_bytes()
    except OSError as error:
        raise CatalogError(f"cannot read: {error.strerror}", file=path) from None


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, hex, read a block at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
