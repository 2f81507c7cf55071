"""The campaign's energy meter: every card the campaign uses is sampled from before the first server
starts (the idle baseline) to the end, on the clock the requests are timed with.

Samples carry time.perf_counter() seconds, the clock of every request time (CLOCK_MONOTONIC on
Linux). A reading this process takes itself (hwmon, NVML) was taken at the middle of the read, and
is dropped when the read took longer than READ_BOUND_S (its moment is then unknown); a tool's row
(xpu-smi dump, nvidia-smi -lms) at the tool's own timestamp, moved onto the same clock by the
wall-clock offset at the moment the row arrives: a tool that writes its rows in bursts (a pipe is
block-buffered) still gives each sample its own time. A counter reading is stamped at that moment;
a power value, the mean over an interval ending there (sources.py), at that interval's middle
(Card.add_power).

A measured window (a strict suite, a concurrency level, a load level) is cut from the samples
afterwards: those within it and, on each side, enough to interpolate its edges; it is then judged
by catalog/model/energy.py. The runner re-judges every window once the campaign's idle baseline is
known (runner/energy/packet.py), so a resumed campaign's windows use the baseline of its packet.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from catalog.model.arrays import to_int64, to_uint32
from catalog.model.energy import US, CardTrace, EnergyBounds, EnergySetup, EnergyWindow, Tokens, judge_window
from runner.cards import Device
from runner.energy import sources
from runner.energy.sources import Nvml, Reading
from runner.server import stop_process
from runner.settings import Progress

INTERVAL_MS = 1000
"""One sample a second: what the issue and the most careful published method ask for."""
IDLE_BASELINE_S = 10.0
"""How long the cards are sampled idle, before the first server starts."""
FIRST_SAMPLE_WAIT_S = 10.0
"""How long the meter waits for every card's first sample (xpu-smi's first row comes one interval in)."""

READ_BOUND_S = 0.1
"""Longest a reading this process takes itself (hwmon, NVML) may last. It is stamped at the middle
of the read, so its moment is known to within half the read; a read held up longer (this process
descheduled on a loaded host) is dropped, and the gap rule judges the hole it leaves, where a
reading stamped a second off would show as a disagreement between power and counter."""

NO_CARD = (
    "no card energy source: the servers run on the CPU, and the host's own power is not measured "
    "(a figure from it would describe the whole machine, not a card)"
)


@dataclass
class Card:
    """One card's samples so far: (perf_counter seconds, mW) and (perf_counter seconds, µJ)."""

    device: int
    bus_id: str | None
    power_source: str
    counter_source: str | None
    power_window_s: float = 0.0  # how long each power value averages over, ending when it is read
    power: list[tuple[float, int]] = field(default_factory=list)
    counter: list[tuple[float, int]] = field(default_factory=list)

    def add(self, series: list[tuple[float, int]], at: float, value: int) -> None:
        if not series or at > series[-1][0]:  # a row stamped no later than the last adds nothing
            series.append((at, value))

    def add_power(self, read_at: float, milliwatts: int) -> None:
        """A power value read at `read_at`: the mean over the power_window_s before it, stamped at
        that interval's middle (the moment whose power it equals when power changes linearly;
        stamped when read, it would lag the card by half the interval)."""
        self.add(self.power, read_at - self.power_window_s / 2, milliwatts)

    def trace(self, start: float, end: float, margin: float) -> CardTrace:
        def cut(series: list[tuple[float, int]]) -> tuple[list[int], list[int]]:
            times: list[int] = []
            values: list[int] = []
            for at, value in list(series):
                if start - margin <= at <= end + margin:
                    us = round((at - start) * US)
                    if not times or us > times[-1]:
                        times.append(us)
                        values.append(value)
            return times, values

        power_t, power_v = cut(self.power)
        counter_t, counter_v = cut(self.counter)
        return CardTrace(
            device=self.device,
            bus_id=self.bus_id,
            power_source=self.power_source,
            counter_source=self.counter_source,
            power_t_us=to_int64(power_t),
            power_mw=to_uint32(power_v),
            counter_t_us=to_int64(counter_t),
            counter_uj=to_int64(counter_v),
        )


Poll = Callable[[], None]


