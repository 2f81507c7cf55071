"""Checks before anything starts: each failure says what is wrong and what to do instead.

The card is read from the vendor tool, never from the datasheet: `xpu-smi` (Intel XPU Manager,
runner/xpu_smi.py) or `nvidia-smi` (runner/nvidia_smi.py) give each device's name, its memory
in use and its health; the processes holding it come from `nvidia-smi --query-compute-apps` or,
on Intel, from the open file descriptors of its render node. The cards checked are the cards the
servers get (`card_selection`, runner/cards.py). docs/measuring.md lists every message below
with its fix; tests/runner/smi/ holds the recorded outputs the tests replay.
"""

from __future__ import annotations

import grp
import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from catalog.errors import UserError
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from runner import nvidia_smi, xpu_smi
from runner.cards import MIB, CardNodes, CardSelection, Device, DeviceReport
from runner.identity import cpu_name
from runner.runtime_probe import RuntimeFacts

__all__ = ["Device", "DeviceReport"]

DEMO_HINT = "on a machine without that device, try MODEL=demo (a tiny model generated locally, served on the CPU)"
DRI = Path("/dev/dri")
PROC = Path("/proc")
# Memory in use on a card with no process this user can see: another user's or container's job.
BUSY_UNSEEN_MIB = 1024
_TRADEMARKS = re.compile(r"\((?:R|TM|C)\)", re.IGNORECASE)


def plain_name(name: str) -> str:
    """`Intel(R) Arc(TM) Pro B70 Graphics` -> `Intel Arc Pro B70 Graphics`."""
    return " ".join(_TRADEMARKS.sub("", name).split())


def name_matches(hardware: Hardware, device_name: str) -> bool:
    """A card is the chosen hardware when its reported name holds one of the hardware's
    `device_names` as whole words (so "Pro B70" never matches "Pro B700", nor "Arc Graphics")."""
    plain = plain_name(device_name).lower()
    return any(re.search(rf"(?<![\w]){re.escape(pattern.lower())}(?![\w])", plain) for pattern in hardware.device_names)


# ---- reading the cards ----


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
    """The cards vLLM will see, in its order (ZE_AFFINITY_MASK / CUDA_VISIBLE_DEVICES honoured)."""
    if platform == "cuda":
        if shutil.which("nvidia-smi") is None:
            raise UserError(
                "nvidia-smi is not installed: install the NVIDIA driver (and the container toolkit for RUNTIME=docker)",
                field="HW",
            )
        try:
            devices, driver, slices = nvidia_smi.read_devices()
        except nvidia_smi.NvidiaSmiFailed as failed:
            raise UserError(
                f"nvidia-smi failed: {failed}; the NVIDIA driver is not loaded or does not match the kernel: "
                "check `lsmod | grep nvidia`, reinstall the driver and reboot",
                field="HW",
            ) from None
        devices = nvidia_smi.visible(devices, slices, os.environ.get("CUDA_VISIBLE_DEVICES"))
        return DeviceReport("cuda", len(devices), devices[0].name if devices else None, driver, devices)
    if platform == "xpu":
        if shutil.which("xpu-smi") is None or not DRI.exists():
            raise UserError(f"no Intel GPU can be read: {missing_xpu_hint()}", field="HW")
        try:
            devices = xpu_smi.read_devices(render_node_holders)
        except xpu_smi.XpuSmiFailed as failed:
            raise UserError(f"`xpu-smi discovery` failed: {failed}; {missing_xpu_hint()}", field="HW") from None
        devices = _affinity(devices, os.environ.get("ZE_AFFINITY_MASK"))
        if not devices:
            raise UserError(f"xpu-smi lists no Intel GPU: {missing_xpu_hint()}", field="HW")
        return DeviceReport("xpu", len(devices), devices[0].name, None, devices)
    return DeviceReport("cpu", 1, cpu_name(), None)


def _affinity(devices: list[Device], mask: str | None) -> list[Device]:
    """The cards ZE_AFFINITY_MASK leaves, in its order: card indices (xpu-smi numbers them as
    Level Zero does in PCI order), a card's tile (`0.0`) standing for its card."""
    if not mask:
        return devices
    by_index = {str(d.index): d for d in devices}
    chosen = []
    for token in mask.split(","):
        device = by_index.get(token.strip().split(".")[0])
        if device is not None and device not in chosen:
            chosen.append(device)
    return chosen


