"""Consistency checks of a packet's load sweeps (catalog/model/load_sweep.py), called by catalog.checks.consistency
(the packet alone, and the physical ceiling) and catalog.store.repository (the suite's prompts).

What no honest sweep can produce: an open-loop schedule other than the one its rate and seed
give (a replay would send other arrivals), prompts out of the documented order or outside the
suite, more output tokens than the workload asked for, closed-loop levels out of order or
repeated, a closed-loop level whose own request times do not show the users it declares (four
"users" whose requests ran one at a time), a request whose last token (TTFT + TPOT x (tokens - 1))
comes long before its stream closed (a TPOT cut below its own times: a faster "per-user" rate and
goodput the request never had), a request identical to the oracle whose length is not the oracle
row's, a second sweep of one arm, and a level's per-user decode rate (its median request's) above
the card's physics.
Each problem is `(field, message)`, like catalog.checks.consistency's.

A sweep of an imported or screened packet (runner/import_load_sweep.py) was sent by someone else's
client, which records neither its arrival schedule nor our suite's prompts: its planned times are
its send times and its prompts are its own. The schedule and prompt-order checks hold the runner's
own sweeps only (`follows_our_schedule`); every other check holds every sweep.
"""

from __future__ import annotations

from collections.abc import Iterator

from catalog.model.load_sweep import LoadSweep, poisson_offsets_ms
from catalog.model.packet import Arm, Packet
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

STREAM_TAIL_SHARE = 0.10
STREAM_TAIL_MS = 250.0
"""How long a request's stream may stay open after its last token: at most STREAM_TAIL_SHARE of
its decode span (e2e_ms - ttft_ms) plus STREAM_TAIL_MS. The runner (runner/load_sweep.py
`request_row`, from runner/client.py's times) records ttft_ms as the first token's read and tpot_ms
as (last token's read - first token's read) / (tokens - 1), so ttft_ms + tpot_ms x (tokens - 1) is
the last token's read to the runner's rounding (ttft_ms to the microsecond, tpot_ms to the
nanosecond: under 0.001 ms + tokens x 0.000001 ms); but e2e_ms is read when the stream closed, after
the usage chunk and [DONE] that follow the last token, so it exceeds the last token by that tail,
never by less than nothing (the model refuses a last token after e2e_ms). Rounding alone is no bound
on the tail: the committed demo packet's 256 requests close 0.1 to 36.8 ms after their last token
(at most 1.5 % of the request's time), a client or API process that a loaded host descheduled being
late by what it was late. The bound is set well above that measured tail, so an honest campaign
on a host busy with other work (the server's API process or the client descheduled between the
last token and the close) is not refused: 250 ms is several scheduler time slices of such a host.
A TPOT cut to 0.6 x leaves 40 % of the decode span unaccounted for; this bound lets a forger gain
at most about 10 % (plus 250 ms over a request) on a per-user rate."""


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
    for where, arm_id, sweep in _sweeps(packet):
        problems += _level_order_problems(where, sweep)
        problems += _shown_users_problems(where, sweep)
        if follows_our_schedule(packet):
            problems += _schedule_problems(where, sweep)
        problems += _token_problems(where, sweep, packet.workload.max_tokens)
        problems += _decode_span_problems(where, sweep)
        problems += _oracle_length_problems(where, sweep, packet, arm_id)
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


def _decode_span_problems(where: str, sweep: LoadSweep) -> list[Problem]:
    """A completed request's last token (ttft_ms + tpot_ms x (tokens - 1), the runner's own
    derivation) comes no sooner than STREAM_TAIL_SHARE of its decode span plus STREAM_TAIL_MS
    before its stream closed (e2e_ms). The model refuses the other side (a last token after
    e2e_ms); this bound rests on a measured tail, not on arithmetic alone, so it lives here, where a
    level the runner measured is never lost to it. One problem per level: the first request off."""
    problems: list[Problem] = []
    for j, level in enumerate(sweep.levels):
        for k, r in enumerate(level.requests):
            if not r.completed or r.output_tokens < 2 or r.tpot_ms is None or r.ttft_ms is None or r.e2e_ms is None:
                continue
            last_token = r.ttft_ms + r.tpot_ms * (r.output_tokens - 1)
            span = r.e2e_ms - r.ttft_ms
            tail = r.e2e_ms - last_token
            if tail <= STREAM_TAIL_SHARE * span + STREAM_TAIL_MS:
                continue
            problems.append(
                (
                    f"{where}.levels[{j}].requests[{k}].tpot_ms",
                    f"is {r.tpot_ms:,.3f} ms: ttft_ms {r.ttft_ms:,.3f} + tpot_ms x {r.output_tokens - 1:,} puts the"
                    f" last token at {last_token:,.3f} ms, {tail:,.3f} ms before the stream closed (e2e_ms"
                    f" {r.e2e_ms:,.3f}), over {STREAM_TAIL_SHARE:.0%} of its {span:,.3f} ms after the first token"
                    f" + {STREAM_TAIL_MS:g} ms: not the TPOT of its own token times ({level.label})",
                )
            )
            break  # one per level
    return problems


def _oracle_of(packet: Packet, arm_id: str) -> Arm | None:
    """The arm a load sweep's outputs were compared with: the depth-0 arm its G3 gates name, or the
    arm itself when it is the oracle (the runner compares every arm's sweep with its campaign's
    depth-0 arm, which is what G3 names)."""
    arm = next((a for a in packet.arms if a.id == arm_id), None)
    if arm is None:
        return None
    named = {gate.against for gate in arm.gates if gate.gate == "G3"}
    oracle = next((a for a in packet.arms if a.id in named), None)
    if oracle is None and arm.config.spec_depth == 0:
        oracle = arm
    return oracle


def _oracle_length_problems(where: str, sweep: LoadSweep, packet: Packet, arm_id: str) -> list[Problem]:
    """A request identical to the oracle has the oracle's length: its output_tokens equal the
    completion_tokens of the oracle arm's first server's row for the same prompt (runner/measure.py
    passes that server's rows; runner/load_sweep.py compares the token ids, so a longer or shorter
    output differs). A sweep with no oracle rows to compare with (an import's) has nothing to check.
    One problem per level: the first request off, with how many are."""
    oracle = _oracle_of(packet, arm_id)
    if oracle is None or not oracle.servers or not oracle.servers[0].rows:
        return []
    lengths = {row.prompt_id: row.completion_tokens for row in oracle.servers[0].rows}
    problems: list[Problem] = []
    for j, level in enumerate(sweep.levels):
        off = [
            (k, r, lengths[r.prompt_id])
            for k, r in enumerate(level.requests)
            if r.identical_to_oracle and r.prompt_id in lengths and r.output_tokens != lengths[r.prompt_id]
        ]
        if not off:
            continue
        k, r, expected = off[0]
        problems.append(
            (
                f"{where}.levels[{j}].requests[{k}].identical_to_oracle",
                f"is true for {r.output_tokens:,} output tokens, but oracle arm {oracle.id!r}'s row for prompt"
                f" {r.prompt_id!r} holds {expected:,}: an output identical to the oracle's has its length"
                f" ({len(off)} of {level.label}'s {len(level.requests)} requests)",
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
