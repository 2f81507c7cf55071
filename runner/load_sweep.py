"""The load sweep (LADDERS=load): many users at once on the arm's fresh ladder server, every
output compared with the sequential oracle's.

Closed-loop levels first (N users, each sending its next request when its last one finished),
then open-loop levels (requests launched by the event loop at their Poisson arrival times,
whether or not earlier ones finished). Request k of a level sends prompt k mod the suite's
prompt count. The data model and every definition (percentiles, TPOT, goodput, the lag bound)
are catalog/model/load_sweep.py's; this module schedules, times and records.

Resumable like the other ladders: each finished level is kept in the arm's run folder and
reused by a rerun of the same campaign.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from time import perf_counter

import httpx
from pydantic import TypeAdapter, ValidationError

from catalog.checks.energy import level_tokens
from catalog.files import write_file
from catalog.model.load_sweep import LoadLevel, LoadRequest, LoadSweep, Percentiles, poisson_offsets_ms
from catalog.model.metrics import arrival_gaps, first_divergence
from catalog.model.packet import Ladder, PromptRow
from catalog.packets.canonical import pretty_json
from runner.attempt import arm_cards
from runner.client import ClientError, StreamResult, new_http_client, stream_completion
from runner.energy.meter import describe
from runner.load_sweep_metrics import MetricsSampler
from runner.plan import LOAD_RATE_FRACTIONS, ArmPlan, LoadSweepOptions
from runner.settings import MeasurementSettings, Progress

# send(index, due_ms) -> the request's row and when its last byte arrived (perf_counter)
Send = Callable[[int, float], Awaitable[tuple[LoadRequest, float]]]
_LEVELS = TypeAdapter(list[LoadLevel])


def levels_path(run_dir: Path, arm_id: str) -> Path:
    return run_dir / arm_id / "ladder-load-levels.json"


def read_finished_levels(path: Path) -> list[LoadLevel]:
    """Levels a previous run of this campaign finished; an unreadable record is measured again."""
    try:
        return _LEVELS.validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return []


async def run_load_sweep(
    base_url: str,
    arm: ArmPlan,
    oracle_rows: list[PromptRow],
    settings: MeasurementSettings,
    options: LoadSweepOptions,
    max_num_seqs: int,
    kept_path: Path,
    progress: Progress,
    alone_tok_s: Sequence[float] = (),
) -> Ladder:
    """Every closed-loop level that fits, then every open-loop rate; each finished level is
    written to `kept_path` before the next starts. `alone_tok_s`: the arm's fresh servers'
    single-stream decode rates, which its progress lines hold each level's per-user rate to."""
    kept = read_finished_levels(kept_path) if kept_path.exists() else []
    levels: list[LoadLevel] = []
    oracle = {row.prompt_id: row.token_ids.tolist() for row in oracle_rows}  # arrays never equal lists
    prompt_tokens = {row.prompt_id: row.prompt_tokens for row in oracle_rows}
    runner = LevelRunner(base_url, arm.command.model_id, oracle, settings, options)

    async def level_of(mode: str, users: int | None, rate: float | None) -> LoadLevel:
        match = next((k for k in kept if (k.mode, k.users, k.rate_rps) == (mode, users, rate)), None)
        if match is not None and len(match.requests) == options.requests_per_level:
            progress(f"{arm.id} load {match.label}: finished earlier, reusing")
            return match
        level = await (runner.closed(users) if users is not None else runner.open(rate or 0.0))
        if settings.energy is not None:
            start, end = runner.span
            served = level_tokens(level, prompt_tokens)
            energy = await asyncio.to_thread(settings.energy.window, start, end, arm_cards(arm), served)
            level = level.model_copy(update={"energy": energy})
        line = level_line(arm.id, level, options, alone_tok_s)
        progress(line + (f"; {describe(level.energy)}" if settings.energy else ""))
        if not level.completed:
            raise ClientError(f"every request at {level.label} failed: {level.requests[0].error}")
        return level

    for users in options.users:
        if users > max_num_seqs:
            progress(f"{arm.id} load {users} users: skipped, the server runs at most {max_num_seqs} sequences")
            continue
        if users > options.requests_per_level:
            progress(f"{arm.id} load {users} users: skipped, more users than the {options.requests_per_level} requests")
            continue
        levels.append(await level_of("closed", users, None))
        _keep(kept_path, levels)
    rates, basis = open_rates(options, levels)
    if basis is not None:
        progress(
            f"{arm.id} load: open-loop rates {', '.join(f'{r:g}' for r in rates)} req/s, fractions of the "
            f"{basis.label} level's {request_rate(basis):.3g} req/s"
        )
    for rate in rates:
        levels.append(await level_of("open", None, rate))
        _keep(kept_path, levels)
    sweep = LoadSweep(
        seed=options.seed,
        requests_per_level=options.requests_per_level,
        slo=options.slo,
        lag_bound_ms=options.lag_bound_ms,
        open_rates_from_users=basis.users if basis is not None else None,
        levels=levels,
    )
    return Ladder(arm=arm.id, kind="load", load=sweep)


