"""A load level whose users were served faster than one user alone on the same arm: its per-user
rate is not the engine's (catalog.model.load_sweep.ALONE_BOUND), so the packet page flags the level
with the reason, the frontier draws it apart, and no answer ("many users") counts it. Physics
alone would pass such rates on a CPU host, whose ceiling is about 20 times what it serves."""

from __future__ import annotations

import json

from builder.views.answer import _users
from builder.views.load_sweep import UNUSABLE, frontier_chart, sweep_view
from builder.views.results import arm_results
from catalog.model.load_sweep import ALONE_BOUND
from catalog.model.packet import Packet
from catalog.numbers import fmt
from testkit.samples import ORACLE_ARM, SPEC_ARM, make_load_sweep, with_load
from tests.builder.factory import load_parts
from tests.catalog.factories import seal_parts

FAST_MS_PER_TOKEN = 5.0  # 200 tok/s for one user of the speculative arm, whose servers ran at about 73 alone


def _packet(spec_ms_per_token: float) -> Packet:
    parts = load_parts()
    parts = parts.model_copy(update={"ladders": [lad for lad in parts.ladders if lad.arm != SPEC_ARM]})
    return seal_parts(with_load(parts, {SPEC_ARM: make_load_sweep(ms_per_token=spec_ms_per_token)})).packet


def test_a_level_faster_than_alone_is_flagged_drawn_apart_and_never_an_answer() -> None:
    packet = _packet(FAST_MS_PER_TOKEN)
    ladder = next(lad for lad in packet.ladders if lad.arm == SPEC_ARM and lad.load is not None)
    assert ladder.load is not None
    alone = max(packet.arm(SPEC_ARM).server_values)
    fast = {lv.label for lv in ladder.load.levels if (lv.per_user_tok_s or 0) > ALONE_BOUND * alone}
    slow = {lv.label for lv in ladder.load.levels} - fast
    assert fast and slow  # the batch slows each user: the larger levels are within the bound

    view = sweep_view(packet, ladder, None, None)
    for row in view.rows:
        flagged = row.level in fast
        assert row.usable is not flagged and (row.flag == UNUSABLE) is flagged
        why = row.unusable_because or ""
        assert why.endswith("of one user alone: batching never serves a user faster") is flagged

    figure = json.loads(frontier_chart([(packet, ladder, view)]).figure_json)
    (apart,) = [trace for trace in figure["data"] if trace.get("name", "").replace("<br>", " ") == UNUSABLE]
    fast_rates = [float(fmt(lv.per_user_tok_s or 0)) for lv in ladder.load.levels if lv.label in fast]
    assert sorted(apart["x"]) == sorted(fast_rates)

    picks = {pick.users: pick for pick in _users(arm_results([packet], {}, []))}
    fast_users = {lv.users for lv in ladder.load.levels if lv.label in fast and lv.users and lv.users > 1}
    assert fast_users, "a level of more than one user over the bound, for the answer to leave out"
    for users in fast_users:
        assert users not in picks or SPEC_ARM not in picks[users].href  # the oracle arm's level, if any


def test_levels_within_the_bound_are_the_engines() -> None:
    """The fixture's own sweep (55 tok/s for one user, its servers at 73 alone) is not flagged."""
    packet = _packet(18.0)
    ladder = next(lad for lad in packet.ladders if lad.arm == SPEC_ARM and lad.load is not None)
    view = sweep_view(packet, ladder, None, None)
    assert all(row.flag != UNUSABLE and row.unusable_because is None for row in view.rows)
    assert ORACLE_ARM in {lad.arm for lad in packet.ladders}
