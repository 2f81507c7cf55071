"""Where the tasks of a campaign post what they do, for the head to print per host.

A small Ray actor in the head's job, placed on the cluster's head node (the `node:__internal_head__`
resource only that node has: a measuring host that dies must not take the board with it) and
restarted by Ray should it die anyway. Each task posts `started`, its runner's latest progress line
every few seconds, and `done` or `failed`; the head reads what is new every poll
(runner/fleet/head.py). Events are dicts of strings: job, host, kind, text, log.
"""

from __future__ import annotations

import uuid
from typing import Any

import ray

HEAD_NODE = "node:__internal_head__"


class _Board:
    def __init__(self) -> None:
        self._events: list[dict[str, str]] = []
        self._life = uuid.uuid4().hex  # a restarted board starts its list again

    def post(self, event: dict[str, str]) -> None:
        self._events.append(event)

    def since(self, life: str, start: int) -> tuple[str, list[dict[str, str]]]:
        """Events from `start` on, of this life of the board (all of them after a restart)."""
        return self._life, self._events[start if life == self._life else 0 :]


Board = ray.remote(_Board)


def new_board() -> Any:
    """The board's handle (`post.remote(event)`, `since.remote(life, start)`)."""
    return Board.options(num_cpus=0, resources={HEAD_NODE: 0.001}, max_restarts=-1, max_task_retries=-1).remote()
