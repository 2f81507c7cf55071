"""Verification of a packet's energy windows (catalog/model/energy.py). The rules:

- every figure is computed again from the window's samples and the tokens its rows served, and a
  figure the samples do not give is refused; the validity rules may be no looser than the catalog's;
- a window holds each card its server used, once;
- a window is no shorter than the work it covers (`Work`): a server's strict suite at least
  the sum of its rows' last token times (the runner sends the prompts one after another inside the
  window, runner/attempt.py), a concurrency level at least its `wall_s` and a load level at least its
  `duration_s` (both the very span of the window, runner/ladders.py, runner/load_sweep.py), to
  `CLOCK_SLACK_US` per recorded time;
- every card of a loaded window is in the idle baseline (energy.idle, when valid), and none
  averages below its own idle figure by more than the packet's reading accuracy
  (energy.bounds.power_accuracy_w): serving never draws less than idling, so neither a card below
  idle nor a negative energy above idle beyond that accuracy is published;
- each card's power is bounded by its rated board power (data/hardware.yaml);
- no loaded window holds less energy than its steps' reads of the cards' memory, where the card's
  memory cites its energy per bit (`memory_floor_problems`, run with the physics' step model by
  catalog/checks/physics.py).

Each problem is `(field, message)`, like catalog.checks.consistency's, which runs these.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from catalog.model.energy import (
    AGREEMENT,
    GAP_BOUND_S,
    POWER_ACCURACY_W,
    US,
    CardTrace,
    EnergyFigures,
    EnergySetup,
    EnergyWindow,
    Tokens,
    card_energy_j,
    judge_window,
)
from catalog.model.load_sweep import LoadLevel
from catalog.model.packet import Arm, ArmParts, ConcurrencyPoint, Packet, PromptRow, ServerRun
from catalog.recipes.hardware import Hardware

Problem = tuple[str, str]

AVERAGE_MARGIN = 1.1
"""How far a card's average power over a window may exceed its rated board power: the board's
sustained limit holds the average near it, and the readings are only accurate to a few percent."""

SAMPLE_MARGIN = 2.0
"""How far one power sample may exceed the rated board power: short excursions above the sustained
limit are allowed by design, twice it is a unit slip (mW read as W) or another card's figure."""

CLOCK_SLACK_US = 1
"""How far (µs) a window may fall short of its work, per recorded time that work is summed from
(and one for the window's own duration_us). The window and the requests are timed on one clock
(time.perf_counter) and the runner rounds each time to the microsecond (round(t * 1e6) for a row's
token_times_us and for duration_us), so each rounded time may be off by half a microsecond; an
honest window is never shorter than its work by more, and a window short of it by anything more
covers work its samples were not taken over."""


# --- the tokens each window served --------------------------------------------------------------


def suite_prompt_tokens(arms: Sequence[ArmParts]) -> dict[str, int]:
    """Prompt tokens of each suite prompt, as the servers counted them (the same on every server)."""
    found: dict[str, int] = {}
    for arm in arms:
        for server in arm.servers:
            for row in server.rows:
                found.setdefault(row.prompt_id, row.prompt_tokens)
    return found


def server_tokens(server: ServerRun) -> Tokens:
    output = sum(row.completion_tokens for row in server.rows)
    return Tokens(output=output, total=output + sum(row.prompt_tokens for row in server.rows))


def concurrency_tokens(point: ConcurrencyPoint, suite_rows: list[PromptRow]) -> Tokens:
    """A concurrency level sends prompt i mod the suite's count to each of its users (runner/ladders.py)."""
    sends = point.prompt_sends(len(suite_rows)) if suite_rows else []
    prompts = sum(times * row.prompt_tokens for times, row in zip(sends, suite_rows, strict=True))
    return Tokens(output=point.completion_tokens, total=point.completion_tokens + prompts)


def level_tokens(level: LoadLevel, prompt_tokens: dict[str, int]) -> Tokens:
    """A load level's output tokens, and its completed requests' prompts besides."""
    prompts = sum(prompt_tokens.get(r.prompt_id, 0) for r in level.requests if r.completed)
    return Tokens(output=level.output_tokens, total=level.output_tokens + prompts)


# --- the work each window covers ----------------------------------------------------------------


