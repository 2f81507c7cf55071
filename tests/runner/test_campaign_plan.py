"""Campaign plan files: strict loading, the matrix expanded into cells, impossible cells named with
their reason and line, `python -m runner campaign plan`, and which jobs a re-run finds done."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from catalog.errors import CatalogError, CatalogErrors, UserError
from catalog.model.campaign import measured_cell
from catalog.model.packet import CampaignRef
from catalog.packets.seal import write_packet
from catalog.store.repository import load_catalog
from runner.cli import run
from runner.fleet.cells import HOST_RESOURCE, expand, finished, jobs_of
from runner.fleet.plan_file import load_plan
from testkit.samples import measured_parts
from tests.catalog.factories import seal_parts, signed_data

NIGHTLY = """\
name: nightly
repeats: 2
timeout_s: 600
ladders: [concurrency]
concurrency: [1, 2]
matrix:
  - model: qwen3.5-9b
    variants: [default, fp8]
    hardware: [arc_pro_b70, arc_pro_b60]
    tp: [1, 2]
    depths: [3]
  - model: demo
    hardware: [cpu_generic]
    timeout_s: 60
exclude:
  - {model: qwen3.5-9b, hardware: arc_pro_b60, tp: 2}
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return signed_data(tmp_path / "data")


def write(tmp_path: Path, text: str, name: str = "nightly") -> Path:
    path = tmp_path / "campaigns" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def catalog_of(data: Path, tmp_path: Path):
    (tmp_path / "packets").mkdir(exist_ok=True)
    return load_catalog(data, tmp_path / "packets", allow_unsigned=True)


def test_the_matrix_expands_into_cells_each_with_what_a_host_must_advertise(tmp_path: Path, data: Path) -> None:
    planned = load_plan(write(tmp_path, NIGHTLY))
    cells, impossible = expand(planned, catalog_of(data, tmp_path), data)
    assert impossible == []
    # 2 variants x (B70 at TP 1 and 2, B60 at TP 1) + the demo
    assert [c.label for c in cells] == [
        "qwen3.5-9b default arc_pro_b70 tp1 depths 0,3",
        "qwen3.5-9b default arc_pro_b70 tp2 depths 0,3",
        "qwen3.5-9b default arc_pro_b60 tp1 depths 0,3",
        "qwen3.5-9b fp8 arc_pro_b70 tp1 depths 0,3",
        "qwen3.5-9b fp8 arc_pro_b70 tp2 depths 0,3",
        "qwen3.5-9b fp8 arc_pro_b60 tp1 depths 0,3",
        "demo default cpu_generic tp1 depths 0",
    ]
    assert cells[1].resources() == {"arc_pro_b70": 2.0, HOST_RESOURCE: 1.0}
    assert [c.timeout_s for c in cells[-2:]] == [600, 60]
    assert cells[0].request.ladders == ["concurrency"] and cells[0].request.concurrency_levels == [1, 2]
    assert len({c.key for c in cells}) == len(cells)
    jobs = jobs_of(cells, planned.plan, "2026-12-04")
    assert len(jobs) == 14
    assert [j.ref.repeat for j in jobs[:7]] == [1] * 7  # every cell once before any twice
    # each repeat its own campaign: never resumes another repeat's attempts
    assert jobs[0].request().salt != jobs[7].request().salt
    assert jobs[0].cell is jobs[7].cell


def test_a_cell_keeps_its_key_when_the_plan_around_it_changes(tmp_path: Path, data: Path) -> None:
    catalog = catalog_of(data, tmp_path)
    before, _ = expand(load_plan(write(tmp_path, NIGHTLY)), catalog, data)
    edited = NIGHTLY.replace("repeats: 2", "repeats: 5").replace("timeout_s: 600", "timeout_s: 900")
    after, _ = expand(load_plan(write(tmp_path, edited)), catalog, data)
    assert [c.key for c in before] == [c.key for c in after]
    fewer_tokens, _ = expand(load_plan(write(tmp_path, NIGHTLY + "max_tokens: 256\n")), catalog, data)
    assert fewer_tokens[0].key != before[0].key  # what is measured changed


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        (NIGHTLY + "colour: red\n", 17, "colour", "unknown key"),
        (NIGHTLY.replace("tp: [1, 2]", "tp: [1, 32]"), 10, "matrix[0].tp", "between 1 and 16"),
        (NIGHTLY.replace("repeats: 2", "repeats: two"), 2, "repeats", "valid integer"),
        (NIGHTLY + "load: {users: [1, 2]}\n", 17, "load", "add load to ladders"),
        (
            NIGHTLY.replace("{model: qwen3.5-9b, hardware: arc_pro_b60, tp: 2}", "{}"),
            16,
            "exclude[0]",
            "names at least",
        ),
        (NIGHTLY.replace("name: nightly", "name: weekly"), 1, "name", "rename the file"),
    ],
)
def test_a_bad_plan_is_refused_naming_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(CatalogError) as caught:
        load_plan(path)
    error = caught.value
    assert (error.file, error.line, error.field) == (str(path), line, field)
    assert message in error.message


