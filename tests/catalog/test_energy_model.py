"""catalog/model/energy.py by hand: integration examples worked on paper, then each validity rule
on its own. Times are µs from the window's start, power mW, counters µJ (the packet's units)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from catalog.model.arrays import to_int64, to_uint32
from catalog.model.energy import (
    CardTrace,
    EnergyBounds,
    EnergySetup,
    EnergyWindow,
    Tokens,
    card_energy_j,
    judge_window,
    longest_gap_us,
    peak_w,
    power_at,
)

S = 1_000_000


def trace(
    times_s: list[float],
    watts: list[float],
    counter_s: list[float] | None = None,
    joules: list[float] | None = None,
    device: int = 0,
) -> CardTrace:
    counter_s = times_s if counter_s is None and joules is not None else (counter_s or [])
    return CardTrace(
        device=device,
        power_source="test power (card, W)",
        counter_source="test counter (card, µJ)" if joules is not None else None,
        power_t_us=to_int64(round(t * S) for t in times_s),
        power_mw=to_uint32(round(w * 1000) for w in watts),
        counter_t_us=to_int64(round(t * S) for t in counter_s),
        counter_uj=to_int64(round(j * S) for j in (joules or [])),
    )


def steady(watts: float, start_s: float, end_s: float, step_s: float = 1.0, origin_j: float = 5000.0) -> CardTrace:
    """A card at constant power, sampled every step from start to end, its counter consistent."""
    count = round((end_s - start_s) / step_s) + 1
    times = [start_s + k * step_s for k in range(count)]
    return trace(times, [watts] * count, joules=[origin_j + watts * (t - start_s) for t in times])


# --- integration, worked by hand --------------------------------------------------------------------


def test_constant_power_integrates_to_power_times_duration() -> None:
    # 100 W from -1 s to 11 s, window 10 s: 100 W x 10 s = 1000 J, whatever lies outside it.
    card = steady(100.0, -1.0, 11.0)
    assert card_energy_j(card, 10 * S) == pytest.approx(1000.0)


def test_a_ramp_integrates_exactly_even_with_edges_between_samples() -> None:
    # P(t) = 10 t W sampled each second at 0..10 s; the window runs 0.5..9.5 s, so shift the
    # samples by -0.5 s: the integral of 10 t over [0.5, 9.5] is 5 x (9.5^2 - 0.5^2) = 450 J.
    times = [t - 0.5 for t in range(11)]
    card = trace(times, [10.0 * t for t in range(11)])
    assert card_energy_j(card, 9 * S) == pytest.approx(450.0)
    # the edges are interpolated: at the start 10 x 0.5 = 5 W, at the end 95 W
    assert power_at(0, card.power_t_us, card.power_mw) == pytest.approx(5.0)
    assert power_at(9 * S, card.power_t_us, card.power_mw) == pytest.approx(95.0)


def test_a_gap_at_the_edge_holds_the_nearest_sample_and_counts_as_a_gap() -> None:
    # No sample before the start: the first (at 0.5 s, 200 W) is held back to 0 s; then 200 W
    # to 3.5 s, the last sample. The window is 4 s: 0.5 s held + 3 s sampled + 0.5 s held at 200 W.
    card = trace([0.5, 1.5, 2.5, 3.5], [200.0] * 4)
    assert card_energy_j(card, 4 * S) == pytest.approx(800.0)
    assert longest_gap_us(card.power_t_us, 4 * S) == S  # between samples; the edges are 0.5 s each
    # a window starting 4 s before its first sample: the edge stretch is the longest gap
    late = trace([4.0, 5.0, 6.0], [100.0] * 3)
    assert longest_gap_us(late.power_t_us, 6 * S) == 4 * S
    assert card_energy_j(late, 6 * S) == pytest.approx(600.0)


def test_peak_is_the_highest_summed_power_of_the_cards() -> None:
    # card 0 peaks at 2 s (300 W), card 1 at 3 s (300 W); their sum peaks at 2.5 s? No: both are
    # linear between samples, so the sum is too; its values at the samples are 200+100, 300+200,
    # 200+300, 100+200: the highest is 500 W, at 2 s and at 3 s.
    a = trace([1.0, 2.0, 3.0, 4.0], [200.0, 300.0, 200.0, 100.0])
    b = trace([1.0, 2.0, 3.0, 4.0], [100.0, 200.0, 300.0, 200.0], device=1)
    assert peak_w([a, b], 5 * S) == pytest.approx(500.0)


# --- validity, one rule at a time -------------------------------------------------------------------


SERVED = Tokens(output=1000, total=3000)


def judge(cards: list[CardTrace], duration_s: float = 10.0, tokens: Tokens = SERVED) -> EnergyWindow:
    return judge_window(cards, round(duration_s * S), EnergyBounds(), tokens, None)


def test_a_steady_window_is_valid_with_every_figure() -> None:
    window = judge([steady(200.0, -1.0, 11.0)])
    assert window.invalid == []
    figures = window.figures
    assert figures is not None
    assert figures.energy_j == pytest.approx(2000.0) and figures.counter_j == pytest.approx(2000.0)
    assert figures.avg_w == pytest.approx(200.0) and figures.peak_w == pytest.approx(200.0)
    assert figures.j_per_output_token == pytest.approx(2.0)
    assert figures.j_per_total_token == pytest.approx(2000.0 / 3000)
    assert figures.tok_s_per_w == pytest.approx((1000 / 10) / 200.0)
    assert figures.above_idle_j is None  # no idle baseline given


def test_energy_above_idle_subtracts_each_cards_idle_power() -> None:
    window = judge_window([steady(200.0, -1.0, 11.0)], 10 * S, EnergyBounds(), Tokens(10, 20), {0: 30.0})
    assert window.figures is not None and window.figures.above_idle_j == pytest.approx(2000.0 - 300.0)


def test_a_gap_over_the_bound_invalidates_and_says_how_long() -> None:
    counter_s = [float(t) for t in range(-1, 12)]
    card = trace([-1.0, 0.5, 4.5, 7.5, 10.5], [100.0] * 5, counter_s, [100.0 * k for k in range(13)])
    window = judge([card])
    assert window.figures is None
    assert window.invalid == ["gap: 4.0 s without a power sample on device 0 (bound 3 s)"]


def test_a_gap_exactly_at_the_bound_is_allowed() -> None:
    card = trace([-1.0, 2.0, 5.0, 8.0, 11.0], [100.0] * 5, joules=[0.0, 300.0, 600.0, 900.0, 1200.0])
    assert judge([card]).valid


def test_a_card_without_a_counter_is_invalid() -> None:
    card = trace([float(t) for t in range(-1, 12)], [100.0] * 13)
    assert judge([card]).invalid == [
        "counter missing: device 0 has no cumulative energy counter to check its power against"
    ]


def test_a_counter_that_does_not_reach_past_an_edge_is_missing_there() -> None:
    times = [float(t) for t in range(-1, 12)]
    card = trace(times, [100.0] * 13, counter_s=times[:-2], joules=[100.0 * k for k in range(11)])
    assert judge([card]).invalid == [
        "counter missing: no counter reading on both sides of each edge of the window on device 0"
    ]


def test_a_counter_that_runs_backwards_is_a_wrap() -> None:
    times = [float(t) for t in range(-1, 12)]
    joules = [100.0 * k for k in range(13)]
    joules[6:] = [j - 262144.0 for j in joules[6:]]  # a 2^32 x 2^-14 J wrap the driver did not account for
    card = trace(times, [100.0] * 13, joules=[j + 300000.0 for j in joules])
    assert judge([card]).invalid == ["counter wrap: the energy counter of device 0 went backwards (a wrap or a reset)"]


def test_a_wrap_outside_the_window_does_not_matter() -> None:
    times = [float(t) for t in range(-3, 12)]
    joules = [
        5.0,
        0.0,
        *[100.0 * k for k in range(13)],
    ]  # backwards between -3 s and -2 s, before the last pre-start reading
    card = trace(times, [100.0] * 15, joules=joules)
    assert judge([card]).valid


def test_power_and_counter_that_disagree_invalidate_with_both_numbers() -> None:
    times = [float(t) for t in range(-1, 12)]
    card = trace(times, [200.0] * 13, joules=[150.0 * k for k in range(13)])  # the counter says 150 W
    # integrated 2000 J; counter 1500 J; tolerance 10 % of 1500 + 5 W x 10 s = 200 J
    assert judge([card]).invalid == [
        "disagreement: the power of device 0 integrates to 2000.0 J, its counter to 1500.0 J (tolerance 200.0 J)"
    ]


def test_agreement_within_the_tolerance_is_valid() -> None:
    times = [float(t) for t in range(-1, 12)]
    card = trace(times, [200.0] * 13, joules=[182.0 * k for k in range(13)])  # 1820 J: 180 J off, tolerance 232 J
    assert judge([card]).valid


def test_every_card_of_a_window_is_judged_and_named() -> None:
    good = steady(200.0, -1.0, 11.0)
    bad = trace([float(t) for t in range(-1, 12)], [100.0] * 13, device=1)
    window = judge([good, bad])
    assert window.invalid == ["counter missing: device 1 has no cumulative energy counter to check its power against"]


def test_no_token_figure_without_tokens() -> None:
    window = judge([steady(50.0, -1.0, 11.0)], tokens=Tokens(0, 0))
    assert window.figures is not None
    assert (window.figures.j_per_output_token, window.figures.tok_s_per_w) == (None, None)


# --- the records themselves --------------------------------------------------------------------------


def test_a_window_carries_figures_or_reasons_never_both() -> None:
    valid = judge([steady(200.0, -1.0, 11.0)])
    with pytest.raises(ValidationError, match="either its figures or why"):
        EnergyWindow(duration_us=10 * S, cards=valid.cards, figures=valid.figures, invalid=["gap: made up"])
    with pytest.raises(ValidationError, match="either its figures or why"):
        EnergyWindow(duration_us=10 * S, cards=valid.cards)


def test_sample_times_must_increase() -> None:
    with pytest.raises(ValidationError, match="times must increase"):
        trace([0.0, 2.0, 1.0], [1.0, 1.0, 1.0])


def test_a_setup_names_its_sources_or_why_there_are_none() -> None:
    assert EnergySetup(absent="no card energy source: the CPU demo").sources == []
    with pytest.raises(ValidationError, match="not both"):
        EnergySetup()
    with pytest.raises(ValidationError, match="not both"):
        EnergySetup(sources=["x"], absent="y")


def test_idle_power_comes_from_a_valid_baseline() -> None:
    idle = judge([steady(31.86, -1.0, 11.0)], tokens=Tokens(0, 0))
    setup = EnergySetup(sources=["test"], interval_ms=1000, idle=idle)
    idle_w = setup.idle_w()
    assert idle_w is not None and idle_w[0] == pytest.approx(31.86)
    assert math.isclose(idle.duration_s, 10.0)
