"""Who may claim outputs identical to the oracle, in a ladder (catalog/checks/workload.py):

- `_unmeasured_identity_problems`: only this project's runner compares a ladder's outputs with an
  oracle; an imported or screened packet's ladders were sent by another client and its importers
  record null, so any identical_to_oracle, first_divergence or divergence of its load requests,
  concurrency points and context points is refused (a load level once, at its first claim);
- `_context_oracle_problems`: a speculative arm's context point compared with the oracle (true or
  false) needs its G3 oracle arm's context point at the same depth and class: runner/ladders.py
  compares with that output and records null where the oracle has none.
"""

from __future__ import annotations

from typing import Any

import pytest

from catalog.checks.workload import workload_problems
from catalog.model.packet import Ladder, Packet, PacketParts
from testkit.samples import make_load_sweep, measured_parts, published_arm, published_parts, with_load
from tests.catalog.factories import ORACLE_ARM, SPEC_ARM, seal_parts

NEVER = (
    "packet's outputs were never compared with an oracle: only this project's runner (a measured packet)"
    " compares them, and its importers record null"
)
AN = {"imported": "an imported", "screened": "a screened"}


def published(provenance: str, *ladders: dict[str, Any]) -> PacketParts:
    arms = [
        published_arm(ORACLE_ARM, [40.0]),
        published_arm(SPEC_ARM, [70.0], spec_depth=2, gates=[("G3", 12, 12, True)]),
    ]
    parts = published_parts(arms, provenance=provenance)
    return parts.model_copy(update={"ladders": [Ladder.model_validate(ladder) for ladder in ladders]})


def problems(parts: PacketParts) -> dict[str, str]:
    packet: Packet = seal_parts(parts).packet
    found = workload_problems(packet)
    assert len({field for field, _ in found}) == len(found), found  # one problem a field
    return dict(found)


# ---- an imported or screened packet claims no comparison ----


@pytest.mark.parametrize("provenance", ["imported", "screened"])
def test_an_imported_sweep_claiming_identity_is_refused_once_a_level(provenance: str) -> None:
    """The red team's forgery: every request of every level 'identical to the oracle', which the
    site printed as '24 of 24 outputs identical' under a speed-only curve."""
    sweep = make_load_sweep(checked=True)
    found = problems(with_load(published(provenance), {ORACLE_ARM: sweep}))
    assert list(found) == [f"ladders[0].load.levels[{j}].requests[0].identical_to_oracle" for j in range(8)]
    assert found["ladders[0].load.levels[0].requests[0].identical_to_oracle"] == (
        f"is true, but {AN[provenance]} {NEVER} (24 of the 24 requests at 1 user claim a comparison)"
    )
    assert found["ladders[0].load.levels[7].requests[0].identical_to_oracle"].endswith(
        "(24 of the 24 requests at 8 req/s claim a comparison)"
    )


def test_an_imported_sweep_claiming_a_divergence_is_refused_at_its_first_claim() -> None:
    """A level whose first request is the one claimed: a false identity (with its first_divergence)
    is a comparison too, and so is a first_divergence alone (the model lets it stand beside
    identical_to_oracle false only)."""
    sweep = make_load_sweep(checked=False, users=(2,), rates=()).model_dump(mode="json")
    requests = sweep["levels"][0]["requests"]
    requests[3].update(identical_to_oracle=False, first_divergence=57)
    requests[5].update(identical_to_oracle=True)
    found = problems(
        published("imported", {"arm": SPEC_ARM, "kind": "load", "load": sweep}),
    )
    assert list(found) == ["ladders[0].load.levels[0].requests[3].identical_to_oracle"]
    assert found["ladders[0].load.levels[0].requests[3].identical_to_oracle"].startswith("is false, but an imported")
    assert found["ladders[0].load.levels[0].requests[3].identical_to_oracle"].endswith(
        "(2 of the 24 requests at 2 users claim a comparison)"
    )


def test_an_imported_sweep_as_the_importer_writes_it_is_accepted() -> None:
    """The control: runner/import_load_sweep.py compares nothing and records null."""
    sweep = make_load_sweep(checked=False)
    assert problems(with_load(published("imported"), {ORACLE_ARM: sweep})) == {}


def level(users: int, identical: bool | None, **more: Any) -> dict[str, Any]:
    return {"users": users, "completion_tokens": 512 * users, "wall_s": 12.0 + users, "identical_to_oracle": identical}


@pytest.mark.parametrize("provenance", ["imported", "screened"])
def test_a_screened_concurrency_ladder_claiming_identity_is_refused(provenance: str) -> None:
    """The red team's second forgery: every level of a speed-only ladder 'identical to the
    sequential oracle'; a level that differs, with its cause, claims a comparison twice."""
    points = [level(1, True), level(4, None), {**level(16, False), "divergence": "speculative"}]
    found = problems(published(provenance, {"arm": SPEC_ARM, "kind": "concurrency", "concurrency": points}))
    assert found == {
        "ladders[0].concurrency[0].identical_to_oracle": f"is true, but {AN[provenance]} {NEVER}",
        "ladders[0].concurrency[2].identical_to_oracle": f"is false, but {AN[provenance]} {NEVER}",
        "ladders[0].concurrency[2].divergence": f"is 'speculative', but {AN[provenance]} {NEVER}",
    }


