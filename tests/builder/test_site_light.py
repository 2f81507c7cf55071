"""Charts that do not mislead and pages that stay light: a numeric depth axis, no empty chart box,
no chart twice on a page, withheld markers never on top of a published point, the numbers table
open without JavaScript, the vendored partial Plotly bundle pinned by hash, every page's HTML
under 100 KB (on the fixture catalog and on the repository's own data and packets)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import plotly.offline
import pytest
from bs4 import BeautifulSoup

from builder.charts import Point, chart, distinct

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / "templates" / "assets" / "vendor"
FAMILY = "models/fixture-7b/index.html"
HTML_LIMIT = 100 * 1024


@pytest.fixture(scope="module")
def repository_site(repository_built: Path) -> dict[str, bytes]:
    """The pages of the site the repository's own data/ and packets/ build."""
    return {
        path.relative_to(repository_built).as_posix(): path.read_bytes() for path in repository_built.rglob("*.html")
    }


def _figures(soup: BeautifulSoup) -> dict[str, dict]:  # type: ignore[type-arg]
    return {
        node["id"].removeprefix("chart-data-"): json.loads(node.string)  # type: ignore[arg-type, union-attr]
        for node in soup.select('script[type="application/json"][id^="chart-data-"]')
    }


def _drawn(figure: dict) -> list[tuple[float, float]]:  # type: ignore[type-arg]
    return sorted((x, y) for trace in figure["data"] for x, y in zip(trace["x"], trace["y"], strict=True))


def _family_pages(site: dict[str, bytes]) -> dict[str, BeautifulSoup]:
    return {p: BeautifulSoup(c, "lxml") for p, c in site.items() if re.fullmatch(r"models/[^/]+/index\.html", p)}


# ---- the vendored bundle ----


def test_vendored_plotly_bundle_matches_its_readme_hash_and_the_python_package():
    readme = (VENDOR / "README.md").read_text(encoding="utf-8")
    row = re.search(r"\| `plotly-basic\.min\.js` \|[^|]*\| (\S+) \| `([0-9a-f]{64})` \|", readme)
    assert row, "README.md names the bundle's version and sha256"
    version, digest = row.groups()
    content = (VENDOR / "plotly-basic.min.js").read_bytes()
    assert hashlib.sha256(content).hexdigest() == digest
    assert f"plotly.js (basic - minified) v{version}".encode() in content[:200]
    # the figures builder/charts.py serialises are for the plotly.js the Python package pins
    assert version == plotly.offline.get_plotlyjs_version()


def test_family_page_never_loads_the_full_bundle(built):
    assert not (built / "assets/plotly.min.js").exists()
    soup = BeautifulSoup((built / FAMILY).read_text(), "lxml")
    sources = [s.get("src", "") for s in soup.find_all("script")]
    assert not any("plotly" in s for s in sources)  # type: ignore[operator]  # fetched by charts.js only when a chart is near
    (loader,) = soup.select("script[data-plotly]")
    assert loader["data-plotly"] == "../../assets/vendor/plotly-basic.min.js"


# ---- page weight ----


def test_every_page_html_is_under_100_kb(built, repository_site):
    for path in built.rglob("*.html"):
        assert path.stat().st_size < HTML_LIMIT, path
    for relative, content in repository_site.items():
        if relative.endswith(".html"):
            assert len(content) < HTML_LIMIT, (relative, len(content))


# ---- charts ----


def test_speculative_depth_is_a_numeric_axis(page):
    figures = _figures(page(FAMILY))
    # a depth chart, or the quantization chart that draws every depth chart's points on its card
    depth = [f for chart_id, f in figures.items() if chart_id.startswith(("depth-", "quant-"))]
    assert depth
    for figure in depth:
        axis = figure["layout"]["xaxis"]
        assert axis["type"] == "linear"
        assert all(isinstance(v, int | float) for v in axis["tickvals"])
        assert axis["tickvals"] == sorted(axis["tickvals"])
        for trace in figure["data"]:
            assert all(isinstance(x, int | float) for x in trace["x"])
    ticks = {v for f in depth for v in f["layout"]["xaxis"]["tickvals"]}
    assert {0, 3, 5} <= ticks  # 0, 3, 5: spaced as numbers, a gap where 1, 2 and 4 would be


