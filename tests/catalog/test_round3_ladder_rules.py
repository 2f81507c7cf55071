"""Round 3 ladder rules: what runner/ladders.py can record of a concurrency or context ladder.

- catalog/checks/workload.py `concurrency_oracle_problems`: a concurrency level identical to the
  oracle holds the oracle rows' tokens (user i sends the suite's prompt i mod its count);
- catalog/model/packet.py `ConcurrencyPoint`: a divergence cause only where identical_to_oracle is
  false;
- catalog/checks/workload.py: a depth-0 arm's context point records no comparison, and a context
  point's class is one the runner fills context with (`context_classes`, beside the suite's other
  checks in catalog/checks/cross_check.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from catalog.checks.cross_check import cross_check
from catalog.checks.workload import (
    concurrency_oracle_problems,
    context_class_problems,
    context_classes,
    workload_problems,
)
from catalog.model.packet import ConcurrencyPoint, Packet
from catalog.recipes.suite import Suite
from catalog.store.repository import load_data
from runner.ladders import _context_classes
from testkit.samples import make_load_sweep, make_row, measured_parts, strict_suite, token_ids, with_load
from tests.catalog.factories import ORACLE_ARM, SPEC_ARM, seal_parts
from tests.catalog.test_consistency import Draft, edited

REPO = Path(__file__).resolve().parents[2]
SUITE = strict_suite()
ORDER = [prompt.id for prompt in SUITE.prompts]
TOKENS = 120  # the factory's rows


def concurrency(arm: str, *points: dict[str, Any]) -> Any:
    return lambda d: d.update(ladders=[{"arm": arm, "kind": "concurrency", "concurrency": list(points)}])


def point(users: int, tokens: int, identical: bool | None = True, **more: Any) -> dict[str, Any]:
    return {"users": users, "completion_tokens": tokens, "wall_s": 2.0, "identical_to_oracle": identical, **more}


def context(arm: str, *points: dict[str, Any]) -> Any:
    return lambda d: d.update(ladders=[{"arm": arm, "kind": "context", "context": list(points)}])


def both(*ladders: dict[str, Any]) -> Any:
    return lambda d: d.update(ladders=list(ladders))


def depth(content_class: str, identical: bool | None = None) -> dict[str, Any]:
    return {
        "depth_tokens": 2048,
        "content_class": content_class,
        "decode_tok_s": 40.0,
        "ttft_ms": 300.0,
        "identical_to_oracle": identical,
    }


def suite_checks(packet: Packet) -> dict[str, str]:
    return dict([*concurrency_oracle_problems(packet, ORDER), *context_class_problems(packet, SUITE)])


# ---- concurrency: identical to the oracle means the oracle's tokens ----


def test_an_honest_concurrency_ladder_holds_the_oracle_rows_tokens() -> None:
    """Every level, 16 users wrapping past the suite's 12 prompts, on the oracle and on the
    speculative arm (its G3 names the oracle)."""
    levels = [point(u, u * TOKENS) for u in (1, 2, 4, 8, 16)]
    for arm in (ORACLE_ARM, SPEC_ARM):
        packet = edited(concurrency(arm, *levels))
        assert suite_checks(packet) == {}
        assert workload_problems(packet) == []


def test_an_identical_level_with_more_tokens_than_the_oracle_rows_is_refused() -> None:
    """The sceptic's forgery: 4 users, 2,048 tokens 'identical' where the oracle's rows hold 480."""
    packet = edited(concurrency(ORACLE_ARM, point(1, TOKENS), point(4, 2048)))
    assert suite_checks(packet) == {
        "ladders[0].concurrency[1].completion_tokens": "2,048 completion tokens identical to the oracle, but oracle"
        " arm 'tp1-mtp0''s rows for the prompts its 4 users sent (user i: prompt i mod 12) hold 480: outputs"
        " identical to the oracle's have its lengths"
    }


def test_a_speculative_arm_is_held_to_its_g3_oracle() -> None:
    packet = edited(concurrency(SPEC_ARM, point(2, 2 * TOKENS - 1)))
    assert list(suite_checks(packet)) == ["ladders[0].concurrency[0].completion_tokens"]
    assert "oracle arm 'tp1-mtp0'" in suite_checks(packet)["ladders[0].concurrency[0].completion_tokens"]


def test_a_level_that_differs_from_the_oracle_is_not_held_to_its_lengths() -> None:
    packet = edited(concurrency(ORACLE_ARM, point(4, 2048, identical=False, divergence="batch shape")))
    assert suite_checks(packet) == {}


def _lengths_vary(d: Draft) -> None:
    """The oracle's first server's rows 100 + 10 k tokens long (prompt k of the suite)."""
    rows = [make_row(k, ms_per_token=20.0, ids=token_ids(k, 100 + 10 * k)) for k in range(len(ORDER))]
    d["arms"][0]["servers"][0]["rows"] = [row.model_dump(mode="json") for row in rows]


def test_the_prompts_sent_follow_the_suites_order() -> None:
    """3 users send prompts 0, 1, 2 of the suite: 100 + 110 + 120 tokens; 14 users wrap to 0 and 1."""
    wrapped = sum(100 + 10 * (u % 12) for u in range(14))

    def draft(d: Draft) -> None:
        _lengths_vary(d)
        concurrency(ORACLE_ARM, point(3, 330), point(14, wrapped))(d)

    honest = edited(draft)
    assert suite_checks(honest) == {}
    # the same level held to another order (prompts 11, 10, 9 first) is off
    reversed_order = dict(concurrency_oracle_problems(honest, ORDER[::-1]))
    assert reversed_order["ladders[0].concurrency[0].completion_tokens"].endswith(
        "hold 600: outputs identical to the oracle's have its lengths"
    )


def test_an_identical_level_sending_a_prompt_the_oracle_never_ran_is_refused() -> None:
    packet = edited(concurrency(ORACLE_ARM, point(2, 2 * TOKENS)))
    problems = dict(concurrency_oracle_problems(packet, [ORDER[0], "not-a-prompt"]))
    assert problems == {
        "ladders[0].concurrency[0].identical_to_oracle": "is true, but oracle arm 'tp1-mtp0''s first server has"
        " no row for prompt 'not-a-prompt', which its 2 users sent: nothing to be identical to"
    }


def test_a_measured_packet_is_held_to_the_suites_order_by_cross_check_only() -> None:
    """workload_problems leaves a measured packet's concurrency ladders to cross_check, which has the
    suite's order (one report, not two); cross_check reports the forgery."""
    packet = edited(concurrency(ORACLE_ARM, point(4, 2048)))
    assert workload_problems(packet) == []
    reference = load_data(REPO / "data").reference
    fields = [error.field for error in cross_check(packet, Path("forged.json"), reference)]
    assert "ladders[0].concurrency[0].completion_tokens" in fields


