"""Evidence grades A-D and the headline rule of a family page."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.checks.canaries import judge
from catalog.checks.grade import (
    GRADE_MEANING,
    NOT_REPRODUCED,
    arm_not_reproduced,
    evidence_grade,
    independent,
    limitations,
)
from catalog.checks.selection import headline, qualified
from catalog.checks.stack import stack_differences
from catalog.model.arrays import decode_uint32, encode_uint32
from catalog.model.metrics import compare_rows
from catalog.model.packet import Arm, Packet, PromptRow, State
from catalog.packets.signing import HostKey
from testkit.samples import SAME_SERVER, canary_answers
from tests.catalog.factories import (
    ORACLE_ARM,
    SPEC_ARM,
    canary_set,
    measured_draft,
    measured_packet,
    other_lab_key,
    published_arm,
    published_draft,
)
from tests.catalog.factories import seal_draft as seal
from tests.catalog.factories import test_key as session_key

G1_OK = ("G1", 12, 12, True)
G2_OK = ("G2", 12, 12, True)
G3_OK = ("G3", 12, 12, True)
G3_FAIL = ("G3", 10, 12, False)


def edited(edit: Any, **kw: Any) -> Packet:
    draft = measured_draft(**kw)
    edit(draft)
    return seal(draft)


def reproduction_of(
    packet: Packet,
    *,
    boot_id: str = "9e1d7a2c-other-boot",
    key: HostKey | None = None,
    ms_per_token: float = 20.3,
    identity_overrides: dict[str, Any] | None = None,
    **kw: Any,
) -> Packet:
    """A measured packet naming `packet`, made on another host (another boot id), at its own pace
    (its own token times) and signed by another lab's listed key: with the same token arrays, an
    independent reproduction."""
    overrides = {"host": {"boot_id": boot_id}, **(identity_overrides or {})}
    draft = measured_draft(title="reproduction", ms_per_token=ms_per_token, identity_overrides=overrides, **kw)
    draft["reproduces"] = packet.id
    return seal(draft, key=key or other_lab_key())


def failed_canary(d: dict[str, Any]) -> None:
    """Server A of the speculative arm gives a wrong answer to a canary, judged as failed."""
    canary = canary_set().canaries[2]
    d["arms"][1]["servers"][0]["canaries"][2] = judge(canary, canary_answers(canary, False)).model_dump(mode="json")


def all_withheld(draft: dict[str, Any]) -> None:
    for arm in draft["arms"]:
        gate = arm["gates"][0]
        gate.update(exact=gate["total"] - 1, passed=False, first_divergence=[None] * (gate["total"] - 1) + [3])
        arm.update(state="withheld", withheld_reason="not repeatable")
    draft["state"] = "withheld"


# --- grades --------------------------------------------------------------------------------


def test_grade_b_complete_measurement_without_reproduction() -> None:
    assert evidence_grade(measured_packet()) == "B"
    assert evidence_grade(measured_packet(spec=False)) == "B"


def test_grade_a_needs_a_measured_reproduction() -> None:
    packet = measured_packet()
    repro = reproduction_of(packet)
    assert independent(packet, repro)
    assert evidence_grade(packet, [repro]) == "A"
    assert evidence_grade(packet, [repro, measured_packet(title="unrelated")]) == "A"
    assert evidence_grade(packet, [measured_packet(title="unrelated")]) == "B"


def reproduction_draft(packet: Packet) -> dict[str, Any]:
    """`reproduction_of`'s draft, to edit before it is sealed with another lab's key."""
    draft = measured_draft(
        title="reproduction", ms_per_token=20.3, identity_overrides={"host": {"boot_id": "elsewhere"}}
    )
    draft["reproduces"] = packet.id
    return draft


def spec_server_b_diverges(draft: dict[str, Any], *, gated: bool = True) -> None:
    """The MTP arm's server B drifts on one prompt; its server A and the oracle arm give the shared
    tokens. `gated`: G2 and G3-B, re-compared from the rows, fail and the arm is withheld; otherwise
    the arm keeps the gates that passed (a partial or stale set), and stays measured."""
    arm = draft["arms"][1]
    row = arm["servers"][1]["rows"][4]
    ids = decode_uint32(row["token_ids"])
    ids[57] += 1
    row["token_ids"] = encode_uint32(ids)
    if not gated:
        return
    spec_a, spec_b, oracle = (
        [PromptRow.model_validate(row) for row in server["rows"]]
        for server in (arm["servers"][0], arm["servers"][1], draft["arms"][0]["servers"][0])
    )
    gates = (
        compare_rows("G2", SAME_SERVER, spec_a, spec_b),
        compare_rows("G3", ORACLE_ARM, spec_a, oracle, server="A"),
        compare_rows("G3", ORACLE_ARM, spec_b, oracle, server="B"),
    )
    arm["gates"] = [g.model_dump(mode="json") for g in gates]
    arm["withheld_reason"] = "G2 11/12 and G3 B 11/12: not identical to the oracle"


def test_grade_a_not_from_a_reproduction_that_withheld_an_arm() -> None:
    """Another owner's reproduction whose MTP server B diverged: the oracle is repeated, the MTP result
    is not (the arm is withheld there), so the original's MTP figure gets no grade A from it."""
    packet = measured_packet()
    draft = reproduction_draft(packet)
    spec_server_b_diverges(draft)
    repro = seal(draft, key=other_lab_key())
    assert (repro.state, repro.arm(ORACLE_ARM).state, repro.arm(SPEC_ARM).state) == (
        State.MEASURED,
        State.MEASURED,
        State.WITHHELD,
    )
    assert arm_not_reproduced(packet.arm(ORACLE_ARM), repro) is None
    assert not independent(packet, repro)
    assert evidence_grade(packet, [repro]) == "B"
    assert limitations(packet, [repro]) == [
        f"{NOT_REPRODUCED}: arm {SPEC_ARM!r} withheld in {repro.id} (a gate failed there: the result was not repeated)"
    ]
    # another reproduction that repeats the MTP arm: between them, every arm is reproduced
    assert evidence_grade(packet, [repro, reproduction_of(packet)]) == "A"


