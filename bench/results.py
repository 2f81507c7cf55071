"""bench/results.json: one typed document per benchmark run.

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


class Results(_Strict):
    schema_version: Literal[1] = 1
    created: datetime
    quick: bool
    command: str
    duration_s: float | None = None
    skipped: list[str] = []
    host: Host
    benchmarks: list[Benchmark] = []

    def targets(self) -> list[tuple[Benchmark, Figure]]:
        return [(b, f) for b in self.benchmarks for f in b.figures if f.target is not None]

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False) + "\n"
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> Results:
        return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
