"""Section 5 and 6 of a family page: measured results and many people at once, as charts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from builder import routes
from builder.charts import Chart, Point, chart
from builder.format import tokens_label
from builder.views.results import ArmResult, short_depth
from builder.views.scorecard import family_method
from catalog.model.packet import Arm, Ladder, Packet


def _point(result: ArmResult, series: str, x: float, x_label: str) -> Point:
    published = result.published
    return Point(
        series=series,
        x=x,
        x_label=x_label,
        centre=result.centre if published else result.unpublished_value,
        values=result.values,
        ttft_ms=result.arm.ttft_ms if published else None,
        state=result.state,
        reason=result.reason,
        href=result.href,
        evidence=f"{result.packet.id} · {result.arm.label}",
        source=result.packet.provenance.taken_from,
    )


def _drawable(results: Sequence[ArmResult]) -> list[ArmResult]:
    return [r for r in results if r.centre is not None or r.unpublished_value is not None or r.state == "withheld"]


def _depth_points(results: Sequence[ArmResult], method: str | None, head_in_series: bool = True) -> list[Point]:
    """A series per draft head; the no-speculation baseline starts every series."""
    spec = [r for r in results if r.depth > 0]
    baseline = [r for r in results if r.depth == 0]
    heads = sorted({r.series_head for r in spec}) or ["no speculation"]
    points: list[Point] = []
    for head in heads:
        for r in baseline:
            points.append(_point(r, head, 0, short_depth(method, 0)))
        for r in spec:
            if r.series_head == head:
                points.append(_point(r, head, r.depth, short_depth(method, r.depth)))
    return points


def _compared_quants(results: Sequence[ArmResult], hw: str) -> tuple[int, set[str]]:
    """The card's fewest cards and the quantizations drawn there: two or more make the quantization
    chart, whose series hold every point of each one's depth chart at that card count."""
    on_hw = [r for r in results if r.hardware_id == hw]
    tp = min(r.tp for r in on_hw)
    quants = {r.quant_key for r in _drawable([r for r in on_hw if r.tp == tp])}
    return tp, quants if len(quants) >= 2 else set()


def depth_charts(results: Sequence[ArmResult]) -> list[Chart]:
    """Per card and quantization, speculative depth on the fewest cards; none where the quantization
    chart (quant_charts) already draws every one of its points."""
    method = family_method(results)
    charts = []
    for (hw, quant), group in _groups(results):
        tp = min(r.tp for r in group)
        compared_tp, compared = _compared_quants(results, hw)
        if quant in compared and tp == compared_tp:
            continue
        at_tp = _drawable([r for r in group if r.tp == tp])
        if len({r.depth for r in at_tp}) < 2:
            continue
        charts.append(
            chart(
                f"depth-{hw}-{quant}",
                f"Speculative depth on {_cards(tp)} {group[0].hardware_name}",
                f"{group[0].quant_label} · a series per draft head · error bars span the fresh-server values",
                _depth_points(at_tp, method),
                x_title="speculative depth",
            )
        )
    return charts


def tp_charts(results: Sequence[ArmResult]) -> list[Chart]:
    method = family_method(results)
    charts = []
    for (hw, quant), group in _groups(results):
        drawable = _drawable(group)
        configs: dict[str, set[int]] = {}
        for r in drawable:
            configs.setdefault(_config(method, r), set()).add(r.tp)
        compared = {c for c, tps in configs.items() if len(tps) >= 2}
        if not compared:
            continue
        points = [
            _point(r, _config(method, r), r.tp, f"{r.tp} card" + ("s" if r.tp > 1 else ""))
            for r in drawable
            if _config(method, r) in compared
        ]
        charts.append(
            chart(
                f"tp-{hw}-{quant}",
                f"One card vs {max(p.x for p in points):g} cards",
                f"{group[0].quant_label} on {group[0].hardware_name} · configurations measured on more than one "
                "card count",
                points,
                x_title="tensor parallel cards",
            )
        )
    return charts


