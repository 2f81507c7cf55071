"""Consistency checks of a packet's load sweeps (catalog/model/load_sweep.py), called by catalog.checks.consistency
(the packet alone, and the physical ceiling) and catalog.store.repository (the suite's prompts).

What no honest sweep can produce: an open-loop schedule other than the one its rate and seed
give (a replay would send other arrivals), prompts out of the documented order or outside the
suite, more output tokens than the workload asked for, closed-loop levels out of order or
repeated, a closed-loop level whose own request times do not show the users it declares (four
"users" whose requests ran one at a time), a second sweep of one arm, and a level's per-user
decode rate (its median request's) above the card's physics.
Each problem is `(field, message)`, like catalog.checks.consistency's.

A sweep of an imported or screened packet (runner/import_load_sweep.py) was sent by someone else's
client, which records neither its arrival schedule nor our suite's prompts: its planned times are
its send times and its prompts are its own. The schedule and prompt-order checks hold the runner's
own sweeps only (`follows_our_schedule`); every other check holds every sweep.
"""

from __future__ import annotations

from collections.abc import Iterator

from catalog.model.load_sweep import LoadSweep, poisson_offsets_ms
from catalog.model.packet import Packet
from catalog.recipes.suite import Suite

Problem = tuple[str, str]

SCHEDULE_TOLERANCE_MS = 0.001
"""Planned times are recorded to the microsecond (poisson_offsets_ms rounds to 3 decimals)."""

SHOWN_USERS_SHARE = 0.75
"""The share of its declared users a closed-loop level must keep in flight, on average, from the
moment its last user started (the ramp-up) to its last send (after which users finish one by one:
the tail). Each user is idle only between its stream closing and its next send (the client's
turnaround, a millisecond against requests of seconds), so an honest level keeps nearly all of
them busy; one whose requests ran one at a time under "4 users" keeps one."""


def _sweeps(packet: Packet) -> Iterator[tuple[str, str, LoadSweep]]:
    """(field prefix, arm id, sweep) of every load ladder."""
    for i, ladder in enumerate(packet.ladders):
        if ladder.load is not None:
            yield f"ladders[{i}].load", ladder.arm, ladder.load


def follows_our_schedule(packet: Packet) -> bool:
    """Whether the packet's sweeps were sent by this runner: its Poisson schedules and suite order."""
    return packet.provenance.kind == "measured"


def load_problems(packet: Packet) -> list[Problem]:
    """The checks that need nothing but the packet."""
    problems: list[Problem] = []
    first_sweep: dict[str, int] = {}
    for i, ladder in enumerate(packet.ladders):
        if ladder.load is None:
            continue
        if ladder.arm in first_sweep:
            problems.append(
                (
                    f"ladders[{i}]",
                    f"arm {ladder.arm!r} has a second load sweep (its first: ladders[{first_sweep[ladder.arm]}])",
                )
            )
        first_sweep.setdefault(ladder.arm, i)
    for where, _, sweep in _sweeps(packet):
        problems += _level_order_problems(where, sweep)
        problems += _shown_users_problems(where, sweep)
        if follows_our_schedule(packet):
            problems += _schedule_problems(where, sweep)
        problems += _token_problems(where, sweep, packet.workload.max_tokens)
    return problems


def _level_order_problems(where: str, sweep: LoadSweep) -> list[Problem]:
    problems: list[Problem] = []
    last_users = 0
    seen_open = False
    rates: set[float] = set()
    for j, level in enumerate(sweep.levels):
        field = f"{where}.levels[{j}]"
        if level.users is not None:
            if seen_open:
                problems.append(
                    (f"{field}.mode", "a closed-loop level after an open-loop one: closed levels come first")
                )
            elif level.users <= last_users:
                problems.append(
                    (
                        f"{field}.users",
                        f"{level.label} after a level of {last_users}: closed-loop levels ascend without repeats",
                    )
                )
            last_users = max(last_users, level.users)
        if level.rate_rps is not None:
            seen_open = True
            if level.rate_rps in rates:
                problems.append((f"{field}.rate_rps", f"{level.rate_rps:g} req/s is measured twice in this sweep"))
            rates.add(level.rate_rps)
    return problems


