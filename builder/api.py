"""The JSON API: `api/models.json` and `api/models/<slug>.json`, serialised from the very view
models the pages render, so a page and its JSON can never disagree on a number."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring
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
    """`reference_dumps(jsonable(value))`, the same bytes (tests/builder/test_api.py holds them to it)."""
    return (_encoded(value) + "\n").encode("utf-8")


def reference_dumps(value: Any) -> bytes:
    """What the API files are: json.dumps, keys sorted, one space a level, UTF-8, no NaN."""
    return (json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def family_api(view: FamilyView, build_date: str) -> bytes:
    return dumps({"api_version": API_VERSION, "build_date": build_date, "family": view})


def models_entry(card: FamilyCard) -> str:
    """A family's entry of the models API, made once with its view (builder/assemble.py): as
    `dumps` writes it at the top level."""
    return _encoded(card)


def _encoded(value: Any) -> str:
    """`jsonable` and json.dumps(indent=1) in one walk of the view, its pieces joined once: json's
    pure-Python encoder (the C one cannot indent) took a family page's API file 2.0 ms, after
    1.0 ms of `jsonable`; this takes both 1.4 ms (100 x 20 catalog). Each value is written as json writes what
    `jsonable` makes of it: strings by json's own encode_basestring, numbers by their repr."""
    parts: list[str] = []
    _encode(value, parts, "\n")
    return "".join(parts)


def _encode(value: Any, parts: list[str], newline: str) -> None:
    kind = type(value)
    if kind in _LEAVES:
        parts.append(_LEAVES[kind](value))
    elif isinstance(value, Num):
        _encode(value.value, parts, newline)
    elif isinstance(value, Markup):
        parts.append(encode_basestring(str(value)))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        _object([(name, getattr(value, name)) for name in _names(kind)], parts, newline)
    elif isinstance(value, dict):
        _object(sorted({str(k): v for k, v in value.items()}.items(), key=_first), parts, newline)
    elif isinstance(value, list | tuple):
        _array(value, parts, newline)
    else:
        parts.append(json.dumps(value, ensure_ascii=False, allow_nan=False))  # a str, int or float subclass


def _names(kind: type) -> list[str]:
    """A dataclass's fields as the API writes them: sorted, the omitted left out; made once a class
    (a family page's view has some 2,000 dataclasses of 40 classes: 0.3 ms)."""
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = sorted(f.name for f in dataclasses.fields(kind) if f.name not in OMIT)
    return names


_FIELDS: dict[type, list[str]] = {}


def _first(item: tuple[str, Any]) -> str:
    return item[0]


def _object(items: list[tuple[str, Any]], parts: list[str], newline: str) -> None:
    if not items:
        parts.append("{}")
        return
    inner = newline + " "
    separator = "," + inner
    opening = "{" + inner
    for key, item in items:
        parts.append(opening)
        opening = separator
        parts.append(encode_basestring(key))
        parts.append(": ")
        leaf = _LEAVES.get(type(item))
        if leaf is not None:
            parts.append(leaf(item))
        else:
            _encode(item, parts, inner)
    parts.append(newline + "}")


def _array(values: list[Any] | tuple[Any, ...], parts: list[str], newline: str) -> None:
    if not values:
        parts.append("[]")
        return
    inner = newline + " "
    separator = "," + inner
    opening = "[" + inner
    for item in values:
        parts.append(opening)
        opening = separator
        leaf = _LEAVES.get(type(item))
        if leaf is not None:
            parts.append(leaf(item))
        else:
            _encode(item, parts, inner)
    parts.append(newline + "]")


def _float(value: float) -> str:
    if value != value or value in (math.inf, -math.inf):
        raise ValueError("Out of range float values are not JSON compliant: " + repr(value))
    return float.__repr__(value)


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


# the values `jsonable` passes as they are (builder/api.py _PLAIN), written as json writes them
_LEAVES: dict[type, Callable[[Any], str]] = {
    str: encode_basestring,
    float: _float,
    int: int.__repr__,
    bool: lambda value: "true" if value else "false",
    type(None): lambda _: "null",
}
