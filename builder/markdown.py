"""Markdown for recipe guides and docstrings: CommonMark, raw HTML off, only safe link schemes."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markupsafe import Markup

_SAFE_SCHEMES = ("http:", "https:", "mailto:")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*:", re.IGNORECASE)


def safe_link(url: str) -> bool:
    """Allow http(s), mailto and scheme-less (relative or #anchor) links; refuse javascript:, data:,
    vbscript:, file: and anything else. Control characters and whitespace are stripped first, as
    browsers do, so `java\\tscript:` is caught too."""
    cleaned = re.sub(r"[\x00-\x20\x7f]", "", url).lower()
    if not _SCHEME.match(cleaned):
        return True
    return cleaned.startswith(_SAFE_SCHEMES)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False})
    md.validateLink = safe_link  # type: ignore[method-assign]
    return md


_MD = _parser()


def render_markdown(text: str, *, shift_headings: int = 0) -> Markup:
    """HTML for `text`; `shift_headings` moves every heading down that many levels (a guide's
    `##` nests under the page's own section heading)."""
    tokens = _MD.parse(text)
    for token in tokens:
        if token.type in ("heading_open", "heading_close") and shift_headings:
            token.tag = f"h{min(6, int(token.tag[1]) + shift_headings)}"
    return Markup(_MD.renderer.render(tokens, _MD.options, {}))  # noqa: S704 - escaped; raw HTML disabled
