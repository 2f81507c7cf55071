"""Calibration against the seed results (Qwen3.5 9B and 4B on Intel Arc Pro B70, imported packets).

The ceiling is physics: no measured result may exceed it. If one does, the byte model or its
inputs are wrong. The table is the one in docs/projections.md; keep the two in step.
"""

from __future__ import annotations

import json

import pytest

from catalog.model.packet import Arm, Packet
from catalog.projection import OPTIMISATION_BANDS, Projection, project_arm, project_catalog
from catalog.projection.precision import DRAFT_INT4_ENV
from catalog.store.repository import Catalog

# family, quantization, TP, MTP depth, draft INT4 lm_head, state, measured tok/s, ceiling tok/s, utilisation
CALIBRATION = [
    ("qwen3.5-9b", "fp8-dynamic", 1, 0, False, "imported", 50.166, 57.17, 0.878),
    ("qwen3.5-9b", "fp8-dynamic", 1, 3, False, "screened", 76.898, 133.63, 0.575),
    ("qwen3.5-9b", "fp8-dynamic", 1, 3, True, "imported", 98.139, 177.90, 0.552),
    ("qwen3.5-9b", "fp8-dynamic", 1, 4, True, "withheld", 98.484, 207.05, 0.476),
    ("qwen3.5-9b", "fp8-dynamic", 1, 5, True, "screened", 91.297, 232.44, 0.393),
    ("qwen3.5-9b", "fp8-dynamic", 1, 6, True, "screened", 88.639, 254.76, 0.348),
    ("qwen3.5-9b", "fp8-dynamic", 2, 0, False, "imported", 79.428, 106.22, 0.748),
    ("qwen3.5-9b", "fp8-dynamic", 2, 3, True, "imported", 147.801, 331.74, 0.446),
    ("qwen3.5-9b", "fp8-dynamic", 2, 4, True, "withheld", 151.74, 386.44, 0.393),
    ("qwen3.5-9b", "w4a16", 1, 0, False, "imported", 64.335, 75.36, 0.854),
    ("qwen3.5-9b", "w4a16", 1, 3, True, "imported", 113.266, 218.99, 0.517),
    ("qwen3.5-4b", "w4a16", 1, 0, False, "imported", 102.501, 129.97, 0.789),
    ("qwen3.5-4b", "w4a16", 1, 3, True, "imported", 177.29, 380.65, 0.466),
    ("qwen3.5-4b", "fp8-dynamic", 1, 0, False, "withheld", None, 102.78, None),
    ("qwen3.5-4b", "fp8-dynamic", 1, 3, False, "withheld", None, 232.61, None),
]


def _find(catalog: Catalog, slug: str, quant: str, tp: int, depth: int, int4: bool) -> tuple[Packet, Arm]:
    found = [
        (p, a)
        for p in catalog.packets_of(slug)
        if p.identity.model.quantization == quant
        for a in p.arms
        if a.config.tensor_parallel_size == tp
        and a.config.spec_depth == depth
        and (a.config.env.get(DRAFT_INT4_ENV) == "1") == int4
    ]
    assert len(found) == 1, f"expected one {slug} {quant} TP{tp} MTP{depth} int4={int4} arm, found {len(found)}"
    return found[0]


def _projection(catalog: Catalog, packet: Packet, arm: Arm) -> Projection:
    hardware = catalog.hardware[packet.identity.host.hardware]
    projection = project_arm(packet, arm, hardware, catalog.recipes[packet.identity.model.slug])
    assert projection is not None
    return projection


@pytest.mark.parametrize("row", CALIBRATION, ids=lambda r: f"{r[0]}-{r[1]}-tp{r[2]}-mtp{r[3]}{'-int4' if r[4] else ''}")
def test_calibration_table(catalog: Catalog, row: tuple) -> None:  # type: ignore[type-arg]
    slug, quant, tp, depth, int4, state, measured, ceiling, utilisation = row
    packet, arm = _find(catalog, slug, quant, tp, depth, int4)
    projection = _projection(catalog, packet, arm)
    assert projection.arm_state == state
    assert projection.method == "architecture"
    assert projection.ceiling_tok_s == pytest.approx(ceiling, abs=0.01)
    if measured is None:
        assert projection.measured_tok_s is None and projection.utilisation is None
        return
    assert projection.measured_tok_s == pytest.approx(measured, abs=0.001)
    assert projection.utilisation == pytest.approx(utilisation, abs=0.001)
    assert projection.consistent
    graded = state in ("measured", "imported", "screened")  # a speed figure: State.has_speed
    assert (projection.optimisation_grade is not None) == graded


