"""A newcomer's first loop: a packet signed by this host's own key (a throwaway one here: the test
session's, under its private XDG_CONFIG_HOME), which data/keys.yaml does not list. `make site`
(`--host-key`) shows it, labelled "signed by this host's key, not yet listed in data/keys.yaml";
`make check`, `make verify` and a plain build refuse it. `make serve` answers a missing page with the
site's 404 page. (tests/e2e/test_campaign.py runs the same loop after a real measurement.)"""

from __future__ import annotations

import http.client
import threading
from pathlib import Path
from urllib.parse import urljoin

import pytest
from bs4 import BeautifulSoup

from builder.cli import run
from builder.serve import server
from catalog.errors import CatalogError
from catalog.packets.signing import HOST_KEY_NOTE, host_public_keys
from catalog.store.repository import load_catalog
from tests.builder.factory import write_catalog
from tests.catalog import factories

REPO = Path(__file__).resolve().parents[2]
FAMILY = "models/fixture-7b/index.html"


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The fixture catalog, its packets signed by this host's key, with the repository's keys.yaml
    (which lists only the project's keys), built as `make site` builds it."""
    root = tmp_path_factory.mktemp("newcomer")
    data, packets = write_catalog(root)
    (data / "keys.yaml").write_bytes((REPO / "data" / "keys.yaml").read_bytes())
    out = root / "site"
    assert run(["build", "--data", str(data), "--packets", str(packets), "--out", str(out), "--host-key"]) == 0
    return data, packets, out


def test_the_host_key_is_read_from_its_key_file_never_made(tmp_path: Path) -> None:
    assert host_public_keys(tmp_path) == []  # nothing there: nothing admitted, and no key created
    assert not list(tmp_path.iterdir())
    key = factories.test_key("measurer")  # made by the test session, as `make measure` makes a host's
    entries = {entry.id: entry for entry in host_public_keys()}
    assert entries[key.key_id].public_key == key.public_hex and entries[key.key_id].role == "measurer"


def test_make_site_shows_the_packet_labelled(newcomer: tuple[Path, Path, Path]) -> None:
    _, packets, out = newcomer
    family = BeautifulSoup((out / FAMILY).read_text(encoding="utf-8"), "lxml")
    rows = family.select("table.packet-list tbody tr")
    assert rows and all(HOST_KEY_NOTE in row.get_text(" ") for row in rows)
    assert HOST_KEY_NOTE in family.select_one("#hero .headline-meta").get_text(" ")  # type: ignore[union-attr]
    for path in sorted(packets.glob("*.json")):
        if path.name.endswith(".dsse.json"):
            continue
        page = BeautifulSoup((out / "packets" / path.stem / "index.html").read_text(encoding="utf-8"), "lxml")
        line = page.select_one(".signature").get_text(" ")  # type: ignore[union-attr]
        keys = {factories.test_key(role).key_id[:16] for role in ("measurer", "importer")}  # as its provenance needs
        assert line.startswith(HOST_KEY_NOTE) and any(key in line for key in keys)
        assert "make check, make verify and CI refuse it" in line


def test_check_verify_and_a_plain_build_refuse_it(newcomer: tuple[Path, Path, Path], tmp_path: Path) -> None:
    data, packets, out = newcomer
    check = ["build", "--data", str(data), "--packets", str(packets), "--out", str(out), "--check", "--strict"]
    with pytest.raises(CatalogError, match="unknown key"):
        run([*check, "--no-cache"])  # make check
    with pytest.raises(CatalogError, match="unknown key"):
        load_catalog(data, packets)  # make verify's load
    with pytest.raises(CatalogError, match="unknown key"):
        run(["build", "--data", str(data), "--packets", str(packets), "--out", str(tmp_path / "site")])
    admitted = load_catalog(data, packets, host_keys=True)
    assert admitted.warnings and all(not p.signed for p in admitted.listing.values())
    assert any(HOST_KEY_NOTE in w and "make check, make verify and CI refuse it" in w for w in admitted.warnings)


def test_a_missing_page_is_answered_with_the_sites_404(newcomer: tuple[Path, Path, Path]) -> None:
    _, _, out = newcomer
    with server(out, 0) as running:
        thread = threading.Thread(target=running.serve_forever, daemon=True)
        thread.start()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", running.server_address[1], timeout=10)
            connection.request("GET", "/models/no-such-model/")
            response = connection.getresponse()
            assert response.status == 404
            body = response.read()
            assert body == (out / "404.html").read_bytes()
            # served at the missing address, its stylesheet, script and links still reach the site
            soup = BeautifulSoup(body, "lxml")
            refs = {str(t.get("href") or t.get("src")) for t in soup.select("link[href], a[href], script[src]")}
            assert any(ref.endswith("style.css") for ref in refs) and soup.find("link", rel="canonical") is None
            for ref in sorted(r for r in refs if not r.startswith("#")):
                connection.request("GET", urljoin("/models/no-such-model/", ref))
                reached = connection.getresponse()
                reached.read()
                assert reached.status == 200, ref
            connection.request("GET", "/index.html")
            found = connection.getresponse()
            assert found.status == 200 and found.read() == (out / "index.html").read_bytes()
        finally:
            running.shutdown()
