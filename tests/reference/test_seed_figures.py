"""The imported packets carry every figure the two seed pages print, exactly as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from catalog.model.packet import Packet, State
from catalog.packets.layout import is_signature, signature_path
from catalog.store.repository import load_catalog
from runner.import_reference import import_transcription
from tests.catalog.factories import test_key as throwaway_key

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "fixtures" / "seeds"
# The committed packets sealed from data/imports/neural-download.yaml (ids are the digests of their
# bytes): four imported ones and, beside the 9B FP8 one, the screened packet of its arms whose
# identity outcome the page did not print (identity_published: false).
IMPORTED_IDS = {
    "qwen3.5-4b-fp8-dynamic-aabd651f",
    "qwen3.5-4b-w4a16-c23911f1",
    "qwen3.5-9b-fp8-dynamic-c48f580e",
    "qwen3.5-9b-fp8-dynamic-92dc20d8",
    "qwen3.5-9b-w4a16-8c08b0d2",
}


@pytest.fixture(scope="module")
def packets() -> list[Packet]:
    return list(load_catalog(ROOT / "data", ROOT / "packets").packets.values())


def _imported(packets: list[Packet], slug: str) -> list[Packet]:
    return [p for p in packets if p.identity.model.slug == slug and p.provenance.kind == "imported"]


def _transcribed(packets: list[Packet], slug: str) -> list[Packet]:
    """Imported packets and the screened, speed-only ones sealed beside them from the same page."""
    return [
        p
        for p in packets
        if p.identity.model.slug == slug
        and p.provenance.kind in ("imported", "screened")
        and p.provenance.source is not None
        and p.provenance.source.name == "neural.download model catalog"
    ]


def _server_pairs(packets: list[Packet]) -> set[tuple[float, ...]]:
    return {tuple(sorted(a.server_values)) for p in packets for a in p.arms if a.server_values}


def test_every_chart_pair_of_the_9b_page_is_an_arm_pair(packets: list[Packet]) -> None:
    text = (SEEDS / "qwen3.5-9b-page.txt").read_text()
    pairs = {tuple(sorted(map(float, m))) for m in re.findall(r"values=([\d.]+), ([\d.]+) tok/s", text)}
    assert len(pairs) >= 10
    assert pairs <= _server_pairs(_transcribed(packets, "qwen3.5-9b"))


def test_every_scorecard_cell_of_both_pages_is_a_published_figure(packets: list[Packet]) -> None:
    for slug, page in (("qwen3.5-9b", "qwen3.5-9b-page.txt"), ("qwen3.5-4b", "qwen3.5-4b-page.txt")):
        text = (SEEDS / page).read_text()
        cells = {float(v) for v in re.findall(r"(?:TP\d·MTP\d|MTP\d·(?:FP8-dynamic|W4A16))([\d.]+) tok/s", text)}
        assert cells, page
        figures = {a.published_figure for p in _transcribed(packets, slug) for a in p.arms}
        assert cells <= figures, cells - figures


def test_4b_ranges_and_ttft_match_the_page(packets: list[Packet]) -> None:
    text = (SEEDS / "qwen3.5-4b-page.txt").read_text()
    ranges = re.findall(r"MTP depth (\d)([\d.]+)–([\d.]+)tok/sDecode([\d.]+)–([\d.]+)msTTFT", text)
    assert len(ranges) == 2
    (packet,) = [p for p in _imported(packets, "qwen3.5-4b") if p.state == State.IMPORTED]
    for depth, low, high, ttft_low, ttft_high in ranges:
        (arm,) = [a for a in packet.arms if a.config.spec_depth == int(depth)]
        assert (f"{min(arm.server_values):.2f}", f"{max(arm.server_values):.2f}") == (low, high)
        assert sorted(arm.published_ttft_ms) == [float(ttft_low), float(ttft_high)]


def test_headline_centres_match_the_pages(packets: list[Packet]) -> None:
    from catalog.checks.selection import headline

    for slug, page in (("qwen3.5-9b", "qwen3.5-9b-page.txt"), ("qwen3.5-4b", "qwen3.5-4b-page.txt")):
        printed = re.search(r"\n([\d.]+)tok/s\nmeasured", (SEEDS / page).read_text())
        assert printed is not None
        chosen = headline(_imported(packets, slug))
        assert chosen is not None
        assert f"{chosen.decode_tok_s:.2f}" == printed.group(1)


def test_withheld_results_stay_withheld(packets: list[Packet]) -> None:
    nine = _transcribed(packets, "qwen3.5-9b")
    deep = [a for p in nine for a in p.arms if a.config.spec_depth >= 4]
    # never published as measured: withheld where the page printed an outcome, screened (speed only,
    # identity not published) where it printed none (depths 5 and 6 of the 9B FP8 page)
    assert deep and all(a.state in (State.WITHHELD, State.SCREENED) for a in deep)
    assert {a.config.spec_depth for a in deep if a.state == State.SCREENED} == {5, 6}
    # the one printed count, 8/12, stays on depth 4 and is borrowed by no other depth
    counted = {(a.config.spec_depth, g.exact, g.total) for a in deep for g in a.gates if g.exact is not None}
    assert counted == {(4, 8, 12)}
    fp8_4b = [p for p in _imported(packets, "qwen3.5-4b") if p.identity.model.quantization == "fp8-dynamic"]
    assert [p.state for p in fp8_4b] == [State.WITHHELD]


def test_transcription_re_seals_to_the_committed_packets(tmp_path: Path) -> None:
    """The packet bytes (so the ids) do not depend on the key: sealed with a throwaway importer key,
    the transcription gives the committed files byte for byte; those carry the project's signature."""
    written = import_transcription(
        ROOT / "data" / "imports" / "neural-download.yaml", tmp_path, throwaway_key("importer")
    )
    assert {p.id for p in written} == IMPORTED_IDS
    committed = {p.name for p in (ROOT / "packets").glob("*.json") if not is_signature(p)}
    assert {f"{p.id}.json" for p in written} <= committed
    for packet in written:
        path = ROOT / "packets" / f"{packet.id}.json"
        assert (tmp_path / path.name).read_bytes() == path.read_bytes()
        assert signature_path(path).is_file()
