"""catalog/checks/energy.py's floors: a window no shorter than the work it covers (a server's suite:
its rows' last token times summed; a concurrency level: its wall_s; a load level: its duration_s),
every card of a loaded window in the idle baseline and none averaging below its own idle figure
beyond the reading accuracy, and
no loaded window holding less energy than its steps' reads of the card's memory (÷ 4; a load
level's steps served at most its requests in flight at once).
Each refusal names its field and gives the numbers; honest windows (testkit's) pass."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.checks.energy import (
    CLOCK_SLACK_US,
    Work,
    below_idle_problems,
    concurrency_tokens,
    energy_problems,
    level_tokens,
    server_tokens,
    short_window_problems,
    suite_prompt_tokens,
    suite_work,
    windows,
)
from catalog.checks.physics import physics_problems
from catalog.model.energy import US, Tokens
from catalog.model.load_sweep import LoadLevel, LoadRequest, LoadSweep
from catalog.model.packet import ConcurrencyPoint, Ladder, PacketParts
from catalog.store.repository import load_data
from testkit.energy_samples import IDLE_W, steady_window, with_energy
from testkit.samples import make_load_sweep, measured_parts, with_load
from tests.catalog.factories import ORACLE_ARM, REPO, seal_draft

SERVER = "arms[0].servers[0].energy"
LEVEL = "ladders[0].load.levels[0].energy"
Draft = dict[str, Any]


def parts(watts: float = 180.0, idle: float = IDLE_W) -> PacketParts:
    """A measured packet's parts with a load sweep and a concurrency ladder on the oracle arm, and
    a steady window over every server's suite, level and point (testkit's, sized as a runner's)."""
    loaded = with_load(measured_parts(spec=False), {ORACLE_ARM: make_load_sweep(users=(1, 2), rates=())})
    point = ConcurrencyPoint(users=2, completion_tokens=240, wall_s=3.217_438_5, identical_to_oracle=True)
    ladders = [*loaded.ladders, Ladder(arm=ORACLE_ARM, kind="concurrency", concurrency=[point])]
    return with_energy(loaded.model_copy(update={"ladders": ladders}), watts=watts, idle=idle)


def draft(watts: float = 180.0, idle: float = IDLE_W) -> Draft:
    return parts(watts, idle).model_dump(mode="json")


def found(document: Draft) -> dict[str, str]:
    return dict(energy_problems(seal_draft(document)))


def test_honest_windows_pass_both_floors() -> None:
    packet = seal_draft(draft())
    assert energy_problems(packet) == []
    kinds = {m.where.split(".")[0].split("[")[0] for m in windows(packet) if m.work is not None}
    assert kinds == {"arms", "ladders"}  # servers, the load level and the concurrency point were all judged


def test_the_idle_baseline_covers_no_work() -> None:
    packet = seal_draft(draft())
    assert [m.work for m in windows(packet) if m.where == "energy.idle"] == [None]


def test_a_suite_window_shorter_than_its_rows_is_refused() -> None:
    honest = parts()
    server = honest.arms[0].servers[0]
    assert honest.energy is not None
    least = suite_work(server).least_us
    short = steady_window(180.0, US, server_tokens(server), honest.energy.idle_w())
    document = honest.model_dump(mode="json")
    document["arms"][0]["servers"][0]["energy"] = short.model_dump(mode="json")
    problems = found(document)
    assert list(problems) == [f"{SERVER}.duration_us"]
    assert problems[f"{SERVER}.duration_us"] == (
        f"is 1.000 s, shorter than the work it covers: its {len(server.rows)} prompts, sent one after another, "
        f"take {least / US:.3f} s to their last tokens (token_times_us) (slack {len(server.rows) + 1} µs of clock "
        "rounding)"
    )


def test_a_suite_window_is_the_sum_of_its_rows_last_token_times() -> None:
    server = parts().arms[0].servers[0]
    work = suite_work(server)
    assert work.least_us == sum(row.token_times_us[-1] for row in server.rows)
    assert work.times == len(server.rows)


