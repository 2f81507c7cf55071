"""Types and context every page view shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Generic, TypeVar

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

FAMILIES_PER_PAGE = 20
"""A listing that grows with the catalog (the index, its filter pages, a card's page) shows at most
this many families a page; the search (builder/search.py) finds every family from any page. Issue 30
allows up to 100: at 100 an index page weighed 505 KB (each family's card carries its hidden per-filter
picks), heavy on a phone's link, and cost 14-16 ms of CPU; at 20 it is about 100 KB and 3 ms
(bench/FINDINGS.md)."""


@dataclass(frozen=True)
class Pager:
    """Where a page sits among the pages of one listing: links to each of them by number."""

    number: int
    links: list[Link]  # one per page, in order; the current one's href is ""

    @staticmethod
    def of(count: int, number: int, route: Callable[[int], str]) -> Pager | None:
        """The pager of page `number` of a listing of `count` families; None when one page holds them."""
        pages = max(1, -(-count // FAMILIES_PER_PAGE))
        if pages == 1:
            return None
        return Pager(number, [Link(str(n), "" if n == number else route(n)) for n in range(1, pages + 1)])


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

    def absolute(self, path: str) -> str | None:
        return self.base_url.rstrip("/") + "/" + path if self.base_url else None