def test_withheld_markers_never_sit_on_a_published_point(built, repository_site):
    pages = _family_pages(repository_site)
    pages[FAMILY] = BeautifulSoup((built / FAMILY).read_text(), "lxml")
    checked = 0
    for path, soup in pages.items():
        for chart_id, figure in _figures(soup).items():
            published = {
                (x, y)
                for t in figure["data"]
                if not t["name"].startswith("withheld")
                for x, y in zip(t["x"], t["y"], strict=True)
            }
            published_x = {x for x, _ in published}
            for t in figure["data"]:
                if t["name"].startswith("withheld"):
                    checked += len(t["x"])
                    assert not published_x & set(t["x"]), (path, chart_id)
    assert checked


def test_withheld_marker_moves_right_only_where_a_published_point_shares_its_x():
    points = [
        Point("a", 1, "1 card", 10.0, [9.0, 11.0]),
        Point("a", 2, "2 cards", 20.0, [19.0, 21.0]),
        Point("b", 2, "2 cards", 21.0, state="withheld", reason="G3"),
        Point("b", 4, "4 cards", 30.0, state="withheld", reason="G3"),
    ]
    figure = json.loads(chart("tp", "t", "s", points, x_title="cards").figure_json)
    (withheld,) = [t for t in figure["data"] if t["name"].startswith("withheld")]
    assert withheld["x"][1] == 4  # nothing published at 4: its true place
    assert 2 < withheld["x"][0] < 3  # beside the published point at 2, nearer 2 than 3
    log = json.loads(chart("c", "t", "s", points, x_title="users", x_log=True).figure_json)
    (shifted,) = [t for t in log["data"] if t["name"].startswith("withheld")]
    assert 2 < shifted["x"][0] < 4


def test_no_empty_chart_box(built, repository_site):
    pages = _family_pages(repository_site)
    pages[FAMILY] = BeautifulSoup((built / FAMILY).read_text(), "lxml")
    gaps = 0
    for path, soup in pages.items():
        figures = _figures(soup)
        assert len(figures) == len(soup.select("figure.chart [data-chart]")), path
        for chart_id, figure in figures.items():
            assert _drawn(figure), (path, chart_id)
        for gap in soup.select("p.chart-gap"):
            gaps += 1
            assert gap.find_parent("figure") is None and "nothing to draw" in gap.get_text()
    # the repository's 4B FP8 results are withheld with no value: its quantization chart says so, by name
    four_b = pages["models/qwen3.5-4b/index.html"]
    notes = [n.get_text(" ") for n in four_b.select("figure.chart .note")]
    assert gaps or any("withheld results with no recorded value, so nothing to draw for" in n for n in notes)


def test_a_chart_of_nothing_is_empty_and_no_chart_appears_twice():
    nothing = chart("x", "t", "s", [Point("a", 0, "0", None, state="withheld", reason="G3")], x_title="d")
    assert nothing.empty and nothing.rows
    one = [Point("a", 0, "MTP0", 10.0, [10.0]), Point("a", 3, "MTP3", 20.0, [20.0])]
    depth = chart("depth", "depth", "s", one, x_title="speculative depth")
    renamed = chart(
        "quant", "quant", "s", [Point("W4A16", p.x, p.x_label, p.centre) for p in one], x_title="speculative depth"
    )
    other = chart("tp", "tp", "s", one, x_title="tensor parallel cards")
    assert [c.id for c in distinct([depth, nothing, renamed, other])] == ["depth", "x", "tp"]