class EnergyMeter:
    """Samples the cards between start() and stop(); cuts and judges windows of that record."""

    def __init__(
        self,
        cards: list[Card],
        streams: list[tuple[list[str], Callable[[str], Reading | None]]],
        polls: list[Poll],
        interval_ms: int,
        progress: Progress,
        bounds: EnergyBounds | None = None,
    ) -> None:
        self.cards = cards
        self.streams = streams
        self.polls = polls
        self.interval_ms = interval_ms
        self.progress = progress
        self.bounds = bounds or EnergyBounds()
        self.idle: EnergyWindow | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._processes: list[subprocess.Popen[str]] = []
        self._by_device = {card.device: card for card in cards}

    @property
    def sources(self) -> list[str]:
        found: list[str] = []
        for card in self.cards:
            for source in (card.power_source, card.counter_source):
                if source is not None and source not in found:
                    found.append(source)
        return found

    def start(self) -> None:
        for argv, parse in self.streams:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
            )
            self._processes.append(process)
            self._spawn(self._read_stream, process, argv, parse)
        if self.polls:
            self._spawn(self._poll)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="energy-meter")
        thread.start()
        self._threads.append(thread)

    def _read_stream(
        self, process: subprocess.Popen[str], argv: list[str], parse: Callable[[str], Reading | None]
    ) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            reading = parse(line)
            if reading is None or reading.wall is None:
                continue
            arrived, now_wall = time.perf_counter(), time.time()
            card = self._by_device.get(reading.device)
            if card is not None:
                card.add_power(arrived - (now_wall - reading.wall.timestamp()), reading.value)
        if not self._stop.is_set():
            self.progress(f"energy: `{' '.join(argv)}` stopped (exit {process.wait()}): later windows will show a gap")

    def _poll(self) -> None:
        period = self.interval_ms / 1000.0
        due = time.perf_counter()
        while not self._stop.is_set():
            for poll in self.polls:
                poll()
            due += period
            self._stop.wait(max(due - time.perf_counter(), 0.0))

    def stop(self) -> None:
        self._stop.set()
        for process in self._processes:
            stop_process(process, grace_s=5.0)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> EnergyMeter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_for(self, moment: float, cards: Sequence[Card], deadline_s: float) -> None:
        """Until every card has a sample at or after `moment` (its edge can be interpolated), or the deadline."""
        give_up = time.perf_counter() + deadline_s
        while time.perf_counter() < give_up:
            if self._processes and all(process.poll() is not None for process in self._processes):
                return  # the tools stopped: no sample is coming (the gap rule will say so)
            if all(
                card.power
                and card.power[-1][0] >= moment
                and (card.counter_source is None or (card.counter and card.counter[-1][0] >= moment))
                for card in cards
            ):
                return
            time.sleep(min(0.05, self.interval_ms / 4000.0))

    def window(self, start: float, end: float, cards: int, tokens: Tokens) -> EnergyWindow:
        """The first `cards` cards' samples over [start, end] (perf_counter seconds), judged."""
        used = self.cards[:cards]
        self._wait_for(end, used, self.bounds.gap_bound_s + self.interval_ms / 1000.0)
        margin = self.bounds.gap_bound_s + self.interval_ms / 1000.0
        duration = max(round((end - start) * US), 1)
        traces = [card.trace(start, end, margin) for card in used]
        return judge_window(traces, duration, self.bounds, tokens, self.idle_w())

    def take_idle_baseline(self, seconds: float | None = None) -> EnergyWindow:
        """Every card sampled idle for `seconds` (IDLE_BASELINE_S), once each has a first sample."""
        seconds = IDLE_BASELINE_S if seconds is None else seconds
        self._wait_for(time.perf_counter(), self.cards, FIRST_SAMPLE_WAIT_S)
        start = time.perf_counter()
        self.progress(f"energy: sampling the idle cards for {seconds:g} s before the first server starts")
        time.sleep(seconds)
        self.idle = self.window(start, time.perf_counter(), len(self.cards), Tokens(0, 0))
        return self.idle

    def idle_w(self) -> dict[int, float] | None:
        return self.setup().idle_w() if self.idle is not None else None

    def setup(self) -> EnergySetup:
        return EnergySetup(sources=self.sources, interval_ms=self.interval_ms, bounds=self.bounds, idle=self.idle)


