"""The models API joined from each family's entry, made once with the family's view: the very
document `api.dumps` writes of the index's cards whole, whatever the entries hold."""

from __future__ import annotations

import json
from dataclasses import replace
from enum import StrEnum

import pytest
from markupsafe import Markup

from builder.api import API_VERSION, dumps, family_api, jsonable, models_api, models_entry, reference_dumps
from builder.format import num
from builder.views.index import family_card
from catalog.store.repository import load_catalog
from tests.builder.made import family_views, index_of, site_context


def _whole(index, stamp: str) -> bytes:
    return dumps({"api_version": API_VERSION, "build_date": stamp, "models": jsonable(index.families)})


def test_the_models_api_joined_from_family_entries_is_the_document_written_whole(built):
    catalog = load_catalog(built.parent / "data", built.parent / "packets")
    ctx = site_context(catalog)
    index = index_of(ctx)
    assert len(index.families) >= 2
    entries = {card.slug: models_entry(card) for card in index.families}  # as a build makes them, with each view
    stamp = ctx.build_date.isoformat()
    assert models_api(index, stamp, entries) == models_api(index, stamp) == _whole(index, stamp)
    # an entry holding a line break inside a string, a quote, non-ASCII text: still the same bytes
    card = replace(index.families[0], title='Ünïcode "7B"\nnext line', description="a\\b · c")
    odd = replace(index, families=[card, *index.families[1:]])
    entries[card.slug] = models_entry(card)
    assert models_api(odd, stamp, entries) == _whole(odd, stamp)
    assert json.loads(models_api(odd, stamp, entries))["models"][0]["title"] == card.title
    empty = replace(index, families=[])
    assert models_api(empty, stamp, {}) == _whole(empty, stamp)


def test_dumps_writes_what_json_writes_of_every_family_view_and_of_odd_values(built):
    """`dumps` walks a view once (builder/api.py): the very bytes json.dumps writes of `jsonable`
    of it, for every family of the fixture catalog and its models entries, and for values a view
    rarely holds: escapes, non-ASCII, floats json writes with an exponent, empty containers,
    tuples, non-string keys, a str subclass."""
    catalog = load_catalog(built.parent / "data", built.parent / "packets")
    ctx = site_context(catalog)
    views = family_views(ctx)
    assert views
    stamp = ctx.build_date.isoformat()
    for view in views.values():
        whole = {"api_version": API_VERSION, "build_date": stamp, "family": jsonable(view)}
        assert family_api(view, stamp) == reference_dumps(whole)
        card = family_card(view, catalog.hardware)
        assert models_entry(card) == reference_dumps(jsonable(card)).decode("utf-8").removesuffix("\n")
    odd = {
        "text": ['Ünïcode "7B"\nnext\tline\x00\x1f\x7f\u2028', "a\\b · c", Markup("<b>x</b>"), StrEnumLike.A],
        "floats": [0.0, -0.0, 1e-7, 1e16, 123456789012345.67, 2.5e-5, 1 / 3, 1e300],
        "ints": [0, -1, 2**70, True, False, None],
        "empty": [[], {}, (), [[]], [{}]],
        "keys": {1: "one", 2.5: "x", None: "n", "b": (1, (2, 3))},
        "num": num(12.345, unit="tok/s"),
    }
    assert dumps(odd) == reference_dumps(jsonable(odd))
    with pytest.raises(ValueError, match="Out of range float"):
        dumps({"x": [float("nan")]})


class StrEnumLike(StrEnum):
    A = "a"
