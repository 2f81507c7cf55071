""" "What has been classified": scorecard matrices over two axes, every cell a state with evidence.

A withheld entry never carries a value in the value slot; its would-be number is only kept as a
struck secondary figure next to the word "withheld" and the failed gate. An untested cell may show
catalog.projection's estimate, labelled estimated and still listed among the untested.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations

from builder import routes
from builder.format import Num, num, opt_num, significant
from builder.views.energy import EnergyFigure
from builder.views.projection import Estimator
from builder.views.repeats import FamilyRepeats
from builder.views.results import (
    STATE_LABELS,
    STATE_RANK,
    ArmResult,
    best_state,
    label_key,
    representatives,
    short_depth,
)
from catalog.checks.repeats import CONFIDENCE, Interval
from catalog.projection import CellEstimate
from catalog.recipes.recipe import Recipe


@dataclass(frozen=True)
class EstimateBasis:
    label: str
    href: str
    utilisation: Num


@dataclass(frozen=True)
class EstimateView:
    """An estimated cell's inputs, where its cell links: the ceiling, and the utilisation of the
    published arms it borrows (never one arm shown as its "evidence")."""

    id: str  # the anchor on the family page
    cell: str
    value: Num
    ceiling: Num
    utilisation: Num
    rule: str
    basis: list[EstimateBasis]


@dataclass(frozen=True)
class CellEntry:
    state: str
    state_label: str
    value: Num | None
    low: Num | None
    high: Num | None
    struck: Num | None
    reason: str | None
    detail: str
    href: str
    packet_id: str
    arm_id: str
    tp: int
    depth: int
    estimate: EstimateView | None = None  # an estimated entry: its inputs, which `href` points at
    reason_title: str | None = None  # the whole reason, where `reason` is the short form a cell has room for
    range_title: str = "the two fresh servers"
    repeats: str | None = None  # "3 repeats on 2 hosts: ..., 95% CI ..." or "measured once: no interval"
    interval: bool = False  # value, low and high are a run's centre and 95 % interval (catalog/checks/repeats.py)
    indistinct: list[str] = field(default_factory=list)  # cells of the matrix whose intervals overlap this one's
    energy: EnergyFigure | None = None  # beside a measured speed: its J/token, or why there is none


@dataclass(frozen=True)
class Cell:
    row: str
    col: str
    state: str
    state_label: str
    entries: list[CellEntry]
    more: int = 0  # repeats of the shown results, listed with their packets


@dataclass(frozen=True)
class MatrixRow:
    label: str
    cells: list[Cell]


@dataclass(frozen=True)
class Matrix:
    id: str
    title: str
    fixed: str
    row_title: str
    col_title: str
    columns: list[str]
    rows: list[MatrixRow]
    untested: list[str]


@dataclass(frozen=True)
class Coordinate:
    """One cell's position: what selects its results and what names it to the estimator."""

    quant_key: str
    quant_slug: str
    tp: int
    depth: int


Axis = list[tuple[Callable[[Coordinate], Coordinate], str]]


def entry(result: ArmResult, repeats: FamilyRepeats | None = None) -> CellEntry:
    # a screened arm shows its speed (labelled speed only); a withheld one never does
    shows_speed = result.arm.state.has_speed
    values = result.values
    run = repeats.run_of(result) if repeats is not None and shows_speed else None
    interval = run.combined.interval if run is not None else None
    value: Num | None
    low: Num | None
    high: Num | None
    if run is not None and interval is not None:  # repeats: their centre and interval are the published figure
        value, low, high = num(interval.centre, unit="tok/s"), num(interval.low), num(interval.high)
        range_title = f"{CONFIDENCE:.0%} confidence interval over {run.combined.n} independent repeats"
    else:
        value = opt_num(result.centre, unit="tok/s") if shows_speed else None
        low = opt_num(min(values)) if shows_speed and len(values) >= 2 else None
        high = opt_num(max(values)) if shows_speed and len(values) >= 2 else None
        source = result.packet.provenance.taken_from
        range_title = f"the two servers {source} printed" if source else "the two fresh servers"
    return CellEntry(
        state=result.state,
        state_label=STATE_LABELS[result.state],
        value=value,
        low=low,
        high=high,
        struck=None if shows_speed else opt_num(result.unpublished_value),
        reason=result.short_reason,
        reason_title=result.reason,
        detail=result.draft_head or "",  # the quantization is an axis or fixed: never repeated per cell
        href=result.href,
        packet_id=result.packet.id,
        arm_id=result.arm.id,
        tp=result.tp,
        depth=result.depth,
        range_title=range_title,
        repeats=run.combined.words() if run is not None else None,
        interval=interval is not None,
        energy=result.energy,
    )


