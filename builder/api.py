"""The JSON API: `api/models.json` and `api/models/<slug>.json`, serialised from the very view
models the pages render, so a page and its JSON can never disagree on a number."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from builder.format import Num
from builder.views.family import FamilyView
from builder.views.index import FamilyCard, IndexView

API_VERSION = 1
# Presentation-only fields: the chart figure is the same numbers as the chart's table rows.
OMIT = frozenset({"figure_json"})


_PLAIN = frozenset({str, int, float, bool, type(None)})  # written as they are: most of a view's values


def jsonable(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
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


def models_entry(card: FamilyCard) -> str:
    """A family's entry of the models API, made once with its view (builder/assemble.py): as
    `dumps` writes it at the top level."""
    return json.dumps(jsonable(card), sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False)


def models_api(view: IndexView, build_date: str, entries: Mapping[str, str | None] | None = None) -> bytes:
    """`dumps` of every card in the index's order, joined from each family's `models_entry`
    (`entries`, by slug; one missing is made here). The list sits two levels down: an entry's
    every line break takes two more spaces (a string's own line break is written escaped)."""
    made = entries or {}
    listed = [made.get(card.slug) or models_entry(card) for card in view.families]
    models = "[\n  " + ",\n  ".join(e.replace("\n", "\n  ") for e in listed) + "\n ]" if listed else "[]"
    head = dumps({"api_version": API_VERSION, "build_date": build_date, "models": None}).decode("utf-8")
    before, null, after = head.rpartition('"models": null')  # the last key: nothing after it holds it
    assert null, "the models key is where dumps writes it"
    return (before + '"models": ' + models + after).encode("utf-8")
