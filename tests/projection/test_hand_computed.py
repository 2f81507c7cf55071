"""The arithmetic on a model small enough to check by hand.

Toy dense model: vocab 1,000, hidden 64, MLP 128, 2 layers, 4 heads of 16 with 2 KV heads, untied,
one MTP layer. Parameter counts:
    embedding = lm_head = 1,000 × 64 = 64,000
    attention per layer = 64×64 (q) + 2 × 64×32 (k, v) + 64×64 (o) + 2×16 (q/k norms) = 12,320
    MLP per layer = 3 × 64 × 128 = 24,576;  norms per layer = 2 × 64 = 128;  final norm 64
    MTP layer = 2×64×64 (fc) + 2×64 (pre-fc norms) + 12,320 + 24,576 + 128 + 64 = 45,408
"""

from __future__ import annotations

import math

import pytest

from catalog.projection.facts import ArchitectureFacts, Fact
from catalog.projection.physics import (
    architecture_step,
    collective_ms,
    layout_from,
    prefill_flops,
    step_ceiling,
)
from catalog.projection.precision import BF16, DRAFT_LM_HEAD_INT4, FP8_DYNAMIC, W4A16


def _f(value: object) -> Fact[object]:
    return Fact(value, "hand-made", "assumed")


TOY = ArchitectureFacts(
    num_layers=_f(2),  # type: ignore[arg-type]
    hidden_size=_f(64),  # type: ignore[arg-type]
    intermediate_size=_f(128),  # type: ignore[arg-type]
    num_attention_heads=_f(4),  # type: ignore[arg-type]
    num_kv_heads=_f(2),  # type: ignore[arg-type]
    head_dim=_f(16),  # type: ignore[arg-type]
    vocab_size=_f(1000),  # type: ignore[arg-type]
    tie_word_embeddings=_f(False),  # type: ignore[arg-type]
    mtp_layers=_f(1),  # type: ignore[arg-type]
)
CONTEXT = 350
# Target bytes at BF16: lm_head 128,000 + embedding row 128 + attention 2×12,320×2 = 49,280
# + MLP 2×24,576×2 = 98,304 + norms (2×128 + 64)×2 = 640 + KV 2 layers × 64 values × 2 B × 350 = 89,600.
TARGET_BF16 = 128_000 + 128 + 49_280 + 98_304 + 640 + 89_600
# Draft bytes per drafted token at BF16: MTP 45,408×2 = 90,816 + lm_head 128,000 + MTP KV 64 × 2 × 350 = 44,800.
DRAFT_BF16 = 90_816 + 128_000 + 44_800


def _step(scheme=BF16, *, depth: int = 0, context: float = CONTEXT, draft_head=None):  # type: ignore[no-untyped-def]
    layout = layout_from(TOY)
    assert layout is not None
    return architecture_step(
        layout,
        scheme,
        context_tokens=context,
        kv_bytes=2.0,
        state_bytes=2.0,
        spec_depth=depth,
        draft_lm_head=draft_head,
    )


def test_parameter_counts() -> None:
    layout = layout_from(TOY)
    assert layout is not None
    assert (layout.embedding, layout.attention, layout.mlp, layout.mtp) == (64_000, 12_320, 24_576, 45_408)
    assert layout.text_parameters == 2 * 64_000 + 2 * (12_320 + 24_576 + 128) + 64


def test_decode_ceiling_one_card() -> None:
    step = _step()
    assert step.target_bytes == TARGET_BF16
    ceiling = step_ceiling(
        step, bandwidth_gb_s=1.0, cards=1, spec_depth=0, tokens_per_step=1, latency_us=10, link_gb_s=64
    )
    assert ceiling.tok_s == pytest.approx(1e9 / TARGET_BF16)
    assert ceiling.interconnect_ms == 0


def test_fp8_and_int4_bytes_per_weight() -> None:
    # FP8 per-channel: 1 B + 4 B scale / 64 inputs; lm_head and embeddings stay 16-bit.
    assert FP8_DYNAMIC.bytes_per_weight("mlp", 64) == pytest.approx(1 + 4 / 64)
    assert FP8_DYNAMIC.bytes_per_weight("lm_head", 64) == 2
    # W4A16 group 128: 0.5 B + one 2-byte scale per 128 weights.
    assert W4A16.bytes_per_weight("mlp", 64) == pytest.approx(0.5 + 2 / 128)
    step = _step(FP8_DYNAMIC)
    quantized = (2 * 12_320 + 2 * 24_576) * (1 + 4 / 64)
    assert step.target_bytes == pytest.approx(TARGET_BF16 - 49_280 - 98_304 + quantized)


