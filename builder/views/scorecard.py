""" "What has been classified": scorecard matrices over two axes, every cell a state with evidence.

A withheld entry never carries a value in the value slot; its would-be number is only kept as a
struck secondary figure next to the word "withheld" and the failed gate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from builder.format import Num, opt_num
from builder.views.results import STATE_LABELS, STATE_RANK, ArmResult, best_state, label_key, short_depth
from catalog.recipe import Recipe


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


@dataclass(frozen=True)
class Cell:
    row: str
    col: str
    state: str
    state_label: str
    entries: list[CellEntry]


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


def entry(result: ArmResult) -> CellEntry:
    published = result.published
    values = result.values
    return CellEntry(
        state=result.state,
        state_label=STATE_LABELS[result.state],
        value=opt_num(result.centre, unit="tok/s") if published else None,
        low=opt_num(min(values)) if published and len(values) >= 2 else None,
        high=opt_num(max(values)) if published and len(values) >= 2 else None,
        struck=None if published else opt_num(result.unpublished_value),
        reason=result.reason,
        detail=" · ".join(p for p in (result.draft_head, result.quant_label) if p),
        href=result.href,
        packet_id=result.packet.id,
        arm_id=result.arm.id,
    )


def _order(result: ArmResult) -> tuple[int, str, str, str]:
    return (STATE_RANK.index(result.state), result.draft_head or "", result.packet.id, result.arm.id)


def _cell(row: str, col: str, results: Sequence[ArmResult]) -> Cell:
    state = best_state(r.state for r in results)
    return Cell(row, col, state, STATE_LABELS[state], [entry(r) for r in sorted(results, key=_order)])


def _matrix(
    matrix_id: str,
    title: str,
    fixed: str,
    axes: tuple[tuple[str, list[tuple[object, str]]], tuple[str, list[tuple[object, str]]]],
    pick: Callable[[object, object], list[ArmResult]],
) -> Matrix:
    (row_title, row_axis), (col_title, col_axis) = axes
    rows = [
        MatrixRow(row_label, [_cell(row_label, col_label, pick(row_key, col_key)) for col_key, col_label in col_axis])
        for row_key, row_label in row_axis
    ]
    untested = [f"{c.row} · {c.col}" for r in rows for c in r.cells if not c.entries]
    return Matrix(matrix_id, title, fixed, row_title, col_title, [label for _, label in col_axis], rows, untested)


def family_method(results: Sequence[ArmResult]) -> str | None:
    methods = sorted({r.method for r in results if r.method})
    return methods[0] if len(methods) == 1 else None


def _quant_axis(results: Sequence[ArmResult], recipe: Recipe | None) -> list[tuple[object, str]]:
    axis = {r.quant_key: r.quant_label for r in results}
    covered = {r.packet.identity.model.variant for r in results}
    for name, variant in recipe.variants.items() if recipe else []:
        if name not in covered:
            label = variant.label or variant.precision.upper()
            axis.setdefault(label_key(label), label)
    return sorted(axis.items(), key=lambda item: item[1].lower())


def matrices(results: Sequence[ArmResult], recipe: Recipe | None) -> list[Matrix]:
    method = family_method(results)
    found: list[Matrix] = []
    for hardware_id in sorted({r.hardware_id for r in results}):
        on_hw = [r for r in results if r.hardware_id == hardware_id]
        hw_name = on_hw[0].hardware_name
        runtimes = " / ".join(sorted({r.packet.identity.runtime.label for r in on_hw}))
        for quant_key, quant_label in sorted({(r.quant_key, r.quant_label) for r in on_hw}, key=lambda q: q[1]):
            subset = [r for r in on_hw if r.quant_key == quant_key]
            depths = sorted({0} | {r.depth for r in subset})
            tps = sorted({1} | {r.tp for r in subset})
            found.append(
                _matrix(
                    f"depth-tp-{hardware_id}-{quant_key}",
                    f"Speculative depth × cards · {quant_label}",
                    f"Fixed: quantization={quant_label} · hardware={hw_name} · runtime={runtimes}",
                    (
                        ("speculative depth", [(d, short_depth(method, d)) for d in depths]),
                        ("cards (tensor parallel)", [(t, f"TP{t}") for t in tps]),
                    ),
                    lambda d, t, subset=subset: [r for r in subset if r.depth == d and r.tp == t],  # type: ignore[misc]
                )
            )
        tp = min(r.tp for r in on_hw)
        at_tp = [r for r in on_hw if r.tp == tp]
        depths = sorted({0} | {r.depth for r in at_tp})
        found.append(
            _matrix(
                f"quant-depth-{hardware_id}",
                "Quantization × speculative depth",
                f"Fixed: hardware={hw_name} · tp={tp} · runtime={runtimes}",
                (
                    ("quantization", _quant_axis(at_tp, recipe)),
                    ("speculative depth", [(d, short_depth(method, d)) for d in depths]),
                ),
                lambda q, d, at_tp=at_tp: [r for r in at_tp if r.quant_key == q and r.depth == d],  # type: ignore[misc]
            )
        )
    return found