def request_rate(level: LoadLevel) -> float:
    """Completed requests per second over the level."""
    return len(level.completed) / level.duration_s


def open_rates(options: LoadSweepOptions, closed: list[LoadLevel]) -> tuple[list[float], LoadLevel | None]:
    """The rates asked for, or LOAD_RATE_FRACTIONS of the highest closed-loop level's request rate
    (and that level)."""
    if options.rates_rps is not None:
        return list(options.rates_rps), None
    if not closed:
        raise ClientError("no closed-loop level ran, so no open-loop rate can be derived: give --rates")
    basis = closed[-1]
    rates = sorted({round(fraction * request_rate(basis), 3) for fraction in LOAD_RATE_FRACTIONS} - {0.0})
    return rates, basis


def level_line(arm_id: str, level: LoadLevel, options: LoadSweepOptions, alone_tok_s: Sequence[float]) -> str:
    """One progress line per level: what a reader checks first."""
    per_user = level.per_user_tok_s
    ttft = level.ttft
    parts = [
        f"{level.aggregate_tok_s:.1f} tok/s aggregate",
        f"{per_user:.1f} tok/s per user" if per_user is not None else "no per-user rate",
        f"TTFT p99 {ttft.p99_ms:.0f} ms" if ttft is not None else "no TTFT",
        f"goodput {level.goodput(options.slo):.0%}",
        f"{level.identical}/{len(level.requests)} identical to the oracle",
        f"{level.failed} failed",
        f"lag p99 {level.lag.p99_ms:.1f} ms",
    ]
    line = f"{arm_id} load {level.label}: " + ", ".join(parts)
    unusable = level.unusable_because(options.lag_bound_ms, alone_tok_s)
    return line if unusable is None else f"{line}; UNUSABLE: {unusable}"


def _keep(path: Path, levels: list[LoadLevel]) -> None:
    write_file(path, pretty_json([level.model_dump(mode="json") for level in levels]))


