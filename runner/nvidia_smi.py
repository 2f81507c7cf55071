"""NVIDIA cards as `nvidia-smi` reports them, and the ones CUDA_VISIBLE_DEVICES leaves vLLM.

Formats (real nvidia-smi 590.48.01 captures on H100 and H200, with and without MIG, are replayed
from tests/runner/smi/; README.md there names them):
- `--query-gpu=index,name,pci.bus_id,memory.total,memory.used,driver_version,uuid
  --format=csv,noheader,nounits`: `0, NVIDIA H200, 00000000:83:00.0, 143771, 0, 590.48.01,
  GPU-...`; the bus id has an 8-digit domain (sysfs writes 4); a value nvidia-smi cannot read is
  bracketed (`[N/A]`).
- `--query-compute-apps=gpu_bus_id,pid,process_name,used_memory`: one row per process, none
  when idle; a process on a MIG slice carries its parent GPU's bus id.
- `-L`: `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`, each MIG slice indented below it:
  `  MIG 3g.40gb     Device  0: (UUID: MIG-...)`.

CUDA_VISIBLE_DEVICES (CUDA programming guide, "CUDA Environment Variables"): comma-separated
indices, GPU UUIDs (a unique prefix is enough) or MIG UUIDs; the first entry that names no
device hides it and every entry after it; an empty value hides every GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from runner.cards import MIB, Device, run_tool

NVIDIA_QUERY = "index,name,pci.bus_id,memory.total,memory.used,driver_version,uuid"
APPS_QUERY = "gpu_bus_id,pid,process_name,used_memory"
_GPU_LINE = re.compile(r"^GPU (\d+): (.+) \(UUID: (GPU-[^)]+)\)\s*$")
_MIG_LINE = re.compile(r"^\s*MIG\s+(\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)")
_PROFILE_GB = re.compile(r"(\d+)gb$")

Run = Callable[[list[str]], Any]


class NvidiaSmiFailed(Exception):
    """nvidia-smi could not reach the driver; the message is its own last line."""


@dataclass(frozen=True)
class MigSlice:
    parent: int  # the GPU's index
    profile: str  # 3g.40gb
    uuid: str  # MIG-...


def read_devices(run: Run = run_tool) -> tuple[list[Device], str | None, list[MigSlice]]:
    """Every GPU nvidia-smi lists, the driver version, and the MIG slices `-L` lists."""
    out = run(["nvidia-smi", f"--query-gpu={NVIDIA_QUERY}", "--format=csv,noheader,nounits"])
    if out.returncode != 0:
        last = (out.stdout or out.stderr).strip().splitlines()[-1:] or ["no output"]
        raise NvidiaSmiFailed(last[0])
    apps = run(["nvidia-smi", f"--query-compute-apps={APPS_QUERY}", "--format=csv,noheader,nounits"])
    by_bus: dict[str, list[str]] = {}
    for line in apps.stdout.splitlines() if apps.returncode == 0 else []:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[1].isdigit():
            by_bus.setdefault(normal_bus(parts[0]), []).append(f"{parts[1]} {parts[2]}")
    devices = []
    driver = None
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not parts[0].isdigit():
            continue
        broken = [p for p in parts if p.startswith("[") or p in ("ERR!", "Unknown Error")]
        driver = parts[5]
        devices.append(
            Device(
                index=int(parts[0]),
                name=parts[1],
                bus_id=parts[2],
                memory_total_mib=_float(parts[3]),
                memory_used_mib=_float(parts[4]),
                health=f"nvidia-smi reports {', '.join(broken)}" if broken else None,
                processes=tuple(by_bus.get(normal_bus(parts[2]), [])),
                uuid=parts[6] if len(parts) > 6 and parts[6].startswith("GPU-") else None,
            )
        )
    listing = run(["nvidia-smi", "-L"])
    return devices, driver, mig_slices(listing.stdout if listing.returncode == 0 else "")


def mig_slices(text: str) -> list[MigSlice]:
    slices = []
    parent: int | None = None
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            parent = int(gpu.group(1))
            continue
        mig = _MIG_LINE.match(line)
        if mig and parent is not None:
            slices.append(MigSlice(parent, mig.group(1), mig.group(3)))
    return slices


def visible(devices: list[Device], slices: list[MigSlice], mask: str | None) -> list[Device]:
    """The GPUs vLLM will see, in its order, as CUDA reads CUDA_VISIBLE_DEVICES."""
    if mask is None:
        return devices
    chosen: list[Device] = []
    for token in mask.split(","):
        token = token.strip()
        device = _named(token, devices, slices)
        if device is None:
            break  # an invalid entry hides itself and every entry after it
        chosen.append(device)
    return chosen


def _named(token: str, devices: list[Device], slices: list[MigSlice]) -> Device | None:
    if token.isdigit():
        return next((d for d in devices if d.index == int(token)), None)
    if token.startswith("MIG-"):
        found = [s for s in slices if s.uuid.startswith(token)]
        parent = next((d for d in devices if len(found) == 1 and d.index == found[0].parent), None)
        return None if parent is None else _slice(parent, found[0])
    if token.startswith("GPU-"):
        matches = [d for d in devices if d.uuid and d.uuid.startswith(token)]
        return matches[0] if len(matches) == 1 else None
    return None


def _slice(parent: Device, mig: MigSlice) -> Device:
    """A MIG slice: its parent's name, PCI address and health; its own memory (the profile's
    size: nvidia-smi's figures are the whole GPU's, its processes can be on any slice)."""
    size = _PROFILE_GB.search(mig.profile)
    return replace(
        parent,
        uuid=mig.uuid,
        mig_profile=mig.profile,
        memory_total_mib=int(size.group(1)) * 1e9 / MIB if size else None,
        memory_used_mib=None,
        processes=(),
    )


def normal_bus(bus_id: str) -> str:
    """`00000000:83:00.0` (nvidia-smi) and `0000:83:00.0` (sysfs) name one card."""
    domain, sep, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):04x}:{rest}" if sep and re.fullmatch(r"[0-9a-f]+", domain) else bus_id.lower()


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