def test_a_level_is_counted_per_prompt_never_user_by_user() -> None:
    """A forged 10⁹ users cost a reader what 12 do (the old check built a list of every user's
    prompt); the sum is still exact: 10⁹ = 83,333,333 rounds of the 12 prompts and 4 more."""
    users = 10**9
    rounds, rest = divmod(users, len(ORDER))
    assert ConcurrencyPoint(users=users, completion_tokens=1, wall_s=1.0).prompt_sends(len(ORDER)) == [
        rounds + 1
    ] * rest + [rounds] * (len(ORDER) - rest)
    measured = edited(concurrency(ORACLE_ARM, point(users, users * TOKENS, identical=False, divergence="batch shape")))
    assert workload_problems(measured) == [
        ("ladders[0].concurrency[0].users", "is 1,000,000,000 users, but this runner's ladders end at 64")
    ]
    assert suite_checks(edited(concurrency(ORACLE_ARM, point(users, users * TOKENS)))) == {}
    assert suite_checks(edited(concurrency(ORACLE_ARM, point(users, users * TOKENS + 1)))) == {
        "ladders[0].concurrency[0].completion_tokens": "120,000,000,001 completion tokens identical to the oracle,"
        " but oracle arm 'tp1-mtp0''s rows for the prompts its 1,000,000,000 users sent (user i: prompt i mod"
        " 12) hold 120,000,000,000: outputs identical to the oracle's have its lengths"
    }


