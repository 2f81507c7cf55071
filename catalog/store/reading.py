"""Reading packets: each file verified (catalog/packets/verify.py), and, for
the builder, kept as a summary that a cache holds per content (`read_summary`); on every core
when there are many (`read_packets`).

Everything about one packet that no other packet takes part in is done where the packet is read:
verification and the checks against data/ (catalog/checks/cross_check.py). A worker hands back a summary
as its pickled bytes, so it is unpickled once, in the process that keeps it; a packet verified
before, only as its listing (catalog/store/listing.py), its record and summary left in the cache.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from catalog.checks.cross_check import Reference
from catalog.errors import CatalogError
from catalog.files import read_bytes
from catalog.forked import forked_map
from catalog.model.packet import Packet
from catalog.packets.keys import KeyRing
from catalog.packets.verify import Verified, verify
from catalog.store.cache import LISTED, RECORD, KnownDigest, SummaryCache, summarize, unpickled
from catalog.store.listing import Listed
from catalog.store.record import record

PACKETS_PER_WORKER = 8  # below this a worker process costs more than it saves
CHUNK = 32


@dataclass(frozen=True)
class Read:
    """One file's outcome: the packet (whole, a summary, or a record; None when the cache holds
    it, under `key`), its listing, the problems of the packet alone, and those against data/
    (kept apart: a duplicate's are not reported)."""

    packet: Packet | None
    problems: list[CatalogError]
    reference_problems: list[CatalogError]
    key: str | None = None
    listed: Listed | None = None

    @classmethod
    def of(
        cls, packet: Packet | Listed | None, problems: list[CatalogError], checked: list[CatalogError], key: str | None
    ) -> Read:
        if isinstance(packet, Listed):
            return cls(None, problems, checked, key, packet)
        return cls(packet, problems, checked, key, None if packet is None else Listed.of(packet))


# What a worker hands back: a packet, a cached one's pickled bytes or listing; its problems; its key.
Raw = tuple[Packet | Listed | bytes | None, list[CatalogError], list[CatalogError], str | None]


@dataclass(frozen=True)
class Reader:
    """How this run reads packets; picklable, and inherited by forked workers. With `summaries`
    and a cache, a packet verified before comes back as its listing (catalog/store/listing.py), its
    record (catalog/store/record.py) and summary left in the cache (`Summaries`)."""

    keys: KeyRing
    allow_unsigned: bool = False
    cache: SummaryCache | None = None
    summaries: bool = False
    reference: Reference | None = None
    known: KnownDigest | None = None  # files' sha256 the caller already has (SummaryCache.key)
    listings: Mapping[str, object] | None = None  # SummaryCache.listings for this run's data/
    signatures: bool = True  # False only when data/keys.yaml failed to load (that error fails the load)

    def listed_before(self, path: Path) -> Read | None:
        """The packet as the last load with this data/ listed it, when its content is the same:
        keyed by the sha256 the caller already has, so its file is not even opened."""
        if not self.listings or self.cache is None or self.known is None or not self.summaries:
            return None
        key = self.cache.key_if_known(path, self.known)
        found = self.listings.get(key) if key is not None else None
        return Read(None, [], [], key, found) if isinstance(found, Listed) else None

    def read(self, path: Path) -> Read:
        """One file, in this process."""
        return self.received(path, *self._read(path))

    def received(
        self,
        path: Path,
        packet: Packet | Listed | bytes | None,
        problems: list[CatalogError],
        checked: list[CatalogError],
        key: str | None = None,
    ) -> Read:
        """A summary's pickled bytes unpickled; bytes that no longer unpickle (an entry from
        another version of a library) are read again, uncached."""
        if isinstance(packet, bytes):
            decoded = SummaryCache.decode(packet)
            if decoded is None:
                return self.uncached().read(path)
            packet = decoded
        return Read.of(packet, problems, checked, key)

    def uncached(self) -> Reader:
        return replace(self, cache=None, known=None)

    def _read(self, path: Path) -> Raw:
        if not self.summaries or self.cache is None:
            packet, problems, checked = self._verified(path)
            if packet is not None and self.summaries:
                packet = summarize(packet)
            return packet, problems, checked, None
        cache = self.cache
        try:
            key = cache.key(path, known=self.known)
        except CatalogError as error:
            return None, [error], [], None
        if self.reference is not None and cache.has_verdict(key, self.reference.digest):
            listed = _listed(cache, key)
            if listed is not None:
                return listed, [], [], key
        # No verdict for this data/: the whole file is verified again, since the checks against
        # data/ read every row (the floors, the vocabulary), which a summary no longer holds.
        if self.known is not None:  # what is verified and kept is keyed by the bytes read now
            try:
                key = cache.key(path)
            except CatalogError as error:
                return None, [error], [], None
        packet, problems, checked = self._verified(path)
        if packet is None or problems:
            return (None if packet is None else summarize(packet)), problems, checked, None
        stored = cache.get_bytes(key)
        summary = None if stored is None else SummaryCache.decode(stored)
        held = summary is not None
        if summary is None:
            summary = summarize(packet)
            held = cache.put(key, summary)
        if not checked and self.reference is not None:
            cache.put_verdict(key, self.reference.digest)
        if not held:
            return summary, [], checked, None
        made = record(summary)
        listed = Listed.of(made)
        if cache.put(key, made, RECORD) and cache.put(key, listed, LISTED):
            return listed, [], checked, key  # the rest is read from the cache by whoever needs it
        return made, [], checked, key

    def _verified(self, path: Path) -> tuple[Packet | None, list[CatalogError], list[CatalogError]]:
        """verify(), every check: the packet, its own problems, and those against data/."""
        result = verify(
            path, self.keys, allow_unsigned=self.allow_unsigned, signatures=self.signatures, reference=self.reference
        )
        if isinstance(result, Verified):
            return result.packet, [], []
        return result.packet, result.problems, result.against_data


def _listed(cache: SummaryCache, key: str) -> Listed | None:
    """The listing kept under `key`, made from the record beside it when a cache from before
    listings has none; None when neither is there (the packet is verified again)."""
    found = unpickled(stored) if (stored := cache.get_bytes(key, LISTED)) is not None else None
    if isinstance(found, Listed):
        return found
    held = SummaryCache.decode(stored) if (stored := cache.get_bytes(key, RECORD)) is not None else None
    if held is None:
        return None
    listed = Listed.of(held)
    cache.put(key, listed, LISTED)
    return listed


@dataclass(frozen=True)
class Summaries:
    """Where the cache holds a listed packet's record and summary: under the key each was read
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

    def record(self, packet_id: str, path: Path) -> Packet:
        """The packet's record (catalog/store/record.py); made from its summary if the cache lost it."""
        cache = self.reader.cache
        stored = None if cache is None else cache.get_bytes(self.keys[packet_id], RECORD)
        found = None if stored is None else SummaryCache.decode(stored)
        if found is not None and found.id == packet_id:
            return found
        return record(self.of(packet_id, path))


def _read_for_parent(reader: Reader, path: Path) -> Raw:
    """In a worker: a summary or record goes back as pickled bytes, unpickled once, by the caller."""
    packet, problems, checked, key = reader._read(path)
    if isinstance(packet, Packet) and reader.summaries:  # a listing is small: pickled as it is
        packet = pickle.dumps(packet, protocol=pickle.HIGHEST_PROTOCOL)
    return packet, problems, checked, key


def read_packets(paths: list[Path], reader: Reader) -> Iterator[Read]:
    """`reader.read` over every path, in order; on every core when there are enough packets. A
    packet listed before (`Reader.listed_before`) is taken from the listings without a worker."""
    before = [reader.listed_before(path) for path in paths]
    rest = [path for path, listed in zip(paths, before, strict=True) if listed is None]
    read = partial(_read_for_parent, reader)
    made = zip(rest, forked_map(read, rest, per_worker=PACKETS_PER_WORKER, chunk=CHUNK), strict=True)
    for listed in before:
        if listed is not None:
            yield listed
        else:
            path, raw = next(made)
            yield reader.received(path, *raw)
    for _ in made:  # none is left: this ends the workers
        pass
