"""Family views, made once per content: a family's view (with its warnings and JSON API file) kept
in the user's cache folder under a key that covers everything the view is a function of.

That is: everything but the packets (data, templates, the code, library versions and options:
`stamp.Inputs.context`), the build date, the family's slug, and the content of each of its
packets and of every packet reproducing one of them (their summary-cache keys, which cover the
bytes, the signature, the key ring and the verifier). Any change is another key, so an entry is
never stale, and a build that adds one packet makes only that family's view again. A build that
cannot name all of that (no context: `--check`; a packet with no cache key: `--no-cache`) makes
every view and keeps none. Entries are pickles, trusted like the summary cache beside them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from catalog.store.cache import cache_root, store_pickled, unpickled
from catalog.store.repository import Catalog

FOLDER = "views"
VIEW = "view"  # a family's whole view, beside its entry (builder/families.py)


@dataclass(frozen=True)
class ViewCache:
    root: Path
    context: str

    @classmethod
    def for_build(cls, context: str, build_date: str, with_api: bool) -> ViewCache | None:
        if not context:
            return None
        line = f"{context}\0{build_date}\0{with_api}"
        return cls(cache_root().parent / FOLDER, hashlib.sha256(line.encode()).hexdigest())

    def key(self, slug: str, catalog: Catalog) -> str | None:
        """The family's key; None when one of its packets has no content key (held whole, uncached)."""
        if catalog.summaries is None:
            return None
        packets = catalog.family_ids(slug)
        content = catalog.summaries.keys
        involved = packets + catalog.reproduction_ids(packets)
        if any(packet_id not in content for packet_id in involved):
            return None
        line = "\0".join([self.context, slug, *(f"{i}={content[i]}" for i in involved)])
        return hashlib.sha256(line.encode()).hexdigest()

    def _file(self, key: str, kind: str) -> Path:
        return self.root / key[:2] / f"{key}.{kind or 'pickle'}"

    def get(self, key: str, kind: str = "") -> object | None:
        """The entry (`kind`: what is kept beside it), or None (absent, or unreadable: made again)."""
        try:
            return unpickled(self._file(key, kind).read_bytes())
        except OSError:
            return None

    def put(self, key: str, made: object, kind: str = "") -> bool:
        """Whether it was kept."""
        return store_pickled(self._file(key, kind), made)
