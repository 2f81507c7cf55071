""" "What has been classified": scorecard matrices over two axes, every cell a state with evidence.

A withheld entry never carries a value in the value slot; its would-be number is only kept as a
struck secondary figure next to the word "withheld" and the failed gate. An untested cell may show
catalog.projection's estimate, labelled estimated and still listed among the untested.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from builder import routes
from builder.format import Num, num, opt_num, significant
from builder.views.projection import Estimator
from builder.views.results import (
    STATE_LABELS,
    STATE_RANK,
    ArmResult,
    best_state,
    label_key,
    representatives,
    short_depth,
)
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


def entry(result: ArmResult) -> CellEntry:
    # a screened arm shows its speed (labelled speed only); a withheld one never does
    shows_speed = result.arm.state.has_speed
    values = result.values
    return CellEntry(
        state=result.state,
        state_label=STATE_LABELS[result.state],
        value=opt_num(result.centre, unit="tok/s") if shows_speed else None,
        low=opt_num(min(values)) if shows_speed and len(values) >= 2 else None,
        high=opt_num(max(values)) if shows_speed and len(values) >= 2 else None,
        struck=None if shows_speed else opt_num(result.unpublished_value),
        reason=result.reason,
        detail=result.draft_head or "",  # the quantization is an axis or fixed: never repeated per cell
        href=result.href,
        packet_id=result.packet.id,
        arm_id=result.arm.id,
        tp=result.tp,
        depth=result.depth,
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
        detail=f"not measured: ceiling × utilisation of {len(estimate.basis)} published arm(s)",
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


def _cell(row: str, col: str, results: Sequence[ArmResult], estimated: CellEntry | None) -> Cell:
    if not results and estimated is not None:
        return Cell(row, col, "estimated", STATE_LABELS["estimated"], [estimated])
    state = best_state(r.state for r in results)
    shown = representatives(results)
    entries = [entry(r) for r in sorted(shown, key=_order)]
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
            cells.append(_cell(row_label, col_label, found, estimate))
        rows.append(MatrixRow(row_label, cells))
    untested = [
        f"{c.row} · {c.col}" + (" (estimate shown)" if c.entries else "")
        for r in rows
        for c in r.cells
        if all(e.state == "estimated" for e in c.entries)
    ]
    return Matrix(matrix_id, title, fixed, row_title, col_title, [label for _, label in col_axis], rows, untested)


def family_method(results: Sequence[ArmResult]) -> str | None:
    methods = sorted({r.method for r in results if r.method})
    return methods[0] if len(methods) == 1 else None


def _depth_axis(method: str | None, depths: list[int]) -> Axis:
    def setter(depth: int) -> Callable[[Coordinate], Coordinate]:
        return lambda at: Coordinate(at.quant_key, at.quant_slug, at.tp, depth)

    return [(setter(d), short_depth(method, d)) for d in depths]


def _tp_axis(tps: list[int]) -> Axis:
    def setter(tp: int) -> Callable[[Coordinate], Coordinate]:
        return lambda at: Coordinate(at.quant_key, at.quant_slug, tp, at.depth)

    return [(setter(t), f"TP{t}") for t in tps]


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


def matrices(
    results: Sequence[ArmResult], recipe: Recipe | None, estimators: dict[str, Estimator] | None = None
) -> list[Matrix]:
    """Per card: speculative depth × cards for each quantization measured on more than one card
    count, and quantization × depth on the fewest cards (which holds every one-card-count cell, so
    no figure is shown twice for nothing). Untested cells carry catalog.projection's estimate
    where it has one."""
    method = family_method(results)
    estimators = estimators or {}
    found: list[Matrix] = []
    for hw in sorted({r.hardware_id for r in results}):
        on_hw = [r for r in results if r.hardware_id == hw]
        hw_name = on_hw[0].hardware_name
        runtimes = " / ".join(sorted({r.packet.identity.runtime.label for r in on_hw}))
        estimator = estimators.get(hw)
        quants = sorted({(r.quant_key, r.packet.identity.model.quantization, r.quant_label) for r in on_hw})
        tp = min(r.tp for r in on_hw)
        for quant_key, quant_slug, quant_label in sorted(quants, key=lambda q: q[2]):
            subset = [r for r in on_hw if r.quant_key == quant_key]
            if {r.tp for r in subset} == {tp}:
                continue  # one card count: every cell is in the quantization x depth scorecard below
            found.append(
                _matrix(
                    (
                        f"depth-tp-{hw}-{quant_key}",
                        f"Speculative depth × cards · {quant_label}",
                        f"Fixed: quantization={quant_label} · hardware={hw_name} · runtime={runtimes}",
                    ),
                    ("speculative depth", _depth_axis(method, sorted({0} | {r.depth for r in subset}))),
                    ("cards (tensor parallel)", _tp_axis(sorted({1} | {r.tp for r in subset}))),
                    Coordinate(quant_key, quant_slug, 1, 0),
                    subset,
                    estimator,
                )
            )
        at_tp = [r for r in on_hw if r.tp == tp]
        found.append(
            _matrix(
                (
                    f"quant-depth-{hw}",
                    "Quantization × speculative depth",
                    f"Fixed: hardware={hw_name} · tp={tp} · runtime={runtimes}",
                ),
                ("quantization", _quant_axis(at_tp, recipe)),
                ("speculative depth", _depth_axis(method, sorted({0} | {r.depth for r in at_tp}))),
                Coordinate("", "", tp, 0),
                at_tp,
                estimator,
            )
        )
    return found