def test_every_seed_arm_is_below_its_ceiling(catalog: Catalog) -> None:
    """Every arm with any recorded speed, speculative and TP2 arms included, withheld ones too."""
    checked = 0
    for packet in catalog.packets.values():
        for arm in packet.arms:
            values = [*arm.server_values, *([arm.published_figure] if arm.published_figure else [])]
            if not values:
                continue
            projection = _projection(catalog, packet, arm)
            assert projection.ceiling_tok_s > max(values), (packet.id, arm.id)
            checked += 1
    assert checked >= 13


@pytest.mark.parametrize(
    ("slug", "quant", "tp", "depth", "int4", "measured"),
    [
        ("qwen3.5-9b", "fp8-dynamic", 1, 0, False, 50.17),
        ("qwen3.5-9b", "fp8-dynamic", 1, 3, True, 98.14),
        ("qwen3.5-4b", "w4a16", 1, 3, True, 177.29),
        ("qwen3.5-9b", "fp8-dynamic", 2, 3, True, 147.8),
    ],
)
def test_the_brief_s_figures(
    catalog: Catalog, slug: str, quant: str, tp: int, depth: int, int4: bool, measured: float
) -> None:
    packet, arm = _find(catalog, slug, quant, tp, depth, int4)
    projection = _projection(catalog, packet, arm)
    assert projection.measured_tok_s == pytest.approx(measured, abs=0.01)
    assert projection.ceiling_tok_s > measured


def test_reference_example_ceiling(catalog: Catalog) -> None:
    """REFERENCE §5: 9B at FP8 is ~9-11 GB per token, a ~60 tok/s ceiling on one B70."""
    packet, arm = _find(catalog, "qwen3.5-9b", "fp8-dynamic", 1, 0, False)
    projection = _projection(catalog, packet, arm)
    assert 9e9 < projection.target_bytes_per_step < 11e9
    assert 50.2 < projection.ceiling_tok_s < 65


def test_parameter_count_matches_the_bf16_checkpoint(catalog: Catalog) -> None:
    from catalog.projection.facts import resolve_architecture
    from catalog.projection.physics import layout_from

    layout = layout_from(resolve_architecture(None, catalog.recipes["qwen3.5-9b"]))
    assert layout is not None
    assert layout.checkpoint_parameters * 2 == pytest.approx(19.3e9, rel=0.01)
    assert layout.text_parameters == pytest.approx(8.95e9, rel=0.005)  # GGUF metadata of the text model: 8.95B


def test_ttft_bound_below_measured(catalog: Catalog) -> None:
    for row in CALIBRATION:
        packet, arm = _find(catalog, *row[:5])
        projection = _projection(catalog, packet, arm)
        assert projection.prefill is not None
        if projection.prefill.measured_ttft_ms is not None:
            assert projection.prefill.bound_ms < projection.prefill.measured_ttft_ms


def test_json_api_lists_every_input(catalog: Catalog) -> None:
    projections = project_catalog(catalog.packets.values(), catalog.hardware, catalog.recipes)
    assert set(projections) == set(catalog.packets)
    for items in projections.values():
        for projection in items:
            dumped = json.loads(json.dumps(projection.model_dump(mode="json")))
            assert Projection.model_validate(dumped) == projection
            names = {i["name"] for i in dumped["inputs"]}
            assert {"memory_bandwidth_gb_s", "cards", "context_tokens"} <= names
            # Either the architecture is known, or the recorded checkpoint bytes stand in for it.
            assert {"num_layers", "hidden_size", "vocab_size"} <= names or "weight_bytes" in names
            assert all(i["source"] for i in dumped["inputs"])
            assert dumped["formula"] and dumped["substituted"]
            assert sum(t["bytes"] for t in dumped["byte_terms"] if t["per"] == "target step") == pytest.approx(
                dumped["target_bytes_per_step"]
            )


def test_bands() -> None:
    from catalog.projection import band_for

    assert [b.name for b in OPTIMISATION_BANDS] == [
        "at the limit",
        "tuned",
        "room to grow",
        "far from limit",
        "untuned",
    ]
    assert [b.threshold for b in OPTIMISATION_BANDS] == [0.9, 0.7, 0.5, 0.3, 0.0]
    assert band_for(0.9).name == "at the limit" and band_for(0.8999).name == "tuned"
    assert band_for(0.5).name == "room to grow" and band_for(0.3).name == "far from limit"
    assert band_for(0.29).name == "untuned"
