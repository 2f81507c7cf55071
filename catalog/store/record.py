"""A packet's record: its summary without the prompt rows, what its family's views read.

A family's views read each packet's identity, arms, server values, gates and canaries (the rest of
the site reads only its listing, catalog/store/listing.py). Of its prompt rows they read only how many a
server has and their prompt sizes (the projection's mean prompt), yet the rows are two thirds of a
summary's memory: 2 GB at 20,000 packets. A record keeps the rest of the summary whole and, in place
of each server's rows, a `RowsElsewhere`: their prompt sizes, one per row, and the fingerprint of
their timings (what tells an independent repeat from the same servers counted twice). It answers `len()` and
`bool()` like the rows did, and refuses to be read row by row, so code that needs the rows fails
loudly instead of seeing none. A packet page reads the whole summary back (Catalog.summary).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from catalog.checks.repeats import timing_fingerprint
from catalog.model.packet import Packet, PromptRow


class RowsNotHeld(LookupError):
    """A record's rows were read row by row: the caller needs the packet's summary."""


@dataclass(frozen=True, slots=True)
class RowsElsewhere:
    """A server's prompt rows, held by the summary cache: here only what a record's readers use."""

    prompt_tokens: tuple[int, ...]  # one per row: their number is the rows'
    timing: str = ""  # the rows' timing fingerprint (catalog/checks/repeats.py), "" for none: repeats compare it

    def __len__(self) -> int:
        return len(self.prompt_tokens)

    def __iter__(self) -> Iterator[PromptRow]:
        raise RowsNotHeld("a packet record holds no prompt rows: read the packet's summary")

    def __getitem__(self, index: object) -> PromptRow:
        raise RowsNotHeld("a packet record holds no prompt rows: read the packet's summary")


def record(summary: Packet) -> Packet:
    """The summary with each server's rows replaced by their prompt sizes (a copy)."""
    arms = [
        arm.model_copy(update={"servers": [s.model_copy(update={"rows": _elsewhere(s.rows)}) for s in arm.servers]})
        for arm in summary.arms
    ]
    return summary.model_copy(update={"arms": arms})


def _elsewhere(rows: Sequence[PromptRow]) -> RowsElsewhere:
    return RowsElsewhere(tuple(row.prompt_tokens for row in rows), timing_fingerprint(rows) or "")


def is_record(packet: Packet) -> bool:
    return any(isinstance(server.rows, RowsElsewhere) for arm in packet.arms for server in arm.servers)


def prompt_sizes(rows: Sequence[PromptRow] | RowsElsewhere) -> list[int]:
    """Each row's prompt tokens, from rows or a record's stand-in."""
    if isinstance(rows, RowsElsewhere):
        return list(rows.prompt_tokens)
    return [row.prompt_tokens for row in rows]
