"""Where numbers come from: the catalog's facts (never the packet's, but a synthetic model's), fallbacks labelled."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.projection import project_arm
from catalog.store.repository import Catalog
from tests.projection.helpers import arm, imported_packet


def _inputs(projection) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {i.name: i for i in projection.inputs}


def test_sources_name_packet_table_and_hardware(catalog: Catalog) -> None:
    packet = imported_packet([arm("tp1-mtp0", values=(50.0, 50.0))], config={"num_layers": 32, "hidden_size": 4096})
    projection = project_arm(packet, packet.arms[0], catalog.hardware["arc_pro_b70"], catalog.recipes["qwen3.5-9b"])
    assert projection is not None
    inputs = _inputs(projection)
    assert "Qwen3.5-9B model card" in inputs["num_layers"].source  # the catalog's, though the packet agrees
    assert inputs["num_layers"].origin == "model-table"
    assert inputs["intermediate_size"].origin == "model-table"
    assert "Qwen3.5-9B" in inputs["intermediate_size"].source
    bandwidth = inputs["memory_bandwidth_gb_s"]
    assert bandwidth.value == 608 and bandwidth.unit == "GB/s"
    assert bandwidth.source.startswith("data/hardware.yaml arc_pro_b70 memory_bandwidth_gb_s (source: ")
    assert inputs["prompt_tokens"].origin == "assumed"
    assert inputs["kv_bytes"].origin == "recipe"  # the fp8 variant passes --kv-cache-dtype fp8
    assert any("vision tower" in n for n in projection.notes)


def test_the_catalogs_value_is_used_never_the_packets(catalog: Catalog) -> None:
    """A packet cannot raise its own ceiling by declaring a smaller model (catalog/checks/facts.py
    refuses it; the projection never reads it either)."""
    honest = imported_packet([arm("tp1-mtp0", values=(40.0, 40.0))])
    shrunk = imported_packet(
        [arm("tp1-mtp0", values=(40.0, 40.0))], config={"num_layers": 2, "hidden_size": 64, "vocab_size": 1000}
    )
    card, recipe = catalog.hardware["arc_pro_b70"], catalog.recipes["qwen3.5-9b"]
    ceilings = [project_arm(p, p.arms[0], card, recipe) for p in (honest, shrunk)]
    assert ceilings[0] is not None and ceilings[1] is not None
    assert _inputs(ceilings[1])["vocab_size"].value == 248320
    assert ceilings[1].ceiling_tok_s == ceilings[0].ceiling_tok_s


def test_checkpoint_bytes_when_the_architecture_is_incomplete(catalog: Catalog) -> None:
    """A model the table does not know, with a recorded checkpoint: bytes per step = checkpoint bytes."""
    packet = imported_packet(
        [arm("tp1-mtp0", values=(400.0, 400.0))],
        slug="demo",
        variant="default",
        repo="local/demo-qwen3-tiny",
        quantization="bf16",
        config={
            "num_layers": 2,
            "hidden_size": 128,
            "num_kv_heads": 2,
            "head_dim": 64,
            "vocab_size": 2000,
            "tie_word_embeddings": True,
        },
        weight_bytes=3_000_000,
        hardware_id="cpu_generic",
        synthetic=True,
    )
    projection = project_arm(packet, packet.arms[0], catalog.hardware["cpu_generic"], catalog.recipes["demo"])
    assert projection is not None
    assert projection.method == "checkpoint"
    kv = 2 * 2 * 2 * 64 * 2 * projection.context_tokens
    assert projection.target_bytes_per_step == pytest.approx(3_000_000 + kv)
    assert projection.ceiling_tok_s == pytest.approx(20e9 / (3_000_000 + kv))
    # prefill from the weights alone: 1.5 M BF16 parameters × 2 FLOPs × 300 prompt tokens
    assert projection.prefill is not None
    assert projection.prefill.flops == pytest.approx(2 * 1.5e6 * 300)


def test_recipe_parameter_count_as_last_resort(catalog: Catalog) -> None:
    packet = imported_packet(
        [arm("tp1-mtp0", values=(400.0, 400.0))],
        slug="demo",
        variant="default",
        repo="local/demo-qwen3-tiny",
        quantization="bf16",
        hardware_id="cpu_generic",
    )
    projection = project_arm(packet, packet.arms[0], catalog.hardware["cpu_generic"], catalog.recipes["demo"])
    assert projection is not None
    assert projection.method == "parameters"
    stated = catalog.recipes["demo"].model.active_parameters
    assert stated is not None and stated.endswith("M")
    assert _inputs(projection)["parameters"].source == f"recipe model.active_parameters = {stated!r}"
    assert projection.target_bytes_per_step == pytest.approx(float(stated[:-1]) * 1e6 * 2)
    assert any("recipe's parameter count" in n for n in projection.notes)


def test_withheld_arms_are_projected_but_not_graded(catalog: Catalog) -> None:
    packet = next(
        p
        for p in catalog.packets_of("qwen3.5-9b")
        if p.identity.model.quantization == "fp8-dynamic" and p.provenance.kind == "imported"
    )
    withheld = [a for a in packet.arms if a.state.value == "withheld" and a.server_values]
    assert withheld
    for item in withheld:
        projection = project_arm(packet, item, catalog.hardware["arc_pro_b70"], catalog.recipes["qwen3.5-9b"])
        assert projection is not None
        assert projection.optimisation_grade is None and projection.utilisation is not None
        assert any("Withheld" in n for n in projection.notes)


def test_inconsistent_result_is_flagged_not_graded(catalog: Catalog) -> None:
    packet = imported_packet([arm("tp1-mtp0", values=(500.0, 500.0))])
    projection = project_arm(packet, packet.arms[0], catalog.hardware["arc_pro_b70"], catalog.recipes["qwen3.5-9b"])
    assert projection is not None
    assert not projection.consistent and projection.optimisation_grade is None
    assert any("Inconsistent" in n for n in projection.notes)
