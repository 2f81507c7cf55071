"""Estimates for untested cells: ceiling × the utilisation of the closest published arms."""

from __future__ import annotations

import pytest

from catalog.projection import ESTIMATE_RULE, estimate_cell, project_arm
from catalog.store.repository import Catalog
from tests.projection.helpers import arm, imported_packet


def _estimate(catalog: Catalog, slug: str, quant: str, tp: int, depth: int, int4: bool | None = None):  # type: ignore[no-untyped-def]
    return estimate_cell(
        catalog.packets_of(slug),
        catalog.recipes[slug],
        catalog.hardware["arc_pro_b70"],
        quantization=quant,
        tensor_parallel_size=tp,
        spec_depth=depth,
        draft_lm_head_int4=int4,
    )


def test_untested_4b_fp8_borrows_the_4b_int4_utilisation(catalog: Catalog) -> None:
    estimate = _estimate(catalog, "qwen3.5-4b", "fp8-dynamic", 1, 0)
    assert estimate is not None
    assert estimate.state == "estimated" and estimate.projection.arm_state == "estimated"
    assert [(b.quantization, b.tensor_parallel_size, b.spec_depth) for b in estimate.basis] == [("w4a16", 1, 0)]
    assert estimate.utilisation == pytest.approx(estimate.basis[0].utilisation)
    assert estimate.decode_tok_s == pytest.approx(estimate.ceiling_tok_s * estimate.utilisation)
    assert estimate.decode_tok_s < estimate.ceiling_tok_s
    assert estimate.rule == ESTIMATE_RULE


def test_same_tp_comes_first(catalog: Catalog) -> None:
    estimate = _estimate(catalog, "qwen3.5-9b", "w4a16", 2, 0)
    assert estimate is not None
    assert [(b.quantization, b.tensor_parallel_size) for b in estimate.basis] == [("fp8-dynamic", 2)]


def test_no_published_arm_at_that_depth_no_estimate(catalog: Catalog) -> None:
    """TP2 · MTP5 is untested on the reference page; depth 5 exists only withheld, so no basis."""
    assert _estimate(catalog, "qwen3.5-9b", "fp8-dynamic", 2, 5) is None
    assert _estimate(catalog, "qwen3.5-9b", "fp8-dynamic", 2, 6) is None


def test_unknown_quantization_no_estimate(catalog: Catalog) -> None:
    assert _estimate(catalog, "qwen3.5-9b", "nvfp4", 1, 0) is None


def test_a_tested_cell_gets_a_leave_one_out_estimate(catalog: Catalog) -> None:
    """The cell's own arm is never its basis; the estimate can be checked against the measurement."""
    estimate = _estimate(catalog, "qwen3.5-9b", "fp8-dynamic", 1, 0)
    assert estimate is not None
    assert all(b.quantization != "fp8-dynamic" or b.tensor_parallel_size != 1 for b in estimate.basis)
    assert estimate.decode_tok_s == pytest.approx(50.17, rel=0.05)


def test_draft_head_defaults_to_the_basis(catalog: Catalog) -> None:
    estimate = _estimate(catalog, "qwen3.5-4b", "fp8-dynamic", 1, 3)
    assert estimate is not None and estimate.draft_lm_head_int4
    assert estimate.projection.acceptance == "upper bound: acceptance not recorded"


def test_basis_uses_upper_bound_ceilings_even_with_recorded_acceptance(catalog: Catalog) -> None:
    """Utilisation is only comparable when both sides use the same bound on L."""
    metrics = {"drafts": 1000, "draft_tokens": 3000, "accepted_tokens": 1500}
    packet = imported_packet(
        [arm("tp1-mtp0", values=(50.0, 50.0)), arm("tp1-mtp3", depth=3, values=(90.0, 90.0), spec_metrics=metrics)]
    )
    recipe = catalog.recipes["qwen3.5-9b"]
    b70 = catalog.hardware["arc_pro_b70"]
    estimate = estimate_cell([packet], recipe, b70, quantization="w4a16", tensor_parallel_size=1, spec_depth=3)
    assert estimate is not None
    recorded = project_arm(packet, packet.arms[1], b70, recipe)
    assert recorded is not None and recorded.acceptance == "recorded"
    assert estimate.basis[0].utilisation == pytest.approx(90.0 / (recorded.ceiling_tok_s * 4 / 2.5))


def test_other_hardware_is_no_basis(catalog: Catalog) -> None:
    assert (
        estimate_cell(
            catalog.packets_of("qwen3.5-9b"),
            catalog.recipes["qwen3.5-9b"],
            catalog.hardware["h100_sxm"],
            quantization="fp8-dynamic",
            tensor_parallel_size=1,
            spec_depth=0,
        )
        is None
    )


def test_cross_tp_basis_is_scaled_by_the_family_tp_ratio(catalog: Catalog) -> None:
    """TP2 · MTP3 left out: its basis is TP1 · MTP3, scaled by u(TP2, MTP0) / u(TP1, MTP0)."""
    estimate = _estimate(catalog, "qwen3.5-9b", "fp8-dynamic", 2, 3, True)
    assert estimate is not None
    assert [(b.tensor_parallel_size, b.spec_depth) for b in estimate.basis] == [(1, 3)]
    tp1 = [_estimate(catalog, "qwen3.5-9b", q, 1, 0) for q in ("fp8-dynamic", "w4a16")]
    assert all(e is not None for e in tp1)
    u_tp1 = sorted(e.basis[0].utilisation for e in tp1 if e is not None)  # each is the other's basis
    u_tp2 = next(b.utilisation for b in _estimate(catalog, "qwen3.5-9b", "w4a16", 2, 0).basis)  # type: ignore[union-attr]
    assert estimate.tp_ratio == pytest.approx(u_tp2 / (sum(u_tp1) / 2))
    assert estimate.utilisation == pytest.approx(estimate.basis[0].utilisation * estimate.tp_ratio)
    assert estimate.decode_tok_s == pytest.approx(147.8, rel=0.1)
