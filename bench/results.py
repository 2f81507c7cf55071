"""bench/results.json: one typed document per benchmark run (after `--only`, that run's groups and
the other groups' figures kept, each with the run that measured it: Results.merged_into).

Every benchmark is a list of figures; a figure compared with a peer carries both values and the
ratio ours / peer, and `advantage` (the ratio, inverted when lower is better) so > 1 always means
ours does better. A figure with a target says whether this run met it.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

SCHEMA_VERSION = 1
Group = Literal["client", "agreement", "load", "measurement", "builder", "browser"]
# `python -m bench --only`'s groups, in the order a run measures them (the vLLM start overlaps the
# catalog generation); the client group measures the agreement benchmarks too (run_group).
GROUPS = ("measurement", "client", "load", "builder", "browser")
NOT_SELECTED = "not selected (--only)"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Figure(_Strict):
    name: str
    unit: str
    ours: float | None
    peer: float | None = None
    ratio: float | None = None  # ours / peer
    better: Literal["higher", "lower", "closer"] = "higher"
    advantage: float | None = None  # > 1: ours does better than the peer
    target: str | None = None
    met: bool | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _derive_ratio(self) -> Figure:
        if self.ours is not None and self.peer not in (None, 0) and self.ratio is None:
            assert self.peer is not None
            self.ratio = self.ours / self.peer
        if self.ratio not in (None, 0) and self.advantage is None and self.better != "closer":
            assert self.ratio is not None
            self.advantage = self.ratio if self.better == "higher" else 1.0 / self.ratio
        return self


class Benchmark(_Strict):
    id: str
    group: Group
    title: str
    peer: str | None = None
    figures: list[Figure]
    details: dict[str, Any] = {}

    def figure(self, name: str) -> Figure:
        return next(f for f in self.figures if f.name == name)


class Host(_Strict):
    cpu_count: int
    cpu_model: str
    memory_gb: float
    python: str
    vllm: str | None
    load_average_start: list[float]
    load_average_end: list[float] | None = None


def run_group(benchmark: Benchmark) -> str:
    """The group (GROUPS) whose run measures `benchmark`."""
    return "client" if benchmark.group == "agreement" else benchmark.group


class EarlierRun(_Strict):
    """A run whose benchmarks a document keeps: `python -m bench --only` re-measures only the
    groups it selects and keeps the others' figures, each with the run that measured it."""

    created: datetime
    command: str
    groups: list[str]
    benchmarks: list[str]  # ids
    host: Host


class Results(_Strict):
    """One run's figures (created, command, host, duration: that run's), and the figures of the
    groups it did not measure kept from earlier runs (earlier_runs says which run measured which
    group). `skipped`: the groups the document has no figures for and why, and the groups this run
    failed to re-measure."""

    schema_version: Literal[1] = 1
    created: datetime
    quick: bool
    command: str
    duration_s: float | None = None
    skipped: list[str] = []
    host: Host
    benchmarks: list[Benchmark] = []
    earlier_runs: list[EarlierRun] = []

    def targets(self) -> list[tuple[Benchmark, Figure]]:
        return [(b, f) for b in self.benchmarks for f in b.figures if f.target is not None]

    def skip(self, group: str, why: str) -> None:
        self.skipped.append(f"{group}: {why}"[:500])

    def merged_into(self, earlier: Results) -> Results:
        """This run's benchmarks in place of every benchmark of the groups it measured; every other
        group's kept from `earlier`, with the run it came from in earlier_runs. A group this run
        measured is replaced whole (an id it no longer makes is dropped, never mixed in). A kept
        group is not listed as skipped; one this run failed to re-measure says whose figures stay."""
        if earlier.quick != self.quick:
            raise ValueError("a quick run and a full run are never merged: their sizes differ")
        measured = {run_group(b) for b in self.benchmarks}
        kept = [b for b in earlier.benchmarks if run_group(b) not in measured]
        runs = [*earlier.earlier_runs, _as_earlier(earlier)]
        earlier_runs = [r for r in (_restricted(run, kept) for run in runs) if r is not None]
        kept_groups = {run_group(b) for b in kept}

        def still_skipped(entry: str) -> str | None:
            group, _, why = entry.partition(": ")
            if group not in kept_groups:
                return entry
            if why == NOT_SELECTED:
                return None
            source = next(r for r in earlier_runs if group in r.groups)
            return f"{entry} (the figures shown are the run of {source.created:%Y-%m-%d %H:%M} UTC)"

        return self.model_copy(
            update={
                "benchmarks": sorted([*kept, *self.benchmarks], key=lambda b: GROUPS.index(run_group(b))),
                "earlier_runs": earlier_runs,
                "skipped": [e for e in map(still_skipped, self.skipped) if e is not None],
            }
        )

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False) + "\n"
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> Results:
        return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))


def _as_earlier(results: Results) -> EarlierRun:
    """The run that wrote `results`, credited with every benchmark no earlier run of it claims."""
    claimed = {i for run in results.earlier_runs for i in run.benchmarks}
    ids = [b.id for b in results.benchmarks if b.id not in claimed]
    groups = [run_group(b) for b in results.benchmarks if b.id not in claimed]
    return EarlierRun(
        created=results.created,
        command=results.command,
        groups=list(dict.fromkeys(groups)),
        benchmarks=ids,
        host=results.host,
    )


def _restricted(run: EarlierRun, kept: list[Benchmark]) -> EarlierRun | None:
    """`run`'s record of the benchmarks in `kept`, or None when it keeps none."""
    ids = [b.id for b in kept if b.id in run.benchmarks]
    if not ids:
        return None
    groups = [run_group(b) for b in kept if b.id in ids]
    return run.model_copy(update={"benchmarks": ids, "groups": list(dict.fromkeys(groups))})
