"""A load level from a `vllm bench serve --save-result --save-detailed` file: a speed-only curve.

vLLM's benchmark client writes, with --save-detailed, one entry per request in parallel lists:
`ttfts` and `latencies` (seconds), `output_lens`, `itls` (each request's token gaps, seconds),
`start_times` (when it was sent, its own clock) and `errors`. Those become the level's rows, so its
percentiles, rates and goodput are computed by catalog.model.load_sweep as for our own sweeps. What the file
does not hold stays unknown: no output is compared with the oracle (`identical_to_oracle` none),
and the client's planned schedule is not recorded, so a row's planned time is its send time; the
site never shows lag or client CPU for a curve that is not the runner's own (builder/views/load_sweep.py).

Which level a file is: `--max-concurrency N` a closed loop of N users; a finite `--request-rate`
without it an open loop at that rate. The default run (rate inf, no concurrency: every prompt at
once) is a burst, not a load level, and is refused, as is a file without the per-request lists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from catalog.errors import CatalogError
from catalog.model.load_sweep import LoadLevel, LoadRequest, LoadSweep, Percentiles, Slo
from catalog.store.documents import validation_error

PER_REQUEST = ("ttfts", "latencies", "output_lens", "itls", "start_times")


# the load model's field -> the vllm bench serve field it is made from
SOURCE_FIELD = {
    "ttft_ms": "ttfts",
    "e2e_ms": "latencies",
    "tpot_ms": "latencies",
    "output_tokens": "output_lens",
    "sent_ms": "start_times",
    "planned_ms": "start_times",
    "duration_s": "duration",
    "itl_ms": "itls",
    "p50_ms": "itls",  # the only percentiles made from the file: its token gaps
    "p90_ms": "itls",
    "p99_ms": "itls",
}


def _fail(path: Path, field: str, message: str) -> CatalogError:
    return CatalogError(message, file=path, field=field)


def _refused(path: Path, error: ValidationError, where: str = "") -> CatalogError:
    """A value the load model refuses, named by the source file's field (and request index)."""
    problem = validation_error(error, path, None)
    parts = str(problem.field or "ttfts").split(".")
    made = next((part for part in parts if part in SOURCE_FIELD), parts[0])
    field = SOURCE_FIELD.get(made, made) + where
    return _fail(path, field, f"makes an invalid load level: {problem.message}")


def _mode(data: Mapping[str, Any], path: Path) -> tuple[int | None, float | None]:
    users = data.get("max_concurrency")
    rate = data.get("request_rate", "inf")
    finite = isinstance(rate, int | float) and math.isfinite(rate)
    if users is not None and finite:
        raise _fail(path, "request_rate", "both a rate and --max-concurrency: neither a closed nor an open loop")
    if users is not None:
        return int(users), None
    if finite:
        return None, float(rate)
    raise _fail(
        path, "request_rate", "inf without --max-concurrency: every prompt at once is a burst, not a load level"
    )


def _request(index: int, data: Mapping[str, Any], first_sent: float, path: Path) -> LoadRequest:
    try:
        return _row(index, data, first_sent)
    except ValidationError as error:
        raise _refused(path, error, f"[{index}]") from None


def _row(index: int, data: Mapping[str, Any], first_sent: float) -> LoadRequest:
    error = (data.get("errors") or [""] * (index + 1))[index] or None
    sent_ms = round((data["start_times"][index] - first_sent) * 1000.0, 3)
    tokens = int(data["output_lens"][index])
    if error is not None:
        return LoadRequest(prompt_id=f"bench-{index}", planned_ms=sent_ms, sent_ms=sent_ms, error=str(error)[:200])
    ttft_ms = data["ttfts"][index] * 1000.0
    e2e_ms = data["latencies"][index] * 1000.0
    tpot_ms = (e2e_ms - ttft_ms) / (tokens - 1) if tokens >= 2 and e2e_ms > ttft_ms else None
    return LoadRequest(
        prompt_id=f"bench-{index}",
        planned_ms=sent_ms,
        sent_ms=sent_ms,
        ttft_ms=round(ttft_ms, 3),
        e2e_ms=round(e2e_ms, 3),
        output_tokens=tokens,
        tpot_ms=round(tpot_ms, 3) if tpot_ms else None,
    )


def bench_level(data: Mapping[str, Any], path: Path) -> LoadLevel:
    """One level from one file; a CatalogError naming the file and field when it cannot be one."""
    missing = [key for key in PER_REQUEST if not data.get(key)]
    if missing:
        raise _fail(path, missing[0], "no per-request lists (run vllm bench serve with --save-detailed): skipped")
    count = len(data["ttfts"])
    for key in PER_REQUEST:
        if len(data[key]) != count:
            raise _fail(path, key, f"holds {len(data[key])} entries, ttfts {count}")
    users, rate = _mode(data, path)
    first_sent = min(data["start_times"])
    gaps = [gap * 1000.0 for gaps in data["itls"] for gap in gaps]
    return LoadLevel(
        mode="closed" if users else "open",
        users=users,
        rate_rps=rate,
        duration_s=float(data["duration"]),
        client_cpu_s=0.0,  # not recorded by the source; never shown (module docstring)
        itl_ms=Percentiles.of(gaps),
        requests=[_request(i, data, first_sent, path) for i in range(count)],
    )


def _checked_level(path: Path, data: Mapping[str, Any]) -> LoadLevel:
    """bench_level, with a row the load model refuses (a negative time) named by its file."""
    try:
        return bench_level(data, path)
    except ValidationError as error:
        raise _refused(path, error) from None


def bench_sweep(files: Sequence[tuple[Path, Mapping[str, Any]]], slo: Slo | None = None) -> LoadSweep:
    """A speed-only sweep, one level per file, closed-loop levels by users then open-loop by rate;
    two files of one level (the same --max-concurrency or --request-rate) are refused."""
    levels = [(path, _checked_level(path, data)) for path, data in files]
    if not levels:
        raise CatalogError("no vllm bench serve file with per-request lists: no curve")
    counts = {len(level.requests) for _, level in levels}
    if len(counts) > 1:
        path, level = levels[-1]
        raise _fail(path, "num_prompts", f"{len(level.requests)} requests; every level of a curve needs the same count")
    first_of: dict[str, Path] = {}
    for path, level in levels:
        if level.label in first_of:
            field = "max_concurrency" if level.mode == "closed" else "request_rate"
            raise _fail(path, field, f"a second level of {level.label} (the first: {first_of[level.label]})")
        first_of[level.label] = path
    ordered = sorted(
        (level for _, level in levels), key=lambda lv: (lv.mode == "open", lv.users or 0, lv.rate_rps or 0)
    )
    # vllm bench serve does not record its arrival seed: 0 stands in, and the site does not show it
    return LoadSweep(seed=0, requests_per_level=counts.pop(), slo=slo or Slo(), levels=ordered)
