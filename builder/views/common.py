"""Types and context every page view shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

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


@dataclass
class SiteContext:
    """What every view may read: the validated catalog, the one build date, and the warning log."""

    catalog: Catalog
    build_date: date
    base_url: str = ""
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def absolute(self, path: str) -> str | None:
        return self.base_url.rstrip("/") + "/" + path if self.base_url else None
