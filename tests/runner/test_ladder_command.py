"""A ladder runs on a fresh server of its own, started with its arm's command and room for many
sequences (runner/plan.py ladder_command: --max-num-seqs 64, where the arm's single-stream servers
run 1). The packet records that server's portable `vllm serve` command with the ladder
(catalog.model.packet.Ladder.argv), as the arm's is recorded (config.argv), so a page shows the
many-user figures beside the command that produced them. End to end against the fake vLLM
(testkit/fake_vllm): the packet written verifies."""

from __future__ import annotations

import json

import pytest

from catalog.checks.commands import command_problems
from catalog.model.packet import Packet
from catalog.recipes.command_facts import command_facts
from catalog.recipes.compose import merge_args
from catalog.recipes.recorded import disagreements
from catalog.store.repository import load_catalog
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import LADDER_MAX_SEQS, CampaignRequest
from tests.adversarial.fakes import Campaign, campaign, clean_env  # noqa: F401 (fixtures)


@pytest.mark.slow
def test_a_ladder_records_its_own_servers_command_and_the_packet_verifies(campaign: Campaign) -> None:  # noqa: F811
    catalog = load_catalog(campaign.root / "data", campaign.root / "packets")
    places = Places(campaign.root / "data", campaign.root / "packets", campaign.root / "runs", campaign.root)
    choice = RuntimeChoice(campaign.python, False, campaign.root / "model", 20.0)
    request = CampaignRequest(model="demo", ladders=["concurrency"], concurrency_levels=[1, 2])
    measure(catalog, request, choice, places, lambda message: None)
    assert campaign.live() == []
    (path,) = campaign.packet_files()
    packet = Packet.model_validate(json.loads(path.read_text()))
    (arm,) = packet.arms
    (ladder,) = packet.ladders
    assert ladder.arm == arm.id and ladder.kind == "concurrency"
    # the ladder server's command: the arm's, with the ladder's sequences in place of the arm's one
    assert ladder.argv[:2] == ["vllm", "serve"]
    seqs = ladder.argv.index("--max-num-seqs")
    assert ladder.argv[seqs + 1] == LADDER_MAX_SEQS == "64" and ladder.argv.count("--max-num-seqs") == 1
    assert arm.config.argv[arm.config.argv.index("--max-num-seqs") + 1] == "1"
    assert ladder.argv == merge_args([*arm.config.argv, "--max-num-seqs", LADDER_MAX_SEQS])
    assert (
        disagreements(command_facts(ladder.argv, arm.config.env), command_facts(arm.config.argv, arm.config.env)) == []
    )
    assert command_problems(packet, None, None) == []
    assert '"argv"' in json.dumps(json.loads(path.read_text())["ladders"][0])  # in the sealed bytes
    load_catalog(campaign.root / "data", campaign.root / "packets")  # every check a reader runs passes
