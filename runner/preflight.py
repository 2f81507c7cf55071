"""Checks before anything starts: each failure says what is wrong and what to do instead.

The card is read from the vendor tool, never from the datasheet: `xpu-smi` (Intel XPU Manager)
or `nvidia-smi` give each device's name, its memory in use and its health; the processes holding
it come from `nvidia-smi --query-compute-apps` or, on Intel, from the open file descriptors of
its render node. docs/measuring.md lists every message below with its fix.

Formats parsed (recorded outputs in tests/runner/smi/ replay them):
- `xpu-smi discovery` / `discovery -d N` / `stats -d N` / `health -d N`: the bordered tables of
  intel/xpumanager doc/smi_user_guide.md ("Device Name: ...", "PCI BDF Address: ...", "Memory
  Physical Size: 32768.00 MiB", "GPU Memory Used (MiB) | 24", "Status: Ok").
- `nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,memory.used,driver_version
  --format=csv,noheader,nounits` and `--query-compute-apps=gpu_bus_id,pid,process_name,used_memory`.
"""

from __future__ import annotations

import grp
import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from catalog.errors import UserError
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from runner.identity import cpu_name

DEMO_HINT = "on a machine without that device, try MODEL=demo (a tiny model generated locally, served on the CPU)"
DRI = Path("/dev/dri")
PROC = Path("/proc")
SMI_TIMEOUT_S = 30
MIB = 1024 * 1024
# Memory in use on a card with no process this user can see: another user's or container's job.
BUSY_UNSEEN_MIB = 1024
NVIDIA_QUERY = "index,name,pci.bus_id,memory.total,memory.used,driver_version"
_TRADEMARKS = re.compile(r"\((?:R|TM|C)\)", re.IGNORECASE)


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    bus_id: str | None = None
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    health: str | None = None  # None: healthy, or not reported; else what is wrong
    processes: tuple[str, ...] = ()  # "pid name" of processes holding the card

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


def plain_name(name: str) -> str:
    """`Intel(R) Arc(TM) Pro B70 Graphics` -> `Intel Arc Pro B70 Graphics`."""
    return " ".join(_TRADEMARKS.sub("", name).split())


def name_matches(hardware: Hardware, device_name: str) -> bool:
    """A card is the chosen hardware when its reported name holds one of the hardware's
    `device_names` as whole words (so "Pro B70" never matches "Pro B700", nor "Arc Graphics")."""
    plain = plain_name(device_name).lower()
    return any(re.search(rf"(?<![\w]){re.escape(pattern.lower())}(?![\w])", plain) for pattern in hardware.device_names)


# ---- reading the cards ----


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UserError(
            f"`{' '.join(argv)}` did not answer within {SMI_TIMEOUT_S} s: the driver may be hung; reboot the host",
            field="HW",
        ) from None


