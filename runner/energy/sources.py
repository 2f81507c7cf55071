"""Where a card's power and energy counter are read from, and how each tool's output is parsed.

Intel (platform xpu):
- power: `xpu-smi dump -d N --metrics 1 --loop-ms MS` (xpu-smi 2.x, intel/xpumanager v2.0.0
  `ial/cmn/cmd_dump.cpp`: 2.x takes `--metrics/--interval/--number/--loop-ms`; 1.x's
  `-m/-i/-n` exit 1 there). Metric 1 is `power.draw`, the *card* power domain, in W with two
  decimals. Rows are `Timestamp, DeviceId, power.draw (W)` then `09:20:42.004, 0, 31.86`: the
  timestamp is UTC `HH:MM:SS.mmm` (`std::format` of `system_clock::now()`; 1.x printed local time
  and named the column `GPU Power (W)`). A value it cannot read is `N/A`. Output is space-aligned
  when *stdin* is a terminal, so the tool runs with stdin closed.
- counter: the kernel's hwmon `energy1_input` of the card (`xe`, or `i915` on older kernels):
  "Card energy input of device in microjoules" (Linux Documentation/ABI/testing/
  sysfs-driver-intel-xe-hwmon; i915: "Energy input of device"). The hardware register is 32 bits
  wide and the driver accounts for one wrap between two reads only, which at 230 W is about 19
  minutes on a B70: it is read here at every sample, and a value lower than the last is recorded
  as read (verification calls it a counter wrap). xpu-smi's own `energy.consumed` (metric 8) is the
  GPU domain, not the card's: integrating card power against it would always disagree.

NVIDIA (platform cuda):
- NVML through nvidia-ml-py (`pynvml`): `nvmlDeviceGetPowerUsage` (mW; board power) and
  `nvmlDeviceGetTotalEnergyConsumption` ("total energy consumption for this GPU in millijoules (mJ)
  since the driver was last reloaded", Volta or newer: NVML API reference / cuda-python's
  `device_get_total_energy_consumption`). nvidia-smi has no query field for the counter
  (`total_energy_consumption` is rejected: "is not a valid field to query").
- without nvidia-ml-py, power only: `nvidia-smi --query-gpu=timestamp,index,power.draw
  --format=csv,noheader,nounits -lms MS` (`power.draw`: "accurate to within +/- 5 watts", an
  average over 1 s on Ampere or newer, `--help-query-gpu`), timestamps `YYYY/MM/DD HH:MM:SS.mmm`
  in local time. Every window is then invalid: "counter missing".

Every power value is a mean over an interval that ends when it is read or printed, not the power
at that moment (the meter stamps it at the interval's middle, `power_window_s`):
- xpu-smi 2.x `power.draw` is (E_after - E_before) / (t_after - t_before) of the card's energy
  (v2.0.0 `ial/cmn/metrics/power.cpp:48-51,160-182`), E_before being the previous loop's E_after
  (`ial/cmn/metrics_registry.cpp:193-201`), one loop a period (`ial/cmn/cmd_dump.cpp:784-802`);
  the row's timestamp is taken when it is printed (`cmd_dump.cpp:582-609`): the loop period.
- NVML's board power, and nvidia-smi's `power.draw` that reads it: "On Ampere (except GA100) or
  newer GPUs, the API returns power averaged over 1 sec interval. On GA100 and older
  architectures, instantaneous power is returned" (nvmlDeviceGetPowerUsage in nvml.h and the NVML
  API reference, as https://nvidia.github.io/cuda-python/pr-preview/pr-2903/cuda-bindings/latest/
  module/generated/cuda.bindings.nvml.device_get_power_usage.html quotes it). The catalog's NVIDIA
  cards (data/hardware.yaml: H100, H200) are Hopper: 1 s.

The recorded outputs these parsers are tested on are in tests/runner/power/ (with their sources).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Protocol

SYS_PCI_DEVICES = Path("/sys/bus/pci/devices")
HWMON_NAMES = ("xe", "i915")

XPU_POWER = "xpu-smi dump power.draw (card, W)"
HWMON_COUNTER = "hwmon energy1_input (card, µJ)"
NVML_POWER = "NVML nvmlDeviceGetPowerUsage (board, mW)"
NVML_COUNTER = "NVML nvmlDeviceGetTotalEnergyConsumption (board, mJ)"
NVIDIA_SMI_POWER = "nvidia-smi power.draw (board, W)"

_XPU_POWER_COLUMNS = ("power.draw", "GPU Power")  # 2.x field name, 1.x label

NVML_POWER_WINDOW_S = 1.0
"""How long NVML's board power averages over, ending when it is read (Ampere, GA100 excepted, or newer)."""


def xpu_power_window_s(interval_ms: int) -> float:
    """How long xpu-smi's `power.draw` averages over, ending when its row is printed: the loop period."""
    return interval_ms / 1000.0


