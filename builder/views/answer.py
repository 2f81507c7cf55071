"""The answer a reader comes with, at the top of a family page: which configuration to run on my
card, and how. Everything here is read from the family's packets, never typed.

- `run_this`: per card, the fastest published result for one user (the headline rule on that card:
  qualified, fewest cards, measured before imported) with its exact command, docker and local
  (catalog/recipes/shown.py: the packet's recorded command, or for an imported result the closest
  command composed, with every fact in which it differs from what the source measured); faster
  results on more cards; and, where a load sweep exists, the best configuration at each user count
  measured, with its per-user and aggregate rates.
- `verdict`: a short paragraph, each clause generated from the results and each number a link to
  the arm it comes from (tests/builder/test_site_verdict.py holds every number to the packets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from builder import routes
from builder.format import Num, num, words_per_second
from builder.views.common import SiteContext
from builder.views.load_sweep import LadderCommand, ladder_command
from builder.views.results import STATE_LABELS, ArmResult
from builder.views.scorecard import Matrix
from catalog.checks.selection import Headline, lead_of
from catalog.model.load_sweep import LoadLevel
from catalog.model.packet import Arm, Packet
from catalog.recipes.recipe import Recipe
from catalog.recipes.shown import ShownCommand, arm_command, multiline


@dataclass(frozen=True)
class CommandForms:
    """An arm's command as the hero shows it: each form copyable, and what it is."""

    local: str
    docker: str | None
    exact: bool  # the packet's recorded command; else the closest command composed here
    configuration: str | None
    differences: list[str]
    # `local` is the portable `vllm serve` form of a recorded command whose servers were started by
    # another (`launch_argv`): the words say so, and the exact launch command is shown beside it
    portable: bool = False
    launch: str | None = None  # that exact launch command, when it is not the docker form already shown


@dataclass(frozen=True)
class MoreCards:
    cards: int
    value: Num
    label: str
    href: str


@dataclass(frozen=True)
class UsersPick:
    """The best configuration at one closed-loop user count: aggregate and per-user rates."""

    users: int
    label: str
    per_user: Num | None
    aggregate: Num
    href: str
    # the command of the load sweep's own server, which produced these figures (not the one-user
    # command above it: a ladder's server runs many sequences), or why the packet shows none
    command: LadderCommand


@dataclass(frozen=True)
class RunThis:
    hardware_id: str
    hardware_name: str
    value: Num
    words: Num
    label: str
    quant_label: str
    cards: int
    state: str
    state_label: str
    href: str
    packet_id: str
    command: CommandForms | None
    more_cards: list[MoreCards]
    users: list[UsersPick]


@dataclass(frozen=True)
class Figure:
    """A number in the verdict, linked to the arm it comes from. `kind`: `tok_s` (the arm's centre),
    `ratio` (the arm's centre over `over`'s), `exact` (a gate's identical count of its total)."""

    text: str
    href: str
    packet_id: str
    arm_id: str
    kind: str
    over_packet: str = ""
    over_arm: str = ""


Piece = str | Figure


def _forms(shown: ShownCommand | None, arm: Arm) -> CommandForms | None:
    if shown is None:
        return None
    config = arm.config
    # a recorded command shown in its portable form: the servers ran `launch_argv`, which the card
    # shows too (as the packet page does), so the command beside the result is the one that produced it
    portable = (
        shown.exact
        and bool(config.argv)
        and bool(config.launch_argv)
        and tuple(config.argv) != tuple(config.launch_argv)
    )
    return CommandForms(
        local=shown.local,
        docker=shown.docker,
        exact=shown.exact,
        configuration=shown.configuration,
        differences=[f"{d.field}: {d.words('this command', 'the source')}" for d in shown.differences],
        portable=portable,
        launch=multiline(config.launch_argv, config.env) if portable and shown.docker is None else None,
    )


def _lead(results: Sequence[ArmResult]) -> ArmResult | None:
    lead = lead_of([Headline(r.packet, r.arm, r.grade) for r in results if r.qualified])
    return next((r for r in results if lead and r.arm is lead.arm and r.packet is lead.packet), None)


