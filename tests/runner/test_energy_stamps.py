"""A power value is the mean over the interval before it was read (runner/energy/sources.py cites
xpu-smi's and NVML's code and documentation): the meter stamps it at that interval's middle. Here a
card steps from 30 W idle to 220 W for exactly the window, as a server's load does, and xpu-smi
prints a row a second at an arbitrary phase, each row the mean since the previous one."""

from __future__ import annotations

import pytest

from catalog.model.energy import EnergyWindow, Tokens
from runner.energy import sources
from runner.energy.meter import Card, EnergyMeter

IDLE_W, LOAD_W = 30.0, 220.0
PHASE_S = 0.3  # the rows' offset from the window's start


def step_energy_j(a: float, b: float, duration: float) -> float:
    """The card's true energy over [a, b]: LOAD_W inside [0, duration], IDLE_W outside."""
    inside = max(min(b, duration) - max(a, 0.0), 0.0)
    return LOAD_W * inside + IDLE_W * (b - a - inside)


def metered(duration: float, power_window_s: float) -> EnergyWindow:
    """The window [0, duration] as the meter sees it: xpu-smi rows (loop 1 s) read at k + PHASE_S,
    each the mean over the second before; hwmon's exact counter read every 0.5 s."""
    card = Card(0, None, sources.XPU_POWER, sources.HWMON_COUNTER, power_window_s)
    for k in range(-4, int(duration) + 5):
        row = k + PHASE_S
        card.add_power(row, round(step_energy_j(row - 1.0, row, duration) * 1000))
    for k in range(-8, 2 * int(duration) + 10):
        card.add(card.counter, k / 2, round((1000.0 + step_energy_j(-10.0, k / 2, duration)) * 1e6))
    meter = EnergyMeter([card], [], [], 1000, lambda _: None)
    return meter.window(0.0, duration, 1, Tokens(1000, 2000))


@pytest.mark.parametrize("duration", [3.2, 10.0, 60.0])
def test_a_window_of_a_load_step_is_within_tolerance_once_rows_are_stamped_mid_interval(duration: float) -> None:
    true_j = step_energy_j(0.0, duration, duration)
    stamped = metered(duration, sources.xpu_power_window_s(1000))
    assert stamped.figures is not None, stamped.invalid
    # what remains is a 1 Hz sampling of a step at each edge: about (220 - 30) W x 0.45 s, not a lag
    assert true_j - stamped.figures.energy_j < 0.5 * (LOAD_W - IDLE_W)
    as_printed = metered(duration, 0.0)  # stamped when read: the meter before the fix
    if as_printed.figures is None:
        assert [reason.split(":")[0] for reason in as_printed.invalid] == ["disagreement"]
    else:
        assert as_printed.figures.energy_j < stamped.figures.energy_j  # biased low: the rows lag the card


def test_a_linear_ramp_is_integrated_exactly_from_interval_means() -> None:
    """The mean of a linear stretch is its value at the interval's middle: stamped there, the samples
    give the ramp's energy exactly; stamped when read, half an interval late, they fall short."""

    def ramp_w(t: float) -> float:
        return 30.0 + 10.0 * t

    def meter_for(window_s: float) -> EnergyMeter:
        card = Card(0, None, sources.NVML_POWER, sources.NVML_COUNTER, window_s)
        for k in range(0, 20):
            mean = (ramp_w(k - 1.0) + ramp_w(float(k))) / 2  # NVML's 1 s mean, read at k
            card.add_power(float(k), round(mean * 1000))
            card.add(card.counter, float(k), round((30.0 * k + 5.0 * k * k) * 1e6))
        return EnergyMeter([card], [], [], 1000, lambda _: None)

    true_j = 30.0 * 6 + 5.0 * (8 * 8 - 2 * 2)  # over [2, 8]
    exact = meter_for(sources.NVML_POWER_WINDOW_S).window(2.0, 8.0, 1, Tokens(1, 2)).figures
    late = meter_for(0.0).window(2.0, 8.0, 1, Tokens(1, 2)).figures
    assert exact is not None and exact.energy_j == pytest.approx(true_j, abs=0.01)
    assert late is not None and late.energy_j == pytest.approx(true_j - 10.0 * 0.5 * 6, abs=0.01)