class Work(NamedTuple):
    """The least time (µs) a window's own work takes, how many recorded times it is summed from,
    and what it is, in words."""

    least_us: float
    times: int
    what: str


def suite_work(server: ServerRun) -> Work:
    """The strict suite's prompts go one after another inside the server's window (runner/attempt.py
    awaits each stream before sending the next), and each row's token times count from its own
    request's sending: the window holds at least every row's last token time, summed."""
    timed = [row.token_times_us[-1] for row in server.rows if len(row.token_times_us)]
    return Work(
        float(sum(timed)),
        len(timed),
        f"its {len(timed)} prompts, sent one after another, take {sum(timed) / US:.3f} s to their last tokens "
        "(token_times_us)",
    )


def concurrency_work(point: ConcurrencyPoint) -> Work:
    """A concurrency level's window is its wall_s: first request sent to last one done (runner/ladders.py)."""
    return Work(point.wall_s * US, 1, f"the level's wall_s is {point.wall_s:.3f} s")


def level_work(level: LoadLevel) -> Work:
    """A load level's window is its duration_s: first planned send to last request finished
    (runner/load_sweep.py, LevelRunner.span)."""
    return Work(level.duration_s * US, 1, f"the level's duration_s is {level.duration_s:.3f} s")


# --- every window of a packet -------------------------------------------------------------------


class Measured(NamedTuple):
    """One energy window of a packet: its field, the tokens it served, the cards its server used
    and the work it covers (None for the idle baseline, which serves no token and spans every card
    the campaign used); the arm it served (None for the idle baseline) and the most users one step
    of it served: a server's suite serves one request at a time, a concurrency point its `users`, a
    load level (closed or open) the most of its requests in flight at once
    (`LoadLevel.most_in_flight`, from their own times)."""

    where: str
    window: EnergyWindow
    tokens: Tokens
    cards: int | None
    work: Work | None
    arm: str | None = None
    users: int = 0
    users_words: str = ""


def windows(packet: Packet) -> Iterator[Measured]:
    """Every energy window of the packet, the idle baseline first."""
    if packet.energy is not None and packet.energy.idle is not None:
        yield Measured("energy.idle", packet.energy.idle, Tokens(0, 0), None, None)
    prompt_tokens = suite_prompt_tokens(packet.arms)
    arms = {arm.id: arm for arm in packet.arms}
    for a, arm in enumerate(packet.arms):
        for s, server in enumerate(arm.servers):
            if server.energy is not None:
                yield Measured(
                    f"arms[{a}].servers[{s}].energy",
                    server.energy,
                    server_tokens(server),
                    _cards(arm),
                    suite_work(server),
                    arm.id,
                    1,
                    "1 user(s)",
                )
    for i, ladder in enumerate(packet.ladders):
        owner = arms.get(ladder.arm)
        rows = owner.servers[0].rows if owner is not None and owner.servers else []
        cards = _cards(owner) if owner is not None else None
        for k, point in enumerate(ladder.concurrency):
            if point.energy is not None:
                yield Measured(
                    f"ladders[{i}].concurrency[{k}].energy",
                    point.energy,
                    concurrency_tokens(point, rows),
                    cards,
                    concurrency_work(point),
                    ladder.arm,
                    point.users,
                    f"{point.users} user(s)",
                )
        if ladder.load is not None:
            for k, level in enumerate(ladder.load.levels):
                if level.energy is not None:
                    yield Measured(
                        f"ladders[{i}].load.levels[{k}].energy",
                        level.energy,
                        level_tokens(level, prompt_tokens),
                        cards,
                        level_work(level),
                        ladder.arm,
                        level.most_in_flight,
                        f"{level.most_in_flight} request{'' if level.most_in_flight == 1 else 's'} in flight",
                    )


def _cards(arm: Arm) -> int:
    return arm.config.tensor_parallel_size


# --- the checks ---------------------------------------------------------------------------------


