"""The checks against data/ read every row of a packet, at `make verify` and at build alike: the
summary cache that once held only each row's first 101 tokens let a token id past the vocabulary
after them through a build (issue 27); nothing of a packet is cached now, and this holds it so."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.build import Options, build
from catalog.errors import CatalogError
from catalog.model.arrays import decode_uint32, encode_uint32
from catalog.packets.seal import write_packet
from catalog.store.repository import load_catalog
from tests.catalog.factories import measured_draft, sealed

PAST_THE_FIRST_101 = 110  # a summary kept tokens 0..100 of each row: the TTFT and decode rate read them


def _refused(load: object) -> set[tuple[str | None, str | None]]:
    with pytest.raises(CatalogError) as refused:
        load()  # type: ignore[operator]
    errors = getattr(refused.value, "errors", [refused.value])
    return {(e.file, e.field) for e in errors}


def test_a_token_id_past_the_vocabulary_late_in_a_row_is_refused_by_verify_and_build(tree: Path) -> None:
    draft = measured_draft(spec=False)
    draft["identity"]["model"]["config"] = None  # the catalog's facts for the model then hold: 248,320 ids
    for server in draft["arms"][0]["servers"]:
        row = server["rows"][2]
        ids = decode_uint32(row["token_ids"])
        ids[PAST_THE_FIRST_101] = 250_000
        row["token_ids"] = encode_uint32(ids)
    path = write_packet(sealed(draft), tree / "packets")
    expected = {(str(path), f"arms[0].servers[{j}].rows[2].token_ids[{PAST_THE_FIRST_101}]") for j in (0, 1)}
    site = tree / "site"
    for _ in range(2):  # a second build, after data/ changed, reads it all again as well
        assert _refused(lambda: load_catalog(tree / "data", tree / "packets")) == expected
        assert _refused(lambda: build(Options(tree / "data", tree / "packets", site))) == expected
        assert not site.exists()
        hardware = tree / "data" / "hardware.yaml"
        hardware.write_text(hardware.read_text(encoding="utf-8") + "\n# data/ changed\n", encoding="utf-8")
