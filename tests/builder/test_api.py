"""The models API joined from each family's entry, made once with the family's view: the very
document `api.dumps` writes of the index's cards whole, whatever the entries hold."""

from __future__ import annotations

import json
from dataclasses import replace

from builder.api import API_VERSION, dumps, jsonable, models_api, models_entry
from catalog.store.repository import load_catalog
from tests.builder.made import index_of, site_context


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