def test_grade_a_needs_every_servers_outputs_to_be_the_originals() -> None:
    """A measured arm whose second server gave other tokens (its gates not saying so) repeats nothing:
    the first server alone is not the arm."""
    packet = measured_packet()
    draft = reproduction_draft(packet)
    spec_server_b_diverges(draft, gated=False)
    repro = seal(draft, key=other_lab_key())
    assert repro.arm(SPEC_ARM).state == State.MEASURED
    assert evidence_grade(packet, [repro]) == "B"
    assert limitations(packet, [repro]) == [NOT_REPRODUCED]  # it contradicts a measured arm: vouches for none
    assert arm_not_reproduced(packet.arm(SPEC_ARM), repro) == f"other outputs on server B in {repro.id}"


def test_grade_a_needs_every_published_arm_reproduced() -> None:
    """Arms are matched by id, as runner/reproduce.py plans them: an arm not run (or run under another
    id) is not reproduced, and the page says which."""
    packet = measured_packet()
    oracle_only = reproduction_of(packet, spec=False)
    assert evidence_grade(packet, [oracle_only]) == "B"
    assert limitations(packet, [oracle_only]) == [f"{NOT_REPRODUCED}: arm {SPEC_ARM!r} not run by {oracle_only.id}"]
    draft = reproduction_draft(packet)
    draft["arms"][1]["id"] = "tp1-mtp2-renamed"
    renamed = seal(draft, key=other_lab_key())
    assert evidence_grade(packet, [renamed]) == "B"
    assert arm_not_reproduced(packet.arm(SPEC_ARM), renamed) == f"not run by {renamed.id}"


def test_grade_a_not_from_the_same_key_even_on_another_host() -> None:
    """The signer of the original vouching again is one voice, whatever boot id it declares."""
    packet = measured_packet()
    same_key = reproduction_of(packet, key=session_key())
    assert same_key.seal.signed_by == packet.seal.signed_by
    assert same_key.identity.host.boot_id != packet.identity.host.boot_id
    assert evidence_grade(packet, [same_key]) == "B"
    assert limitations(packet, [same_key]) == [NOT_REPRODUCED]


