"""Runner and vLLM processes started by tests, and how none of them outlives its test or the session.

A test's child runs in a session of its own, so one signal to its process group reaches all of
it (the runner, or `python -m bench` with its workers). vLLM servers are further away: the runner
starts each in yet another session (runner/server.py), so killing the runner's group misses them
once the runner cannot stop them itself (SIGKILL, a hang). Every child therefore carries TAG_VAR
in its environment, which the servers inherit; a scan of /proc finds them by it, even after they
are re-parented to PID 1.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAG_VAR = "CATALOG_TEST_CHILD"
SESSION_TAG = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
# The runner turns SIGTERM into Ctrl-C and stops each of its servers (up to ~20 s, then SIGKILL).
RUNNER_GRACE_S = 45.0
KILL_GRACE_S = 10.0

_PR_SET_PDEATHSIG = 1
_prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)  # Linux only


@dataclass(frozen=True)
class Leftover:
    pid: int
    pgid: int
    cmdline: str

    def __str__(self) -> str:
        return f"pid {self.pid} (group {self.pgid}): {self.cmdline[:160]}"


_tags = itertools.count(1)


def new_tag(owner: str) -> str:
    """A tag no other tag starts with: matching a prefix of it finds this child's processes only."""
    return f"{SESSION_TAG}/{owner}-{next(_tags)}/"


def tagged_env(tag: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**(os.environ if base is None else base), TAG_VAR: tag}


def tagged_processes(prefix: str = SESSION_TAG + "/") -> list[Leftover]:
    """Live (not zombie) processes whose environment tag starts with `prefix`."""
    wanted = f"{TAG_VAR}={prefix}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp ...
        if fields[0] == "Z" or not any(var.startswith(wanted) for var in environ.split(b"\0")):
            continue
        found.append(Leftover(int(entry.name), int(fields[2]), cmdline))
    return found


def stop_groups(pgids: Sequence[int], prefix: str, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM whole process groups, SIGKILL what still carries the tag after `grace_s`."""
    own = os.getpgrp()
    groups = {pgid for pgid in pgids if pgid > 1 and pgid != own}
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_GRACE_S)):
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            groups = {p.pgid for p in tagged_processes(prefix)} & groups
            if not groups:
                return
            time.sleep(0.2)


def sweep(prefix: str = SESSION_TAG + "/", grace_s: float = KILL_GRACE_S) -> list[Leftover]:
    """Stop every process group holding a tagged process; return what was found alive."""
    found = tagged_processes(prefix)
    if found:
        stop_groups([p.pgid for p in found], prefix, grace_s)
    return found


def _die_with_parent() -> None:
    # In the child between fork and exec: should pytest itself be killed (SIGKILL, a CI job
    # cancelled), the runner still gets SIGTERM and stops its servers. The signal follows the
    # thread that started the child, so children are started from pytest's main thread only.
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """One command in a session of its own, tagged, stopped as a whole by `stop()`."""

    def __init__(self, argv: Sequence[str], owner: str, **popen: Any) -> None:
        self.owner = owner
        self.tag = new_tag(owner)
        self.process: subprocess.Popen[Any] = subprocess.Popen(
            list(argv),
            env=tagged_env(self.tag, popen.pop("env", None)),
            start_new_session=True,
            preexec_fn=_die_with_parent,
            **popen,
        )
        _children.append(self)

    @property
    def pgid(self) -> int:
        return self.process.pid  # start_new_session: the leader's pid is the group id

    def wait(self, timeout: float) -> int:
        """The exit code; on timeout (or any interruption, such as pytest-timeout) the group is stopped."""
        try:
            return self.process.wait(timeout=timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self, grace_s: float = RUNNER_GRACE_S) -> list[Leftover]:
        """SIGTERM the group, SIGKILL it after `grace_s`, then stop whatever it left behind
        (vLLM servers in sessions of their own). Returns those leftovers."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pgid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pgid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=KILL_GRACE_S)
        # The leader is gone; members of its group may not be (a worker ignoring SIGTERM).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signal.SIGKILL)
        return sweep(self.tag)


_children: list[Child] = []


def stop_all() -> tuple[list[str], list[Leftover]]:
    """Session end: stop every child still running (named in the first list), then return what
    still carries this session's tag (orphans its owner's teardown missed), stopped too."""
    running = [child.owner for child in _children if child.process.poll() is None]
    orphans: list[Leftover] = []
    for child in _children:
        orphans += child.stop()
    return running, orphans + sweep()