def _users(results: Sequence[ArmResult]) -> list[UsersPick]:
    """Per closed-loop user count of the published arms' load sweeps, the configuration with the
    highest aggregate rate among levels the client kept up with and whose every output matched the
    oracle (a level flagged unusable or divergent says nothing for this answer)."""
    best: dict[int, tuple[float, UsersPick]] = {}
    for r in results:
        if not r.published:
            continue
        for ladder in r.packet.ladders:
            if ladder.arm != r.arm.id or ladder.load is None:
                continue
            sweep = ladder.load
            for level in sweep.levels:
                if not _trusted(level, sweep.lag_bound_ms, r.arm.server_values) or level.users is None:
                    continue
                rate = level.aggregate_tok_s
                if level.users not in best or rate > best[level.users][0]:
                    per_user = level.per_user_tok_s
                    best[level.users] = (
                        rate,
                        UsersPick(
                            level.users,
                            f"{r.quant_label} · {r.arm.label}",
                            None if per_user is None else num(per_user, unit="tok/s"),
                            num(rate, unit="tok/s"),
                            routes.packet_page(r.packet.id, r.arm.id),
                            ladder_command(r.packet, ladder),
                        ),
                    )
    return [pick for _, (_, pick) in sorted(best.items()) if pick.users > 1]


def _trusted(level: LoadLevel, lag_bound_ms: float, alone_tok_s: Sequence[float]) -> bool:
    return level.usable(lag_bound_ms, alone_tok_s) and level.all_identical


def run_this(results: Sequence[ArmResult], recipe: Recipe | None, ctx: SiteContext) -> list[RunThis]:
    """Per card (the headline's first), the fastest published configuration for one user and how to run it."""
    picks = []
    cards = sorted({r.hardware_id for r in results})
    for hw in cards:
        on_card = [r for r in results if r.hardware_id == hw]
        lead = _lead(on_card)
        if lead is None:
            continue
        more = []
        for tp in sorted({r.tp for r in on_card if r.qualified and r.tp > lead.tp}):
            faster = _lead([r for r in on_card if r.tp == tp])
            if faster is not None and (faster.centre or 0.0) > (lead.centre or 0.0):
                more.append(MoreCards(tp, num(faster.centre or 0.0, unit="tok/s"), _label(faster), faster.href))
        shown = arm_command(lead.packet, lead.arm, recipe, ctx.catalog.hardware.get(hw))
        picks.append(
            RunThis(
                hardware_id=hw,
                hardware_name=lead.hardware_name,
                value=num(lead.centre or 0.0, unit="tok/s"),
                words=words_per_second(lead.centre or 0.0),
                label=lead.arm.label,
                quant_label=lead.quant_label,
                cards=lead.tp,
                state=lead.state,
                state_label=STATE_LABELS[lead.state],
                href=lead.href,
                packet_id=lead.packet.id,
                command=_forms(shown, lead.arm),
                more_cards=more,
                users=_users(on_card),
            )
        )
    return picks


def _label(result: ArmResult) -> str:
    return f"{result.quant_label}, {result.arm.label}"


def config_words(result: ArmResult) -> str:
    """The arm's configuration in words, from its recorded fields: `MTP depth 3 with the draft INT4
    head`, or `no speculation`."""
    if result.depth == 0:
        return "no speculation"
    head = f" and the {result.draft_head}" if result.draft_head else ""
    return f"{(result.method or 'speculative').upper()} depth {result.depth}{head}"


def _tok_s(result: ArmResult) -> Figure:
    return Figure(num(result.centre or 0.0).text, result.href, result.packet.id, result.arm.id, "tok_s")


def _oracle_of(result: ArmResult, results: Sequence[ArmResult]) -> ArmResult | None:
    """The arm's own no-speculation oracle: the arm its G3 compared with, else the packet's depth-0
    arm on the same cards."""
    against = next((g.against for g in result.arm.gates if g.gate == "G3"), None)
    mine = [r for r in results if r.packet is result.packet and r.depth == 0 and r.tp == result.tp]
    found = next((r for r in mine if r.arm.id == against), None) or next(iter(mine), None)
    return found if found is not None and found.published and found.centre else None


def _speedup(
    result: ArmResult, results: Sequence[ArmResult], words: str = "its own no-speculation oracle"
) -> list[Piece]:
    oracle = _oracle_of(result, results)
    if result.depth == 0 or oracle is None or not result.centre or not oracle.centre:
        return []
    ratio = Figure(
        num(result.centre / oracle.centre).text + "×",
        result.href,
        result.packet.id,
        result.arm.id,
        "ratio",
        oracle.packet.id,
        oracle.arm.id,
    )
    return [", ", ratio, f" {words} (", _tok_s(oracle), " tok/s)"]


def _exact(result: ArmResult) -> list[Piece]:
    gate = next((g for g in result.arm.gates if g.gate == "G3" and g.exact is not None), None)
    if gate is None:
        return []
    count = Figure(f"{gate.exact}/{gate.total}", result.href, result.packet.id, result.arm.id, "exact")
    return [" and token for token identical to it on ", count, " prompts"]


def _cards_words(tp: int) -> str:
    return "one card" if tp == 1 else f"{_NUMBERS.get(tp, str(tp))} cards"


_NUMBERS = {2: "two", 3: "three", 4: "four", 8: "eight"}


