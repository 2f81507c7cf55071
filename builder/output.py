"""Writing the site: every path checked to stay inside the output folder, the new site assembled
in a temporary sibling folder and swapped in whole, so a failed build leaves the old site intact."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from builder.stamp import file_sha256
from catalog.errors import CatalogError
from catalog.files import write_file


@dataclass(frozen=True)
class Copy:
    """A file published byte for byte (a packet), never held in memory; `sha256` is what it held
    when the build began, so a file changed while the site was built is refused, not published."""

    source: Path
    sha256: str


Content = bytes | Copy
Files = Mapping[str, Content]
Digest = Callable[[Path], str]


def safe_target(root: Path, relative: str) -> Path:
    """The absolute path of `relative` under `root`; refuses anything that could escape it."""
    parts = relative.split("/")
    if not relative or relative.startswith("/") or "\\" in relative or any(p in ("", ".", "..") for p in parts):
        raise CatalogError(f"refusing to write {relative!r}: not a plain path inside the output folder")
    base = root.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base) or target == base:
        raise CatalogError(f"refusing to write {relative!r}: it resolves outside {base}")
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
    if resolved.is_dir() and any(resolved.iterdir()) and not (resolved / "index.html").is_file():
        raise CatalogError(f"refusing to replace {out}: it is not empty and does not look like a built site")


def existing_files(out: Path) -> set[str]:
    if not out.is_dir():
        return set()
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() or p.is_symlink()}


def _same(path: Path, content: Content, digest: Digest | None) -> bool:
    try:
        if not path.is_file() or path.is_symlink():
            return False
        if isinstance(content, Copy):
            return (digest or file_sha256)(path) == content.sha256
        return path.stat().st_size == len(content) and path.read_bytes() == content
    except OSError:
        return False


def differences(files: Files, out: Path, *, digest: Digest | None = None) -> list[str]:
    """One line per file that would change: what `--check` reports."""
    lines = []
    for relative in sorted(files):
        path = out / relative
        if not path.exists():
            lines.append(f"missing: {relative}")
        elif not _same(path, files[relative], digest):
            lines.append(f"differs: {relative}")
    lines += [f"extra: {relative}" for relative in sorted(existing_files(out) - set(files))]
    return lines


def _write(target: Path, content: Content) -> None:
    if isinstance(content, Copy):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(content.source, target)  # the kernel copies; the bytes never pass through Python
        if file_sha256(target) != content.sha256:
            raise CatalogError("changed while the site was being built: build again", file=content.source)
    else:
        write_file(target, content)


def publish(files: Files, out: Path, *, digest: Digest | None = None) -> int:
    """Make `out` hold exactly `files`. Returns how many files changed (0: nothing was touched).
    `digest` (sha256 of a file, e.g. through fingerprints) compares copies without reading them."""
    changed = {r for r in files if not _same(out / r, files[r], digest)}
    if out.is_dir() and not changed and not existing_files(out) - set(files):
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        os.chmod(staging, 0o755)  # noqa: S103 - a published web root is world-readable
        for relative in sorted(files):
            target = safe_target(staging, relative)
            previous = out / relative
            if relative not in changed and previous.is_file():
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(previous, target)  # unchanged: share the old file's bytes, no rewrite
                    continue
                except OSError:
                    pass
            _write(target, files[relative])
        _swap(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return len(changed)


def _swap(staging: Path, out: Path) -> None:
    if not out.exists():
        os.rename(staging, out)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    retired.rmdir()
    os.rename(out, retired)
    try:
        os.rename(staging, out)
    except BaseException:
        os.rename(retired, out)
        raise
    shutil.rmtree(retired, ignore_errors=True)
