"""Packet, recipe, index, hardware and methodology pages; the API, sitemap and 404."""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from bs4 import BeautifulSoup

from builder import routes
from builder.views.recipe import DEPTHS, GENERIC, TP_SIZES, spec_depth, with_depth
from catalog.packets.layout import is_signature
from catalog.packets.verify import read_packet
from catalog.recipes.compose import Selection, compose
from catalog.store.repository import load_catalog


def _catalog(built: Path):
    return load_catalog(built.parent / "data", built.parent / "packets")


def _measured_id(built: Path) -> str:
    return next(p.id for p in _catalog(built).packets.values() if p.provenance.kind == "measured")  # type: ignore[no-any-return]


def test_packet_page_shows_rows_gates_and_reproduce(built, page):
    packet_id = _measured_id(built)
    # the site's copy, checked with the signature copied beside it
    packet = read_packet(built / "packets" / f"{packet_id}.json", _catalog(built).keys)
    soup = page(f"packets/{packet_id}/index.html")
    for arm in packet.arms:
        section = soup.select_one(f"#arm-{arm.id}")
        assert section is not None
        tables = section.select("table.rows")
        assert len(tables) == len(arm.servers)
        for table, server in zip(tables, arm.servers, strict=True):
            body = table.select("tbody tr")
            assert [r.find("td").get_text() for r in body] == [row.prompt_id for row in server.rows]
            first = body[0].find_all("td")
            assert first[6].get_text() == "length" and first[7].get_text() == "0"
        command = section.select_one(f"#cmd-{arm.id}").get_text()
        assert shlex.split(command.replace("\\\n", " ")) == arm.config.argv  # one flag per line, the same tokens
        assert section.select_one(f"#env-{arm.id}") is None  # the arm sets no variable
    withheld = soup.select_one("#arm-tp1-ngram5")
    assert "state-withheld" in withheld["class"]
    assert withheld.select_one(".arm-value") is None
    assert "first divergence" in withheld.get_text()
    divergence = [td.get_text() for td in withheld.select("tr.fail td.mono")]
    failed = next(g for g in packet.arm("tp1-ngram5").gates if not g.passed)
    sides = [f"({d.token} ≠ {d.other})" for d in failed.divergences if d is not None]  # the tokens on both sides
    assert divergence[0] == (
        f"ops-incident-retro @ 50 {sides[0]}; code-review-python @ 50 {sides[1]}; prose-decision-memo @ 50 {sides[2]}; "
        f"analysis-ab-test-readout @ 50 {sides[3]} (8 identical)"
    )
    profile = withheld.select_one(".divergence-profile").get_text()
    assert "4 of 12 prompts part, first at token 50, median 50." in profile
    passed = [td.get_text() for td in soup.select("#arm-tp1-ngram3 tr.pass td.mono")]
    assert set(passed) == {"identical on all 12"}
    reproduce = [pre.get_text() for pre in soup.select("#reproduce pre")]
    assert reproduce[0] == f"make reproduce PACKET={packet_id}"
    # one line per card count, with the docker runtime the runner serves an XPU packet with
    assert (
        "make measure MODEL=fixture-7b VARIANT=int4 HW=arc_pro_b70 TP=1 DEPTHS=0,3,5 LADDERS=concurrency,context"
        " RUNTIME=docker" in reproduce
    )
    assert (
        "make measure MODEL=fixture-7b VARIANT=int4 HW=arc_pro_b70 TP=2 DEPTHS=0 LADDERS=concurrency,context"
        " RUNTIME=docker" in reproduce
    )


def test_raw_packet_json_is_copied_verbatim(built):
    """Packets and the signatures beside them, byte for byte."""
    source = built.parent / "packets"
    signatures = [path for path in source.glob("*.json") if is_signature(path)]
    assert len(signatures) == len(list(source.glob("*.json"))) - len(signatures) == 2
    for path in source.glob("*.json"):
        assert (built / "packets" / path.name).read_bytes() == path.read_bytes()
        if not is_signature(path):
            assert "token_ids" in path.read_text() or "imported" in path.read_text()


