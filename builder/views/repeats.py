"""Repeats, intervals and history on a family page (catalog/checks/repeats.py, catalog/checks/history.py).

The family's qualified measured results are grouped by configuration (builder/views/results.py
`configuration`: card, quantization, cards, method, depth, draft head); each configuration's
packets make its history: runs of one setup, each run's repeats combined into a centre and a 95 %
t-interval, and the change between consecutive runs. The scorecard asks `FamilyRepeats.run_of`
for the run a result belongs to; the page's "Repeats and history" section charts every
configuration measured more than once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from builder import routes
from builder.charts import Chart, Point, chart
from builder.format import Num, num
from builder.views.results import ArmResult, configuration, label_key, short_depth
from catalog.checks.history import Change, History, Run, Setup, history_of
from catalog.checks.repeats import CONFIDENCE, RefusedRepeat

Configuration = tuple[str, str, int, int, str, str]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class FamilyRepeats:
    """Every configuration's history, and which run each measured result belongs to."""

    def __init__(self, results: Sequence[ArmResult]) -> None:
        groups: dict[Configuration, list[ArmResult]] = {}
        for result in results:
            if result.qualified and result.packet.provenance.kind == "measured":
                groups.setdefault(configuration(result), []).append(result)
        self.results = groups
        self.histories: dict[Configuration, History] = {
            key: history_of((r.packet, r.arm) for r in members) for key, members in groups.items()
        }
        self._runs: dict[tuple[str, str], Run] = {}
        for history in self.histories.values():
            for run in history.runs:
                for repeat in run.combined.repeats:
                    self._runs[(repeat.packet.id, repeat.arm.id)] = run

    def refused(self) -> list[RefusedRepeat]:
        """Forged repeats (catalog/checks/repeats.py): the build warns of each, and `--strict` fails."""
        return [r for history in self.histories.values() for r in history.refused]

    def run_of(self, result: ArmResult) -> Run | None:
        """The run (same configuration and setup) a result counts in; None if it is not a counted repeat."""
        return self._runs.get((result.packet.id, result.arm.id))


@dataclass(frozen=True)
class RunRow:
    setup: str
    repeats: int
    centre: Num
    low: Num | None
    high: Num | None
    words: str
    first: str
    last: str
    packets: list[tuple[str, str]]  # (packet id, href)


@dataclass(frozen=True)
class ChangeRow:
    words: str
    flagged: bool
    since: str  # the date of the later run


@dataclass(frozen=True)
class RefusedRow:
    packet_id: str
    href: str
    reason: str


@dataclass(frozen=True)
class HistoryView:
    id: str
    title: str
    chart: Chart
    runs: list[RunRow]
    changes: list[ChangeRow]


@dataclass(frozen=True)
class RepeatsSection:
    histories: list[HistoryView]
    refused: list[RefusedRow]
    once: int  # configurations measured once
    method: str


METHOD = (
    f"Each point is one packet: the centre of its two fresh servers. A run is the packets of one setup (image or "
    f"vLLM install, driver, weights, workload); its centre is their mean with a {CONFIDENCE:.0%} t-interval over the "
    "repeats. A change between consecutive runs is flagged when its Welch interval excludes zero."
)


def setup_words(setup: Setup) -> str:
    parts = [f"image {setup.image[:19]}…" if setup.image else "local install", f"vLLM {setup.vllm}"]
    if setup.driver:
        parts.append(f"driver {setup.driver}")
    if setup.weights:
        parts.append(f"weights {setup.weights[:12]}")
    parts.append(setup.workload)
    return " · ".join(parts)


def _day(moment: datetime | None) -> str:
    return moment.date().isoformat() if moment else "undated"


def _x(moment: datetime | None) -> float:
    return round((moment - EPOCH).total_seconds() / 86400.0, 4) if moment else 0.0


def _run_row(run: Run) -> RunRow:
    interval = run.combined.interval
    return RunRow(
        setup=setup_words(run.setup),
        repeats=run.combined.n,
        centre=num(run.combined.centre, unit="tok/s"),
        low=num(interval.low) if interval else None,
        high=num(interval.high) if interval else None,
        words=run.combined.words(),
        first=_day(run.first),
        last=_day(run.last),
        packets=[(r.packet.id, routes.packet_page(r.packet.id, r.arm.id)) for r in run.combined.repeats],
    )


def _change_row(change: Change) -> ChangeRow:
    return ChangeRow(change.words(), change.flagged, _day(change.after.first))


def _title(result: ArmResult) -> str:
    head = f" · {result.draft_head}" if result.draft_head else ""
    cards = "1 card" if result.tp == 1 else f"{result.tp} cards"
    return f"{result.hardware_name} · {result.quant_label} · {cards} · {short_depth(result.method, result.depth)}{head}"


def _history_view(key: Configuration, members: list[ArmResult], history: History) -> HistoryView:
    title = _title(members[0])
    points = []
    for run in history.runs:
        series = setup_words(run.setup)
        for repeat in run.combined.repeats:
            created = repeat.packet.created
            points.append(
                Point(
                    series=series,
                    x=_x(created),
                    x_label=_day(created),
                    centre=repeat.value,
                    values=repeat.arm.server_values,
                    ttft_ms=repeat.arm.ttft_ms,
                    href=routes.packet_page(repeat.packet.id, repeat.arm.id),
                    evidence=repeat.packet.id,
                    source=repeat.packet.provenance.taken_from,
                )
            )
    chart_id = "history-" + label_key("-".join(str(part) for part in key))
    drawn = chart(
        chart_id,
        f"History · {title}",
        f"decode tok/s per packet over time · a series per setup · {len(points)} packets",
        points,
        x_title="date measured",
        x_ticks=True,
    )
    return HistoryView(
        chart_id, title, drawn, [_run_row(run) for run in history.runs], [_change_row(c) for c in history.changes]
    )


def repeats_section(repeats: FamilyRepeats) -> RepeatsSection | None:
    """Every configuration measured more than once (its chart, runs and changes) and every
    refused repeat; None when the family has no measured result."""
    if not repeats.histories:
        return None
    views = []
    refused = []
    once = 0
    for key, history in sorted(repeats.histories.items()):
        refused += [
            RefusedRow(r.packet.id, routes.packet_page(r.packet.id, r.arm.id), r.reason) for r in history.refused
        ]
        if sum(run.combined.n for run in history.runs) < 2:
            once += 1
            continue
        views.append(_history_view(key, repeats.results[key], history))
    return RepeatsSection(views, refused, once, METHOD)
