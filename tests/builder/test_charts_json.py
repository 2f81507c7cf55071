"""The chart JSON is built without Plotly's constructors (builder/charts.py): it must be exactly
what Plotly writes for the same figure with every property validated."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio

from catalog.store.repository import load_catalog
from tests.builder.factory import REPO, write_catalog
from tests.builder.made import family_views, site_context


def _charts(data, packets):
    from datetime import date

    ctx = site_context(load_catalog(data, packets), date(2026, 1, 1))
    views = family_views(ctx).values()
    return [c for v in views for c in [*v.charts, *v.concurrency] if not c.empty]


def test_every_chart_is_what_plotly_writes_with_validation(tmp_path):
    charts = _charts(REPO / "data", REPO / "packets") + _charts(*write_catalog(tmp_path))
    assert len(charts) >= 5
    traces = 0
    for chart in charts:
        figure = json.loads(chart.figure_json)
        traces += len(figure["data"])
        again = pio.to_json(go.Figure(figure), validate=True, pretty=False, engine="json")
        assert again == chart.figure_json, chart.id
    assert traces > len(charts)  # several series, withheld markers among them


def test_unsafe_characters_are_escaped_as_plotly_escapes_them():
    from builder.charts import figure_json

    text = figure_json({"data": [], "layout": {"title": {"text": "</script> a/b <b>"}}})
    assert "<" not in text and ">" not in text and "/" not in text
    assert json.loads(text)["layout"]["title"]["text"] == "</script> a/b <b>"