def test_impossible_cells_are_named_with_their_reason_and_line(tmp_path: Path, data: Path) -> None:
    demo = yaml.safe_load((data / "models" / "demo.yaml").read_text())
    demo["variants"]["default"]["vram_minimum_gb"] = 30  # more than one cpu_generic's 24 GB
    demo["meta"]["hardware"]["h100_sxm"] = "unsupported"
    (data / "models" / "demo.yaml").write_text(yaml.safe_dump(demo, sort_keys=False))
    text = """\
name: nightly
matrix:
  - model: demo
    hardware: [cpu_generic, h100_sxm]
    tp: [1, 2]
  - model: demo
    variants: [int4]
    hardware: [cpu_generic]
  - model: qwen3.5-9b
    hardware: [arc_pro_b70]
    configuration: no-such-configuration
"""
    planned = load_plan(write(tmp_path, text))
    cells, impossible = expand(planned, catalog_of(data, tmp_path), data)
    assert [c.label for c in cells] == ["demo default cpu_generic tp2 depths 0"]
    found = {(i.label, i.loc): i.reason for i in impossible}
    assert found[("demo default cpu_generic tp1 depths 0", ("matrix", 0, "tp", 0))] == (
        "variant 'default' needs about 30 GB; 1 x Generic 2-core x86 CPU host have 24 GB (variants.vram_minimum_gb)"
    )
    assert found[("demo default h100_sxm tp1 depths 0", ("matrix", 0, "hardware", 1))] == (
        "data/models/demo.yaml marks h100_sxm unsupported (meta.hardware)"
    )
    assert found[("demo int4 cpu_generic tp1 depths 0", ("matrix", 1, "variants", 0))].startswith(
        "VARIANT: unknown variant 'int4'"
    )
    assert found[("qwen3.5-9b default arc_pro_b70 tp1 depths 0 no-such-configuration", ("matrix", 2, "configuration"))]
    # the command refuses the plan, each problem on its line
    with pytest.raises(CatalogErrors) as caught:
        run(["--data", str(data), "--packets", str(tmp_path / "packets"), "campaign", "plan", str(planned.path)])
    lines = {(e.field, e.line) for e in caught.value.errors}
    assert ("matrix[0].hardware[1]", 4) in lines and ("matrix[1].variants[0]", 7) in lines
    assert ("matrix[2].configuration", 11) in lines


