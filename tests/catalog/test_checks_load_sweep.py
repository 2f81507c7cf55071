"""catalog.checks.load_sweep: one test per refusal of a load sweep (a factory packet with a sweep,
mutated, refused with its field and the values involved), a sound sweep accepted, and the loader
naming file and field of the suite-order check."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from catalog.checks.load_sweep import load_prompt_problems
from catalog.model.load_sweep import LoadLevel, LoadRequest, LoadSweep, poisson_offsets_ms
from catalog.packets.seal import write_packet
from catalog.store.repository import load_catalog
from tests.catalog.factories import N_TOKENS, ORACLE_ARM, SPEC_ARM, published_arm, published_draft, sealed, strict_suite
from tests.catalog.test_consistency import G1, Draft, edited, edited_draft, found, load_problems, only, plain_ceiling

PROMPTS = [p.id for p in strict_suite().prompts]
REQUESTS = 3
SEED = 7
TOKENS = N_TOKENS  # identical to the oracle: its rows' length
TPOT_MS = 99 * 25.0 / (TOKENS - 1)  # each request 80 + 99 x 25 ms, as before


def rows(planned: list[float], tpot_ms: float = TPOT_MS) -> list[LoadRequest]:
    return [
        LoadRequest(
            prompt_id=PROMPTS[k % len(PROMPTS)],
            planned_ms=due,
            sent_ms=due + 0.2,
            ttft_ms=80.0,
            e2e_ms=80.0 + (TOKENS - 1) * tpot_ms,
            output_tokens=TOKENS,
            tpot_ms=tpot_ms,
            identical_to_oracle=True,
        )
        for k, due in enumerate(planned)
    ]


def paced(row: Draft, tpot_ms: float, **values: object) -> None:
    """The request's tokens after the first `tpot_ms` apart, its stream closing with its last token
    when it did: its first token came that much later."""
    row.update(tpot_ms=tpot_ms, ttft_ms=row["e2e_ms"] - tpot_ms * (row["output_tokens"] - 1), **values)


def closed(users: int) -> LoadLevel:
    # user k % users sends request k when its previous one finished (each takes 80 + 99 x 25 ms)
    due = [(k // users) * (80.0 + 99 * 25.0 + 0.2) for k in range(REQUESTS)]
    return LoadLevel(mode="closed", users=users, duration_s=9.0, client_cpu_s=0.1, requests=rows(due))


def opened(rate: float) -> LoadLevel:
    planned = poisson_offsets_ms(rate, REQUESTS, SEED)
    return LoadLevel(mode="open", rate_rps=rate, duration_s=9.0, client_cpu_s=0.1, requests=rows(planned))


def load_ladder(arm: str = ORACLE_ARM, levels: list[LoadLevel] | None = None) -> dict[str, Any]:
    sweep = LoadSweep(seed=SEED, requests_per_level=REQUESTS, levels=levels or [closed(1), closed(2), opened(2.0)])
    return {"arm": arm, "kind": "load", "load": sweep.model_dump(mode="json")}


def with_sweep(change: Any = None, **kw: Any) -> Draft:
    """The factory packet with one sound sweep, then `change` applied to that sweep's JSON form."""

    def add(draft: Draft) -> None:
        draft["ladders"] = [load_ladder()]
        if change is not None:
            change(draft["ladders"][0]["load"])

    return edited_draft(add, **kw)


def request(sweep: Draft, level: int, index: int) -> Draft:
    result: Draft = sweep["levels"][level]["requests"][index]
    return result


def test_a_sound_sweep_passes() -> None:
    packet = edited(lambda d: d.update(ladders=[load_ladder(ORACLE_ARM), load_ladder(SPEC_ARM)]))
    assert found(packet) == {}
    assert load_prompt_problems(packet, strict_suite()) == []


def test_an_open_level_planned_off_its_schedule() -> None:
    packet = sealed(with_sweep(lambda s: request(s, 2, 1).update(planned_ms=request(s, 2, 1)["planned_ms"] + 0.01)))
    field, message = only(found(packet.packet))
    assert field == "ladders[0].load.levels[2].requests[1].planned_ms"
    expected = poisson_offsets_ms(2.0, REQUESTS, SEED)[1]
    plans = f"but 2 req/s with seed {SEED} plans {expected:,.3f} ms: not the recorded schedule"
    assert message == f"is {expected + 0.01:,.3f} ms, {plans}"


def test_planned_times_of_another_seed() -> None:
    packet = sealed(with_sweep(lambda s: s.update(seed=SEED + 1)))
    assert set(found(packet.packet)) == {"ladders[0].load.levels[2].requests[0].planned_ms"}


