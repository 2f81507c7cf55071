"""Bounds on size: a packet file, its titles, labels and notes are no larger than any honest one.

Every text a packet carries is published on its pages as written, and every byte is read by every
build: a packet far larger than a real campaign, or a title of a megabyte, is an attack on the
readers, not a measurement. The bounds sit well above what the runner and the importers write:
- a packet file: MAX_PACKET_BYTES (the CPU demo's 2 arms × 2 servers × 12 prompts × 512 tokens
  is 279 KB; a 64-user load sweep adds tens of KB);
- a title: MAX_TITLE (the longest committed one is about 130 characters);
- a label (an arm's, a server's, the runtime's, the quantization's, a draft head): MAX_LABEL;
- a note, a reason or a source's description: MAX_NOTE.
A packet reached through a symbolic link that leaves its catalog is refused where packets are
listed (catalog/store/repository.py): a build reads only the catalog it was given.

`text_bound_problems(packet)` returns `(field, message)` problems; the file's size is checked by
catalog/packets/verify.py before a byte of it is read.
"""

from __future__ import annotations

from collections.abc import Iterator

from catalog.model.packet import Packet

Problem = tuple[str, str]

MAX_PACKET_BYTES = 16 * 1024 * 1024
MAX_TITLE = 200
MAX_LABEL = 120
MAX_NOTE = 2000


def _texts(packet: Packet) -> Iterator[tuple[str, str | None, int]]:
    """(field, text, most characters) of every title, label and note a page shows."""
    yield "title", packet.title, MAX_TITLE
    model, runtime, source = packet.identity.model, packet.identity.runtime, packet.provenance.source
    yield "identity.model.quantization_label", model.quantization_label, MAX_LABEL
    yield "identity.model.synthetic_note", model.synthetic_note, MAX_NOTE
    yield "identity.runtime.label", runtime.label, MAX_LABEL
    yield "provenance.tool", packet.provenance.tool, MAX_LABEL
    if source is not None:
        yield "provenance.source.name", source.name, MAX_LABEL
        yield "provenance.source.reference", source.reference, MAX_LABEL
        yield "provenance.source.note", source.note, MAX_NOTE
    for i, arm in enumerate(packet.arms):
        yield f"arms[{i}].label", arm.label, MAX_LABEL
        yield f"arms[{i}].config.draft_head", arm.config.draft_head, MAX_LABEL
        yield f"arms[{i}].note", arm.note, MAX_NOTE
        yield f"arms[{i}].withheld_reason", arm.withheld_reason, MAX_NOTE
        for j, server in enumerate(arm.servers):
            yield f"arms[{i}].servers[{j}].label", server.label, MAX_LABEL
            yield f"arms[{i}].servers[{j}].error", server.error, MAX_NOTE
            yield f"arms[{i}].servers[{j}].log", server.log, MAX_LABEL
        for k, gate in enumerate(arm.gates):
            yield f"arms[{i}].gates[{k}].note", gate.note, MAX_NOTE


def text_bound_problems(packet: Packet) -> list[Problem]:
    return [
        (field, f"is {len(text):,} characters long; a packet's {_kind(most)} holds at most {most:,}")
        for field, text, most in _texts(packet)
        if text is not None and len(text) > most
    ]


def _kind(most: int) -> str:
    return {MAX_TITLE: "title", MAX_LABEL: "label"}.get(most, "note")


def size_problem(size: int) -> str | None:
    """Why a packet file of `size` bytes is refused unread, or None."""
    if size <= MAX_PACKET_BYTES:
        return None
    return (
        f"is {size:,} bytes, over the {MAX_PACKET_BYTES:,} bytes (16 MiB) a packet may hold (a real campaign's is"
        " well under 1 MiB): not read"
    )
