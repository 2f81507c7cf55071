"""Energy per measured window: each card's power sampled beside the window, integrated over it,
cross-checked against the card's own cumulative energy counter. The one home of every definition.

A window is a stretch of the client's clock (time.perf_counter, the clock the requests are timed
with): a server's strict suite, a concurrency level, a load level, or the idle baseline taken
before the first server. For each card the server used it keeps the raw samples (compact
arrays, microseconds from the window's start; samples just outside it are kept too, so its
edges can be interpolated) and, when the samples allow, the derived figures:

- **energy** is the trapezoid integral of the card's power over exactly [0, duration]: power is
  linear between samples, interpolated at the window's edges, and held flat from the nearest
  sample where no sample lies beyond an edge (that stretch counts as a gap);
- **counter energy** is the difference of the card's cumulative counter interpolated at both edges
  (a counter reading on each side of each edge is required);
- the window is **valid** only when no stretch of it goes longer than `gap_bound_s` without a
  power (or counter) sample, every card has both sources, no counter runs backwards (a wrap the
  driver did not account for, or a reset), and on every card the two energies agree within
  `agreement` of the counter's energy plus `power_accuracy_w` over the window. Every invalid
  window lists why, and carries no figure: `gap`, `power missing`, `counter missing`, `counter wrap`
  (the counter went backwards) or `disagreement` (both energies given);
- figures: J per output token and per total (prompt + output) token, average and peak W (peak:
  the highest value of the cards' summed, interpolated power), output tokens per joule (= tok/s
  per W), and energy above the idle baseline (each card's idle W times the duration, subtracted).
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import Field, model_validator

from catalog.model.arrays import Int64Array, UInt32Array, to_int64
from catalog.model.base import FieldError, StrictModel

GAP_BOUND_S = 3.0
"""Longest stretch of a window without a sample (s): one sample a second is asked for, and the
most careful published method flags a run whose samples are more than 3 s apart."""

AGREEMENT = 0.10
"""How far (relative to the counter's energy) the integrated power may differ from the counter.
Power sampled once a second misses what happens between samples; 10 % is far beyond that on a
steady load and well inside the incoherent readings reported for xpu-smi on a B70 under load."""

POWER_ACCURACY_W = 5.0
"""Absolute accuracy of one card's power reading (nvidia-smi --help-query-gpu: power.draw is
"accurate to within +/- 5 watts"): over a window it adds this many watts times the duration to the
tolerance, so an idle or very short window is not judged on noise."""

US = 1_000_000


def _empty() -> array[int]:
    return to_int64([])


class EnergyBounds(StrictModel):
    """The validity rules' numbers, recorded with the samples they were applied to."""

    gap_bound_s: float = Field(
        default=GAP_BOUND_S, gt=0, description="Longest stretch of a window without a sample, seconds."
    )
    agreement: float = Field(
        default=AGREEMENT, gt=0, description="Largest relative difference between integrated power and the counter."
    )
    power_accuracy_w: float = Field(
        default=POWER_ACCURACY_W,
        ge=0,
        description="Absolute accuracy of one power reading, watts (adds to the tolerance).",
    )