def test_imported_packet_is_labelled(built, page):
    packet_id = next(p.id for p in _catalog(built).packets.values() if p.provenance.kind == "imported")
    soup = page(f"packets/{packet_id}/index.html")
    assert "Imported — not measured by this runner" in soup.select_one(".imported-banner").get_text()
    provenance = soup.select_one("#provenance").get_text()
    assert "https://example.org/post" in provenance and "post-1" in provenance


def test_recipe_commands_are_compose_output(built, page):
    catalog = _catalog(built)
    recipe = catalog.recipes["fixture-7b"]
    soup = page("recipes/fixture-7b/index.html")
    blob = json.loads(soup.select_one("#recipe-commands").string)
    assert blob["features"] == list(recipe.features)
    hardware_ids = [GENERIC, "arc_pro_b70", "h100_sxm"]
    # one command per variant x card x feature set x TP size; the depth is a slot, not a multiple
    assert len(blob["commands"]) == len(recipe.variants) * len(hardware_ids) * 2 ** len(recipe.features) * len(TP_SIZES)
    slot = blob["depth_slot"]
    with_spec = 0

    def text(ids: list[int], depth: int) -> str:
        # what the page script does: a command is the indices of its pieces (its lines, shell and
        # docker alike); join them by newlines and put the chosen depth into the slot
        return "\n".join(blob["pieces"][i] for i in ids).replace(slot, str(depth))

    for key, (shell, docker, has_depth) in blob["commands"].items():
        variant, hw, bits, tp = key.split("|")
        features = [name for name, bit in zip(blob["features"], bits, strict=True) if bit == "1"]
        selection = Selection(
            variant=variant, hardware=catalog.hardware.get(hw), features=features, tensor_parallel_size=int(tp)
        )
        command = compose(recipe, selection)
        assert bool(has_depth) == (spec_depth(command.args) is not None)
        with_spec += bool(has_depth)
        for depth in DEPTHS if has_depth else [0]:
            expected = replace(command, args=with_depth(command.args, depth)) if has_depth else command
            assert text(shell, depth) == expected.shell_multiline()
            assert (text(docker, depth) if docker is not None else None) == expected.docker_multiline()
            if int(tp) > 1:
                assert f"--tensor-parallel-size {tp}" in text(shell, depth)
    assert with_spec  # the fixture's ngram feature gives some commands a depth
    # every variant x hardware is also plain text, default features
    details = soup.select("#all-commands details")
    assert len(details) == len(recipe.variants) * len(hardware_ids)
    xpu = compose(recipe, Selection(variant="int4", hardware=catalog.hardware["arc_pro_b70"]))
    texts = [pre.get_text() for pre in soup.select("#all-commands pre")]
    assert xpu.shell_multiline() in texts and xpu.docker_multiline() in texts
    assert "--device /dev/dri" in xpu.docker_shell()  # type: ignore[operator]
    unknown = soup.select_one("#builder").get_text()
    assert "imaginary_card" in unknown


def test_recipe_builder_default_matches_first_combination(built, page):
    catalog = _catalog(built)
    recipe = catalog.recipes["fixture-7b"]
    soup = page("recipes/fixture-7b/index.html")
    first = compose(recipe, Selection(variant=next(iter(recipe.variants))))
    assert soup.select_one("#builder-shell").get_text() == first.shell_multiline()
    checked = [box["value"] for box in soup.select("input[name=feature][checked]")]
    assert checked == recipe.default_features()


def test_recipe_guide_headings_nest_under_guide(page):
    guide = page("recipes/fixture-7b/index.html").select_one("#guide")
    assert guide.find("h3").get_text() == "Overview"
    assert guide.find("h2").get_text() == "Guide"


