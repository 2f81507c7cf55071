"""The cards preflight read, and the ones a campaign's servers are given.

`Device` is one card as its vendor tool reported it; `CardSelection` is the cards preflight
checked, handed to the runtime so a server runs on exactly those: a local server through the
selection variable vLLM's platform reads (ZE_AFFINITY_MASK on XPU, CUDA_VISIBLE_DEVICES on CUDA),
a container through its device flags, so it cannot see any other card.

Numbering. xpu-smi 2.x numbers cards in PCI order (intel/xpumanager `hal/core/driver.cpp` sets
ZE_ENABLE_PCI_ID_DEVICE_ORDER=1 before it enumerates); nvidia-smi numbers in PCI bus order while
CUDA enumerates fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA programming guide,
"CUDA Environment Variables"). Every server gets the variable that makes its numbering the tool's.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from catalog.errors import UserError

MIB = 1024 * 1024
SMI_TIMEOUT_S = 30
# The selection variables: a vendor tool run with one set would number only the cards it leaves
# (Level Zero applies ZE_AFFINITY_MASK to enumeration); the runner applies them itself.
SELECTION_VARIABLES = ("ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES")
# What vLLM's own runtime must be told so its device numbering is the vendor tool's.
XPU_ORDER = {"ZE_ENABLE_PCI_ID_DEVICE_ORDER": "1"}
CUDA_ORDER = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
CONTAINER_BY_PATH = "/dev/dri/by-path"


def run_tool(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """A vendor tool's answer, with every card visible to it; a tool that hangs is named."""
    env = {k: v for k, v in os.environ.items() if k not in SELECTION_VARIABLES}
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=SMI_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"`{' '.join(argv)}` did not answer within {SMI_TIMEOUT_S} s: the driver may be hung; reboot the host",
            field="HW",
        ) from None


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    bus_id: str | None = None
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    health: str | None = None  # None: healthy, or not reported; else what is wrong
    processes: tuple[str, ...] = ()  # "pid name" of processes holding the card
    uuid: str | None = None  # nvidia-smi's GPU-... (or MIG-... for a MIG slice)
    mig_profile: str | None = None  # a MIG slice: its profile (3g.40gb); memory figures are the slice's
    health_unread: tuple[str, ...] = ()  # health components the tool could not check on this card

    @property
    def free_gb(self) -> float | None:
        if self.memory_total_mib is None or self.memory_used_mib is None:
            return None
        return (self.memory_total_mib - self.memory_used_mib) * MIB / 1e9


@dataclass(frozen=True)
class DeviceReport:
    platform: str
    count: int
    name: str | None
    driver: str | None
    devices: list[Device] = field(default_factory=list)


@dataclass(frozen=True)
class CardNodes:
    """An Intel card's two device nodes on the host, and its PCI address (their by-path name)."""

    bus_id: str
    card: str  # /dev/dri/card1
    render: str  # /dev/dri/renderD128


@dataclass(frozen=True)
class CardSelection:
    """The cards one server runs on: the ones preflight checked, in vLLM's order.

    `mask`: the selection variable's value as the user set it (kept for a local server, which
    numbers cards as the host does); None: the runner chose the first cards."""

    platform: Literal["xpu", "cuda"]
    devices: tuple[Device, ...]
    nodes: tuple[CardNodes, ...] = ()  # XPU: each card's nodes, for a container's --device flags
    mask: str | None = None

    @property
    def variable(self) -> str:
        return "ZE_AFFINITY_MASK" if self.platform == "xpu" else "CUDA_VISIBLE_DEVICES"

    def _ids(self) -> list[str]:
        """How the cards are named to the platform: CUDA by UUID (stable across hosts and
        containers, and the only name of a MIG slice), XPU by index."""
        if self.platform == "cuda":
            return [d.uuid or str(d.index) for d in self.devices]
        return [str(d.index) for d in self.devices]

    def local_env(self) -> dict[str, str]:
        """For a server started on this host: the host's numbering, the chosen cards."""
        order = XPU_ORDER if self.platform == "xpu" else CUDA_ORDER
        return {**order, self.variable: self.mask if self.mask is not None else ",".join(self._ids())}

    def container_env(self) -> dict[str, str]:
        """For a container given only these cards: on XPU the container numbers its cards from 0;
        CUDA UUIDs name the same cards inside and out."""
        if self.platform == "xpu":
            return {**XPU_ORDER, self.variable: ",".join(str(i) for i in range(len(self.devices)))}
        return {**CUDA_ORDER, self.variable: ",".join(self._ids())}

    def docker_options(self) -> list[str]:
        """Only these cards: each Intel card's card and render node (never `--device /dev/dri`
        nor `--privileged`, which give every card), or `--gpus "device=..."` (quoted: docker reads
        the value as CSV, and `device=0,2` unquoted would be device 0 and a count of 2;
        docker/cli opts/gpus.go)."""
        if self.platform == "cuda":
            return ["--gpus", '"device=' + ",".join(self._ids()) + '"']
        options: list[str] = []
        for nodes in self.nodes:
            options += ["--device", nodes.card, "--device", nodes.render]
        return options

    def by_path_links(self) -> dict[str, str]:
        """The /dev/dri/by-path entries of the chosen cards only (name: relative target), as udev
        makes them (systemd rules.d/60-drm.rules): Level Zero and oneCCL find cards there."""
        links: dict[str, str] = {}
        for nodes in self.nodes:
            links[f"pci-{nodes.bus_id}-card"] = "../" + nodes.card.rsplit("/", 1)[-1]
            links[f"pci-{nodes.bus_id}-render"] = "../" + nodes.render.rsplit("/", 1)[-1]
        return links