class CardTrace(StrictModel):
    """One card's samples around one window: times are microseconds from the window's start on the
    client's clock (negative before it), power in milliwatts (each value the mean over an interval,
    timed at its middle), the counter in microjoules as read (its origin is the counter's own:
    driver load)."""

    device: int = Field(ge=0, description="The card's index in the vendor tool (xpu-smi, nvidia-smi / NVML).")
    bus_id: str | None = Field(default=None, description="The card's PCI address.")
    power_source: str = Field(min_length=1, description="What the power samples were read from, and their domain.")
    counter_source: str | None = Field(
        default=None, description="What the cumulative energy counter was read from; null when the card has none."
    )
    power_t_us: Int64Array = Field(
        description="Time of each power sample, µs from the window's start, base64 int64: the middle of the "
        "interval whose mean power it is (the tool's row or read time less half that interval)."
    )
    power_mw: UInt32Array = Field(description="Each power sample, milliwatts, base64 uint32.")
    counter_t_us: Int64Array = Field(
        default_factory=_empty, description="Time of each counter reading, µs from the window's start, base64 int64."
    )
    counter_uj: Int64Array = Field(
        default_factory=_empty, description="Each cumulative counter reading, microjoules, base64 int64."
    )

    @model_validator(mode="after")
    def _paired_and_ordered(self) -> CardTrace:
        if len(self.power_t_us) != len(self.power_mw):
            raise FieldError("needs one time per power sample", "power_t_us")
        if len(self.counter_t_us) != len(self.counter_uj):
            raise FieldError("needs one time per counter reading", "counter_t_us")
        for name in ("power_t_us", "counter_t_us"):
            times = getattr(self, name)
            if any(later <= earlier for earlier, later in itertools.pairwise(times)):
                raise FieldError("times must increase", name)
        if len(self.counter_uj) and self.counter_source is None:
            raise FieldError("counter readings need their counter_source", "counter_source")
        return self


class EnergyFigures(StrictModel):
    """What a valid window gives (recomputed from its samples by verification)."""

    energy_j: float = Field(ge=0, description="Trapezoid integral of the cards' power over the window, joules.")
    counter_j: float = Field(ge=0, description="The cards' cumulative counters' difference over the window, joules.")
    avg_w: float = Field(ge=0, description="Average power over the window, watts (energy over duration).")
    peak_w: float = Field(ge=0, description="Highest value of the cards' summed, interpolated power, watts.")
    above_idle_j: float | None = Field(
        default=None, description="Energy above the idle baseline (each card's idle W over the window), joules."
    )
    j_per_output_token: float | None = Field(default=None, gt=0, description="Joules per output token.")
    j_per_total_token: float | None = Field(
        default=None, gt=0, description="Joules per token, prompt and output tokens together."
    )
    tok_s_per_w: float | None = Field(
        default=None, gt=0, description="Output tokens per second per watt (= output tokens per joule)."
    )


class EnergyWindow(StrictModel):
    """The samples of every card a server used over one measured window, and what they give."""

    duration_us: int = Field(gt=0, description="The window's length on the client's clock, microseconds.")
    cards: list[CardTrace] = Field(min_length=1, description="One trace per card the server used.")
    figures: EnergyFigures | None = Field(default=None, description="The derived figures; null when invalid.")
    invalid: list[str] = Field(default=[], description="Why the window gives no figure (gap, counter, disagreement).")

    @model_validator(mode="after")
    def _figures_or_reasons(self) -> EnergyWindow:
        if (self.figures is None) == (not self.invalid):
            raise FieldError("a window carries either its figures or why it is invalid", "figures")
        return self

    @property
    def duration_s(self) -> float:
        return self.duration_us / US

    @property
    def valid(self) -> bool:
        return self.figures is not None


class EnergySetup(StrictModel):
    """How a campaign read its cards' energy (or why it could not), the rules it was judged by,
    and the idle baseline taken before the first server started."""

    sources: list[str] = Field(default=[], description="Each source read: tool, quantity, domain, unit.")
    absent: str | None = Field(
        default=None, description="Why no card energy was read (no card energy source on this host); null when read."
    )
    interval_ms: int | None = Field(default=None, gt=0, description="Sampling period asked of every source, ms.")
    bounds: EnergyBounds = Field(default_factory=EnergyBounds, description="The validity rules applied.")
    idle: EnergyWindow | None = Field(
        default=None, description="The idle baseline: every card the campaign used, before any server started."
    )

    @model_validator(mode="after")
    def _sources_or_absent(self) -> EnergySetup:
        if bool(self.sources) == (self.absent is not None):
            raise FieldError("name the sources read, or why none exists (absent), not both", "absent")
        if self.absent is not None and self.idle is not None:
            raise FieldError("no idle baseline without a source", "idle")
        return self

    def idle_w(self) -> dict[int, float] | None:
        """Each card's idle power (W), from a valid idle baseline."""
        if self.idle is None or not self.idle.valid:
            return None
        return {
            card.device: card_energy_j(card, self.idle.duration_us) / self.idle.duration_s for card in self.idle.cards
        }


