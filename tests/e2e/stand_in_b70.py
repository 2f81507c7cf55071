"""`python -m tests.e2e.stand_in_b70 RUNNER-ARGS`: the runner as on a B70 box made of stand-ins,
serving with the real vLLM CPU build. The fake `xpu-smi` (tests/runner/bin, on PATH) answers
preflight from a recorded B70 ($FAKE_SMI_BOX) and replays a power trace as `xpu-smi dump`, writing
the card's hwmon energy counter as it goes ($FAKE_POWER_TRACE, $FAKE_HWMON: tests/runner/power);
$STAND_IN_ROOT holds the `/dev/dri` and `/sys/bus/pci/devices` this process reads in their place.
Everything else is the runner's own code."""

from __future__ import annotations

import os
from pathlib import Path

from runner import cli, preflight
from runner.energy import sources


def main() -> None:
    root = Path(os.environ["STAND_IN_ROOT"])
    preflight.DRI = root / "dri"
    sources.SYS_PCI_DEVICES = root / "sys"
    cli.main()


if __name__ == "__main__":
    main()
