"""Small hand-made inputs for the projection tests: a card with round numbers and sealed packets."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from catalog.model.packet import Packet, PacketParts
from catalog.recipes.hardware import Figure, Hardware, Interconnect
from catalog.store.repository import Catalog, load_catalog
from tests.catalog.factories import seal_parts

REPO = Path(__file__).resolve().parents[2]


@cache
def repo_catalog() -> Catalog:
    return load_catalog(REPO / "data", REPO / "packets")


def hardware(
    bandwidth: float = 1.0, *, link: float | None = 64.0, bf16_tflops: float = 100.0, hw_id: str = "test_card"
) -> Hardware:
    """A card with round numbers: `bandwidth` GB/s, a `link` GB/s card-to-card link."""
    return Hardware(
        id=hw_id,
        name="Test card",
        vendor="Test",
        platform="xpu",
        generation="xpu",
        device_names=["Test card"],
        memory_gb=Figure(value=32, source="test"),
        memory_type="GDDR6",
        memory_bandwidth_gb_s=Figure(value=bandwidth, source="test bandwidth"),
        compute_tflops_bf16=Figure(value=bf16_tflops, source="test compute"),
        compute_tops_int8=Figure(value=2 * bf16_tflops, source="test compute"),
        interconnect=Interconnect(name="test link", bandwidth_gb_s=Figure(value=link, source="test link"))
        if link
        else None,
    )


def arm(
    arm_id: str,
    *,
    tp: int = 1,
    depth: int = 0,
    values: tuple[float, ...] = (),
    env: dict[str, str] | None = None,
    spec_metrics: dict[str, int] | None = None,
    method: str = "mtp",
) -> dict[str, Any]:
    servers = [
        {"label": f"s{i}", "decode_tok_s": v, **({"spec_metrics": spec_metrics} if spec_metrics else {})}
        for i, v in enumerate(values)
    ]
    return {
        "id": arm_id,
        "label": arm_id,
        "config": {
            "tensor_parallel_size": tp,
            "spec_method": method if depth else None,
            "spec_depth": depth,
            "env": env or {},
        },
        "servers": servers,
    }


def imported_packet(
    arms: list[dict[str, Any]],
    *,
    slug: str = "qwen3.5-9b",
    variant: str | None = "fp8",
    repo: str = "RedHatAI/Qwen3.5-9B-FP8-dynamic",
    quantization: str = "fp8-dynamic",
    config: dict[str, Any] | None = None,
    weight_bytes: int | None = None,
    hardware_id: str = "arc_pro_b70",
    synthetic: bool = False,
) -> Packet:
    parts = {
        "title": "test packet",
        "provenance": {"kind": "imported", "source": {"name": "test"}},
        "identity": {
            "model": {
                "slug": slug,
                "variant": variant,
                "repo": repo,
                "quantization": quantization,
                "quantization_label": quantization,
                "config": config,
                "weight_bytes": weight_bytes,
                "synthetic": synthetic,
            },
            "runtime": {"platform": "xpu", "version": "0", "label": "test"},
            "host": {"hardware": hardware_id, "card_count": max(a["config"]["tensor_parallel_size"] for a in arms)},
        },
        "workload": {"suite_id": "test", "max_tokens": 512},
        "arms": arms,
    }
    return seal_parts(PacketParts.model_validate(parts)).packet