def _table_values(text: str) -> dict[str, str]:
    """`| Key: value |` and `| Key | value |` rows of an xpu-smi table, first occurrence wins."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for cell in cells:
            key, colon, value = cell.partition(": ")
            if colon and key and key not in values:
                values[key] = value.strip()
        if len(cells) == 2 and cells[0] and ":" not in cells[0] and cells[0] not in values:
            values[cells[0]] = cells[1]
    return values


def _xpu_devices() -> list[Device]:
    out = _run(["xpu-smi", "discovery"])
    if out.returncode != 0:
        raise UserError(
            f"`xpu-smi discovery` failed: {(out.stderr or out.stdout).strip()[-200:]}; " + missing_xpu_hint(),
            field="HW",
        )
    devices = []
    current: dict[str, str] = {}
    blocks: list[dict[str, str]] = []
    for line in out.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].isdigit():
            current = {"index": cells[0]}
            blocks.append(current)
        if len(cells) == 2 and current:
            key, colon, value = cells[1].partition(": ")
            if colon:
                current.setdefault(key.strip(), value.strip())
    for block in blocks:
        index = int(block["index"])
        detail = _table_values(_run(["xpu-smi", "discovery", "-d", str(index)]).stdout)
        stats = _table_values(_run(["xpu-smi", "stats", "-d", str(index)]).stdout)
        health = _run(["xpu-smi", "health", "-d", str(index)])
        bus = block.get("PCI BDF Address") or detail.get("PCI BDF Address")
        devices.append(
            Device(
                index=index,
                name=block.get("Device Name") or detail.get("Device Name") or "unknown device",
                bus_id=bus,
                memory_total_mib=_mib(detail.get("Memory Physical Size")),
                memory_used_mib=_mib(stats.get("GPU Memory Used (MiB)")),
                health=_xpu_health(health.stdout) if health.returncode == 0 else None,
                processes=tuple(render_node_holders(bus)),
            )
        )
    return devices


def _mib(value: str | None) -> float | None:
    if not value:
        return None
    match = re.match(r"([\d.]+)\s*(MiB|GiB)?", value)
    if not match:
        return None
    number = float(match.group(1))
    return number * 1024 if match.group(2) == "GiB" else number


def _xpu_health(text: str) -> str | None:
    """The components `xpu-smi health` does not call Ok (Unknown: not monitored on this card)."""
    bad = []
    component = ""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2:
            continue
        if cells[0]:
            component = re.sub(r"^\d+\.\s*", "", cells[0])
        status = re.match(r"Status:\s*(\S+)", cells[1])
        if status and status.group(1).lower() not in ("ok", "unknown"):
            bad.append(f"{component}: {status.group(1)}")
    return "; ".join(bad) or None


def render_node_holders(bus_id: str | None) -> list[str]:
    """Processes with the card's render node open (what `fuser /dev/dri/renderD128` reports).
    Other users' processes are visible only to root; xpu-smi's memory in use covers those."""
    if not bus_id:
        return []
    link = DRI / "by-path" / f"pci-{bus_id.lower()}-render"
    try:
        node = link.resolve(strict=True)
    except OSError:
        return []
    holders = []
    own = os.getpid()
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if Path(os.readlink(fd)) == node:
                    comm = (entry / "comm").read_text().strip()
                    holders.append(f"{entry.name} {comm}")
                    break
            except OSError:
                continue
    return holders


def _nvidia_devices() -> tuple[list[Device], str | None]:
    out = _run(["nvidia-smi", f"--query-gpu={NVIDIA_QUERY}", "--format=csv,noheader,nounits"])
    if out.returncode != 0:
        raise UserError(
            f"nvidia-smi failed: {(out.stdout or out.stderr).strip().splitlines()[-1:] or ['no output']}; "
            "the NVIDIA driver is not loaded or does not match the kernel: check `lsmod | grep nvidia`, "
            "reinstall the driver and reboot",
            field="HW",
        )
    apps = _run(
        ["nvidia-smi", "--query-compute-apps=gpu_bus_id,pid,process_name,used_memory", "--format=csv,noheader,nounits"]
    )
    by_bus: dict[str, list[str]] = {}
    for line in apps.stdout.splitlines() if apps.returncode == 0 else []:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[1].isdigit():
            by_bus.setdefault(parts[0].lower(), []).append(f"{parts[1]} {parts[2]}")
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
                processes=tuple(by_bus.get(parts[2].lower(), [])),
            )
        )
    return devices, driver


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _visible(devices: list[Device], variable: str) -> list[Device]:
    """The devices vLLM will see, in its order: ZE_AFFINITY_MASK / CUDA_VISIBLE_DEVICES honoured."""
    mask = os.environ.get(variable)
    if not mask:
        return devices
    by_index = {str(d.index): d for d in devices}
    by_bus = {(d.bus_id or "").lower(): d for d in devices}
    chosen = []
    for token in mask.split(","):
        token = token.strip().split(".")[0]  # ZE_AFFINITY_MASK may name a tile: 0.0
        device = by_index.get(token) or by_bus.get(token.lower())
        if device is not None:
            chosen.append(device)
    return chosen


def missing_xpu_hint() -> str:
    """What to check when no Intel card can be read, in the order a lab would check it."""
    if not DRI.exists():
        return (
            "/dev/dri does not exist: the Intel GPU kernel driver is not loaded (check `lspci | grep -i vga` "
            "shows the card, `lsmod | grep -E '^xe|^i915'`, and install a kernel with the xe driver, 6.11 or newer "
            "for Battlemage)"
        )
    nodes = sorted(DRI.glob("renderD*"))
    if not nodes:
        return "/dev/dri has no renderD* node: the driver did not bind the card; check `dmesg | grep -iE 'xe|i915'`"
    unreadable = [n for n in nodes if not os.access(n, os.R_OK | os.W_OK)]
    if unreadable:
        try:
            group = grp.getgrgid(os.stat(unreadable[0]).st_gid).gr_name
        except (KeyError, OSError):
            group = "render"
        return (
            f"{unreadable[0]} is not readable and writable by this user: add it to the {group} group "
            f"(`sudo usermod -aG {group} $USER`) and log in again"
        )
    if shutil.which("xpu-smi") is None:
        return (
            "xpu-smi is not installed: install Intel XPU Manager's xpu-smi (the runner reads each card's name, "
            "free memory and health from it)"
        )
    return "xpu-smi lists no device: check the compute runtime (Level Zero) is installed, `clinfo -l` lists the card"


def detect_devices(platform: str) -> DeviceReport:
    if platform == "cuda":
        if shutil.which("nvidia-smi") is None:
            raise UserError(
                "nvidia-smi is not installed: install the NVIDIA driver (and the container toolkit for RUNTIME=docker)",
                field="HW",
            )
        devices, driver = _nvidia_devices()
        devices = _visible(devices, "CUDA_VISIBLE_DEVICES")
        return DeviceReport("cuda", len(devices), devices[0].name if devices else None, driver, devices)
    if platform == "xpu":
        if shutil.which("xpu-smi") is None or not DRI.exists():
            raise UserError(f"no Intel GPU can be read: {missing_xpu_hint()}", field="HW")
        devices = _visible(_xpu_devices(), "ZE_AFFINITY_MASK")
        if not devices:
            raise UserError(f"xpu-smi lists no Intel GPU: {missing_xpu_hint()}", field="HW")
        return DeviceReport("xpu", len(devices), devices[0].name, None, devices)
    return DeviceReport("cpu", 1, cpu_name(), None)


# ---- the checks ----


def check_devices(hardware: Hardware, tp: int, need_gb: float, variant: str) -> DeviceReport:
    """The first `tp` cards vLLM will use are the chosen hardware, healthy, idle, with room."""
    report = detect_devices(hardware.platform)
    if hardware.platform == "cpu":
        have = available_memory_gb()
        if need_gb > have:
            raise UserError(
                f"variant {variant!r} needs about {need_gb:g} GB; this host has {have:.1f} GB available",
                field="VARIANT",
            )
        return report
    devices = report.devices
    if len(devices) < tp:
        raise UserError(
            f"{hardware.name} asked for {tp} card(s) but {len(devices)} {hardware.platform} device(s) are visible; "
            f"{DEMO_HINT}",
            field="HW",
        )
    used = devices[:tp]
    variable = "ZE_AFFINITY_MASK" if hardware.platform == "xpu" else "CUDA_VISIBLE_DEVICES"
    for device in used:
        if not name_matches(hardware, device.name):
            others = [d for d in devices if name_matches(hardware, d.name)]
            integrated = hardware.platform == "xpu" and not re.search(
                r"\bB\d{2,3}\b|\bA\d{3}\b", plain_name(device.name)
            )
            what = " (an integrated GPU, not an Arc Pro card)" if integrated else ""
            fix = (
                f"set {variable}={','.join(str(d.index) for d in others[:tp])} so vLLM uses the {hardware.name}"
                if len(others) >= tp
                else f"pass the HW= that names this card (see data/hardware.yaml), or run on a {hardware.name}"
            )
            raise UserError(
                f"device {device.index} is {plain_name(device.name)}{what}, not {hardware.name}: {fix}", field="HW"
            )
    for device in used:
        if device.health:
            raise UserError(
                f"device {device.index} ({plain_name(device.name)}) is not healthy: {device.health}; "
                "reset the card or reboot before measuring",
                field="HW",
            )
    for device in used:
        if device.processes:
            raise UserError(
                f"device {device.index} is in use by {', '.join(device.processes)}: stop it first "
                "(a measurement needs the card to itself)",
                field="HW",
            )
    free = [d.free_gb for d in used]
    if any(f is None for f in free):
        raise UserError(
            f"cannot read the free memory of device(s) {', '.join(str(d.index) for d in used)} "
            f"from {'xpu-smi' if hardware.platform == 'xpu' else 'nvidia-smi'}: update it, or run it as root once "
            "to check it reports memory",
            field="HW",
        )
    have = sum(f for f in free if f is not None)
    in_use = sum(d.memory_used_mib or 0 for d in used)
    if need_gb > have:
        taken = f" ({in_use:.0f} MiB already in use)" if in_use > BUSY_UNSEEN_MIB else ""
        raise UserError(
            f"variant {variant!r} needs about {need_gb:g} GB; {tp} x {plain_name(used[0].name)} have {have:.1f} GB "
            f"free{taken}: pick a smaller variant, more cards (TP=), or free the memory",
            field="VARIANT",
        )
    for device in used:
        if device.memory_used_mib is not None and device.memory_used_mib > BUSY_UNSEEN_MIB:
            raise UserError(
                f"device {device.index} already has {device.memory_used_mib:.0f} MiB in use by a process this user "
                "cannot see (another user's job or a container: `docker ps`, `sudo xpu-smi ps` or `sudo fuser -v "
                "/dev/dri/renderD*`): stop it first",
                field="HW",
            )
    return report


def check_runtime(runtime_python: Path | None, docker_image: str | None, platform: str = "cpu") -> None:
    """The runtime is there: docker for an image, else a vLLM environment's python. On a GPU card
    the CPU build `make vllm-env` installs cannot serve: the recipe's image is the way there."""
    if docker_image is not None:
        if shutil.which("docker") is None:
            raise UserError(
                f"the docker runtime needs docker to run {docker_image}; install it or use RUNTIME=local",
                field="RUNTIME",
            )
    elif (runtime_python is None or not runtime_python.exists()) and platform != "cpu":
        raise UserError(
            f"no vLLM environment at {runtime_python}: on a {platform.upper()} card use the recipe's image "
            f"(RUNTIME=docker), or VLLM_PYTHON=<python with a {platform.upper()} build of vLLM>; "
            "`make vllm-env` installs the CPU build only",
            field="VLLM_PYTHON",
        )
    elif runtime_python is None or not runtime_python.exists():
        raise UserError(
            f"no vLLM environment at {runtime_python}: run `make vllm-env` (CPU build) "
            "or pass VLLM_PYTHON=<python with vllm>",
            field="VLLM_PYTHON",
        )


