"""Physical sense: more bandwidth or more cards raise the ceiling, a longer context lowers it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.projection import project_arm
from catalog.projection.cells import Cell
from catalog.projection.facts import resolve_architecture
from catalog.projection.precision import FP8_DYNAMIC, W4A16, QuantScheme
from catalog.projection.project import project_cell
from tests.profiles import examples
from tests.projection.helpers import arm, hardware, imported_packet, repo_catalog


def _ceiling(
    *,
    bandwidth: float = 608.0,
    cards: int = 1,
    prompt: int = 300,
    depth: int = 0,
    scheme: QuantScheme = FP8_DYNAMIC,
    slug: str = "qwen3.5-9b",
    link: float | None = 64.0,
) -> float:
    recipe = repo_catalog().recipes[slug]
    cell = Cell(
        hardware=hardware(bandwidth, link=link),
        scheme=scheme,
        scheme_source="test",
        quantization=scheme.id,
        cards=cards,
        cards_source="test",
        spec_method="mtp" if depth else None,
        spec_depth=depth,
        draft_int4=True,
        draft_int4_source="test",
        kv_bytes=1.0,
        kv_source="test",
        prompt_tokens=prompt,
        prompt_source="test",
        facts=resolve_architecture(None, recipe),
        recipe=recipe,
    )
    projection = project_cell(cell)
    assert projection is not None
    return projection.ceiling_tok_s


bandwidths = st.floats(min_value=10, max_value=10_000, allow_nan=False)
depths = st.integers(min_value=0, max_value=6)
schemes = st.sampled_from([FP8_DYNAMIC, W4A16])
slugs = st.sampled_from(["qwen3.5-9b", "qwen3.5-4b"])


@settings(max_examples=examples(40), deadline=None)
@given(bandwidths, bandwidths, depths, schemes, slugs)
def test_more_bandwidth_higher_ceiling(a: float, b: float, depth: int, scheme: QuantScheme, slug: str) -> None:
    low, high = sorted((a, b))
    if high > low * 1.0001:
        assert _ceiling(bandwidth=high, depth=depth, scheme=scheme, slug=slug) > _ceiling(
            bandwidth=low, depth=depth, scheme=scheme, slug=slug
        )


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(min_value=1, max_value=200_000), st.integers(min_value=1, max_value=200_000), depths, slugs)
def test_longer_context_lower_ceiling(a: int, b: int, depth: int, slug: str) -> None:
    short, long = sorted((a, b))
    if long > short:
        assert _ceiling(prompt=long, depth=depth, slug=slug) < _ceiling(prompt=short, depth=depth, slug=slug)


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(min_value=1, max_value=7), depths, st.floats(min_value=10, max_value=1000), slugs)
def test_more_cards_higher_ceiling(cards: int, depth: int, bandwidth: float, slug: str) -> None:
    """On cards of up to 1 TB/s (GDDR cards joined by PCIe) the bytes saved outweigh the collectives."""
    assert _ceiling(cards=cards + 1, depth=depth, bandwidth=bandwidth, slug=slug) > _ceiling(
        cards=cards, depth=depth, bandwidth=bandwidth, slug=slug
    )


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(min_value=1, max_value=7), depths, bandwidths, slugs)
def test_more_cards_higher_ceiling_without_collective_latency(
    cards: int, depth: int, bandwidth: float, slug: str
) -> None:
    from unittest import mock

    with mock.patch("catalog.projection.project.ALLREDUCE_LATENCY_US", 0.0):
        assert _ceiling(cards=cards + 1, depth=depth, bandwidth=bandwidth, slug=slug) > _ceiling(
            cards=cards, depth=depth, bandwidth=bandwidth, slug=slug
        )


def test_collective_latency_can_outweigh_a_second_card() -> None:
    """A 4B model on a 4.8 TB/s card reads its ~4.7 GB in ~1 ms; 66 collectives at 10 µs cost 0.66 ms,
    more than the ~0.5 ms a second card saves. The model says so rather than promising a speed-up."""
    assert _ceiling(cards=2, bandwidth=4800, slug="qwen3.5-4b", scheme=W4A16) < _ceiling(
        cards=1, bandwidth=4800, slug="qwen3.5-4b", scheme=W4A16
    )


def test_tensor_parallel_is_less_than_linear() -> None:
    """Two cards never double the ceiling: the collectives cost time."""
    one, two = _ceiling(cards=1), _ceiling(cards=2)
    assert one < two < 2 * one


def test_deeper_speculation_bound_grows() -> None:
    """With acceptance unknown, L = depth + 1 grows faster than the draft cost."""
    ceilings = [_ceiling(depth=d) for d in range(7)]
    assert ceilings == sorted(ceilings)


def test_recorded_acceptance_replaces_the_bound() -> None:
    metrics = {"drafts": 1000, "draft_tokens": 3000, "accepted_tokens": 1500}
    catalog = repo_catalog()
    recipe = catalog.recipes["qwen3.5-9b"]
    b70 = catalog.hardware["arc_pro_b70"]
    recorded = imported_packet(
        [arm("tp1-mtp0", values=(50.0, 50.0)), arm("tp1-mtp3", depth=3, values=(90.0, 90.0), spec_metrics=metrics)]
    )
    bounded = imported_packet([arm("tp1-mtp0", values=(50.0, 50.0)), arm("tp1-mtp3", depth=3, values=(90.0, 90.0))])
    with_l = project_arm(recorded, recorded.arms[1], b70, recipe)
    without = project_arm(bounded, bounded.arms[1], b70, recipe)
    assert with_l is not None and without is not None
    assert with_l.acceptance == "recorded" and with_l.acceptance_length == 2.5
    assert without.acceptance == "upper bound: acceptance not recorded" and without.acceptance_length == 4
    assert with_l.ceiling_tok_s == pytest.approx(without.ceiling_tok_s * 2.5 / 4)
    assert without.utilisation_is_lower_bound and not with_l.utilisation_is_lower_bound
