"""Fast no-op rebuilds: a manifest in the output records a hash of every input and of every file
written. When both still match, the build has nothing to do and skips loading and rendering.

Stdlib only, so the check runs before the heavy imports (pydantic models, plotly, jinja).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib import metadata
from pathlib import Path

MANIFEST = ".catalog-build.json"
SOURCE = Path(__file__).resolve().parent.parent
LIBRARIES = ("jinja2", "markupsafe", "markdown-it-py", "plotly", "pydantic", "pyyaml")


def _files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def input_hash(data: Path, packets: Path, templates: Path, base_url: str) -> str:
    """Everything the output is a function of: inputs, templates, the code, library versions, options."""
    digest = hashlib.sha256()
    roots = {
        "data": data,
        "packets": packets,
        "templates": templates,
        "builder": SOURCE / "builder",
        "catalog": SOURCE / "catalog",
    }
    for name, root in roots.items():
        for path in _files(root):
            if root in (SOURCE / "builder", SOURCE / "catalog") and path.suffix != ".py":
                continue
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    for library in LIBRARIES:
        try:
            version = metadata.version(library)
        except metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{library}={version}\0".encode())
    options = {
        "base_url": base_url,
        "epoch": os.environ.get("SOURCE_DATE_EPOCH", "").strip(),
        "python": list(sys.version_info[:2]),
    }
    digest.update(json.dumps(options, sort_keys=True).encode())
    return digest.hexdigest()


def manifest(inputs: str, files: dict[str, bytes], warnings: list[str]) -> bytes:
    body = {
        "inputs": inputs,
        "files": {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())},
        "warnings": warnings,
    }
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def unchanged(out: Path, inputs: str) -> list[str] | None:
    """The recorded warnings when `out` was built from exactly these inputs and no file in it has
    been touched since; None when a real build is needed."""
    try:
        recorded = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        if recorded.get("inputs") != inputs:
            return None
        expected: dict[str, str] = recorded["files"]
        present = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() or p.is_symlink()}
        if present != set(expected) | {MANIFEST}:
            return None
        for relative, sha in expected.items():
            path = out / relative
            if path.is_symlink() or hashlib.sha256(path.read_bytes()).hexdigest() != sha:
                return None
        return [str(w) for w in recorded.get("warnings", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
