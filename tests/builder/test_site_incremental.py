"""The incremental rebuild (builder/build.py): a new packet re-renders only the pages that
depend on what it touches (each page's `depends_on`), and the site is byte for byte the one a full
build writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder import routes
from builder.cli import run
from catalog.packets.layout import signature_path
from catalog.packets.seal import write_packet
from catalog.store.repository import load_catalog
from tests.builder.counting import family_views_made, packets_read
from tests.builder.factory import measured_parts, write_catalog
from tests.catalog.factories import seal_parts


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _build(data: Path, packets: Path, out: Path, timings: Path, *extra: str) -> dict[str, int]:
    argv = ["build", "--data", str(data), "--packets", str(packets), "--out", str(out), "--timings", str(timings)]
    assert run([*argv, *extra]) == 0
    return {kind: cost["pages"] for kind, cost in json.loads(timings.read_text())["pages"].items()}


def _add_campaign(packets: Path, title: str) -> Path:
    parts = measured_parts()
    return write_packet(seal_parts(parts.model_copy(update={"title": title})), packets)


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, Path]:
    data, packets = write_catalog(tmp_path / "tree")
    site = tmp_path / "site"
    _build(data, packets, site, tmp_path / "t0.json")
    return data, packets, site


def test_a_new_packet_renders_only_its_pages_and_gives_the_full_build(built, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets, site = built
    _build(data, packets, site, tmp_path / "t1.json", "--full")  # under the pinned build date
    all_pages = len(list(site.rglob("*.html")))
    added = _add_campaign(packets, "Fixture 7B, the same campaign again")
    rendered = _build(data, packets, site, tmp_path / "t2.json")
    assert rendered.get("packet") == 1
    assert sum(rendered.values()) < all_pages
    assert "hardware" not in rendered or rendered["hardware"] <= 2  # the cards it ran on
    full = tmp_path / "full"
    _build(data, packets, full, tmp_path / "t3.json", "--full")
    assert _snapshot(site) == _snapshot(full)
    assert (site / "packets" / added.stem / "index.html").is_file()


def test_a_removed_packet_renders_only_the_pages_it_was_on_and_gives_the_full_build(built, tmp_path, monkeypatch):
    """A packet withdrawn from packets/ changes the pages a new one would: its own go, and its
    family's, index, API and cards' pages are rendered again; the rest is kept."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets, site = built
    added = _add_campaign(packets, "Fixture 7B, the same campaign again")
    _build(data, packets, site, tmp_path / "t1.json", "--full")
    all_pages = len(list(site.rglob("*.html")))
    added.unlink()
    signature_path(added).unlink()
    rendered = _build(data, packets, site, tmp_path / "t2.json")
    assert "packet" not in rendered and 0 < sum(rendered.values()) < all_pages - 1
    assert not (site / "packets" / added.stem).exists() and not (site / "packets" / added.name).exists()
    full = tmp_path / "full"
    _build(data, packets, full, tmp_path / "t3.json", "--full")
    assert _snapshot(site) == _snapshot(full)


def test_a_removed_reproduction_renders_the_page_of_the_packet_it_reproduced_again(tmp_path, monkeypatch):
    from tests.catalog.factories import measured_draft, sealed, signed_data

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets, site = signed_data(tmp_path / "data"), tmp_path / "packets", tmp_path / "site"
    packets.mkdir()
    original = sealed(measured_draft(spec=False))
    write_packet(original, packets)
    draft = measured_draft(spec=False, title="again", ms_per_token=20.5)
    draft["identity"]["host"]["boot_id"] = "another-boot"
    draft["reproduces"] = original.packet.id
    reproduction = write_packet(sealed(draft), packets)
    _build(data, packets, site, tmp_path / "t0.json")
    reproduction.unlink()
    signature_path(reproduction).unlink(missing_ok=True)
    rendered = _build(data, packets, site, tmp_path / "t1.json")
    assert rendered.get("packet") == 1  # the original's page: no longer reproduced
    assert "methodology" not in rendered  # the rest kept
    full = tmp_path / "full"
    _build(data, packets, full, tmp_path / "t2.json", "--full")
    assert _snapshot(site) == _snapshot(full)


