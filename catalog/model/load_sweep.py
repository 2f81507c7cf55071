"""The load sweep: many users at once, every output still checked against the oracle.

A sweep runs levels on one fresh server: closed-loop levels (N users, each sending its next
request when the last one finished) and open-loop levels (requests sent at Poisson arrivals of a
fixed rate and seed, whether or not earlier ones finished). Each level keeps one row per request,
so a reader can recompute every percentile, rate and goodput figure from the packet; only the
inter-token latency percentiles (over the level's gaps between distinct arrivals: one per chunk,
catalog.model.metrics.arrival_gaps) are stored as measured.

Definitions (the one home of each; docs/measuring.md explains them for readers):
- percentiles interpolate linearly between the closest ranks (numpy's default "linear" method);
- a request's decode rate is (tokens - 1) / (last token time - first token time), its TPOT the
  inverse in milliseconds; both need two token times that differ;
- goodput is the share of a level's *planned* requests that completed and met every SLO given;
- a response was read in bursts (catalog.model.delivery) when its two or more tokens arrived in
  one read, or in reads of more than TOKENS_PER_READ_BOUND tokens on average: its tokens reached
  the client later than the server made them, so its decode rate is the delivery's;
- a level is usable when its p99 schedule lag is within the sweep's lag bound and no response was
  read in bursts: otherwise the client (or the server's API process), not the engine, set the pace,
  and its figures say nothing about the engine; nor when its per-user rate is over ALONE_BOUND times
  the arm's single-stream rate (its faster fresh server's): one user alone is the fastest any user
  of that configuration is served, so such rates are not the engine's either;
- a level's per-user decode rate is the median of its requests' decode rates, and there is none
  when any response was read in bursts (the same delays timed the others too).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from catalog.model.base import FieldError, StrictModel
from catalog.model.delivery import read_in_bursts
from catalog.model.energy import EnergyWindow

ALONE_BOUND = 2.0
"""How many times the arm's single-stream rate a user at load may be served before the level is
unusable. Batching shares every engine step among the users in flight, so no user is served faster
than one alone on the same configuration; the rates differ only by the window (tokens 1..100 alone,
the whole completion at load: slower) and by the host's speed between the arm's servers and the
sweep's. Physics (catalog/checks/physics.py) bounds a rate by the card's ceiling, which on a CPU host
is about 20 times what it serves: this bound is the one a rate forged on such a host meets first."""

LAG_BOUND_MS = 10.0
"""Default schedule-lag bound (p99, milliseconds). Arrivals of a 64-user level on a fast card are a
few milliseconds apart; a client later than this has reshaped the load it was asked to send."""


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of values, interpolating linearly between closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def poisson_offsets_ms(rate_rps: float, count: int, seed: int) -> list[float]:
    """Planned send times (ms after the level starts) of `count` Poisson arrivals at `rate_rps`:
    exponential gaps drawn from `random.Random(seed)`, the first request at its first gap.
    The same rate, count and seed always give the same schedule, so a replay sends the same load."""
    if rate_rps <= 0:
        raise ValueError("rate must be positive")
    draw = random.Random(seed)  # noqa: S311 -- a reproducible schedule, not a secret
    offsets, at = [], 0.0
    for _ in range(count):
        at += draw.expovariate(rate_rps) * 1000.0
        offsets.append(round(at, 3))
    return offsets


TIME_SLACK = 0.01
"""Relative slack for comparing a request's times with each other and with its level: each is
rounded to the microsecond and read from one client clock, so 1% (plus 1 ms) is only rounding."""


def _most_in_flight(requests: Sequence[LoadRequest]) -> int:
    """The most requests sent and not yet finished at one moment (a request that ends exactly when
    another is sent is not counted twice: the closed loop's next request follows its previous one)."""
    events = []
    for r in requests:
        if r.e2e_ms is not None:
            # 1 ms early: the next request of a user is due when the last one's stream closed,
            # and both times are rounded to the microsecond; never before its own sending (a
            # request under 1 ms would otherwise take one off the others in flight)
            events += [(max(r.sent_ms, r.sent_ms + r.e2e_ms - 1.0), -1), (r.sent_ms, 1)]
    most = current = 0
    for _, step in sorted(events):  # at equal times the end (-1) sorts before the start
        current += step
        most = max(most, current)
    return most


class Percentiles(StrictModel):
    """p50, p90 and p99 of one latency, in milliseconds."""

    p50_ms: float = Field(ge=0, description="median, milliseconds")
    p90_ms: float = Field(ge=0, description="90th percentile, milliseconds")
    p99_ms: float = Field(ge=0, description="99th percentile, milliseconds")

    @classmethod
    def of(cls, values: Sequence[float]) -> Percentiles | None:
        if not values:
            return None
        return cls(p50_ms=percentile(values, 50), p90_ms=percentile(values, 90), p99_ms=percentile(values, 99))

    @model_validator(mode="after")
    def _ordered(self) -> Percentiles:
        if not self.p50_ms <= self.p90_ms <= self.p99_ms:
            raise FieldError("percentiles must not decrease (p50 <= p90 <= p99)", "p99_ms")
        return self


class Slo(StrictModel):
    """Service-level objectives a request must meet to count towards goodput (any subset)."""

    ttft_ms: float | None = Field(default=None, gt=0, description="time to first token, at most (ms)")
    tpot_ms: float | None = Field(
        default=None, gt=0, description="mean inter-token latency of the request (time per output token), at most (ms)"
    )
    e2e_ms: float | None = Field(default=None, gt=0, description="end-to-end latency, at most (ms)")

    def met_by(self, request: LoadRequest) -> bool:
        if not request.completed:
            return False
        limits = ((self.ttft_ms, request.ttft_ms), (self.tpot_ms, request.tpot_ms), (self.e2e_ms, request.e2e_ms))
        return all(value is not None and value <= limit for limit, value in limits if limit is not None)


class LoadRequest(StrictModel):
    """One request of a level. Times are milliseconds after the level started (client clock)."""

    prompt_id: str = Field(description="the strict-suite prompt sent")
    planned_ms: float = Field(
        ge=0,
        description="when the request was due: its Poisson arrival (open loop), or when its user's "
        "previous request finished (closed loop)",
    )
    sent_ms: float = Field(ge=0, description="when the client actually sent it")
    ttft_ms: float | None = Field(default=None, ge=0, description="time to first token after sending; none if failed")
    e2e_ms: float | None = Field(default=None, ge=0, description="time to the last token after sending")
    output_tokens: int = Field(default=0, ge=0, description="completion tokens received")
    tpot_ms: float | None = Field(
        default=None,
        gt=0,
        description="mean gap between token times after the first (ms); none below two tokens or when every "
        "token arrived in one read",
    )
    reads: int | None = Field(
        default=None,
        ge=1,
        exclude_if=lambda value: value is None,
        description="socket reads that carried its tokens (distinct token arrival times); absent where not "
        "recorded (imported sweeps, packets sealed before it was)",
    )
    identical_to_oracle: bool | None = Field(
        default=None, description="output token ids equal the sequential oracle's for this prompt; none if failed"
    )
    first_divergence: int | None = Field(
        default=None, ge=0, description="index of the first token that differs from the oracle's"
    )
    error: str | None = Field(default=None, description="why the request failed (one line); none if it completed")

    @model_validator(mode="after")
    def _coherent(self) -> LoadRequest:
        if self.sent_ms + 0.5 < self.planned_ms:
            raise FieldError("sent before it was due", "sent_ms")
        if self.error is None and (self.ttft_ms is None or self.e2e_ms is None):
            raise FieldError("a completed request needs ttft_ms and e2e_ms", "ttft_ms")
        if self.ttft_ms is not None and self.e2e_ms is not None and self.e2e_ms < self.ttft_ms:
            raise FieldError("ends before its first token", "e2e_ms")
        if self.identical_to_oracle is not False and self.first_divergence is not None:
            raise FieldError("a divergence needs identical_to_oracle false", "first_divergence")
        if self.reads is not None:
            if self.reads > self.output_tokens:
                raise FieldError("more reads than tokens", "reads")
            if self.output_tokens >= 2 and (self.reads == 1) != (self.tpot_ms is None):
                raise FieldError("one read has no tpot_ms, and two or more reads have one", "reads")
        return self

    @property
    def completed(self) -> bool:
        return self.error is None

    @property
    def lag_ms(self) -> float:
        return max(0.0, self.sent_ms - self.planned_ms)

    @property
    def decode_tok_s(self) -> float | None:
        return 1000.0 / self.tpot_ms if self.tpot_ms else None

    @property
    def read_in_bursts(self) -> bool:
        """Two or more tokens that reached the client in one read, or in reads larger than one
        engine step makes: their times are the delivery's, not the server's."""
        if not self.completed or self.output_tokens < 2:
            return False
        if self.tpot_ms is None:
            return True
        return self.reads is not None and read_in_bursts(self.output_tokens, self.reads)


class LoadServerMetrics(StrictModel):
    """What the server's /metrics said during the level: gauge peaks and counter deltas."""

    peak_running: float | None = Field(default=None, ge=0, description="most requests running at once")
    peak_waiting: float | None = Field(default=None, ge=0, description="most requests waiting at once")
    peak_kv_cache_usage: float | None = Field(
        default=None, ge=0, le=1, description="highest KV-cache usage seen (fraction of the cache)"
    )
    preemptions: int | None = Field(default=None, ge=0, description="requests preempted during the level")
    spec_drafted_tokens: int | None = Field(default=None, ge=0, description="speculative tokens drafted")
    spec_accepted_tokens: int | None = Field(default=None, ge=0, description="speculative tokens accepted")


class LoadLevel(StrictModel):
    """One load level: closed loop at `users`, or open loop at `rate_rps`."""

    mode: Literal["closed", "open"] = Field(description="closed: fixed users; open: Poisson arrivals")
    users: int | None = Field(default=None, ge=1, description="concurrent users (closed loop)")
    rate_rps: float | None = Field(default=None, gt=0, description="mean arrival rate, requests/s (open loop)")
    duration_s: float = Field(gt=0, description="first planned send to last request finished, seconds")
    client_cpu_s: float = Field(ge=0, description="CPU time the client process used during the level")
    itl_ms: Percentiles | None = Field(
        default=None,
        description="inter-token latency over the level's gaps between distinct arrivals (one per chunk; "
        "tokens of one chunk add no zero gap)",
    )
    requests: list[LoadRequest] = Field(min_length=1, description="every request planned, in planned order")
    server: LoadServerMetrics | None = Field(default=None, description="the server's /metrics over the level")
    energy: EnergyWindow | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="the cards' power and energy counter over the level (catalog/model/energy.py); absent when "
        "not measured",
    )

    @model_validator(mode="after")
    def _one_mode(self) -> LoadLevel:
        if self.mode == "closed" and (self.users is None or self.rate_rps is not None):
            raise FieldError("a closed-loop level needs users and no rate", "users")
        if self.mode == "open" and (self.rate_rps is None or self.users is not None):
            raise FieldError("an open-loop level needs rate_rps and no users", "rate_rps")
        return self

    @model_validator(mode="after")
    def _times_fit(self) -> LoadLevel:
        """The rows and the level's figures tell one story: every request ends inside the level
        (a shortened duration would inflate the aggregate rate), a request's last token comes no
        sooner than its TTFT and TPOT allow, and a closed loop never has more requests in flight
        than it has users."""
        first_due = min(r.planned_ms for r in self.requests)  # duration_s counts from here
        level_ms = self.duration_s * 1000.0
        for i, r in enumerate(self.requests):
            if r.e2e_ms is not None and r.sent_ms + r.e2e_ms - first_due > level_ms * (1 + TIME_SLACK) + 1.0:
                raise FieldError("ends after the level's duration_s", "requests", i, "e2e_ms")
            if r.ttft_ms is not None and r.e2e_ms is not None and r.tpot_ms is not None and r.output_tokens > 1:
                decoding = r.tpot_ms * (r.output_tokens - 1)
                if r.ttft_ms + decoding > r.e2e_ms * (1 + TIME_SLACK) + 1.0:
                    raise FieldError("ttft_ms + tpot_ms x (tokens - 1) exceeds e2e_ms", "requests", i, "tpot_ms")
        if self.mode == "closed" and self.users is not None and _most_in_flight(self.requests) > self.users:
            raise FieldError(f"more requests in flight at once than its users ({self.users})", "requests")
        return self

    @property
    def label(self) -> str:
        if self.mode == "closed":
            return "1 user" if self.users == 1 else f"{self.users} users"
        return f"{self.rate_rps:g} req/s"

    @property
    def most_in_flight(self) -> int:
        """The most of its requests that received tokens in flight at one moment (`_most_in_flight`,
        from their own times; open loop too), one without a recorded end counted as in flight
        throughout, and no more than a closed level's users: no engine step of the level yielded
        its tokens to more of its requests at once (a request's tokens are made between its sending
        and its last token); at least one when any did. The memory floor (catalog/checks/energy.py)
        divides by it."""
        served = [r for r in self.requests if r.output_tokens > 0]
        unended = sum(1 for r in served if r.e2e_ms is None)
        most = max(_most_in_flight(served) + unended, 1 if served else 0)
        return min(most, self.users) if self.users is not None else most

    @property
    def completed(self) -> list[LoadRequest]:
        return [r for r in self.requests if r.completed]

    @property
    def failed(self) -> int:
        return len(self.requests) - len(self.completed)

    @property
    def output_tokens(self) -> int:
        return sum(r.output_tokens for r in self.requests)

    @property
    def aggregate_tok_s(self) -> float:
        return self.output_tokens / self.duration_s

    @property
    def per_user_tok_s(self) -> float | None:
        """Median per-request decode rate: what one user sees at this load. None when a response
        was read in bursts: the delivery fell behind the streams, so the rates of the others were
        timed by it too (a loaded CPU host's 2-user level read four of five responses in one go and
        the fifth in two reads half a millisecond apart: 245,942 tok/s, which physics refuses)."""
        # each request's rate once (verification bounds every level's by physics, the pages show it)
        if self.read_in_bursts:
            return None
        rates = [rate for r in self.requests if r.completed and (rate := r.decode_tok_s) is not None]
        return percentile(rates, 50) if rates else None

    @property
    def ttft(self) -> Percentiles | None:
        return Percentiles.of([r.ttft_ms for r in self.completed if r.ttft_ms is not None])

    @property
    def e2e(self) -> Percentiles | None:
        return Percentiles.of([r.e2e_ms for r in self.completed if r.e2e_ms is not None])

    @property
    def lag(self) -> Percentiles:
        found = Percentiles.of([r.lag_ms for r in self.requests])
        assert found is not None  # requests has min_length 1
        return found

    @property
    def identical(self) -> int:
        return sum(1 for r in self.completed if r.identical_to_oracle)

    @property
    def all_identical(self) -> bool:
        return bool(self.completed) and self.identical == len(self.completed) and self.failed == 0

    @property
    def first_diverging_request(self) -> LoadRequest | None:
        return next((r for r in self.requests if r.identical_to_oracle is False), None)

    def goodput(self, slo: Slo) -> float:
        return sum(1 for r in self.requests if slo.met_by(r)) / len(self.requests)

    @property
    def read_in_bursts(self) -> int:
        """Responses read in bursts (LoadRequest.read_in_bursts): the client or the server's API
        process fell behind the stream (a loaded host descheduled it), which the send schedule's lag
        does not show."""
        return sum(1 for r in self.requests if r.read_in_bursts)

    def behind_because(self, lag_bound_ms: float) -> str | None:
        """Why the client (or the server's API process) did not keep up, in words; None when its p99
        schedule lag is within the bound and every response reached it as it streamed."""
        if self.lag.p99_ms > lag_bound_ms:
            return f"client lag p99 {self.lag.p99_ms:.1f} ms over the {lag_bound_ms:g} ms bound"
        if self.read_in_bursts:
            return f"{self.read_in_bursts} of {len(self.requests)} responses read in bursts, so no decode rate"
        return None

    def faster_than_alone(self, alone_tok_s: Sequence[float]) -> str | None:
        """Why its per-user rate cannot be the engine's, in words: over ALONE_BOUND times the arm's
        single-stream rate (`alone_tok_s`: its fresh servers' decode rates, the faster counts;
        none: not known, nothing to compare)."""
        alone, per_user = max(alone_tok_s, default=None), self.per_user_tok_s
        if alone is None or per_user is None or per_user <= ALONE_BOUND * alone:
            return None
        return (
            f"{per_user:.1f} tok/s per user, over {ALONE_BOUND:g} × the {alone:.1f} tok/s of one user alone: "
            "batching never serves a user faster"
        )

    def unusable_because(self, lag_bound_ms: float, alone_tok_s: Sequence[float]) -> str | None:
        """Why the level's figures are not the engine's, in words (the runner's progress line and
        the pages say it): the client fell behind, or a user was served faster than one alone."""
        return self.behind_because(lag_bound_ms) or self.faster_than_alone(alone_tok_s)

    def usable(self, lag_bound_ms: float, alone_tok_s: Sequence[float]) -> bool:
        """The level's figures are the engine's (`unusable_because`). A level that is not is
        flagged, never averaged in."""
        return self.unusable_because(lag_bound_ms, alone_tok_s) is None


class LoadSweep(StrictModel):
    """A load sweep of one arm on one fresh server, over the strict suite's prompts."""

    seed: int = Field(description="seed of the Poisson arrival schedules (open-loop levels)")
    requests_per_level: int = Field(ge=1, description="requests planned at every level")
    slo: Slo = Field(default_factory=Slo, description="the objectives goodput is counted against")
    lag_bound_ms: float = Field(
        default=LAG_BOUND_MS, gt=0, description="p99 schedule lag above which a level is marked unusable"
    )
    levels: list[LoadLevel] = Field(min_length=1, description="closed-loop levels, then open-loop levels")
    open_rates_from_users: int | None = Field(
        default=None,
        ge=1,
        description="the closed-loop level (users) whose measured request rate the open-loop rates are "
        "fractions of; none when the rates were given on the command line",
    )

    @model_validator(mode="after")
    def _levels_planned(self) -> LoadSweep:
        for i, level in enumerate(self.levels):
            if len(level.requests) != self.requests_per_level:
                raise FieldError(f"holds {len(level.requests)} requests, not requests_per_level", "levels", i)
        return self
