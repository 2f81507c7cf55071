"""The head's bookkeeping without a cluster: bounded tries, per-host progress, the failure report,
and packets accepted from a host only when they verify and belong to the job (runner/fleet/ledger.py,
runner/fleet/head.py). tests/e2e/test_fleet.py runs the same code against a real Ray cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.errors import CatalogError
from catalog.model.packet import CampaignRef
from catalog.packets.keys import load_keys
from catalog.store.repository import load_catalog
from runner.fleet.cells import expand, jobs_of
from runner.fleet.head import HeadPlaces, accept
from runner.fleet.ledger import JobState, Ledger
from runner.fleet.plan_file import load_plan
from testkit.samples import measured_parts
from tests.catalog.factories import seal_parts, signed_data

PLAN = """\
name: lab
repeats: 2
attempts: 2
matrix:
  - model: demo
    hardware: [cpu_generic]
  - model: qwen3.5-9b
    hardware: [arc_pro_b70]
    depths: [2]
"""


@pytest.fixture
def setup(tmp_path: Path):
    data = signed_data(tmp_path / "data")
    (tmp_path / "packets").mkdir()
    (tmp_path / "campaigns").mkdir()
    (tmp_path / "campaigns" / "lab.yaml").write_text(PLAN)
    planned = load_plan(tmp_path / "campaigns" / "lab.yaml")
    catalog = load_catalog(data, tmp_path / "packets", allow_unsigned=True)
    cells, _ = expand(planned, catalog, data)
    jobs = jobs_of(cells, planned.plan, None)
    return data, jobs, HeadPlaces(data, tmp_path / "packets", tmp_path / "runs")


def test_a_failing_job_is_tried_attempts_times_then_reported_with_each_host_and_log(setup) -> None:
    _, jobs, _ = setup
    ledger = Ledger(jobs, {(jobs[1].ref.cell, 1): "qwen3.5-9b-bf16-00000000"}, attempts=2)
    assert [j.name for j in ledger.to_run()] == [jobs[0].name, jobs[2].name, jobs[3].name]
    ledger.started(jobs[0].name, "host-a")
    ledger.started(jobs[2].name, "host-b")
    assert ledger.summary() == "0 done · 2 running (host-a, host-b) · 1 waiting · 0 failed · 1 in packets/ already"
    assert ledger.failed_try(jobs[0].name, "host-a", "/runs/a/cell.log", "server A failed") is True
    assert ledger.entries[jobs[0].name].state == JobState.WAITING
    ledger.started(jobs[0].name, "host-b")
    assert ledger.failed_try(jobs[0].name, "host-b", "/runs/b/cell.log", "server A failed again") is False
    ledger.succeeded(jobs[2].name, "host-b", "demo-bf16-12345678")
    ledger.gave_up(jobs[3].name, "no host in the cluster advertises 'arc_pro_b70' x 1")
    assert ledger.summary() == (
        "1 done (host-b 1) · 0 running · 0 waiting · 2 failed (host-b 1) · 1 in packets/ already"
    )
    assert ledger.report() == [
        f"FAILED {jobs[0].label} ({jobs[0].name}) after 2 tries:",
        "  try 1 on host-a (log /runs/a/cell.log): server A failed",
        "  try 2 on host-b (log /runs/b/cell.log): server A failed again",
        f"FAILED {jobs[3].label} ({jobs[3].name}) after 1 try:",
        "  try 1 on no host (log -): no host in the cluster advertises 'arc_pro_b70' x 1",
    ]


def test_a_returned_packet_is_verified_and_written_by_its_content_address(setup) -> None:
    data, jobs, places = setup
    job = jobs[1]
    sealed = seal_parts(measured_parts().model_copy(update={"campaign": job.ref}))
    keys = load_keys(data / "keys.yaml")
    packet = accept(job, sealed.file_name, sealed.data, sealed.envelope, keys, places)
    assert packet.id == sealed.packet.id and packet.signed
    assert (places.packets / sealed.file_name).read_bytes() == sealed.data
    assert (places.packets / f"{packet.id}.dsse.json").read_bytes() == sealed.envelope
    assert not list((places.runs / "fleet" / "lab" / "incoming").iterdir())  # nothing left staged


def test_a_packet_of_another_job_or_altered_on_the_way_is_refused(setup) -> None:
    data, jobs, places = setup
    keys = load_keys(data / "keys.yaml")
    other = CampaignRef(name="lab", cell=jobs[1].ref.cell, repeat=2, repeats=2)
    sealed = seal_parts(measured_parts().model_copy(update={"campaign": other}))
    with pytest.raises(CatalogError, match="is not the packet of"):
        accept(jobs[1], sealed.file_name, sealed.data, sealed.envelope, keys, places)
    honest = seal_parts(measured_parts().model_copy(update={"campaign": jobs[1].ref}))
    altered = honest.data.replace(b'"title":"Qwen3.5', b'"title":"qwen3.5')
    with pytest.raises(CatalogError) as caught:
        accept(jobs[1], honest.file_name, altered, honest.envelope, keys, places)
    assert caught.value.field == "id" or "signature" in str(caught.value)
    with pytest.raises(CatalogError, match="returned a packet named"):
        accept(jobs[1], "../escape.json", honest.data, honest.envelope, keys, places)
    assert list(places.packets.iterdir()) == []
