"""The server's /metrics during one load level: gauge peaks and counter deltas.

A background task scrapes every SAMPLE_INTERVAL_S on the level's event loop. Only the lines
of the few metrics a level records are parsed (a vLLM exposition has hundreds), so a scrape
costs the scheduler well under a millisecond. A server without /metrics, or without one of
the metrics, leaves those figures None: the level is still measured.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import httpx

from catalog.model.load_sweep import LoadServerMetrics
from runner.client import new_http_client
from runner.metrics_scrape import SPEC_ACCEPTED_TOKENS, SPEC_DRAFT_TOKENS, MetricsError, parse_exposition

SAMPLE_INTERVAL_S = 0.1
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
PREEMPTIONS = "vllm:num_preemptions_total"
GAUGES = (RUNNING, WAITING, KV_CACHE_USAGE)
COUNTERS = (PREEMPTIONS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED_TOKENS)
_WANTED = tuple(f"{name}{end}" for name in (*GAUGES, *COUNTERS) for end in ("{", " "))


def read_wanted(text: str) -> dict[str, float]:
    """The wanted metrics of one exposition, each summed over its label sets (engines)."""
    lines = "\n".join(line for line in text.splitlines() if line.startswith(_WANTED))
    totals: dict[str, float] = {}
    for sample in parse_exposition(lines):
        totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


@dataclass
class MetricsSummary:
    """Every scrape of one level folded in: gauge peaks, first and last counter values."""

    peaks: dict[str, float] = field(default_factory=dict)
    first: dict[str, float] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    scrapes: int = 0

    def add(self, values: dict[str, float]) -> None:
        self.scrapes += 1
        for name in GAUGES:
            if name in values:
                self.peaks[name] = max(self.peaks.get(name, 0.0), values[name])
        for name in COUNTERS:
            if name in values:
                self.first.setdefault(name, values[name])
                self.last[name] = values[name]

    def metrics(self) -> LoadServerMetrics | None:
        if not self.scrapes:
            return None

        def delta(name: str) -> int | None:
            if name not in self.last:
                return None
            return max(0, round(self.last[name] - self.first[name]))

        usage = self.peaks.get(KV_CACHE_USAGE)
        return LoadServerMetrics(
            peak_running=self.peaks.get(RUNNING),
            peak_waiting=self.peaks.get(WAITING),
            peak_kv_cache_usage=min(usage, 1.0) if usage is not None else None,
            preemptions=delta(PREEMPTIONS),
            spec_drafted_tokens=delta(SPEC_DRAFT_TOKENS),
            spec_accepted_tokens=delta(SPEC_ACCEPTED_TOKENS),
        )


class MetricsSampler:
    """`await start()` scrapes once (the counters' baseline) and keeps scraping; `await stop()`
    scrapes a last time and returns the level's figures (None when no scrape succeeded)."""

    def __init__(self, base_url: str, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.interval_s = interval_s
        self.summary = MetricsSummary()
        self._http: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._http = new_http_client(max_in_flight=1, timeout_s=5.0)
        await self._scrape()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> LoadServerMetrics | None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._scrape()
        if self._http is not None:
            await self._http.aclose()
        return self.summary.metrics()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self._scrape()

    async def _scrape(self) -> None:
        assert self._http is not None
        try:
            response = await self._http.get(self.url)
            if response.status_code == 200:
                self.summary.add(read_wanted(response.text))
        except (httpx.HTTPError, MetricsError):
            pass  # a missed scrape costs a sample, not the level