def test_speculative_ceiling() -> None:
    step = _step(depth=3)
    assert step.draft_bytes == DRAFT_BF16
    ceiling = step_ceiling(
        step, bandwidth_gb_s=1.0, cards=1, spec_depth=3, tokens_per_step=4, latency_us=10, link_gb_s=64
    )
    assert ceiling.tok_s == pytest.approx(4 * 1e9 / (TARGET_BF16 + 3 * DRAFT_BF16))


def test_draft_int4_head_reads_less() -> None:
    step = _step(depth=3, draft_head=DRAFT_LM_HEAD_INT4)
    assert step.draft_bytes == pytest.approx(DRAFT_BF16 - 128_000 + 64_000 * (0.5 + 2 / 128))


def test_tensor_parallel_term() -> None:
    step = _step()
    assert step.collectives_target == 2 * 2 + 2
    ceiling = step_ceiling(
        step, bandwidth_gb_s=1.0, cards=2, spec_depth=0, tokens_per_step=1, latency_us=10, link_gb_s=64
    )
    # one collective: 10 µs + 2 × (1/2) × 128 B / 64 GB/s
    one = 10e-6 + 128 / 64e9
    assert collective_ms(128, 2, 10, 64) == pytest.approx(one * 1000)
    assert ceiling.tok_s == pytest.approx(1 / (TARGET_BF16 / 2e9 + 6 * one))


def test_prefill_flops() -> None:
    layout = layout_from(TOY)
    assert layout is not None
    p = 100
    expected = 2 * (2 * 12_320 + 2 * 24_576) * p + 2 * 2 * p * p * 4 * 16 + 2 * 64_000
    assert prefill_flops(layout, p, with_mtp=False) == pytest.approx(expected)
    with_mtp = expected + 2 * 45_408 * p + 2 * p * p * 4 * 16
    assert prefill_flops(layout, p, with_mtp=True) == pytest.approx(with_mtp)


def test_linear_attention_state_is_fixed_size() -> None:
    """A layer of Gated DeltaNet keeps a dk × dv state per value head: its bytes do not grow with context."""
    hybrid = ArchitectureFacts(
        **{
            **TOY.__dict__,
            "full_attention_layers": _f(0),
            "linear_attention_layers": _f(2),
            "linear_num_key_heads": _f(2),
            "linear_num_value_heads": _f(4),
            "linear_key_head_dim": _f(16),
            "linear_value_head_dim": _f(16),
            "linear_conv_kernel_dim": _f(4),
        }
    )
    layout = layout_from(hybrid)
    assert layout is not None
    # conv_dim = 2×2×16 + 4×16 = 128; block = 64×128 + 64×64 + 2×64×4 + 128×4 + 64×64 + 2×4 + 16
    assert layout.linear_attention == 8192 + 4096 + 512 + 512 + 4096 + 8 + 16
    short, long = (
        architecture_step(layout, BF16, context_tokens=c, kv_bytes=2, state_bytes=2, spec_depth=0, draft_lm_head=None)
        for c in (100, 100_000)
    )
    state = next(t for t in short.target if t.key == "linear_state")
    assert state.bytes == 2 * 2 * (4 * 16 * 16 * 2 + 128 * 3 * 2)
    assert short.target_bytes == long.target_bytes


def test_vision_tower_parameters() -> None:
    """Qwen3.5's tower: 27 blocks of 1152 wide ViT, a 2×2 merger into the text width."""
    from catalog.projection.facts import VisionTower

    tower = VisionTower(27, 1152, 4304, 4096, 16, 2, 3, 2, 2304)
    block = 1152 * 3456 + 3456 + 1152 * 1152 + 1152 + 1152 * 4304 + 4304 + 4304 * 1152 + 1152 + 4 * 1152
    merger = 2 * 1152 + 4608 * 4608 + 4608 + 4608 * 4096 + 4096
    assert tower.parameters == 27 * block + (3 * 2 * 16 * 16 * 1152 + 1152) + 2304 * 1152 + merger
    assert math.isclose(tower.parameters, 456e6, rel_tol=0.01)
