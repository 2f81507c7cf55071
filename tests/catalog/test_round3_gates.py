"""The sceptic's third round, gates: every server of a measured arm is compared by a gate.

An arm may run 3 or 4 fresh servers (runner/plan.py `servers_per_arm`), and its published rate
averages every one of them, yet G1 and G2 compared servers A and B only: a third server with other
tokens (and a faster clock) lifted the figure while G1 still read 12/12, and a third speculative
server labelled "B" again passed under the first B's G3. Now (catalog/checks/consistency.py
`gate_problems`, catalog/checks/evidence.py `_gate_pair`) a measured arm's labels are unique, each
server past the second is compared with the first by a G1 (G2) naming it, and a gate naming a
server compares that server's rows. Each refusal names its field; each honest neighbour passes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from catalog.checks.consistency import consistency_problems, gate_problems
from catalog.checks.evidence import evidence_problems
from catalog.model.metrics import compare_rows
from catalog.model.packet import Packet, PromptRow, State
from catalog.recipes.hardware import HardwareFile
from catalog.store.documents import load_file
from testkit.samples import make_row, make_rows, make_server, strict_suite, token_ids
from tests.catalog.factories import DATA, catalog_recipe, measured_draft, seal_draft

NOW = datetime(2026, 12, 1, tzinfo=UTC)
B70 = load_file(HardwareFile, DATA / "hardware.yaml").by_id()["arc_pro_b70"]
RECIPE_9B = catalog_recipe("qwen3.5-9b")
FIRST = "the arm's first fresh server"
Draft = dict[str, Any]


def other_tokens(ms_per_token: float, chunk: int = 1) -> list[PromptRow]:
    """Twelve rows whose every token array differs from the reference ones (another model's output)."""
    return [
        make_row(
            i, ms_per_token=ms_per_token + 0.05 * i, chunk=chunk, ids=[t + 1 for t in token_ids(i)], ttft_ms=41.0 + i
        )
        for i in range(len(strict_suite().prompts))
    ]


def rows_of(draft: Draft, arm: int, server: int) -> list[PromptRow]:
    return [PromptRow.model_validate(row) for row in draft["arms"][arm]["servers"][server]["rows"]]


def add_server(draft: Draft, arm: int, label: str, rows: list[PromptRow], *, gate: str | None = None) -> None:
    """A further server; with `gate` ("G1"/"G2"), the gate the runner records for it (it vs server A)."""
    draft["arms"][arm]["servers"].append(make_server(label, rows).model_dump(mode="json"))
    if gate is not None:
        redone = compare_rows(gate, FIRST, rows, rows_of(draft, arm, 0), server=label, cause="repeat")
        draft["arms"][arm]["gates"].append(redone.model_dump(mode="json"))


def problems(packet: Packet) -> dict[str, str]:
    return dict(gate_problems(packet) + evidence_problems(packet))


def everything(packet: Packet) -> dict[str, str]:
    return dict(consistency_problems(packet, RECIPE_9B, B70, NOW) + evidence_problems(packet))


# ---- honest controls ----


def test_two_servers_an_arm_as_every_committed_packet_holds_pass() -> None:
    assert everything(seal_draft(measured_draft())) == {}


def test_a_third_and_fourth_honest_server_each_gated_against_the_first_pass() -> None:
    draft = measured_draft()
    add_server(draft, 0, "C", make_rows(ms_per_token=20.1), gate="G1")
    add_server(draft, 0, "D", make_rows(ms_per_token=20.15), gate="G1")
    add_server(draft, 1, "C", make_rows(ms_per_token=12.1, chunk=3), gate="G2")
    draft["arms"][1]["gates"].append(
        compare_rows(
            "G3", draft["arms"][0]["id"], make_rows(ms_per_token=12.1, chunk=3), rows_of(draft, 0, 0), server="C"
        ).model_dump(mode="json")
    )
    packet = seal_draft(draft)
    assert everything(packet) == {}
    assert [arm.state for arm in packet.arms] == [State.MEASURED, State.MEASURED]


def test_an_honest_third_server_that_diverges_is_gated_and_withholds_the_arm() -> None:
    """Its G1 reports the divergence truthfully: accepted, and the arm is not measured."""
    draft = measured_draft()
    add_server(draft, 0, "C", other_tokens(18.0), gate="G1")
    packet = seal_draft(draft)
    assert problems(packet) == {}
    assert packet.arms[0].gates[-1].exact == 0 and packet.arms[0].state != State.MEASURED


# ---- the forgeries ----


def test_a_third_oracle_server_no_gate_compares_is_refused() -> None:
    draft = measured_draft()
    add_server(draft, 0, "C", other_tokens(18.0))
    found = problems(seal_draft(draft))
    assert "arms[0].gates" in found, found
    assert "'C'" in found["arms[0].gates"] and "G1" in found["arms[0].gates"]


def test_a_third_oracle_server_whose_g1_claims_identity_is_refused() -> None:
    """A G1 naming C copied from the A-B comparison (12/12): re-compared from C's rows it is 0/12."""
    draft = measured_draft()
    add_server(draft, 0, "C", other_tokens(18.0))
    claimed = {**draft["arms"][0]["gates"][0], "server": "C", "against": FIRST}
    draft["arms"][0]["gates"].append(claimed)
    found = problems(seal_draft(draft))
    assert found.get("arms[0].gates[1]") == "does not match the token arrays re-compared", found


def test_a_third_speculative_server_under_a_label_already_held_is_refused() -> None:
    draft = measured_draft()
    add_server(draft, 1, "B", other_tokens(10.0, chunk=3))
    found = problems(seal_draft(draft))
    assert "arms[1].servers[2].label" in found, found
    assert "'B'" in found["arms[1].servers[2].label"]
    assert "arms[1].gates" in found  # no G2 names it either


def test_a_g3_naming_a_label_two_servers_hold_is_refused() -> None:
    draft = measured_draft()
    add_server(draft, 1, "B", other_tokens(10.0, chunk=3))
    found = dict(evidence_problems(seal_draft(draft)))
    assert "arms[1].gates[2].server" in found, found
    assert "2 servers" in found["arms[1].gates[2].server"]


def test_the_second_server_needs_the_unlabelled_gate() -> None:
    """Its only G1 names B: the A-B comparison every packet records is missing."""
    draft = measured_draft()
    gate = draft["arms"][0]["gates"][0]
    redone = compare_rows("G1", FIRST, rows_of(draft, 0, 1), rows_of(draft, 0, 0), server="B")
    gate.update(redone.model_dump(mode="json"))
    found = problems(seal_draft(draft))
    assert "'B'" in found.get("arms[0].gates", ""), found


def test_a_g1_naming_the_first_server_or_none_of_the_arm_is_refused() -> None:
    for label, words in (("A", "the first server"), ("Z", "no server")):
        draft = measured_draft()
        add_server(draft, 0, "C", make_rows(ms_per_token=20.1), gate="G1")
        draft["arms"][0]["gates"].append({**draft["arms"][0]["gates"][1], "server": label})
        found = dict(evidence_problems(seal_draft(draft)))
        assert words in found.get("arms[0].gates[2].server", ""), found


def test_an_unlabelled_g1_still_compares_the_first_two_servers() -> None:
    """As in every committed packet: a G1 with `server` null against servers A and B."""
    draft = measured_draft()
    add_server(draft, 0, "C", other_tokens(18.0), gate="G1")
    draft["arms"][0]["servers"][1]["rows"] = draft["arms"][0]["servers"][2]["rows"]  # B now differs from A
    draft["arms"][0]["servers"][1]["decode_tok_s"] = draft["arms"][0]["servers"][2]["decode_tok_s"]
    draft["arms"][0]["servers"][1]["ttft_ms"] = draft["arms"][0]["servers"][2]["ttft_ms"]
    found = dict(evidence_problems(seal_draft(draft)))
    assert found.get("arms[0].gates[0]") == "does not match the token arrays re-compared", found