def test_a_hand_edit_or_a_lost_memory_means_a_full_build(built, tmp_path, monkeypatch):
    from builder.memory import Cache

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets, site = built
    added = _add_campaign(packets, "Fixture 7B, the same campaign again")
    _build(data, packets, site, tmp_path / "t1.json", "--full")
    all_pages = len(list(site.rglob("*.html")))
    Cache.of(site).memory.unlink()  # as a cache that lost what the last build remembered
    added.unlink()
    signature_path(added).unlink()
    assert sum(_build(data, packets, site, tmp_path / "t2.json").values()) == all_pages - 1
    (site / "index.html").write_text("edited by hand")
    _add_campaign(packets, "Fixture 7B, a third campaign")
    assert sum(_build(data, packets, site, tmp_path / "t3.json").values()) == all_pages
    full = tmp_path / "full"
    _build(data, packets, full, tmp_path / "t4.json", "--full")
    assert _snapshot(site) == _snapshot(full)


def test_another_build_date_renders_every_page(built, tmp_path, monkeypatch):
    data, packets, site = built
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    _build(data, packets, site, tmp_path / "t1.json")
    all_pages = len(list(site.rglob("*.html")))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767312000")
    _add_campaign(packets, "Fixture 7B, the same campaign again")
    assert sum(_build(data, packets, site, tmp_path / "t2.json").values()) == all_pages + 1


def test_a_new_packet_makes_only_its_familys_view_again(built, tmp_path, monkeypatch):
    """The rebuild makes the view of the family that gained a packet and takes every other
    family's card from what the last build remembered; the site is the one a full build writes."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    made = family_views_made(monkeypatch)
    data, packets, site = built
    _build(data, packets, site, tmp_path / "t1.json", "--full")  # the pinned build date: every view made
    assert len(made) == len(list((data / "models").glob("*.yaml")))
    made.clear()
    added = _add_campaign(packets, "Fixture 7B, the same campaign again")
    _build(data, packets, site, tmp_path / "t2.json")
    assert made == [measured_parts().identity.model.slug]
    full = tmp_path / "full"
    _build(data, packets, full, tmp_path / "t3.json", "--full")
    assert _snapshot(site) == _snapshot(full)
    assert (site / "packets" / added.stem / "index.html").is_file()


def test_a_new_packet_reads_the_packets_of_its_family_only(tmp_path, monkeypatch):
    """The rest of the site (index, hardware pages, API, the page list) reads every packet's
    listing as the last build remembered it; a packet is read only by its family made again."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets = write_catalog(tmp_path / "tree", load=True)
    site = tmp_path / "site"
    _build(data, packets, site, tmp_path / "t0.json")
    read = packets_read(monkeypatch)
    added = _add_campaign(packets, "Fixture 7B, the same campaign again")
    _build(data, packets, site, tmp_path / "t1.json")
    catalog = load_catalog(data, packets)
    family = catalog.family_ids(measured_parts().identity.model.slug)
    assert len(family) < len(catalog.listing)  # another family has packets: they must not be read
    assert added.stem in family and sorted(read) == sorted(f"{i}.json" for i in family)
    full = tmp_path / "full"
    _build(data, packets, full, tmp_path / "t2.json", "--full")
    assert _snapshot(site) == _snapshot(full)


def test_a_listing_page_is_rendered_again_when_its_view_changed_and_only_then(tmp_path, monkeypatch):
    """The index and its filter pages are rendered again when their view differs from the one the
    last build rendered (builder/assemble.py `views`): a slower independent run leaves the family's
    card on the faster one; the faster one's going moves the card to it. Either way the site is the
    one a full build writes."""
    from tests.catalog.factories import measured_draft, sealed, signed_data

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    data, packets, site = signed_data(tmp_path / "data"), tmp_path / "packets", tmp_path / "site"
    packets.mkdir()
    faster = write_packet(sealed(measured_draft(spec=False)), packets)
    _build(data, packets, site, tmp_path / "t0.json")
    listings = len([p for p in site.rglob(routes.INDEX) if p.parent == site or routes.FILTER_FOLDER in p.parts])
    draft = measured_draft(spec=False, title="again", ms_per_token=20.5)
    draft["identity"]["host"]["boot_id"] = "another-boot"  # its own timings: a repeat, not a copy
    write_packet(sealed(draft), packets)
    assert "index" not in _build(data, packets, site, tmp_path / "t1.json")
    faster.unlink()
    signature_path(faster).unlink(missing_ok=True)
    assert _build(data, packets, site, tmp_path / "t2.json").get("index") == listings
    full = tmp_path / "full"
    _build(data, packets, full, tmp_path / "t3.json", "--full")
    assert _snapshot(site) == _snapshot(full)
