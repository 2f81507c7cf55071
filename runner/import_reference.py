"""Seal figures transcribed from a published catalog page into `imported` packets.

The transcription file (data/imports/*.yaml) holds only what the source printed; this module adds
nothing but structure: states are derived by the shared rules, and every packet says where its
numbers come from.

An arm marked `identity_published: false` is one whose speed the source printed but whose identity
(G3) outcome it did not: it carries no gate and no withheld reason (the importer refuses one that
does, so no count is ever borrowed from a neighbouring arm), and it is sealed into a companion
*screened* packet, speed only, beside the imported one.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from catalog.model.base import StrictModel
from catalog.model.packet import IDENTITY_NOT_PUBLISHED, ArmParts, Packet, PacketParts, RuntimeIdentity
from catalog.packets.seal import made_from, seal, write_packet
from catalog.packets.signing import HostKey
from catalog.store.documents import load_file

SPEC_METHOD = "mtp"
INT4_DRAFT_HEAD_ENV = {"VLLM_XPU_DRAFT_LM_HEAD_INT4": "1"}


class TranscribedGate(StrictModel):
    gate: str
    passed: bool
    exact: int | None = None
    total: int = 12
    against: str | None = None
    note: str | None = None


class TranscribedArm(StrictModel):
    id: str
    tp: int
    depth: int
    draft_head: str | None = None
    servers: list[float] = Field(max_length=2)
    published_figure: float | None = None
    oracle: list[float] = []
    ttft_ms: list[float] = []
    gates: list[TranscribedGate] = []
    withheld_reason: str | None = None
    note: str | None = None
    identity_published: bool = True

    @model_validator(mode="after")
    def _nothing_invented(self) -> TranscribedArm:
        if not self.identity_published and (self.gates or self.withheld_reason):
            raise ValueError(
                f"arm {self.id!r}: identity_published is false, so it carries no gate and no withheld_reason "
                "(the source printed no outcome for it)"
            )
        return self


class TranscribedPacket(StrictModel):
    reference: str | None
    title: str
    model: dict[str, Any]
    card_count: int
    note: str | None = None
    arms: list[TranscribedArm]


class TranscribedSource(StrictModel):
    name: str
    note: str
    # the day the source printed its figures (the latest it can have, when it prints none) and the day
    # they were read for this transcription: an imported packet is judged as of them (catalog/checks/dates.py)
    published: date
    retrieved: date


class TranscribedWorkload(StrictModel):
    suite_id: str
    max_tokens: int
    temperature: float


class Transcription(StrictModel):
    schema_version: int
    source: TranscribedSource
    runtime: RuntimeIdentity
    workload: TranscribedWorkload
    graph_capture: str
    packets: list[TranscribedPacket]


def _gate(gate: TranscribedGate) -> dict[str, Any]:
    against = gate.against or "the arm's second fresh server"
    return {**gate.model_dump(exclude={"against"}), "against": against}


def _arm(arm: TranscribedArm, graph_capture: str) -> ArmParts:
    int4_head = arm.draft_head is not None and "INT4" in arm.draft_head
    return ArmParts.model_validate(
        {
            "id": arm.id,
            "label": _arm_label(arm),
            "config": {
                "tensor_parallel_size": arm.tp,
                "spec_method": SPEC_METHOD if arm.depth else None,
                "spec_depth": arm.depth,
                "draft_head": arm.draft_head,
                "graph_capture": graph_capture,
                "env": INT4_DRAFT_HEAD_ENV if int4_head else {},
            },
            "servers": [
                {"label": label, "decode_tok_s": value} for label, value in zip("AB", arm.servers, strict=False)
            ],
            "oracle_decode_tok_s": arm.oracle,
            "gates": [_gate(g) for g in arm.gates],
            "withheld_reason": arm.withheld_reason,
            "published_figure": arm.published_figure,
            "published_ttft_ms": arm.ttft_ms,
            "note": arm.note if arm.identity_published else "; ".join(filter(None, [IDENTITY_NOT_PUBLISHED, arm.note])),
        }
    )


def _arm_label(arm: TranscribedArm) -> str:
    cards = "1 card" if arm.tp == 1 else f"{arm.tp} cards"
    if arm.depth == 0:
        return f"{cards}, no speculative decoding"
    head = f" with the {arm.draft_head}" if arm.draft_head else ""
    return f"{cards}, MTP depth {arm.depth}{head}"


def _parts(
    transcription: Transcription, item: TranscribedPacket, arms: list[TranscribedArm], screened: bool
) -> PacketParts:
    notes = [transcription.source.note, item.note]
    if screened:
        notes.append(
            f"speed only: {IDENTITY_NOT_PUBLISHED} for these arms (no gate outcome printed), so they are "
            "screened, not imported"
        )
    title = f"{item.title} · speed only ({IDENTITY_NOT_PUBLISHED})" if screened else item.title
    return PacketParts.model_validate(
        {
            "title": title,
            "provenance": {
                "kind": "screened" if screened else "imported",
                "source": {
                    "name": transcription.source.name,
                    "reference": item.reference,
                    "note": " · ".join(n for n in notes if n),
                    "published": transcription.source.published,
                    "retrieved": transcription.source.retrieved,
                },
            },
            "identity": {
                "model": item.model,
                "runtime": transcription.runtime.model_dump(mode="json"),
                "host": {"hardware": "arc_pro_b70", "card_count": item.card_count},
            },
            "workload": transcription.workload.model_dump(mode="json"),
            "arms": [_arm(a, transcription.graph_capture) for a in arms],
        }
    )


def packet_parts(transcription: Transcription) -> list[PacketParts]:
    """One imported packet per transcribed page packet, and beside it a screened one for the arms
    whose identity outcome the source did not publish."""
    found = []
    for item in transcription.packets:
        gated = [a for a in item.arms if a.identity_published]
        speed_only = [a for a in item.arms if not a.identity_published]
        if gated:
            found.append(_parts(transcription, item, gated, screened=False))
        if speed_only:
            found.append(_parts(transcription, item, speed_only, screened=True))
    return found


def import_transcription(path: Path, packets_dir: Path, key: HostKey | None) -> list[Packet]:
    """Seal every packet of a transcription with the importer's key."""
    transcription = load_file(Transcription, path)
    try:
        sealed = [seal(parts, key) for parts in packet_parts(transcription)]
    except ValidationError as error:
        raise made_from(path, error) from None
    for item in sealed:
        write_packet(item, packets_dir)
    return [item.packet for item in sealed]