# --- the arithmetic: one home for every definition ---------------------------------------------


@dataclass(frozen=True)
class Tokens:
    """What a window served: output tokens and prompt + output tokens."""

    output: int
    total: int


def power_at(t_us: float, times: Sequence[int], milliwatts: Sequence[int]) -> float:
    """Power (W) at t: linear between the samples either side, the nearest sample's value beyond them."""
    if not times:
        raise ValueError("no power sample")
    k = bisect.bisect_left(times, t_us)
    if k < len(times) and times[k] == t_us:
        return milliwatts[k] / 1000.0
    if k == 0:
        return milliwatts[0] / 1000.0
    if k == len(times):
        return milliwatts[-1] / 1000.0
    t0, t1 = times[k - 1], times[k]
    p0, p1 = milliwatts[k - 1] / 1000.0, milliwatts[k] / 1000.0
    return p0 + (p1 - p0) * (t_us - t0) / (t1 - t0)


def _breakpoints(times: Sequence[int], duration_us: int) -> list[float]:
    inside = [float(t) for t in times if 0 < t < duration_us]
    return [0.0, *inside, float(duration_us)]


def card_energy_j(card: CardTrace, duration_us: int) -> float:
    """The trapezoid integral (J) of the card's power over [0, duration_us]."""
    points = _breakpoints(card.power_t_us, duration_us)
    watts = [power_at(t, card.power_t_us, card.power_mw) for t in points]
    return (
        sum((t1 - t0) * (w0 + w1) / 2.0 for t0, t1, w0, w1 in zip(points, points[1:], watts, watts[1:], strict=False))
        / US
    )


def counter_at(t_us: float, times: Sequence[int], microjoules: Sequence[int]) -> float | None:
    """The counter (J) at t, linear between the readings either side; None without one on each side."""
    k = bisect.bisect_left(times, t_us)
    if k < len(times) and times[k] == t_us:
        return microjoules[k] / US
    if k == 0 or k == len(times):
        return None
    t0, t1 = times[k - 1], times[k]
    c0, c1 = microjoules[k - 1], microjoules[k]
    return (c0 + (c1 - c0) * (t_us - t0) / (t1 - t0)) / US


def _span(times: Sequence[int], duration_us: int) -> tuple[int, int]:
    """Indices [first, last] of the samples that matter: the last at or before the start through
    the first at or after the end (or the first/last sample where there is none beyond an edge)."""
    first = max(bisect.bisect_right(times, 0) - 1, 0)
    last = min(bisect.bisect_left(times, duration_us), len(times) - 1)
    return first, last


def longest_gap_us(times: Sequence[int], duration_us: int) -> int:
    """The longest stretch of [0, duration] without a sample: between consecutive samples that
    bound part of it, and from an edge to the nearest sample where none lies beyond that edge."""
    if not times:
        return duration_us
    first, last = _span(times, duration_us)
    used = list(times[first : last + 1])
    gaps = [later - earlier for earlier, later in itertools.pairwise(used)]
    if used[0] > 0:
        gaps.append(min(used[0], duration_us))
    if used[-1] < duration_us:
        gaps.append(duration_us - max(used[-1], 0))
    return max(gaps, default=0)


def _counter_backwards(card: CardTrace, duration_us: int) -> bool:
    if not card.counter_uj:
        return False
    first, last = _span(card.counter_t_us, duration_us)
    used = card.counter_uj[first : last + 1]
    return any(later < earlier for earlier, later in itertools.pairwise(used))


def _seconds(us: float) -> str:
    return f"{us / US:.1f} s"


