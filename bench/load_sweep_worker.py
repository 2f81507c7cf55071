"""Drive the runner's load sweep (runner.load_sweep.LevelRunner, as `LADDERS=load` runs it) against
a server, as a subprocess of the benchmark, so its CPU time is its own.

    python -m bench.load_sweep_worker     # then one JSON run per line on stdin

It prints `READY` once imported. Each line read is one level: {"base_url", "model", "mark_url" or
null, "label", "users" or "rate_rps", "requests", "max_tokens"}. It answers with one line
`LOAD-RUN {json}`: the level's schedule lag (p50/p99, ms), the client's CPU time over the level
(time.process_time, as the packet records it), requests, failures and output tokens, and the
perf_counter time the level's clock started (planned times count from it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from bench.client_worker import _mark
from runner.load_sweep import LevelRunner
from runner.plan import LoadSweepOptions
from runner.settings import MeasurementSettings
from testkit.samples import canary_set, strict_suite


async def run_level(run: dict[str, Any]) -> dict[str, Any]:
    options = LoadSweepOptions(requests_per_level=int(run["requests"]))
    settings = MeasurementSettings(strict_suite(), canary_set(), int(run["max_tokens"]), 1234, 60.0)
    runner = LevelRunner(run["base_url"], run["model"], {}, settings, options)
    users, rate = run.get("users"), run.get("rate_rps")
    level = await (runner.closed(int(users)) if users else runner.open(float(rate or 0.0)))
    lag = level.lag
    return {
        "label": run["label"],
        "started": runner.started,
        "duration_s": level.duration_s,
        "cpu_s": level.client_cpu_s,
        "requests": len(level.requests),
        "failed": level.failed,
        "tokens": level.output_tokens,
        "lag_p50_ms": lag.p50_ms,
        "lag_p99_ms": lag.p99_ms,
        "lag_max_ms": max(r.lag_ms for r in level.requests),
    }


def main() -> None:
    print("READY", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        run = json.loads(line)
        _mark(run.get("mark_url"), str(run["label"]))
        print("LOAD-RUN " + json.dumps(asyncio.run(run_level(run))), flush=True)


if __name__ == "__main__":
    main()