def energy_problems(packet: Packet) -> list[Problem]:
    """Every window judged again from its samples, the rules no looser than the catalog's; each
    loaded window no shorter than its work, and none of its cards below its idle baseline."""
    found = list(windows(packet))
    if not found:
        return []
    setup = packet.energy
    if packet.provenance.kind != "measured":
        return [(found[0][0], "energy is measured by this runner only: an imported packet carries none")]
    if setup is None:
        return [(found[0][0], "an energy window needs the packet's energy setup (its sources and rules)")]
    problems = _setup_problems(setup)
    idle_w = setup.idle_w()
    for where, window, tokens, cards, work, *_ in found:
        problems += window_problems(where, window, tokens, setup, None if work is None else idle_w)
        devices = [card.device for card in window.cards]
        if len(set(devices)) != len(devices):
            problems.append((f"{where}.cards", "a card appears twice"))
        if cards is not None and len(devices) != cards:
            problems.append((f"{where}.cards", f"holds {len(devices)} card(s); its server used {cards}"))
        if work is not None:
            problems += short_window_problems(where, window, work)
            if idle_w is not None:
                problems += _unidled_problems(where, devices, idle_w)
                problems += below_idle_problems(where, window, idle_w, setup.bounds.power_accuracy_w)
    return problems


def _unidled_problems(where: str, devices: list[int], idle_w: dict[int, float]) -> list[Problem]:
    """The idle baseline holds every card the campaign used (the runner samples them all before the
    first server starts): a loaded window on a card it lacks would escape the below-idle check."""
    return [
        (
            f"{where}.cards[{c}].device",
            f"device {device} is not in the idle baseline (energy.idle), which holds every card the campaign used",
        )
        for c, device in enumerate(devices)
        if device not in idle_w
    ]


MEMORY_FLOOR_MARGIN = 4.0
"""How far below the energy of its memory reads a window may fall: the card's figure is its memory
devices' average energy per bit (data/hardware.yaml cites it), long streaming reads of weight
tensors may cost less than that average, and a cache may serve some of what the step model counts."""


def memory_floor_problems(
    found: Sequence[Measured], index: int, arm: Arm, step_bytes: float, tokens_per_step: float, hardware: Hardware
) -> list[Problem]:
    """Each loaded window of the arm (of the packet's `found` windows) holds at least the energy of
    the steps its output tokens took, each reading `step_bytes` (the weights, and the KV cache at the
    suite's context: the physics' step model, catalog/checks/physics.py) from the cards' memory at
    the card's energy per bit, ÷ MEMORY_FLOOR_MARGIN. A step yields at most `tokens_per_step` tokens
    to each of the window's `users`. Samples of a few watts under a 9B model would otherwise publish
    a J/token below what moving its weights costs."""
    figure = hardware.memory_energy_pj_per_bit
    if figure is None or step_bytes <= 0 or tokens_per_step <= 0:
        return []
    step_j = step_bytes * 8 * figure.value * 1e-12
    problems: list[Problem] = []
    for measured in found:
        tokens, figures = measured.tokens.output, measured.window.figures
        if measured.arm != arm.id or tokens <= 0 or figures is None:
            continue
        steps = tokens / (measured.users * tokens_per_step)
        least = steps * step_j / MEMORY_FLOOR_MARGIN
        if figures.energy_j >= least:
            continue
        problems.append(
            (
                f"{measured.where}.cards",
                f"give {figures.energy_j:.3g} J for {tokens:,} output tokens at {measured.users_words}: at least"
                f" {steps:,.0f} steps ({tokens_per_step:g} token(s) a step a user), each reading"
                f" {step_bytes / 1e9:.3g} GB from the cards' {hardware.memory_type} at {figure.value:g} pJ/bit"
                f" ({figure.source}), take {least:.3g} J (÷ {MEMORY_FLOOR_MARGIN:g}): less energy than moving"
                " the model's weights costs",
            )
        )
    return problems


def short_window_problems(where: str, window: EnergyWindow, work: Work) -> list[Problem]:
    """A window shorter than the work it covers (beyond CLOCK_SLACK_US per recorded time) would
    spread that work's tokens over samples of a fraction of it: J per token a fraction of the truth."""
    slack = CLOCK_SLACK_US * (work.times + 1)
    if window.duration_us + slack >= work.least_us:
        return []
    return [
        (
            f"{where}.duration_us",
            f"is {window.duration_s:.3f} s, shorter than the work it covers: {work.what} "
            f"(slack {slack} µs of clock rounding)",
        )
    ]


