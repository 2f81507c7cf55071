"""The repository's own site never words an imported (or withheld) result as measured or verified.

The Qwen3.5 families hold only imported, screened and withheld packets; the demo family alone is
measured here. Each place a sceptic found the word "measured" or "verified" on an imported headline
is held to the state the result has; the demo's answer card to the command its servers ran."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag

from catalog.checks.selection import headline
from catalog.store.repository import load_catalog
from tests.builder.factory import REPO

IMPORTED_FAMILIES = ("qwen3.5-9b", "qwen3.5-4b")
WORDS = re.compile(r"\b(measured|verified)\b", re.I)


@cache
def _page(site: Path, path: str) -> BeautifulSoup:
    return BeautifulSoup((site / path).read_text(), "lxml")


def _text(tag: Tag | None) -> str:
    assert tag is not None
    return " ".join(tag.get_text(" ").split())


def _hero_state(soup: BeautifulSoup) -> str:
    badge = soup.select_one(".headline .headline-meta .badge")
    assert badge is not None
    (state,) = [c.removeprefix("badge-") for c in badge["class"] if c.startswith("badge-") and c != "badge"]
    return state


@pytest.mark.parametrize("slug", IMPORTED_FAMILIES)
def test_the_projection_names_an_imported_headline_by_its_state(repository_built: Path, slug: str) -> None:
    soup = _page(repository_built, f"models/{slug}/index.html")
    assert _hero_state(soup) == "imported"  # the case under test: an imported headline
    section = soup.select_one("#projection")
    assert section is not None
    gauge = section.select_one(".gauge > div")
    assert gauge is not None
    assert _text(gauge.select_one(".signal-title")) == "imported"
    value = gauge.select_one(".signal-value data.num")
    assert value is not None
    formula = _text(section.select_one(".projection > p.formula code"))
    assert f"; imported {value['value']} tok/s / " in formula
    assert "measured" not in formula
    assert "measured speed" not in _text(section.select_one(".section-lede"))
    assert "published speed" in _text(section.select_one(".section-lede"))
    header = [_text(th) for th in section.select(".ceiling-rows thead th")]
    states = {_text(b).lower() for b in section.select(".ceiling-rows tbody .badge")}
    assert states - {"measured"}, "the rows carry states other than measured"
    assert "measured" not in header and "decode tok/s" in header


def test_the_demo_projection_still_says_measured(repository_built: Path) -> None:
    soup = _page(repository_built, "models/demo/index.html")
    assert _hero_state(soup) == "measured"
    gauge = soup.select_one("#projection .gauge > div .signal-title")
    assert _text(gauge) == "measured"
    assert "; measured " in _text(soup.select_one("#projection .projection > p.formula code"))


@pytest.mark.parametrize("slug", IMPORTED_FAMILIES)
def test_a_family_page_never_calls_an_imported_headline_measured_or_verified(repository_built: Path, slug: str) -> None:
    soup = _page(repository_built, f"models/{slug}/index.html")
    assert _hero_state(soup) == "imported"
    fit = next(s for s in soup.select("#signals .signal") if _text(s.select_one(".signal-title")) == "Card fit")
    assert "Measured on" not in _text(fit) and "(measured)" not in _text(fit)
    assert "The imported headline ran on 1 card." in _text(fit.select_one(".signal-detail"))
    runs = soup.select(".run-this .run-title")
    assert runs
    for run in runs:
        assert "verified" not in _text(run)
    assert "fastest imported result for one user" in _text(runs[0])
    charts = soup.select_one("section#measured")  # the anchor other pages link to stays
    assert charts is not None
    heading = _text(charts.select_one("h2#measured-title"))
    assert not WORDS.search(heading), heading
    assert {r["class"][0] for r in charts.select("tr[class^=state-]")} - {"state-measured"}


def test_the_home_page_words_what_it_lists(repository_built: Path) -> None:
    soup = _page(repository_built, "index.html")
    for family in soup.select("li.family.state-imported"):
        facts = _text(family.select_one(".family-facts"))
        assert "measured on" not in facts and "results on" in facts
    answers = soup.select_one("#answers")
    assert answers is not None
    assert _text(answers.select_one("h2")) == "On your card: the fastest published result, and how to run it"
    assert "verified" not in _text(answers)
    for th in answers.select("thead th"):
        assert not WORDS.search(_text(th)), _text(th)
    rows = [tr for tr in answers.select("tbody tr") if tr.select_one('a[href^="models/"]')]
    assert rows
    imported = 0
    for tr in rows:
        (state,) = [c.removeprefix("state-") for c in tr["class"] if c.startswith("state-")]
        badge = tr.select_one(f".badge.badge-{state}")
        assert badge is not None and _text(badge).lower() == state, tr
        imported += state == "imported"
    assert imported >= len(IMPORTED_FAMILIES)
    empty = [_text(td) for td in answers.select("td[colspan]")]
    assert empty and all("published result" in t and "verified" not in t for t in empty)


def test_a_recipes_own_verified_is_quoted_as_its_word_for_a_card_without_a_result(repository_built: Path) -> None:
    """The Qwen3.5 recipes call the B60 and the B70 "verified"; the catalog holds results on the B70
    alone. The home page said "recipe verified on Intel Arc Pro B60, Intel Arc Pro B70", the site's
    own word for an output checked against the oracle, of a card with no packet."""
    soup = _page(repository_built, "index.html")
    for slug in IMPORTED_FAMILIES:
        link = soup.select_one(f'li.family h3 a[href="models/{slug}/index.html"]')
        family = link.find_parent("li") if link else None
        facts = _text(family.select_one(".family-facts") if family else None)
        assert "recipe verified" not in facts
        assert "results on Intel Arc Pro B70" in facts
        assert "no result on Intel Arc Pro B60, which its recipe calls “verified”" in facts
    b60 = _text(_page(repository_built, "hardware/arc_pro_b60/index.html").select_one("#recipes"))
    assert "Qwen3.5-9B · the recipe calls it “verified”" in b60, b60


def test_the_hardware_index_says_what_it_counts(repository_built: Path) -> None:
    header = [_text(th) for th in _page(repository_built, "hardware/index.html").select("thead th")]
    assert "model families measured" not in header
    assert "model families with results" in header


@pytest.mark.parametrize("slug", IMPORTED_FAMILIES)
def test_a_recipe_page_names_its_configurations_by_their_packets(repository_built: Path, slug: str) -> None:
    soup = _page(repository_built, f"recipes/{slug}/index.html")
    section = soup.select_one("#configurations")
    assert section is not None
    heading = _text(section.select_one("#configurations-title"))
    lede = _text(section.select_one(".section-lede"))
    assert not heading.startswith("Measured") and "imported" in heading
    assert "What the catalog's packets ran" not in lede and "imported" in lede
    assert "Measured results" not in _text(soup.select_one(".recipe-head .actions"))


def _tokens(text: str, env: dict[str, str]) -> list[str]:
    tokens = shlex.split(text.replace("\\\n", " "))
    while tokens and tokens[0].partition("=")[0] in env:
        tokens.pop(0)
    return tokens


def test_the_demo_answer_card_shows_the_command_its_servers_ran(repository_built: Path) -> None:
    soup = _page(repository_built, "models/demo/index.html")
    catalog = load_catalog(REPO / "data", REPO / "packets")
    runs = soup.select(".run-this")
    assert runs
    for run in runs:
        card = str(run["id"]).removeprefix("run-")
        href = run.select_one(".run-title a.run-arm")
        assert href is not None
        match = re.search(r"packets/([^/]+)/index\.html#arm-(.+)$", str(href["href"]))
        assert match is not None
        packet = catalog.packets[match[1]]
        config = next(a for a in packet.arms if a.id == match[2]).config
        env = dict(config.env)
        words = _text(run.select_one("p.muted.small"))
        local = _tokens(_text(run.select_one(f"#run-local-{card}")), env)
        launch = list(config.launch_argv)
        if "exactly what its servers ran" in words:
            assert local == (launch or list(config.argv)), "an 'exact' command that is not the one its servers ran"
        if launch and launch != local:
            # the portable form is named as such, and the exact launch command is beside it
            assert "portable" in words and "exactly what its servers ran" not in words
            shown = run.select_one(f"#run-launch-{card}") or run.select_one(f"#run-docker-{card}")
            assert shown is not None
            assert _tokens(shown.get_text(), env) == launch


def test_whole_numbers_and_error_bars_read_cleanly(repository_built: Path) -> None:
    for slug in IMPORTED_FAMILIES:
        soup = _page(repository_built, f"models/{slug}/index.html")
        facts = {_text(f.select_one("dt")): f.select_one("dd data.num") for f in soup.select("#projection .fact")}
        layers, cards = facts["decoder layers"], facts["cards (tensor parallel size)"]
        assert layers is not None and layers["value"] == "32"
        assert cards is not None and cards["value"] == "1"
    for path in repository_built.glob("models/*/index.html"):
        soup = _page(repository_built, str(path.relative_to(repository_built)))
        for script in soup.select('script[id^="chart-data-"]'):
            for trace in json.loads(script.get_text())["data"]:
                bars = trace.get("error_y") or {}
                for value in (*bars.get("array", ()), *bars.get("arrayminus", ())):
                    assert value >= 0 and str(value) != "-0.0", (path, trace.get("name"))
        for note in soup.select(".chart .note"):
            assert "unusable: level unusable" not in _text(note)


def test_a_gate_with_no_repeat_exact_oracle_is_not_called_failed(repository_built: Path) -> None:
    """qwen3.5-4b-fp8-dynamic-aabd651f: its oracle fails G1, so its MTP arm's G3 compared nothing.
    The scorecard cell, the packet page and the verdict say it was not passed, never that it failed."""
    family = _page(repository_built, "models/qwen3.5-4b/index.html")
    cells = [_text(cell) for cell in family.select(".scorecard td") if "G3 lossless" in cell.get_text()]
    assert cells and all("no repeat-exact oracle" in c and "G3 lossless: failed" not in c for c in cells), cells
    assert "Withheld by an identity gate not passed" in _text(family.select_one("main"))
    packet = _text(_page(repository_built, "packets/qwen3.5-4b-fp8-dynamic-aabd651f/index.html").select_one("main"))
    assert "G3 lossless: not passed: its oracle is not repeat-exact" in packet
    assert "G3 NOT PASSED: its oracle is not repeat-exact" in packet
    assert "G3 lossless: failed" not in packet and "G3 FAILED" not in packet


def test_a_one_point_ladder_and_one_token_read_as_such(repository_built: Path) -> None:
    """The demo's context ladder has one depth: its chip says `context 2K`, not `2K-2K`; its ceiling
    formula yields 1 token a step, not `1 tokens`."""
    (demo,) = [p.stem for p in (REPO / "packets").glob("demo-bf16-*.json") if not p.name.endswith(".dsse.json")]
    chips = _text(_page(repository_built, f"packets/{demo}/index.html").select_one("main"))
    assert "context 2K" in chips and "2K-2K" not in chips
    text = _text(_page(repository_built, "models/demo/index.html").select_one("main"))
    assert "1 token /" in text and "1 tokens" not in text


def test_a_screened_point_is_drawn_and_hovered_as_screened(repository_built: Path) -> None:
    """qwen3.5-9b's quantization chart joins imported points and the screened packet's MTP5/MTP6
    points in one series: each screened point has its own open square and says SCREENED on hover,
    and the chart's note says what the squares are."""
    page = _page(repository_built, "models/qwen3.5-9b/index.html")
    screened = 0
    for script in page.select("script[id^=chart-data-]"):
        for trace in json.loads(script.string or "")["data"]:
            hovers = trace.get("hovertext") or []
            symbols = trace.get("marker", {}).get("symbol")
            for k, hover in enumerate(hovers):
                if "SCREENED" in hover:
                    screened += 1
                    assert isinstance(symbols, list) and symbols[k] == "square-open", (trace["name"], hover)
                elif isinstance(symbols, list) and not trace["name"].startswith("withheld"):
                    assert symbols[k] == "circle", (trace["name"], hover)
    assert screened >= 2
    assert "Open squares are screened results" in _text(page.select_one("main"))