def test_index_lists_every_family_with_filter_data(built, page):
    soup = page("index.html")
    families = soup.select("[data-family-list] > li")
    assert [f.select_one("h3").get_text() for f in families] == ["Fixture 7B", "Empty 1B"]  # fastest first
    fixture = families[0]
    assert fixture["data-hw"].split() == ["arc_pro_b70", "h100_sxm"]
    assert set(fixture["data-quant"].split()) == {"bf16", "w4a16"}
    assert set(fixture["data-spec"].split()) == {"ngram", "none"}
    assert fixture["data-state"] == "measured" and fixture["data-grade"] == "B"
    api = json.loads((built / "api/models.json").read_text())
    assert str(api["models"][0]["headline"]) == fixture["data-speed"]
    names = {s["name"] for s in soup.select("form[data-filters] select")}
    assert names == {"hw", "quant", "spec", "grade", "state", "sort"}


def test_hardware_page_lists_sources_and_one_row_per_family(built, page):
    soup = page("hardware/arc_pro_b70/index.html")
    specs = soup.select_one("#specs").get_text()
    assert "608" in specs and "Intel Arc Pro B70 product specifications" in specs
    rows = soup.select("#results tbody tr")
    on_card = [p for p in _catalog(built).packets.values() if p.identity.host.hardware == "arc_pro_b70"]
    assert {p.identity.model.slug for p in on_card} == {"fixture-7b"} and len(on_card) == 2
    assert len(rows) == 1  # one family, however many packets
    cells = rows[0].find_all("td")
    assert cells[0].a["href"] == "../../models/fixture-7b/index.html"
    assert cells[5].data["value"] == "2"  # its packets on this card
    # the figure is the index's pick for this card, linked to the same packet arm
    family = next(li for li in page("index.html").select("[data-family-list] > li") if li.h3.get_text() == "Fixture 7B")
    chosen = family.select_one(f'.pick[data-pick="{json.loads(family["data-picks"])["arc_pro_b70||"]}"]')
    assert cells[1].data["value"] == chosen.select_one(".family-value data")["value"]
    assert cells[6].a["href"] == "../../" + chosen.select_one("a")["href"]
    assert cells[6].a["href"].startswith("../../packets/fixture-7b-")


def test_hardware_index_counts_families_and_packets_per_card(page):
    rows = {tr.td.get_text(): tr.find_all("td") for tr in page("hardware/index.html").select("tbody tr")}
    assert [c.data["value"] for c in rows["Intel Arc Pro B70"][5:]] == ["1", "2"]
    assert [c.data["value"] for c in rows["NVIDIA H100 SXM"][5:]] == ["0", "0"]
    assert rows["Intel Arc Pro B70"][0].a["href"] == "../hardware/arc_pro_b70/index.html"


def test_methodology_renders_the_code_docstrings(page):
    import catalog.checks.grade
    import catalog.checks.selection
    import catalog.model.metrics

    soup = page("methodology/index.html")
    text = soup.get_text(" ")
    for module, section in (
        (catalog.model.metrics, "metrics-rule"),
        (catalog.checks.grade, "grade-rule"),
        (catalog.checks.selection, "headline"),
    ):
        first_line = module.__doc__.strip().splitlines()[0]  # type: ignore[union-attr]
        assert first_line.split(":")[0] in soup.select_one(f"section#{section}").get_text(" ")
    assert "TPOT" in text and "ITL" in text
    assert soup.select_one("#words data.num")["value"] == "0.75"


def test_sitemap_lists_every_page_and_404_exists(built):
    tree = ET.parse(built / "sitemap.xml")
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = {e.text for e in tree.getroot().findall("s:url/s:loc", ns)}
    pages = {p.relative_to(built).as_posix() for p in built.rglob("index.html")}
    assert locs == pages
    assert (built / "404.html").exists()


def test_base_url_makes_absolute_links(tmp_path):
    from builder.cli import run
    from tests.builder.factory import write_catalog

    data, packets = write_catalog(tmp_path)
    out = tmp_path / "site"
    assert (
        run(
            [
                "build",
                "--data",
                str(data),
                "--packets",
                str(packets),
                "--out",
                str(out),
                "--base-url",
                "https://catalog.example/",
            ]
        )
        == 0
    )
    assert "<loc>https://catalog.example/index.html</loc>" in (out / "sitemap.xml").read_text()
    assert (
        'property="og:url" content="https://catalog.example/models/fixture-7b/index.html"'
        in (out / "models/fixture-7b/index.html").read_text()
    )


