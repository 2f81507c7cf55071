"""A title or arm label names no card of data/hardware.yaml other than the packet's own
(catalog/checks/identity.py `card_claim_problems`, run by every verification against data/): the
CPU demo retitled "one B70", a B70 packet labelled H200, are refused by field, naming both cards."""

from __future__ import annotations

import json
from pathlib import Path

from catalog.checks.identity import card_claim_problems
from catalog.packets.seal import write_packet
from catalog.packets.verify import read_packet
from catalog.store.reading import read_one
from catalog.store.repository import load_data
from tests.catalog.factories import draft_of, sealed

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "packets" / "demo-bf16-9983d5b3.json"


def test_the_cpu_demo_titled_as_a_b70_run_is_refused_by_verification(tmp_path: Path) -> None:
    draft = draft_of(json.loads(DEMO.read_text()))
    draft["title"] = str(draft["title"]).replace("one Generic 2-core x86 CPU host", "one B70")
    path = write_packet(sealed(draft, signed=False), tmp_path)
    data = load_data(REPO / "data")
    read = read_one(path, data.keys, True, data.reference)
    problems = [(e.field, e.message) for e in read.reference_problems if e.field == "title"]
    assert problems == [
        ("title", "names 'B70', the Intel Arc Pro B70; the packet ran on the Generic 2-core x86 CPU host (cpu_generic)")
    ]


def test_a_label_naming_another_accelerator_is_refused_and_the_own_card_passes() -> None:
    hardware = load_data(REPO / "data").hardware
    packet = read_packet(REPO / "packets" / "qwen3.5-9b-w4a16-8c08b0d2.json", None)
    assert card_claim_problems(packet, hardware) == []  # "one B70" of a B70 packet
    arms = [packet.arms[0].model_copy(update={"label": "1 card (an h200 run)"}), *packet.arms[1:]]
    assert card_claim_problems(packet.model_copy(update={"arms": arms}), hardware) == [
        ("arms[0].label", "names 'h200', the NVIDIA H200; the packet ran on the Intel Arc Pro B70 (arc_pro_b70)")
    ]


def test_every_committed_packet_names_only_its_own_card() -> None:
    hardware = load_data(REPO / "data").hardware
    for path in sorted((REPO / "packets").glob("*.json")):
        if not path.name.endswith(".dsse.json"):
            assert card_claim_problems(read_packet(path, None), hardware) == [], path.name
