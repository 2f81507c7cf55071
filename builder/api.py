"""The JSON API: `api/models.json` and `api/models/<slug>.json`, serialised from the very view
models the pages render, so a page and its JSON can never disagree on a number."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from markupsafe import Markup

from builder.format import Num
from builder.views.family import FamilyView
from builder.views.index import IndexView

API_VERSION = 1
# Presentation-only fields: the chart figure is the same numbers as the chart's table rows.
OMIT = frozenset({"figure_json"})


def jsonable(value: Any) -> Any:
    if isinstance(value, Num):
        return value.value
    if isinstance(value, Markup):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name not in OMIT}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def family_api(view: FamilyView, build_date: str) -> bytes:
    return dumps({"api_version": API_VERSION, "build_date": build_date, "family": jsonable(view)})


def models_api(view: IndexView, build_date: str) -> bytes:
    return dumps({"api_version": API_VERSION, "build_date": build_date, "models": jsonable(view.families)})
