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
An arm label also says no other configuration than the arm's config (`_configured`): a card count
("2 cards", "TP2", "eight GPUs"), a speculative depth or range of depths ("depth 3", "depths 0-6"),
"no speculative decoding" or "oracle" of a speculative arm, or a speculative method word (n-gram,
MTP, EAGLE, ...) that is not the arm's. Words are compared after NFKC normalisation, so full-width
letters do not slip past.

`text_bound_problems(packet)` returns `(field, message)` problems, claims included; the file's
size is checked by catalog/packets/verify.py before a byte of it is read.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from catalog.model.packet import Arm, Packet, State
from catalog.projection.precision import DRAFT_INT4_ENV

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
        why = _claimed(arm.label, {arm.state.value, *transcribed}, "the arm") or _configured(arm.label, arm)
        if why:
            found.append((f"arms[{index}].label", why))
        if arm.config.draft_head is not None and (why := _draft_head_claims(arm.config.draft_head, arm)):
            found.append((f"arms[{index}].config.draft_head", why))
        if why := _int4_head_switch(arm):
            found.append((f"arms[{index}].config.env", why))
    return found


def _int4_head_switch(arm: Arm) -> str | None:
    """Why an arm whose label or draft head names the draft's INT4 head lacks the switch that
    makes it, or None (reported on the environment: either side may be the one that is wrong)."""
    if arm.config.env.get(DRAFT_INT4_ENV) == "1":
        return None
    for field, text in (("label", arm.label), ("config.draft_head", arm.config.draft_head or "")):
        if found := _INT4_HEAD.search(unicodedata.normalize("NFKC", text)):
            return f"sets no {DRAFT_INT4_ENV}=1, but the arm's {field} names {found.group(0)!r}"
    return None


_COUNTS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
_CARDS = re.compile(r"\b(\d+|" + "|".join(_COUNTS) + r")\s+(?:cards?|GPUs?)\b", re.IGNORECASE)
_TP = re.compile(r"\bTP\s*=?\s*(\d+)\b", re.IGNORECASE)
_DEPTH = re.compile(r"\bdepths?\s*=?\s*(\d+)(?:\s*[-–]\s*(\d+))?\b", re.IGNORECASE)
_NO_SPECULATION = re.compile(r"\bno\s+speculati(?:ve|on)\b|\boracle\b", re.IGNORECASE)
# Speculative methods by the word a label names them with (vLLM 0.32's SpeculativeMethod,
# vllm/config/speculative.py:38-83: every *_mtp model type is MTP, eagle3 is an EAGLE, ngram_gpu an n-gram)
_METHOD_FAMILIES = ("ngram", "eagle", "mtp", "medusa", "suffix", "dflash", "dspark")
_METHOD_WORD = re.compile(r"\b(n-?gram|mtp|eagle-?3?|medusa|suffix|dflash|dspark)\b", re.IGNORECASE)
# The draft's INT4 lm_head is the XPU stack's switch (catalog/projection/precision.py): physics and
# projections read the switch, so a label or draft head naming it must have it set.
_INT4_HEAD = re.compile(r"\bINT4\b[\w\s-]{0,24}?\bheads?\b|\bheads?\b[\w\s-]{0,24}?\bINT4\b", re.IGNORECASE)


def _method_family(method: str) -> str:
    """The method a label's word or a config's method names: each *_mtp is MTP, eagle3 an EAGLE."""
    lowered = method.lower().replace("-", "")
    return next((family for family in _METHOD_FAMILIES if family in lowered), lowered)


def _configured(label: str, arm: Arm) -> str | None:
    """Why an arm's label claims another configuration than the arm's own (its card count, its
    speculative method and depth, or none), or None: the page shows the label beside the arm's
    figures, so it may only say what the arm's config says."""
    plain = unicodedata.normalize("NFKC", label)
    config = arm.config
    tp, depth, method = config.tensor_parallel_size, config.spec_depth, config.spec_method
    for match in [*_CARDS.finditer(plain), *_TP.finditer(plain)]:
        said = match.group(1).lower()
        if _COUNTS.get(said, int(said) if said.isdigit() else 0) != tp:
            cards = f"{tp} card{'s' if tp != 1 else ''}"
            return f"claims {match.group(0)!r}; the arm runs on {cards} (config.tensor_parallel_size)"
    for match in _DEPTH.finditer(plain):
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if not low <= depth <= high:
            return f"claims {match.group(0)!r}; the arm's speculative depth is {depth} (config.spec_depth)"
    if depth and (found := _NO_SPECULATION.search(plain)):
        return f"claims {found.group(0)!r}; the arm decodes speculatively at depth {depth} (config.spec_depth)"
    for match in _METHOD_WORD.finditer(plain):
        if method is None or _method_family(match.group(1)) != _method_family(method):
            runs = f"runs {method!r}" if method else "runs no speculative method"
            return f"claims {match.group(0)!r}; the arm {runs} (config.spec_method)"
    return None


def _draft_head_claims(head: str, arm: Arm) -> str | None:
    """A draft head is a speculative arm's, and says no other configuration than its own."""
    if not arm.config.spec_depth:
        return "names a draft head; the arm decodes without speculation (config.spec_depth 0)"
    return _configured(head, arm)


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