@pytest.mark.parametrize(("users", "refused"), [(64, False), (65, True)])
def test_a_measured_ladder_ends_at_the_protocols_64_users(users: int, refused: bool) -> None:
    """runner/plan.py refuses a level above 64 and gives a ladder's server 64 sequences; an imported
    run may have had more (`vllm bench serve` releases every prompt at once), so only a measured
    packet is held to it."""
    packet = edited(concurrency(ORACLE_ARM, point(users, users * TOKENS)))
    fields = [field for field, _ in workload_problems(packet)]
    assert fields == (["ladders[0].concurrency[0].users"] if refused else [])


# ---- a divergence cause only where the outputs differ ----


@pytest.mark.parametrize("identical", [True, None])
def test_a_divergence_cause_needs_outputs_that_differ(identical: bool | None) -> None:
    with pytest.raises(ValidationError, match="a divergence cause needs identical_to_oracle false"):
        ConcurrencyPoint.model_validate(point(2, 240, identical, divergence="speculative"))


def test_a_divergence_cause_of_outputs_that_differ_is_kept() -> None:
    assert ConcurrencyPoint.model_validate(point(2, 240, False, divergence="speculative")).divergence == "speculative"
    assert ConcurrencyPoint.model_validate(point(2, 240, True)).divergence is None


# ---- context ladders ----


def test_an_honest_context_ladder_is_accepted() -> None:
    """The oracle arm records no comparison; the speculative arm compares with its output at the
    same depth and class (catalog/checks/workload.py: the oracle's point must be in the packet)."""
    classes = ("prose", "code", "analysis")
    oracle = {"arm": ORACLE_ARM, "kind": "context", "context": [depth(c) for c in classes]}
    for identical in (None, True, False):
        spec = {"arm": SPEC_ARM, "kind": "context", "context": [depth(c, identical) for c in classes]}
        packet = edited(both(oracle, spec))
        assert workload_problems(packet) == []
        assert suite_checks(packet) == {}


@pytest.mark.parametrize("identical", [True, False])
def test_a_depth0_arms_context_point_compared_with_an_oracle_is_refused(identical: bool) -> None:
    packet = edited(context(ORACLE_ARM, depth("prose"), depth("code", identical)))
    assert dict(workload_problems(packet)) == {
        "ladders[0].context[1].identical_to_oracle": f"is {str(identical).lower()} on depth-0 arm 'tp1-mtp0',"
        " whose context outputs are compared with no oracle's (the runner records null)"
    }


def test_a_context_class_the_runner_never_fills_context_with_is_refused() -> None:
    packet = edited(context(SPEC_ARM, depth("prose", True), depth("operations", True), depth("poetry", True)))
    assert suite_checks(packet) == {
        "ladders[0].context[1].content_class": "is 'operations', but a context ladder on suite 'strict-v1' fills"
        " its depth with the prompts of 'prose', 'code', 'analysis'"
    }


def test_the_context_classes_are_the_runners() -> None:
    """The same choice as runner/ladders.py's: its three classes where the suite has them, else the
    suite's first three."""
    assert context_classes(SUITE) == _context_classes(SUITE) == ["prose", "code", "analysis"]
    document = SUITE.model_dump(mode="json", by_alias=True)
    document["classes"] = [c for c in document["classes"] if c["id"] not in ("prose", "code")]
    document["prompts"] = [p for p in document["prompts"] if p["class"] not in ("prose", "code")]
    other = Suite.model_validate(document)
    assert context_classes(other) == _context_classes(other) == ["analysis"]
    document["classes"] = [c for c in document["classes"] if c["id"] != "analysis"]
    document["prompts"] = [p for p in document["prompts"] if p["class"] != "analysis"]
    other = Suite.model_validate(document)
    assert context_classes(other) == _context_classes(other) == ["operations", "documentation", "structured"]


def test_a_measured_load_level_ends_at_the_protocols_64_users() -> None:
    sweep = make_load_sweep(users=(2, 65), rates=(), requests_per_level=70)
    packet = seal_parts(with_load(measured_parts(spec=False), {ORACLE_ARM: sweep})).packet
    assert [field for field, _ in workload_problems(packet)] == ["ladders[0].load.levels[1].users"]
