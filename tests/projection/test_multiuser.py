"""The multi-user projection against the hand-computed example of docs/projections.md."""

from __future__ import annotations

import pytest

from catalog.packets.seal import seal
from catalog.projection import project_load
from catalog.projection.multiuser import multi_user_step
from catalog.store.repository import Catalog
from testkit.samples import ORACLE_ARM, SPEC_ARM, make_load_sweep, measured_parts, with_load

EXAMPLE = {
    "weight_bytes": 10e9,
    "per_user_bytes": 0.05e9,
    "flops_per_token": 18e9,
    "bandwidth_gb_s": 608.0,
    "peak_tflops": 100.0,
}


@pytest.mark.parametrize(
    ("users", "memory_ms", "compute_ms", "bound", "per_user", "aggregate"),
    [
        (1, 16.5296, 0.18, "memory", 60.4975, 60.4975),
        (64, 21.7105, 11.52, "memory", 46.0606, 2947.88),
        (256, 37.5, 46.08, "compute", 21.7014, 5555.56),
    ],
)
def test_the_documented_example(
    users: int, memory_ms: float, compute_ms: float, bound: str, per_user: float, aggregate: float
) -> None:
    step = multi_user_step(users=users, **EXAMPLE)  # type: ignore[arg-type]
    assert step.memory_ms == pytest.approx(memory_ms, abs=1e-4)
    assert step.compute_ms == pytest.approx(compute_ms, abs=1e-4)
    assert step.bound == bound
    assert step.per_user_tok_s == pytest.approx(per_user, abs=1e-3)
    assert step.aggregate_tok_s == pytest.approx(aggregate, rel=1e-5)


def test_two_cards_halve_the_step_and_add_the_collectives() -> None:
    one = multi_user_step(users=8, **EXAMPLE)  # type: ignore[arg-type]
    two = multi_user_step(users=8, cards=2, interconnect_ms=0.5, **EXAMPLE)  # type: ignore[arg-type]
    assert two.step_ms == pytest.approx(one.step_ms / 2 + 0.5)


def test_a_9b_sweep_reads_the_documented_per_user_bytes(catalog: Catalog) -> None:
    sweep = make_load_sweep()
    packet = seal(with_load(measured_parts(), {ORACLE_ARM: sweep}), None).packet
    projection = project_load(
        packet, packet.arm(ORACLE_ARM), sweep, catalog.hardware["arc_pro_b70"], catalog.recipes.get("qwen3.5-9b")
    )
    assert projection is not None
    # 8 full-attention layers × 2 (K, V) × 4 KV heads × 256 head dim × 2 B
    assert projection.kv_bytes_per_token == 32_768
    # 2 × 24 linear layers × (32 heads × 128 × 128 × 2 B + 8,192 conv channels × 3 × 2 B)
    assert projection.state_bytes_per_user == 52_690_944
    closed = [level for level in projection.levels if level.users_source.startswith("closed")]
    assert [level.users for level in closed] == [1, 2, 4, 8, 16, 32]
    aggregate = [level.aggregate_tok_s for level in closed]
    per_user = [level.per_user_tok_s for level in closed]
    assert aggregate == sorted(aggregate) and per_user == sorted(per_user, reverse=True)
    for level, measured in zip(projection.levels, sweep.levels, strict=True):
        assert level.measured_over_projected == pytest.approx(measured.aggregate_tok_s / level.aggregate_tok_s)


def test_speculative_arms_are_not_projected_under_load(catalog: Catalog) -> None:
    sweep = make_load_sweep()
    packet = seal(with_load(measured_parts(), {SPEC_ARM: sweep}), None).packet
    hardware = catalog.hardware["arc_pro_b70"]
    assert project_load(packet, packet.arm(SPEC_ARM), sweep, hardware, None) is None
