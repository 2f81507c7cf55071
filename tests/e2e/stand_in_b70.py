"""`python -m tests.e2e.stand_in_b70 RUNNER-ARGS`: the runner as on a B70 box made of stand-ins,
serving with the real vLLM CPU build. The fake `xpu-smi` (tests/runner/bin, on PATH) answers
preflight from a recorded B70 ($FAKE_SMI_BOX) and replays a power trace as `xpu-smi dump`
($FAKE_POWER_TRACE: tests/runner/power); $STAND_IN_ROOT holds the `/dev/dri` and
`/sys/bus/pci/devices` this process reads in their place.

The card's hwmon `energy1_input` ($FAKE_HWMON) is a sysfs attribute: the xe driver reads the
hardware counter when the file is read, in the reader's own system call (drivers/gpu/drm/xe/
xe_hwmon.c: `xe_hwmon_energy_read` calls `xe_hwmon_energy_get`, which reads the register). A file
that the replaying tool rewrote every 50 ms would lag its reader by as long as that tool is
descheduled, seconds on a loaded host, and its counter would then disagree with the power the same
tool prints. So this process writes the trace's counter into the file as it reads it, on the clock
the fake xpu-smi replays by ($FAKE_TRACE_ORIGIN), and the runner's own reader reads the file.
Everything else is the runner's own code."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from runner import cli, preflight
from runner.energy import sources

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner" / "power"))
from replay import Trace  # type: ignore[import-not-found]  # beside the fake tools, found at run time


def attach_hwmon(hwmon: Path, trace: Trace) -> None:
    """Reading the card's energy1_input gives the trace's counter at the moment of the read."""
    energy = (hwmon / "energy1_input").resolve()
    read = sources.read_microjoules

    def read_as_sysfs(path: Path) -> int | None:
        if path.resolve() == energy:
            energy.write_text(f"{trace.hwmon_uj()}\n")
        return read(path)

    sources.read_microjoules = read_as_sysfs


def main() -> None:
    root = Path(os.environ["STAND_IN_ROOT"])
    preflight.DRI = root / "dri"
    sources.SYS_PCI_DEVICES = root / "sys"
    os.environ["FAKE_TRACE_ORIGIN"] = repr(time.monotonic())  # the fake xpu-smi replays on the same clock
    attach_hwmon(Path(os.environ.pop("FAKE_HWMON")), Trace(os.environ["FAKE_POWER_TRACE"]))
    cli.main()


if __name__ == "__main__":
    main()
