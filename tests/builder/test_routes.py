"""builder/routes.py against real builds of the committed catalog: every route is relative and
stays inside the site, every internal link of every page resolves to a file the build wrote, and
what each page declares it depends on (`Page.depends_on`) covers every file a packet changes."""

from __future__ import annotations

import json
import posixpath
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup

from builder import routes
from builder.assemble import changed_keys, changed_views
from builder.cli import run
from builder.pages import ANY_PACKET
from builder.search import FOLDER as SEARCH
from builder.views.index import listings
from catalog.packets.layout import SIGNATURE_SUFFIX, is_signature
from catalog.packets.seal import write_packet
from catalog.store.repository import Catalog, load_catalog
from tests.builder.made import every_page, index_of, site_context
from tests.catalog.factories import measured_draft, sealed, signed_data

REPO = Path(__file__).resolve().parents[2]
FIXED_EPOCH = "1767225600"  # 2026-01-01: two builds of one catalog differ only where their inputs do
DATA, PACKETS = REPO / "data", REPO / "packets"
COMMITTED = sorted(p.name.removesuffix(".json") for p in PACKETS.glob("*.json") if not is_signature(p))
# Where a page names another file: (tag, attribute).
LINKING = [("a", "href"), ("link", "href"), ("script", "src"), ("script", "data-plotly"), ("form", "action")]


def build(data: Path, packets: Path, out: Path) -> Path:
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out)]) == 0
    return out


def files_of(site: Path) -> dict[str, bytes]:
    """Every file of a built site, but the no-op record (it hashes the inputs, so always differs)."""
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob("*"))
        if p.is_file() and p.name != routes.BUILD_MANIFEST
    }


