"""Intel cards as `xpu-smi` (Intel XPU Manager) reports them: name, PCI address, memory, health.

The JSON forms are read first (`discovery -j`, `discovery -d N -j`, `stats -d N -j`,
`health -d N -j`): xpu-smi 2.x prints its tables without borders, per tile and cut at 50
characters (`Tile 0: avg: 211, min: 211, max: 211, curren...`), so its text is lossy. The
tables are the fallback, for a 1.x xpu-smi whose JSON this reader does not know: bordered
(`| GPU Memory Used (MiB) | 24 |`, `Status: Ok`) or 2.x borderless. Every layout read here is
recorded in tests/runner/smi/ (README.md names the source of each):

- 2.x (intel/xpumanager v2.0.0, `ial/cmn/cmd_discovery.cpp`, `cmd_stats.cpp`, `cmd_health.cpp`):
  `discovery -j` is `{"device_list": [{"device_id": 0, "device_name", "pci_bdf_address",
  "drm_device", ...}]}`; `discovery -d N -j` has `memory_physical_size_byte` (an integer) and
  `memory_free_size_byte` (a string); `stats -d N -j` has `memory.used_mib.tile_N.current`
  (MiB); `health -d N -j` has one object per component, each with a `status` of OK, Warning,
  Critical or Unknown. A component check that errs stops `health` (exit 1, partial output):
  the components it did not reach are asked one by one (`-c K`).
- 1.x (branch v1.3.x): the same discovery keys (`memory_physical_size_byte` a string); stats
  `device_level[]` entries `{"metrics_type": "XPUM_STATS_MEMORY_USED", "value": MiB}`
  (`cli/src/core_stub/statistics_stub.cpp` scales it by 1048576).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.cards import MIB, Device, run_tool

# `health -c K` component ids (intel/xpumanager ial/cmn/cmd_health.h healthSubCmdType) and the
# JSON key each answers with; a component whose check errs leaves the ones after it unread.
HEALTH_COMPONENTS = {
    1: "core_temperature",
    2: "memory_temperature",
    3: "power_health",
    4: "memory_health",
    6: "frequency_health",
}
HEALTHY = ("ok", "unknown")  # Unknown: not monitored on this card
_CELL_GAP = re.compile(r"\s{2,}")


@dataclass(frozen=True)
class Listed:
    index: int
    name: str
    bus_id: str | None
    drm_card: str | None


class XpuSmiFailed(Exception):
    """`xpu-smi discovery` itself failed; the message is its own last words."""


Run = Callable[[list[str]], Any]


def read_devices(render_holders: Callable[[str | None], list[str]], run: Run = run_tool) -> list[Device]:
    """Every card xpu-smi lists, with its memory and health read from the tool."""
    devices = []
    for listed in list_devices(run):
        index = str(listed.index)
        detail = _json(run(["xpu-smi", "discovery", "-d", index, "-j"]))
        stats = _json(run(["xpu-smi", "stats", "-d", index, "-j"]))
        total = _physical_mib(detail)
        used = _used_mib(stats)
        if used is None and total is not None:
            used = _used_from_free(detail, total)
        table: dict[str, str] | None = None
        if total is None or used is None:
            table = table_values(run(["xpu-smi", "discovery", "-d", index]).stdout)
            table.update(table_values(run(["xpu-smi", "stats", "-d", index]).stdout))
            total = total if total is not None else mib(table.get("Memory Physical Size"))
            used = used if used is not None else mib(table.get("GPU Memory Used (MiB)"))
        health, unread = read_health(listed.index, run)
        bus = listed.bus_id or (detail or {}).get("pci_bdf_address") or (table or {}).get("PCI BDF Address")
        devices.append(
            Device(
                index=listed.index,
                name=listed.name,
                bus_id=bus,
                memory_total_mib=total,
                memory_used_mib=used,
                health=health,
                processes=tuple(render_holders(bus)),
                health_unread=unread,
            )
        )
    return devices


def list_devices(run: Run = run_tool) -> list[Listed]:
    """`discovery -j`'s device list, else the discovery table's rows."""
    answer = run(["xpu-smi", "discovery", "-j"])
    loaded = _json(answer)
    if loaded is not None and "device_list" in loaded:
        return [
            Listed(
                int(d["device_id"]),
                str(d.get("device_name") or "unknown device"),
                d.get("pci_bdf_address"),
                d.get("drm_device"),
            )
            for d in loaded["device_list"] or []
            if isinstance(d, dict) and str(d.get("device_id", "")).isdigit()
        ]
    table = run(["xpu-smi", "discovery"])
    if table.returncode != 0:
        raise XpuSmiFailed((table.stderr or table.stdout).strip()[-200:])
    return _discovery_rows(table.stdout)


def read_health(index: int, run: Run = run_tool) -> tuple[str | None, tuple[str, ...]]:
    """What is not healthy ("memory_health: Critical; ..."), or None; and the components that
    could not be checked. A check that errs stops `xpu-smi health` early (2.x: exit 1, stdout
    holds the components before it): each component it did not reach is asked for alone."""
    answer = run(["xpu-smi", "health", "-d", str(index), "-j"])
    loaded = _json(answer)
    if loaded is None:
        table = run(["xpu-smi", "health", "-d", str(index)])
        return (health_from_table(table.stdout) if table.returncode == 0 else None), ()
    statuses = _statuses(loaded)
    unread = []
    if answer.returncode != 0:
        for component, key in HEALTH_COMPONENTS.items():
            if key in statuses:
                continue
            alone = _json(run(["xpu-smi", "health", "-d", str(index), "-c", str(component), "-j"]))
            found = _statuses(alone or {})
            if key in found:
                statuses[key] = found[key]
            else:
                unread.append(key)
    bad = [f"{key}: {status}" for key, status in statuses.items() if status.lower() not in HEALTHY]
    return "; ".join(bad) or None, tuple(unread)


def _statuses(loaded: dict[str, Any]) -> dict[str, str]:
    """`{"memory_health": {"status": "Critical", ...}, ...}`: each component's status word."""
    return {
        key: str(value["status"])
        for key, value in loaded.items()
        if isinstance(value, dict) and isinstance(value.get("status"), str)
    }


