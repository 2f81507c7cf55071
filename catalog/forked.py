"""`map` on every core, in forked workers: they inherit what the parent holds (the loaded data,
the function and its items), so nothing is pickled on the way in but chunks of indices, and only
the results on the way out. Used by the loader (packets) and the builder (views and pages);
`forked_call`, one call beside this process's own work."""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None
_CALL: Callable[[], Any] | None = None


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
    frozen_before = gc.get_freeze_count() > 0  # a loaded catalog stays frozen (catalog/store/repository.py)
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


def _called() -> Any:
    assert _CALL is not None, "a process forked before its call was set"
    return _CALL()


class ForkedCall(Generic[R]):
    """`function()` running in a forked process while this one goes on (`forked_call`)."""

    def __init__(self, function: Callable[[], R]) -> None:
        global _CALL
        self._function = function
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
        _CALL = function
        try:
            self._future: Future[R] = self._pool.submit(_called)  # forks here, before it returns
        finally:
            _CALL = None

    def result(self) -> R:
        """Its value, or the exception it raised; made here when the process died (killed, out
        of memory) before it gave one. The process and the threads serving it are ended here,
        before this process forks again."""
        try:
            return self._future.result()
        except BrokenProcessPool:
            return self._function()
        finally:
            self._pool.shutdown(wait=True)


def forked_call(function: Callable[[], R]) -> ForkedCall[R]:
    """Start `function()` in a forked process: it inherits `function` and what it refers to
    (nothing is pickled but the result). Worth it for work of tens of thousands of system calls
    beside other such work here; call `result()` on every path."""
    return ForkedCall(function)
