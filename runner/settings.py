"""What a campaign hands every step it runs: the measurement settings and where progress lines go."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from catalog.recipes.suite import CanarySet, Suite

if TYPE_CHECKING:
    from runner.energy.meter import Meter

Progress = Callable[[str], None]
"""Where a step reports what it is doing: one line per call (runner/progress.py prints them)."""


@dataclass(frozen=True)
class MeasurementSettings:
    """What every server of a campaign is measured with (the packet records it as its Workload)."""

    suite: Suite  # the strict suite every server answers
    canaries: CanarySet  # the canary questions asked before the suite
    max_tokens: int  # completion length of every suite request
    seed: int  # sampling seed of every request
    health_deadline_s: float  # how long a fresh server may take to answer /health
    energy: Meter | None = None  # samples the cards beside every measured window (runner/energy/)
