"""A measuring host of the fleet: its name, where it keeps things, and the cards it advertises to Ray.

Each host runs `ray start ... --resources="$(python -m runner campaign resources)"`: the cards
preflight reads from `xpu-smi` / `nvidia-smi` (runner/preflight.py), counted per hardware id of
data/hardware.yaml, plus one `measuring_host` so that a host measures one cell at a time. What a
host is told through its environment when `ray start` runs (the Ray workers inherit it):

| variable | default | what |
|---|---|---|
| LLMCAT_FLEET_HOST | the host name | the name progress lines and reports give this host |
| LLMCAT_FLEET_HOME | the checkout | where runs/ (logs, finished attempts) and models/ are kept |
| LLMCAT_VLLM_PYTHON | <checkout>/.venv-vllm/bin/python | the vLLM environment of a local runtime |
| XDG_CONFIG_HOME | ~/.config | where this host's signing key is (catalog/packets/signing.py) |
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from pathlib import Path

from catalog.errors import UserError
from catalog.recipes.hardware import Hardware
from runner import preflight
from runner.fleet.cells import HOST_RESOURCE
from runner.measure import REPO_ROOT

DATA_SUFFIXES = (".yaml", ".yml", ".json")
MAX_DATA_BYTES = 16 * 1024 * 1024


def host_name() -> str:
    return os.environ.get("LLMCAT_FLEET_HOST") or socket.gethostname()


def fleet_home() -> Path:
    return Path(os.environ.get("LLMCAT_FLEET_HOME") or REPO_ROOT)


def vllm_python() -> Path:
    return Path(os.environ.get("LLMCAT_VLLM_PYTHON") or REPO_ROOT / ".venv-vllm" / "bin" / "python").absolute()


def card_resources(hardware: list[Hardware], cpu: bool = False) -> dict[str, float]:
    """This host's cards as Ray resources: per hardware id the healthy visible devices whose name
    is that card's (preflight.name_matches). The CPU stand-in (`cpu_generic`, the demo's) when
    asked for, or when the host has no accelerator at all (a host whose cards are all unhealthy
    advertises none of them, and no stand-in either: it is out of the fleet until repaired)."""
    counts: Counter[str] = Counter()
    seen = 0
    for platform in ("xpu", "cuda"):
        try:
            report = preflight.detect_devices(platform)
        except UserError:
            continue  # no such vendor tool or device here
        seen += len(report.devices)
        candidates = [hw for hw in hardware if hw.platform == platform]
        for device in report.devices:
            match = next((hw for hw in candidates if preflight.name_matches(hw, device.name)), None)
            if match is not None and device.health is None:
                counts[match.id] += 1
    if cpu or not seen:
        counts.update(hw.id for hw in hardware if hw.platform == "cpu")
    return {**{card: float(n) for card, n in sorted(counts.items())}, HOST_RESOURCE: 1.0}


def data_bundle(data: Path) -> dict[str, bytes]:
    """The head's data/ (recipes, overlays, hardware, suites, keys) as relative path -> bytes: every
    host measures from the recipes the head planned with, whatever its own checkout holds."""
    bundle: dict[str, bytes] = {}
    total = 0
    for path in sorted(data.rglob("*")):
        if path.is_file() and path.suffix in DATA_SUFFIXES:
            content = path.read_bytes()
            total += len(content)
            if total > MAX_DATA_BYTES:
                raise UserError(f"holds more than {MAX_DATA_BYTES // 2**20} MB of data files to send", file=data)
            bundle[path.relative_to(data).as_posix()] = content
    return bundle


def unpack(bundle: dict[str, bytes], into: Path) -> Path:
    from catalog.files import write_file

    for relative, content in bundle.items():
        target = into / relative
        if ".." in Path(relative).parts or Path(relative).is_absolute():
            raise UserError(f"data file {relative!r} is outside the data folder", file=into)
        write_file(target, content, durable=False)
    return into
