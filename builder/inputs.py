"""What a build is a function of, taken by stat: every input file (data, packets, templates and
the code), the options and the libraries; and the stat of every entry of a site.

Content hashes are the identity; reading gigabytes of packets to hash them again on every build is
not. So, like git's index, a file whose stat (size, mtime, ctime, inode) is the one the last build
recorded beside its sha256 (builder/memory.py) holds the bytes it held then: any write moves its
ctime, which no user tool can set back. A file changed just before its stat was recorded (git's
"racy clean" case, `RACY_NS`) is not trusted, and is hashed again next time.

Stdlib only, so a no-op is proven before the heavy imports (pydantic models, plotly, jinja).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from builder.memory import FileSeen, Stat, stat_of
from catalog.files import file_sha256

SOURCE = Path(__file__).resolve().parent.parent
CODE = ("builder", "catalog")
LIBRARIES = ("jinja2", "markupsafe", "markdown-it-py", "plotly", "pydantic", "pyyaml", "orjson")
INPUT_SUFFIXES = frozenset({".json", ".yaml", ".yml"})
# A file whose ctime is this close to the moment its stat was recorded may change again within the
# same tick of the coarse clock file times are set from (a jiffy: at most 10 ms on Linux), unseen.
RACY_NS = 100_000_000


@dataclass(frozen=True)
class Walked:
    """Every input file by "<root>/<relative path>" with its stat, and the entries no stat can
    vouch for (a FIFO, a link, a folder named like an input file, a missing or unreadable folder):
    while there is any, nothing is taken from the last build and the full build judges them."""

    files: dict[str, os.stat_result]
    folders: tuple[str, ...]
    irregular: tuple[str, ...]

    def unchanged_since(self, seen: Mapping[str, FileSeen]) -> bool:
        """True when the files are exactly those `seen`, each with the stat it had then."""
        return seen.keys() == self.files.keys() and all(
            was.stat is not None and was.stat == _fingerprint(self.files[key]) for key, was in seen.items()
        )

    def changed(self, seen: Mapping[str, FileSeen], root: str) -> set[str]:
        """The names of `root`'s files added, removed or changed since `seen`."""
        prefix = root + "/"
        now = {k for k in self.files if k.startswith(prefix)}
        before = {k for k in seen if k.startswith(prefix)}
        moved = {k for k in now & before if seen[k].stat is None or seen[k].stat != _fingerprint(self.files[k])}
        return {k.removeprefix(prefix) for k in (now ^ before) | moved}


def roots(data: Path, packets: Path, templates: Path) -> dict[str, str]:
    return {
        "data": os.fspath(data),
        "packets": os.fspath(packets),
        "templates": os.fspath(templates),
        **{name: os.fspath(SOURCE / name) for name in CODE},
    }


def walk(named: Mapping[str, str]) -> Walked:
    files: dict[str, os.stat_result] = {}
    folders: list[str] = []
    irregular: list[str] = []
    for name, root in named.items():
        if not os.path.isdir(root):
            irregular.append(root)
            folders.append(f"{name}\0missing")
            continue
        code = name in CODE
        for relative, st in _entries(root, irregular):
            key = f"{name}/{relative}"
            if S_ISDIR(st.st_mode):
                if not code:
                    folders.append(key)
                    if os.path.splitext(relative)[1] in INPUT_SUFFIXES:
                        irregular.append(os.path.join(root, relative))
            elif not code or relative.endswith(".py"):
                files[key] = st
    return Walked(files, tuple(sorted(folders)), tuple(irregular))


def _entries(root: str, irregular: list[str], prefix: str = "") -> Iterator[tuple[str, os.stat_result]]:
    """Every entry under `root`, depth first, links not followed; an odd one goes to `irregular`."""
    try:
        with os.scandir(os.path.join(root, prefix)) as listing:
            found = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        irregular.append(os.path.join(root, prefix))
        return
    for entry in found:
        if entry.name == "__pycache__":
            continue
        relative = prefix + entry.name
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            irregular.append(entry.path)
            continue
        if S_ISDIR(st.st_mode):
            yield relative, st
            yield from _entries(root, irregular, relative + "/")
        elif S_ISREG(st.st_mode):
            yield relative, st
        else:
            irregular.append(entry.path)


def _fingerprint(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def seen(walked: Walked, named: Mapping[str, str], before: Mapping[str, FileSeen]) -> dict[str, FileSeen]:
    """Each file's sha256: the one recorded while its stat is the same, else its bytes hashed."""
    now = time.time_ns()
    found: dict[str, FileSeen] = {}
    for key, st in walked.files.items():
        fingerprint = _fingerprint(st)
        was = before.get(key)
        if was is not None and was.stat == fingerprint:
            found[key] = was
            continue
        name, _, relative = key.partition("/")
        sha = file_sha256(Path(named[name], relative))
        found[key] = FileSeen(fingerprint if now - st.st_ctime_ns > RACY_NS else None, sha)
    return found


def settings(base_url: str, allow_unsigned: bool, host_key: bool) -> str:
    """What the output is a function of besides the files: options, library versions, Python; with
    --host-key, the ids of this host's own keys it admits, read from their files, never made (a new
    key is a new site)."""
    host_keys: list[str] = []
    if host_key:
        from catalog.packets.signing import host_public_keys  # only here: a plain no-op imports no signing

        host_keys = sorted(entry.id for entry in host_public_keys())
    options = {
        "base_url": base_url,
        "allow_unsigned": allow_unsigned,  # a local site must not pass for the one a plain build refuses
        "host_keys": host_keys,  # likewise a site showing this host's own, unlisted keys' packets
        "epoch": os.environ.get("SOURCE_DATE_EPOCH", "").strip(),
        "python": list(sys.version_info[:2]),
        "libraries": {library: _version(library) for library in LIBRARIES},
    }
    return hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()


def _version(library: str) -> str:
    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return "absent"


def digests(files: Mapping[str, FileSeen], walked: Walked, settings_hash: str) -> tuple[str, str]:
    """The hash of every input (the manifest's `inputs`), and of every input but the packets
    (`context`: what an incremental rebuild must share with the site it updates)."""
    everything, context = hashlib.sha256(settings_hash.encode()), hashlib.sha256(settings_hash.encode())
    lines = [(key, f"{key}\0file\0{was.sha256}\0") for key, was in files.items()]
    lines += [(key, f"{key}\0folder\0\0") for key in walked.folders]
    for key, line in sorted(lines):
        encoded = line.encode("utf-8", "surrogateescape")
        everything.update(encoded)
        if not key.startswith("packets/"):
            context.update(encoded)
    return everything.hexdigest(), context.hexdigest()


def site_stats(out: Path, relatives: Iterable[str]) -> dict[str, Stat]:
    """The stat of each of these entries of the site ("" the site folder itself) that is there,
    taken by name, links not followed."""
    found: dict[str, Stat] = {}
    root = os.path.join(out, "")  # joined by hand: os.path.join was 0.09 s of a 1 s no-op
    for relative in relatives:
        try:
            found[relative] = stat_of(os.lstat(root + relative) if relative else os.stat(root))
        except OSError:
            continue
    return found


def site_entries(files: list[str]) -> list[str]:
    """The files, every folder above them and the site folder itself (""), each once."""
    entries = {"", *files}
    for relative in files:
        folder = relative.rpartition("/")[0]
        while folder and folder not in entries:
            entries.add(folder)
            folder = folder.rpartition("/")[0]
    return sorted(entries)