def test_no_two_identical_charts_on_a_page(built, repository_site):
    pages = _family_pages(repository_site)
    pages[FAMILY] = BeautifulSoup((built / FAMILY).read_text(), "lxml")
    for path, soup in pages.items():
        seen: dict[tuple[object, ...], str] = {}
        for chart_id, figure in _figures(soup).items():
            key = (figure["layout"]["xaxis"]["title"]["text"], json.dumps(_drawn(figure)))
            assert key not in seen, (path, chart_id, seen.get(key))
            seen[key] = chart_id


def test_without_javascript_the_table_is_open_in_place_of_the_chart(page):
    soup = page(FAMILY)
    figures = soup.select("figure.chart")
    assert figures
    for figure in figures:
        plot = figure.select_one("[data-chart]")
        assert plot.has_attr("hidden") and not plot.get_text(strip=True)  # no blank "needs JavaScript" box
        table = figure.select_one("details.chart-table")
        assert table.has_attr("open") and table.select("tbody tr")


# ---- recipe pages ----


def test_recipe_commands_rebuilt_from_pieces_are_the_composed_ones(repository_site):
    """Every command the page carries, joined back from its pieces as the script does and with each
    speculative depth put into its slot, is compose's output for that variant, card, feature set and
    TP size (docker pinned to the digest a packet recorded, when there is one)."""
    from dataclasses import replace
    from datetime import date

    from builder.views.common import SiteContext
    from builder.views.recipe import DEPTHS, TP_SIZES, image_digests, spec_depth, with_depth
    from catalog.recipes.compose import Selection, compose
    from catalog.store.repository import load_catalog

    catalog = load_catalog(REPO / "data", REPO / "packets")
    checked = depths = 0
    tp_sizes: set[str] = set()
    for slug, recipe in catalog.recipes.items():
        soup = BeautifulSoup(repository_site[f"recipes/{slug}/index.html"], "lxml")
        data = json.loads(soup.select_one("script#recipe-commands").string)  # type: ignore[arg-type, union-attr]
        digests = image_digests(SiteContext(catalog, date(2000, 1, 1)), slug)

        def text(ids: list[int], depth: int | None, data: dict = data) -> str:  # type: ignore[type-arg]
            joined = "\n".join(data["pieces"][i] for i in ids)
            return joined if depth is None else joined.replace(data["depth_slot"], str(depth))

        for key, (shell, docker, has_depth) in data["commands"].items():
            variant, hw, bits, tp = key.split("|")
            tp_sizes.add(tp)
            features = [n for n, bit in zip(data["features"], bits, strict=True) if bit == "1"]
            selection = Selection(variant, catalog.hardware.get(hw), features=features, tensor_parallel_size=int(tp))
            made = compose(recipe, selection).redacted()
            assert bool(has_depth) == (spec_depth(made.args) is not None)
            for depth in DEPTHS if has_depth else [None]:
                expected = made if depth is None else replace(made, args=with_depth(made.args, depth))
                assert text(shell, depth) == expected.shell_multiline()
                digest = digests.get(expected.docker_image or "")
                assert (None if docker is None else text(docker, depth)) == expected.docker_multiline(digest)
                depths += depth is not None
            checked += 1
    assert checked > 200 and depths > 200
    assert tp_sizes == {str(t) for t in TP_SIZES}


def test_recipe_without_javascript_lists_the_default_and_each_opt_in(repository_site):
    from catalog.store.repository import load_catalog

    catalog = load_catalog(REPO / "data", REPO / "packets")
    recipe = catalog.recipes["qwen3.5-4b"]
    opt_in = [n for n in recipe.features if n not in recipe.default_features()]
    assert opt_in
    soup = BeautifulSoup(repository_site["recipes/qwen3.5-4b/index.html"], "lxml")
    sets = soup.select("#all-commands details.command-set")
    assert sets
    for block in sets:
        assert len(block.select("pre code")) >= 1 + len(opt_in)
        assert len([p for p in block.select("p.muted") if "opt-in" in p.get_text()]) == len(opt_in)
