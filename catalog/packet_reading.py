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
from dataclasses import dataclass, replace
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
from catalog.record import record
from catalog.summary import RECORD, KnownDigest, SummaryCache, summarize

PACKETS_PER_WORKER = 8  # below this a worker process costs more than it saves
CHUNK = 32


@dataclass(frozen=True)
class Read:
    """One file's outcome: the packet (whole, a summary, or a record), the problems of the packet
    alone, and those against data/ (kept apart: a duplicate's are not reported); with a record,
    the cache key its summary is kept under."""

    packet: Packet | None
    problems: list[CatalogError]
    reference_problems: list[CatalogError]
    key: str | None = None


# What a worker hands back: a packet, or a cached one's pickled bytes; its problems; its key.
Raw = tuple[Packet | bytes | None, list[CatalogError], list[CatalogError], str | None]


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
    """How this run reads packets; picklable, and inherited by forked workers. With `summaries`
    and a cache, a packet comes back as its record (catalog/record.py) once its summary is in
    the cache, where a packet page reads it back (`Summaries`)."""

    keys: KeyRing
    allow_unsigned: bool = False
    cache: SummaryCache | None = None
    summaries: bool = False
    reference: Reference | None = None
    known: KnownDigest | None = None  # files' sha256 the caller already has (SummaryCache.key)

    def read(self, path: Path) -> Read:
        """One file, in this process."""
        return self.received(path, *self._read(path))

    def received(
        self,
        path: Path,
        packet: Packet | bytes | None,
        problems: list[CatalogError],
        checked: list[CatalogError],
        key: str | None = None,
    ) -> Read:
        """A cached packet's pickled bytes unpickled; bytes that no longer unpickle (an entry from
        another version of a library) are read again, uncached."""
        if isinstance(packet, bytes):
            decoded = SummaryCache.decode(packet)
            if decoded is None:
                return self.uncached().read(path)
            packet = decoded
        return Read(packet, problems, checked, key)

    def uncached(self) -> Reader:
        return replace(self, cache=None, known=None)

    def _read(self, path: Path) -> Raw:
        if not self.summaries or self.cache is None:
            packet, problems = read_verified(path, self.keys, self.allow_unsigned)
            if packet is not None and self.summaries:
                packet = summarize(packet)
            return packet, problems, self._checked(packet, path), None
        cache = self.cache
        try:
            key = cache.key(path, known=self.known)
        except CatalogError as error:
            return None, [error], [], None
        if self.reference is not None and cache.has_verdict(key, self.reference.digest):
            stored = cache.get_bytes(key, RECORD)
            if stored is not None:
                return stored, [], [], key
        stored = cache.get_bytes(key)
        summary = None if stored is None else SummaryCache.decode(stored)
        held = summary is not None
        if summary is None:
            if self.known is not None:  # what is verified and kept is keyed by the bytes read now
                try:
                    key = cache.key(path)
                except CatalogError as error:
                    return None, [error], [], None
            packet, problems = read_verified(path, self.keys, self.allow_unsigned)
            if packet is None or problems:
                summary = None if packet is None else summarize(packet)
                return summary, problems, self._checked(summary, path), None
            summary = summarize(packet)
            held = cache.put(key, summary)
        checked = self._checked(summary, path, key)
        if not held:
            return summary, [], checked, None
        made = record(summary)
        cache.put(key, made, RECORD)
        return made, [], checked, key

    def _checked(self, packet: Packet | None, path: Path, key: str | None = None) -> list[CatalogError]:
        if packet is None or self.reference is None:
            return []
        problems = cross_check(packet, path, self.reference)
        if not problems and key is not None and self.cache is not None:
            self.cache.put_verdict(key, self.reference.digest)
        return problems


@dataclass(frozen=True)
class Summaries:
    """Where a record's summary is read back from: the cache, under the key each record was read
    with. A summary the cache has lost since is read and verified again, and a file that changed
    since the build read it is refused: its pages would disagree with the rest of the site."""

    reader: Reader
    keys: dict[str, str]

    def of(self, packet_id: str, path: Path) -> Packet:
        cache = self.reader.cache
        key = self.keys[packet_id]
        stored = None if cache is None else cache.get_bytes(key)
        found = None if stored is None else SummaryCache.decode(stored)
        if found is not None and found.id == packet_id:
            return found
        if cache is None or cache.key(path, read_bytes(path)) != key:
            raise CatalogError("changed while the site was built: build again", file=path)
        read = self.reader.uncached().read(path)
        if read.packet is None or read.problems or read.packet.id != packet_id:
            raise CatalogError("changed while the site was built: build again", file=path)
        return read.packet


def _read_for_parent(reader: Reader, path: Path) -> Raw:
    """In a worker: a summary or record goes back as pickled bytes, unpickled once, by the caller."""
    packet, problems, checked, key = reader._read(path)
    if isinstance(packet, Packet) and reader.summaries:
        packet = pickle.dumps(packet, protocol=pickle.HIGHEST_PROTOCOL)
    return packet, problems, checked, key


def read_packets(paths: list[Path], reader: Reader) -> Iterator[Read]:
    """`reader.read` over every path, in order; on every core when there are enough packets."""
    read = partial(_read_for_parent, reader)
    for path, raw in zip(paths, forked_map(read, paths, per_worker=PACKETS_PER_WORKER, chunk=CHUNK), strict=True):
        yield reader.received(path, *raw)
