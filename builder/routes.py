"""Every output path of the site and every href between its pages: the one place a URL is spelled.

A route is a path relative to the site root (`models/<slug>/index.html`), never absolute and
never with `..`; a page links to it through `relative`, so the site works from `file://` and
under any prefix. Templates reach these through the `routes` Jinja global (`url(routes.INDEX)`)
or through hrefs their views carry.

Stdlib only: the no-op proof (builder/build.py) reads it before the heavy imports.
"""

from __future__ import annotations

import hashlib
import re

from catalog.packets.layout import SIGNATURE_SUFFIX

INDEX = "index.html"
NOT_FOUND = "404.html"
SITEMAP = "sitemap.xml"
METHODOLOGY = "methodology/index.html"
HARDWARE_INDEX = "hardware/index.html"
MODELS_API = "api/models.json"
# What the site is (builder/manifest.py): its inputs' hash and every file's sha256; not a page.
BUILD_MANIFEST = ".catalog-build.json"

PACKETS_FOLDER = "packets"
FILTER_FOLDER = "filter"
ASSETS_FOLDER = "assets"
STYLESHEET = "assets/style.css"
FAVICON = "assets/favicon.svg"
SITE_SCRIPT = "assets/site.js"
CHARTS_SCRIPT = "assets/charts.js"
# The partial Plotly bundle (scatter and bar), vendored with its version and hash in
# templates/assets/vendor/README.md: a quarter of the full bundle the Python package ships.
PLOTLY_BUNDLE = "assets/vendor/plotly-basic.min.js"

_EXTERNAL = ("http://", "https://", "#", "mailto:")


def family_page(slug: str) -> str:
    return f"models/{slug}/index.html"


def family_run(slug: str, hardware_id: str) -> str:
    """A family page's "run this" answer for one card: its command, one click from the index."""
    return f"{family_page(slug)}#run-{hardware_id}"


def family_run_users(slug: str, hardware_id: str) -> str:
    """That answer's many-users table: each user count's figures beside its load sweep server's command."""
    return f"{family_page(slug)}#run-users-{hardware_id}"


def family_folder(slug: str) -> str:
    """The family page's address as a folder (`models/<slug>/`), the form JSON-LD names."""
    return f"models/{slug}/"


def family_api(slug: str) -> str:
    return f"api/models/{slug}.json"


def recipe_page(slug: str) -> str:
    return f"recipes/{slug}/index.html"


def packet_page(packet_id: str, arm_id: str | None = None) -> str:
    """The packet page, or one arm's section of it."""
    return f"{PACKETS_FOLDER}/{packet_id}/index.html" + (f"#arm-{arm_id}" if arm_id else "")


def packet_json(packet_id: str) -> str:
    """The packet file, published byte for byte."""
    return f"{PACKETS_FOLDER}/{packet_id}.json"


def packet_signature(packet_id: str) -> str:
    """The packet's DSSE envelope, beside its file."""
    return f"{PACKETS_FOLDER}/{packet_id}{SIGNATURE_SUFFIX}"


def is_packet_json(path: str) -> bool:
    """Whether a site path is a published packet file (not its signature, not its page)."""
    folder, _, name = path.partition("/")
    is_file_name = "/" not in name and name.endswith(".json")
    return folder == PACKETS_FOLDER and is_file_name and not name.endswith(SIGNATURE_SUFFIX)


# A filter value short enough to read is its own folder name; a longer one (a quantization label is
# free text from a recipe) is named by its digest, so no free text ever becomes a long path.
_READABLE_VALUE = re.compile(r"[a-z0-9][a-z0-9_-]{0,23}")


def filtered_index(name: str, value: str, page: int = 1) -> str:
    """The index pre-rendered with one filter set to one value (for readers without JavaScript),
    and its `page`th page of families when it has more than a page holds."""
    folder = value if _READABLE_VALUE.fullmatch(value) else "v-" + hashlib.sha256(value.encode()).hexdigest()[:10]
    return f"{FILTER_FOLDER}/{name}/{folder}/{index_page(page)}"


def index_page(page: int) -> str:
    """The index's `page`th page of families (the first is the index itself); any listing's pages
    are named so, beside its first: the same folder, so a list's links are the same."""
    return INDEX if page == 1 else f"index-{page}.html"


def hardware_page(hardware_id: str, page: int = 1) -> str:
    return f"hardware/{hardware_id}/{index_page(page)}"


def methodology_section(anchor: str) -> str:
    """A section or glossary term of the methodology page (`#words`, `#term-tok-s`)."""
    return f"{METHODOLOGY}#{anchor}"


def asset(relative: str) -> str:
    """A file of templates/assets, by its path inside that folder."""
    return f"{ASSETS_FOLDER}/{relative}"


def relative(page_path: str, target: str) -> str:
    """`target` (a route) as the page at `page_path` links to it; external links and in-page
    anchors pass through unchanged. From `models/x/index.html` the site root is `../../`."""
    if target.startswith(_EXTERNAL):
        return target
    return "../" * page_path.count("/") + target
