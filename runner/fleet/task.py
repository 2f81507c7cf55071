"""The Ray task that measures one job on the host Ray chose: the function the head schedules.

It runs in a Ray worker of a host that advertises the job's card (runner/fleet/hosts.py). It
unpacks the head's data/ into the job's folder, starts the cell process (runner/fleet/cell.py:
the ordinary runner, detached so that it can stop its vLLM servers whatever happens to this
worker), forwards the runner's latest progress line to the head's board every few seconds,
closes the cell's pipe when the cell's timeout passes, and returns the packet's bytes and its
signature, or why it failed with the host and the log's path. It never raises for a failed
measurement: the head decides what to try again (runner/fleet/head.py). Ray itself re-runs the
task elsewhere when its host dies (the head sets `max_retries`; Ray's "Fault tolerance: tasks"
page: a task whose worker or node died is retried, an application exception is not unless
`retry_exceptions`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import ray

from catalog.files import write_file
from catalog.model.packet import CampaignRef
from catalog.packets.layout import signature_path
from runner.fleet import cell as cell_process
from runner.fleet.hosts import fleet_home, host_name, unpack, vllm_python
from runner.identity import repo_revision
from runner.measure import REPO_ROOT
from runner.plan import CampaignRequest

PROGRESS_EVERY_S = 5.0
_STAMP = re.compile(r"^\d+:\d\d ")  # the runner's own clock (runner/progress.py): the head prints its own
STOP_GRACE_S = 120.0  # the runner stops each server (20 s each) and the cell reaps what is left


@dataclass(frozen=True)
class JobSpec:
    name: str  # "<cell> r<repeat>"
    label: str  # what it measures, in words
    ref: CampaignRef
    request: CampaignRequest
    runtime: Literal["local", "docker"]
    timeout_s: float
    health_timeout_s: float
    data: dict[str, bytes]
    revision: str | None  # the head's commit: a host on another one is refused


@dataclass(frozen=True)
class JobOutcome:
    host: str
    log: str
    ok: bool
    error: str | None = None
    packet_name: str | None = None
    packet: bytes = b""
    envelope: bytes | None = None
    key_id: str | None = None
    key_entry: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def job_dir(ref: CampaignRef, home: Path) -> Path:
    return home / "runs" / "fleet" / ref.name / (ref.round or "-") / f"{ref.cell}-r{ref.repeat}"


def _last_line(log: Path, start: int) -> str | None:
    """The last complete line the runner wrote since `start` (it prints `MM:SS message`)."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(start, log.stat().st_size - 4096))
            lines = [line for line in handle.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return None
    return _STAMP.sub("", lines[-1].strip()) if lines else None


def measure_job(spec: JobSpec, board: Any = None) -> JobOutcome:
    """Run one job here; never raises for a failed measurement (see the module's docstring)."""
    started = time.monotonic()
    host = host_name()
    folder = job_dir(spec.ref, fleet_home())
    log = folder / cell_process.LOG
    folder.mkdir(parents=True, exist_ok=True)

    def post(kind: str, text: str) -> None:
        if board is not None:
            board.post.remote({"job": spec.name, "host": host, "kind": kind, "text": text, "log": str(log)})

    def failed(error: str) -> JobOutcome:
        post("failed", error)
        return JobOutcome(host, str(log), ok=False, error=error, seconds=time.monotonic() - started)

    with log.open("a") as handle:
        handle.write(f"---- {time.strftime('%Y-%m-%d %H:%M:%S')} {spec.name} on {host}\n")
    start_at = log.stat().st_size
    post("started", f"{spec.name}: started {spec.label} (log {log})")
    mine = repo_revision()
    if spec.revision and mine and mine != spec.revision:
        return failed(
            f"{host} runs commit {mine[:12]}, the head {spec.revision[:12]}: check out the head's commit there"
        )
    shutil.rmtree(folder / "data", ignore_errors=True)
    data = unpack(spec.data, folder / "data")
    home = fleet_home()
    cell_spec = cell_process.CellSpec(
        request=spec.request,
        campaign=spec.ref,
        runtime=spec.runtime,
        health_timeout_s=spec.health_timeout_s,
        vllm_python=str(vllm_python()),
        data=str(data),
        runs=str(home / "runs"),
        models=str(home / "models"),
    )
    (folder / cell_process.RESULT).unlink(missing_ok=True)
    write_file(folder / cell_process.SPEC, cell_spec.model_dump_json(), durable=False)
    with log.open("ab") as binary:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "runner.fleet.cell", str(folder)],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=binary,
            start_new_session=True,
        )
    launcher.wait()  # it forks the cell process and returns at once
    assert launcher.stdin is not None and launcher.stdout is not None
    replied = threading.Event()
    threading.Thread(target=_await_reply, args=(launcher.stdout, replied), daemon=True).start()
    deadline = started + spec.timeout_s
    timed_out = False
    shown = None
    while not replied.wait(PROGRESS_EVERY_S):
        line = _last_line(log, start_at)
        if line and line != shown:
            shown = line
            post("progress", f"{spec.name}: {line}")
        if time.monotonic() > deadline and not timed_out:
            timed_out = True
            post("progress", f"{spec.name}: over its {spec.timeout_s:g} s: stopping it")
            launcher.stdin.close()  # the cell's watch ends: it stops the runner as on Ctrl-C
            deadline = time.monotonic() + STOP_GRACE_S
        elif timed_out and time.monotonic() > deadline:
            return failed(f"timed out after {spec.timeout_s:g} s and did not stop within {STOP_GRACE_S:g} s")
    if not launcher.stdin.closed:
        launcher.stdin.close()
    if timed_out:
        return failed(f"timed out after {spec.timeout_s:g} s (the cell's timeout_s); no packet")
    outcome = _collect(folder, host, log, started)
    if isinstance(outcome, str):
        return failed(outcome)
    post("done", f"{spec.name}: {outcome.packet_name}")
    return outcome


def _await_reply(pipe: IO[bytes], replied: threading.Event) -> None:
    """The cell process's one line, or the pipe's end when it died without writing it."""
    pipe.read()
    replied.set()


def _collect(folder: Path, host: str, log: Path, started: float) -> JobOutcome | str:
    """The packet the cell wrote, or why there is none."""
    try:
        result = cell_process.CellResult.model_validate_json((folder / cell_process.RESULT).read_bytes())
    except (OSError, ValueError) as error:
        return f"the cell process left no result ({error}): see the log"
    if result.rc != 0 or result.packet is None:
        return result.error or f"the runner exited with {result.rc}"
    packet_path = folder / cell_process.OUT / result.packet
    envelope_path = signature_path(packet_path)
    try:
        data = packet_path.read_bytes()
        envelope = envelope_path.read_bytes() if envelope_path.exists() else None
    except OSError as error:
        return f"cannot read the packet it wrote: {error.strerror}"
    return JobOutcome(
        host,
        str(log),
        ok=True,
        packet_name=result.packet,
        packet=data,
        envelope=envelope,
        key_id=result.key_id,
        key_entry=result.key_entry,
        seconds=time.monotonic() - started,
    )


run_job = ray.remote(measure_job)
