"""Injection: the hostile catalog (tests/adversarial/hostile.py: script tags, HTML, `javascript:`
links, attribute-breaking quotes, template syntax in every free-text field) builds, and every
page, the JSON API and the sitemap carry the payload only as text. In Debian's Chromium no
injected script runs on any page, also after the page's own scripts and charts have run and the
reader has hovered the charts and used the filters and the command builder."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from lxml import etree

from builder import cli as builder_cli
from catalog.packets.layout import SIGNATURE_SUFFIX
from catalog.recipes.compose import LaunchCommand
from testkit.local_browser import serve_folder
from tests.adversarial.hostile import MARK
from tests.adversarial.support import Tally
from tests.profiles import examples

OUR_SCRIPTS = {"site.js", "charts.js"}
DATA_SCRIPTS = {"application/json", "application/ld+json"}
FOREIGN_ELEMENTS = {"img", "svg", "iframe", "object", "embed", "textarea", "base", "frame", "video", "audio", "style"}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "poster", "srcdoc"}
BAD_SCHEME = re.compile(r"^\s*(javascript|data|vbscript):", re.I)
SITEMAP = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@pytest.fixture(scope="module")
def hostile_site(hostile: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile-site") / "site"
    argv = ["build", "--data", str(hostile / "data"), "--packets", str(hostile / "packets"), "--out", str(out)]
    assert builder_cli.run(argv) == 0
    return out


def test_hostile_catalog_carries_the_payload_everywhere(hostile: Path, tally: Tally) -> None:
    carried = int((hostile / "carried").read_text())
    assert carried > 400, carried
    tally.add("injection", "free-text fields carrying the payload (recipes, hardware, suites, packets)", carried)


def test_pages_hold_the_payload_only_as_text(hostile_site: Path, tally: Tally) -> None:
    pages = sorted(hostile_site.rglob("*.html"))
    showing = 0
    for path in pages:
        soup = BeautifulSoup(path.read_text(), "lxml")
        assert len(soup.find_all("title")) == 1 and soup.title.parent.name == "head", path  # type: ignore[union-attr]
        for element in soup.find_all(True):
            name = element.name
            assert name not in FOREIGN_ELEMENTS, (path, str(element)[:120])
            assert not (name == "meta" and element.get("http-equiv")), (path, str(element))
            for attribute, value in element.attrs.items():
                text = " ".join(value) if isinstance(value, list) else value
                assert not attribute.lower().startswith("on"), (path, name, attribute)
                if attribute in URL_ATTRIBUTES:
                    assert not BAD_SCHEME.match(text), (path, name, attribute, text[:80])
                    assert MARK not in text, (path, name, attribute)
            if name == "script":
                if element.get("src"):
                    assert element["src"].rsplit("/", 1)[-1] in OUR_SCRIPTS, path  # type: ignore[union-attr]
                else:
                    assert element.get("type") in DATA_SCRIPTS, path
                    json.loads(element.string)  # type: ignore[arg-type]  # data, not code
        showing += MARK in soup.get_text()
    assert showing >= len(pages) // 2, f"only {showing} of {len(pages)} pages show the payload as text"
    tally.add("injection", "built pages parsed (no injected element or attribute)", len(pages))


def test_json_api_holds_the_payload_as_strings(hostile_site: Path, tally: Tally) -> None:
    published = sorted(hostile_site.glob("api/**/*.json")) + sorted(hostile_site.glob("packets/*.json"))
    files = [path for path in published if not path.name.endswith(SIGNATURE_SUFFIX)]
    signatures = [path for path in published if path.name.endswith(SIGNATURE_SUFFIX)]
    assert signatures, "the site publishes each packet's signature beside it"
    for path in signatures:  # a digest, a file name and a key id: no free text to carry the payload
        json.loads(path.read_text())
        assert MARK.encode() not in path.read_bytes(), path
    carrying = 0

    def strings(value: object) -> Iterator[str]:
        if isinstance(value, dict):
            for key, child in value.items():
                yield key
                yield from strings(child)
        elif isinstance(value, list):
            for child in value:
                yield from strings(child)
        elif isinstance(value, str):
            yield value

    for path in files:
        found = [s for s in strings(json.loads(path.read_text())) if MARK in s]
        carrying += bool(found)
    assert carrying >= len(files) - 1
    tally.add("injection", "JSON API and packet files parsed (payload only in string values)", len(files))
    tally.add("injection", "packet signature envelopes parsed (no payload)", len(signatures))


def test_sitemap_is_only_urls(hostile_site: Path, tally: Tally) -> None:
    tree = etree.parse(str(hostile_site / "sitemap.xml"), etree.XMLParser(resolve_entities=False, no_network=True))
    root = tree.getroot()
    assert root.tag == f"{SITEMAP}urlset"
    locs = []
    for url in root:
        assert url.tag == f"{SITEMAP}url"
        for child in url:
            assert child.tag in (f"{SITEMAP}loc", f"{SITEMAP}lastmod"), child.tag
            assert len(child) == 0
            if child.tag == f"{SITEMAP}loc":
                locs.append(child.text)
    assert locs and all(MARK not in loc and not BAD_SCHEME.match(loc) for loc in locs)
    built = {p.relative_to(hostile_site).as_posix() for p in hostile_site.rglob("index.html")}
    assert all(any(loc.endswith(page.removesuffix("index.html")) for page in built) for loc in locs)
    tally.add("injection", "sitemap entries checked", len(locs))


# ---- commands a reader copies ----

SHELL_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)  # type: ignore[arg-type]
SPECIAL = {"IFS", "PATH", "HOME", "ENV", "PS1", "PS2", "PS4", "OPTIND", "OPTARG", "PPID", "PWD", "OLDPWD", "LINENO"}
ENV_NAME = st.from_regex(r"\A[A-Za-z][A-Za-z0-9_]{0,12}\Z").filter(lambda name: name not in SPECIAL)
HOME = "/home/reader"
# Stand-ins for the programs: print each word they receive, then the variables they were given.
PROGRAMS = (
    'show() {{ for _a in "$@"; do printf \'%s\\0\' "$_a"; done;'
    ' for _n in {names}; do eval "_v=\\${{$_n-}}"; printf \'%s=%s\\0\' "$_n" "$_v"; done; }}\n'
    'vllm() {{ show vllm "$@"; }}\n'
    'docker() {{ show docker "$@"; }}\n'
)
_counted = {"commands": 0}


def _as_the_shell_runs_it(text: str, names: list[str]) -> list[str]:
    script = PROGRAMS.format(names=" ".join(names)) + text + "\n"
    out = subprocess.run(["/bin/sh", "-c", script], env={"HOME": HOME, "PATH": "/usr/bin:/bin"}, capture_output=True)
    assert out.returncode == 0 and not out.stderr, (text, out.stderr)
    return out.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


@settings(
    max_examples=examples(100),
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    args=st.lists(st.one_of(SHELL_TEXT, SHELL_TEXT.map(lambda t: "$HOME/" + t)), max_size=5),
    env=st.dictionaries(ENV_NAME, SHELL_TEXT, max_size=3),
    model=SHELL_TEXT,
)
def test_copied_commands_run_exactly_what_they_show(args: list[str], env: dict[str, str], model: str) -> None:
    """Whatever a recipe or packet puts in args, env values or the model id, /bin/sh runs the
    shown command (one line, one flag per line, docker) with exactly those words and values: no
    quote, `$( )`, backtick or `;` escapes into a command. Only a plain `$HOME/` path expands."""
    command = LaunchCommand(model, args, env, docker_image="img:" + model, platform="cuda")
    names = sorted(env)

    def expanded(word: str) -> str:
        plain = word.startswith("$HOME/") and not re.search(r'[$`"\\!\n]', word[6:])
        return HOME + word[5:] if plain else word

    values = [f"{k}={v}" for k, v in sorted(env.items())]
    expected = ["vllm", "serve", *(expanded(w) for w in command.argv()[2:]), *values]
    assert _as_the_shell_runs_it(command.shell(), names) == expected
    assert _as_the_shell_runs_it(command.shell_multiline(), names) == expected
    docker = command.docker_argv()
    assert docker is not None and command.docker_shell() is not None
    empty = [f"{k}=" for k in names]  # docker passes them with -e, not to its own environment
    assert _as_the_shell_runs_it(command.docker_shell(), names) == [expanded(w) for w in docker] + empty  # type: ignore[arg-type]
    _counted["commands"] += 3


def test_copied_commands_count(tally: Tally) -> None:
    assert _counted["commands"] > 0
    tally.add("injection", "generated commands run by /bin/sh with exactly the words shown", _counted["commands"])


# ---- in the browser ----

NO_SCRIPT_RAN = """() => ({
  pwned: typeof window.__pwned,
  handlers: Array.from(document.querySelectorAll('*')).filter(e =>
      Array.from(e.attributes).some(a => /^on/i.test(a.name) || /^\\s*(javascript|data|vbscript):/i.test(a.value)))
    .map(e => e.outerHTML.slice(0, 120)),
  foreign: Array.from(document.querySelectorAll('script')).filter(s =>
      s.src ? !/(site|charts|plotly-basic\\.min)\\.js$/.test(s.src) : !/json/.test(s.type)).length,
  charts: document.querySelectorAll('.js-plotly-plot').length,
})"""


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_no_injected_script_runs_in_chromium(hostile_site: Path, browser, tally: Tally) -> None:  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))  # type: ignore[func-returns-value]
    visited = interactions = 0
    with serve_folder(hostile_site) as base:
        for path in sorted(hostile_site.rglob("*.html")):
            page.goto(base + path.relative_to(hostile_site).as_posix(), wait_until="load")
            for plot in page.query_selector_all("[data-chart]"):  # charts draw when scrolled near
                plot.evaluate("e => e.parentNode.scrollIntoView()")
                page.wait_for_function("e => e.dataset.state === 'drawn' || e.dataset.state === 'failed'", arg=plot)
            for chart in page.query_selector_all(".js-plotly-plot"):  # hover labels render trace text
                box = chart.bounding_box()
                if box:
                    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
                    interactions += 1
            for box in page.query_selector_all("[data-builder] input, [data-filters] select"):
                if box.is_visible():
                    if box.evaluate("e => e.tagName") == "SELECT":
                        options = box.evaluate("e => Array.from(e.options).map(o => o.value)")
                        box.select_option(options[-1])
                    else:
                        box.click()
                    interactions += 1
            state = page.evaluate(NO_SCRIPT_RAN)
            assert state["pwned"] == "undefined", path
            assert state["handlers"] == [] and state["foreign"] == 0, (path, state)
            visited += 1
    context.close()
    assert dialogs == []
    tally.add("injection", "pages loaded in Chromium with no injected script run", visited)
    tally.add("injection", "charts hovered and controls used in Chromium", interactions)
