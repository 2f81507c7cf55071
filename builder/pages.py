"""A page: where it goes, its template, its view (or how to make it where it is rendered), and what
it depends on (`depends_on`): an incremental build renders a page again when one of those keys
changed since the site it updates, and keeps it byte for byte otherwise (builder/assemble.py). A key
names what a packet change touches: its own packet, its family, its card, or any packet at all; or,
for a page listing families, its view as it differs from the one the last build rendered.

Rendering writes each page straight into the staging folder, hashed from the bytes in hand (the
manifest reads no page back), and counts the CPU each kind of page cost.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from jinja2 import Environment

from builder import output
from builder.output import Targets
from builder.render import render_page
from builder.views.common import SiteContext
from catalog.errors import CatalogError

ANY_PACKET = "packets"  # every page that lists or counts packets depends on this one


def packet_key(packet_id: str) -> str:
    return f"packet:{packet_id}"


def family_key(slug: str) -> str:
    return f"family:{slug}"


def card_key(hardware_id: str) -> str:
    return f"card:{hardware_id}"


def view_key(path: str) -> str:  # a listing of families: changed when its view differs from the last build's
    return f"view:{path}"


Context = dict[str, object]


@dataclass(frozen=True)
class Page:
    """One HTML page; `context` is the view, or a function that makes it where it is rendered."""

    path: str
    template: str
    context: Context | Callable[[], Context]
    title: str
    description: str
    depends_on: frozenset[str] = frozenset()


class Written(NamedTuple):
    """A file a build wrote: its path in the site, its sha256, its kind and the CPU it cost."""

    path: str
    sha256: str
    kind: str
    seconds: float


def render(page: Page, env: Environment, ctx: SiteContext, targets: Targets) -> Written:
    started = time.process_time()
    view = page.context() if callable(page.context) else page.context
    body = render_page(
        env,
        page.template,
        page.path,
        {
            **view,
            "site": {"build_date": ctx.build_date.isoformat(), "base_url": ctx.base_url},
            "title": page.title,
            "description": page.description,
            "canonical": None if view.get("link_root") else ctx.absolute(page.path),  # served at any address
        },
    )
    return write(targets, page.path, body, page.template.removesuffix(".html"), started)  # its kind


def write(targets: Targets, path: str, body: bytes, kind: str, started: float) -> Written:
    target = targets.made(path)
    try:
        output._write(target, body)
    except OSError as error:  # a read-only or special file system, no space, no permission
        raise CatalogError(f"cannot write the site: {error.strerror or error}", file=target) from None
    return Written(path, hashlib.sha256(body).hexdigest(), kind, time.process_time() - started)


def needed(page: Page, changed: frozenset[str] | None) -> bool:
    """Whether an incremental build renders the page again (`changed` None: a full build)."""
    return changed is None or not page.depends_on.isdisjoint(changed)
