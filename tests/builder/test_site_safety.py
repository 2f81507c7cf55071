"""Hostile strings in packets and recipes render as text; the guide refuses unsafe links."""

from __future__ import annotations

import json
import re

import pytest
from bs4 import BeautifulSoup

from builder import routes
from builder.markdown import render_markdown, safe_link
from builder.render import make_environment
from tests.builder.factory import IMG, SCRIPT

OUR_SCRIPTS = {"site.js", "charts.js"}
SAFE_SCRIPT_TYPES = {"application/json", "application/ld+json"}


def _pages(built):
    return sorted(built.rglob("*.html"))


def test_no_injected_markup_anywhere(built):
    for path in _pages(built):
        soup = BeautifulSoup(path.read_text(), "lxml")
        for script in soup.find_all("script"):
            if script.get("src"):
                assert script["src"].rsplit("/", 1)[-1] in OUR_SCRIPTS, path  # type: ignore[union-attr]
            else:
                assert script.get("type") in SAFE_SCRIPT_TYPES, path
                json.loads(script.string)  # type: ignore[arg-type]  # data, not code
        assert soup.find("img") is None, path
        assert not soup.select("[onerror], [onload], [onclick]"), path
        for a in soup.select("a[href]"):
            assert not re.match(r"\s*(javascript|data|vbscript):", a["href"], re.I), (path, a["href"])  # type: ignore[arg-type]


def test_hostile_strings_appear_as_text(page):
    family = page("models/fixture-7b/index.html")
    assert "A fixture family " + IMG in family.select_one("#fine-print").get_text()
    assert IMG in family.select_one("#verdict").get_text()  # the source named in the verdict, as text
    assert SCRIPT in family.select_one(".eyebrow").get_text()
    ids = [a.get_text() for a in family.select("table.packet-list td.packet-title a")]
    signed = [page(routes.packet_page(packet_id)).select_one(".signed-title q") for packet_id in ids]
    assert any(q is not None and SCRIPT in q.get_text() for q in signed)  # the signer's title, quoted as text
    recipe = page("recipes/fixture-7b/index.html")
    guide = recipe.select_one("#guide")
    assert SCRIPT in guide.get_text()
    assert "<img src=x onerror=alert(1)>" in guide.get_text()
    assert "[x](javascript:alert(1))" in guide.get_text()  # refused link stays literal text
    assert [a["href"] for a in guide.select("a")] == ["https://example.org/ok"]


def test_hostile_strings_are_preserved_in_the_api(api):
    family = api("api/models/fixture-7b.json")["family"]
    assert family["description"] == "A fixture family " + IMG


def test_script_data_is_escaped(built):
    for path in _pages(built):
        html = path.read_text()
        for body in re.findall(r'<script type="application/(?:ld\+)?json"[^>]*>(.*?)</script>', html, re.S):
            assert "<" not in body and ">" not in body and "&" not in body, path


def test_tojson_escapes_closing_tags():
    text = make_environment().from_string("{{ x|tojson }}").render(x={"x": "</script><script>alert(1)</script> & <!--"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["x"] == "</script><script>alert(1)</script> & <!--"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://example.org", True),
        ("http://example.org", True),
        ("mailto:a@b.c", True),
        ("relative/page.html", True),
        ("#anchor", True),
        ("javascript:alert(1)", False),
        ("JavaScript:alert(1)", False),
        (" java\tscript:alert(1)", False),
        ("data:text/html,hi", False),
        ("vbscript:msgbox", False),
        ("file:///etc/passwd", False),
    ],
)
def test_safe_link(url, ok):
    assert safe_link(url) is ok


def test_markdown_never_passes_raw_html():
    html = str(render_markdown("<b onclick=x>hi</b>\n\n<script>alert(1)</script>\n\n[a](javascript:alert(1))"))
    soup = BeautifulSoup(html, "lxml")
    assert soup.find("script") is None and soup.find("b") is None and soup.find("a") is None
