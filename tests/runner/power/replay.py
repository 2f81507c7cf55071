"""Replays a recorded power trace as xpu-smi, nvidia-smi, the kernel's hwmon and NVML would report it.

The fake `xpu-smi dump ...` and `nvidia-smi ... -lms=MS` (tests/runner/bin) exec this file with
their arguments; the fake `pynvml` (tests/runner/power/nvml) imports it. $FAKE_POWER_TRACE names a
trace (README.md beside this file); time starts when the process does (or at $FAKE_TRACE_ORIGIN, a
CLOCK_MONOTONIC reading, which every process on the host shares), and the trace loops.

- `xpu-smi dump -d N --metrics 1 --loop-ms MS`: the 2.x CSV rows (`Timestamp, DeviceId,
  power.draw (W)`, then `HH:MM:SS.mmm, N, P.PP` in UTC, one row per MS, the first one MS after
  start), as intel/xpumanager `ial/cmn/cmd_dump.cpp` prints them with stdin not a terminal. Each
  row's value is the trace's mean power since the previous row (the first: since start), stamped
  when printed, as xpu-smi 2.x computes `power.draw` from two energy readings a loop apart
  (v2.0.0 `ial/cmn/metrics/power.cpp:160-182`, `ial/cmn/metrics_registry.cpp:193-201`; the
  timestamp at `cmd_dump.cpp:609`). The mean is of the trace's power column, so a trace whose
  counter disagrees with its power still shows it. 1.x options
  (`-m`, `-i`, `-n`) exit 1 with CLI11's message, as 2.x does. With $FAKE_HWMON, the trace's
  counter is written to `$FAKE_HWMON/energy1_input` (µJ) every 50 ms. The xe driver computes that
  attribute when it is read; a file rewritten by this process lags it by as long as this process is
  descheduled, so a reader that must be exact on a loaded host computes it itself (`hwmon_uj`).
- `nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv,noheader,nounits --id=N -lms=MS`:
  `YYYY/MM/DD HH:MM:SS.mmm, N, P.PP` (local time), one row per MS, each the mean power over the
  NVML_WINDOW_S before it (NVML's board power on Ampere, GA100 excepted, or newer; the NVML
  stand-in answers the same).
Standard library only: the fake tools run it with the system python3.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

Row = tuple[float, float | None, float | None]  # t_s, power W (None: gap), counter J (None: gap)

NVML_WINDOW_S = 1.0  # runner/energy/sources.py cites it


def load(path: str) -> tuple[list[Row], float, float]:
    """The rows, the trace's end and where each repeat starts (`T repeat`; 0 without one)."""
    rows: list[Row] = []
    end = 0.0
    repeat = 0.0
    for raw in Path(path).read_text().splitlines():
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        t = float(line[0])
        if line[1] == "end":
            end = t
        elif line[1] == "repeat":
            repeat = t
        elif line[1] == "gap":
            rows.append((t, None, None))
        else:
            rows.append((t, float(line[1]), float(line[2])))
    if end <= 0:
        raise SystemExit(f"{path}: no `T end` row")
    if not 0.0 <= repeat < end:
        raise SystemExit(f"{path}: `T repeat` must lie before the end")
    return rows, end, repeat


