"""More than two fresh servers an arm (runner/plan.py `servers_per_arm`, up to 4): the runner gates
every one of them (runner/campaign.py `gates_for`). Servers A and B by the unlabelled G1 (G2) every
packet records; each further server by a G1 (G2) naming it, against server A: the arm's published
rate averages every server, so none may go uncompared. End to end against the fake vLLM
(testkit/fake_vllm), the packet written verifies."""

from __future__ import annotations

import json

import pytest

from catalog.checks.consistency import gate_problems
from catalog.checks.evidence import evidence_problems
from catalog.model.packet import Packet, State
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.recipes.recipe import Recipe
from catalog.store.documents import load_file
from catalog.store.repository import load_catalog
from runner.campaign import gates_for
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import ArmPlan, CampaignRequest, plan_arms
from testkit.samples import DATA, make_rows, make_server
from tests.adversarial.fakes import Campaign, campaign, clean_env  # noqa: F401 (fixtures)

FIRST = "the arm's first fresh server"
SECOND = "the arm's second fresh server"


@pytest.fixture(scope="module")
def demo() -> Recipe:
    return load_file(Recipe, DATA / "models" / "demo.yaml")


@pytest.fixture(scope="module")
def cpu() -> Hardware:
    return next(h for h in load_file(HardwareFile, DATA / "hardware.yaml").hardware if h.id == "cpu_generic")


def _plan(recipe: Recipe, hardware: Hardware, **asked: object) -> list[ArmPlan]:
    return plan_arms(CampaignRequest.model_validate({"model": "demo", **asked}), recipe, hardware, "demo.yaml")


def test_each_server_past_the_second_gets_a_g1_against_the_first(demo: Recipe, cpu: Hardware) -> None:
    (oracle,) = _plan(demo, cpu, depths=[0], servers_per_arm=4)
    runs = [make_server(label, make_rows(ms_per_token=20.0 + 0.1 * i)) for i, label in enumerate("ABCD")]
    runs[3] = make_server("D", make_rows(ms_per_token=18.0, diverge={5: 7}))
    gates = gates_for(oracle, runs, oracle, runs)
    assert [(g.gate, g.server, g.against, g.cause) for g in gates] == [
        ("G1", None, SECOND, "repeat"),
        ("G1", "C", FIRST, "repeat"),
        ("G1", "D", FIRST, "repeat"),
    ]
    assert [(g.passed, g.exact) for g in gates] == [(True, 12), (True, 12), (False, 11)]
    assert gates[2].first_divergence[5] == 7


def test_two_servers_are_gated_as_every_committed_packet_records(demo: Recipe, cpu: Hardware) -> None:
    (oracle,) = _plan(demo, cpu, depths=[0])
    runs = [make_server("A", make_rows(ms_per_token=20.0)), make_server("B", make_rows(ms_per_token=20.1))]
    (g1,) = gates_for(oracle, runs, oracle, runs)
    assert (g1.gate, g1.server, g1.against) == ("G1", None, SECOND)


def test_a_speculative_arm_of_three_servers_gets_a_g2_per_further_server_and_a_g3_each(
    demo: Recipe, cpu: Hardware
) -> None:
    oracle, spec = _plan(demo, cpu, depths=[0, 3], servers_per_arm=3)
    oracle_runs = [make_server(label, make_rows(ms_per_token=20.0)) for label in "ABC"]
    spec_runs = [
        make_server("A", make_rows(ms_per_token=12.0, chunk=4)),
        make_server("B", make_rows(ms_per_token=12.1, chunk=4)),
        make_server("C", make_rows(ms_per_token=11.0, chunk=4, diverge={0: 3})),
    ]
    gates = gates_for(spec, spec_runs, oracle, oracle_runs)
    assert [(g.gate, g.server, g.against) for g in gates] == [
        ("G2", None, SECOND),
        ("G2", "C", FIRST),
        ("G3", "A", oracle.id),
        ("G3", "B", oracle.id),
        ("G3", "C", oracle.id),
    ]
    assert [g.passed for g in gates] == [True, False, True, True, False]


@pytest.mark.slow
def test_a_campaign_of_three_servers_an_arm_gates_each_and_its_packet_verifies(campaign: Campaign) -> None:  # noqa: F811
    catalog = load_catalog(campaign.root / "data", campaign.root / "packets")
    places = Places(campaign.root / "data", campaign.root / "packets", campaign.root / "runs", campaign.root)
    choice = RuntimeChoice(campaign.python, False, campaign.root / "model", 20.0)
    measure(catalog, CampaignRequest(model="demo", servers_per_arm=3), choice, places, lambda message: None)
    assert campaign.servers_started() == 3 and campaign.live() == []
    (path,) = campaign.packet_files()
    packet = Packet.model_validate(json.loads(path.read_text()))
    (arm,) = packet.arms
    assert [s.label for s in arm.servers] == ["A", "B", "C"]
    assert [(g.gate, g.server, g.against, g.exact) for g in arm.gates] == [
        ("G1", None, SECOND, 12),
        ("G1", "C", FIRST, 12),
    ]
    assert gate_problems(packet) == [] and evidence_problems(packet) == []
    assert arm.state == State.MEASURED
    load_catalog(campaign.root / "data", campaign.root / "packets")  # every check a reader runs passes
