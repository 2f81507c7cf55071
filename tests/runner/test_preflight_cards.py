"""Preflight against xpu-smi 2.x and nvidia-smi 590 as they print (tests/runner/smi/README.md:
the xpu-smi 2.x outputs are rendered by intel/xpumanager v2.0.0's own printing code, the
nvidia-smi ones are real captures), replayed by the fake tools on PATH; and the cards preflight
checked are the cards a server is given."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from catalog.errors import UserError
from catalog.recipes.hardware import HardwareFile
from catalog.store.documents import load_file
from runner import preflight, xpu_smi
from runner.cards import run_tool

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
SMI = HERE / "smi"
HARDWARE = load_file(HardwareFile, HERE.parents[1] / "data" / "hardware.yaml").by_id()
MIB = 1024 * 1024
H100_UUID = "GPU-00000000-0000-0000-0000-000000000000"
SECOND_UUID = "GPU-11111111-1111-1111-1111-111111111111"

Box = Callable[[str], Path]


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Box]:
    """A recorded box; /dev/dri is a folder of this test with two cards' nodes and by-path links."""
    dri = tmp_path / "dri"
    (dri / "by-path").mkdir(parents=True)
    for number, bus in ((1, "0000:03:00.0"), (2, "0000:04:00.0")):
        (dri / f"card{number}").write_bytes(b"")
        (dri / f"renderD{127 + number}").write_bytes(b"")
        (dri / "by-path" / f"pci-{bus}-card").symlink_to(f"../card{number}")
        (dri / "by-path" / f"pci-{bus}-render").symlink_to(f"../renderD{127 + number}")
    monkeypatch.setattr(preflight, "DRI", dri)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    for name in ("ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)

    def use(name: str) -> Path:
        monkeypatch.setenv("FAKE_SMI_BOX", str(SMI / name))
        return dri

    yield use


def refused(hardware: str, tp: int = 1, need: float = 11.0, variant: str = "fp8") -> UserError:
    with pytest.raises(UserError) as caught:
        preflight.check_devices(HARDWARE[hardware], tp, need, variant)
    return caught.value


# ---- xpu-smi 2.x (issue 29, items 1 and 2) ----


def test_a_b70_under_xpu_smi_2_passes_with_its_memory_read_from_the_json(box: Box) -> None:
    """2.x's tables have no `|` and print memory per tile: the table parser alone found no card
    ("xpu-smi lists no Intel GPU") and, given one, no memory ("cannot read the free memory")."""
    box("b70-2x")
    report = preflight.check_devices(HARDWARE["arc_pro_b70"], 1, 11.0, "fp8")
    (device,) = report.devices
    assert report.name == "Intel(R) Arc(TM) Pro B70 Graphics" and device.bus_id == "0000:03:00.0"
    assert device.memory_total_mib == 34242297856 / MIB  # memory_physical_size_byte
    assert device.memory_used_mib == pytest.approx(211.28125)  # memory.used_mib.tile_0.current
    assert device.health is None and device.health_unread == ()


def test_memory_another_job_holds_is_read_per_tile_under_2x(box: Box) -> None:
    box("b70-2x-busy")
    error = refused("arc_pro_b70", need=5.0)
    assert "device 0 already has 12499 MiB in use by a process this user cannot see" in error.message


def test_a_card_2x_calls_critical_is_refused(box: Box) -> None:
    """2.x prints `[ memory_health ]` then `status   Critical`: no `Status:` cell for the 1.x
    parser to find, so a failing card passed as healthy."""
    box("b70-2x-critical")
    error = refused("arc_pro_b70")
    assert error.field == "HW" and "is not healthy: memory_health: Critical" in error.message


def test_a_health_check_that_stops_early_has_its_other_components_asked_one_by_one(box: Box) -> None:
    """2.x stops at the first component whose check errs (no memory-temperature sensor: exit 1,
    the components after it never printed): memory health is then asked for alone (`-c 4`)."""
    box("b70-2x-nomemtemp-critical")
    assert "is not healthy: memory_health: Critical" in refused("arc_pro_b70").message
    box("b70-2x-nomemtemp")
    (device,) = preflight.check_devices(HARDWARE["arc_pro_b70"], 1, 11.0, "fp8").devices
    assert device.health is None and device.health_unread == ("memory_temperature",)


def test_the_table_fallback_reads_both_layouts() -> None:
    """1.x bordered and 2.x borderless text, for an xpu-smi whose JSON is not read."""
    borderless = (SMI / "b70-2x-critical" / "xpu-smi_health_-d_0.txt").read_text()
    assert xpu_smi.health_from_table(borderless) == "memory_health: Critical"
    assert xpu_smi.health_from_table((SMI / "b70-2x" / "xpu-smi_health_-d_0.txt").read_text()) is None
    assert xpu_smi.health_from_table((SMI / "b70-sick" / "xpu-smi_health_-d_0.txt").read_text()) == (
        "GPU Memory: Critical"
    )
    stats = xpu_smi.table_values((SMI / "b70-2x-busy" / "xpu-smi_stats_-d_0.txt").read_text())
    assert xpu_smi.mib(stats["GPU Memory Used (MiB)"]) == 12499  # `..., cur...`: cut at 50 characters
    (listed,) = xpu_smi._discovery_rows((SMI / "b70-2x" / "xpu-smi_discovery.txt").read_text())
    assert (listed.index, listed.bus_id, listed.drm_card) == (0, "0000:03:00.0", "/dev/dri/card1")


def test_vendor_tools_run_with_every_card_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    """Level Zero applies ZE_AFFINITY_MASK to enumeration: xpu-smi run with it would number only
    the cards it leaves, and the mask would be applied twice."""
    monkeypatch.setenv("ZE_AFFINITY_MASK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    out = run_tool(["env"])
    assert "ZE_AFFINITY_MASK" not in out.stdout and "CUDA_VISIBLE_DEVICES" not in out.stdout


# ---- the card checked is the card the server gets (item 3) ----


def test_the_affinity_mask_chooses_the_card_and_its_nodes(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    dri = box("b70x2-2x")
    monkeypatch.setenv("ZE_AFFINITY_MASK", "1")
    report = preflight.check_devices(HARDWARE["arc_pro_b70"], 1, 11.0, "fp8")
    assert [d.bus_id for d in report.devices] == ["0000:04:00.0"]
    cards = preflight.card_selection(report, 1, container=True)
    assert cards is not None
    assert cards.docker_options() == ["--device", str(dri / "card2"), "--device", str(dri / "renderD129")]
    assert cards.local_env() == {"ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1", "ZE_AFFINITY_MASK": "1"}
    assert cards.container_env() == {"ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1", "ZE_AFFINITY_MASK": "0"}
    assert cards.by_path_links() == {"pci-0000:04:00.0-card": "../card2", "pci-0000:04:00.0-render": "../renderD129"}
    monkeypatch.delenv("ZE_AFFINITY_MASK")
    report = preflight.check_devices(HARDWARE["arc_pro_b70"], 2, 11.0, "fp8")
    both = preflight.card_selection(report, 2, container=False)
    assert both is not None and both.local_env()["ZE_AFFINITY_MASK"] == "0,1"


def test_a_container_cannot_be_given_a_card_without_its_nodes(box: Box) -> None:
    dri = box("b70-2x")
    (dri / "by-path" / "pci-0000:03:00.0-card").unlink()
    report = preflight.check_devices(HARDWARE["arc_pro_b70"], 1, 11.0, "fp8")
    with pytest.raises(UserError) as caught:
        preflight.card_selection(report, 1, container=True)
    assert "device 0 (0000:03:00.0) has no" in caught.value.message and "by-path" in caught.value.message


@pytest.mark.parametrize(
    ("mask", "chosen"),
    [
        (None, ["GPU-0", "GPU-1"]),
        ("1", ["GPU-1"]),
        ("1,0", ["GPU-1", "GPU-0"]),
        ("GPU-1111", ["GPU-1"]),  # a unique UUID prefix
        ("GPU-", []),  # not unique: invalid, and it hides what follows
        ("0,7,1", ["GPU-0"]),  # an invalid entry hides itself and every entry after it
        ("", []),  # empty: no GPU
    ],
)
def test_cuda_visible_devices_is_read_as_cuda_reads_it(
    box: Box, monkeypatch: pytest.MonkeyPatch, mask: str | None, chosen: list[str]
) -> None:
    box("h100x2")
    if mask is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mask)
    report = preflight.detect_devices("cuda")
    assert [(d.uuid or "")[:5] for d in report.devices] == chosen


def test_cuda_cards_are_named_by_uuid_to_the_server_and_the_container(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    box("h100x2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    report = preflight.check_devices(HARDWARE["h100_sxm"], 1, 22.0, "default")
    cards = preflight.card_selection(report, 1, container=True)
    assert cards is not None
    assert cards.docker_options() == ["--gpus", f'"device={SECOND_UUID}"']
    # nvidia-smi numbers in PCI order; CUDA fastest-first unless told: the server is told
    assert cards.local_env() == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}
    assert cards.container_env() == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": SECOND_UUID}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    report = preflight.check_devices(HARDWARE["h100_sxm"], 2, 22.0, "default")
    both = preflight.card_selection(report, 2, container=False)
    assert both is not None and both.local_env()["CUDA_VISIBLE_DEVICES"] == f"{H100_UUID},{SECOND_UUID}"
    assert both.docker_options() == ["--gpus", f'"device={H100_UUID},{SECOND_UUID}"']


def test_a_mig_slice_is_a_card_with_its_own_memory(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    """`nvidia-smi -L` lists the slices; the query's memory figures are the whole GPU's."""
    box("h100-mig")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-00000001-0000-0000-0000-000000000001")
    report = preflight.check_devices(HARDWARE["h100_sxm"], 1, 11.0, "fp8")
    (device,) = report.devices
    assert device.mig_profile == "2g.20gb" and device.uuid.startswith("MIG-00000001")  # type: ignore[union-attr]
    assert "needs about 22 GB; 1 x NVIDIA H100 80GB HBM3 have 20.0 GB free" in refused("h100_sxm", need=22.0).message
    cards = preflight.card_selection(report, 1, container=True)
    assert cards is not None and cards.docker_options() == [
        "--gpus",
        '"device=MIG-00000001-0000-0000-0000-000000000001"',
    ]


def test_an_h200_reads_its_uuid_and_eight_digit_bus(box: Box) -> None:
    box("h200")
    (device,) = preflight.check_devices(HARDWARE["h200"], 1, 22.0, "default").devices
    assert device.bus_id == "00000000:83:00.0" and device.uuid == H100_UUID


@pytest.mark.slow
def test_the_fake_xpu_smi_replays_exit_status_and_stderr(box: Box) -> None:
    box("b70-2x-nomemtemp")
    out = subprocess.run(["xpu-smi", "health", "-d", "0", "-j"], capture_output=True, text=True)
    assert out.returncode == 1 and "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE" in out.stderr
    assert '"core_temperature"' in out.stdout