def _json(answer: Any) -> dict[str, Any] | None:
    """The JSON object a command printed; None when it printed none (an old xpu-smi, an error).
    A partial answer (exit 1 with the components checked so far) is still read."""
    if answer is None or not answer.stdout.strip():
        return None
    try:
        loaded = json.loads(answer.stdout)
    except ValueError:
        return None
    if isinstance(loaded, list) and len(loaded) == 1:  # stats of several devices: a list
        loaded = loaded[0]
    return loaded if isinstance(loaded, dict) and "error" not in loaded else None


def _physical_mib(detail: dict[str, Any] | None) -> float | None:
    value = (detail or {}).get("memory_physical_size_byte")
    number = _number(value)
    return number / MIB if number else None


def _used_from_free(detail: dict[str, Any] | None, total_mib: float) -> float | None:
    free = _number((detail or {}).get("memory_free_size_byte"))
    return total_mib - free / MIB if free else None  # "0" means xpu-smi could not read it


def _used_mib(stats: dict[str, Any] | None) -> float | None:
    """2.x: memory.used_mib per tile (summed: one card's tiles share its memory budget);
    1.x: the XPUM_STATS_MEMORY_USED entry of device_level."""
    if not stats:
        return None
    tiles = (stats.get("memory") or {}).get("used_mib") if isinstance(stats.get("memory"), dict) else None
    if isinstance(tiles, dict) and tiles:
        values = [_number(t.get("current")) if isinstance(t, dict) else _number(t) for t in tiles.values()]
        if all(v is not None for v in values):
            return float(sum(v for v in values if v is not None))
    for entry in stats.get("device_level") or []:
        if isinstance(entry, dict) and entry.get("metrics_type") == "XPUM_STATS_MEMORY_USED":
            return _number(entry.get("value"))
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


# ---- the tables (1.x bordered; 2.x borderless, cells two spaces apart) ----


def cells(line: str) -> list[str]:
    """A table line's cells: between `|` in a 1.x table, two or more spaces apart in a 2.x one."""
    stripped = line.strip()
    if "|" in stripped:
        return [c.strip() for c in stripped.strip("|").split("|")]
    return [c for c in _CELL_GAP.split(stripped) if c]


def table_values(text: str) -> dict[str, str]:
    """`Key: value` cells and `Key | value` rows of an xpu-smi table, first occurrence wins."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        row = cells(line)
        for cell in row:
            key, colon, value = cell.partition(": ")
            if colon and key and key not in values:
                values[key] = value.strip()
        if len(row) == 2 and row[0] and ":" not in row[0] and row[0] not in values:
            values[row[0]] = row[1]
    return values


def _discovery_rows(text: str) -> list[Listed]:
    blocks: list[dict[str, str]] = []
    for line in text.splitlines():
        row = cells(line)
        if row and row[0].isdigit() and len(row) == 2:
            blocks.append({"index": row[0]})
        if blocks and row:
            key, colon, value = row[-1].partition(": ")
            if colon:
                blocks[-1].setdefault(key.strip(), value.strip())
    return [
        Listed(int(b["index"]), b.get("Device Name") or "unknown device", b.get("PCI BDF Address"), b.get("DRM Device"))
        for b in blocks
    ]


def mib(value: str | None) -> float | None:
    """`32656.00 MiB`, `24`, or a 2.x per-tile cell (`Tile 0: avg: 24, ..., current: 24`)."""
    if not value:
        return None
    current = re.search(r"current:\s*([\d.]+)", value)
    average = re.search(r"avg:\s*([\d.]+)", value)
    if current or average:
        return float((current or average).group(1))  # type: ignore[union-attr]
    match = re.match(r"([\d.]+)\s*(MiB|GiB)?", value)
    if not match:
        return None
    number = float(match.group(1))
    return number * 1024 if match.group(2) == "GiB" else number


def health_from_table(text: str) -> str | None:
    """The components a health table does not call OK: 1.x rows `| 4. GPU Memory | Status: Ok |`,
    2.x a `[ memory_health ]` line then `status   Critical`."""
    bad = []
    component = ""
    for line in text.splitlines():
        row = cells(line)
        if len(row) == 1 and row[0].startswith("[") and row[0].endswith("]"):
            component = row[0].strip("[] ")
            continue
        if len(row) != 2:
            continue
        status = re.match(r"Status:\s*(\S+)", row[1])
        if row[0].lower() == "status":
            word = row[1].split()[0] if row[1].split() else ""
        elif status:
            if row[0]:
                component = re.sub(r"^\d+\.\s*", "", row[0])
            word = status.group(1)
        else:
            if row[0] and not row[0][0].islower():
                component = re.sub(r"^\d+\.\s*", "", row[0])
            continue
        if word and word.lower() not in HEALTHY:
            bad.append(f"{component}: {word}")
    return "; ".join(bad) or None
