"""Plotly figures built in Python, serialised to JSON for a small static script to draw.

Every chart carries a table of the same (already rounded) numbers for readers without JavaScript.
Published points are drawn with error bars spanning their fresh-server values; withheld points
go in their own hollow, labelled trace and are never joined to a measured line, nor drawn on top
of a published point: where a withheld result shares its x with a published one, its marker sits a
little to the right (its hover and the table keep the true x). A published point with a `flag` (a load level
whose outputs differ from the oracle, or whose client lagged) is drawn the same way: hollow,
labelled, in a trace of its own, never joined to its series' line. An `estimated` series (a
projection) is a dashed line. Axes are numeric (speculative depth 0, 3, 6 is
spaced as numbers). A chart with nothing to draw is `empty` (the page shows a one-line gap), and
`distinct` drops a chart that would draw exactly what an earlier one on the page draws.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from builder.format import Num, fmt, num, opt_num

PALETTE = ["#2563eb", "#059669", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#ea580c", "#4b5563"]
WITHHELD_COLOUR = "#b45309"
# A screened point (speed only, no identity gate) in a series of published ones: its own open marker,
# so a line joining it to imported or measured points never makes it look like them.
SCREENED_SYMBOL = "square-open"
STATE_WORDS = {"imported": "IMPORTED", "screened": "SCREENED: speed only, no identity gate"}
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
# A legend entry longer than this wraps, so a 390 px phone never clips it (13 px type).
LEGEND_WIDTH = 30
CHART_HEIGHT = 380
WIDE_HEIGHT = 320  # a legend in one row: the plot keeps its room at 1280 px in 320
LEGEND_ROOM = 284  # plot area, title and tick labels above a legend (px)
LEGEND_LINE = 20  # one legend line at 13 px type
LEGEND_GAP = 6  # between two legend entries
# How far right of its x a withheld marker sits when a published point shares that x: this
# fraction of the smallest gap between two ticks (of log10 x on a log axis).
WITHHELD_SHIFT = 0.12


@dataclass(frozen=True)
class Point:
    series: str
    x: float
    x_label: str
    centre: float | None
    values: list[float] = field(default_factory=list)
    ttft_ms: float | None = None
    state: str = "measured"
    reason: str | None = None
    href: str = ""
    evidence: str = ""
    note: str = ""
    flag: str | None = None  # why a published point is drawn apart, hollow and labelled
    flag_label: str = ""  # the short word beside its marker
    flag_colour: str = WITHHELD_COLOUR
    source: str | None = None  # the published source an imported or screened point is taken from

    @property
    def drawn_as_measured(self) -> bool:
        return self.state != "withheld" and self.centre is not None and self.flag is None


@dataclass(frozen=True)
class TableRow:
    series: str
    x_label: str
    value: Num | None
    struck: Num | None
    low: Num | None
    high: Num | None
    ttft_ms: Num | None
    state: str
    note: str
    href: str
    evidence: str


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    subtitle: str
    x_title: str
    y_title: str
    figure_json: str
    rows: list[TableRow]
    notes: list[str]
    # (x, y, state) of every drawn marker, with the axis titles: equal for two charts that draw the same
    drawn: tuple[object, ...] = ()
    # the in-page anchor of a table that already holds every number this chart draws (a load sweep's
    # per-level tables): the page links there instead of repeating them under the chart
    numbers_at: str | None = None
    # the heights the figure's layout draws at (px): wide, and on a phone; the page reserves them
    # before the chart draws, so drawing it moves nothing (assets/charts.js, style.css)
    height: int = WIDE_HEIGHT
    phone_height: int = CHART_HEIGHT

    @property
    def empty(self) -> bool:
        """Nothing to draw: the page shows a one-line gap instead of an empty box."""
        return not self.drawn[2:]


# Plotly draws labels as its own pseudo-HTML (<a href>, <b>, <br>, ...) and decodes entities; it
# knows &amp; &lt; &gt; and numeric ones, not &quot;. Every string from a packet or recipe passes
# through `_text` before it reaches a trace name, hover text, tick label or axis title.
_PLOTLY_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"})


def _text(label: str) -> str:
    """`label` shown as text by Plotly, never as markup."""
    return label.translate(_PLOTLY_ESCAPES)


def _legend(label: str) -> str:
    """A trace name wrapped onto lines of at most LEGEND_WIDTH characters."""
    lines = textwrap.wrap(label, LEGEND_WIDTH, break_long_words=False, break_on_hyphens=False) or [label]
    return "<br>".join(_text(line) for line in lines)


def _r(value: float) -> float:
    return float(fmt(value))


def _hover(point: Point, y_title: str) -> str:
    parts = [f"{point.series} · {point.x_label}"]
    if point.values and len(point.values) > 1:
        servers = "the source's servers" if point.source else "fresh servers"
        parts.append(f"{y_title}: " + " / ".join(fmt(v) for v in point.values) + f" ({servers})")
    elif point.centre is not None:
        parts.append(f"{y_title}: {fmt(point.centre)}")
    if point.ttft_ms is not None:
        parts.append(f"TTFT {fmt(point.ttft_ms)} ms")
    if point.state == "withheld":
        parts.append(f"WITHHELD: {point.reason or ''}")
    elif point.state in STATE_WORDS:
        parts.append(STATE_WORDS[point.state])
    if point.source:
        parts.append(f"from {point.source}, not measured here")
    return "<br>".join(_text(part) for part in parts)


def _published_trace(series: str, points: Sequence[Point], colour: str, y_title: str) -> Figure:
    centres = [_r(p.centre or 0) for p in points]
    if all(p.state == "estimated" for p in points):
        return _scatter(
            name=_legend(series),
            x=[p.x for p in points],
            y=centres,
            mode="lines+markers",
            marker={"color": colour, "size": 6, "symbol": "diamond-open"},
            line={"color": colour, "width": 2, "dash": "dash"},
            hovertext=[_hover(p, y_title) for p in points],
            hoverinfo="text",
        )
    # clamped at 0.0: a centre rounded onto its extreme never draws a -0.0 bar
    plus = [max(0.0, _r(max(p.values) - c)) if p.values else 0 for p, c in zip(points, centres, strict=True)]
    minus = [max(0.0, _r(c - min(p.values))) if p.values else 0 for p, c in zip(points, centres, strict=True)]
    return _scatter(
        name=_legend(series),
        x=[p.x for p in points],
        y=centres,
        mode="lines+markers",
        marker={"color": colour, "size": 8}
        | (
            {"symbol": [SCREENED_SYMBOL if p.state == "screened" else "circle" for p in points]}
            if any(p.state == "screened" for p in points)
            else {}
        ),
        line={"color": colour, "width": 2},
        hovertext=[_hover(p, y_title) for p in points],
        hoverinfo="text",
        # bars only where a point has a spread to draw: a trace of single values would carry zeros
        **(
            {"error_y": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": colour}}
            if any(plus) or any(minus)
            else {}
        ),
    )


def _flag_words(label: str, flag: str) -> str:
    """`differs: outputs differ from the oracle`; a flag that already says its word is written once
    (`level unusable: ...`, never `unusable: level unusable: ...`)."""
    return flag if label in flag else f"{label}: {flag}"


def _flagged_trace(flag: str, points: Sequence[Point], colour: str, y_title: str) -> Figure:
    """Published points drawn apart: hollow, labelled, never joined to a line."""
    return _scatter(
        name=_legend(flag),
        x=[p.x for p in points],
        y=[_r(p.centre or 0) for p in points],
        mode="markers+text",
        text=[_text(p.flag_label) for p in points],
        textposition="top center",
        textfont={"color": colour, "size": 11},
        cliponaxis=False,
        marker={"symbol": "circle-open", "size": 11, "color": colour, "line": {"width": 2}},
        hovertext=[_hover(p, y_title) + "<br>" + _text(flag) for p in points],
        hoverinfo="text",
    )


def _shifted(points: Sequence[Point], all_x: Sequence[float], published_x: set[float], x_log: bool) -> list[float]:
    """Each withheld point's x, moved right of a published point at the same x."""
    scale = [math.log10(x) for x in all_x if x > 0] if x_log else list(all_x)
    ticks = sorted(set(scale))
    gaps = [b - a for a, b in pairwise(ticks)]
    step = WITHHELD_SHIFT * (min(gaps) if gaps else 1.0)
    out = []
    for p in points:
        if p.x not in published_x:
            out.append(p.x)
        elif x_log and p.x > 0:
            out.append(_r(p.x * 10**step))
        else:
            out.append(_r(p.x + step))
    return out