def card_selection(report: DeviceReport, tp: int, container: bool) -> CardSelection | None:
    """The cards preflight checked, as the servers will get them. A container needs each Intel
    card's device nodes, found through /dev/dri/by-path from the PCI address xpu-smi read."""
    if report.platform not in ("xpu", "cuda"):
        return None
    used = tuple(report.devices[:tp])
    variable = "ZE_AFFINITY_MASK" if report.platform == "xpu" else "CUDA_VISIBLE_DEVICES"
    mask = os.environ.get(variable) or None
    nodes: list[CardNodes] = []
    if report.platform == "xpu" and container:
        nodes = [card_nodes(device) for device in used]
    return CardSelection("xpu" if report.platform == "xpu" else "cuda", used, tuple(nodes), mask)


def card_nodes(device: Device) -> CardNodes:
    """`/dev/dri/by-path/pci-<BDF>-card` and `-render`, resolved to the nodes a container is given
    (docker cannot take the by-path name itself: its colons read as host:container:mode)."""
    bus = (device.bus_id or "").lower()
    found = []
    for kind in ("card", "render"):
        link = DRI / "by-path" / f"pci-{bus}-{kind}"
        try:
            found.append(str(link.resolve(strict=True)))
        except OSError:
            raise UserError(
                f"device {device.index} ({bus or 'no PCI address'}) has no {link}: the container could not be "
                "given only this card; check `ls -l /dev/dri/by-path` lists it (udev creates those links)",
                field="HW",
            ) from None
    return CardNodes(bus, found[0], found[1])


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
    free = [d.memory_total_mib * MIB / 1e9 if d.mig_profile and d.memory_total_mib else d.free_gb for d in used]
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


def check_runtime(runtime_python: Path | None, docker_image: str | None) -> None:
    if docker_image is not None:
        if shutil.which("docker") is None:
            raise UserError(
                f"the docker runtime needs docker to run {docker_image}; install it or use RUNTIME=local",
                field="RUNTIME",
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
    check_runtime(runtime_python, docker_image)
    return check_devices(hardware, tp, recipe.variants[variant].vram_minimum_gb, variant)


def check_env_known(
    envs: Mapping[str, Mapping[str, str]], facts: RuntimeFacts, runtime: str, config: Mapping[str, object] | None
) -> list[str]:
    """Every VLLM_* switch an arm sets is one the runtime's vLLM knows: vLLM only logs an unknown
    one ("Unknown vLLM environment variable detected", vllm/platforms/interface.py), so an arm
    recorded as "draft INT4 head" would have run without it. Returns the switches that could not
    be checked (the runtime's envs.py was not readable); the server log is checked for them."""
    for arm, env in envs.items():
        unknown = facts.unknown(sorted(env))
        if unknown:
            raise UserError(
                f"{unknown[0]} (set for arm {arm}) is not a variable {runtime} knows: the server would ignore it and "
                "the arm would be recorded as something it did not run; drop it from the configuration, or measure "
                "on a vLLM that reads it",
                field="CONFIG",
            )
        if _truthy(env.get("VLLM_BATCH_INVARIANT")) and _gated_delta_net(config) and _at_most(facts.version, (0, 32)):
            raise UserError(
                f"VLLM_BATCH_INVARIANT=1 (arm {arm}) is not supported for the model's gated delta-net (linear "
                f'attention) layers in vLLM {facts.version}: the server would stop at startup ("VLLM batch_invariant '
                'mode is not supported for GDN_ATTN", vllm/v1/attention/selector.py); measure without it',
                field="CONFIG",
            )
    if facts.known_envs is not None:
        return []
    return sorted({name for env in envs.values() for name in env if name.startswith("VLLM_")})


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def _gated_delta_net(config: Mapping[str, object] | None) -> bool:
    text = (config or {}).get("text_config", config)
    layer_types = text.get("layer_types") if isinstance(text, dict) else None
    return isinstance(layer_types, list) and "linear_attention" in layer_types


def _at_most(version: str, release: tuple[int, int]) -> bool:
    try:
        return Version(version).release[:2] <= release
    except InvalidVersion:
        return True  # an unknown version is treated as the one whose source was read


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


def hub_cache_root() -> Path:
    """The hub cache huggingface_hub uses: HF_HUB_CACHE (or the older HUGGINGFACE_HUB_CACHE),
    else $HF_HOME/hub (huggingface_hub constants.py); it may lie outside HF_HOME."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


def hub_cache_dir(model_id: str) -> Path:
    return hub_cache_root() / ("models--" + model_id.replace("/", "--"))


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
