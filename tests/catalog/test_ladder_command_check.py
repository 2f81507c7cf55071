"""A ladder's own server command (catalog.model.packet.Ladder.argv) is held to its arm's record
(catalog/checks/commands.py): it may differ from the arm's command in `--max-num-seqs` (a ladder's
server runs many sequences, runner/plan.py ladder_command), in no fact catalog/recipes/command_facts.py
reads. A disagreement is refused naming `ladders[i].argv`; a ladder recording no command (packets
sealed before it was recorded) is not held to one."""

from __future__ import annotations

import json

import pytest

from catalog.checks.commands import command_problems
from catalog.model.packet import Ladder, Packet
from catalog.recipes.command_facts import command_facts
from catalog.recipes.compose import merge_args
from catalog.recipes.recorded import disagreements
from testkit.samples import ORACLE_ARM, SPEC_ARM, make_load_sweep, measured_parts
from tests.catalog.factories import seal_parts


def _packet(arm_id: str, argv: list[str] | None) -> Packet:
    """The sample campaign with a load ladder on `arm_id`, recording `argv` (None: the arm's own
    command with the ladder server's --max-num-seqs 64, as the runner records it)."""
    parts = measured_parts()
    (arm,) = [a for a in parts.arms if a.id == arm_id]
    recorded = merge_args([*arm.config.argv, "--max-num-seqs", "64"]) if argv is None else argv
    ladder = Ladder(arm=arm_id, kind="load", load=make_load_sweep(), argv=recorded)
    return seal_parts(parts.model_copy(update={"ladders": [ladder]})).packet


def _ladder_problems(packet: Packet) -> list[tuple[str, str]]:
    return [p for p in command_problems(packet, None, None) if p[0].startswith("ladders[")]


@pytest.mark.parametrize("arm_id", [ORACLE_ARM, SPEC_ARM])
def test_the_runners_ladder_command_agrees_with_its_arm(arm_id: str) -> None:
    """It differs from the arm's command in --max-num-seqs alone, which is no fact."""
    packet = _packet(arm_id, None)
    ladder, arm = packet.ladders[0], packet.arm(arm_id)
    assert ladder.argv != arm.config.argv and "64" in ladder.argv
    assert disagreements(command_facts(ladder.argv), command_facts(arm.config.argv)) == []
    assert _ladder_problems(packet) == []


def test_a_ladder_on_more_cards_than_its_arm_is_refused() -> None:
    argv = ["vllm", "serve", "Qwen/Qwen3.5-9B", "--tensor-parallel-size", "2", "--max-num-seqs", "64"]
    ((field, message),) = _ladder_problems(_packet(ORACLE_ARM, argv))
    assert field == "ladders[0].argv"
    assert f"arm {ORACLE_ARM}" in message and "TP" in message and "spans 2 card(s)" in message


def test_a_ladder_drafting_deeper_than_its_arm_is_refused() -> None:
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 4})
    argv = ["vllm", "serve", "Qwen/Qwen3.5-9B", "--speculative-config", spec, "--max-num-seqs", "64"]
    ((field, message),) = _ladder_problems(_packet(SPEC_ARM, argv))
    assert field == "ladders[0].argv"
    assert "speculative depth" in message and "drafts 4 tokens per step" in message and "depth 2" in message


def test_a_ladder_without_speculation_on_a_speculative_arm_is_refused() -> None:
    argv = ["vllm", "serve", "Qwen/Qwen3.5-9B", "--max-num-seqs", "64"]
    fields = {field for field, _ in _ladder_problems(_packet(SPEC_ARM, argv))}
    assert fields == {"ladders[0].argv"}


def test_a_ladder_recording_no_command_is_not_refused() -> None:
    packet = _packet(SPEC_ARM, [])
    assert packet.ladders[0].argv == []
    assert _ladder_problems(packet) == []
    assert "argv" not in json.dumps(packet.model_dump(mode="json")["ladders"][0])  # the older packets' bytes