def window_reasons(cards: Sequence[CardTrace], duration_us: int, bounds: EnergyBounds) -> list[str]:
    """Why a window gives no figure, one line per broken rule and card (empty: valid)."""
    reasons: list[str] = []
    bound_us = bounds.gap_bound_s * US
    for card in cards:
        name = f"device {card.device}"
        if not card.power_t_us:
            reasons.append(f"power missing: no power sample on {name}")
            continue
        gap = longest_gap_us(card.power_t_us, duration_us)
        if gap > bound_us:
            reasons.append(f"gap: {_seconds(gap)} without a power sample on {name} (bound {bounds.gap_bound_s:g} s)")
        if card.counter_source is None or not card.counter_uj:
            reasons.append(f"counter missing: {name} has no cumulative energy counter to check its power against")
            continue
        start = counter_at(0, card.counter_t_us, card.counter_uj)
        end = counter_at(duration_us, card.counter_t_us, card.counter_uj)
        if start is None or end is None:
            reasons.append(f"counter missing: no counter reading on both sides of each edge of the window on {name}")
            continue
        counter_gap = longest_gap_us(card.counter_t_us, duration_us)
        if counter_gap > bound_us:
            reasons.append(
                f"gap: {_seconds(counter_gap)} without a counter reading on {name} (bound {bounds.gap_bound_s:g} s)"
            )
        if _counter_backwards(card, duration_us):
            reasons.append(f"counter wrap: the energy counter of {name} went backwards (a wrap or a reset)")
            continue
        integrated = card_energy_j(card, duration_us)
        counted = end - start
        tolerance = bounds.agreement * counted + bounds.power_accuracy_w * duration_us / US
        if abs(integrated - counted) > tolerance:
            reasons.append(
                f"disagreement: the power of {name} integrates to {integrated:.1f} J, its counter to "
                f"{counted:.1f} J (tolerance {tolerance:.1f} J)"
            )
    return reasons


def peak_w(cards: Sequence[CardTrace], duration_us: int) -> float:
    """The highest value of the cards' summed power over the window: the sum is linear between any
    card's samples, so its highest value is at one of them or at an edge."""
    points = sorted({p for card in cards for p in _breakpoints(card.power_t_us, duration_us)})
    return max(sum(power_at(t, card.power_t_us, card.power_mw) for card in cards) for t in points)


def _r(value: float) -> float:
    """Nine significant digits: far below any reading's accuracy, and a short spelling in the file."""
    return float(f"{value:.9g}")


def window_figures(
    cards: Sequence[CardTrace], duration_us: int, tokens: Tokens, idle_w: dict[int, float] | None
) -> EnergyFigures:
    """The figures of a window already judged valid."""
    energy = sum(card_energy_j(card, duration_us) for card in cards)
    counted = 0.0
    for card in cards:
        start = counter_at(0, card.counter_t_us, card.counter_uj)
        end = counter_at(duration_us, card.counter_t_us, card.counter_uj)
        assert start is not None and end is not None  # a valid window has both
        counted += end - start
    seconds = duration_us / US
    above = None
    if idle_w is not None and all(card.device in idle_w for card in cards):
        above = energy - sum(idle_w[card.device] for card in cards) * seconds
    per_output = energy / tokens.output if tokens.output and energy > 0 else None
    per_total = energy / tokens.total if tokens.total and energy > 0 else None
    return EnergyFigures(
        energy_j=_r(energy),
        counter_j=_r(max(counted, 0.0)),
        avg_w=_r(energy / seconds),
        peak_w=_r(peak_w(cards, duration_us)),
        above_idle_j=None if above is None else _r(above),
        j_per_output_token=None if per_output is None else _r(per_output),
        j_per_total_token=None if per_total is None else _r(per_total),
        tok_s_per_w=None if per_output is None else _r(tokens.output / energy),
    )


def judge_window(
    cards: Sequence[CardTrace],
    duration_us: int,
    bounds: EnergyBounds,
    tokens: Tokens,
    idle_w: dict[int, float] | None,
) -> EnergyWindow:
    """A window with its figures, or with every reason it has none."""
    reasons = window_reasons(cards, duration_us, bounds)
    figures = None if reasons else window_figures(cards, duration_us, tokens, idle_w)
    return EnergyWindow(duration_us=duration_us, cards=list(cards), figures=figures, invalid=reasons)
