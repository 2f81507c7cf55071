"""Independent repeats of one configuration, combined into a centre with a 95 % confidence interval.

A repeat is one measured packet's arm that passed every gate: its value is the centre of its two
fresh servers, the figure the catalog publishes for that packet. Repeats of one configuration
(same model, card, quantization, cards, speculative method, depth and draft head) measured with
one setup (same image or vLLM install, driver, weights and workload: catalog/checks/history.py)
are combined:

- centre: the mean of the n repeats' values;
- 95 % confidence interval: centre ± t · s / √n, where s is the sample standard deviation of the
  n values and t Student's t quantile at 0.975 with n − 1 degrees of freedom (a t-interval over
  repeats: each repeat is one campaign on fresh servers, the unit that is independent);
- one repeat has no interval: the page says "measured once" and shows its two servers' values.

Two results whose intervals overlap are "not distinguishable": neither is shown to be faster. A
result measured once is never called faster or slower than another on the strength of it.

A repeat counts only once, and never by a date its signer wrote. Two packets whose servers share
their token times (shifted, with gaps shifted, or scaled: catalog/checks/independence.py's one rule
for a copy; the same servers re-sealed as a new packet, by the same signer or another) are one
measurement claimed twice, and two packets that claim the same campaign cell and repeat (the
runner issues each once: runner/fleet/cells.py) contradict each other. Which of the two came
first, or which is honest, cannot be told: `created` is written by whoever signs, a key's listed
validity bounds the dates it may sign but not when it signed, and nothing else in a packet is a
clock a signer does not hold. So neither counts: each is refused, naming the other, whatever the
order the packets are read or dated in, and the build warns of both (`--strict` fails) for a
person to settle. A forger can thereby keep an honest packet out of the count, never put its own
figure in its place. Repeats by one key on one host count (a fleet host repeats its own cells on
fresh servers); the page says how many hosts and keys the repeats span.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from catalog.checks.independence import CopyIndex, first_copy, row_points
from catalog.model.packet import Arm, Packet, ServerRun
from catalog.numbers import fmt

CONFIDENCE = 0.95


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < eps:
            break
    return result


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def student_t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (df may be fractional: Welch)."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, for 0.5 < p < 1, by bisection on the CDF (to 1e-12). Remembered:
    an interval over n repeats asks for the same t at n - 1 degrees of freedom on every family page
    a build makes, and solving for it (44 incomplete-beta evaluations) cost a page 1.2 ms of its CPU."""
    if not 0.5 < p < 1.0 or df <= 0:
        raise ValueError("t_quantile needs 0.5 < p < 1 and df > 0")
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        high *= 2.0
    while high - low > 1e-12 * max(1.0, high):
        middle = (low + high) / 2.0
        if student_t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