def refused_entry(result: ArmResult, reason: str) -> CellEntry:
    """A result refused as a repeat: listed with its packet, its figure never shown as the cell's."""
    return replace(
        entry(result),
        value=None,
        low=None,
        high=None,
        reason="not counted: refused as a repeat",
        reason_title=reason,
        energy=None,
    )


def estimated_entry(estimate: CellEstimate | None, tp: int, depth: int, cell: str, anchor: str) -> CellEntry | None:
    """An untested cell's projected value: labelled estimated, at the two significant figures an
    estimate has, linked to its inputs (the ceiling and the utilisation of the arms it borrows)."""
    if estimate is None or not estimate.basis:
        return None
    view = EstimateView(
        id=anchor,
        cell=cell,
        value=significant(estimate.decode_tok_s, 2, "tok/s"),
        ceiling=num(estimate.ceiling_tok_s, 2, "tok/s"),
        utilisation=num(estimate.utilisation * 100, 1, "%"),
        rule=estimate.rule,
        basis=[
            EstimateBasis(
                f"{b.quantization} · TP{b.tensor_parallel_size} · depth {b.spec_depth}"
                + (f" · {b.draft_head}" if b.draft_head else ""),
                routes.packet_page(b.packet_id, b.arm_id),
                num(b.utilisation * 100, 1, "%"),
            )
            for b in estimate.basis
        ],
    )
    return CellEntry(
        state="estimated",
        state_label=STATE_LABELS["estimated"],
        value=view.value,
        low=None,
        high=None,
        struck=None,
        reason=None,
        detail="not measured: ceiling × utilisation",
        href="#" + anchor,
        packet_id="",
        arm_id="",
        tp=tp,
        depth=depth,
        estimate=view,
    )


def estimate_views(found: Sequence[Matrix]) -> list[EstimateView]:
    """Every estimate the scorecards show, once (an estimated cell can sit in two scorecards)."""
    views: dict[str, EstimateView] = {}
    for matrix in found:
        for row in matrix.rows:
            for cell in row.cells:
                for entry in cell.entries:
                    if entry.estimate is not None:
                        views.setdefault(entry.estimate.id, entry.estimate)
    return list(views.values())


def _order(result: ArmResult) -> tuple[int, str, str, str]:
    return (STATE_RANK.index(result.state), result.draft_head or "", result.packet.id, result.arm.id)


def _cell(
    row: str, col: str, results: Sequence[ArmResult], estimated: CellEntry | None, repeats: FamilyRepeats | None
) -> Cell:
    if not results and estimated is not None:
        return Cell(row, col, "estimated", STATE_LABELS["estimated"], [estimated])
    state = best_state(r.state for r in results)
    # a refused repeat (one of two packets sharing their servers' timing, or claiming one campaign
    # repeat) never stands for its cell, whatever the order packets sort in; a cell whose every
    # result is refused lists them, each without its figure and saying why (catalog/checks/repeats.py)
    refused = {(r.packet.id, r.arm.id): r.reason for r in repeats.refused()} if repeats is not None else {}
    counted = [r for r in results if (r.packet.id, r.arm.id) not in refused]
    shown = representatives(counted or results)
    entries = [
        entry(r, repeats) if counted else refused_entry(r, refused[(r.packet.id, r.arm.id)])
        for r in sorted(shown, key=_order)
    ]
    return Cell(row, col, state, STATE_LABELS[state], entries, len(results) - len(shown))