def below_idle_problems(where: str, window: EnergyWindow, idle_w: dict[int, float], accuracy_w: float) -> list[Problem]:
    """A card that averages below its own idle baseline over a loaded window, by more than the
    reading accuracy: serving draws more than idling, so its samples (and any energy above idle
    they give) are not the card's."""
    problems: list[Problem] = []
    for c, card in enumerate(window.cards):
        idle = idle_w.get(card.device)
        average = _average_w(card, window)
        if idle is None or average is None or average >= idle - accuracy_w:
            continue
        above = (average - idle) * window.duration_s
        problems.append(
            (
                f"{where}.cards[{c}].power_mw",
                f"averages {average:.2f} W over the loaded window, below device {card.device}'s idle baseline of "
                f"{idle:.2f} W (energy.idle) by more than the reading accuracy ({accuracy_w:g} W): "
                f"energy above idle {above:.1f} J over {window.duration_s:.3f} s",
            )
        )
    return problems


def _average_w(card: CardTrace, window: EnergyWindow) -> float | None:
    """The card's average power over the window (W); None without a power sample."""
    return card_energy_j(card, window.duration_us) / window.duration_s if card.power_mw else None


def _setup_problems(setup: EnergySetup) -> list[Problem]:
    problems: list[Problem] = []
    bounds = setup.bounds
    for field, value, rule in (
        ("gap_bound_s", bounds.gap_bound_s, GAP_BOUND_S),
        ("agreement", bounds.agreement, AGREEMENT),
        ("power_accuracy_w", bounds.power_accuracy_w, POWER_ACCURACY_W),
    ):
        if value > rule:
            problems.append((f"energy.bounds.{field}", f"{value:g} is looser than the catalog's rule ({rule:g})"))
    return problems


def window_problems(
    where: str, window: EnergyWindow, tokens: Tokens, setup: EnergySetup, idle_w: dict[int, float] | None
) -> list[Problem]:
    """The window judged again: the same reasons, or the same figures to the last digit."""
    again = judge_window(window.cards, window.duration_us, setup.bounds, tokens, idle_w)
    if again.invalid != window.invalid:
        if window.figures is not None:
            return [(f"{where}.figures", f"an energy figure its samples do not give: {again.invalid[0]}")]
        if again.figures is not None:
            return [(f"{where}.invalid", f"the samples give a valid window, not {window.invalid[0]!r}")]
        return [(f"{where}.invalid", f"the samples say {again.invalid}, not {window.invalid}")]
    if window.figures is None or again.figures is None:
        return []
    return [
        (f"{where}.figures.{name}", f"is {recorded}; its samples give {derived}")
        for name, recorded, derived in _figure_pairs(window.figures, again.figures)
        if not _same(recorded, derived)
    ]


def _figure_pairs(recorded: EnergyFigures, derived: EnergyFigures) -> Iterator[tuple[str, object, object]]:
    for name in type(recorded).model_fields:
        yield name, getattr(recorded, name), getattr(derived, name)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def board_power_problems(packet: Packet, hardware: Hardware | None) -> list[Problem]:
    """No card averages more than its rated board power (x AVERAGE_MARGIN) over a window, and no
    sample exceeds it twice over; a card without a rated board power carries no energy window."""
    if hardware is None:
        return []
    problems: list[Problem] = []
    for where, window, *_ in windows(packet):
        rated = hardware.board_power_w
        if rated is None:
            problems.append((where, f"{hardware.id} has no rated board power in data/hardware.yaml to bound it by"))
            continue
        for c, card in enumerate(window.cards):
            field = f"{where}.cards[{c}]"
            average = _average_w(card, window) or 0.0
            if average > rated.value * AVERAGE_MARGIN:
                problems.append(
                    (
                        f"{field}.power_mw",
                        f"averages {average:.0f} W over the window, above {hardware.name}'s rated {rated.value:g} W "
                        f"board power (x {AVERAGE_MARGIN:g})",
                    )
                )
            highest = max(card.power_mw, default=0) / 1000.0
            if highest > rated.value * SAMPLE_MARGIN:
                problems.append(
                    (
                        f"{field}.power_mw",
                        f"a sample of {highest:.0f} W is over twice {hardware.name}'s rated "
                        f"{rated.value:g} W board power",
                    )
                )
    return problems