def _withheld_trace(points: Sequence[Point], x: list[float], y_title: str) -> Figure:
    return _scatter(
        name="withheld (not published)",
        x=x,
        y=[_r(p.centre or 0) for p in points],
        mode="markers+text",
        text=["withheld" for _ in points],
        textposition="top center",
        textfont={"color": WITHHELD_COLOUR, "size": 11},
        cliponaxis=False,
        marker={"symbol": "circle-open", "size": 11, "color": WITHHELD_COLOUR, "line": {"width": 2}},
        hovertext=[_hover(p, y_title) for p in points],
        hoverinfo="text",
    )


def _height(traces: Sequence[Figure]) -> int:
    """On a phone: 380 px, taller when the legend needs it (every entry takes its own row(s), and
    Plotly shrinks the plot to fit its legend only down to a point, then clips it). assets/charts.js
    reads it from the layout's `meta`; a wider screen, whose legend is one row, draws WIDE_HEIGHT."""
    lines = sum(str(t["name"]).count("<br>") + 1 for t in traces)
    return max(CHART_HEIGHT, LEGEND_ROOM + LEGEND_LINE * lines + LEGEND_GAP * len(traces))


def _figure(
    points: Sequence[Point], x_title: str, y_title: str, x_log: bool, *, x_ticks: bool = True, y_log: bool = False
) -> Figure:
    traces = []
    series = list(dict.fromkeys(p.series for p in points if p.drawn_as_measured))
    for index, name in enumerate(series):
        mine = sorted((p for p in points if p.series == name and p.drawn_as_measured), key=lambda p: p.x)
        traces.append(_published_trace(name, mine, PALETTE[index % len(PALETTE)], y_title))
    withheld = [p for p in points if p.state == "withheld" and p.centre is not None]
    if withheld:
        published_x = {p.x for p in points if p.drawn_as_measured}
        shifted = _shifted(withheld, [p.x for p in points], published_x, x_log)
        traces.append(_withheld_trace(withheld, shifted, y_title))
    flags = list(dict.fromkeys(p.flag for p in points if p.flag and p.centre is not None and p.state != "withheld"))
    for flag in flags:
        mine = [p for p in points if p.flag == flag and p.centre is not None and p.state != "withheld"]
        traces.append(_flagged_trace(flag, mine, mine[0].flag_colour, y_title))
    ticks = sorted({(p.x, p.x_label) for p in points}) if x_ticks else []
    layout = _sorted(
        template=NO_TEMPLATE,
        height=WIDE_HEIGHT,
        meta={"phone_height": _height(traces)},
        margin={"l": 60, "r": 20, "t": 24, "b": 96},
        font={"family": FONT, "size": 13, "color": "#1f2937"},
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="#ffffff",
        hovermode="closest",
        showlegend=True,
        legend={"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0},
        xaxis={
            "title": {"text": _text(x_title)},
            "type": "log" if x_log else "linear",
            **({"tickvals": [t[0] for t in ticks], "ticktext": [_text(t[1]) for t in ticks]} if x_ticks else {}),
            "gridcolor": "#e5e7eb",
            "zeroline": False,
        },
        yaxis={
            "title": {"text": _text(y_title)},
            "type": "log" if y_log else "linear",
            **({} if y_log else {"rangemode": "tozero"}),
            "gridcolor": "#e5e7eb",
            "zeroline": False,
        },
    )
    return {"data": traces, "layout": layout}


# The figure JSON is built directly: the Plotly constructors validated every property on every
# chart, most of a family page's time. The form is the one plotly.io.to_json writes (properties
# in name order, a trace's type last, "<", ">" and "/" escaped); tests/builder/test_charts_json.py
# holds it to plotly's own output, validation on, for every chart of a catalog.
Figure = dict[str, Any]
NO_TEMPLATE: Figure = {"data": {"scatter": [{"type": "scatter"}]}}  # plotly's template "none", expanded
_JSON_SWAPS = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"))


def _sorted(**properties: Any) -> Figure:
    return {k: _sorted(**v) if isinstance(v, dict) else v for k, v in sorted(properties.items())}


def _scatter(**properties: Any) -> Figure:
    return {**_sorted(**properties), "type": "scatter"}


def figure_json(figure: Figure) -> str:
    text = json.dumps(figure, separators=(",", ":"), allow_nan=False)
    for unsafe, safe in _JSON_SWAPS:
        text = text.replace(unsafe, safe)
    return text


def _row(point: Point) -> TableRow:
    published = point.drawn_as_measured
    values = point.values if published else []
    notes = [point.note] if point.note else []
    if point.flag:
        notes.append(point.flag)
    if point.state == "withheld":
        notes.append(f"withheld: {point.reason}")
    elif published and len(point.values) == 1 and not point.note and point.state != "estimated":
        notes.append("one value, no fresh-server pair")
    note = "; ".join(notes)
    return TableRow(
        series=point.series,
        x_label=point.x_label,
        value=opt_num(point.centre) if published or (point.flag and point.state != "withheld") else None,
        struck=opt_num(point.centre) if point.state == "withheld" else None,
        low=num(min(values)) if len(values) >= 2 else None,
        high=num(max(values)) if len(values) >= 2 else None,
        ttft_ms=opt_num(point.ttft_ms),
        state=point.state,
        note=note,
        href=point.href,
        evidence=point.evidence,
    )


def chart(
    chart_id: str,
    title: str,
    subtitle: str,
    points: Sequence[Point],
    *,
    x_title: str,
    y_title: str = "decode tok/s",
    x_log: bool = False,
    x_ticks: bool = True,
    y_log: bool = False,
) -> Chart:
    notes = []
    left_out = [p for p in points if p.state == "withheld" and p.centre is None]
    if left_out:
        results = "result" if len(left_out) == 1 else "results"
        notes.append(
            f"{len(left_out)} withheld {results} with no recorded value, so nothing to draw for "
            + "; ".join(f"{p.x_label} ({p.series})" for p in left_out)
            + "."
        )
    withheld = [p for p in points if p.state == "withheld" and p.centre is not None]
    if withheld:
        note = "Hollow amber markers are withheld results: shown for the record, not published as measured."
        published_x = {p.x for p in points if p.drawn_as_measured}
        if any(p.x in published_x for p in withheld):
            note = note.removesuffix(".") + (
                "; where one shares its x with a published result it sits just to the right, never on top (its hover "
                "and the table give its true x)."
            )
        notes.append(note)
    if any(p.state == "screened" and p.drawn_as_measured for p in points):
        notes.append(
            "Open squares are screened results: speed only, no identity gate; the table gives each point's state."
        )
    flagged = [p for p in points if p.flag and p.state != "withheld"]
    if flagged:
        notes.append(
            "Hollow labelled markers are levels drawn apart, never joined to their line: "
            + "; ".join(dict.fromkeys(_flag_words(p.flag_label, p.flag or "") for p in flagged))
            + "."
        )
    figure = _figure(points, x_title, y_title, x_log, x_ticks=x_ticks, y_log=y_log)
    drawn = sorted((p.x, _r(p.centre), p.state) for p in points if p.centre is not None)
    return Chart(
        id=chart_id,
        title=title,
        subtitle=subtitle,
        x_title=x_title,
        y_title=y_title,
        figure_json=figure_json(figure),
        rows=[_row(p) for p in sorted(points, key=lambda p: (p.series, p.x))],
        notes=notes,
        drawn=(x_title, y_title, *drawn),
        height=figure["layout"]["height"],
        phone_height=figure["layout"]["meta"]["phone_height"],
    )


def distinct(charts: Sequence[Chart]) -> list[Chart]:
    """`charts` without any that would draw exactly what an earlier one draws (a quantization
    comparison with one drawable quantization is its depth chart again)."""
    seen: set[tuple[object, ...]] = set()
    kept = []
    for c in charts:
        if c.empty or c.drawn not in seen:
            kept.append(c)
            seen.add(c.drawn)
    return kept