def check(
    recipe: Recipe, variant: str, hardware: Hardware, tp: int, runtime_python: Path | None, docker_image: str | None
) -> DeviceReport:
    """Every check that needs no weights and no runtime version (those come after)."""
    check_runtime(runtime_python, docker_image, hardware.platform)
    return check_devices(hardware, tp, recipe.variants[variant].vram_minimum_gb, variant)


def required_vllm(recipe: Recipe, variant: str) -> str | None:
    return recipe.variants[variant].min_vllm_version or recipe.model.min_vllm_version


def check_vllm_version(recipe: Recipe, variant: str, version: str) -> None:
    """The recipe's min_vllm_version (the variant's, else the model's) against the runtime's."""
    wanted = required_vllm(recipe, variant)
    if not wanted:
        return
    try:
        have, need = Version(version), Version(wanted)
    except InvalidVersion:
        return  # an unknown version ("unknown", a git describe) cannot be compared: recorded as is
    if have.release < need.release:
        raise UserError(
            f"vLLM {version} is older than the recipe's min_vllm_version {wanted}: use a newer image or install",
            field="RUNTIME",
        )


def check_tensor_parallel(tp: int, config: dict[str, object] | None, source: str) -> None:
    """vLLM splits attention heads across cards: TP must divide them (and the KV heads, or be a
    multiple of them)."""
    if tp == 1 or not config:
        return
    text = config.get("text_config", config)
    if not isinstance(text, dict):
        return
    heads = text.get("num_attention_heads")
    kv = text.get("num_key_value_heads") or heads
    if isinstance(heads, int) and heads % tp:
        divisors = [n for n in range(1, heads + 1) if heads % n == 0 and n <= 16]
        raise UserError(
            f"TP={tp} does not divide the model's {heads} attention heads ({source}): use TP="
            + " or ".join(str(d) for d in divisors),
            field="TP",
        )
    if isinstance(kv, int) and kv % tp and tp % kv:
        raise UserError(
            f"TP={tp} and the model's {kv} KV heads neither divide nor are a multiple of each other ({source})",
            field="TP",
        )