def test_grade_a_not_from_a_copy_of_the_originals_timings() -> None:
    """Another lab's key on the original's own token times (each shifted by a microsecond)."""
    packet = measured_packet()
    copy = reproduction_of(packet, ms_per_token=20.0)
    assert copy.arms[0].servers[0].rows[0].token_times_us == packet.arms[0].servers[0].rows[0].token_times_us
    assert evidence_grade(packet, [copy]) == "B"


def test_grade_a_not_from_a_reproduction_on_a_different_stack() -> None:
    """Same tokens, another host, but another vLLM (ALLOW_DIFFERENT_STACK=1): labelled, never a repeat."""
    packet = measured_packet()
    other = reproduction_of(packet, identity_overrides={"runtime": {"version": "0.18.0"}})
    assert stack_differences(packet, other) == ["vLLM 0.18.0, not 0.17.1"]
    assert evidence_grade(packet, [other]) == "B"
    assert stack_differences(packet, reproduction_of(packet)) == []


def test_grade_a_not_from_a_reproduction_with_other_tokens() -> None:
    packet = measured_packet()
    draft = measured_draft(
        title="other tokens", ms_per_token=20.3, identity_overrides={"host": {"boot_id": "elsewhere"}}
    )
    draft["reproduces"] = packet.id
    row = draft["arms"][0]["servers"][0]["rows"][0]
    other = measured_packet(n_tokens=130, ms_per_token=20.3).arms[0].servers[0].rows[0]  # another completion
    row.update(other.model_dump(mode="json"))
    assert evidence_grade(packet, [seal(draft, key=other_lab_key())]) == "B"


def test_grade_a_not_from_an_unsigned_reproduction() -> None:
    packet = measured_packet()
    draft = measured_draft(title="unsigned", ms_per_token=20.3, identity_overrides={"host": {"boot_id": "elsewhere"}})
    draft["reproduces"] = packet.id
    assert evidence_grade(packet, [seal(draft, signed=False)]) == "B"


def test_grade_c_unsigned_measured() -> None:
    packet = seal(measured_draft(), signed=False)
    assert not packet.signed
    assert evidence_grade(packet) == "C"
    assert evidence_grade(packet, [reproduction_of(packet)]) == "C"


def test_grade_a_not_from_a_withheld_reproduction() -> None:
    packet = measured_packet()
    draft = measured_draft(title="failed reproduction")
    draft["reproduces"] = packet.id
    all_withheld(draft)
    repro = seal(draft)
    assert repro.state == State.WITHHELD
    assert evidence_grade(packet, [repro]) == "B"


def test_grade_a_not_for_a_packet_with_a_gap() -> None:
    packet = edited(lambda d: d["arms"][0]["servers"][1].update(cache_zero=None))
    # reproduced, the gap is its one limitation: B, never A
    assert limitations(packet, [reproduction_of(packet)]) == ["cache zero not confirmed on every server"]
    assert evidence_grade(packet, [reproduction_of(packet)]) == "B"


def _drop_server(d: dict[str, Any]) -> None:
    d["arms"][0]["servers"].pop()


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["arms"][0]["servers"][1].update(cache_zero=None),
        lambda d: d["arms"][0]["servers"][1].update(cache_zero=False),
        lambda d: d["arms"][0]["servers"][0].update(canaries=[]),
        failed_canary,
        lambda d: d["arms"][1]["servers"][1].update(rows=[]),
        lambda d: d["arms"][1]["servers"][1].update(status="failed", decode_tok_s=None, error="OOM"),
        _drop_server,
        lambda d: d["arms"][1].update(gates=d["arms"][1]["gates"][:1]),  # G2 without any G3
        lambda d: d["arms"][0].update(gates=[]),  # oracle without G1
    ],
    ids=["cache-unknown", "cache-hit", "no-canaries", "canary-failed", "no-rows", "server-failed", "one-server",
         "no-g3", "no-g1"],
)  # fmt: skip
def test_grade_c_measured_with_a_gap(edit: Any) -> None:
    packet = edited(edit)
    assert packet.state == State.MEASURED
    assert evidence_grade(packet) == "C"  # the gap and no reproduction: two limitations
    reproduction = reproduction_of(packet)
    assert NOT_REPRODUCED not in limitations(packet, [reproduction])
    assert evidence_grade(packet, [reproduction]) == "B"  # the gap alone: never A


