"""Independence: two fresh servers, or a campaign and its reproduction, keep their own time.

Greedy decoding makes two honest servers agree token for token, and speculative decoding can make
them agree on which tokens share a chunk; but no two servers agree on *when* each token arrived.
Real token times carry scheduling, kernel and network jitter of tens of microseconds and more.
So a server whose times are another's shifted by a constant (a copy re-labelled, or "every time
plus a microsecond"), whose gaps are another's each shifted by the same amount, or whose times are
another's scaled (a copy slowed by 1 %), is the other server again, not an independent one.

Two servers' times for one prompt are `copied` when one is an affine function of the other, or of
the token index added to it, within COPY_TOLERANCE_US at every token. A row too short or too
regular to tell (fewer than MIN_DISTINCT_TIMES distinct times) says nothing.
- `copy_problems(packet)`: no two servers of one packet share their timing;
- `copied_from(packet, original)`: the packet's servers that copy one of the original's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from catalog.model.packet import Packet, PromptRow, ServerRun

Problem = tuple[str, str]

COPY_TOLERANCE_US = 2
"""Token times are integer microseconds: a copy shifted or scaled by arithmetic stays within the
rounding of one or two microseconds of the line it lies on; real jitter is ten to a thousand
times larger."""

MIN_DISTINCT_TIMES = 16
"""Fewer distinct times than this (a short row, or one delivered in a few bursts) leave too few
points to tell a copy from two servers that happened to agree."""

_PROBES = 8  # points tried before a whole row is compared: honest rows part at the first ones


def _on_a_line(values: Sequence[int], along: Sequence[int] | None, minus: Sequence[int] | None, n: int) -> bool:
    """Whether value(k) lies within the tolerance of the line through its two ends, along along(k):
    value(k) is values[k] (less minus[k] when given), along(k) is along[k] (k when None). A few
    probes first (honest rows part there), then every point. Written without a call per point:
    copy_problems asks it of every prompt of every pair of servers."""
    last = n - 1
    x0, x1 = (along[0], along[last]) if along is not None else (0, last)
    span = x1 - x0
    if span == 0:
        return False
    if minus is None:
        start, end = values[0], values[last]
    else:
        start, end = values[0] - minus[0], values[last] - minus[last]
    slope = (end - start) / span
    for points in (range(1, last, max(1, n // _PROBES)), range(1, last)):
        for k in points:
            value = values[k] if minus is None else values[k] - minus[k]
            x = along[k] if along is not None else k
            if abs(value - start - slope * (x - x0)) > COPY_TOLERANCE_US:
                return False
    return True


def copied(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether one row's token times are the other's shifted, with gaps shifted, or scaled."""
    n = len(a)
    if n != len(b) or n < MIN_DISTINCT_TIMES:
        return False
    shifted = _on_a_line(a, None, b, n)  # a[k] - b[k] along k
    if not (shifted or _on_a_line(a, b, None, n)):  # a[k] along b[k]
        return False
    return len(set(a)) >= MIN_DISTINCT_TIMES and len(set(b)) >= MIN_DISTINCT_TIMES


def _rows(server: ServerRun) -> dict[str, PromptRow]:
    return {row.prompt_id: row for row in server.rows}


def first_copy(mine: ServerRun, theirs: ServerRun) -> tuple[int, str] | None:
    """(row index, prompt id) of the first of `mine`'s rows that copies `theirs`'s row of that prompt."""
    other = _rows(theirs)
    for k, row in enumerate(mine.rows):
        match = other.get(row.prompt_id)
        if match is not None and copied(row.token_times_us, match.token_times_us):
            return k, row.prompt_id
    return None


def _servers(packet: Packet) -> Iterator[tuple[str, str, ServerRun]]:
    """(field, name for a message, server) of every server with rows."""
    for i, arm in enumerate(packet.arms):
        for j, server in enumerate(arm.servers):
            if server.rows:
                yield f"arms[{i}].servers[{j}]", f"server {server.label} of arm {arm.id!r}", server


def copy_problems(packet: Packet) -> list[Problem]:
    """Every pair of servers in the packet: a later one that copies an earlier one's timing."""
    servers = list(_servers(packet))
    problems: list[Problem] = []
    for index, (field, name, server) in enumerate(servers):
        for earlier_field, earlier_name, earlier in servers[:index]:
            found = first_copy(server, earlier)
            if found is not None:
                k, prompt = found
                problems.append(
                    (
                        f"{field}.rows[{k}].token_times_us",
                        f"{name}: its token times for prompt {prompt!r} are those of {earlier_name}"
                        f" ({earlier_field}) shifted or scaled to within {COPY_TOLERANCE_US} µs at every token:"
                        " two fresh servers never share their timing",
                    )
                )
                break  # one per server
    return problems


def copied_from(packet: Packet, original: Packet) -> list[Problem]:
    """Each server of `packet` whose timing copies a server of `original` (a reproduction's)."""
    theirs = list(_servers(original))
    problems: list[Problem] = []
    for field, name, server in _servers(packet):
        for their_field, their_name, other in theirs:
            found = first_copy(server, other)
            if found is not None:
                k, prompt = found
                problems.append(
                    (
                        f"{field}.rows[{k}].token_times_us",
                        f"{name}: its token times for prompt {prompt!r} are those of {their_name} ({their_field})"
                        f" of {original.id} shifted or scaled to within {COPY_TOLERANCE_US} µs: a copy, not a"
                        " reproduction",
                    )
                )
                break
    return problems