def available_memory_gb() -> float:
    pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return pages / 1e9


# ---- weights ----


def hub_cache_dir(model_id: str) -> Path:
    root = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    return root / ("models--" + model_id.replace("/", "--"))


@dataclass(frozen=True)
class HubSnapshot:
    revision: str  # the commit the hub cache resolved `main` (or the pinned ref) to
    folder: Path


def hub_snapshot(model_id: str, ref: str = "main") -> HubSnapshot | None:
    """The snapshot the server will load from the hub cache, when it is there."""
    repo = hub_cache_dir(model_id)
    ref_file = repo / "refs" / ref
    try:
        revision = ref_file.read_text().strip()
    except OSError:
        snapshots = sorted((repo / "snapshots").glob("*")) if (repo / "snapshots").exists() else []
        if len(snapshots) != 1:
            return None
        revision = snapshots[0].name
    folder = repo / "snapshots" / revision
    return HubSnapshot(revision, folder) if folder.is_dir() else None


def check_weights(model_id: str, model_dir: Path | None) -> None:
    if model_dir is not None:
        if not (model_dir / "config.json").exists():
            raise UserError(f"no config.json in {model_dir}: the weights are not there", field="MODEL_DIR")
        return
    if not hub_cache_dir(model_id).exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UserError(
            f"{model_id} is not in the Hugging Face cache and HF_HUB_OFFLINE=1: download it first "
            f"(huggingface-cli download {model_id}) or pass MODEL_DIR=<local folder>",
            field="MODEL",
        )


def read_config(folder: Path | None) -> dict[str, object] | None:
    if folder is None:
        return None
    try:
        loaded = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