def test_a_concurrency_window_shorter_than_its_wall_s_is_refused() -> None:
    honest = parts()
    assert honest.energy is not None
    ladder = next(lad for lad in honest.ladders if lad.kind == "concurrency")
    index = honest.ladders.index(ladder)
    point = ladder.concurrency[0]
    rows = honest.arms[0].servers[0].rows
    short = steady_window(180.0, round(point.wall_s * US / 2), concurrency_tokens(point, rows), honest.energy.idle_w())
    document = honest.model_dump(mode="json")
    document["ladders"][index]["concurrency"][0]["energy"] = short.model_dump(mode="json")
    where = f"ladders[{index}].concurrency[0].energy.duration_us"
    assert found(document) == {
        where: "is 1.609 s, shorter than the work it covers: the level's wall_s is 3.217 s "
        "(slack 2 µs of clock rounding)"
    }


def test_a_load_level_longer_than_its_window_is_refused() -> None:
    document = draft()
    level = document["ladders"][0]["load"]["levels"][0]
    window_s = level["energy"]["duration_us"] / US
    level["duration_s"] = window_s * 3  # the level says it ran three times as long as its samples
    problems = found(document)
    assert problems[f"{LEVEL}.duration_us"] == (
        f"is {window_s:.3f} s, shorter than the work it covers: the level's duration_s is {window_s * 3:.3f} s "
        "(slack 2 µs of clock rounding)"
    )


@pytest.mark.parametrize(
    ("short_by_us", "refused"), [(0, False), (2 * CLOCK_SLACK_US, False), (3, True), (10**6, True)]
)
def test_the_slack_is_clock_rounding_only(short_by_us: int, refused: bool) -> None:
    window = parts().arms[0].servers[0].energy
    assert window is not None
    work = Work(float(window.duration_us + short_by_us), 1, "the work")
    assert bool(short_window_problems("w", window, work)) is refused


def test_cards_below_their_idle_baseline_are_refused_in_every_loaded_window() -> None:
    problems = found(draft(watts=5.0))
    fields = [f for f in problems if f.endswith(".power_mw")]
    assert fields and all(".cards[0].power_mw" in f for f in fields)
    assert not any(f.startswith("energy.idle") for f in problems)  # the baseline is not held to itself
    assert len(fields) == len([m for m in windows(seal_draft(draft(watts=5.0))) if m.work is not None])
    message = problems[f"{SERVER}.cards[0].power_mw"]
    assert message.startswith(
        "averages 5.00 W over the loaded window, below device 0's idle baseline of 31.86 W (energy.idle) "
        "by more than the reading accuracy (5 W): energy above idle "
    )
    assert "J over " in message and "-" in message.split("energy above idle ")[1]


def test_below_idle_within_the_reading_accuracy_passes() -> None:
    assert found(draft(watts=IDLE_W - 4.9)) == {}
    assert f"{SERVER}.cards[0].power_mw" in found(draft(watts=IDLE_W - 5.1))


def test_the_packets_own_tighter_accuracy_is_the_one_applied() -> None:
    honest = parts(watts=IDLE_W - 2.0)
    window = honest.arms[0].servers[0].energy
    assert window is not None and honest.energy is not None
    idle_w = honest.energy.idle_w()
    assert idle_w is not None
    assert below_idle_problems(SERVER, window, idle_w, 5.0) == []
    [(field, message)] = below_idle_problems(SERVER, window, idle_w, 1.0)
    assert field == f"{SERVER}.cards[0].power_mw"
    assert "29.86 W" in message and "31.86 W" in message and "(1 W)" in message


def test_a_loaded_card_missing_from_the_idle_baseline_is_refused() -> None:
    """A reviewer's dodge: keep an honest idle baseline of device 0, and move every loaded window's
    samples at 5 W onto device 1 (its figures without energy above idle, as judge_window leaves
    them). below_idle_problems has no idle figure for device 1 to hold it to: the window is refused
    because its card is not one the idle baseline holds."""
    document = draft(watts=5.0)
    for arm in document["arms"]:
        for server in arm["servers"]:
            if server["energy"] is not None:
                server["energy"]["cards"][0]["device"] = 1
                server["energy"]["figures"]["above_idle_j"] = None
    problems = found(document)
    assert problems[f"{SERVER}.cards[0].device"] == (
        "device 1 is not in the idle baseline (energy.idle), which holds every card the campaign used"
    )
    assert not any(f.endswith("power_mw") and f.startswith("arms[") for f in problems)  # below idle: not judged
    window = parts(watts=5.0).arms[0].servers[0].energy
    assert window is not None
    assert below_idle_problems(SERVER, window, {7: IDLE_W}, 5.0) == []  # the reason the new rule is needed


