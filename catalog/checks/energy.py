"""Verification of a packet's energy windows (catalog/model/energy.py): every figure is computed
again from the window's samples and the tokens its rows served, and a figure the samples do not
give is refused; each card's power is bounded by its rated board power (data/hardware.yaml).

Each problem is `(field, message)`, like catalog.checks.consistency's, which runs these.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from catalog.model.energy import (
    AGREEMENT,
    GAP_BOUND_S,
    POWER_ACCURACY_W,
    US,
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
    prompts = sum(suite_rows[i % len(suite_rows)].prompt_tokens for i in range(point.users)) if suite_rows else 0
    return Tokens(output=point.completion_tokens, total=point.completion_tokens + prompts)


def level_tokens(level: LoadLevel, prompt_tokens: dict[str, int]) -> Tokens:
    """A load level's output tokens, and its completed requests' prompts besides."""
    prompts = sum(prompt_tokens.get(r.prompt_id, 0) for r in level.requests if r.completed)
    return Tokens(output=level.output_tokens, total=level.output_tokens + prompts)


# --- every window of a packet -------------------------------------------------------------------


def windows(packet: Packet) -> Iterator[tuple[str, EnergyWindow, Tokens, int | None]]:
    """(field, window, tokens it served, cards its server used) of every energy window; the idle
    baseline serves no token and spans every card the campaign used."""
    if packet.energy is not None and packet.energy.idle is not None:
        yield "energy.idle", packet.energy.idle, Tokens(0, 0), None
    prompt_tokens = suite_prompt_tokens(packet.arms)
    arms = {arm.id: arm for arm in packet.arms}
    for a, arm in enumerate(packet.arms):
        for s, server in enumerate(arm.servers):
            if server.energy is not None:
                yield f"arms[{a}].servers[{s}].energy", server.energy, server_tokens(server), _cards(arm)
    for i, ladder in enumerate(packet.ladders):
        owner = arms.get(ladder.arm)
        rows = owner.servers[0].rows if owner is not None and owner.servers else []
        cards = _cards(owner) if owner is not None else None
        for k, point in enumerate(ladder.concurrency):
            if point.energy is not None:
                yield f"ladders[{i}].concurrency[{k}].energy", point.energy, concurrency_tokens(point, rows), cards
        if ladder.load is not None:
            for k, level in enumerate(ladder.load.levels):
                if level.energy is not None:
                    yield (
                        f"ladders[{i}].load.levels[{k}].energy",
                        level.energy,
                        level_tokens(level, prompt_tokens),
                        cards,
                    )


def _cards(arm: Arm) -> int:
    return arm.config.tensor_parallel_size


# --- the checks ---------------------------------------------------------------------------------


def energy_problems(packet: Packet) -> list[Problem]:
    """Every window judged again from its samples; the rules no looser than the catalog's."""
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
    for where, window, tokens, cards in found:
        problems += window_problems(where, window, tokens, setup, None if where == "energy.idle" else idle_w)
        devices = [card.device for card in window.cards]
        if len(set(devices)) != len(devices):
            problems.append((f"{where}.cards", "a card appears twice"))
        if cards is not None and len(devices) != cards:
            problems.append((f"{where}.cards", f"holds {len(devices)} card(s); its server used {cards}"))
    return problems


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
    for where, window, _, _ in windows(packet):
        rated = hardware.board_power_w
        if rated is None:
            problems.append((where, f"{hardware.id} has no rated board power in data/hardware.yaml to bound it by"))
            continue
        for c, card in enumerate(window.cards):
            field = f"{where}.cards[{c}]"
            average = card_energy_j(card, window.duration_us) / (window.duration_us / US) if card.power_mw else 0.0
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
