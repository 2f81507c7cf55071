"""Rendering pages, on every core when there are many: templates compiled once per worker, a
packet page's view built in the worker that renders it, each page written to a scratch folder
by its worker (so no process holds every page at once), with the CPU each kind of page cost.

Workers are forked after the catalog is loaded: they share it, nothing is pickled but page
indices on the way in and (path, warnings, cost) on the way out. Each page's own warnings are
returned, for the caller to merge in page order: the log is the same whichever process rendered
which page, and a page kept from the previous site (builder/incremental.py) says its recorded ones.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from jinja2 import Environment

from builder.render import make_environment, render_page
from builder.views.common import SiteContext
from catalog.forked import forked_map, worker_count

PAGES_PER_WORKER = 64  # below this a worker process costs more than it saves
CHUNK = 16

Context = dict[str, object]


@dataclass(frozen=True)
class Page:
    """One HTML page; `context` is the view, or a function that builds it where it is rendered."""

    path: str
    template: str
    context: Context | Callable[[], Context] = field(default_factory=dict)
    title: str = ""
    description: str = ""

    @property
    def kind(self) -> str:
        return self.template.removesuffix(".html")


@dataclass
class PageCosts:
    """CPU seconds and page count by kind of page (the template), summed over every process."""

    seconds: dict[str, float] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds of each step of the build

    def add(self, kind: str, seconds: float, pages: int = 1) -> None:
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
        self.count[kind] = self.count.get(kind, 0) + pages

    def phase(self, name: str, started: float) -> None:
        """Record the wall time of a step of the build that began at `started` (perf_counter)."""
        self.phases[name] = round(time.perf_counter() - started, 3)

    def report(self) -> dict[str, dict[str, dict[str, float]] | dict[str, float]]:
        pages = {
            kind: {"pages": self.count[kind], "cpu_ms_per_page": 1000 * self.seconds[kind] / self.count[kind]}
            for kind in sorted(self.count)
            if self.count[kind]  # a family view made for the index while no family page was rendered
        }
        return {"pages": pages, "phases_s": dict(self.phases)}


@dataclass
class _Job:
    """What forked workers inherit; `env` is each process's own compiled templates."""

    pages: list[Page]
    ctx: SiteContext
    templates: Path
    scratch: Path | None
    env: Environment | None = None


Rendered = tuple[int, bytes | None, list[str], float, str]  # index, bytes or None (written), warnings, CPU, sha256


def _render(job: _Job, index: int) -> Rendered:
    started = time.process_time()
    if job.env is None:
        job.env = make_environment(job.templates)
    page = job.pages[index]
    ctx = job.ctx
    shared, ctx.warnings = ctx.warnings, []  # this page's own warnings, whatever was said before
    try:
        body = _body(job, page, ctx)
    finally:
        warnings, ctx.warnings = ctx.warnings, shared
    if job.scratch is None:
        return index, body, warnings, time.process_time() - started, ""
    # a scratch copy, publish moves it into the new site; one flat folder: nothing to make per page
    (job.scratch / _scratch_name(index)).write_bytes(body)
    # hashed here, from the bytes in hand, so the site's manifest need not read the file back
    return index, None, warnings, time.process_time() - started, hashlib.sha256(body).hexdigest()


def _scratch_name(index: int) -> str:
    return f"{index:06d}.html"


def _body(job: _Job, page: Page, ctx: SiteContext) -> bytes:
    assert job.env is not None
    view = page.context() if callable(page.context) else page.context
    return render_page(
        job.env,
        page.template,
        page.path,
        {
            **view,
            "site": {"build_date": ctx.build_date.isoformat(), "base_url": ctx.base_url},
            "title": page.title,
            "description": page.description,
            "canonical": ctx.absolute(page.path),
        },
    )


def render_pages(
    found: list[Page], ctx: SiteContext, templates: Path, scratch: Path, costs: PageCosts
) -> tuple[dict[str, bytes | Path], dict[str, list[str]], dict[str, str]]:
    """Every page, in order: its bytes (one process) or the scratch file its worker wrote; the
    warnings each page's view gave (the caller merges them in page order); and the sha256 of each
    page a worker wrote."""
    workers = worker_count(len(found), PAGES_PER_WORKER)
    job = _Job(found, ctx, templates, scratch if workers >= 2 else None)
    if workers >= 2:  # compiled once, before the workers fork, instead of once in each
        job.env = make_environment(templates)
        for template in sorted({page.template for page in found}):
            job.env.get_template(template)
    results = forked_map(partial(_render, job), range(len(found)), per_worker=PAGES_PER_WORKER, chunk=CHUNK)
    files: dict[str, bytes | Path] = {}
    said: dict[str, list[str]] = {}
    digests: dict[str, str] = {}
    for index, body, warnings, seconds, sha256 in results:
        page = found[index]
        if warnings:
            said[page.path] = warnings
        costs.add(page.kind, seconds)
        files[page.path] = body if body is not None else scratch / _scratch_name(index)
        if body is None:
            digests[page.path] = sha256
    return files, said, digests