@pytest.fixture(scope="module")
def epoch() -> Iterator[None]:
    """One build date for every build here, so a page differs only where a packet changed it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SOURCE_DATE_EPOCH", FIXED_EPOCH)
        yield


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, epoch: None) -> Path:
    return build(DATA, PACKETS, tmp_path_factory.mktemp("committed") / "site")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(DATA, PACKETS)


def every_route(catalog: Catalog) -> set[str]:
    """Every file the routes predict for the catalog, assets aside."""
    found = {routes.INDEX, routes.NOT_FOUND, routes.SITEMAP, routes.METHODOLOGY, routes.HARDWARE_INDEX}
    found.add(routes.MODELS_API)
    for slug in catalog.recipes:
        found |= {routes.family_page(slug), routes.family_api(slug), routes.recipe_page(slug)}
    for packet_id, packet in catalog.packets.items():
        found |= {routes.packet_page(packet_id), routes.packet_json(packet_id)}
        if packet.signed:
            found.add(routes.packet_signature(packet_id))
    found |= {routes.hardware_page(h) for h in catalog.hardware}
    # the index pre-rendered per card (measured on, or verified by a recipe) and per quantization measured
    found |= {routes.filtered_index("hw", p.identity.host.hardware) for p in catalog.packets.values()}
    verified = {h for r in catalog.recipes.values() for h, status in r.meta.hardware.items() if status == "verified"}
    found |= {routes.filtered_index("hw", h) for h in verified}
    found |= {routes.filtered_index("quant", p.identity.model.quantization) for p in catalog.packets.values()}
    return found


def test_the_routes_are_exactly_the_files_the_build_writes(site: Path, catalog: Catalog) -> None:
    built = set(files_of(site))
    assets = {p for p in built if p.startswith((routes.ASSETS_FOLDER + "/", SEARCH + "/"))}
    assert built - assets == every_route(catalog)
    for asset in (routes.STYLESHEET, routes.FAVICON, routes.SITE_SCRIPT, routes.CHARTS_SCRIPT, routes.PLOTLY_BUNDLE):
        assert asset in assets
    assert sum(routes.is_packet_json(p) for p in built) == len(catalog.packets)


def test_every_route_is_relative_and_stays_inside_the_site(catalog: Catalog) -> None:
    anchored = [routes.methodology_section("words"), routes.packet_page("p", "tp1-mtp3")]
    for route in [*every_route(catalog), *anchored, routes.family_folder("x"), routes.asset("style.css")]:
        parts = urlsplit(route)
        assert not parts.scheme and not parts.netloc and not route.startswith("/"), route
        assert ".." not in parts.path.split("/"), route


def test_a_relative_link_leads_back_to_its_route(catalog: Catalog) -> None:
    pages = [p for p in every_route(catalog) if p.endswith(".html")]
    for page in pages:
        for target in [*pages, routes.packet_json("x"), routes.methodology_section("words")]:
            link = routes.relative(page, target)
            assert posixpath.normpath(posixpath.join(posixpath.dirname(page), link)) == target
    assert routes.relative(routes.family_page("x"), "https://example.org/") == "https://example.org/"
    assert routes.relative(routes.family_page("x"), "#packets") == "#packets"


def internal_links(soup: BeautifulSoup) -> list[str]:
    found = [str(el[attr]) for tag, attr in LINKING for el in soup.find_all(tag, attrs={attr: True})]
    links = [link for link in found if not urlsplit(link).scheme]
    for script in soup.find_all("script", type="application/ld+json"):
        for download in json.loads(script.string or "{}").get("distribution", []):
            links.append(download["contentUrl"])
    return links


def test_every_internal_link_of_every_page_resolves(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    parsed = {p: BeautifulSoup(p.read_text(encoding="utf-8"), "lxml") for p in pages}
    checked = 0
    for page, soup in parsed.items():
        for link in internal_links(soup):
            parts = urlsplit(link)
            rooted = parts.path.startswith("/")  # the 404 page alone: a server answers it at any address
            assert not rooted or page.name == routes.NOT_FOUND, f"{page.relative_to(site)} -> {link}: file:// breaks"
            base = site if rooted else page.parent
            target = (base / unquote(parts.path.lstrip("/"))).resolve() if parts.path else page
            where = f"{page.relative_to(site)} -> {link}"
            assert target.is_file() and target.is_relative_to(site.resolve()), where
            if parts.fragment and target.suffix == ".html":
                assert parsed[target].find(id=parts.fragment) is not None, where
            checked += 1
    assert checked >= 10 * len(pages)  # the pages do link


def test_the_sitemap_lists_every_page_but_the_404(site: Path) -> None:
    tree = BeautifulSoup((site / routes.SITEMAP).read_text(encoding="utf-8"), "xml")
    locs = {loc.text for loc in tree.find_all("loc")}
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert locs == pages - {routes.NOT_FOUND}


def affected(catalog: Catalog, packet_id: str, before: Catalog) -> set[str]:
    """What an incremental build writes when `packet_id` changes from `before` to `catalog`: the
    pages depending on what it touches and the listings whose view changed, its files, its family's
    API, the models API, the sitemap."""
    keys = changed_keys(before.listing, catalog.listing, {packet_id})
    keys |= changed_views(listings(index_of(site_context(before))), listings(index_of(site_context(catalog))))
    pages = {p.path for p in every_page(site_context(catalog)) if not p.depends_on.isdisjoint(keys)}
    slugs = {listed.slug for listed in (before.listing.get(packet_id), catalog.listing.get(packet_id)) if listed}
    files = {routes.packet_json(packet_id), routes.packet_signature(packet_id), routes.MODELS_API, routes.SITEMAP}
    return pages | files | {routes.family_api(slug) for slug in slugs} | {routes.packet_page(packet_id)}


@pytest.mark.parametrize("packet_id", COMMITTED)
def test_adding_a_packet_changes_only_the_pages_that_depend_on_it(
    packet_id: str, site: Path, catalog: Catalog, tmp_path: Path, epoch: None
) -> None:
    packets = tmp_path / "packets"
    shutil.copytree(PACKETS, packets)
    (packets / f"{packet_id}.json").unlink()
    (packets / f"{packet_id}{SIGNATURE_SUFFIX}").unlink(missing_ok=True)
    before, after = files_of(build(DATA, packets, tmp_path / "site")), files_of(site)

    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    without = load_catalog(DATA, packets)
    declared = affected(catalog, packet_id, without) | affected(without, packet_id, catalog)
    changed -= {p for p in changed if p.startswith(SEARCH + "/")}  # the search index: made again every build
    assert changed <= declared, f"changed but not declared: {sorted(changed - declared)}"
    packet = catalog.packets[packet_id]
    slug, hardware = packet.identity.model.slug, packet.identity.host.hardware
    own = {routes.packet_page(packet_id), routes.packet_json(packet_id), routes.packet_signature(packet_id)}
    assert own <= changed  # new files
    assert {
        routes.family_page(slug),
        routes.family_api(slug),
        routes.SITEMAP,
        routes.hardware_page(hardware),
    } <= changed


def test_a_reproduction_also_changes_the_page_of_the_packet_it_reproduces(tmp_path: Path, epoch: None) -> None:
    data, packets = signed_data(tmp_path / "data"), tmp_path / "packets"
    packets.mkdir()
    original = sealed(measured_draft(spec=False))
    write_packet(original, packets)
    before = files_of(build(data, packets, tmp_path / "before"))
    catalog_before = load_catalog(data, packets)
    # an independent run: another boot, its own timings (catalog.checks.consistency refuses a copy)
    draft = measured_draft(spec=False, title="again", ms_per_token=20.5)
    draft["identity"]["host"]["boot_id"] = "another-boot"
    draft["reproduces"] = original.packet.id
    copy = sealed(draft)
    write_packet(copy, packets)
    after = files_of(build(data, packets, tmp_path / "after"))

    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    declared = affected(load_catalog(data, packets), copy.packet.id, catalog_before)
    changed -= {p for p in changed if p.startswith(SEARCH + "/")}  # the search index: made again every build
    assert changed <= declared, f"changed but not declared: {sorted(changed - declared)}"
    assert routes.packet_page(original.packet.id) in changed
    packet_page = next(
        p
        for p in every_page(site_context(load_catalog(data, packets)))
        if p.path == routes.packet_page(original.packet.id)
    )
    assert ANY_PACKET not in packet_page.depends_on  # declared through the reproduction, not "any packet"
