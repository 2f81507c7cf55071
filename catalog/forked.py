"""`map` on every core, in forked workers: they inherit what the parent holds (the loaded data,
the function and its items), so nothing is pickled on the way in but chunks of indices, and only
the results on the way out. Used by the loader (packets) and the builder (families and pages)."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _chunk(indices: range) -> list[Any]:
    assert _WORK is not None, "a worker forked before the work was set"
    function, items = _WORK
    return [function(items[i]) for i in indices]


def worker_count(items: int, per_worker: int) -> int:
    """How many workers `forked_map` uses for `items` (fewer than 2: none, it maps in this process)."""
    return min(len(os.sched_getaffinity(0)), items // per_worker)


def forked_map(function: Callable[[T], R], items: Sequence[T], *, per_worker: int, chunk: int = 8) -> Iterator[R]:
    """`function(item)` for every item, in order, each as soon as it is there; in forked workers
    when there are at least `per_worker` items for each of two (below that a worker costs more
    than it saves). Consume it whole: the workers live until it is exhausted."""
    global _WORK
    workers = worker_count(len(items), per_worker)
    if workers < 2:
        yield from map(function, items)
        return
    chunks = [range(i, min(i + chunk, len(items))) for i in range(0, len(items), chunk)]
    _WORK = (function, items)
    frozen_before = gc.get_freeze_count() > 0  # what a build's plan froze stays frozen (builder/build.py)
    gc.freeze()  # what the workers inherit is never collected: they need not scan (and so copy) it
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for results in pool.map(_chunk, chunks):
                yield from results
    finally:
        _WORK = None
        if not frozen_before:
            gc.unfreeze()
