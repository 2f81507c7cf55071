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

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

import numpy as np

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


def _lines(a: Sequence[int], b: Sequence[int], n: int) -> bool:
    """Whether a[k] - b[k] lies on a line in k, or a[k] on a line in b[k], each the line through
    its two ends, within the tolerance at every point. A few probes first, in Python (honest rows
    part there, at the first: a family page asks it of every pair of its repeats' rows that
    `CopyIndex` suspects, builder/views/repeats.py), then every point at once, in numpy: the same
    arithmetic in the same float64 (a copy of 512 tokens, 0.2 -> 0.03 ms)."""
    shift_start = a[0] - b[0]
    shift_slope = (a[n - 1] - b[n - 1] - shift_start) / (n - 1)
    along = b[n - 1] - b[0]
    shifted, scaled = True, along != 0
    scale_start, scale_base = a[0], b[0]
    scale_slope = (a[n - 1] - scale_start) / along if scaled else 0.0
    for k in range(1, n - 1, max(1, n // _PROBES)):
        if shifted and abs(a[k] - b[k] - shift_start - shift_slope * k) > COPY_TOLERANCE_US:
            shifted = False
        if scaled and abs(a[k] - scale_start - scale_slope * (b[k] - scale_base)) > COPY_TOLERANCE_US:
            scaled = False
        if not (shifted or scaled):
            return False
    inner_a = np.asarray(a[1 : n - 1]).astype(np.int64)
    inner_b = np.asarray(b[1 : n - 1]).astype(np.int64)
    index = np.arange(1, n - 1, dtype=np.int64)
    if shifted and bool(np.all(np.abs(inner_a - inner_b - shift_start - shift_slope * index) <= COPY_TOLERANCE_US)):
        return True
    return scaled and bool(
        np.all(np.abs(inner_a - scale_start - scale_slope * (inner_b - scale_base)) <= COPY_TOLERANCE_US)
    )


def copied(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether one row's token times are the other's shifted, with gaps shifted, or scaled."""
    n = len(a)
    if n != len(b) or n < MIN_DISTINCT_TIMES or not _lines(a, b, n):
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


class CopyIndex:
    """Servers' rows indexed so that a new server is tested with `first_copy` only against the
    indexed servers it could copy: catalog/checks/repeats.py `combine` asks it of each repeat
    against every one counted before, all pairs of a family's repeats. What it buys: a family
    page 65 -> 37 ms of CPU (one family of the 10 x 20 catalog, commit 43a5475); with the one-pass
    `copied`, 139 -> 34 ms at 1,000 x 20 (bench/FINDINGS.md).

    A copy lies within the tolerance of one of its two lines at every inner point (`_lines`), so at
    each of three: m = n/4, n/2, 3n/4. There, with d = t[m] - t[0] and E = t[n-1] - t[0] of a row
    (integers below 2^32), the point's exact distance from the shifted line is |W(a) - W(b)| / (n-1),
    W = d(n-1) - E·m, and from the scaled line |d(a)E(b) - E(a)d(b)| / |E(b)|. `_lines` computes
    the first to within 1e-5 and the second to within 2^-51 of the larger of it and
    |E(a)d(b)/E(b)|, so a row it finds on a line is within 2.5 µs of it, exactly. `suspects`
    leaves out a server only when no row of the new one is that near one line at all three points
    with its row of the same prompt: the near ones are neighbours in W (buckets 3(n-1) wide) and
    in d/E (the window 3/|E(a)|, widened past float rounding). Only the first point is looked up
    (honest rows part there); the other two are compared on the few rows found near it."""

    def __init__(self) -> None:
        self._count = 0
        # (prompt, n) -> its indexed rows: by W bucket at n/4, (server, W buckets at all three points);
        # and their d/E at n/4, sorted, beside each its (server, d/E at all three points), E = 0 left out
        self._slots: dict[tuple[str, int], _Slot] = {}

    def add(self, server: ServerRun, points: list[RowPoints] | None = None) -> int:
        """Index a server (the rows `first_copy` compares against: one per prompt, the last); its
        number. `points`: the server's `row_points`, when the caller has them already."""
        number = self._count
        self._count += 1
        last = {row[0]: row for row in (row_points(server) if points is None else points)}
        for prompt, n, _, buckets, fractions in last.values():
            if buckets is None:
                continue
            lines, keys, rows = self._slots.get((prompt, n)) or self._slots.setdefault((prompt, n), ({}, [], []))
            lines.setdefault(buckets[0], []).append((number, buckets))
            if fractions is not None:
                at = bisect_right(keys, fractions[0])  # after its equals: numbers ascending among them
                keys.insert(at, fractions[0])
                rows.insert(at, (number, fractions))
        return number

    def suspects(self, server: ServerRun, points: list[RowPoints] | None = None) -> list[int]:
        """The numbers of the indexed servers `server` could copy, ascending: every one it copies."""
        found: set[int] = set()
        slots = self._slots
        for prompt, n, span, buckets, fractions in row_points(server) if points is None else points:
            slot = slots.get((prompt, n)) if buckets is not None else None
            if slot is None or buckets is None:
                continue
            lines, keys, rows = slot
            key0, key1, key2 = buckets
            for bucket in (key0 - 1, key0, key0 + 1):
                for number, (_, b1, b2) in lines.get(bucket, ()):
                    if -1 <= b1 - key1 <= 1 and -1 <= b2 - key2 <= 1:
                        found.add(number)
            if fractions is not None and keys:
                found.update(_near_fraction(keys, rows, span, fractions))
        return sorted(found)


def _near_fraction(
    keys: list[float], rows: list[tuple[int, _Fractions]], span: int, fractions: _Fractions
) -> list[int]:
    """The indexed rows within reach of a row's d/E at all three points: looked up at the first,
    compared at the other two (the bounds inclusive, as computed)."""
    scale = 3 / abs(span)
    f0, f1, f2 = fractions
    width = scale + (abs(f0) + 4) * 2.0**-40
    low, high = bisect_left(keys, f0 - width), bisect_right(keys, f0 + width)
    if low == high:
        return []
    width1 = scale + (abs(f1) + 4) * 2.0**-40
    width2 = scale + (abs(f2) + 4) * 2.0**-40
    low1, high1, low2, high2 = f1 - width1, f1 + width1, f2 - width2, f2 + width2
    return [number for number, (_, g1, g2) in rows[low:high] if low1 <= g1 <= high1 and low2 <= g2 <= high2]


_Buckets = tuple[int, int, int]
_Fractions = tuple[float, float, float]
_Slot = tuple[dict[int, list[tuple[int, _Buckets]]], list[float], list[tuple[int, _Fractions]]]
RowPoints = tuple[str, int, int, _Buckets | None, _Fractions | None]
"""A row's prompt, length n, span E, and its W buckets and d/E at the points `CopyIndex` tests
(None for a row too short to be a copy; d/E None for a flat row, E = 0)."""


def row_points(server: ServerRun) -> list[RowPoints]:
    """Each row's `RowPoints`, in the server's order."""
    found: list[RowPoints] = []
    for row in server.rows:
        times = row.token_times_us
        n = len(times)
        if n < MIN_DISTINCT_TIMES:
            found.append((row.prompt_id, n, 0, None, None))
            continue
        first, last, width = times[0], n - 1, 3 * (n - 1)
        span = times[last] - first
        m0, m1, m2 = n // 4, n // 2, 3 * n // 4
        d0, d1, d2 = times[m0] - first, times[m1] - first, times[m2] - first
        buckets = ((d0 * last - span * m0) // width, (d1 * last - span * m1) // width, (d2 * last - span * m2) // width)
        fractions = (d0 / span, d1 / span, d2 / span) if span != 0 else None
        found.append((row.prompt_id, n, span, buckets, fractions))
    return found


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
