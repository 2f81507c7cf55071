"""A campaign's windows judged once more when its packet is assembled: the idle baseline is the
one this run took (a resumed campaign reuses attempts, ladders and levels measured after an earlier
baseline), and each window's tokens are counted exactly as verification counts them."""

from __future__ import annotations

from catalog.checks.energy import concurrency_tokens, level_tokens, server_tokens, suite_prompt_tokens
from catalog.model.energy import EnergySetup, EnergyWindow, Tokens, judge_window
from catalog.model.packet import ArmParts, Ladder


def _again(window: EnergyWindow | None, tokens: Tokens, setup: EnergySetup) -> EnergyWindow | None:
    if window is None:
        return None
    return judge_window(window.cards, window.duration_us, setup.bounds, tokens, setup.idle_w())


def judged(arms: list[ArmParts], ladders: list[Ladder], setup: EnergySetup) -> tuple[list[ArmParts], list[Ladder]]:
    """The arms and ladders with every energy window judged against `setup`; a packet whose host had
    no energy source keeps none."""
    if setup.absent is not None:
        return _without(arms, ladders)
    prompt_tokens = suite_prompt_tokens(arms)
    new_arms = []
    for arm in arms:
        servers = [
            server.model_copy(update={"energy": _again(server.energy, server_tokens(server), setup)})
            for server in arm.servers
        ]
        new_arms.append(arm.model_copy(update={"servers": servers}))
    by_id = {arm.id: arm for arm in new_arms}
    new_ladders = []
    for ladder in ladders:
        owner = by_id.get(ladder.arm)
        rows = owner.servers[0].rows if owner is not None and owner.servers else []
        points = [
            point.model_copy(update={"energy": _again(point.energy, concurrency_tokens(point, rows), setup)})
            for point in ladder.concurrency
        ]
        load = ladder.load
        if load is not None:
            levels = [
                level.model_copy(update={"energy": _again(level.energy, level_tokens(level, prompt_tokens), setup)})
                for level in load.levels
            ]
            load = load.model_copy(update={"levels": levels})
        new_ladders.append(ladder.model_copy(update={"concurrency": points, "load": load}))
    return new_arms, new_ladders


def _without(arms: list[ArmParts], ladders: list[Ladder]) -> tuple[list[ArmParts], list[Ladder]]:
    """Windows a resumed campaign recorded on a host whose meter it no longer has are dropped."""
    new_arms = [
        arm.model_copy(update={"servers": [s.model_copy(update={"energy": None}) for s in arm.servers]}) for arm in arms
    ]
    new_ladders = []
    for ladder in ladders:
        points = [p.model_copy(update={"energy": None}) for p in ladder.concurrency]
        load = ladder.load
        if load is not None:
            load = load.model_copy(update={"levels": [lv.model_copy(update={"energy": None}) for lv in load.levels]})
        new_ladders.append(ladder.model_copy(update={"concurrency": points, "load": load}))
    return new_arms, new_ladders