def test_no_page_has_duplicate_ids(built):
    from bs4 import BeautifulSoup

    for path in built.rglob("*.html"):
        ids = [el["id"] for el in BeautifulSoup(path.read_text(), "lxml").select("[id]")]
        assert len(ids) == len(set(ids)), (path, sorted({i for i in ids if ids.count(i) > 1}))


def test_every_relative_link_resolves(built):
    from functools import cache

    from bs4 import BeautifulSoup

    @cache
    def ids_of(page: Path) -> set[str]:
        return {str(e["id"]) for e in BeautifulSoup(page.read_text(), "lxml").select("[id]")}

    for path in built.rglob("*.html"):
        soup = BeautifulSoup(path.read_text(), "lxml")
        for el in soup.select("[href], [src]"):
            target = el.get("href") or el.get("src")
            if target.startswith(("http://", "https://", "mailto:", "#")) or path.name == "404.html":  # type: ignore[union-attr]
                continue
            file_part, _, anchor = target.partition("#")  # type: ignore[union-attr]
            resolved = (path.parent / file_part).resolve()
            assert resolved.exists(), (path, target)
            if anchor and resolved.suffix == ".html":
                assert anchor in ids_of(resolved), (path, target)


def test_no_page_skips_a_heading_level_and_the_index_lists_families_under_its_own_heading(built, page):
    """Screen readers navigate by heading level: a family's card is an h3 under "Every model family"
    (an h2), never a sibling of it, and no page jumps from one level to two below it."""
    for path in sorted(built.rglob("*.html")):
        levels = [int(h.name[1]) for h in page(path.relative_to(built).as_posix()).find_all(HEADINGS)]
        jumps = [(a, b) for a, b in zip([0, *levels], levels, strict=False) if b > a + 1]
        assert not jumps, (path.relative_to(built).as_posix(), jumps)
    index = page("index.html")
    listed = index.select("[data-family-list] > li")
    assert listed and all(li.find(HEADINGS).name == "h3" for li in listed)
    assert index.select_one("#families").name == "h2"


HEADINGS = ["h1", "h2", "h3", "h4", "h5", "h6"]


def test_a_filter_page_answers_for_its_card_and_never_under_a_quantization(built, page):
    """A card's answer is its fastest result of any quantization: a card's page keeps its own, a
    quantization's page shows none (it would answer another question), as site.js does."""
    index = {str(a["data-answer-hw"]) for a in page("index.html").select("[data-answer-hw]")}
    assert index
    for card in index:
        shown = page(routes.filtered_index("hw", card)).select("[data-answer-hw]")
        assert [str(a["data-answer-hw"]) for a in shown] == [card]
    quantized = sorted(built.glob(f"{routes.FILTER_FOLDER}/quant/*/index.html"))
    assert quantized
    for path in quantized:
        soup = page(path.relative_to(built).as_posix())
        assert not soup.select("[data-answer-hw]") and soup.select_one("#answers") is None


def test_a_many_users_figure_from_another_arm_names_its_configuration(repository_built):
    """The index's answer names the one-user result's configuration; a many-users figure measured on
    another arm (the demo's best 2-user figure is its ngram arm's) names its own beside it."""
    index = BeautifulSoup((repository_built / "index.html").read_text(encoding="utf-8"), "lxml")
    named = 0
    for row in index.select("#answers tbody tr"):
        cells = row.find_all("td")
        if len(cells) < 4 or not cells[3].find("a"):
            continue
        one_user = cells[1].find("a")
        assert one_user is not None
        one_arm = str(one_user["href"]).partition("#")[2]
        for entry in str(cells[3].decode_contents()).split("; "):  # one entry a user count
            part = BeautifulSoup(entry, "lxml")
            link = part.find("a")
            assert link is not None
            other = str(link["href"]).partition("#")[2] != one_arm
            assert (part.select_one(".users-config") is not None) == other, (one_arm, entry)
            named += other
    assert named, "the committed demo packet's best 2-user figure is its ngram arm's"
