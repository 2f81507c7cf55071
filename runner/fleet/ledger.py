"""What the head knows of a campaign's jobs: their state per host, what to try again, what failed.

Pure bookkeeping, no Ray: runner/fleet/head.py feeds it every outcome Ray returns and asks it
what to do next. A job whose runner failed is tried again until it has had the plan's `attempts`
tries, then reported failed with every host and log path it ran on; a job whose host died was
already re-run elsewhere by Ray (`host_losses` times) and counts as one failed try once Ray gives
up. Nothing is retried for ever.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from runner.fleet.cells import Job


class JobState(StrEnum):
    DONE_BEFORE = "in packets/ already"
    WAITING = "waiting"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Try:
    host: str
    log: str
    error: str

    def __str__(self) -> str:
        return f"on {self.host} (log {self.log}): {self.error}"


@dataclass
class Entry:
    job: Job
    state: JobState
    host: str | None = None
    packet: str | None = None
    tries: list[Try] = field(default_factory=list)


class Ledger:
    def __init__(self, jobs: list[Job], done_before: dict[tuple[str, int], str], attempts: int) -> None:
        self.attempts = attempts
        self.entries: dict[str, Entry] = {}
        for job in jobs:
            packet = done_before.get((job.ref.cell, job.ref.repeat))
            state = JobState.DONE_BEFORE if packet else JobState.WAITING
            self.entries[job.name] = Entry(job, state, packet=packet)

    def to_run(self) -> list[Job]:
        return [e.job for e in self.entries.values() if e.state == JobState.WAITING]

    def started(self, name: str, host: str) -> None:
        entry = self.entries[name]
        if entry.state in (JobState.WAITING, JobState.RUNNING):
            entry.state, entry.host = JobState.RUNNING, host

    def succeeded(self, name: str, host: str, packet: str) -> None:
        entry = self.entries[name]
        entry.state, entry.host, entry.packet = JobState.DONE, host, packet

    def failed_try(self, name: str, host: str, log: str, error: str) -> bool:
        """Record a failed try; True when the job gets another one."""
        entry = self.entries[name]
        entry.tries.append(Try(host, log, error))
        if len(entry.tries) < self.attempts:
            entry.state, entry.host = JobState.WAITING, None
            return True
        entry.state, entry.host = JobState.FAILED, host
        return False

    def gave_up(self, name: str, error: str) -> None:
        """Failed without a try: no host can run it."""
        entry = self.entries[name]
        entry.tries.append(Try("no host", "-", error))
        entry.state = JobState.FAILED

    def failures(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.state == JobState.FAILED]

    def summary(self) -> str:
        """`2 done (host-a 1, host-b 1) · 1 running (host-b) · 3 waiting · 0 failed · 4 in packets/ already`."""
        counts = Counter(e.state for e in self.entries.values())
        done_on = Counter(e.host for e in self.entries.values() if e.state == JobState.DONE and e.host)
        running_on = sorted(e.host for e in self.entries.values() if e.state == JobState.RUNNING and e.host)
        failed_on = Counter(e.host for e in self.entries.values() if e.state == JobState.FAILED and e.host)
        parts = [
            f"{counts[JobState.DONE]} done" + _per_host(done_on),
            f"{counts[JobState.RUNNING]} running" + (f" ({', '.join(running_on)})" if running_on else ""),
            f"{counts[JobState.WAITING]} waiting",
            f"{counts[JobState.FAILED]} failed" + _per_host(failed_on),
        ]
        if counts[JobState.DONE_BEFORE]:
            parts.append(f"{counts[JobState.DONE_BEFORE]} in packets/ already")
        return " · ".join(parts)

    def report(self) -> list[str]:
        """The closing lines: every failed job with each try's host, log and error."""
        lines = []
        for entry in self.failures():
            tries = f"{len(entry.tries)} tr{'y' if len(entry.tries) == 1 else 'ies'}"
            lines.append(f"FAILED {entry.job.label} ({entry.job.name}) after {tries}:")
            lines += [f"  try {n} {attempt}" for n, attempt in enumerate(entry.tries, 1)]
        return lines


def _per_host(counts: Counter[str]) -> str:
    return f" ({', '.join(f'{host} {n}' for host, n in sorted(counts.items()))})" if counts else ""
