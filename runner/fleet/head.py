"""`python -m runner campaign run FILE [--address ...]`: the head of a fleet campaign.

The head expands and checks the plan (runner/fleet/cells.py), leaves out every job whose packet
is already in packets/ (a re-run resumes), and schedules each remaining job as one Ray task that
needs the job's card and a whole measuring host (`{"arc_pro_b70": tp, "measuring_host": 1}`, as
each host advertised with `ray start --resources`). Ray re-runs a task whose host died on another
host (`max_retries` = the plan's host_losses; Ray's "Fault tolerance: tasks": system failures
are retried, application exceptions are not unless asked). The task returns the packet's bytes
and signature (runner/fleet/task.py); the head verifies them as every reader does
(catalog/packets/verify.py) and writes them into packets/ under their content address. Progress
per host comes from a small actor the tasks post to (runner/fleet/board.py).

Without `--address` the head starts a Ray instance of its own on this machine, with this host's
cards as its resources: the same campaign then runs here, one cell at a time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.errors import CatalogError, CatalogErrors, UserError
from catalog.files import write_file
from catalog.model.packet import Packet
from catalog.packets.keys import KeyRing
from catalog.packets.layout import signature_path
from catalog.packets.verify import Refused, verify
from catalog.store.documents import dotted
from catalog.store.repository import Catalog
from runner.fleet.cells import Impossible, Job, expand, finished, jobs_of
from runner.fleet.hosts import card_resources, data_bundle
from runner.fleet.ledger import JobState, Ledger
from runner.fleet.plan_file import PlanFile
from runner.identity import repo_revision
from runner.settings import Progress

POLL_S = 2.0
# A card no live host advertises any more (its hosts died or left): how long the head waits for
# one to come back before the jobs that need it are reported failed.
NO_HOST_GRACE_S = 120.0
LOCAL_OBJECT_STORE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class HeadPlaces:
    data: Path
    packets: Path
    runs: Path


def refuse_impossible(planned: PlanFile, impossible: list[Impossible]) -> None:
    if not impossible:
        return
    problems = [
        CatalogError(
            f"cell {cell.label}: {cell.reason}", file=planned.path, field=dotted(cell.loc), line=planned.line(cell.loc)
        )
        for cell in impossible
    ]
    raise CatalogErrors(problems) if len(problems) > 1 else problems[0]


def accept(job: Job, name: str, data: bytes, envelope: bytes | None, keys: KeyRing, places: HeadPlaces) -> Packet:
    """Verify a returned packet exactly as every build will, then write it into packets/ (its
    signature first) under the name its bytes hash to. A packet of another job is refused."""
    if "/" in name or not name.endswith(".json"):
        raise CatalogError(f"a host returned a packet named {name!r}", field="packet")
    staged = places.runs / "fleet" / job.ref.name / "incoming" / name
    write_file(staged, data, durable=False)
    if envelope is not None:
        write_file(signature_path(staged), envelope, durable=False)
    else:
        signature_path(staged).unlink(missing_ok=True)
    checked = verify(staged, keys, allow_unsigned=True)
    if isinstance(checked, Refused):
        raise checked.problems[0]
    packet = checked.packet
    if packet.campaign != job.ref:
        raise CatalogError(
            f"is not the packet of {job.name}: it records {packet.campaign}", file=staged, field="campaign"
        )
    target = places.packets / name
    if envelope is not None:
        write_file(signature_path(target), envelope)
    write_file(target, data)
    staged.unlink(missing_ok=True)
    signature_path(staged).unlink(missing_ok=True)
    return packet


def connect(address: str | None, catalog: Catalog, progress: Progress) -> None:
    import ray

    # ray.init sets a SIGTERM handler of its own (sys.exit; ray/_private/worker.py, init): the
    # runner's (runner/cli.py) turns SIGTERM into Ctrl-C, so that an interrupted head cancels its
    # jobs and says how to resume. It is put back once Ray is connected.
    previous = signal.getsignal(signal.SIGTERM)
    if address is None:
        resources = card_resources(list(catalog.hardware.values()))
        progress(f"no --address: a Ray instance of this host's own, with its cards {resources}")
        ray.init(
            resources=resources,
            num_cpus=os.cpu_count() or 1,
            object_store_memory=LOCAL_OBJECT_STORE_BYTES,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    else:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


def _cluster_has(resources: dict[str, float]) -> str | None:
    """What no live host advertises enough of, or None."""
    import ray

    total: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    for name, amount in resources.items():
        if total.get(name, 0.0) < amount:
            return f"no host in the cluster advertises {name!r} x {amount:g}"
    return None


class Head:
    def __init__(
        self, planned: PlanFile, catalog: Catalog, places: HeadPlaces, round_name: str | None, progress: Progress
    ) -> None:
        self.planned, self.catalog, self.places, self.progress = planned, catalog, places, progress
        self.plan = planned.plan
        cells, impossible = expand(planned, catalog, places.data)
        refuse_impossible(planned, impossible)
        self.cells = cells
        self.jobs = jobs_of(cells, self.plan, round_name)
        self.ledger = Ledger(self.jobs, finished(catalog.packets, self.plan, round_name), self.plan.attempts)
        self.round = round_name
        self.told_keys: set[str] = set()
        self.last_summary = ""
        self.running: dict[Any, Job] = {}  # Ray's reference of each task in flight -> its job

    def say_summary(self) -> None:
        summary = self.ledger.summary()
        if summary != self.last_summary:
            self.last_summary = summary
            self.progress(summary)

    def run(self, address: str | None) -> int:
        plan = self.plan
        todo = self.ledger.to_run()
        self.progress(
            f"campaign {plan.name}{' round ' + self.round if self.round else ''}: {len(self.cells)} cell(s) x "
            f"{plan.repeats} repeat(s) = {len(self.jobs)} job(s); {len(self.jobs) - len(todo)} already in "
            f"{self.places.packets}, {len(todo)} to measure"
        )
        if not todo:
            return 0
        import ray

        connect(address, self.catalog, self.progress)
        try:
            return self._dispatch(todo)
        except KeyboardInterrupt:
            for ref in self.running:  # their workers end, and each cell process stops its runner
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            done = sum(e.state in (JobState.DONE, JobState.DONE_BEFORE) for e in self.ledger.entries.values())
            self.progress(
                f"interrupted: {done} of {len(self.jobs)} job(s) are in {self.places.packets}; the running ones were "
                "stopped on their hosts. Run the same command again to resume."
            )
            return 130
        finally:
            with contextlib.suppress(Exception):
                ray.shutdown()

    def _submit(self, job: Job, board: Any, spec_of: Any, running: dict[Any, Job]) -> None:
        from runner.fleet.task import run_job

        reason = _cluster_has(job.cell.resources())
        if reason is not None:
            hint = "a host advertises its cards with `ray start --resources=...`, docs/fleet.md"
            self.ledger.gave_up(job.name, f"{reason} ({hint})")
            self.progress(f"{job.name}: cannot run: {reason}")
            return
        ref = run_job.options(
            resources=job.cell.resources(),
            num_cpus=0,
            max_retries=self.plan.host_losses,
            retry_exceptions=False,
            name=f"measure {job.name}",
        ).remote(spec_of(job), board)
        running[ref] = job

    def _dispatch(self, todo: list[Job]) -> int:
        import ray

        from runner.fleet.board import new_board
        from runner.fleet.task import JobSpec

        board = new_board()
        bundle = data_bundle(self.places.data)
        revision = repo_revision()

        def spec_of(job: Job) -> JobSpec:
            return JobSpec(
                name=job.name,
                label=job.label,
                ref=job.ref,
                request=job.request(),
                runtime=job.cell.runtime,
                timeout_s=job.cell.timeout_s,
                health_timeout_s=self.plan.health_timeout_s,
                data=bundle,
                revision=revision,
            )

        running = self.running
        for job in todo:
            self._submit(job, board, spec_of, running)
        seen_events, life = 0, ""
        missing_since: dict[str, float] = {}
        self.say_summary()
        while running:
            ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL_S)
            answer: tuple[str, list[dict[str, str]]] = ray.get(board.since.remote(life, seen_events))
            now_life, events = answer
            if now_life != life:
                life, seen_events = now_life, 0
            seen_events += len(events)
            for event in events:
                self._event(event)
            for ref in ready:
                job = running.pop(ref)
                if self._finished(job, ref):
                    self._submit(job, board, spec_of, running)
            self._drop_unhostable(running, missing_since)
            self.say_summary()
        for line in self.ledger.report():
            self.progress(line)
        failed = self.ledger.failures()
        if failed:
            raise UserError(
                f"{len(failed)} of {len(self.jobs)} job(s) failed: each try's host and log are listed above"
            )
        self.progress(f"campaign {self.plan.name}: every job is in {self.places.packets}")
        return 0

    def _event(self, event: dict[str, str]) -> None:
        host, kind = event["host"], event["kind"]
        if kind == "started":
            self.ledger.started(event["job"], host)
        if kind != "failed":  # a failure is reported once, by the outcome
            self.progress(f"{host}: {event['text']}")

    def _finished(self, job: Job, ref: Any) -> bool:
        """Take a task's result; True when the job is to be tried again."""
        import ray

        entry = self.ledger.entries[job.name]
        try:
            outcome = ray.get(ref)
        except ray.exceptions.RayError as error:
            host = entry.host or "unknown host"
            message = str(error).strip().splitlines()[0]
            return self._failed(job, host, "-", f"lost after Ray's retries ({type(error).__name__}): {message}")
        if not outcome.ok:
            return self._failed(job, outcome.host, outcome.log, outcome.error or "failed")
        try:
            name = outcome.packet_name or ""
            packet = accept(job, name, outcome.packet, outcome.envelope, self.catalog.keys, self.places)
        except UserError as error:
            return self._failed(job, outcome.host, outcome.log, f"its packet is refused: {error}")
        self.ledger.succeeded(job.name, outcome.host, packet.id)
        self.progress(f"{outcome.host}: {job.name} sealed {packet.id} -> {self.places.packets / (packet.id + '.json')}")
        self._tell_key(outcome)
        return False

    def _failed(self, job: Job, host: str, log: str, error: str) -> bool:
        again = self.ledger.failed_try(job.name, host, log, error)
        tries = len(self.ledger.entries[job.name].tries)
        what = f"trying again ({tries} of {self.plan.attempts} tries used)" if again else "no tries left"
        self.progress(f"{host}: {job.name} failed (log {log}): {error}; {what}")
        return again

    def _tell_key(self, outcome: Any) -> None:
        key_id = outcome.key_id
        if key_id and key_id not in self.catalog.keys.by_id() and key_id not in self.told_keys:
            self.told_keys.add(key_id)
            self.progress(
                f"{outcome.host} signs with key {key_id[:12]}, which data/keys.yaml does not list yet: add these "
                f"lines there so builds accept its packets:\n{outcome.key_entry or ''}"
            )

    def _drop_unhostable(self, running: dict[Any, Job], missing_since: dict[str, float]) -> None:
        """Jobs whose card no live host advertises any more wait NO_HOST_GRACE_S for one, then fail."""
        import ray

        now = time.monotonic()
        for ref, job in list(running.items()):
            reason = _cluster_has(job.cell.resources())
            if reason is None:
                missing_since.pop(job.name, None)
                continue
            since = missing_since.setdefault(job.name, now)
            if now - since > NO_HOST_GRACE_S:
                ray.cancel(ref, force=True)
                running.pop(ref)
                self.ledger.gave_up(job.name, f"{reason} any more (waited {NO_HOST_GRACE_S:g} s)")
                self.progress(f"{job.name}: cannot run: {reason} any more")
