"""A stand-in for nvidia-ml-py's `pynvml`: the five calls the runner's meter makes, answered from the
power trace $FAKE_POWER_TRACE (tests/runner/power/replay.py), time starting at nvmlInit.

Units as NVML documents them: nvmlDeviceGetPowerUsage in milliwatts, the mean over the second before
the call (Ampere, GA100 excepted, or newer: runner/energy/sources.py cites it);
nvmlDeviceGetTotalEnergyConsumption in millijoules since the driver was loaded (NVML API reference;
cuda-python's `device_get_total_energy_consumption`: "total energy consumption for this GPU in
millijoules (mJ) since the driver was last reloaded"). Put this folder on sys.path to use it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from replay import NVML_WINDOW_S, Trace  # type: ignore[import-not-found]  # beside this folder, found at run time

_trace: Trace | None = None


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    global _trace
    path = os.environ.get("FAKE_POWER_TRACE")
    if not path:
        raise NVMLError("Driver Not Loaded")
    _trace = Trace(path)


def nvmlShutdown() -> None:
    return None


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    return index


def _trace_now() -> Trace:
    if _trace is None:
        raise NVMLError("Uninitialized")
    return _trace


def nvmlDeviceGetPowerUsage(handle: int) -> int:
    trace = _trace_now()
    elapsed = trace.elapsed()
    if trace.in_gap(elapsed):
        raise NVMLError("Unknown Error")
    return round(float(trace.mean_power_w(elapsed - NVML_WINDOW_S, elapsed)) * 1000)


def nvmlDeviceGetTotalEnergyConsumption(handle: int) -> int:
    trace = _trace_now()
    return round(float(trace.counter_j(trace.elapsed())) * 1000)
