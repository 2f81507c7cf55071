"""catalog.checks.bounds: a packet no larger than any honest one, read only from inside its catalog.
Titles, labels and notes over their bound, a file over 16 MiB and a symbolic link leaving the
catalog are each refused by name; the same at the bound, and a link inside the catalog, pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.checks.bounds import MAX_LABEL, MAX_NOTE, MAX_PACKET_BYTES, MAX_TITLE, text_bound_problems
from catalog.errors import CatalogError
from catalog.packets.keys import load_keys
from catalog.packets.layout import signature_path
from catalog.packets.seal import write_packet
from catalog.packets.verify import Refused, verify
from catalog.store.repository import load_catalog
from tests.catalog.factories import measured_draft, sealed
from tests.catalog.test_consistency import edited


@pytest.mark.parametrize(
    ("field", "most", "change"),
    [
        ("title", MAX_TITLE, lambda d, text: d.update(title=text)),
        ("arms[1].label", MAX_LABEL, lambda d, text: d["arms"][1].update(label=text)),
        ("identity.runtime.label", MAX_LABEL, lambda d, text: d["identity"]["runtime"].update(label=f"0.17.1 {text}")),
        ("arms[0].note", MAX_NOTE, lambda d, text: d["arms"][0].update(note=text)),
    ],
)
def test_a_text_over_its_bound(field: str, most: int, change) -> None:  # type: ignore[no-untyped-def]
    at_bound = "x" * (most - (6 if field == "identity.runtime.label" else 0) - 1)
    assert text_bound_problems(edited(lambda d: change(d, at_bound))) == []
    problems = dict(text_bound_problems(edited(lambda d: change(d, "x" * (most + 10)))))
    assert set(problems) == {field}
    assert problems[field].endswith(f"holds at most {most:,}")


def test_a_packet_over_16_mib_is_refused_unread(tmp_path: Path) -> None:
    path = write_packet(sealed(measured_draft()), tmp_path)
    with path.open("ab") as handle:
        handle.truncate(MAX_PACKET_BYTES + 1)
    result = verify(path)
    assert isinstance(result, Refused)
    [problem] = result.problems
    assert (problem.file, problem.field) == (str(path), "file")
    assert problem.message.startswith(f"is {MAX_PACKET_BYTES + 1:,} bytes, over the {MAX_PACKET_BYTES:,} bytes")


def test_a_symbolic_link_out_of_the_catalog_is_refused_by_name(tree: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    outside = write_packet(sealed(measured_draft()), elsewhere)
    link = tree / "packets" / outside.name
    link.symlink_to(outside)
    signature_path(link).symlink_to(signature_path(outside))
    with pytest.raises(CatalogError) as info:
        load_catalog(tree / "data", tree / "packets")
    errors = getattr(info.value, "errors", [info.value])
    assert {(e.file, e.field) for e in errors} == {(str(link), "file"), (str(signature_path(link)), "file")}
    assert all("outside the catalog" in e.message for e in errors)


def test_a_symbolic_link_inside_the_catalog_is_read(tree: Path) -> None:
    archive = tree / "archive"
    kept = write_packet(sealed(measured_draft()), archive)
    (tree / "packets" / kept.name).symlink_to(kept)
    signature_path(tree / "packets" / kept.name).symlink_to(signature_path(kept))
    assert len(load_catalog(tree / "data", tree / "packets").packets) == 1
    assert load_keys(tree / "data" / "keys.yaml").test_catalog