def _matching(results: Sequence[ArmResult], at: Coordinate) -> list[ArmResult]:
    return [r for r in results if (r.quant_key, r.tp, r.depth) == (at.quant_key, at.tp, at.depth)]


def _matrix(
    heading: tuple[str, str, str],
    rows_axis: tuple[str, Axis],
    cols_axis: tuple[str, Axis],
    base: Coordinate,
    results: Sequence[ArmResult],
    estimator: Estimator | None,
    repeats: FamilyRepeats | None = None,
) -> Matrix:
    matrix_id, title, fixed = heading
    (row_title, row_axis), (col_title, col_axis) = rows_axis, cols_axis
    hw_key = results[0].hardware_id if results else ""
    rows = []
    for set_row, row_label in row_axis:
        cells = []
        for set_col, col_label in col_axis:
            at = set_col(set_row(base))
            found = _matching(results, at)
            estimate = None
            if not found and estimator is not None:
                anchor = f"estimate-{hw_key}-{label_key(at.quant_slug)}-tp{at.tp}-d{at.depth}"
                where = f"{row_label} · {col_label}"
                projected = estimator(at.quant_slug, at.tp, at.depth)
                estimate = estimated_entry(projected, at.tp, at.depth, where, anchor)
            cells.append(_cell(row_label, col_label, found, estimate, repeats))
        rows.append(MatrixRow(row_label, cells))
    rows = _mark_indistinct(rows)
    untested = [
        f"{c.row} · {c.col}" + (" (estimate shown)" if c.entries else "")
        for r in rows
        for c in r.cells
        if all(e.state == "estimated" for e in c.entries)
    ]
    return Matrix(matrix_id, title, fixed, row_title, col_title, [label for _, label in col_axis], rows, untested)


def _entry_name(cell: Cell, e: CellEntry) -> str:
    return f"{cell.row} · {cell.col}" + (f" ({e.detail})" if e.detail else "")


def _shown_interval(entry: CellEntry) -> Interval:
    """The interval as the page shows it (rounded as every number is): cells are compared as read."""
    assert entry.value is not None and entry.low is not None and entry.high is not None
    return Interval(float(entry.value.value), float(entry.low.value), float(entry.high.value))


def _mark_indistinct(rows: list[MatrixRow]) -> list[MatrixRow]:
    """Entries whose intervals overlap are not distinguishable: each names the others it overlaps.
    An entry measured once has no interval and is never compared (catalog/checks/repeats.py)."""
    placed = [
        (r, c, e, cell)
        for r, row in enumerate(rows)
        for c, cell in enumerate(row.cells)
        for e, item in enumerate(cell.entries)
        if item.interval
    ]
    overlapping: dict[tuple[int, int, int], list[str]] = {}
    for (r1, c1, e1, cell1), (r2, c2, e2, cell2) in combinations(placed, 2):
        if _shown_interval(cell1.entries[e1]).overlaps(_shown_interval(cell2.entries[e2])):
            first, second = cell1.entries[e1], cell2.entries[e2]
            overlapping.setdefault((r1, c1, e1), []).append(_entry_name(cell2, second))
            overlapping.setdefault((r2, c2, e2), []).append(_entry_name(cell1, first))
    if not overlapping:
        return rows
    marked = []
    for r, row in enumerate(rows):
        cells = []
        for c, cell in enumerate(row.cells):
            entries = [replace(item, indistinct=overlapping.get((r, c, e), [])) for e, item in enumerate(cell.entries)]
            cells.append(replace(cell, entries=entries))
        marked.append(MatrixRow(row.label, cells))
    return marked