def test_a_withheld_arm_shows_no_figure_as_published(repository_built: Path) -> None:
    """qwen3.5-9b-fp8-dynamic-c48f580e's depth-4 arms are withheld: their servers' rates are struck
    as withheld, and the figure their source printed says it is not published."""
    page = _page(repository_built, "packets/qwen3.5-9b-fp8-dynamic-c48f580e/index.html")
    for arm in page.select("article.arm.state-withheld"):
        for summary in arm.select("details.server summary"):
            if "tok/s" in summary.get_text():
                assert summary.select_one(".withheld-value s") is not None, _text(summary)
        for fact in arm.select(".fact"):
            if "printed by the source" in fact.get_text():
                assert "withheld: not published" in _text(fact.select_one("dt"))
    assert page.select("article.arm.state-withheld")


def test_a_failed_gate_without_a_count_says_what_did_not_hold(repository_built: Path) -> None:
    """qwen3.5-4b-fp8-dynamic-aabd651f's oracle failed G1 with no count printed: the gate reads "not
    all token arrays identical", never the bare definition of a pass after FAILED."""
    text = _text(_page(repository_built, "packets/qwen3.5-4b-fp8-dynamic-aabd651f/index.html").select_one("main"))
    assert "G1 FAILED (count not published): not all token arrays identical" in text
    assert "FAILED (count not published): token arrays identical" not in text