def test_more_output_tokens_than_the_workload_asked_for() -> None:
    packet = sealed(with_sweep(lambda s: request(s, 1, 2).update(output_tokens=513, tpot_ms=None)))
    problems = found(packet.packet)
    assert problems["ladders[0].load.levels[1].requests[2].output_tokens"] == (
        "513 output tokens exceed the workload's max_tokens 512"
    )
    # and the request's end-to-end time holds 120 tokens, not 513 (catalog/checks/physics.py), nor
    # is an output of 513 tokens identical to the oracle's of 120 (catalog/checks/load_sweep.py)
    assert set(problems) == {
        "ladders[0].load.levels[1].requests[2].output_tokens",
        "ladders[0].load.levels[1].requests[2].e2e_ms",
        "ladders[0].load.levels[1].requests[2].identical_to_oracle",
    }


def test_closed_levels_out_of_order_or_repeated() -> None:
    def swap(sweep: Draft) -> None:
        levels = sweep["levels"]
        levels[0], levels[1] = levels[1], levels[0]

    assert only(found(sealed(with_sweep(swap)).packet)) == (
        "ladders[0].load.levels[1].users",
        "1 user after a level of 2: closed-loop levels ascend without repeats",
    )
    repeated = sealed(with_sweep(lambda s: s["levels"].__setitem__(1, copy.deepcopy(s["levels"][0]))))
    assert set(found(repeated.packet)) == {"ladders[0].load.levels[1].users"}


def test_a_closed_level_after_an_open_one() -> None:
    packet = sealed(with_sweep(lambda s: s["levels"].append(s["levels"][0])))
    problems = found(packet.packet)
    assert problems["ladders[0].load.levels[3].mode"].startswith("a closed-loop level after an open-loop one")


def test_an_open_rate_measured_twice() -> None:
    packet = sealed(with_sweep(lambda s: s["levels"].append(s["levels"][2])))
    assert only(found(packet.packet)) == (
        "ladders[0].load.levels[3].rate_rps",
        "2 req/s is measured twice in this sweep",
    )


def test_two_sweeps_of_one_arm() -> None:
    packet = edited(lambda d: d.update(ladders=[load_ladder(), load_ladder()]))
    assert only(found(packet)) == ("ladders[1]", f"arm {ORACLE_ARM!r} has a second load sweep (its first: ladders[0])")


def _every_request(sweep: Draft, level: int, tpot_ms: float, **values: float) -> None:
    for row in sweep["levels"][level]["requests"]:
        paced(row, tpot_ms, **values)


def test_a_level_per_user_decode_rate_over_the_physical_ceiling() -> None:
    plain = plain_ceiling(edited(lambda d: None), 0)
    fast = 1000.0 / (plain * 1.5 * 1.01)
    packet = sealed(with_sweep(lambda s: _every_request(s, 1, tpot_ms=fast)))
    field, message = only(found(packet.packet))
    assert field == "ladders[0].load.levels[1].requests"
    assert message.startswith(f"decode rate {plain * 1.5 * 1.01:.3g} tok/s exceeds the physical ceiling {plain:.3g}")
    within = sealed(with_sweep(lambda s: _every_request(s, 1, tpot_ms=1000.0 / (plain * 1.5 * 0.99))))
    assert found(within.packet) == {}


def test_one_request_read_in_a_burst_does_not_refuse_an_honest_level() -> None:
    """A real CPU sweep had one request whose tokens reached the client together (TPOT 0.01 ms):
    the level's published per-user rate, its median, stayed physical."""
    burst = sealed(with_sweep(lambda s: paced(request(s, 1, 1), 0.01)))
    assert found(burst.packet) == {}


def test_a_level_the_client_fell_behind_has_no_per_user_rate_to_refuse() -> None:
    """CI's real CPU sweep on a loaded host: a 2-user level read four of its five responses in one go
    and the fifth in two reads 0.47 ms apart (TPOT 0.004 ms, 245,942 tok/s). That median of one
    was refused by physics and the whole packet with it; the level has no per-user rate instead,
    and stays flagged unusable. Every request over the ceiling with none read in one go is still
    refused (the test above)."""

    def behind(sweep: Draft) -> None:
        rows = sweep["levels"][1]["requests"]
        for row in rows[:-1]:
            row.update(tpot_ms=None)
        paced(rows[-1], 0.004)

    packet = sealed(with_sweep(behind))
    assert found(packet.packet) == {}
    level = packet.packet.ladders[0].load.levels[1]  # type: ignore[union-attr]
    assert level.per_user_tok_s is None and not level.usable(packet.packet.ladders[0].load.lag_bound_ms, ())  # type: ignore[union-attr]


