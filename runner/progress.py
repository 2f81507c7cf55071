"""Progress on screen: one timestamped line per step (rich when on a terminal, plain in logs)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from time import monotonic

from rich.console import Console
from rich.markup import escape

from runner.settings import Progress


@contextmanager
def console_progress() -> Iterator[Progress]:
    console = Console(stderr=True, highlight=False)
    started = monotonic()

    def report(message: str) -> None:
        elapsed = int(monotonic() - started)
        console.print(
            f"[dim]{elapsed // 60:02d}:{elapsed % 60:02d}[/dim] {escape(message)}", markup=True, soft_wrap=True
        )

    yield report
