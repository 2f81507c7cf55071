"""A configuration's history: its measured packets over time, and the changes beyond their intervals.

The packets of one configuration (catalog/checks/repeats.py) are grouped by their setup, what
they were measured with: the image (its digest) or the local vLLM install (its package set),
the vLLM version, the accelerator driver, the weights (their revision, or the hashes of their
files) and the workload (suite and completion length). Each group is one run in the history,
its repeats combined into a centre and a 95 % t-interval; runs are ordered by their first packet.

Between two consecutive runs the change is the difference of their centres with its 95 %
interval (Welch: (m₂ − m₁) ± t · √(s₁²/n₁ + s₂²/n₂), t at 0.975 with the Welch–Satterthwaite
degrees of freedom), as a share of the earlier centre. A change whose interval excludes zero is
flagged, naming what changed in the setup: "slower by 6.0 % ± 1.0 % since image sha256:…". A run
measured once has no spread, so no change to or from it is flagged: the page says so.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime

from catalog.checks.repeats import CONFIDENCE, Combined, Interval, RefusedRepeat, Repeat, count_repeats, t_quantile
from catalog.model.packet import Arm, Packet
from catalog.numbers import fmt


@dataclass(frozen=True)
class Setup:
    """What a packet was measured with, field by field, in the words a change names it by."""

    image: str | None  # the image digest, or None for a local install
    vllm: str
    packages: str | None  # the local install's package set (sha256), or None in an image
    driver: str | None
    weights: str | None  # the checkpoint's revision, or a hash of its files' hashes
    workload: str

    def changes_since(self, before: Setup) -> list[str]:
        """What differs from `before`, each as `<what> <old> → <new>` (an image as its new digest)."""
        found = []
        for part in fields(self):
            old, new = getattr(before, part.name), getattr(self, part.name)
            if old != new:
                found.append(
                    f"{_NAMES[part.name]} {_short(new)}"
                    if part.name == "image"
                    else f"{_NAMES[part.name]} {_short(old)} → {_short(new)}"
                )
        return found


_NAMES = {
    "image": "image",
    "vllm": "vLLM",
    "packages": "package set",
    "driver": "driver",
    "weights": "weights revision",
    "workload": "workload",
}


def _short(value: str | None) -> str:
    if value is None:
        return "none"
    if value.startswith("sha256:") and len(value) > 19:
        return value[:19] + "…"
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"
    return value


def setup_of(packet: Packet) -> Setup:
    runtime, model, host, workload = (
        packet.identity.runtime,
        packet.identity.model,
        packet.identity.host,
        packet.workload,
    )
    weights = model.revision
    if weights is None and model.weight_files:
        joined = "".join(f"{f.name}:{f.sha256}\n" for f in sorted(model.weight_files, key=lambda f: f.name))
        weights = hashlib.sha256(joined.encode()).hexdigest()
    return Setup(
        image=runtime.image_digest,
        vllm=runtime.version,
        packages=runtime.package_set_sha256 if runtime.image_digest is None else None,
        driver=host.driver,
        weights=weights,
        workload=f"{workload.suite_id} {workload.max_tokens} tokens",
    )


@dataclass(frozen=True)
class Run:
    setup: Setup
    combined: Combined
    first: datetime | None
    last: datetime | None


@dataclass(frozen=True)
class Change:
    before: Run
    after: Run
    percent: float  # (after − before) / before, in %
    plus_minus: float | None  # half-width of its 95 % interval, in %; None when a run was measured once
    what_changed: list[str]

    @property
    def flagged(self) -> bool:
        return self.plus_minus is not None and abs(self.percent) > self.plus_minus

    def words(self) -> str:
        """`slower by 6.0 % ± 1.0 % since image sha256:…` (or why nothing can be said)."""
        since = "; ".join(self.what_changed) or "nothing recorded in the setup changed"
        if self.plus_minus is None:
            moved = ("+" if self.percent > 0 else "-") + fmt(abs(self.percent), 1)
            return f"{moved} % since {since}: a run measured once has no interval, so no change is claimed"
        direction = "faster" if self.percent > 0 else "slower"
        sign = f"{direction} by {fmt(abs(self.percent), 1)} % ± {fmt(self.plus_minus, 1)} %"
        if not self.flagged:
            return f"{sign} since {since}: within the interval, not a change"
        return f"{sign} since {since}"


def welch_difference(
    before: Sequence[float], after: Sequence[float], confidence: float = CONFIDENCE
) -> Interval | None:
    """after − before with its Welch interval; None when either side has fewer than two values."""
    n1, n2 = len(before), len(after)
    if n1 < 2 or n2 < 2:
        return None
    m1, m2 = sum(before) / n1, sum(after) / n2
    v1 = sum((x - m1) ** 2 for x in before) / (n1 - 1) / n1
    v2 = sum((x - m2) ** 2 for x in after) / (n2 - 1) / n2
    difference = m2 - m1
    if v1 + v2 == 0:
        return Interval(difference, difference, difference)
    df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1))
    half = t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(v1 + v2)
    return Interval(difference, difference - half, difference + half)


@dataclass(frozen=True)
class History:
    runs: list[Run]  # oldest first
    refused: list[RefusedRepeat]  # forged repeats, refused across every setup

    @property
    def changes(self) -> list[Change]:
        return changes(self.runs)


def history_of(candidates: Iterable[tuple[Packet, Arm]]) -> History:
    """The candidates (qualified measured arms of one configuration): every repeat counted once
    across all setups (a copy re-sealed under another setup is still a copy), then grouped by
    setup, oldest run first."""
    counted, refused = count_repeats(candidates)
    groups: dict[Setup, list[Repeat]] = {}
    for repeat in counted:
        groups.setdefault(setup_of(repeat.packet), []).append(repeat)
    runs = []
    for setup, repeats in groups.items():
        dates = [r.packet.created for r in repeats if r.packet.created is not None]
        runs.append(Run(setup, Combined(repeats, []), min(dates, default=None), max(dates, default=None)))
    runs.sort(key=lambda run: (run.first.isoformat() if run.first else "", run.combined.repeats[0].packet.id))
    return History(runs, refused)


def changes(runs: Sequence[Run]) -> list[Change]:
    """The change between each pair of consecutive runs."""
    found = []
    for before, after in itertools.pairwise(runs):
        old = [r.value for r in before.combined.repeats]
        new = [r.value for r in after.combined.repeats]
        base = before.combined.centre
        difference = welch_difference(old, new)
        percent = (after.combined.centre - base) / base * 100.0
        plus_minus = difference.half_width / base * 100.0 if difference is not None else None
        found.append(Change(before, after, percent, plus_minus, after.setup.changes_since(before.setup)))
    return found
