"""Reading packets: each file's bytes, signature and evidence checked (`read_verified`), and, for
the builder, kept as a summary that a cache holds per content (`read_summary`); on every core
when there are many (`read_packets`).

Everything about one packet that no other packet takes part in is done where the packet is read:
verification and the checks against data/ (catalog/cross_check.py). A worker hands back a summary
as its pickled bytes, straight from the cache when the content was verified before, so it is
unpickled once, in the process that keeps it.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from catalog.consistency import packet_problems
from catalog.cross_check import Reference, cross_check, located
from catalog.errors import CatalogError, CatalogErrors
from catalog.evidence import evidence_problems
from catalog.forked import forked_map
from catalog.keys import KeyRing
from catalog.packet import Packet
from catalog.packet_io import read_bytes, read_packet
from catalog.summary import SummaryCache, summarize

PACKETS_PER_WORKER = 8  # below this a worker process costs more than it saves
CHUNK = 32


@dataclass(frozen=True)
class Read:
    """One file's outcome: the packet (whole, or a summary), the problems of the packet alone, and
    those against data/ (kept apart: a duplicate's are not reported)."""

    packet: Packet | None
    problems: list[CatalogError]
    reference_problems: list[CatalogError]


def read_verified(
    path: Path, keys: KeyRing | None = None, allow_unsigned: bool = False, now: datetime | None = None
) -> tuple[Packet | None, list[CatalogError]]:
    """Read one packet, check its bytes and signature, re-derive its evidence and check it is
    consistent in itself: the costly part of loading, independent of every other file."""
    try:
        packet = read_packet(path, keys or KeyRing.empty(), allow_unsigned=allow_unsigned)
    except CatalogErrors as many:
        return None, many.errors
    except CatalogError as error:
        return None, [error]
    evidence = evidence_problems(packet) if packet.provenance.kind == "measured" else []
    reported = {where for where, _ in evidence}  # a gate evidence cannot pair is not reported twice
    consistency = [p for p in packet_problems(packet, now or datetime.now(UTC)) if p[0] not in reported]
    return packet, located([*evidence, *consistency], path)


@dataclass(frozen=True)
class Reader:
    """How this run reads packets; picklable, and inherited by forked workers."""

    keys: KeyRing
    allow_unsigned: bool = False
    cache: SummaryCache | None = None
    summaries: bool = False
    reference: Reference | None = None

    def read(self, path: Path) -> Read:
        """One file, in this process."""
        packet, problems, checked = self._read(path)
        return self.received(path, packet, problems, checked)

    def received(
        self, path: Path, packet: Packet | bytes | None, problems: list[CatalogError], checked: list[CatalogError]
    ) -> Read:
        """A summary's pickled bytes unpickled; bytes that no longer unpickle (a cache entry from
        another version of a library) are read again, uncached."""
        if isinstance(packet, bytes):
            summary = SummaryCache.decode(packet)
            if summary is None:
                return Reader(self.keys, self.allow_unsigned, None, self.summaries, self.reference).read(path)
            packet = summary
        return Read(packet, problems, checked)

    def _read(self, path: Path) -> tuple[Packet | bytes | None, list[CatalogError], list[CatalogError]]:
        """A summary comes back as its pickled bytes when they are at hand (cached)."""
        if not self.summaries:
            packet, problems = read_verified(path, self.keys, self.allow_unsigned)
            return packet, problems, self._checked(packet, path)
        cache = self.cache
        key = None
        if cache is not None:
            try:
                key = cache.key(path, read_bytes(path))
            except CatalogError as error:
                return None, [error], []
            stored = cache.get_bytes(key)
            if stored is not None:
                if self.reference is not None and cache.has_verdict(key, self.reference.digest):
                    return stored, [], []
                summary = SummaryCache.decode(stored)
                if summary is not None:
                    return stored, [], self._checked(summary, path, key)
        packet, problems = read_verified(path, self.keys, self.allow_unsigned)
        if packet is None:
            return None, problems, []
        summary = summarize(packet)
        if cache is not None and key is not None and not problems:
            cache.put(key, summary)
        return summary, problems, self._checked(summary, path, key if not problems else None)

    def _checked(self, packet: Packet | None, path: Path, key: str | None = None) -> list[CatalogError]:
        if packet is None or self.reference is None:
            return []
        problems = cross_check(packet, path, self.reference)
        if not problems and key is not None and self.cache is not None:
            self.cache.put_verdict(key, self.reference.digest)
        return problems


def _read_for_parent(
    reader: Reader, path: Path
) -> tuple[Packet | bytes | None, list[CatalogError], list[CatalogError]]:
    """In a worker: a summary goes back as pickled bytes, unpickled once, by the caller."""
    packet, problems, checked = reader._read(path)
    if isinstance(packet, Packet) and reader.summaries:
        packet = pickle.dumps(packet, protocol=pickle.HIGHEST_PROTOCOL)
    return packet, problems, checked


def read_packets(paths: list[Path], reader: Reader) -> Iterator[Read]:
    """`reader.read` over every path, in order; on every core when there are enough packets."""
    read = partial(_read_for_parent, reader)
    for path, (packet, problems, checked) in zip(
        paths, forked_map(read, paths, per_worker=PACKETS_PER_WORKER, chunk=CHUNK), strict=True
    ):
        yield reader.received(path, packet, problems, checked)