def test_a_level_delivered_in_bursts_has_no_per_user_rate_to_refuse() -> None:
    """CI's real CPU campaign on a loaded host: every response of a 4-user level came as its first
    token after 257 ms, then 100 tokens in two reads within 4 ms (25,800 tok/s a user, over the
    ceiling). Its reads show the delivery, not the server, set that pace: the level has no per-user
    rate and is flagged. The same rates with reads one a token are still refused."""
    plain = plain_ceiling(edited(lambda d: None), 0)
    fast = 1000.0 / (plain * 1.5 * 1.5)

    def delivered(reads: int) -> Any:
        return lambda s: _every_request(s, 1, tpot_ms=fast, reads=reads)

    burst = sealed(with_sweep(delivered(3)))
    assert found(burst.packet) == {}
    sweep = burst.packet.ladders[0].load
    assert sweep is not None
    assert sweep.levels[1].per_user_tok_s is None and not sweep.levels[1].usable(sweep.lag_bound_ms, ())
    streamed = sealed(with_sweep(delivered(100)))
    field, message = only(found(streamed.packet))
    assert field == "ladders[0].load.levels[1].requests" and "exceeds the physical ceiling" in message


def test_a_speculative_arms_users_may_reach_depth_plus_one_times_the_ceiling() -> None:
    plain = plain_ceiling(edited(lambda d: None), 1)
    rate = plain * 3 * 1.5 * 0.99  # the factory's speculative arm has depth 2

    def fast(draft: Draft) -> None:
        ladder = load_ladder(SPEC_ARM)
        paced(ladder["load"]["levels"][0]["requests"][0], 1000.0 / rate)
        draft["ladders"] = [ladder]

    assert found(edited(fast)) == {}


def test_prompts_out_of_the_suites_order_or_outside_it() -> None:
    def reorder(sweep: Draft) -> None:
        request(sweep, 0, 1)["prompt_id"] = PROMPTS[2]
        request(sweep, 2, 0)["prompt_id"] = "not-a-prompt"

    packet = sealed(with_sweep(reorder)).packet
    assert load_prompt_problems(packet, strict_suite()) == [
        (
            "ladders[0].load.levels[0].requests[1].prompt_id",
            f"is {PROMPTS[2]!r}, but request 1 sends the suite's prompt {PROMPTS[1]!r}",
        ),
        ("ladders[0].load.levels[2].requests[0].prompt_id", "'not-a-prompt' is not a prompt of suite 'strict-v1'"),
    ]


def test_the_loader_names_file_and_field_of_the_prompt_order(tree: Path) -> None:
    path = write_packet(sealed(with_sweep(lambda s: request(s, 1, 0).update(prompt_id=PROMPTS[5]))), tree / "packets")
    located = [(e.file, e.field) for e in load_problems(tree)]
    assert located == [(str(path), "ladders[0].load.levels[1].requests[0].prompt_id")]
    ok = tree / "ok"
    (ok / "packets").mkdir(parents=True)
    write_packet(sealed(with_sweep()), ok / "packets")
    assert len(load_catalog(tree / "data", ok / "packets").packets) == 1


def test_an_imported_sweep_is_held_to_no_schedule_nor_suite_order() -> None:
    """Another client's sweep records its send times as planned times and its own prompt ids: the
    schedule and prompt-order checks are the runner's own sweeps' only; the others still hold."""

    def theirs(sweep: Draft) -> None:
        for level in sweep["levels"]:
            for k, row in enumerate(level["requests"]):
                row.update(prompt_id=f"bench-{k}", planned_ms=row["sent_ms"], identical_to_oracle=None)

    ours = sealed(with_sweep(theirs)).packet
    assert set(found(ours)) == {"ladders[0].load.levels[2].requests[0].planned_ms"}
    assert len(load_prompt_problems(ours, strict_suite())) == 3  # one per level
    for provenance in ("screened", "imported"):
        draft = published_draft([published_arm(ORACLE_ARM, [40.0, 41.0], gates=G1)], provenance=provenance)
        draft["ladders"] = [load_ladder()]
        theirs(draft["ladders"][0]["load"])
        packet = sealed(draft).packet
        assert found(packet) == {} and load_prompt_problems(packet, strict_suite()) == []
        levels = draft["ladders"][0]["load"]["levels"]
        levels[1] = copy.deepcopy(levels[0])  # a repeated level is still refused
        assert set(found(sealed(draft).packet)) == {"ladders[0].load.levels[1].users"}