def test_every_copy_button_waits_for_the_script(repository_built: Path) -> None:
    """The recipe guides' code blocks too: no copy button is shown before site.js shows it."""
    for path in ("recipes/qwen3.5-9b/index.html", "recipes/demo/index.html", "models/demo/index.html"):
        buttons = _page(repository_built, path).select("button.copy")
        assert buttons and all(b.has_attr("hidden") for b in buttons), path


def test_a_withheld_badge_of_an_imported_arm_never_says_measured(repository_built: Path) -> None:
    """Every arm withheld on the committed site is imported: its badge's tooltip (the state's one
    meaning, catalog/model/packet.py) says which gate did not hold, never that it was measured."""
    catalog = load_catalog(REPO / "data", REPO / "packets")
    imported = [
        p
        for p in catalog.packets.values()
        if p.provenance.kind != "measured" and any(a.state.value == "withheld" for a in p.arms)
    ]
    assert imported  # the case under test
    pages = [f"packets/{p.id}/index.html" for p in imported]
    pages += sorted({f"models/{p.identity.model.slug}/index.html" for p in imported})
    for path in pages:
        titles = [str(b["title"]) for b in _page(repository_built, path).select("span.badge-withheld[title]")]
        assert titles, path
        for title in titles:
            assert not re.search(r"\bmeasured\b", title, re.I), (path, title)
            assert "identity gate was not passed" in title, (path, title)


