"""The one way files are written: whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from catalog.errors import CatalogError


def write_file(path: Path, content: str | bytes) -> None:
    """Write atomically: a temporary file in the same folder, fsync, then rename over `path`.

    A crash or a full disk leaves either the old file or the new one, never a partial one; a
    failed write is a CatalogError naming the file and the reason (no space left, ...)."""
    try:
        _write_atomically(path, content)
    except OSError as error:
        raise CatalogError(f"cannot write: {error.strerror or error}", file=path) from None


def _write_atomically(path: Path, content: str | bytes) -> None:
    data = content.encode("utf-8") if isinstance(content, str) else content
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