def test_a_window_judged_without_tokens_is_still_held_to_its_work() -> None:
    honest = parts()
    server = honest.arms[0].servers[0]
    short = steady_window(180.0, US, Tokens(0, 0), None)
    assert short_window_problems(SERVER, short, suite_work(server))


def _memory_floor(watts: float) -> dict[str, str]:
    """physics_problems' energy floor of `parts()` at `watts`, its idle baseline below them (so only
    the memory floor speaks), checked against the repository's data/ (a B70: GDDR6 at 7.5 pJ/bit)."""
    return _memory_floor_of(draft(watts, idle=0.5))


def _memory_floor_of(document: Draft) -> dict[str, str]:
    packet = seal_draft(document)
    data = load_data(REPO / "data")
    recipe, card = data.recipes[packet.identity.model.slug], data.hardware[packet.identity.host.hardware]
    return {f: m for f, m in physics_problems(packet, recipe, card) if f.endswith("energy.cards")}


def test_a_window_below_the_energy_of_reading_the_weights_is_refused() -> None:
    """Qwen3.5-9B in BF16 reads about 16 GB a step: at 7.5 pJ/bit, 0.96 J, ÷ 4 a margin. A server
    whose samples say 5 W while it decodes 1,440 tokens one request at a time spends 0.11 J a
    token: less than a quarter of what moving its weights costs; so do the concurrency point and
    the load levels."""
    refused = _memory_floor(5.0)
    servers = {f"arms[0].servers[{j}].energy.cards" for j in (0, 1)}
    levels = {f"ladders[0].load.levels[{k}].energy.cards" for k in (0, 1)}
    assert set(refused) == servers | levels | {"ladders[1].concurrency[0].energy.cards"}
    assert "for 1,440 output tokens at 1 user(s): at least 1,440 steps" in refused["arms[0].servers[0].energy.cards"]
    assert "at 2 user(s)" in refused["ladders[1].concurrency[0].energy.cards"]
    assert "GDDR6 at 7.5 pJ/bit (Micron" in refused["arms[0].servers[0].energy.cards"]


def test_honest_windows_hold_the_memory_floor() -> None:
    assert _memory_floor(180.0) == {}


def _forged_levels(watts: float, sweep: LoadSweep | None = None) -> Draft:
    """`parts()` (with `sweep` as its load sweep when given) whose load levels' windows alone say
    `watts`, over an idle baseline of 0.3 W: the listed key's forgery of a level's J/token (its
    servers and concurrency point stay honest at 180 W)."""
    honest = parts(idle=0.3)
    if sweep is not None:
        ladders = [lad.model_copy(update={"load": sweep}) if lad.load is not None else lad for lad in honest.ladders]
        honest = with_energy(honest.model_copy(update={"ladders": ladders}), idle=0.3)
    assert honest.energy is not None
    idle_w, prompts = honest.energy.idle_w(), suite_prompt_tokens(honest.arms)
    document = honest.model_dump(mode="json")
    for i, ladder in enumerate(honest.ladders):
        for k, level in enumerate(ladder.load.levels if ladder.load is not None else []):
            window = steady_window(watts, round(level.duration_s * US), level_tokens(level, prompts), idle_w)
            document["ladders"][i]["load"]["levels"][k]["energy"] = window.model_dump(mode="json")
    return document


def test_load_levels_below_the_energy_of_reading_the_weights_are_refused() -> None:
    """0.5 W over a 2,880-token level: 47 J at 1 user, where its 2,880 steps' reads take 688 J (÷ 4);
    at 2 users the steps are half as many, and the floor half as high."""
    refused = _memory_floor_of(_forged_levels(0.5))
    assert set(refused) == {f"ladders[0].load.levels[{k}].energy.cards" for k in (0, 1)}
    one, two = refused["ladders[0].load.levels[0].energy.cards"], refused["ladders[0].load.levels[1].energy.cards"]
    assert one.startswith("give 46.6 J for 2,880 output tokens at 1 request in flight: at least 2,880 steps")
    assert two.startswith("give 24.6 J for 2,880 output tokens at 2 requests in flight: at least 1,440 steps")
    assert "take 688 J (÷ 4): less energy than moving the model's weights costs" in one


