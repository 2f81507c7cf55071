"""The Jinja environment: autoescape on, StrictUndefined, one base layout, display-only templates."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context
from jinja2.runtime import Context
from markupsafe import Markup

from builder import TEMPLATES, routes
from builder.views.glossary import marked, term, title_first_uses
from builder.views.results import STATE_MEANINGS

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def escape_json(text: str) -> str:
    """Make JSON text safe inside a <script> element: no `</script>`, no `<!--`, no entity."""
    for char, replacement in _JSON_ESCAPES.items():
        text = text.replace(char, replacement)
    return text


def json_script(value: Any) -> Markup:
    """Serialise a value for `<script type="application/json">` (or JSON-LD)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return Markup(escape_json(text))  # noqa: S704 - escaped above


def json_text(text: str) -> Markup:
    """Already-serialised JSON (a plotly figure), escaped for a script element."""
    return Markup(escape_json(text))  # noqa: S704 - escaped above


@pass_context
def url(context: Context, target: str) -> str:
    """A route made relative to the page being rendered (works from file://)."""
    return routes.relative(str(context["page_path"]), target)


def make_environment(templates: Path = TEMPLATES) -> Environment:
    """The templates, every one compiled here, before a build forks: each worker inherits them
    compiled (builder/assemble.py)."""
    env = Environment(
        loader=FileSystemLoader(str(templates)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,  # one build's templates do not change: no stat of each template per page
    )
    env.globals["url"] = url
    env.globals["routes"] = routes
    env.filters["json_script"] = json_script
    env.filters["json_text"] = json_text
    env.filters["defined"] = marked
    env.filters["term"] = term
    env.globals["state_meanings"] = STATE_MEANINGS
    for template in env.list_templates(extensions=["html"]):
        env.get_template(template)
    return env


def render_page(env: Environment, template: str, path: str, context: Mapping[str, Any]) -> bytes:
    html = env.get_template(template).render({**context, "page_path": path})
    return title_first_uses(html).encode("utf-8")