def test_grade_asks_for_a_g3_not_one_per_server() -> None:
    # G2 plus a G3 for one server only counts as "G2 and G3 present"
    assert evidence_grade(edited(lambda d: d["arms"][1]["gates"].pop())) == "B"


def test_grade_of_measured_packet_with_a_withheld_arm_follows_the_published_arms() -> None:
    packet = measured_packet(g3_diverges=True)
    assert packet.arm(SPEC_ARM).state == State.WITHHELD
    assert evidence_grade(packet) == "B"  # the oracle arm alone is complete


def test_grade_of_an_all_withheld_measured_packet() -> None:
    packet = edited(all_withheld, spec=False)
    assert packet.state == State.WITHHELD
    assert evidence_grade(packet) == "C"


def test_grade_c_imported_with_gate_outcomes() -> None:
    packet = seal(
        published_draft(
            [
                published_arm("tp1-mtp0", [50.0, 50.2], gates=[G1_OK]),
                published_arm("tp1-mtp3", [80.0, 80.4], spec_depth=3, gates=[G2_OK, G3_OK]),
            ]
        )
    )
    assert evidence_grade(packet) == "C"
    # even with a reproduction, imported evidence never rises above C
    assert evidence_grade(packet, [reproduction_of(packet)]) == "C"


def test_grade_c_imported_with_a_withheld_arm() -> None:
    packet = seal(
        published_draft(
            [
                published_arm("tp1-mtp0", [50.0, 50.2], gates=[G1_OK]),
                published_arm("tp1-mtp3", [80.0, 80.4], spec_depth=3, gates=[G2_OK, G3_FAIL]),
            ]
        )
    )
    assert [a.state for a in packet.arms] == [State.IMPORTED, State.WITHHELD]
    assert evidence_grade(packet) == "C"


@pytest.mark.parametrize(
    "arms",
    [
        [published_arm("tp1-mtp0", [50.0, 50.2], gates=[G1_OK]), published_arm("tp1-mtp3", [80.0], spec_depth=3)],
        [published_arm("tp1-mtp3", [80.0, 80.4], spec_depth=3, gates=[G2_OK])],
        [published_arm("tp1-mtp0", [50.0, 50.2], gates=[("G1", 11, 12, False)])],  # all withheld
        [published_arm("tp1-mtp0", [50.0, 50.2], gates=[("G1", None, 12, True)])],  # outcome without a count
    ],
    ids=["one-arm-ungated", "g2-only", "all-withheld", "no-count"],
)
def test_grade_c_imported_with_any_gate_outcome(arms: list[dict[str, Any]]) -> None:
    # The rule since the seed-page import: a source that reports gate outcomes at all is C, even
    # when they are partial or failed; only a source with no gate outcome is D.
    assert evidence_grade(seal(published_draft(arms))) == "C"


def test_grade_d_imported_without_gate_outcomes() -> None:
    arms = [published_arm("tp1-mtp0", [50.0, 50.2]), published_arm("tp1-mtp3", [80.0, 80.4], spec_depth=3)]
    packet = seal(published_draft(arms))
    assert evidence_grade(packet) == "D"
    assert evidence_grade(packet, [reproduction_of(packet)]) == "D"


def test_grade_d_screened_whatever_its_gates() -> None:
    packet = seal(published_draft([published_arm("tp1-mtp0", [50.0, 50.2], gates=[G1_OK])], provenance="screened"))
    assert evidence_grade(packet) == "D"


def test_every_grade_has_a_meaning() -> None:
    assert sorted(GRADE_MEANING) == ["A", "B", "C", "D"]


# --- qualified arms and the headline -------------------------------------------------------


def _arm(*, provenance: str = "imported", **kw: Any) -> Arm:
    data = published_arm("a", kw.pop("values", [50.0, 51.0]), **kw)
    return seal(published_draft([data], provenance=provenance)).arms[0]


def test_qualified() -> None:
    assert qualified(_arm())
    assert qualified(_arm(provenance="measured"))
    assert not qualified(_arm(values=[50.0]))  # a single server is never a centre
    assert not qualified(_arm(values=[]))
    assert not qualified(_arm(gates=[("G1", 11, 12, False)]))  # withheld
    assert not qualified(_arm(provenance="screened"))


