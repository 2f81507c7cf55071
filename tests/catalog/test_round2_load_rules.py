"""catalog.checks.load_sweep, round 2: a request's TPOT is the one its own times give (its last
token, ttft_ms + tpot_ms x (tokens - 1), within STREAM_TAIL_SHARE of its decode span plus
STREAM_TAIL_MS of its stream's close, e2e_ms), and a request identical to the oracle has the oracle
row's length. testkit's honest sweep is accepted; the sceptic's forgeries are refused, each with its
field; the slack's boundary holds on both sides."""

from __future__ import annotations

from typing import Any

from catalog.checks.load_sweep import STREAM_TAIL_MS, STREAM_TAIL_SHARE, load_problems
from catalog.model.packet import Packet
from testkit.samples import LOAD_OUTPUT_TOKENS, make_load_sweep
from tests.catalog.factories import ORACLE_ARM, SPEC_ARM
from tests.catalog.test_consistency import edited, found

Draft = dict[str, Any]
FIRST = "ladders[0].load.levels[{}].requests[0]"


def sweep() -> Draft:
    return make_load_sweep().model_dump(mode="json")


def packet(load: Draft, arm: str = ORACLE_ARM) -> Packet:
    return edited(lambda d: d.update(ladders=[{"arm": arm, "kind": "load", "load": load}]))


def problems(load: Draft, arm: str = ORACLE_ARM) -> dict[str, str]:
    found_ = load_problems(packet(load, arm))
    assert len({field for field, _ in found_}) == len(found_), found_
    return dict(found_)


def test_the_honest_sweep_is_accepted() -> None:
    assert found(packet(sweep())) == {}
    assert problems(sweep(), SPEC_ARM) == {}


def test_a_tpot_cut_below_its_own_times_is_refused_once_a_level() -> None:
    load = sweep()
    for level in load["levels"]:
        for r in level["requests"]:
            r["tpot_ms"] = round(r["tpot_ms"] * 0.6, 3)
    got = problems(load)
    assert sorted(got) == sorted(f"{FIRST.format(j)}.tpot_ms" for j in range(len(load["levels"])))
    message = got[f"{FIRST.format(0)}.tpot_ms"]
    assert message.startswith("is 18.000 ms: ttft_ms 40.000 + tpot_ms x 119 puts the last token at 2,182.000 ms,")
    assert "1,428.000 ms before the stream closed (e2e_ms 3,610.000)" in message
    assert "not the TPOT of its own token times (1 user)" in message


def _one_tail(tail_ms: float) -> Draft:
    """The honest sweep with its first request's last token `tail_ms` before its stream closed."""
    load = sweep()
    r = load["levels"][0]["requests"][0]
    r["tpot_ms"] = (r["e2e_ms"] - r["ttft_ms"] - tail_ms) / (r["output_tokens"] - 1)
    return load


def test_the_stream_tail_bound_on_both_sides() -> None:
    """Just over the bound is refused; just under it, the committed demo's longest honest tail
    (36.8 ms after the last token of a 2.5 s request) and a last token after e2e_ms (the model's
    side, LoadLevel._times_fit, not reported twice) are not."""
    r = sweep()["levels"][0]["requests"][0]
    bound = STREAM_TAIL_SHARE * (r["e2e_ms"] - r["ttft_ms"]) + STREAM_TAIL_MS  # 607 ms for 3,570 ms
    assert list(problems(_one_tail(bound + 0.01))) == [f"{FIRST.format(0)}.tpot_ms"]
    assert problems(_one_tail(bound - 0.01)) == {}
    assert problems(_one_tail(36.8)) == {}
    assert problems(_one_tail(-0.5)) == {}


def _lengths(tokens: int, identical: bool | None) -> Draft:
    load = sweep()
    for level in load["levels"]:
        for r in level["requests"]:
            r["output_tokens"] = tokens
            r["e2e_ms"] = round(r["ttft_ms"] + (tokens - 1) * r["tpot_ms"], 3)
            r["identical_to_oracle"] = identical
            r["first_divergence"] = None if identical is not False else 57
    return load


def test_identical_to_the_oracle_with_another_length_is_refused_once_a_level() -> None:
    load = _lengths(100, True)
    got = problems(load)
    assert sorted(got) == sorted(f"{FIRST.format(j)}.identical_to_oracle" for j in range(len(load["levels"])))
    prompt = load["levels"][0]["requests"][0]["prompt_id"]
    assert got[f"{FIRST.format(0)}.identical_to_oracle"] == (
        f"is true for 100 output tokens, but oracle arm {ORACLE_ARM!r}'s row for prompt {prompt!r} holds"
        f" {LOAD_OUTPUT_TOKENS}: an output identical to the oracle's has its length (24 of 1 user's 24 requests)"
    )
    # a diverging output may have any length, and one compared with nothing claims nothing
    assert problems(_lengths(100, False)) == {}
    assert problems(_lengths(100, None)) == {}


def test_a_speculative_arms_sweep_is_held_to_the_oracle_its_g3_names() -> None:
    got = problems(_lengths(100, True), SPEC_ARM)
    assert f"oracle arm {ORACLE_ARM!r}'s row" in got[f"{FIRST.format(0)}.identical_to_oracle"]