class NoEnergy:
    """A host without a card energy source: no window, and a packet that says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def __enter__(self) -> NoEnergy:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def window(self, start: float, end: float, cards: int, tokens: Tokens) -> EnergyWindow | None:
        return None

    def take_idle_baseline(self, seconds: float | None = None) -> None:
        return None

    def setup(self) -> EnergySetup:
        return EnergySetup(absent=self.reason)


Meter = EnergyMeter | NoEnergy


@dataclass(frozen=True)
class CardAddress:
    """A card the servers will use, as preflight read it from the vendor tool (a MIG slice: its
    parent GPU's index and address, and its profile)."""

    index: int
    bus_id: str | None
    mig_profile: str | None = None

    @classmethod
    def of(cls, device: Device) -> CardAddress:
        return cls(device.index, device.bus_id, device.mig_profile)


def mig_slice_reason(cards: Sequence[CardAddress]) -> str | None:
    """Why a server on a MIG slice has no energy figure: NVML reads power and energy per physical
    GPU, and MIG has no per-slice power (arXiv 2501.17752, "On the Partitioning of GPU Power among
    Multi-Instances"), so every slice's work, other tenants' included, would be charged to it."""
    slices = [f"{card.mig_profile} on device {card.index}" for card in cards if card.mig_profile]
    if not slices:
        return None
    return (
        f"no card energy source: MIG slice ({', '.join(slices)}): NVML's board power and energy counter "
        "cover the whole GPU, every slice's work included, not the slice"
    )


def energy_meter(
    platform: str,
    cards: Sequence[CardAddress],
    progress: Progress,
    interval_ms: int | None = None,
    nvml: Nvml | None = None,
    sysfs: Path | None = None,
) -> Meter:
    """The meter for this host's cards: xpu-smi and hwmon on Intel, NVML (or nvidia-smi) on NVIDIA;
    or none, and the progress output says why."""
    interval = interval_ms or INTERVAL_MS
    mig = mig_slice_reason(cards)
    meter: Meter
    if platform == "cpu" or not cards:
        meter = NoEnergy(NO_CARD)
    elif mig is not None:
        meter = NoEnergy(mig)
    elif platform == "xpu":
        meter = _xpu_meter(cards, progress, interval, sysfs)
    else:
        meter = _cuda_meter(cards, progress, interval, nvml if nvml is not None else sources.load_nvml())
    if isinstance(meter, NoEnergy):
        progress(f"energy not measured: {meter.reason}")
    return meter


def _xpu_meter(cards: Sequence[CardAddress], progress: Progress, interval: int, sysfs: Path | None) -> Meter:
    if shutil.which("xpu-smi") is None:
        return NoEnergy("no card energy source: xpu-smi is not installed")
    recorded: list[Card] = []
    polls: list[Poll] = []
    for address in cards:
        energy_file = sources.hwmon_energy_file(address.bus_id, sysfs)
        counter = sources.HWMON_COUNTER if energy_file else None
        card = Card(address.index, address.bus_id, sources.XPU_POWER, counter, sources.xpu_power_window_s(interval))
        recorded.append(card)
        if energy_file is None:
            progress(
                f"energy: device {address.index} has no hwmon energy1_input (kernel driver xe or i915): its power "
                "cannot be checked against a counter, so every window will be invalid (counter missing)"
            )
        else:
            polls.append(_hwmon_poll(card, energy_file))
    streams: list[tuple[list[str], Callable[[str], Reading | None]]] = [
        (sources.xpu_dump_argv(card.device, interval), sources.XpuDumpParser().feed) for card in recorded
    ]
    return EnergyMeter(recorded, streams, polls, interval, progress)


def read_moment(before: float, after: float) -> float | None:
    """When a reading taken between `before` and `after` was taken: the middle, if the read was short."""
    return (before + after) / 2 if after - before <= READ_BOUND_S else None


def _hwmon_poll(card: Card, path: Path) -> Poll:
    def poll() -> None:
        before = time.perf_counter()
        value = sources.read_microjoules(path)
        at = read_moment(before, time.perf_counter())
        if value is not None and at is not None:
            card.add(card.counter, at, value)

    return poll


def _cuda_meter(cards: Sequence[CardAddress], progress: Progress, interval: int, nvml: Nvml | None) -> Meter:
    if nvml is None:
        if shutil.which("nvidia-smi") is None:
            return NoEnergy("no card energy source: neither nvidia-ml-py (NVML) nor nvidia-smi is available")
        progress(
            "energy: nvidia-ml-py is not installed, so NVML's energy counter cannot be read: power comes from "
            "nvidia-smi and every window will be invalid (counter missing); "
            "`pip install -r requirements/runner-cuda.txt` (nvidia-ml-py) fixes it"
        )
        recorded = [Card(a.index, a.bus_id, sources.NVIDIA_SMI_POWER, None, sources.NVML_POWER_WINDOW_S) for a in cards]
        argv = sources.nvidia_smi_argv([a.index for a in cards], interval)
        return EnergyMeter(recorded, [(argv, sources.parse_nvidia_smi)], [], interval, progress)
    window = sources.NVML_POWER_WINDOW_S
    recorded = [Card(a.index, a.bus_id, sources.NVML_POWER, sources.NVML_COUNTER, window) for a in cards]
    handles = [nvml.nvmlDeviceGetHandleByIndex(card.device) for card in recorded]

    def poll() -> None:
        for card, handle in zip(recorded, handles, strict=True):
            with contextlib.suppress(Exception):  # NVMLError: this sample is missing, the gap rule judges it
                before = time.perf_counter()
                milliwatts = nvml.nvmlDeviceGetPowerUsage(handle)
                millijoules = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
                at = read_moment(before, time.perf_counter())
                if at is None:
                    continue
                card.add_power(at, int(milliwatts))
                card.add(card.counter, at, int(millijoules) * 1000)

    return EnergyMeter(recorded, [], [poll], interval, progress)


def describe(window: EnergyWindow | None) -> str:
    """One progress line's worth: the figures, or why there are none."""
    if window is None:
        return "energy not measured"
    figures = window.figures
    if figures is None:
        return f"energy invalid: {window.invalid[0]}"
    per_token = f", {figures.j_per_output_token:.3g} J/token" if figures.j_per_output_token else ""
    return f"energy {figures.energy_j:.1f} J over {window.duration_s:.1f} s, {figures.avg_w:.0f} W average{per_token}"