def test_campaign_plan_prints_every_cell_and_its_commands(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NIGHTLY)
    code = run(
        ["--data", str(data), "--packets", str(tmp_path / "packets"), "campaign", "plan", str(path), "--commands"]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert (
        out[0] == f"{path}: campaign nightly: 7 cell(s) x 2 repeat(s) = 14 job(s), 0 already in {tmp_path / 'packets'}"
    )
    cells = [line for line in out if line.startswith("cell ")]
    assert len(cells) == 7
    assert cells[0].endswith(
        "qwen3.5-9b default arc_pro_b70 tp1 depths 0,3 · timeout 600 s · needs arc_pro_b70 x 1, measuring_host x 1 "
        "· not measured yet"
    )
    assert any(line.startswith("    tp1-oracle: ") and "vllm serve Qwen/Qwen3.5-9B" in line for line in out)
    assert any(line.startswith("    tp2-mtp3: ") and "--tensor-parallel-size 2" in line for line in out)


# Its first cell is the campaign testkit's measured_parts records: Qwen3.5 9B on one B70, the
# oracle and MTP depth 2, no ladders, the default workload, the local runtime.
RERUN = """\
name: nightly
repeats: 2
matrix:
  - model: qwen3.5-9b
    hardware: [arc_pro_b70]
    depths: [2]
  - model: demo
    hardware: [cpu_generic]
"""


def test_a_rerun_finds_the_jobs_already_in_packets(tmp_path: Path, data: Path) -> None:
    planned = load_plan(write(tmp_path, RERUN))
    cells, _ = expand(planned, catalog_of(data, tmp_path), data)
    key = cells[0].key
    assert key == measured_cell(measured_parts())  # the cell the head plans is the one its packet proves
    for ref in (
        CampaignRef(name="nightly", round="2026-12-04", cell=key, repeat=2, repeats=2),
        CampaignRef(name="nightly", round="2026-12-03", cell=key, repeat=1, repeats=2),  # another round
        CampaignRef(name="weekly", round="2026-12-04", cell=key, repeat=1, repeats=2),  # another plan
    ):
        sealed = seal_parts(measured_parts(title=f"{ref.name} {ref.round}").model_copy(update={"campaign": ref}))
        (tmp_path / "packets" / sealed.file_name).write_bytes(sealed.data)
    catalog = catalog_of(data, tmp_path)
    done = finished(catalog.packets, planned.plan, "2026-12-04")
    assert list(done) == [(key, 2)]
    assert finished(catalog.packets, planned.plan, None) == {}


def test_a_packet_claiming_a_cell_it_did_not_measure_never_makes_a_rerun_skip_it(tmp_path: Path, data: Path) -> None:
    """Signed by a listed key, the Qwen campaign claims the demo cell: the plan refuses to load it,
    naming the file and campaign.cell, and finished(), handed it anyway, counts only the honest one."""
    planned = load_plan(write(tmp_path, RERUN))
    qwen, demo = expand(planned, catalog_of(data, tmp_path), data)[0]
    honest = seal_parts(
        measured_parts().model_copy(
            update={"campaign": CampaignRef(name="nightly", cell=qwen.key, repeat=1, repeats=2)}
        )
    )
    claim = CampaignRef(name="nightly", cell=demo.key, repeat=1, repeats=2)
    forged = seal_parts(measured_parts(ms_per_token=26.0).model_copy(update={"campaign": claim}))
    assert forged.packet.signed
    packets = {sealed.packet.id: sealed.packet for sealed in (honest, forged)}
    assert finished(packets, planned.plan, None) == {(qwen.key, 1): honest.packet.id}
    path = write_packet(forged, tmp_path / "packets")
    with pytest.raises(CatalogError) as caught:
        run(["--data", str(data), "--packets", str(tmp_path / "packets"), "campaign", "plan", str(planned.path)])
    assert (caught.value.file, caught.value.field) == (str(path), "campaign.cell")


def test_two_cells_no_packet_could_tell_apart_are_refused(tmp_path: Path, data: Path) -> None:
    """An overlay configuration with the recipe's own speculative method and no draft head of its
    own: its packets and the recipe's cell's would record the same arms, so one cell's packets would
    count as the other's."""
    overlay = data / "overlays" / "qwen3.5-9b.yaml"
    text = overlay.read_text(encoding="utf-8").replace(
        "configurations:\n",
        "configurations:\n  b70-default-mtp-env:\n    label: MTP with a switch\n    variant: default\n"
        "    hardware: arc_pro_b70\n    speculative_config: {method: mtp, num_speculative_tokens: 2}\n"
        "    env: {VLLM_SOME_SWITCH: '1'}\n",
        1,
    )
    overlay.write_text(text, encoding="utf-8")
    plan = RERUN + "  - model: qwen3.5-9b\n    hardware: [arc_pro_b70]\n    depths: [2]\n"
    plan += "    configuration: b70-default-mtp-env\n"
    cells, impossible = expand(load_plan(write(tmp_path, plan)), catalog_of(data, tmp_path), data)
    assert [c.label for c in cells] == [
        "qwen3.5-9b default arc_pro_b70 tp1 depths 0,2",
        "demo default cpu_generic tp1 depths 0",
    ]
    (refused,) = impossible
    assert refused.loc == ("matrix", 2, "configuration")
    assert refused.reason.startswith("its packets could not be told from those of qwen3.5-9b default arc_pro_b70")


def test_the_example_plan_in_the_repository_is_valid(tmp_path: Path, data: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "campaigns"
    for path in sorted(source.glob("*.yaml")):
        shutil.copy(path, tmp_path / path.name)
        cells, impossible = expand(load_plan(tmp_path / path.name), catalog_of(data, tmp_path), data)
        assert cells and not impossible, path


def test_resources_counts_no_card_here_so_the_cpu_stands_in(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # neither xpu-smi nor nvidia-smi
    assert run(["--data", str(data), "campaign", "resources"]) == 0
    assert capsys.readouterr().out == '{"cpu_generic":1,"measuring_host":1}\n'


def test_a_user_error_names_the_plan_file(tmp_path: Path, data: Path) -> None:
    with pytest.raises(UserError) as caught:
        run(["--data", str(data), "campaign", "plan", str(tmp_path / "campaigns" / "missing.yaml")])
    assert "missing.yaml" in str(caught.value)


def test_resources_refuses_a_host_without_the_cards_it_is_to_advertise(
    tmp_path: Path, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod or batch job advertises its cards statically; --expect checks preflight finds them."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError) as caught:
        run(["--data", str(data), "campaign", "resources", "--expect", '{"arc_pro_b70": 2}'])
    assert caught.value.field == "--expect"
    assert caught.value.message == 'this host\'s preflight finds {"cpu_generic": 1}, not {"arc_pro_b70": 2}'
    assert run(["--data", str(data), "campaign", "resources", "--expect", '{"cpu_generic": 1}']) == 0