def test_every_load_level_is_held_to_its_requests_in_flight_open_loop_too() -> None:
    """The full sweep (closed 1 to 32 users, open 2 and 8 req/s, 24 requests a level): each level's
    steps served at most its requests in flight at once, as its own request times give them (24 at
    "32 users": a level never has more in flight than it sent); honest windows clear the floor."""
    sweep = make_load_sweep()
    assert _memory_floor_of(_forged_levels(180.0, sweep)) == {}
    refused = _memory_floor_of(_forged_levels(0.5, sweep))
    assert set(refused) == {f"ladders[0].load.levels[{k}].energy.cards" for k in range(len(sweep.levels))}
    at = {level.label: refused[f"ladders[0].load.levels[{k}].energy.cards"] for k, level in enumerate(sweep.levels)}
    assert "at 24 requests in flight: at least 120 steps" in at["32 users"]
    open_in_flight = [level.most_in_flight for level in sweep.levels if level.mode == "open"]
    assert 1 < open_in_flight[0] < open_in_flight[1] <= 24
    assert f"at {open_in_flight[1]} requests in flight" in at["8 req/s"]


def _request(sent_ms: float, e2e_ms: float | None, tokens: int = 10) -> LoadRequest:
    times: dict[str, Any] = {"error": "connection reset"} if e2e_ms is None else {"ttft_ms": 0.1, "e2e_ms": e2e_ms}
    return LoadRequest(prompt_id="p", planned_ms=sent_ms, sent_ms=sent_ms, output_tokens=tokens, **times)


def _in_flight(*requests: LoadRequest, users: int | None = None) -> int:
    kind: dict[str, Any] = {"mode": "closed", "users": users} if users else {"mode": "open", "rate_rps": 1.0}
    return LoadLevel(duration_s=1.0, client_cpu_s=0.0, requests=list(requests), **kind).most_in_flight


def test_a_levels_batch_is_its_requests_that_received_tokens_in_flight_at_once() -> None:
    """The memory floor's divisor for a load level: from its requests' own times, never fewer than
    the batch an honest level's steps served (an over-count only lowers the floor)."""
    a, b, c = _request(0.0, 100.0), _request(50.0, 100.0), _request(200.0, 100.0)
    assert _in_flight(a, b, c) == 2
    assert _in_flight(a, b, c, _request(60.0, 10.0, tokens=0)) == 2  # a request given no token took no step's
    assert _in_flight(a, b, c, _request(60.0, None, tokens=3)) == 3  # no recorded end: in flight throughout
    assert _in_flight(a, b, c, _request(60.0, None, tokens=3), users=2) == 2  # a closed level: at most its users
    assert _in_flight(_request(0.0, None, tokens=0)) == 0
    assert _in_flight(_request(0.0, 0.5)) == 1  # a request under 1 ms still served its tokens
    # a request under 1 ms (its end is counted 1 ms early) takes none off the others in flight
    assert _in_flight(_request(0.0, 100.0), _request(98.8, 100.0), _request(99.0, 0.5)) == 2


@pytest.mark.parametrize("users", [1, 11, 12, 13, 64, 10**9])
def test_a_concurrency_window_counts_each_users_prompt(users: int) -> None:
    """User i sends the suite's prompt i mod its count (runner/ladders.py): the window's tokens are
    the point's output and those prompts, counted per prompt (a forged 10⁹ users cost no more)."""
    rows = parts().arms[0].servers[0].rows
    point = ConcurrencyPoint(users=users, completion_tokens=7, wall_s=1.0)
    rounds, rest = divmod(users, len(rows))
    prompts = rounds * sum(row.prompt_tokens for row in rows) + sum(row.prompt_tokens for row in rows[:rest])
    assert concurrency_tokens(point, rows) == Tokens(output=7, total=7 + prompts)
    if users <= 64:
        assert prompts == sum(rows[i % len(rows)].prompt_tokens for i in range(users))
