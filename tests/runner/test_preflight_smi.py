"""Preflight against the recorded outputs of real boxes (tests/runner/smi/README.md cites them),
replayed by fake `xpu-smi` / `nvidia-smi` executables on PATH: the runner's real code runs them."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.errors import UserError
from catalog.recipes.hardware import Hardware, HardwareFile
from catalog.store.documents import load_file
from runner import preflight

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
SMI = HERE / "smi"
REPO = HERE.parents[1]
HARDWARE = load_file(HardwareFile, REPO / "data" / "hardware.yaml").by_id()


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[object]:
    """Select a recorded box; /dev/dri is a folder of this test with the card's render node."""
    dri = tmp_path / "dri"
    (dri / "by-path").mkdir(parents=True)
    node = dri / "renderD128"
    node.write_bytes(b"")
    monkeypatch.setattr(preflight, "DRI", dri)
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    for name in ("ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)

    def use(name: str, bus: str = "0000:03:00.0") -> Path:
        monkeypatch.setenv("FAKE_SMI_BOX", str(SMI / name))
        link = dri / "by-path" / f"pci-{bus}-render"
        link.unlink(missing_ok=True)
        link.symlink_to(node)
        return node

    yield use


def refused(hardware: str, tp: int = 1, need: float = 11.0, variant: str = "fp8") -> UserError:
    with pytest.raises(UserError) as caught:
        preflight.check_devices(HARDWARE[hardware], tp, need, variant)
    return caught.value


def test_a_healthy_b70_passes_and_reports_its_name_and_free_memory(box) -> None:  # type: ignore[no-untyped-def]
    box("b70")
    report = preflight.check_devices(HARDWARE["arc_pro_b70"], 1, 11.0, "fp8")
    (device,) = report.devices
    assert report.name == "Intel(R) Arc(TM) Pro B70 Graphics"
    assert device.memory_total_mib == 32656.0 and device.memory_used_mib == 24.0
    assert device.free_gb == pytest.approx((32656 - 24) * 1024 * 1024 / 1e9)
    assert device.health is None and device.processes == ()


def test_a_b60_is_never_recorded_as_a_b70(box) -> None:  # type: ignore[no-untyped-def]
    box("b60", "0000:17:00.0")
    error = refused("arc_pro_b70")
    assert "device 0 is Intel Arc Pro B60 Graphics, not Intel Arc Pro B70" in error.message
    assert error.field == "HW" and "HW=" in error.message
    assert preflight.check_devices(HARDWARE["arc_pro_b60"], 1, 11.0, "fp8").devices[0].name.endswith("B60 Graphics")


def test_an_integrated_gpu_is_not_an_arc_pro_card(box) -> None:  # type: ignore[no-untyped-def]
    box("igpu", "0000:00:02.0")
    error = refused("arc_pro_b70")
    assert "Intel Arc Graphics (an integrated GPU, not an Arc Pro card)" in error.message


def test_free_memory_comes_from_xpu_smi_not_the_datasheet(box) -> None:  # type: ignore[no-untyped-def]
    """32 GB on the datasheet, 12 GiB already taken: a 22 GB BF16 build does not fit."""
    box("b70-full")
    error = refused("arc_pro_b70", need=22.0, variant="default")
    assert error.field == "VARIANT"
    assert "needs about 22 GB" in error.message and "21.4 GB free (12288 MiB already in use)" in error.message


def test_memory_held_by_an_unseen_process_is_a_busy_card(box) -> None:  # type: ignore[no-untyped-def]
    box("b70-full")
    error = refused("arc_pro_b70", need=5.0)
    assert "12288 MiB in use by a process this user cannot see" in error.message


@pytest.mark.slow
def test_a_process_holding_the_render_node_makes_the_card_busy(box) -> None:  # type: ignore[no-untyped-def]
    node = box("b70")
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import time; f = open({str(node)!r}, 'rb'); print('ok', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ok"
        error = refused("arc_pro_b70")
        assert f"device 0 is in use by {holder.pid} python" in error.message
    finally:
        holder.kill()
        holder.wait()


def test_an_unhealthy_card_is_refused_with_the_component(box) -> None:  # type: ignore[no-untyped-def]
    box("b70-sick")
    error = refused("arc_pro_b70")
    assert "is not healthy: GPU Memory: Critical" in error.message


def test_an_idle_h100_passes_and_a_busy_one_names_the_process(box) -> None:  # type: ignore[no-untyped-def]
    box("h100")
    report = preflight.check_devices(HARDWARE["h100_sxm"], 1, 22.0, "default")
    assert report.name == "NVIDIA H100 80GB HBM3" and report.driver == "590.48.01"
    box("h100-busy")
    assert "device 0 is in use by 11327 /root/tools/memhog, 11328 /root/tools/memhog, 11345 ./gpu_burn" in (
        refused("h100_sxm").message
    )


def test_an_h100_is_not_an_h200(box) -> None:  # type: ignore[no-untyped-def]
    box("h100")
    assert "not NVIDIA H200" in refused("h200").message


def test_nvidia_smi_without_a_driver_says_what_to_check(box) -> None:  # type: ignore[no-untyped-def]
    box("h100-nodriver")
    error = refused("h100_sxm")
    assert "couldn't communicate with the NVIDIA driver" in error.message and "lsmod | grep nvidia" in error.message


def test_more_cards_than_present_is_refused(box) -> None:  # type: ignore[no-untyped-def]
    box("b70")
    assert "asked for 2 card(s) but 1 xpu device(s) are visible" in refused("arc_pro_b70", tp=2).message


def test_missing_device_says_what_to_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(BIN))
    monkeypatch.setattr(preflight, "DRI", tmp_path / "no-dri")
    assert "/dev/dri does not exist: the Intel GPU kernel driver is not loaded" in refused("arc_pro_b70").message
    dri = tmp_path / "dri"
    dri.mkdir()
    monkeypatch.setattr(preflight, "DRI", dri)
    assert "has no renderD* node" in refused("arc_pro_b70").message
    node = dri / "renderD128"
    node.write_bytes(b"")
    node.chmod(0)
    if os.access(node, os.R_OK):
        pytest.skip("root reads a file whatever its mode")
    message = refused("arc_pro_b70").message
    assert "is not readable and writable by this user: add it to the" in message and "usermod -aG" in message


def test_xpu_smi_missing_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    dri = tmp_path / "dri"
    dri.mkdir()
    (dri / "renderD128").write_bytes(b"")
    monkeypatch.setattr(preflight, "DRI", dri)
    assert "xpu-smi is not installed" in refused("arc_pro_b70").message


@pytest.mark.parametrize(
    ("heads", "kv", "tp", "ok"),
    [(16, 4, 2, True), (16, 4, 8, True), (16, 4, 3, False), (32, 8, 4, True), (24, 6, 16, False)],
)
def test_tensor_parallel_must_divide_the_attention_heads(heads: int, kv: int, tp: int, ok: bool) -> None:
    config: dict[str, object] = {"text_config": {"num_attention_heads": heads, "num_key_value_heads": kv}}
    if ok:
        preflight.check_tensor_parallel(tp, config, "config.json")
    else:
        with pytest.raises(UserError) as caught:
            preflight.check_tensor_parallel(tp, config, "config.json")
        assert caught.value.field == "TP" and f"TP={tp}" in caught.value.message


def test_min_vllm_version_is_enforced(tmp_path: Path) -> None:
    from catalog.recipes.recipe import Recipe

    recipe = load_file(Recipe, REPO / "data" / "models" / "qwen3.5-9b.yaml")
    preflight.check_vllm_version(recipe, "default", "0.17.0")
    preflight.check_vllm_version(recipe, "default", "0.27.2rc1.dev77")
    preflight.check_vllm_version(recipe, "default", "unknown")  # cannot compare: recorded as is
    with pytest.raises(UserError) as caught:
        preflight.check_vllm_version(recipe, "default", "0.16.1")
    assert "vLLM 0.16.1 is older than the recipe's min_vllm_version 0.17.0" in caught.value.message


def test_device_names_match_whole_words() -> None:
    b70: Hardware = HARDWARE["arc_pro_b70"]
    assert preflight.name_matches(b70, "Intel(R) Arc(TM) Pro B70 Graphics")
    assert not preflight.name_matches(b70, "Intel(R) Arc(TM) Pro B700 Graphics")
    assert not preflight.name_matches(b70, "Intel(R) Arc(TM) Graphics")
    assert preflight.name_matches(HARDWARE["h100_sxm"], "NVIDIA H100 80GB HBM3")
    assert not preflight.name_matches(HARDWARE["h100_sxm"], "NVIDIA H100 PCIe")


def test_the_affinity_mask_picks_the_card_vllm_will_use(box, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    box("b70")
    monkeypatch.setenv("ZE_AFFINITY_MASK", "1")
    assert "xpu-smi lists no Intel GPU" in refused("arc_pro_b70").message  # device 1 does not exist here
    monkeypatch.setenv("ZE_AFFINITY_MASK", "0")
    assert preflight.check_devices(HARDWARE["arc_pro_b70"], 1, 11.0, "fp8").count == 1


def test_hub_weights_record_the_resolved_snapshot_and_its_file_hashes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The hub cache layout: refs/main holds the commit, snapshots/<commit>/ links to blobs."""
    from runner.identity import model_files

    repo = tmp_path / "hub" / "models--RedHatAI--Qwen3.5-4B-quantized.w4a16"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    blobs = repo / "blobs"
    blobs.mkdir()
    (blobs / "aaaa").write_bytes(b"weights")
    (blobs / "bbbb").write_text('{"num_attention_heads": 16}')
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to(blobs / "aaaa")
    (snapshot / "config.json").symlink_to(blobs / "bbbb")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    found = preflight.hub_snapshot("RedHatAI/Qwen3.5-4B-quantized.w4a16")
    assert found is not None and found.revision == commit and found.folder == snapshot
    hashes = {f.name: f.sha256 for f in model_files(found.folder)}
    assert hashes["model.safetensors"] == hashlib.sha256(b"weights").hexdigest()
    assert preflight.read_config(found.folder) == {"num_attention_heads": 16}
    assert preflight.hub_snapshot("RedHatAI/not-downloaded") is None
