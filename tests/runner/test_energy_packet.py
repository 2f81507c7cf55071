"""runner/energy/packet.py: when a campaign is sealed, every window is judged again against the idle
baseline of this run, so a resumed campaign's reused windows agree with the packet it goes into;
a host without an energy source keeps no window at all."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from catalog.checks.consistency import packet_problems
from catalog.model.energy import EnergySetup, Tokens
from catalog.packets.seal import seal
from runner.energy.meter import NO_CARD
from runner.energy.packet import judged
from testkit.energy_samples import steady_window, with_energy
from testkit.samples import measured_parts
from tests.catalog import factories

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_windows_measured_after_an_earlier_baseline_are_judged_against_this_runs() -> None:
    parts = with_energy(measured_parts(), idle=30.0)  # the windows' above-idle energy uses 30 W
    assert parts.energy is not None and parts.energy.idle is not None
    newer = steady_window(40.0, parts.energy.idle.duration_us, Tokens(0, 0), None)
    setup = parts.energy.model_copy(update={"idle": newer})  # a resumed run's own baseline: 40 W
    stale = seal(parts.model_copy(update={"energy": setup}), factories.test_key()).packet
    assert any(field.endswith("above_idle_j") for field, _ in packet_problems(stale, NOW))
    arms, ladders = judged(list(parts.arms), list(parts.ladders), setup)
    packet = seal(parts.model_copy(update={"arms": arms, "ladders": ladders, "energy": setup}), factories.test_key())
    assert packet_problems(packet.packet, NOW) == []
    window = packet.packet.arms[0].servers[0].energy
    assert window is not None and window.figures is not None and window.figures.above_idle_j is not None
    assert window.figures.above_idle_j == pytest.approx(window.figures.energy_j - 40.0 * window.duration_s)


def test_a_host_without_an_energy_source_keeps_no_window() -> None:
    parts = with_energy(measured_parts())
    arms, _ = judged(list(parts.arms), list(parts.ladders), EnergySetup(absent=NO_CARD))
    assert all(server.energy is None for arm in arms for server in arm.servers)