def _shown_users_problems(where: str, sweep: LoadSweep) -> list[Problem]:
    """A closed-loop level's requests keep its users in flight: between its ramp-up (the users-th
    send) and its tail (the last send), the time-averaged count of requests sent and not finished
    is at least SHOWN_USERS_SHARE of its users (of its requests, when it has fewer)."""
    problems: list[Problem] = []
    for j, level in enumerate(sweep.levels):
        if level.users is None or level.users < 2:
            continue
        spans = sorted((r.sent_ms, r.sent_ms + r.e2e_ms) for r in level.requests if r.e2e_ms is not None)
        users = min(level.users, len(spans))
        if users < 2:
            continue
        running = level.server.peak_running if level.server is not None else None
        if running is not None and running > level.users:
            problems.append(
                (
                    f"{where}.levels[{j}].server.peak_running",
                    f"is {running:g}, but a closed level of {level.label} has at most {level.users} requests running",
                )
            )
        shown = _mean_in_flight(spans, start=spans[users - 1][0], end=spans[-1][0])
        if shown < SHOWN_USERS_SHARE * users:
            problems.append(
                (
                    f"{where}.levels[{j}].requests",
                    f"{level.label}: its requests' own send and end times keep {shown:.2f} in flight on average"
                    f" between the ramp-up and the tail, not {users} (at least {SHOWN_USERS_SHARE:.0%} of them):"
                    " its requests did not run as the users it declares",
                )
            )
    return problems


def _mean_in_flight(spans: list[tuple[float, float]], *, start: float, end: float) -> float:
    """The time-averaged number of spans open over [start, end]; the count at `start` when the
    window is a moment (every user sent at once, none sent again)."""
    if end <= start:
        return float(sum(1 for sent, done in spans if sent <= start < done))
    inside = [(sent, done) for sent, done in spans if done > start and sent < end]
    # at one time an end (-1) sorts before a start: a user's next request follows its last
    events = sorted([(max(sent, start), 1) for sent, _ in inside] + [(min(done, end), -1) for _, done in inside])
    area, count, at = 0.0, 0, start
    for time, step in events:
        area += count * (time - at)
        count, at = count + step, time
    return area / (end - start)


def _schedule_problems(where: str, sweep: LoadSweep) -> list[Problem]:
    """An open level's planned times are its rate's Poisson arrivals of the sweep's seed."""
    problems: list[Problem] = []
    for j, level in enumerate(sweep.levels):
        if level.rate_rps is None:
            continue
        expected = poisson_offsets_ms(level.rate_rps, sweep.requests_per_level, sweep.seed)
        for k, (request, due) in enumerate(zip(level.requests, expected, strict=False)):
            if abs(request.planned_ms - due) > SCHEDULE_TOLERANCE_MS:
                problems.append(
                    (
                        f"{where}.levels[{j}].requests[{k}].planned_ms",
                        f"is {request.planned_ms:,.3f} ms, but {level.rate_rps:g} req/s with seed {sweep.seed}"
                        f" plans {due:,.3f} ms: not the recorded schedule",
                    )
                )
                break  # the rest of the level is off too
    return problems


def _token_problems(where: str, sweep: LoadSweep, max_tokens: int) -> list[Problem]:
    problems: list[Problem] = []
    for j, level in enumerate(sweep.levels):
        for k, request in enumerate(level.requests):
            if request.output_tokens > max_tokens:
                problems.append(
                    (
                        f"{where}.levels[{j}].requests[{k}].output_tokens",
                        f"{request.output_tokens:,} output tokens exceed the workload's max_tokens {max_tokens:,}",
                    )
                )
    return problems


def load_prompt_problems(packet: Packet, suite: Suite) -> list[Problem]:
    """Request k of a level sends the suite's prompt k mod its prompt count."""
    if not follows_our_schedule(packet):
        return []
    order = [prompt.id for prompt in suite.prompts]
    problems: list[Problem] = []
    for where, _, sweep in _sweeps(packet):
        for j, level in enumerate(sweep.levels):
            for k, request in enumerate(level.requests):
                expected = order[k % len(order)]
                if request.prompt_id == expected:
                    continue
                known = request.prompt_id in order
                problems.append(
                    (
                        f"{where}.levels[{j}].requests[{k}].prompt_id",
                        f"is {request.prompt_id!r}, but request {k} sends the suite's prompt {expected!r}"
                        if known
                        else f"{request.prompt_id!r} is not a prompt of suite {suite.id!r}",
                    )
                )
                break  # one per level: the order is off from here on
    return problems


def per_user_rates(packet: Packet, arm_id: str) -> Iterator[tuple[str, float]]:
    """(field, per-user decode rate) of each level of the arm's sweeps: the published figure (the
    median over the level's requests) is what the physical ceiling is checked against. One
    request alone is not: a client that read a stream's tokens in one burst times a real request
    at any rate (a real CPU sweep showed 100,000 tok/s for one request of an honest level)."""
    for where, arm, sweep in _sweeps(packet):
        if arm != arm_id:
            continue
        for j, level in enumerate(sweep.levels):
            rate = level.per_user_tok_s
            if rate is not None:
                yield f"{where}.levels[{j}].requests", rate
