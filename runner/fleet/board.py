"""Where the tasks of a campaign post what they do, for the head to print per host.

A small Ray actor (no CPU of its own) in the head's job: each task posts `started`, its runner's
latest progress line every few seconds, and `done` or `failed`; the head reads what is new every
poll (runner/fleet/head.py). Events are dicts of strings: job, host, kind, text, log.
"""

from __future__ import annotations

import ray


class _Board:
    def __init__(self) -> None:
        self._events: list[dict[str, str]] = []

    def post(self, event: dict[str, str]) -> None:
        self._events.append(event)

    def since(self, start: int) -> list[dict[str, str]]:
        return self._events[start:]


Board = ray.remote(_Board)
