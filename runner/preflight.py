"""Checks before anything starts: each failure says what is missing and what to do instead."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from catalog.errors import CatalogError
from catalog.hardware import Hardware
from catalog.recipe import Recipe
from runner.identity import cpu_name

DEMO_HINT = "on a machine without that device, try MODEL=demo (a tiny model generated locally, served on the CPU)"


@dataclass(frozen=True)
class DeviceReport:
    platform: str
    count: int
    name: str | None
    driver: str | None


def detect_devices(platform: str) -> DeviceReport:
    if platform == "cuda":
        return _nvidia()
    if platform == "xpu":
        return _intel_xpu()
    return DeviceReport("cpu", 1, cpu_name(), None)


def _nvidia() -> DeviceReport:
    if shutil.which("nvidia-smi") is None:
        return DeviceReport("cuda", 0, None, None)
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = (
        [line.split(", ") for line in out.stdout.strip().splitlines() if line.strip()] if out.returncode == 0 else []
    )
    return DeviceReport("cuda", len(lines), lines[0][0] if lines else None, lines[0][1] if lines else None)


def _intel_xpu() -> DeviceReport:
    render_nodes = sorted(Path("/dev/dri").glob("renderD*")) if Path("/dev/dri").exists() else []
    name = None
    if shutil.which("xpu-smi"):
        out = subprocess.run(["xpu-smi", "discovery"], capture_output=True, text=True, timeout=30)
        name = next((line.split("|")[-2].strip() for line in out.stdout.splitlines() if "Device Name" in line), None)
    return DeviceReport("xpu", len(render_nodes), name, None)


def available_memory_gb() -> float:
    pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return pages / 1e9


def check(
    recipe: Recipe, variant: str, hardware: Hardware, tp: int, runtime_python: Path | None, docker_image: str | None
) -> DeviceReport:
    devices = detect_devices(hardware.platform)
    if devices.count < tp:
        raise CatalogError(
            f"{hardware.name} asked for {tp} card(s) but {devices.count} {hardware.platform} device(s) "
            f"are present; {DEMO_HINT}",
            field="HW",
        )
    need = recipe.variants[variant].vram_minimum_gb
    have = hardware.memory_gb.value * tp if hardware.platform != "cpu" else available_memory_gb()
    if need > have:
        raise CatalogError(
            f"variant {variant!r} needs about {need:g} GB; {tp} x {hardware.name} offers {have:.0f} GB: "
            "pick a smaller variant or more cards (TP=)",
            field="VARIANT",
        )
    if docker_image is not None:
        if shutil.which("docker") is None:
            raise CatalogError(
                f"the docker runtime needs docker to run {docker_image}; install it or use a local vLLM",
                field="RUNTIME",
            )
    elif runtime_python is None or not runtime_python.exists():
        raise CatalogError(
            f"no vLLM environment at {runtime_python}: run `make vllm-env` (CPU build) "
            "or pass VLLM_PYTHON=<python with vllm>",
            field="VLLM_PYTHON",
        )
    return devices


def hub_cache_dir(model_id: str) -> Path:
    root = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    return root / ("models--" + model_id.replace("/", "--"))


def check_weights(model_id: str, model_dir: Path | None) -> None:
    if model_dir is not None:
        if not (model_dir / "config.json").exists():
            raise CatalogError(f"no config.json in {model_dir}: the weights are not there", field="MODEL_DIR")
        return
    if not hub_cache_dir(model_id).exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise CatalogError(
            f"{model_id} is not in the Hugging Face cache and HF_HUB_OFFLINE=1: download it first "
            f"(huggingface-cli download {model_id}) or pass MODEL_DIR=<local folder>",
            field="MODEL",
        )
