"""Seal figures transcribed from a published catalog page into `imported` packets.

The transcription file (data/imports/*.yaml) holds only what the source printed; this module adds
nothing but structure: states are derived by the shared rules, and every packet says where its
numbers come from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from catalog.base import StrictModel
from catalog.loading import load_file
from catalog.packet import ArmParts, Packet, PacketParts, RuntimeIdentity
from catalog.packet_io import made_from, seal, write_packet
from catalog.signing import HostKey

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
            "note": arm.note,
        }
    )


def _arm_label(arm: TranscribedArm) -> str:
    cards = "1 card" if arm.tp == 1 else f"{arm.tp} cards"
    if arm.depth == 0:
        return f"{cards}, no speculative decoding"
    head = f" with the {arm.draft_head}" if arm.draft_head else ""
    return f"{cards}, MTP depth {arm.depth}{head}"


def packet_parts(transcription: Transcription) -> list[PacketParts]:
    return [
        PacketParts.model_validate(
            {
                "title": item.title,
                "provenance": {
                    "kind": "imported",
                    "source": {
                        "name": transcription.source.name,
                        "reference": item.reference,
                        "note": " · ".join(n for n in (transcription.source.note, item.note) if n),
                    },
                },
                "identity": {
                    "model": item.model,
                    "runtime": transcription.runtime.model_dump(mode="json"),
                    "host": {"hardware": "arc_pro_b70", "card_count": item.card_count},
                },
                "workload": transcription.workload.model_dump(mode="json"),
                "arms": [_arm(a, transcription.graph_capture) for a in item.arms],
            }
        )
        for item in transcription.packets
    ]


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
