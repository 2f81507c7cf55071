"""A listed key cannot publish a lie, round 3 (tests/adversarial/test_listed_key.py's harness): a
third fresh server no gate compared. What a sceptic sealed with a lab key listed the documented
way, each accepted until now, and each refused by `python -m catalog.verify` and
`python -m builder build`, published and with `--allow-unsigned`, by an error naming the packet and
the field:

- the oracle arm gains a server "C" whose tokens differ on all 12 prompts and that decodes faster:
  the arm's figure (the mean of its servers' rates) rises from 46.07 to 48.89 tok/s while its G1,
  comparing servers A and B only, read 12/12. Every server past the second is now compared with the
  first by a G1 (G2) naming it (catalog/checks/consistency.py `gate_problems`), re-compared from its
  rows (catalog/checks/evidence.py `_gate_pair`);
- the MTP arm gains a third server labelled "B" again, whose tokens differ from the oracle's: its
  G3 "B" re-compared the first B only. A measured arm's server labels are unique.

Beside them, honest packets sealed by the same key are accepted: two servers an arm, as every
committed packet, and three an arm gated as the runner now gates them (runner/campaign.py
`gates_for`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from catalog.model.metrics import compare_rows
from catalog.model.packet import PromptRow
from testkit.samples import make_row, make_rows, make_server, strict_suite, token_ids
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import accepted, campaign, lab, lab_seal  # noqa: F401 (lab: a fixture)

Document = dict[str, Any]
FIRST = "the arm's first fresh server"


def other_tokens(ms_per_token: float, chunk: int = 1) -> list[PromptRow]:
    """Twelve rows, each token array differing from the reference ones (another model's output)."""
    return [
        make_row(
            i, ms_per_token=ms_per_token + 0.05 * i, chunk=chunk, ids=[t + 1 for t in token_ids(i)], ttft_ms=41.0 + i
        )
        for i in range(len(strict_suite().prompts))
    ]


def server(label: str, rows: list[PromptRow]) -> Document:
    return make_server(label, rows).model_dump(mode="json")


def first_rows(document: Document, arm: int) -> list[PromptRow]:
    return [PromptRow.model_validate(row) for row in document["arms"][arm]["servers"][0]["rows"]]


# ---- the forgeries ----


def oracle_third_server() -> Document:
    """The oracle arm gains server "C": other tokens on every prompt, 18 ms a token (faster than A and B)."""
    document = campaign()
    document["arms"][0]["servers"].append(server("C", other_tokens(18.0)))
    return document


def oracle_third_server_claimed() -> Document:
    """The same, with a G1 naming C that copies the A-B comparison's 12/12."""
    document = oracle_third_server()
    gates = document["arms"][0]["gates"]
    gates.append({**gates[0], "server": "C", "against": FIRST})
    return document


def spec_third_server_dup_label() -> Document:
    """The MTP arm gains a third server also labelled "B", its tokens differing from the oracle's
    on every prompt; its G3 "B" and the G2 re-compared the first B only."""
    document = campaign()
    document["arms"][1]["servers"].append(server("B", other_tokens(10.0, chunk=3)))
    return document


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_third_oracle_server_no_gate_compares_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    refused(lab, lab_seal(lab, oracle_third_server()), options, because="arms[0].gates")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_third_oracle_server_whose_g1_claims_identity_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    refused(lab, lab_seal(lab, oracle_third_server_claimed()), options, because="arms[0].gates[1]")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_third_speculative_server_labelled_b_again_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    refused(lab, lab_seal(lab, spec_third_server_dup_label()), options, because="arms[1].servers[2].label")


# ---- honest controls ----


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_two_servers_an_arm_are_accepted(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    lab_seal(lab, campaign())
    accepted(lab, options)


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_three_honest_servers_an_arm_gated_as_the_runner_gates_them_are_accepted(
    lab: Path,  # noqa: F811
    options: tuple[str, ...],
) -> None:
    """Server C of each arm, its own tokens the reference ones, compared with server A by a G1 (G2)
    naming it; the MTP arm's C also by its G3 against the oracle."""
    document = campaign()
    oracle_id = document["arms"][0]["id"]
    for arm, rows in ((0, make_rows(ms_per_token=20.1)), (1, make_rows(ms_per_token=12.1, chunk=3))):
        kind = "G1" if arm == 0 else "G2"
        document["arms"][arm]["servers"].append(server("C", rows))
        gate = compare_rows(kind, FIRST, rows, first_rows(document, arm), server="C", cause="repeat")
        document["arms"][arm]["gates"].append(gate.model_dump(mode="json"))
    spec_c = make_rows(ms_per_token=12.1, chunk=3)
    g3 = compare_rows("G3", oracle_id, spec_c, first_rows(document, 0), server="C", cause="speculative")
    document["arms"][1]["gates"].append(g3.model_dump(mode="json"))
    lab_seal(lab, document)
    accepted(lab, options)