class Trace:
    def __init__(self, path: str) -> None:
        self.rows, self.end, self.repeat = load(path)
        self.numeric = [(t, p, c) for t, p, c in self.rows if p is not None and c is not None]
        origin = os.environ.get("FAKE_TRACE_ORIGIN")
        self.started = float(origin) if origin else time.monotonic()

    def _interpolate(self, t: float, column: int) -> float:
        points = [(row[0], row[column]) for row in self.numeric]
        if t <= points[0][0]:
            return float(points[0][1] or 0.0)
        for (t0, v0), (t1, v1) in itertools.pairwise(points):
            if t0 <= t <= t1:
                assert v0 is not None and v1 is not None
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1
        return float(points[-1][1] or 0.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _position(self, elapsed: float) -> tuple[float, int]:
        """Where in the trace `elapsed` falls, and how many repeats have been played before it."""
        if elapsed < self.end:
            return elapsed, 0
        period = self.end - self.repeat
        return self.repeat + (elapsed - self.end) % period, 1 + math.floor((elapsed - self.end) / period)

    def in_gap(self, elapsed: float) -> bool:
        t, _ = self._position(elapsed)
        current = [row for row in self.rows if row[0] <= t]
        return bool(current) and current[-1][1] is None

    def power_w(self, elapsed: float) -> float:
        return self._interpolate(self._position(elapsed)[0], 1)

    def _power_integral(self, t: float) -> float:
        """J of the power column from the trace's first row to t (linear between rows, flat beyond them)."""
        points = [(row[0], float(row[1] or 0.0)) for row in self.numeric]
        total = points[0][1] * min(t - points[0][0], 0.0)
        for (t0, p0), (t1, p1) in itertools.pairwise(points):
            if t <= t0:
                break
            if t1 > t0:
                upto = min(t, t1)
                p_upto = p0 + (p1 - p0) * (upto - t0) / (t1 - t0)
                total += (upto - t0) * (p0 + p_upto) / 2
        return total + points[-1][1] * max(t - points[-1][0], 0.0)

    def mean_power_w(self, since: float, until: float) -> float:
        """The mean of the power column over [since, until] (elapsed seconds), repeats included."""
        per_repeat = self._power_integral(self.end) - self._power_integral(self.repeat)

        def integral(elapsed: float) -> float:
            t, repeats = self._position(elapsed)
            return self._power_integral(t) + repeats * per_repeat

        return (integral(until) - integral(since)) / (until - since) if until > since else self.power_w(until)

    def counter_j(self, elapsed: float) -> float:
        t, repeats = self._position(elapsed)
        per_repeat = self._interpolate(self.end, 2) - self._interpolate(self.repeat, 2)
        return self._interpolate(t, 2) + repeats * per_repeat

    def hwmon_uj(self) -> int:
        """`energy1_input` now: the counter in µJ at the moment it is read, as the driver gives it."""
        return round(self.counter_j(self.elapsed()) * 1_000_000)


def _option(args: list[str], *names: str) -> str | None:
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def _loop(trace: Trace, interval_s: float, row: Callable[[float, datetime], str]) -> None:
    hwmon = os.environ.get("FAKE_HWMON")
    due = interval_s
    while True:
        if hwmon:
            target = Path(hwmon) / "energy1_input"
            temporary = target.with_name(".energy1_input.tmp")
            temporary.write_text(f"{trace.hwmon_uj()}\n")
            temporary.replace(target)
        elapsed, now = trace.elapsed(), datetime.now(UTC)  # one moment: the sample's value and its timestamp
        if elapsed >= due:
            if not trace.in_gap(elapsed):
                print(row(elapsed, now), flush=True)
            due += interval_s
        time.sleep(min(0.05, max(due - trace.elapsed(), 0.0)))


def refuse_1x_options(args: list[str]) -> None:
    """xpu-smi 2.x has no -m/-i/-n/--ims (CLI11's message; research/smi section 1.7)."""
    unexpected = [a for a in args if a in ("-m", "-i", "-n", "--ims")]
    if unexpected:
        rest = " ".join(args[args.index(unexpected[0]) :])
        print(f"[Error] The following arguments were not expected: {rest}", file=sys.stderr)
        raise SystemExit(1)


def xpu_smi(args: list[str], trace: Trace) -> None:
    device = _option(args, "-d", "--device", "--id") or "0"
    loop_ms = _option(args, "--loop-ms")
    interval = _option(args, "--interval")
    seconds = int(loop_ms) / 1000.0 if loop_ms else float(interval or 1)
    print("Timestamp, DeviceId, power.draw (W)", flush=True)
    previous = [0.0]  # the elapsed time of the previous row: its energy reading begins this row's interval

    def row(elapsed: float, now: datetime) -> str:
        watts = trace.mean_power_w(previous[0], elapsed)
        previous[0] = elapsed
        return f"{now:%H:%M:%S}.{now.microsecond // 1000:03d}, {device}, {watts:.2f}"

    _loop(trace, seconds, row)


def nvidia_smi(args: list[str], trace: Trace) -> None:
    device = _option(args, "--id", "-i") or "0"
    loop_ms = _option(args, "-lms", "--loop-ms") or "1000"

    def row(elapsed: float, utc: datetime) -> str:
        now = utc.astimezone()
        watts = trace.mean_power_w(elapsed - NVML_WINDOW_S, elapsed)
        return f"{now:%Y/%m/%d %H:%M:%S}.{now.microsecond // 1000:03d}, {device}, {watts:.2f}"

    _loop(trace, int(loop_ms) / 1000.0, row)


def main(argv: list[str]) -> None:
    if argv[0] == "xpu-smi":
        refuse_1x_options(argv[1:])
    path = os.environ.get("FAKE_POWER_TRACE")
    if not path:
        print("[Error] no power trace to replay: set FAKE_POWER_TRACE (tests/runner/power)", file=sys.stderr)
        raise SystemExit(1)
    trace = Trace(path)
    tool, args = argv[0], argv[1:]
    try:
        if tool == "xpu-smi":
            xpu_smi(args[1:] if args[:1] == ["dump"] else args, trace)
        else:
            nvidia_smi(args, trace)
    except (KeyboardInterrupt, BrokenPipeError):
        pass


if __name__ == "__main__":
    main(sys.argv[1:])
