"""The verdict at the top of a family page is generated from the packets: every number in it, read
from the page's HTML, is a link to the arm it comes from and equals that arm's figure (its centre,
the ratio of two arms' centres, or a gate's identical count); a number outside a link is one of the
family's own card counts or speculative depths, or a count of its results."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from bs4.element import NavigableString

from builder.format import fmt
from catalog.model.packet import Packet
from catalog.store.repository import Catalog, load_catalog

REPO = Path(__file__).resolve().parents[2]
DECIMAL = re.compile(r"\d+\.\d+|\d+/\d+|\d+×")
INTEGER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def _catalogs(built: Path, repository_built: Path) -> list[tuple[Path, Catalog]]:
    return [
        (built, load_catalog(built.parent / "data", built.parent / "packets")),
        (repository_built, load_catalog(REPO / "data", REPO / "packets")),
    ]


def _arm(catalog: Catalog, family: str, packet_id: str, arm_id: str) -> tuple[Packet, float | None]:
    packet = catalog.packets[packet_id]
    assert packet.identity.model.slug == family, f"{packet_id} is not of {family}"
    return packet, packet.arm(arm_id).decode_tok_s


def _outside_links(verdict: Tag) -> str:
    return " ".join(
        str(node) for node in verdict.descendants if isinstance(node, NavigableString) and node.find_parent("a") is None
    )


@pytest.fixture(scope="module")
def verdicts(built: Path, repository_built: Path) -> list[tuple[str, Tag, Catalog]]:
    found = []
    for site, catalog in _catalogs(built, repository_built):
        for path in sorted(site.glob("models/*/index.html")):
            soup = BeautifulSoup(path.read_text(encoding="utf-8"), "lxml")
            verdict = soup.select_one("#verdict")
            if verdict is not None:
                found.append((path.parent.name, verdict, catalog))
    return found


def test_every_family_with_a_published_result_has_a_verdict(verdicts: list[tuple[str, Tag, Catalog]]) -> None:
    assert {family for family, _, _ in verdicts} >= {"fixture-7b", "qwen3.5-9b", "qwen3.5-4b", "demo"}


def test_every_number_is_a_link_holding_to_its_packet(verdicts: list[tuple[str, Tag, Catalog]]) -> None:
    checked = 0
    for family, verdict, catalog in verdicts:
        for link in verdict.select("a.figure"):
            attrs = {k: str(v) for k, v in link.attrs.items()}
            packet, centre = _arm(catalog, family, attrs["data-packet"], attrs["data-arm"])
            assert attrs["href"].endswith(f"packets/{packet.id}/index.html#arm-{attrs['data-arm']}")
            kind, text = attrs["data-kind"], link.get_text()
            if kind == "tok_s":
                assert centre is not None and text == fmt(centre), (family, text)
            elif kind == "ratio":
                _, over = _arm(catalog, family, attrs["data-over-packet"], attrs["data-over-arm"])
                assert centre and over and text == fmt(centre / over) + "×", (family, text)
            else:
                gates = packet.arm(attrs["data-arm"]).gates
                assert kind == "exact" and text in {f"{g.exact}/{g.total}" for g in gates if g.exact is not None}
            checked += 1
        assert not DECIMAL.search(_outside_links(verdict)), (family, _outside_links(verdict))
    assert checked >= 10


def test_numbers_outside_links_are_the_familys_own_counts(verdicts: list[tuple[str, Tag, Catalog]]) -> None:
    for family, verdict, catalog in verdicts:
        packets = [p for p in catalog.packets.values() if p.identity.model.slug == family]
        allowed = {a.config.spec_depth for p in packets for a in p.arms}
        allowed |= {a.config.tensor_parallel_size for p in packets for a in p.arms}
        allowed |= set(range(sum(len(p.arms) for p in packets) + 1))  # counts of its results
        text = _outside_links(verdict)
        words = {int(n) for n in INTEGER.findall(text) if not re.search(rf"[A-Za-z]{n}\b", text)}
        assert words <= allowed, (family, sorted(words - allowed), text)


def test_the_9b_verdict_says_what_the_seed_page_says(verdicts: list[tuple[str, Tag, Catalog]]) -> None:
    (verdict,) = [v for family, v, _ in verdicts if family == "qwen3.5-9b"]
    text = re.sub(r"\s+([,.;:)])", r"\1", " ".join(verdict.get_text(" ").split()))
    assert text.startswith("On one Intel Arc Pro B70, W4A16 with MTP depth 3 and the draft INT4 head is fastest")
    assert "113.27" in text and "1.76×" in text and "12/12" in text
    assert "Withheld by an identity gate not passed" in text and "8/12" in text
    assert "imported from neural.download model catalog" in text
