"""One job of a fleet campaign on its measuring host: `python -m runner.fleet.cell JOB_DIR`.

runner/fleet/task.py (the Ray task) starts it; it runs the ordinary runner (`runner.measure`) on
the spec in JOB_DIR/spec.json, signs with this host's key, writes the packet into JOB_DIR/out and
its verdict into JOB_DIR/result.json, then writes one line to its stdout and exits.

Why a process of its own, detached from the Ray worker: when a worker exits, Ray kills its direct
child processes with SIGKILL (`RAY_kill_child_processes_on_worker_exit`, on by default; Ray's
"Lifetimes of a User-Spawn Process" page; tests/e2e/test_fleet.py saw it), and the runner's vLLM
servers run in sessions of their own, which nothing of Ray's reaches. A runner killed so would
leave its servers holding the cards. So this process forks at once and its first half exits:
what measures is nobody's direct child. It watches its stdin, a pipe the Ray task holds open: the
pipe ends when the worker ends (host lost, head interrupted, cell cancelled) or when the task
closes it (the cell's timeout), and the runner is then stopped as on Ctrl-C, each server by its
process group. It is also the child subreaper of everything it starts (prctl
PR_SET_CHILD_SUBREAPER), so a server orphaned by a failure re-parents to it and is stopped
before it exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Literal

from pydantic import Field

from catalog.errors import UserError
from catalog.files import write_file
from catalog.model.base import StrictModel
from catalog.model.packet import CampaignRef
from catalog.store.repository import load_catalog
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import CampaignRequest
from runner.progress import console_progress

SPEC = "spec.json"
RESULT = "result.json"
OUT = "out"
LOG = "cell.log"
STOPPED = 130
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
LEFTOVER_GRACE_S = 20.0


class CellSpec(StrictModel):
    """What the Ray task hands the cell process: the request and where this host keeps things."""

    request: CampaignRequest
    campaign: CampaignRef
    runtime: Literal["local", "docker"]
    health_timeout_s: float = Field(gt=0)
    vllm_python: str
    data: str  # the head's data/, as the task unpacked it in the job folder
    runs: str  # this host's runs/ (server logs and finished attempts: a retry here resumes them)
    models: str  # this host's models/ (the demo model is generated there)


class CellResult(StrictModel):
    rc: int
    error: str | None = None
    packet: str | None = None  # the packet's file name in out/
    key_id: str | None = None
    key_entry: str | None = None  # the data/keys.yaml lines of this host's key


def _subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _descendants(root: int) -> list[int]:
    """Live processes whose parent chain leads to `root` (as subreaper, orphans re-parent to it)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def stop_leftovers(grace_s: float = LEFTOVER_GRACE_S) -> list[int]:
    """Stop every process still below this one: SIGTERM to each one's group, SIGKILL after `grace_s`."""
    me = os.getpid()
    left = _descendants(me)
    if not left:
        return []
    own_group = os.getpgrp()
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for pid in _descendants(me):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                group = os.getpgid(pid)
                if group != own_group:
                    os.killpg(group, sig)
                os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _descendants(me):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(-1, os.WNOHANG)
            time.sleep(0.2)
        if not _descendants(me):
            break
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    return left


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _watch(stdin_fd: int) -> None:
    """Block until the task's pipe ends, then stop the measurement as Ctrl-C would."""
    with contextlib.suppress(OSError):
        while os.read(stdin_fd, 4096):
            pass
    os.kill(os.getpid(), signal.SIGTERM)


def run_cell(job_dir: Path) -> CellResult:
    spec = CellSpec.model_validate_json((job_dir / SPEC).read_bytes())
    out = job_dir / OUT
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():  # a packet of an earlier try that did not get back
        old.unlink()
    data = Path(spec.data)
    catalog = load_catalog(data, out, allow_unsigned=True)
    choice = RuntimeChoice(Path(spec.vllm_python), spec.runtime == "docker", None, spec.health_timeout_s)
    places = Places(data, out, Path(spec.runs), Path(spec.models))
    with console_progress() as progress:
        packet = measure(catalog, spec.request, choice, places, progress, campaign=spec.campaign)
    from catalog.packets.signing import host_key
    from runner.fleet.hosts import host_name

    key = host_key(role="measurer")
    return CellResult(rc=0, packet=f"{packet.id}.json", key_id=key.key_id, key_entry=key.keys_yaml_entry(host_name()))


def main(argv: list[str]) -> int:
    job_dir = Path(argv[1])
    if os.fork() > 0:
        os._exit(0)  # the Ray worker's child ends here; the rest runs detached from it
    # The pipe to the task, kept on a descriptor no child inherits; stdout itself goes to the log.
    reply = os.dup(1)
    log_fd = os.open(job_dir / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    watch_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    _subreaper()
    signal.signal(signal.SIGTERM, _interrupt)
    threading.Thread(target=_watch, args=(watch_fd,), daemon=True).start()
    try:
        try:
            result = run_cell(job_dir)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the cleanup below is not interrupted
    except KeyboardInterrupt:
        result = CellResult(
            rc=STOPPED, error="stopped: the Ray task ended (host lost, head interrupted or the cell timed out)"
        )
    except UserError as error:
        result = CellResult(rc=1, error=str(error))
    except Exception as error:  # a defect: its traceback goes to the log, its one line to the head
        traceback.print_exc()
        result = CellResult(rc=1, error=f"{type(error).__name__}: {error}")
    left = stop_leftovers()
    if left:
        print(f"stopped {len(left)} process(es) the runner left: {' '.join(map(str, left))}", flush=True)
    print(f"cell finished: {result.error or 'packet ' + str(result.packet)}", flush=True)
    write_file(job_dir / RESULT, result.model_dump_json())
    with contextlib.suppress(OSError):
        os.write(reply, json.dumps({"rc": result.rc}).encode() + b"\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
