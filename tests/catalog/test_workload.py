"""catalog.checks.workload and a closed level's users (catalog.checks.load_sweep): the workload a
packet declares is the one its rows and requests ran. One test per refusal, naming the field and
both values; the factory packet and an honest closed level accepted."""

from __future__ import annotations

from catalog.checks.load_sweep import load_problems
from catalog.checks.workload import workload_problems
from catalog.model.load_sweep import LoadLevel, LoadServerMetrics, LoadSweep
from catalog.model.packet import Packet
from tests.catalog.factories import ORACLE_ARM, SPEC_ARM, measured_packet
from tests.catalog.test_checks_load_sweep import REQUESTS, SEED, rows
from tests.catalog.test_consistency import Draft, edited


def workload(packet: Packet) -> dict[str, str]:
    return dict(workload_problems(packet))


def test_the_factory_packet_runs_the_workload_it_declares() -> None:
    assert workload(measured_packet()) == {}


def test_rows_longer_than_the_max_tokens_declared() -> None:
    """The factory's rows hold 120 tokens; the packet says it asked for 100."""
    problems = workload(edited(lambda d: d["workload"].update(max_tokens=100), spec=False))
    assert len(problems) == 24  # every row of both servers
    assert problems["arms[0].servers[1].rows[4].completion_tokens"] == (
        "120 completion tokens exceed the workload's max_tokens 100"
    )


def test_rows_longer_than_the_context_their_server_held() -> None:
    problems = workload(edited(lambda d: d["arms"][0]["config"].update(max_model_len=300), spec=False))
    # prompts of 200 + 10 k tokens and 120 completion tokens: k >= 0 overflows 300 from k = 0
    assert problems["arms[0].servers[0].rows[0].prompt_tokens"] == (
        "200 prompt + 120 completion tokens exceed the arm's max_model_len 300"
    )


def test_one_prompt_counted_at_two_sizes() -> None:
    problems = workload(edited(lambda d: d["arms"][1]["servers"][0]["rows"][3].update(prompt_tokens=12)))
    prompt = measured_packet().arms[0].servers[0].rows[3].prompt_id
    assert problems == {
        "arms[1].servers[0].rows[3].prompt_tokens": f"is 12 for prompt {prompt!r}, but"
        " arms[0].servers[0].rows[3] counts 230: one model counts one prompt one way"
    }


def test_a_context_point_deeper_than_its_server() -> None:
    point = {"depth_tokens": 32768, "content_class": "code"}

    def deep(d: Draft) -> None:
        d["arms"][0]["config"]["max_model_len"] = 8192
        d["ladders"] = [{"arm": ORACLE_ARM, "kind": "context", "context": [point]}]

    assert workload(edited(deep, spec=False)) == {
        "ladders[0].context[0].depth_tokens": "32,768 prompt tokens exceed arm 'tp1-mtp0''s max_model_len 8,192"
    }


def test_oracle_speeds_a_measured_packet_did_not_measure() -> None:
    packet = measured_packet()
    oracle = packet.arms[0].server_values
    assert workload(edited(lambda d: d["arms"][1].update(oracle_decode_tok_s=oracle))) == {}
    invented = workload(edited(lambda d: d["arms"][1].update(oracle_decode_tok_s=[20.0, 20.5])))
    assert invented == {
        "arms[1].oracle_decode_tok_s": f"is [20.0, 20.5], but oracle arm {ORACLE_ARM!r}'s servers measured {oracle}:"
        " a measured packet quotes its own oracle"
    }
    assert packet.arms[1].id == SPEC_ARM


def _closed(users: int, due: list[float]) -> LoadLevel:
    return LoadLevel(mode="closed", users=users, duration_s=12.0, client_cpu_s=0.1, requests=rows(due))


def _with_levels(*levels: LoadLevel) -> Packet:
    sweep = LoadSweep(seed=SEED, requests_per_level=REQUESTS, levels=list(levels))
    ladder = {"arm": ORACLE_ARM, "kind": "load", "load": sweep.model_dump(mode="json")}
    return edited(lambda d: d.update(ladders=[ladder]))


def test_a_closed_level_whose_users_ran_one_at_a_time() -> None:
    """Three requests of 2,555 ms each, one after the other, under "3 users"."""
    each = 80.0 + 99 * 25.0 + 0.2
    honest = _with_levels(_closed(3, [0.0, 0.0, 0.0]))
    assert load_problems(honest) == []
    serial = _with_levels(_closed(3, [k * each for k in range(REQUESTS)]))
    assert dict(load_problems(serial)) == {
        "ladders[0].load.levels[0].requests": "3 users: its requests' own send and end times keep 1.00 in flight on"
        " average between the ramp-up and the tail, not 3 (at least 75% of them): its requests did not run as the"
        " users it declares"
    }


def test_a_measured_packet_that_did_not_sample_greedily() -> None:
    problems = workload(edited(lambda d: d["workload"].update(temperature=0.7, top_p=0.9), spec=False))
    assert problems == {
        "workload.temperature": "is 0.7, but this runner measures greedily (temperature 0)",
        "workload.top_p": "is 0.9, but this runner measures greedily (top_p 1)",
    }


def test_a_closed_level_whose_server_ran_more_than_its_users() -> None:
    level = _closed(3, [0.0, 0.0, 0.0])
    crowded = level.model_copy(update={"server": LoadServerMetrics(peak_running=8.0)})
    assert dict(load_problems(_with_levels(crowded))) == {
        "ladders[0].load.levels[0].server.peak_running": "is 8, but a closed level of 3 users has at most 3"
        " requests running"
    }