def _on(tp: int, card: str) -> str:
    return f"one {card}" if tp == 1 else f"{tp} × {card}"


def verdict(results: Sequence[ArmResult], matrices: Sequence[Matrix]) -> list[Piece]:
    """The family's verdict, clause by clause; empty when nothing of it is published."""
    lead = _lead(results)
    pieces: list[Piece] = []
    if lead is None:
        withheld = [r for r in results if r.state == "withheld"]
        if withheld:
            pieces.append(f"No result is published yet: {len(withheld)} measured configuration(s) are withheld. ")
        return pieces + _provenance(results)
    on_card = [r for r in results if r.hardware_id == lead.hardware_id]
    pieces += [
        f"On {_on(lead.tp, lead.hardware_name)}, {lead.quant_label} with {config_words(lead)} "
        "is fastest for one user: ",
        _tok_s(lead),
        " tok/s",
        *_speedup(lead, on_card),
        *_exact(lead),
        ". ",
    ]
    if lead.depth == 0:
        fastest = _lead([r for r in on_card if r.depth > 0 and r.tp == lead.tp and r.quant_label == lead.quant_label])
        if fastest is not None:
            pieces += [f"With {config_words(fastest)}: ", _tok_s(fastest), " tok/s"]
            pieces += [*_speedup(fastest, on_card, "the oracle"), *_exact(fastest), ". "]
    for quant in sorted({r.quant_label for r in on_card if r.qualified} - {lead.quant_label}):
        other = _lead([r for r in on_card if r.quant_label == quant and r.tp == lead.tp])
        if other is not None:
            pieces += [f"{quant} reaches ", _tok_s(other), f" tok/s with {config_words(other)}"]
            pieces += [*_speedup(other, on_card, "its oracle"), ". "]
    for tp in sorted({r.tp for r in on_card if r.qualified and r.tp > lead.tp}):
        best = _lead([r for r in on_card if r.tp == tp])
        if best is not None:
            words = f"{best.quant_label} with {config_words(best)}"
            pieces += [f"On {_on(tp, lead.hardware_name)}: ", _tok_s(best), f" tok/s ({words}). "]
    pieces += _withheld(results)
    pieces += _untested(matrices)
    return pieces + _provenance(results)


def _withheld(results: Sequence[ArmResult]) -> list[Piece]:
    """Withheld configurations, one clause per configuration with the card counts it failed on."""
    withheld = [r for r in results if r.state == "withheld"]
    if not withheld:
        return []
    groups: dict[tuple[str, str], list[ArmResult]] = {}
    for r in withheld:
        groups.setdefault((r.quant_label, config_words(r)), []).append(r)
    pieces: list[Piece] = ["Withheld by an identity gate not passed: "]
    for index, ((quant, words), group) in enumerate(sorted(groups.items())):
        pieces.append(f"{quant} with {words} on ")
        for position, r in enumerate(sorted(group, key=lambda r: r.tp)):
            pieces.append(_cards_words(r.tp))
            gate = next((g for g in r.arm.failed_gates if g.exact is not None), None)
            if gate is not None:
                pieces += [
                    " (",
                    Figure(f"{gate.exact}/{gate.total}", r.href, r.packet.id, r.arm.id, "exact"),
                    " identical)",
                ]
            pieces.append(" and " if position < len(group) - 1 else "")
        pieces.append("; " if index < len(groups) - 1 else ". ")
    return pieces


def _untested(matrices: Sequence[Matrix]) -> list[Piece]:
    untested = {u for m in matrices for u in m.untested if "(estimate shown)" not in u}
    estimated = sorted({u.removesuffix(" (estimate shown)") for m in matrices for u in m.untested if "(estimate" in u})
    pieces: list[Piece] = []
    if estimated:
        pieces.append(f"Estimated only, never measured: {' and '.join(estimated)}. ")
    if untested:
        pieces.append(f"{len(untested)} more combination(s) untested. ")
    return pieces


def _provenance(results: Sequence[ArmResult]) -> list[Piece]:
    packets: dict[str, Packet] = {r.packet.id: r.packet for r in results}
    measured = [p for p in packets.values() if p.provenance.kind == "measured"]
    imported = [r for r in results if r.state == "imported"]
    pieces: list[Piece] = []
    if imported:
        sources = sorted({p.provenance.source.name for p in packets.values() if p.provenance.source})
        every = "Every published result is" if not measured else f"{len(imported)} published result(s) are"
        pieces.append(f"{every} imported from {', '.join(sources)}, not measured by this runner")
    screened = [r for r in results if r.state == "screened"]
    if screened:
        pieces.append(
            ("; " if imported else "") + f"{len(screened)} more are screened, speed only (no identity outcome)"
        )
    if imported or screened:
        pieces.append(". ")
    return pieces
