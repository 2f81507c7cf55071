"""Types and context every page view shares."""

from __future__ import annotations

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
