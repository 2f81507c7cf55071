"""Reading packets: each file verified (catalog/packets/verify.py), the checks against data/
(catalog/checks/cross_check.py) included, on every core when there are many (`read_packets`).

Everything about one packet that no other packet takes part in is done where the packet is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path

from catalog.checks.cross_check import Reference
from catalog.errors import CatalogError
from catalog.files import read_bytes, read_tail
from catalog.forked import forked_map
from catalog.model.packet import Packet
from catalog.packets.keys import KeyRing
from catalog.packets.verify import Staged, Verified, verify
from catalog.store.listing import Listed

PACKETS_PER_WORKER = 8  # below this a worker process costs more than it saves
CHUNK = 32
CREATED_TAIL = 16 << 10  # a packet's keys after `created` (identity, provenance, title, workload) without ladders


@dataclass(frozen=True)
class Read:
    """One file's outcome: the packet (None when its bytes, name or signature did not hold), the
    problems of the packet alone, and those against data/ (`reference_problems`)."""

    packet: Packet | None
    problems: list[CatalogError]
    reference_problems: list[CatalogError]

    @property
    def listed(self) -> Listed | None:
        return Listed.of(self.packet) if self.packet is not None and not self.problems else None


def read_one(
    path: Path,
    keys: KeyRing,
    allow_unsigned: bool,
    reference: Reference | None,
    staged: Staged | None = None,
    *,
    signatures: bool = True,
) -> Read:
    """Verify one packet file, every check, the ones against data/ (`reference`) too, on the whole
    packet. `staged`: its bytes as the caller read them; `signatures` False only where
    data/keys.yaml failed to load (catalog/packets/verify.py)."""
    result = verify(path, keys, allow_unsigned=allow_unsigned, signatures=signatures, reference=reference, read=staged)
    if isinstance(result, Verified):
        return Read(result.packet, [], [])
    return Read(result.packet, result.problems, result.against_data)


def read_packets(
    paths: list[Path], keys: KeyRing, allow_unsigned: bool, reference: Reference | None, *, signatures: bool = True
) -> Iterator[Read]:
    """`read_one` over every path, in order; on every core when there are enough packets."""
    read = partial(read_one, keys=keys, allow_unsigned=allow_unsigned, reference=reference, signatures=signatures)
    return forked_map(read, paths, per_worker=PACKETS_PER_WORKER, chunk=CHUNK)


def created_hint(path: Path) -> datetime | None:
    """The `created` a packet file names, read from its bytes before it is verified: the date
    every page shows must be known before the first page is rendered (builder/assemble.py `load`,
    which checks it against the packets as verified). Canonical bytes sort the key after `arms`
    and before the rest, none of which holds a key of that name, so it is the last one. The last
    CREATED_TAIL bytes are read first, the whole file only where the key is not among them (a
    packet whose ladders follow it): every packet is read so before the first worker starts, and
    reading them whole took 2.3-4.0 s of a cold 1000 x 20 build (bench/FINDINGS.md, 2026-12-07 11:40)."""
    key = b',"created":"'
    try:
        data = read_tail(path, CREATED_TAIL)
        at = data.rfind(key)
        if at < 0 and len(data) == CREATED_TAIL:
            data = read_bytes(path)
            at = data.rfind(key)
    except CatalogError:  # a FIFO would block; verification names what is wrong with it
        return None
    if at < 0:
        return None
    start = at + len(key)
    end = data.find(b'"', start)
    try:
        return datetime.fromisoformat(data[start:end].decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None


__all__ = ["CatalogError", "Read", "created_hint", "read_one", "read_packets"]
