"""What a measuring host advertises to Ray, from its own preflight (runner/fleet/hosts.py), against
the recorded outputs of real boxes replayed by the fake vendor tools (tests/runner/smi/README.md),
and the data/ a head sends with every job."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from catalog.errors import UserError
from catalog.recipes.hardware import HardwareFile
from catalog.store.documents import load_file
from runner import preflight
from runner.fleet.cells import HOST_RESOURCE
from runner.fleet.hosts import card_resources, data_bundle, unpack

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HARDWARE = load_file(HardwareFile, REPO / "data" / "hardware.yaml").hardware


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[str], None]:
    """A recorded box on PATH (as tests/runner/test_preflight_smi.py selects one), with a render node."""
    dri = tmp_path / "dri"
    (dri / "by-path").mkdir(parents=True)
    (dri / "renderD128").write_bytes(b"")
    (dri / "by-path" / "pci-0000:03:00.0-render").symlink_to(dri / "renderD128")
    monkeypatch.setattr(preflight, "DRI", dri)
    monkeypatch.setenv("PATH", f"{HERE / 'bin'}{os.pathsep}{os.environ['PATH']}")
    for name in ("ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    return lambda name: monkeypatch.setenv("FAKE_SMI_BOX", str(HERE / "smi" / name))


@pytest.mark.parametrize(
    ("recorded", "advertised"),
    [
        ("b70", {"arc_pro_b70": 1.0}),
        ("b60", {"arc_pro_b60": 1.0}),
        ("h100", {"h100_sxm": 1.0}),
    ],
)
def test_a_host_advertises_the_cards_its_preflight_reads(box, recorded: str, advertised: dict[str, float]) -> None:
    box(recorded)
    assert card_resources(HARDWARE) == {**advertised, HOST_RESOURCE: 1.0}
    assert card_resources(HARDWARE, cpu=True) == {**advertised, "cpu_generic": 1.0, HOST_RESOURCE: 1.0}


def test_an_unhealthy_card_is_not_advertised_nor_the_cpu_in_its_place(box) -> None:
    box("b70-sick")
    assert card_resources(HARDWARE) == {HOST_RESOURCE: 1.0}


def test_the_head_sends_its_data_and_a_host_unpacks_it_where_it_is_told(tmp_path: Path) -> None:
    bundle = data_bundle(REPO / "data")
    assert "models/demo.yaml" in bundle and "hardware.yaml" in bundle and "suites/strict-v1.json" in bundle
    into = unpack(bundle, tmp_path / "job" / "data")
    assert (into / "models" / "demo.yaml").read_bytes() == (REPO / "data" / "models" / "demo.yaml").read_bytes()
    with pytest.raises(UserError, match="outside the data folder"):
        unpack({"../escape.yaml": b"x"}, tmp_path / "other")
    assert not (tmp_path / "escape.yaml").exists()