@dataclass(frozen=True)
class Interval:
    centre: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """The mean of `values` with its t-interval; None for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half)


@dataclass(frozen=True)
class Repeat:
    packet: Packet
    arm: Arm

    @property
    def value(self) -> float:
        value = self.arm.decode_tok_s
        assert value is not None  # only qualified arms are repeats
        return value


@dataclass(frozen=True)
class RefusedRepeat:
    packet: Packet
    arm: Arm
    reason: str


@dataclass(frozen=True)
class Combined:
    """The repeats of one configuration and setup, and what they add up to."""

    repeats: list[Repeat]
    refused: list[RefusedRepeat]
    # derived once, on creation: a family page reads a run's interval for its scorecard cell, its
    # history row and its words, and each reading solved for Student's t again
    interval: Interval | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "interval", t_interval([r.value for r in self.repeats]))

    @property
    def n(self) -> int:
        return len(self.repeats)

    @property
    def centre(self) -> float:
        return sum(r.value for r in self.repeats) / self.n

    @property
    def measured_once(self) -> bool:
        return self.n == 1

    @property
    def hosts(self) -> int:
        """Hosts the repeats ran on: their boot ids, or their packets where none was recorded."""
        return len({r.packet.identity.host.boot_id or r.packet.id for r in self.repeats})

    @property
    def keys(self) -> int:
        return len({r.packet.seal.signed_by for r in self.repeats})

    def words(self) -> str:
        """`3 repeats on 2 hosts: 101.20, 95% CI 99.04–103.36` or `measured once: no interval` (numbers
        rounded as every page rounds them, catalog/numbers.py)."""
        interval = self.interval
        if interval is None:
            return "measured once: no interval"
        hosts = f"{self.hosts} host{'s' if self.hosts != 1 else ''}"
        bounds = f"{fmt(interval.low)}–{fmt(interval.high)}"
        return f"{self.n} repeats on {hosts}: {fmt(interval.centre)}, {CONFIDENCE:.0%} CI {bounds}"


def _order(candidate: tuple[Packet, Arm]) -> tuple[str, str]:
    packet = candidate[0]
    return (packet.created.isoformat() if packet.created else "", packet.id)


def combine(candidates: Iterable[tuple[Packet, Arm]]) -> Combined:
    """The candidates (qualified measured arms of one configuration and setup), oldest first; each
    counted once. A forged repeat is refused, never silently merged (catalog/checks/repeats.py)."""
    return Combined(*count_repeats(candidates))


Claim = tuple[str, str | None, str, int]  # a campaign's name, round, cell and repeat


def _claim_words(cell: Claim) -> str:
    name, round_name, key, number = cell
    return f"campaign {name}" + (f" round {round_name}" if round_name else "") + f" cell {key} repeat {number}"


def _none(others: Sequence[str]) -> str:
    return "neither" if len(others) == 1 else "none of them"


def _copies(candidates: Sequence[tuple[Packet, Arm]]) -> list[set[str]]:
    """For each candidate, the other packets among them whose servers share its servers' timing,
    one copying the other either way round: every server indexed first, then each asked for the
    indexed servers it could copy (`CopyIndex.suspects`), so the answer holds in any order."""
    index = CopyIndex()
    owners: list[tuple[int, ServerRun]] = []  # (candidate, server) of each indexed server, by its number
    points = [[row_points(server) for server in arm.servers] for _, arm in candidates]
    for number, ((_, arm), its_points) in enumerate(zip(candidates, points, strict=True)):
        for server, server_points in zip(arm.servers, its_points, strict=True):
            if server.rows:
                index.add(server, server_points)
                owners.append((number, server))
    found: list[set[str]] = [set() for _ in candidates]
    for number, ((packet, arm), its_points) in enumerate(zip(candidates, points, strict=True)):
        for server, server_points in zip(arm.servers, its_points, strict=True):
            for suspect in index.suspects(server, server_points):
                other, theirs = owners[suspect]
                other_id = candidates[other][0].id
                if other_id == packet.id or other_id in found[number] or first_copy(server, theirs) is None:
                    continue
                found[number].add(other_id)
                found[other].add(packet.id)
    return found


def count_repeats(candidates: Iterable[tuple[Packet, Arm]]) -> tuple[list[Repeat], list[RefusedRepeat]]:
    """`combine`'s repeats, oldest first, and the refused; for a caller that combines them per
    setup (catalog/checks/history.py), without an interval over all of them. Whether a candidate
    counts never depends on the order it is given or dated in: a pair of packets that copy each
    other's servers, or that claim one campaign cell and repeat, are both refused, each naming
    the other."""
    ordered = sorted(candidates, key=_order)
    claims: dict[Claim, list[str]] = {}
    for packet, _ in ordered:
        ref = packet.campaign
        if ref is not None:
            holders = claims.setdefault((ref.name, ref.round, ref.cell, ref.repeat), [])
            if packet.id not in holders:
                holders.append(packet.id)
    copies = _copies(ordered)
    repeats: list[Repeat] = []
    refused: list[RefusedRepeat] = []
    for (packet, arm), copied in zip(ordered, copies, strict=True):
        reasons = []
        if copied:
            sharing = sorted(copied)
            reasons.append(
                f"its servers' token timings and those of {' and '.join(sharing)} are copies of one another, one"
                " measurement sealed twice: which came first cannot be told from the dates their signers wrote, so"
                f" {_none(sharing)} counts as a repeat"
            )
        ref = packet.campaign
        if ref is not None:
            cell = (ref.name, ref.round, ref.cell, ref.repeat)
            claiming = sorted(other for other in claims[cell] if other != packet.id)
            if claiming:
                verb = "does" if len(claiming) == 1 else "do"
                reasons.append(
                    f"claims {_claim_words(cell)}, as {' and '.join(claiming)} {verb}: the runner issues each cell's"
                    f" repeat once, so the claims contradict each other and {_none(claiming)} counts as a repeat"
                )
        if reasons:
            refused.append(RefusedRepeat(packet, arm, "; ".join(reasons)))
        else:
            repeats.append(Repeat(packet, arm))
    return repeats, refused
