"""The Jinja environment: autoescape on, StrictUndefined, one base layout, display-only templates."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context
from jinja2.runtime import Context
from jinja2.utils import htmlsafe_json_dumps
from markupsafe import Markup

from builder import TEMPLATES, routes
from builder.views.glossary import marked, term, title_first_uses
from builder.views.load_sweep import LADDER_COMMAND_MISSING
from builder.views.results import STATE_MEANINGS


def json_text(text: str) -> Markup:
    """Already-serialised JSON (a plotly figure), escaped for a script element as `tojson` escapes."""
    return htmlsafe_json_dumps(text, dumps=str)


@pass_context
def url(context: Context, target: str) -> str:
    """A route made relative to the page being rendered (works from file://); on a page served at
    any address (`link_root`: the 404 page, which a server answers for every missing one), from the
    site's root instead, or its links would resolve under the missing address's folder."""
    root = context.get("link_root")
    return root + target if root else routes.relative(str(context["page_path"]), target)


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
    env.policies["json.dumps_kwargs"] = dict(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    env.filters["json_text"] = json_text
    env.filters["defined"] = marked
    env.filters["term"] = term
    env.globals["state_meanings"] = STATE_MEANINGS
    env.globals["ladder_command_missing"] = LADDER_COMMAND_MISSING
    for template in env.list_templates(extensions=["html"]):
        env.get_template(template)
    return env


def render_page(env: Environment, template: str, path: str, context: Mapping[str, Any]) -> bytes:
    html = env.get_template(template).render({**context, "page_path": path})
    return title_first_uses(html).encode("utf-8")
