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

from bisect import bisect_left, bisect_right, insort
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


def _lines(a: Sequence[int], b: Sequence[int], n: int) -> bool:
    """Whether a[k] - b[k] lies on a line in k, or a[k] on a line in b[k], each the line through
    its two ends, within the tolerance at every point. Both lines are followed together, point by
    point, a few probes first (honest rows part there, at the first), then every point: one pass,
    as a family page asks it of every pair of its repeats' rows (builder/views/repeats.py)."""
    shift_start = a[0] - b[0]
    shift_slope = (a[n - 1] - b[n - 1] - shift_start) / (n - 1)
    along = b[n - 1] - b[0]
    shifted, scaled = True, along != 0
    scale_start, scale_base = a[0], b[0]
    scale_slope = (a[n - 1] - scale_start) / along if scaled else 0.0
    for points in (range(1, n - 1, max(1, n // _PROBES)), range(1, n - 1)):
        for k in points:
            if shifted and abs(a[k] - b[k] - shift_start - shift_slope * k) > COPY_TOLERANCE_US:
                shifted = False
            if scaled and abs(a[k] - scale_start - scale_slope * (b[k] - scale_base)) > COPY_TOLERANCE_US:
                scaled = False
            if not (shifted or scaled):
                return False
    return True


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
    in d/E (sorted; the window 3/|E(a)|, widened past float rounding)."""

    def __init__(self) -> None:
        self._count = 0
        self._by_line: dict[tuple[str, int, int, int], list[int]] = {}  # (prompt, n, point, W bucket) -> servers
        self._by_fraction: dict[tuple[str, int, int], list[tuple[float, int]]] = {}  # sorted (d/E, server)

    def add(self, server: ServerRun) -> int:
        """Index a server (the rows `first_copy` compares against: one per prompt); its number."""
        number = self._count
        self._count += 1
        for row in _rows(server).values():
            n, span, rises = _middles(row.token_times_us)
            for point, (m, d) in enumerate(rises):
                self._by_line.setdefault((row.prompt_id, n, point, _bucket(n, m, d, span)), []).append(number)
                if span != 0:
                    insort(self._by_fraction.setdefault((row.prompt_id, n, point), []), (d / span, number))
        return number

    def suspects(self, server: ServerRun) -> list[int]:
        """The numbers of the indexed servers `server` could copy, ascending: every one it copies."""
        found: set[int] = set()
        for row in server.rows:
            n, span, rises = _middles(row.token_times_us)
            shifted: set[int] | None = None  # near the shifted line at every point so far (None: no point yet)
            scaled: set[int] | None = None
            for point, (m, d) in enumerate(rises):
                if shifted is None or shifted:
                    near = self._near_line(row.prompt_id, n, point, _bucket(n, m, d, span))
                    shifted = near if shifted is None else shifted & near
                if scaled is None or scaled:
                    near = self._near_fraction(row.prompt_id, n, point, d, span)
                    scaled = near if scaled is None else scaled & near
                if not (shifted or scaled):
                    break
            found |= (shifted or set()) | (scaled or set())
        return sorted(found)

    def _near_line(self, prompt: str, n: int, point: int, key: int) -> set[int]:
        return {
            number for bucket in (key - 1, key, key + 1) for number in self._by_line.get((prompt, n, point, bucket), ())
        }

    def _near_fraction(self, prompt: str, n: int, point: int, d: int, span: int) -> set[int]:
        if span == 0:  # on a flat line every time is within 2 µs of the first: too few distinct ones to be a copy
            return set()
        fraction = d / span
        width = 3 / abs(span) + (abs(fraction) + 4) * 2.0**-40
        indexed = self._by_fraction.get((prompt, n, point), [])
        low = bisect_left(indexed, (fraction - width, -1))
        high = bisect_right(indexed, (fraction + width, self._count))
        return {number for _, number in indexed[low:high]}


def _middles(times: Sequence[int]) -> tuple[int, int, list[tuple[int, int]]]:
    """A row's length n, its span E, and (m, d) at each of the points `CopyIndex` tests; none for a
    row too short to be a copy."""
    n = len(times)
    if n < MIN_DISTINCT_TIMES:
        return n, 0, []
    first = times[0]
    return n, times[n - 1] - first, [(m, times[m] - first) for m in (n // 4, n // 2, 3 * n // 4)]


def _bucket(n: int, m: int, d: int, span: int) -> int:
    return (d * (n - 1) - span * m) // (3 * (n - 1))


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
