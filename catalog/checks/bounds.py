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

A title or an arm label is shown beside the badges the site derives (the state, the evidence
grade), so it may not impersonate them (`claim_problems`): it names no grade ("grade A" to
"grade D", or "Evidence A", the grade badge's words, in any case) and no state word that the
packet (for a title: its state or one of its arms') or the arm (for a label: its own state) does
not have: measured, imported, screened, withheld, verified ("verified" only of a measured arm;
"imported" also of a screened or withheld transcription, which came from a source too).
Words are compared after NFKC normalisation, so full-width letters do not slip past.

`text_bound_problems(packet)` returns `(field, message)` problems, claims included; the file's
size is checked by catalog/packets/verify.py before a byte of it is read.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from catalog.model.packet import Packet, State

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
    too_long = [
        (field, f"is {len(text):,} characters long; a packet's {_kind(most)} holds at most {most:,}")
        for field, text, most in _texts(packet)
        if text is not None and len(text) > most
    ]
    return [*too_long, *claim_problems(packet)]


# A grade in words ("grade A", "Grade-b", "GRADE: C") or as the grade badge writes it ("Evidence A").
_GRADE = re.compile(r"\b(?:(?i:grade)\W{1,3}[a-dA-D]|(?i:evidence)\W{1,3}[A-D])\b")
_STATE_WORD = re.compile(r"\b(measured|imported|screened|withheld|verified)\b", re.IGNORECASE)
VERIFIED = "verified"  # said only of a measured arm: its outputs were checked against the oracle here


def _claimed(text: str, states: set[str], whose: str) -> str | None:
    """Why `text` impersonates a grade or a state outside `states` (what `whose` has), or None."""
    plain = unicodedata.normalize("NFKC", text)
    grade = _GRADE.search(plain)
    if grade:
        return f"claims {grade.group(0)!r}: a grade is derived from the evidence, never written in a title or label"
    for match in _STATE_WORD.finditer(plain):
        word = match.group(1).lower()
        if (State.MEASURED.value in states) if word == VERIFIED else (word in states):
            continue
        had = ", ".join(sorted(states))
        return (
            f"claims {match.group(1)!r}, a state {whose} does not have (it is {had})"
            + (": only a measured arm is verified" if word == VERIFIED else "")
            + "; the page shows the state as a badge"
        )
    return None


def claim_problems(packet: Packet) -> list[Problem]:
    """Each title or arm label that names a grade, or a state its packet or arm does not have."""
    found = []
    # "imported" is also true of where a screened or withheld transcription came from: not measured here
    transcribed = {State.IMPORTED.value} if packet.provenance.kind != "measured" else set()
    packet_states = {packet.state.value, *(arm.state.value for arm in packet.arms), *transcribed}
    why = _claimed(packet.title, packet_states, "the packet")
    if why:
        found.append(("title", why))
    for index, arm in enumerate(packet.arms):
        why = _claimed(arm.label, {arm.state.value, *transcribed}, "the arm")
        if why:
            found.append((f"arms[{index}].label", why))
    return found


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
