"""A fleet cell measured end to end against the fake vLLM (testkit/fake_vllm): the packet the runner
writes for a job proves the cell the head planned (catalog/model/campaign.py), ladders and load
sweep included, so every build accepts it and a re-run of the plan finds the job done."""

from __future__ import annotations

import pytest

from catalog.model.campaign import measured_cell
from catalog.store.repository import load_catalog
from runner.fleet.cells import expand, finished, jobs_of
from runner.fleet.plan_file import load_plan
from runner.measure import Places, RuntimeChoice, measure
from tests.adversarial.fakes import Campaign, campaign, clean_env  # noqa: F401 (fixtures)

PLAN = """\
name: lab
max_tokens: 101
ladders: [concurrency, load]
concurrency: [1, 2]
load: {users: [1], rates_rps: [20.0], requests_per_level: 4}
matrix:
  - model: demo
    hardware: [cpu_generic]
    depths: [0, 3]
"""


@pytest.mark.slow
def test_a_fleet_job_s_packet_proves_the_cell_the_head_planned(campaign: Campaign) -> None:  # noqa: F811
    root = campaign.root
    (root / "campaigns").mkdir()
    (root / "campaigns" / "lab.yaml").write_text(PLAN, encoding="utf-8")
    planned = load_plan(root / "campaigns" / "lab.yaml")
    catalog = load_catalog(root / "data", root / "packets")
    (cell,), _ = expand(planned, catalog, root / "data")
    (job,) = jobs_of([cell], planned.plan, None)
    places = Places(root / "data", root / "packets", root / "runs", root)
    choice = RuntimeChoice(campaign.python, False, root / "model", 20.0)
    packet = measure(catalog, job.request(), choice, places, lambda message: None, campaign=job.ref)
    assert campaign.live() == []
    assert [arm.config.spec_depth for arm in packet.arms] == [0, 3]
    assert {ladder.kind for ladder in packet.ladders} == {"concurrency", "load"}
    assert packet.campaign == job.ref and measured_cell(packet) == cell.key
    again = load_catalog(root / "data", root / "packets")  # every check a build runs passes
    assert finished(again.packets, planned.plan, None) == {(cell.key, 1): packet.id}