def context_point(depth: int, content_class: str, identical: bool | None) -> dict[str, Any]:
    return {
        "depth_tokens": depth,
        "content_class": content_class,
        "decode_tok_s": 40.0,
        "ttft_ms": 300.0 + depth / 20,
        "identical_to_oracle": identical,
    }


def test_an_imported_context_ladder_claiming_identity_is_refused() -> None:
    """Whatever arm it is on, and even beside an oracle context point at the same depth and class:
    an import compared nothing. One problem a point (the depth-0 arm's rule does not repeat it)."""
    ladders = [
        {"arm": ORACLE_ARM, "kind": "context", "context": [context_point(2048, "prose", True)]},
        {"arm": SPEC_ARM, "kind": "context", "context": [context_point(2048, "prose", False)]},
    ]
    found = problems(published("imported", *ladders))
    assert found == {
        "ladders[0].context[0].identical_to_oracle": f"is true, but an imported {NEVER}",
        "ladders[1].context[0].identical_to_oracle": f"is false, but an imported {NEVER}",
    }


def test_imported_ladders_without_claims_are_accepted() -> None:
    """The control: import_bench's concurrency point and context points that claim nothing."""
    ladders = [
        {"arm": SPEC_ARM, "kind": "concurrency", "concurrency": [level(64, None)]},
        {"arm": SPEC_ARM, "kind": "context", "context": [context_point(7000, "prose", None)]},
    ]
    assert problems(published("screened", *ladders)) == {}


# ---- a speculative arm's context point is compared with the oracle's at its depth and class ----


def measured(*ladders: dict[str, Any], gates: bool = True) -> PacketParts:
    """The testkit campaign (its speculative arm's G3 names the oracle arm) with `ladders`; without
    `gates`, the speculative arm's G3 gone."""
    document = measured_parts().model_dump(mode="json")
    document["ladders"] = list(ladders)
    if not gates:
        for arm in document["arms"]:
            arm["gates"] = [g for g in arm["gates"] if g["gate"] != "G3"]
    return PacketParts.model_validate(document)


def test_a_speculative_context_ladder_identical_without_an_oracle_ladder_is_refused() -> None:
    """The red team's forgery: every point 'identical to the oracle', and the oracle arm has no
    context ladder at all, so the runner had nothing to compare with and recorded null."""
    points = [context_point(d, c, True) for d in (2048, 4096) for c in ("prose", "code", "analysis")]
    found = problems(measured({"arm": SPEC_ARM, "kind": "context", "context": points}))
    assert list(found) == [f"ladders[0].context[{k}].identical_to_oracle" for k in range(6)]
    assert found["ladders[0].context[4].identical_to_oracle"] == (
        "is true, but oracle arm 'tp1-mtp0' has no context point at 4,096 tokens of 'code': the runner compares"
        " with the oracle's output at the same depth and class, and records null where there is none"
    )


def test_a_speculative_context_point_needs_the_oracles_at_its_depth_and_class() -> None:
    """The oracle's ladder holds 2,048 tokens of prose only: the speculative arm's prose point at
    2,048 stands, its code point at 2,048 (false is a comparison too) and prose at 4,096 do not,
    and a point recording no comparison needs nothing."""
    oracle = {"arm": ORACLE_ARM, "kind": "context", "context": [context_point(2048, "prose", None)]}
    spec = [
        context_point(2048, "prose", True),
        context_point(2048, "code", False),
        context_point(4096, "prose", True),
        context_point(4096, "code", None),
    ]
    found = problems(measured(oracle, {"arm": SPEC_ARM, "kind": "context", "context": spec}))
    assert list(found) == ["ladders[1].context[1].identical_to_oracle", "ladders[1].context[2].identical_to_oracle"]
    assert found["ladders[1].context[1].identical_to_oracle"].startswith(
        "is false, but oracle arm 'tp1-mtp0' has no context point at 2,048 tokens of 'code'"
    )


def test_a_speculative_arm_without_a_g3_oracle_compared_nothing() -> None:
    oracle = {"arm": ORACLE_ARM, "kind": "context", "context": [context_point(2048, "prose", None)]}
    spec = {"arm": SPEC_ARM, "kind": "context", "context": [context_point(2048, "prose", True)]}
    assert problems(measured(oracle, spec, gates=False)) == {
        "ladders[1].context[0].identical_to_oracle": "is true, but no G3 of arm 'tp1-mtp2' names an oracle arm whose"
        " context output it was compared with (the runner records null)"
    }