@dataclass(frozen=True)
class Reading:
    """One sample as a tool printed it: its device, its own wall-clock time (None: the reader
    stamped it itself), and the value in the packet's unit (mW or µJ)."""

    device: int
    wall: datetime | None
    value: int


def xpu_dump_argv(device: int, interval_ms: int) -> list[str]:
    return ["xpu-smi", "dump", "-d", str(device), "--metrics", "1", "--loop-ms", str(interval_ms)]


class XpuDumpParser:
    """Rows of `xpu-smi dump --metrics 1`: the header names the columns (2.x or 1.x)."""

    def __init__(self, today: date | None = None) -> None:
        self.column: int | None = None
        self.utc = True
        self.today = today

    def feed(self, line: str) -> Reading | None:
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 3:
            return None
        if cells[0] == "Timestamp":
            found = [i for i, name in enumerate(cells) if name.startswith(_XPU_POWER_COLUMNS)]
            self.column = found[0] if found else None
            self.utc = not cells[found[0]].startswith("GPU Power") if found else True
            return None
        column = self.column if self.column is not None else 2  # `noheader`: the one metric asked for
        if column >= len(cells) or not cells[1].isdigit():
            return None
        watts = _number(cells[column])
        wall = clock_time(cells[0], utc=self.utc, today=self.today)
        if watts is None or wall is None:
            return None
        return Reading(int(cells[1]), wall, round(watts * 1000))


def nvidia_smi_argv(devices: Sequence[int], interval_ms: int) -> list[str]:
    return [
        "nvidia-smi",
        "--query-gpu=timestamp,index,power.draw",
        "--format=csv,noheader,nounits",
        f"--id={','.join(map(str, devices))}",
        f"-lms={interval_ms}",
    ]


def parse_nvidia_smi(line: str) -> Reading | None:
    """`2026/07/14 08:12:53.353, 0, 631.95` (local time); `[N/A]` and the like are skipped."""
    cells = [cell.strip() for cell in line.split(",")]
    if len(cells) < 3 or not cells[1].isdigit():
        return None
    watts = _number(cells[2])
    try:
        wall = datetime.strptime(cells[0], "%Y/%m/%d %H:%M:%S.%f").astimezone(UTC)
    except ValueError:
        return None
    return None if watts is None else Reading(int(cells[1]), wall, round(watts * 1000))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None  # N/A, [N/A], [Not Supported]
    return value if value >= 0 else None


_CLOCK = re.compile(r"^(?:(\d{4})[/-](\d\d)[/-](\d\d)[ T])?(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")


def clock_time(text: str, *, utc: bool, today: date | None = None) -> datetime | None:
    """A tool's timestamp as an aware datetime. Without a date (xpu-smi dump's `HH:MM:SS.mmm`) it
    is the moment nearest now with that time of day, so a campaign may run past midnight."""
    match = _CLOCK.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    micro = int((fraction or "0").ljust(6, "0"))
    zone = UTC if utc else datetime.now().astimezone().tzinfo
    if year is not None:
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro, zone)
    now = datetime.now(zone)
    base = datetime.combine(today or now.date(), datetime.min.time(), zone)
    moment = base.replace(hour=int(hour), minute=int(minute), second=int(second), microsecond=micro)
    if today is not None:
        return moment
    return min((moment + timedelta(days=d) for d in (-1, 0, 1)), key=lambda m: abs((m - now).total_seconds()))


def hwmon_energy_file(bus_id: str | None, root: Path | None = None) -> Path | None:
    """The card's `energy1_input` (µJ) under its PCI device's hwmon, when its driver exposes one."""
    if not bus_id:
        return None
    device = (root or SYS_PCI_DEVICES) / _sysfs_bdf(bus_id)
    for hwmon in sorted((device / "hwmon").glob("hwmon*")):
        try:
            name = (hwmon / "name").read_text().strip()
        except OSError:
            continue
        energy = hwmon / "energy1_input"
        if name in HWMON_NAMES and energy.exists():
            return energy
    return None


def _sysfs_bdf(bus_id: str) -> str:
    """sysfs spells a PCI address with a 4-digit domain in lower case (nvidia-smi prints 8 digits)."""
    parts = bus_id.lower().split(":")
    if len(parts) == 3:
        return f"{int(parts[0], 16):04x}:{parts[1]}:{parts[2]}"
    if len(parts) == 2:
        return f"0000:{parts[0]}:{parts[1]}"
    return bus_id.lower()


def read_microjoules(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


class Nvml(Protocol):
    """What the meter calls of pynvml (nvidia-ml-py); tests pass a stand-in."""

    def nvmlInit(self) -> None: ...  # NVML's own names
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetPowerUsage(self, handle: object) -> int: ...
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int: ...


def load_nvml() -> Nvml | None:
    """pynvml (nvidia-ml-py) when installed and NVML answers; None otherwise."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]  # optional: nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError and its many subclasses: no NVML here
        return None
    nvml: Nvml = pynvml
    return nvml
