"""The API files: the view models the pages render, as JSON with sorted keys and two-space indents,
a number never written as a null."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from builder.api import API_VERSION, dumps, jsonable, models_api
from builder.format import Num
from catalog.store.repository import load_catalog
from tests.builder.made import index_of, site_context


def test_the_models_api_is_every_card_of_the_index_in_its_order(built):
    catalog = load_catalog(built.parent / "data", built.parent / "packets")
    ctx = site_context(catalog)
    index = index_of(ctx)
    assert len(index.families) >= 2
    stamp = ctx.build_date.isoformat()
    document = json.loads(models_api(index, stamp))
    assert document["api_version"] == API_VERSION and document["build_date"] == stamp
    assert [m["slug"] for m in document["models"]] == [card.slug for card in index.families]
    # a line break inside a string, a quote, non-ASCII text: read back as they were
    card = replace(index.families[0], title='Ünïcode "7B"\nnext line', description="a\\b · c")
    odd = json.loads(models_api(replace(index, families=[card, *index.families[1:]]), stamp))
    assert (odd["models"][0]["title"], odd["models"][0]["description"]) == (card.title, card.description)
    assert json.loads(models_api(replace(index, families=[]), stamp))["models"] == []


def test_an_api_file_is_sorted_indented_utf8_with_numbers_as_numbers():
    written = dumps(jsonable({"b": Num("1234.5", "tok/s"), "a": [Num("12"), "é"], "c": 1e-05}))
    assert written == '{\n  "a": [\n    12,\n    "é"\n  ],\n  "b": 1234.5,\n  "c": 0.00001\n}\n'.encode()
    assert json.loads(written) == {"a": [12, "é"], "b": 1234.5, "c": 1e-05}


def test_an_integer_past_64_bits_is_written_as_the_same_number():
    view = {"b": [2**70, -(2**64)], "a": "é"}
    written = dumps(jsonable(view))
    assert json.loads(written) == view
    # the layout orjson writes, as json.dumps writes it
    assert written == f'{{\n  "a": "é",\n  "b": [\n    {2**70},\n    {-(2**64)}\n  ]\n}}\n'.encode()
    assert dumps({"a": "é", "b": [1, 2]}) == '{\n  "a": "é",\n  "b": [\n    1,\n    2\n  ]\n}\n'.encode()


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_a_number_json_cannot_hold_is_refused_not_written_as_null(number):
    with pytest.raises(ValueError, match="no JSON number"):
        jsonable({"figure": [number]})