def test_headline_none_without_a_qualified_arm() -> None:
    assert headline([]) is None
    assert headline([edited(all_withheld, spec=False)]) is None
    assert headline([seal(published_draft([published_arm("a", [90.0])]))]) is None


def test_headline_is_the_fastest_qualified_arm() -> None:
    packet = measured_packet()
    best = headline([packet])
    assert best is not None
    assert (best.packet.id, best.arm.id, best.grade) == (packet.id, SPEC_ARM, "B")
    assert best.decode_tok_s == packet.arm(SPEC_ARM).decode_tok_s
    assert best.decode_tok_s == pytest.approx(sum(best.arm.server_values) / 2)


def test_headline_never_a_withheld_arm() -> None:
    packet = measured_packet(g3_diverges=True)
    spec = packet.arm(SPEC_ARM)
    oracle = packet.arm(ORACLE_ARM)
    assert spec.decode_tok_s is not None and oracle.decode_tok_s is not None
    assert spec.decode_tok_s > oracle.decode_tok_s
    best = headline([packet])
    assert best is not None and best.arm.id == ORACLE_ARM


def test_headline_never_a_single_server_arm() -> None:
    packet = seal(
        published_draft([published_arm("tp1-mtp0", [50.0, 52.0]), published_arm("tp1-mtp3", [95.0], spec_depth=3)])
    )
    best = headline([packet])
    assert best is not None
    assert (best.arm.id, best.decode_tok_s) == ("tp1-mtp0", 51.0)


def test_headline_on_the_fewest_cards() -> None:
    def two_cards(d: dict[str, Any]) -> None:
        d["arms"][1]["config"]["tensor_parallel_size"] = 2

    packet = edited(two_cards)
    assert packet.arm(SPEC_ARM).decode_tok_s > packet.arm(ORACLE_ARM).decode_tok_s  # type: ignore[operator]
    best = headline([packet])
    assert best is not None and best.arm.id == ORACLE_ARM
    # fewest cards is decided before provenance: an imported 1-card arm beats a measured 2-card one
    only_two = edited(lambda d: [a["config"].update(tensor_parallel_size=2) for a in d["arms"]])
    imported_one = seal(published_draft([published_arm("tp1-mtp0", [10.0, 11.0], gates=[G1_OK])]))
    best = headline([only_two, imported_one])
    assert best is not None and best.packet.id == imported_one.id


def test_headline_prefers_measured_over_imported() -> None:
    measured = measured_packet(ms_per_token=40.0)  # slower
    imported = seal(published_draft([published_arm("tp1-mtp0", [500.0, 510.0], gates=[G1_OK])]))
    assert imported.arms[0].decode_tok_s > measured.arm(SPEC_ARM).decode_tok_s  # type: ignore[operator]
    best = headline([imported, measured])
    assert best is not None
    assert (best.packet.id, best.arm.id) == (measured.id, SPEC_ARM)


def test_headline_prefers_the_better_grade_then_the_higher_centre() -> None:
    complete = measured_packet(ms_per_token=40.0, title="complete")  # grade B, slower
    gap = edited(lambda d: d["arms"][1]["servers"][0].update(cache_zero=None), ms_per_token=10.0, title="gap")  # C
    assert evidence_grade(gap) == "C"
    best = headline([gap, complete])
    assert best is not None and (best.packet.id, best.grade) == (complete.id, "B")
    faster = measured_packet(ms_per_token=30.0, title="faster")
    best = headline([complete, faster])
    assert best is not None and best.packet.id == faster.id
    # a reproduction lifts the slower packet to A, and A wins
    best = headline([complete, faster], [reproduction_of(complete)])
    assert best is not None and (best.packet.id, best.grade) == (complete.id, "A")


def test_headline_among_imported_packets() -> None:
    ungated = seal(published_draft([published_arm("tp1-mtp0", [90.0, 91.0])], title="ungated"))  # D
    gated = seal(published_draft([published_arm("tp1-mtp0", [60.0, 61.0], gates=[G1_OK])], title="gated"))  # C
    best = headline([ungated, gated])
    assert best is not None and (best.packet.id, best.grade) == (gated.id, "C")
    assert best.decode_tok_s == 60.5