class LevelRunner:
    """Runs one level at a time: the schedule, the requests, the client's CPU and /metrics.
    `oracle` maps prompt ids to the sequential oracle's token ids (bench/ passes none)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        oracle: dict[str, list[int]],
        settings: MeasurementSettings,
        options: LoadSweepOptions,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.oracle = oracle
        self.settings = settings
        self.options = options
        self.started = 0.0  # perf_counter() when the running level's clock started
        self.span = (0.0, 0.0)  # the last level's window: first planned send to last request finished

    async def closed(self, users: int) -> LoadLevel:
        count = self.options.requests_per_level
        rows: list[LoadRequest | None] = [None] * count
        taken = 0

        async def user(send: Send) -> None:
            nonlocal taken
            due = 0.0
            while taken < count:
                index, taken = taken, taken + 1
                rows[index], finished_at = await send(index, due)
                due = round((finished_at - self.started) * 1000.0, 3)  # the next one is due now

        async def schedule(send: Send) -> None:
            await asyncio.gather(*(user(send) for _ in range(users)))

        return await self._level(users, schedule, rows, mode="closed", users=users)

    async def open(self, rate: float) -> LoadLevel:
        offsets = poisson_offsets_ms(rate, self.options.requests_per_level, self.options.seed)
        rows: list[LoadRequest | None] = [None] * len(offsets)

        async def launch(send: Send, index: int, due: float) -> None:
            rows[index], _ = await send(index, due)

        async def schedule(send: Send) -> None:
            launched = []
            for index, due in enumerate(offsets):
                wait = self.started + due / 1000.0 - perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                launched.append(asyncio.create_task(launch(send, index, due)))
            await asyncio.gather(*launched)

        return await self._level(len(offsets), schedule, rows, mode="open", rate_rps=rate)

    async def _level(
        self,
        connections: int,
        schedule: Callable[[Send], Awaitable[None]],
        rows: list[LoadRequest | None],
        **kind: object,
    ) -> LoadLevel:
        prompts = self.settings.suite.prompts
        gaps: list[float] = []
        finished: list[float] = []
        async with new_http_client(max_in_flight=connections) as http:
            await _open_connections(http, self.base_url, min(connections, 64))
            sampler = MetricsSampler(self.base_url)
            await sampler.start()
            cpu_started = time.process_time()
            self.started = perf_counter()

            async def send(index: int, due_ms: float) -> tuple[LoadRequest, float]:
                prompt = prompts[index % len(prompts)]
                launched = perf_counter()
                try:
                    settings = self.settings
                    result = await stream_completion(
                        self.base_url, self.model, prompt.prompt, settings.max_tokens, settings.seed, http=http
                    )
                except ClientError as error:
                    finished.append(perf_counter())
                    sent = round((launched - self.started) * 1000.0, 3)
                    line = (str(error).splitlines() or [type(error).__name__])[0]
                    failed = LoadRequest(prompt_id=prompt.id, planned_ms=due_ms, sent_ms=max(sent, due_ms), error=line)
                    return failed, finished[-1]
                finished.append(result.sent_at + result.e2e_s)
                gaps.extend(_gaps_ms(result.token_times_s))
                return request_row(prompt.id, due_ms, result, self.started, self.oracle.get(prompt.id)), finished[-1]

            await schedule(send)
            cpu_s = time.process_time() - cpu_started
            server = await sampler.stop()
        first_due = min(row.planned_ms for row in rows if row is not None) / 1000.0
        duration = max(finished) - self.started - first_due
        self.span = (self.started + first_due, max(finished))
        return LoadLevel(
            duration_s=max(duration, 1e-6),
            client_cpu_s=cpu_s,
            itl_ms=Percentiles.of(gaps),
            requests=[row for row in rows if row is not None],
            server=server,
            **kind,
        )


def request_row(
    prompt_id: str, due_ms: float, result: StreamResult, level_started: float, expected: list[int] | None
) -> LoadRequest:
    """One completed request: its times from the client's per-token times, its identity with
    the oracle's token ids for the same prompt."""
    times = result.token_times_s
    tpot = None
    if len(times) >= 2 and times[-1] > times[0]:
        tpot = round((times[-1] - times[0]) / (len(times) - 1) * 1000.0, 6)
    divergence = first_divergence(result.token_ids, expected) if expected is not None else None
    sent = round((result.sent_at - level_started) * 1000.0, 3)
    return LoadRequest(
        prompt_id=prompt_id,
        planned_ms=due_ms,
        sent_ms=max(sent, due_ms),  # never earlier: it was sent after it was due, rounding aside
        ttft_ms=round(result.ttft_s * 1000.0, 3),
        e2e_ms=round(result.e2e_s * 1000.0, 3),
        output_tokens=result.completion_tokens,
        tpot_ms=tpot,
        reads=len(set(times)) or None,
        identical_to_oracle=None if expected is None else divergence is None,
        first_divergence=divergence,
    )


def _gaps_ms(times: Sequence[float]) -> list[float]:
    """The stream's ITL samples in milliseconds: gaps between distinct arrivals
    (catalog.model.metrics.arrival_gaps), never the zero gaps inside a chunk."""
    return [gap * 1000.0 for gap in arrival_gaps(times)]


async def _open_connections(http: httpx.AsyncClient, base_url: str, count: int) -> None:
    """Open the level's connections before its clock starts, so connecting is not counted as
    schedule lag (GET /health, answered or not, leaves a kept-alive connection in the pool)."""

    async def touch() -> None:
        with contextlib.suppress(httpx.HTTPError):
            await (await http.get(base_url.rstrip("/") + "/health")).aread()

    await asyncio.gather(*(touch() for _ in range(count)))