def quant_charts(results: Sequence[ArmResult]) -> list[Chart]:
    method = family_method(results)
    charts = []
    for hw in sorted({r.hardware_id for r in results}):
        on_hw = [r for r in results if r.hardware_id == hw]
        tp = min(r.tp for r in on_hw)
        at_tp = _drawable([r for r in on_hw if r.tp == tp])
        quants = sorted({r.quant_label for r in at_tp})
        if len(quants) < 2:
            continue
        points = []
        for quant in quants:
            mine = [r for r in at_tp if r.quant_label == quant]
            heads = {r.series_head for r in mine if r.depth > 0}
            for p in _depth_points(mine, method):
                series = quant if len(heads) <= 1 else f"{quant} · {p.series}"
                points.append(replace(p, series=series))
        charts.append(
            chart(
                f"quant-{hw}",
                " versus ".join(quants) + f" on {_cards(tp)} {on_hw[0].hardware_name}",
                "Same model, same suite: a series per quantization (and draft head where there are several)",
                points,
                x_title="speculative depth",
            )
        )
    return charts


def _ladder_point(
    packet: Packet, arm: Arm, series: str, x: float, x_label: str, value: float, note: str, ttft_ms: float | None = None
) -> Point:
    """One batch of a ladder: a single measurement, so its value is also its only value."""
    return Point(
        series=series,
        x=x,
        x_label=x_label,
        centre=value,
        values=[value],
        ttft_ms=ttft_ms,
        state=arm.state.value,
        note=note,
        href=routes.packet_page(packet.id, arm.id),
        evidence=f"{packet.id} · {arm.label}",
        source=packet.provenance.taken_from,
    )


def concurrency_charts(ladders: Sequence[tuple[Packet, Ladder]]) -> list[Chart]:
    points = []
    for packet, ladder in ladders:
        arm = packet.arm(ladder.arm)
        for p in ladder.concurrency:
            series = f"{packet.identity.model.quantization_label} · {arm.label}"
            note = _identity_note(p.identical_to_oracle, "the sequential oracle")
            points.append(_ladder_point(packet, arm, series, p.users, f"c{p.users}", p.aggregate_tok_s, note))
    if not points:
        return []
    return [
        chart(
            "concurrency",
            "Aggregate throughput vs concurrent users",
            "Requests released together; aggregate tok/s = completion tokens / batch wall time; one batch per point",
            points,
            x_title="concurrent users",
            y_title="aggregate tok/s",
            x_log=True,
        )
    ]


def context_charts(ladders: Sequence[tuple[Packet, Ladder]]) -> list[Chart]:
    points = []
    for packet, ladder in ladders:
        arm = packet.arm(ladder.arm)
        for p in ladder.context:
            if p.decode_tok_s is None:
                continue
            note = _identity_note(p.identical_to_oracle, "the oracle at this depth")
            series, label = f"{arm.label} · {p.content_class}", tokens_label(p.depth_tokens)
            points.append(_ladder_point(packet, arm, series, p.depth_tokens, label, p.decode_tok_s, note, p.ttft_ms))
    if not points:
        return []
    return [
        chart(
            "context",
            "Decode speed vs context depth",
            "Prompt tokens before the answer; TTFT per depth in the table and on hover",
            points,
            x_title="prompt tokens",
            x_log=True,
        )
    ]


def _config(method: str | None, result: ArmResult) -> str:
    return short_depth(method, result.depth) + (f" + {result.draft_head}" if result.draft_head else "")


def _groups(results: Sequence[ArmResult]) -> list[tuple[tuple[str, str], list[ArmResult]]]:
    keys = sorted({(r.hardware_id, r.quant_key) for r in results})
    return [((hw, q), [r for r in results if (r.hardware_id, r.quant_key) == (hw, q)]) for hw, q in keys]


def _cards(tp: int) -> str:
    return "one" if tp == 1 else str(tp)


def _identity_note(identical: bool | None, against: str) -> str:
    if identical is None:
        return "identity not checked"
    return f"outputs identical to {against}" if identical else f"outputs DIFFER from {against}"