def family_method(results: Sequence[ArmResult]) -> str | None:
    methods = sorted({r.method for r in results if r.method})
    return methods[0] if len(methods) == 1 else None


def _depth_axis(method: str | None, depths: list[int]) -> Axis:
    def setter(depth: int) -> Callable[[Coordinate], Coordinate]:
        return lambda at: Coordinate(at.quant_key, at.quant_slug, at.tp, depth)

    return [(setter(d), short_depth(method, d)) for d in depths]


def _quant_axis(results: Sequence[ArmResult], recipe: Recipe | None) -> Axis:
    """Observed quantizations plus the recipe's unmeasured variants. The estimator is told a packet
    quantization slug or, for an unmeasured variant, the recipe variant name."""
    found: dict[str, tuple[str, str]] = {}
    for r in results:
        found.setdefault(r.quant_key, (r.packet.identity.model.quantization, r.quant_label))
    covered = {r.packet.identity.model.variant for r in results}
    for name, variant in recipe.variants.items() if recipe else []:
        label = variant.label or variant.precision.upper()
        if name not in covered:
            found.setdefault(label_key(label), (name, label))

    def setter(key: str, slug: str) -> Callable[[Coordinate], Coordinate]:
        return lambda at: Coordinate(key, slug, at.tp, at.depth)

    ordered = sorted(found.items(), key=lambda item: item[1][1].lower())
    return [(setter(key, slug), label) for key, (slug, label) in ordered]


def _quant_tp_axis(on_hw: Sequence[ArmResult], recipe: Recipe | None) -> Axis:
    """A row per quantization and card count measured (a recipe variant never measured: one row,
    at the fewest cards); the card count is named only when the family has more than one."""
    fewest = min(r.tp for r in on_hw)
    several = len({r.tp for r in on_hw}) > 1
    rows: Axis = []
    for set_quant, label in _quant_axis(on_hw, recipe):
        at = set_quant(Coordinate("", "", fewest, 0))
        for tp in sorted({r.tp for r in on_hw if r.quant_key == at.quant_key}) or [fewest]:

            def setter(c: Coordinate, key: str = at.quant_key, slug: str = at.quant_slug, tp: int = tp) -> Coordinate:
                return Coordinate(key, slug, tp, c.depth)

            rows.append((setter, f"{label} · TP{tp}" if several else label))
    return rows


def matrices(
    results: Sequence[ArmResult],
    recipe: Recipe | None,
    estimators: dict[str, Estimator] | None = None,
    repeats: FamilyRepeats | None = None,
) -> list[Matrix]:
    """Per card, one scorecard: a row per quantization and card count, a column per speculative
    depth, so every result has one cell and no figure is shown twice. Untested cells carry
    catalog.projection's estimate where it has one."""
    method = family_method(results)
    estimators = estimators or {}
    found: list[Matrix] = []
    for hw in sorted({r.hardware_id for r in results}):
        on_hw = [r for r in results if r.hardware_id == hw]
        hw_name = on_hw[0].hardware_name
        runtimes = " / ".join(sorted({r.packet.identity.runtime.label for r in on_hw}))
        tps = sorted({r.tp for r in on_hw})
        fixed = f"Fixed: hardware={hw_name}" + (f" · tp={tps[0]}" if len(tps) == 1 else "") + f" · runtime={runtimes}"
        title = "Quantization" + (" and cards" if len(tps) > 1 else "") + " × speculative depth"
        found.append(
            _matrix(
                (f"quant-depth-{hw}", title, fixed),
                ("quantization" + (" · cards" if len(tps) > 1 else ""), _quant_tp_axis(on_hw, recipe)),
                ("speculative depth", _depth_axis(method, sorted({0} | {r.depth for r in on_hw}))),
                Coordinate("", "", tps[0], 0),
                on_hw,
                estimators.get(hw),
                repeats,
            )
        )
    return found
