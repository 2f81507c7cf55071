"""The JSON API: `api/models.json` and `api/models/<slug>.json`, serialised from the very view
models the pages render, so a page and its JSON can never disagree on a number."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import orjson
from markupsafe import Markup

from builder.format import Num
from builder.views.family import FamilyView
from builder.views.index import IndexView

# 2: a projection's speed (and each of its rows') is `value`, named by its `state`/`state_word`; it was
# `measured`, whatever the state, so an imported figure read as measured (version 1)
API_VERSION = 2
# Presentation-only fields: the chart figure is the same numbers as the chart's table rows.
OMIT = frozenset({"figure_json"})


_PLAIN = frozenset({str, int, bool, type(None)})  # written as they are: most of a view's values


def jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is float:
        if not math.isfinite(value):  # orjson would write null: a view's number is never missing silently
            raise ValueError(f"{value} has no JSON number")
        return value
    if isinstance(value, Num):
        return jsonable(value.value)
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
    """Sorted keys, two-space indents, UTF-8: orjson's (json.dumps with an indent is Python's pure
    encoder, 2.85 ms of a family's API file at 100 x 20, orjson 0.08 ms). An integer past 64 bits,
    which orjson refuses and a packet may hold, is written by json.dumps in the same layout."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    except orjson.JSONEncodeError:
        return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def family_api(view: FamilyView, build_date: str) -> bytes:
    return dumps({"api_version": API_VERSION, "build_date": build_date, "family": jsonable(view)})


def models_api(view: IndexView, build_date: str) -> bytes:
    return dumps({"api_version": API_VERSION, "build_date": build_date, "models": jsonable(view.families)})