def _keys_beside_a_state(value: object) -> Iterator[tuple[str, set[str]]]:
    """(state, keys) of every object of an API file that carries a state beside its figures."""
    if isinstance(value, dict):
        state = value.get("state_word", value.get("state"))
        if isinstance(state, str):
            yield state, set(value)
        for item in value.values():
            yield from _keys_beside_a_state(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys_beside_a_state(item)


@pytest.mark.parametrize("slug", IMPORTED_FAMILIES)
def test_the_family_api_names_an_imported_figure_value_not_measured(repository_built: Path, slug: str) -> None:
    """api/models/<slug>.json (api_version 2): the projection's figure and its rows' are `value`
    beside their state; version 1 stored an imported figure under `measured`."""
    document = json.loads((repository_built / f"api/models/{slug}.json").read_text())
    assert document["api_version"] == 2
    projection = document["family"]["projection"]
    assert projection["state_word"] == "imported" and projection["value"] is not None
    gauge = _page(repository_built, f"models/{slug}/index.html").select_one("#projection .gauge .signal-value data.num")
    assert gauge is not None and float(str(gauge["value"])) == projection["value"]
    rows = [r for r in projection["rows"] if r["value"] is not None]
    assert {r["state"] for r in rows} - {"measured"}
    found = list(_keys_beside_a_state(document))
    assert found
    for state, keys in found:
        assert "measured" not in keys, (state, sorted(keys))


def test_an_imported_headlines_ttft_is_named_by_its_state(repository_built: Path) -> None:
    """qwen3.5-4b's headline is imported with the TTFT its source printed: the projection's time to
    first token names it `imported TTFT`, never `measured TTFT`."""
    soup = _page(repository_built, "models/qwen3.5-4b/index.html")
    assert _hero_state(soup) == "imported"
    heading = next(h for h in soup.select("#projection h4") if _text(h) == "Time to first token")
    facts = heading.find_next_sibling("dl")
    assert isinstance(facts, Tag)
    labels = [_text(dt) for dt in facts.select("dt")]
    assert "imported TTFT" in labels, labels
    assert not any(WORDS.search(label) for label in labels), labels


def _jsonld(site: Path, slug: str) -> dict[str, object]:
    script = _page(site, f"models/{slug}/index.html").find("script", type="application/ld+json")
    assert isinstance(script, Tag)
    data: dict[str, object] = json.loads(script.get_text())
    return data


@pytest.mark.parametrize("slug", ("qwen3.5-9b", "qwen3.5-4b", "demo"))
def test_the_jsonld_says_only_what_the_familys_packets_hold(repository_built: Path, slug: str) -> None:
    """A family page's Dataset claimed fresh-server pairs with token-exact oracle gates, TTFT and
    aggregate tok/s of every family, qwen3.5-9b's imported and screened figures too. Its variables
    and techniques are now those its packets hold: each checked against the packets here."""
    catalog = load_catalog(REPO / "data", REPO / "packets")
    packets = [p for p in catalog.packets.values() if p.identity.model.slug == slug]
    data = _jsonld(repository_built, slug)
    assert sorted(data["isBasedOn"]) == sorted(p.id for p in packets)  # type: ignore[call-overload]
    shown = [(p, a) for p in packets for a in p.arms if a.state.has_speed]
    variables = data["variableMeasured"]
    assert isinstance(variables, list)
    assert ("time to first token (ms)" in variables) == any(a.ttft_ms is not None for _, a in shown)
    assert ("aggregate tokens per second" in variables) == any(
        any(ladder.arm == a.id and ladder.kind in ("concurrency", "load") for ladder in p.ladders) for p, a in shown
    )
    techniques = data["measurementTechnique"]
    assert isinstance(techniques, list)
    kinds = {p.provenance.kind for p in packets}
    assert len(techniques) == len(kinds)
    for kind in ("measured", "imported", "screened"):
        line = next((t for t in techniques if kind in t.split(";")[0]), None)
        assert (line is not None) == (kind in kinds), (kind, techniques)
        if line is None:
            continue
        assert ("this catalog's runner" in line) == (kind == "measured"), line
        gates = {g.gate for p in packets if p.provenance.kind == kind for a in p.arms for g in a.gates}
        assert {g for g in ("G1", "G2", "G3") if f"{g} " in line} == gates, line
    if "measured" not in kinds:
        assert "fresh-server" not in json.dumps(data) and "runner" not in json.dumps(data)


def test_the_home_page_claims_no_gate_a_headline_does_not_carry(repository_built: Path) -> None:
    """The home page's lede said every headline "passed every identity gate"; an imported headline
    carries only the gates its source printed (an MTP arm: G3, no G2). The sentence says what every
    headline holds: each gate it carries passed, whoever's gates they are."""
    catalog = load_catalog(REPO / "data", REPO / "packets")
    carried: dict[str, set[str]] = {}
    for family in catalog.by_family:
        lead = headline(catalog.packets_of(family))
        if lead is not None:
            carried[family] = {g.gate for g in lead.arm.gates}
            assert all(g.passed for g in lead.arm.gates)
    assert any(gates != {"G1", "G2", "G3"} for gates in carried.values())  # the case under test
    lede = _text(_page(repository_built, "index.html").select_one("p.lede"))
    claim = re.search(r"every identity gate(?: it carries)?", lede)
    assert claim is not None and claim.group(0) == "every identity gate it carries", lede
    assert "its named source printed" in lede
    for family in carried:
        rule = _text(_page(repository_built, f"models/{family}/index.html").select_one(".headline p.rule"))
        assert "passed every gate it carries" in rule, rule


def test_hand_typed_data_text_never_calls_an_imported_result_measured(repository_built: Path) -> None:
    """data/hardware.yaml's B70 notes said "the seed Qwen3.5 4B and 9B measurements", and the 9B
    overlay "measured on one Arc Pro B70" and "the seed page's headline": every result on those
    pages is imported. The texts the pages show as written (the card's notes, a variant's and a
    configuration's description) name the source instead, and never say measured or verified."""
    catalog = load_catalog(REPO / "data", REPO / "packets")
    on_b70 = [p for p in catalog.packets.values() if p.identity.host.hardware == "arc_pro_b70"]
    assert on_b70 and all(p.provenance.kind != "measured" for p in on_b70)  # the case under test
    hardware = _page(repository_built, "hardware/arc_pro_b70/index.html")
    notes = catalog.hardware["arc_pro_b70"].notes
    assert notes
    lede = next(_text(p) for p in hardware.select("p.lede") if notes[:40] in _text(p))
    assert not WORDS.search(lede) and "seed" not in lede, lede
    assert "neural.download model catalog" in lede
    for slug in IMPORTED_FAMILIES:
        recipe = catalog.recipes[slug]
        soup = _page(repository_built, f"recipes/{slug}/index.html")
        text = _text(soup.select_one("main"))
        written = [v.description for v in recipe.variants.values() if v.description]
        written += [c.description for c in recipe.configurations.values() if c.description]
        shown = [" ".join(w.split()) for w in written if " ".join(w.split()) in text]
        assert shown, slug
        for words in shown:
            assert not WORDS.search(words) and "seed page" not in words, (slug, words)


def test_a_packet_is_named_from_its_arms_and_its_signers_title_quoted_as_theirs(repository_built: Path) -> None:
    """The imported 9B FP8 packet's signer titled it "one or two B70 · MTP depth 0-6, draft FP8 and
    INT4 heads" (the source page's words): its arms hold depths 0, 3 and 4 and only the INT4 head.
    The site's heading, page title and family table say what the arms hold; the title is quoted."""
    packet_id = "qwen3.5-9b-fp8-dynamic-c48f580e"
    arms = "no speculation, MTP depths 3 and 4, draft INT4 head"
    made = f"Qwen3.5-9B FP8-dynamic · Intel Arc Pro B70 · 1 and 2 cards · {arms}"
    soup = _page(repository_built, f"packets/{packet_id}/index.html")
    assert _text(soup.select_one("h1")) == made
    assert _text(soup.select_one("title")).startswith(made)
    signed = _text(soup.select_one(".signed-title q"))
    assert "MTP depth 0-6, draft FP8 and INT4 heads" in signed
    family = _page(repository_built, "models/qwen3.5-9b/index.html")
    row = family.find(id=f"packet-{packet_id}")
    assert isinstance(row, Tag)
    assert _text(row.select_one("td.packet-title .muted")) == made
    assert "depth 0-6" not in _text(family.select_one("table.packet-list"))


def test_every_hover_on_an_imported_family_names_its_source(repository_built: Path) -> None:
    """The Qwen3.5 families hold no result measured here: every chart point's hover, withheld and
    screened ones included, names the source it was taken from and never calls its two values
    this runner's fresh servers."""
    for family in IMPORTED_FAMILIES:
        page = _page(repository_built, f"models/{family}/index.html")
        hovers = [
            hover
            for script in page.select("script[id^=chart-data-]")
            for trace in json.loads(script.string or "")["data"]
            for hover in trace.get("hovertext") or []
        ]
        assert hovers, family
        for hover in hovers:
            assert "from neural.download model catalog, not measured here" in hover, (family, hover)
            assert "(fresh servers)" not in hover, (family, hover)


def test_an_imported_scorecard_range_is_its_sources_servers(repository_built: Path) -> None:
    """A scorecard cell's range (span.range) names what it spans: on the imported families the two
    servers the source printed, never this runner's fresh servers."""
    for family in IMPORTED_FAMILIES:
        titles = [
            str(span.get("title"))
            for span in _page(repository_built, f"models/{family}/index.html").select(".scorecard span.range")
        ]
        assert titles, family
        assert all(t == "the two servers neural.download model catalog printed" for t in titles), set(titles)
