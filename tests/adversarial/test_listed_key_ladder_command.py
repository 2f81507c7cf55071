"""A listed key cannot publish a ladder beside a command that could not have produced it
(tests/adversarial/test_listed_key.py's harness). A ladder runs on a fresh server of its own, started
with its arm's command and room for many sequences (runner/plan.py ladder_command), and the packet
records that server's command with the ladder (catalog.model.packet.Ladder.argv); pages show the
many-user figures beside it. A lab seals, with its listed key, a campaign whose concurrency ladder
records a server command stating another fact than its arm recorded, and `python -m catalog.verify`
and `python -m builder build` refuse each, published and with `--allow-unsigned`, by an error line
naming the packet and `ladders[0].argv` (catalog/checks/commands.py):

- the oracle arm's ladder recording a server on two cards (`--tensor-parallel-size 2`): the
  many-user figures of a one-card arm from twice its cards;
- the speculative arm's ladder recording a deeper draft (`num_speculative_tokens` 4 where the arm
  drafts 2): another configuration's figures under the arm's name.

The control: the same lab's ladders recording the runner's own ladder command, the arm's with
`--max-num-seqs 64` in place of its 1 (no fact a command is held to), are accepted by both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catalog.recipes.compose import merge_args
from tests.adversarial.test_forgery import MODES, refused
from tests.adversarial.test_listed_key import accepted, campaign, lab, lab_seal  # noqa: F401 (lab: fixture)

Document = dict[str, Any]
ORACLE = "tp1-mtp0"  # the campaign's oracle arm (its rows: 120 tokens each)
SPEC = "tp1-mtp2"  # its speculative arm, MTP depth 2


def _arm_argv(document: Document, arm: str) -> list[str]:
    argv: list[str] = next(a for a in document["arms"] if a["id"] == arm)["config"]["argv"]
    return argv


def ladder_argv(document: Document, arm: str, *changed: str) -> list[str]:
    """The runner's ladder command for `arm` (its command, --max-num-seqs 64), with `changed` flags."""
    return merge_args([*_arm_argv(document, arm), "--max-num-seqs", "64", *changed])


def with_ladders(argv_of: dict[str, list[str]], document: Document) -> Document:
    """`document` with a concurrency ladder on each arm of `argv_of`, recording that server command;
    its levels honest (identical ones hold the oracle rows' 120 tokens a user)."""
    document["ladders"] = [
        {
            "arm": arm,
            "kind": "concurrency",
            "concurrency": [
                {"users": u, "completion_tokens": 120 * u, "wall_s": 2.0 + u, "identical_to_oracle": True}
                for u in (1, 2, 4)
            ],
            "argv": argv,
        }
        for arm, argv in argv_of.items()
    ]
    return document


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_ladder_server_on_more_cards_than_its_arm_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = campaign()
    forged_argv = ladder_argv(document, ORACLE, "--tensor-parallel-size", "2")
    forged = lab_seal(lab, with_ladders({ORACLE: forged_argv}, document))
    refused(lab, forged, options, because="ladders[0].argv")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_a_ladder_server_drafting_deeper_than_its_arm_is_refused(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = campaign()
    deeper = json.dumps({"method": "mtp", "num_speculative_tokens": 4})
    forged_argv = ladder_argv(document, SPEC, "--speculative-config", deeper)
    forged = lab_seal(lab, with_ladders({SPEC: forged_argv}, document))
    refused(lab, forged, options, because="ladders[0].argv")


@pytest.mark.slow
@pytest.mark.parametrize("options", MODES)
def test_the_runners_ladder_commands_are_accepted(lab: Path, options: tuple[str, ...]) -> None:  # noqa: F811
    document = campaign()
    honest = {arm: ladder_argv(document, arm) for arm in (ORACLE, SPEC)}
    assert all("64" in argv and "1" not in argv for argv in honest.values())  # the ladder's sequences, not the arm's
    path = lab_seal(lab, with_ladders(honest, document))
    assert [ladder["argv"] for ladder in json.loads(path.read_text())["ladders"]] == list(honest.values())
    accepted(lab, options)
