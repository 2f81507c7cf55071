"""Keys and dates (catalog/checks/dates.py, catalog/packets/keys.py): every key says the first day
it vouches for, a listing in error is one error, a packet says the days it is judged as of, and an
imported packet is judged as of its source: its importer key by the day it read the source, its
figures by the day the source published them."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from catalog.checks.dates import date_problems, model_date_problems, signed_day
from catalog.errors import CatalogError, CatalogErrors
from catalog.packets.keys import load_keys
from catalog.packets.seal import write_packet
from catalog.store.repository import load_catalog
from tests.catalog.factories import (
    catalog_recipe,
    measured_draft,
    published_arm,
    published_draft,
    seal_draft,
    sealed,
    session_key_entries,
)
from tests.catalog.factories import (
    test_key as session_key,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
G1 = [("G1", 12, 12, True)]


def imported(**source: Any) -> dict[str, Any]:
    draft = published_draft([published_arm("tp1-mtp0", [40.0, 40.5], gates=G1)])
    draft["provenance"]["source"].update(source)
    return draft


def dates(draft: dict[str, Any]) -> dict[str, str]:
    return dict(date_problems(seal_draft(draft), NOW))


# --- keys.yaml ------------------------------------------------------------------------------


def test_an_undated_key_is_refused_outside_a_test_catalog(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text("schema_version: 1\nkeys:\n" + session_key_entries(), encoding="utf-8")
    with pytest.raises(CatalogError) as info:
        load_keys(path)
    assert info.value.field == "keys[0].valid_from"
    assert "has no valid_from: every measurer key says the first day it vouches for" in info.value.message
    path.write_text("schema_version: 1\ntest_catalog: true\nkeys:\n" + session_key_entries(), encoding="utf-8")
    assert len(load_keys(path).keys) == 3


def test_a_key_listed_twice_is_one_error_not_one_per_packet(tree: Path) -> None:
    for title in ("one", "two", "three"):
        write_packet(sealed(measured_draft(title=title)), tree / "packets")
    keys = tree / "data" / "keys.yaml"
    keys.write_text(keys.read_text(encoding="utf-8") + session_key().keys_yaml_entry("listed again", dated=False))
    with pytest.raises(CatalogError) as info:
        load_catalog(tree / "data", tree / "packets")
    assert not isinstance(info.value, CatalogErrors), [str(e) for e in info.value.errors]  # type: ignore[attr-defined]
    assert (info.value.file, info.value.field) == (str(keys), "keys[3].id")
    assert "is listed twice" in info.value.message


# --- the days a packet is judged as of -----------------------------------------------------


def test_a_measured_packet_says_when_its_campaign_finished() -> None:
    assert dates(measured_draft()) == {}
    draft = measured_draft()
    draft["created"] = None
    assert set(dates(draft)) == {"created"}
    assert signed_day(seal_draft(measured_draft())) == date(2026, 11, 30)


@pytest.mark.parametrize("missing", ["published", "retrieved"])
def test_an_imported_packet_says_when_its_source_published_and_was_read(missing: str) -> None:
    assert dates(imported()) == {}
    problems = dates(imported(**{missing: None}))
    assert set(problems) == {f"provenance.source.{missing}"}
    assert problems[f"provenance.source.{missing}"].startswith("an imported packet says when its source published")


def test_a_source_read_before_it_was_published_or_in_the_future() -> None:
    assert dates(imported(published="2026-11-22", retrieved="2026-11-21")) == {
        "provenance.source.retrieved": "2026-11-21 is before the source was published (2026-11-22)"
    }
    assert dates(imported(retrieved="2027-01-01")) == {
        "provenance.source.retrieved": "2027-01-01 is in the future (today is 2026-12-01)"
    }


@pytest.mark.parametrize("day", ["published", "retrieved"])
def test_a_screened_packet_is_held_to_its_source_days_as_an_imported_one_is(day: str) -> None:
    """A screened transcription is signed as of the day its source was read (`signed_day`), so the
    days it names are checked as an imported one's: a source read in 2031 was not read yet. It may
    name none (a local `vllm bench serve` result was never published)."""
    draft = imported(**{day: "2031-06-02"})
    draft["provenance"]["kind"] = "screened"
    assert dates(draft)[f"provenance.source.{day}"] == "2031-06-02 is in the future (today is 2026-12-01)"
    draft = imported(**{day: None})
    draft["provenance"]["kind"] = "screened"
    assert dates(draft) == {}


def test_an_imported_packet_is_signed_as_of_the_day_its_source_was_read() -> None:
    packet = seal_draft(imported(published="2026-06-01", retrieved="2026-11-21"))
    assert signed_day(packet) == date(2026, 11, 21)


def test_no_packet_before_its_model_existed() -> None:
    recipe = catalog_recipe("qwen3.5-9b")
    assert recipe.facts is not None and recipe.facts.released.value == date(2026, 3, 2)
    draft = measured_draft()
    draft["created"] = "2026-02-01T10:00:00Z"
    assert dict(model_date_problems(seal_draft(draft), recipe)) == {
        "created": "2026-02-01 is before model 'qwen3.5-9b' existed (released 2026-03-02: data/overlays/"
        "qwen3.5-9b.yaml facts.released)"
    }
    early = seal_draft(imported(published="2025-12-24", retrieved="2026-11-21"))
    assert set(dict(model_date_problems(early, recipe))) == {"provenance.source.published"}


# --- an importer key judged as of the day it read the source --------------------------------


def _importer_listed(tree: Path, **dates_of_key: str) -> None:
    """keys.yaml lists the session's measurer and an importer key with these validity dates."""
    lines = ["schema_version: 1", "keys:"]
    for key in (session_key("measurer"), session_key("importer")):
        entry = key.keys_yaml_entry("test", dated=False)
        if key.role == "importer":
            entry += "".join(f"    {name}: {value}\n" for name, value in dates_of_key.items())
        else:
            entry += "    valid_from: 2026-01-01\n"
        lines.append(entry.rstrip("\n"))
    (tree / "data" / "keys.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_an_expired_importer_key_still_vouches_for_what_it_read_while_valid(tree: Path) -> None:
    """Read on 2026-11-21, the key expired on 2026-11-25: still valid for it today."""
    write_packet(sealed(imported(published="2026-06-01", retrieved="2026-11-21")), tree / "packets")
    _importer_listed(tree, valid_from="2026-11-01", valid_until="2026-11-25")
    assert len(load_catalog(tree / "data", tree / "packets").packets) == 1


def test_a_new_importer_key_vouches_for_an_older_source_it_read_since(tree: Path) -> None:
    """A key made after the source was published can transcribe it; not before it existed."""
    write_packet(sealed(imported(published="2026-06-01", retrieved="2026-11-21")), tree / "packets")
    _importer_listed(tree, valid_from="2026-11-20")
    assert len(load_catalog(tree / "data", tree / "packets").packets) == 1
    _importer_listed(tree, valid_from="2026-11-22")
    with pytest.raises(CatalogError, match="is not valid before 2026-11-22"):
        load_catalog(tree / "data", tree / "packets")
