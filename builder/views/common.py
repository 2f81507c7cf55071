"""Types and context every page view shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from builder.format import Num
from catalog.store.repository import Catalog


@dataclass(frozen=True)
class Fact:
    label: str
    value: str | Num
    note: str = ""


@dataclass(frozen=True)
class Link:
    label: str
    href: str


T = TypeVar("T")

FAMILIES_PER_PAGE = 16
"""A listing that grows with the catalog (the index, its filter pages, a card's page) shows at most
this many families a page; the search (builder/search.py) finds every family from any page. Issue 30
allows up to 100: at 100 an index page weighed 505 KB (each family's card carries its hidden per-filter
picks), heavy on a phone's link, and cost 14-16 ms of CPU, about 0.11 ms a family over 1 ms for the
rest; at 20 it cost 3.0-3.2 ms at 1,000 families, at 16 2.2-2.4 ms and 84 KB (bench/FINDINGS.md)."""


PAGER_NEIGHBOURS = 2
"""Pages a pager links either side of the current one, besides the first and the last."""


@dataclass(frozen=True)
class Pager:
    """Where a page sits among the pages of one listing: the previous and next page, the first and
    the last, and those near this one. Not every page: a catalog of 20,000 families would put 1,000
    links on each of its 1,000 pages, and a page's cost would grow with the catalog."""

    number: int
    pages: int
    links: list[Link | None]  # in order; the current one's href is ""; None: pages left out here
    previous: Link | None
    next: Link | None
    holds: str = ""  # which of the listing's items this page holds: `17–32 of 40`

    @staticmethod
    def of(count: int, number: int, route: Callable[[int], str]) -> Pager | None:
        """The pager of page `number` of a listing of `count` families; None when one page holds them."""
        pages = max(1, -(-count // FAMILIES_PER_PAGE))
        if pages == 1:
            return None
        near = range(max(1, number - PAGER_NEIGHBOURS), min(pages, number + PAGER_NEIGHBOURS) + 1)
        shown = sorted({1, pages, *near})
        links: list[Link | None] = []
        for before, n in zip([0, *shown], shown, strict=False):
            if n - before > 1 and before:
                links.append(None)
            links.append(Link(str(n), "" if n == number else route(n)))
        previous = Link(str(number - 1), route(number - 1)) if number > 1 else None
        following = Link(str(number + 1), route(number + 1)) if number < pages else None
        first, last = (number - 1) * FAMILIES_PER_PAGE + 1, min(number * FAMILIES_PER_PAGE, count)
        return Pager(number, pages, links, previous, following, f"{first}–{last} of {count:,}")


def page_of(items: list[T], number: int) -> list[T]:
    """The `number`th page's share of a listing."""
    return items[(number - 1) * FAMILIES_PER_PAGE : number * FAMILIES_PER_PAGE]


def page_numbers(count: int) -> range:
    return range(1, max(1, -(-count // FAMILIES_PER_PAGE)) + 1)


@dataclass(frozen=True)
class Said(Generic[T]):
    """A view and the warnings making it gave, each once, in the order they were given: a view's
    warnings travel with it (the builder says them in page order; --strict counts them)."""

    view: T
    warnings: tuple[str, ...]


class Warnings(list[str]):
    """The warnings a view gives while it is made: `warn` says each once."""

    def warn(self, message: str) -> None:
        if message not in self:
            self.append(message)


@dataclass(frozen=True)
class SiteContext:
    """What every view may read: the validated catalog, the one build date, the site's address."""

    catalog: Catalog
    build_date: date
    base_url: str = ""

    def site_root(self) -> str:
        """The path the site is served under: the base URL's (`/catalog/`), else the server's root."""
        return urlsplit(self.base_url).path.rstrip("/") + "/" if self.base_url else "/"

    def absolute(self, path: str) -> str | None:
        return self.base_url.rstrip("/") + "/" + path if self.base_url else None
