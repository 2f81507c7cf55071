"""`map` on every core, in workers forked after the catalog is loaded: they inherit it (and the
function and its items), so nothing is pickled on the way in but chunks of indices, and only the
results on the way out."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _chunk(indices: range) -> list[Any]:
    assert _WORK is not None, "a worker forked before the work was set"
    function, items = _WORK
    return [function(items[i]) for i in indices]


def forked_map(function: Callable[[T], R], items: Sequence[T], *, per_worker: int, chunk: int = 8) -> list[R]:
    """`[function(item) for item in items]`, in order; in forked workers when there are at least
    `per_worker` items for each of two (below that a worker costs more than it saves)."""
    global _WORK
    workers = min(len(os.sched_getaffinity(0)), len(items) // per_worker)
    if workers < 2:
        return [function(item) for item in items]
    chunks = [range(i, min(i + chunk, len(items))) for i in range(0, len(items), chunk)]
    _WORK = (function, items)
    gc.freeze()  # what the workers inherit is never collected: they need not scan (and so copy) it
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            return [result for results in pool.map(_chunk, chunks) for result in results]
    finally:
        _WORK = None
        gc.unfreeze()
