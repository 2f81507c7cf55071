"""runner/energy: the tools' outputs parsed (recorded in tests/runner/power, README there cites
them), the card's hwmon counter found, and the meter run against the stand-ins replaying each
recorded trace (idle, loaded, a gap, a counter wrap, a disagreeing pair), NVML's too."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from catalog.model.energy import Tokens
from runner import nvidia_smi
from runner.energy import meter as meter_module
from runner.energy import sources
from runner.energy.meter import NO_CARD, READ_BOUND_S, Card, CardAddress, EnergyMeter, NoEnergy, energy_meter

HERE = Path(__file__).resolve().parent
POWER = HERE / "power"
BIN = HERE / "bin"
BDF = "0000:03:00.0"


# --- parsing ---------------------------------------------------------------------------------------


def test_xpu_smi_2x_dump_rows_give_card_power_at_their_utc_time() -> None:
    parser = sources.XpuDumpParser(today=date(2026, 6, 20))
    readings = [r for line in (POWER / "xpu-smi-2.x_dump.csv").read_text().splitlines() if (r := parser.feed(line))]
    assert [r.value for r in readings] == [31860, 118440, 214010, 221730, 219900]  # power.draw, not energy.consumed
    assert readings[0].device == 0
    assert readings[0].wall == datetime(2026, 6, 20, 9, 20, 42, 4000, UTC)


def test_xpu_smi_1x_dump_rows_are_read_by_their_label_in_local_time() -> None:
    parser = sources.XpuDumpParser(today=date(2026, 6, 20))
    readings = [r for line in (POWER / "xpu-smi-1.x_dump.csv").read_text().splitlines() if (r := parser.feed(line))]
    assert [r.value for r in readings] == [31860, 118440, 214010, 221730, 219900]
    first = readings[0].wall
    assert first is not None and first.utcoffset() == datetime.now().astimezone().utcoffset()
    assert (first.hour, first.minute) == (9, 20)


def test_the_aligned_table_xpu_smi_prints_to_a_terminal_gives_no_reading() -> None:
    parser = sources.XpuDumpParser()
    lines = (POWER / "xpu-smi-2.x_dump_TTY.txt").read_text().splitlines()
    assert [parser.feed(line) for line in lines] == [None] * len(lines)


def test_a_value_xpu_smi_cannot_read_is_skipped() -> None:
    parser = sources.XpuDumpParser(today=date(2026, 6, 20))
    parser.feed("Timestamp, DeviceId, power.draw (W)")
    assert parser.feed("09:20:42.004, 0, N/A") is None
    reading = parser.feed("09:20:43.004, 1, 12.50")
    assert reading is not None and (reading.device, reading.value) == (1, 12500)


def test_a_time_of_day_without_a_date_is_the_nearest_such_moment() -> None:
    moment = sources.clock_time("23:59:59.900", utc=True)
    assert moment is not None and abs((moment - datetime.now(UTC)).total_seconds()) <= 12 * 3600


def test_nvidia_smi_power_rows_in_local_time() -> None:
    lines = (POWER / "nvidia-smi_power-loop_h100.csv").read_text().splitlines()
    reading = sources.parse_nvidia_smi(lines[0])
    assert reading is not None and (reading.device, reading.value) == (0, 631950)
    assert reading.wall == datetime(2026, 7, 14, 8, 12, 53, 353000).astimezone(UTC)
    assert sources.parse_nvidia_smi("2026/07/14 08:12:53.353, 0, [N/A]") is None


def test_the_meter_asks_xpu_smi_2x_and_nvidia_smi_for_what_they_accept() -> None:
    assert sources.xpu_dump_argv(1, 1000) == ["xpu-smi", "dump", "-d", "1", "--metrics", "1", "--loop-ms", "1000"]
    argv = sources.nvidia_smi_argv([0, 1], 500)
    assert "--query-gpu=timestamp,index,power.draw" in argv and "--id=0,1" in argv and "-lms=500" in argv
    assert not any("total_energy_consumption" in arg for arg in argv)  # not a valid query field


def fake_sysfs(root: Path, name: str = "xe") -> Path:
    hwmon = root / BDF / "hwmon" / "hwmon3"
    hwmon.mkdir(parents=True)
    (hwmon / "name").write_text(f"{name}\n")
    (hwmon / "energy1_input").write_text("18734521874\n")
    return hwmon


def test_the_cards_hwmon_energy_counter_is_found_by_its_pci_address(tmp_path: Path) -> None:
    hwmon = fake_sysfs(tmp_path)
    assert sources.hwmon_energy_file(BDF, tmp_path) == hwmon / "energy1_input"
    assert sources.hwmon_energy_file("00000000:03:00.0", tmp_path) == hwmon / "energy1_input"  # nvidia-smi's spelling
    assert sources.read_microjoules(hwmon / "energy1_input") == 18734521874
    assert sources.hwmon_energy_file("0000:04:00.0", tmp_path) is None
    assert sources.hwmon_energy_file(None, tmp_path) is None


def test_a_hwmon_of_another_driver_is_not_the_cards(tmp_path: Path) -> None:
    fake_sysfs(tmp_path, name="nvme")
    assert sources.hwmon_energy_file(BDF, tmp_path) is None


def test_a_counter_read_held_up_past_the_bound_is_dropped_not_stamped_at_a_guess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read is stamped at its middle; one that took longer than READ_BOUND_S (the runner descheduled
    on a loaded host) has no known moment: kept, it would be stamped up to half its length off and the
    window would show a disagreement of power and counter; dropped, the gap rule judges the hole."""
    hwmon = fake_sysfs(tmp_path)
    reads = iter([10.0, 10.002, 20.0, 20.0 + READ_BOUND_S + 0.5, 30.0, 30.0 + READ_BOUND_S / 2])
    monkeypatch.setattr(meter_module, "time", SimpleNamespace(perf_counter=lambda: next(reads)))
    card = Card(0, BDF, sources.XPU_POWER, sources.HWMON_COUNTER)
    poll = meter_module._hwmon_poll(card, hwmon / "energy1_input")
    for _ in range(3):
        poll()
    assert [value for _, value in card.counter] == [18734521874, 18734521874]  # the second read is gone
    assert [at for at, _ in card.counter] == pytest.approx([10.001, 30.0 + READ_BOUND_S / 4])


def test_a_cpu_host_has_no_card_energy_source_and_says_so() -> None:
    meter = energy_meter("cpu", [], lambda _: None)
    assert isinstance(meter, NoEnergy)
    assert meter.window(0.0, 1.0, 1, Tokens(1, 2)) is None
    setup = meter.setup()
    assert setup.absent == NO_CARD and setup.sources == [] and setup.idle is None


def test_a_server_on_a_mig_slice_gets_no_energy_figure_and_the_output_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The recorded H100 split in MIG slices (tests/runner/smi/h100-mig): a slice is its parent GPU's
    index to NVML, whose board power covers every slice (other tenants' work included); two slices
    of one GPU would read that one GPU twice. NVML is not read, the packet says why."""
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SMI_BOX", str(HERE / "smi" / "h100-mig"))
    devices, _, slices = nvidia_smi.read_devices()
    for mask, named in (
        ("MIG-00000002", "1g.10gb on device 0"),
        ("MIG-00000000,MIG-00000001", "3g.40gb on device 0, 2g.20gb on device 0"),
    ):
        lines: list[str] = []
        used = [CardAddress.of(device) for device in nvidia_smi.visible(devices, slices, mask)]
        meter = energy_meter("cuda", used, lines.append, nvml=UnreadNvml())
        assert isinstance(meter, NoEnergy)
        reason = meter.setup().absent
        assert reason == (
            f"no card energy source: MIG slice ({named}): NVML's board power and energy counter cover the "
            "whole GPU, every slice's work included, not the slice"
        )
        assert lines == [f"energy not measured: {reason}"]


class UnreadNvml:
    """An NVML the meter must not read."""

    def nvmlInit(self) -> None:
        raise AssertionError("NVML read")

    def nvmlShutdown(self) -> None:
        raise AssertionError("NVML read")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        raise AssertionError("NVML read")

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        raise AssertionError("NVML read")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        raise AssertionError("NVML read")


# --- the meter against the stand-ins -------------------------------------------------------------


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    hwmon = fake_sysfs(tmp_path / "sys")
    monkeypatch.setenv("FAKE_HWMON", str(hwmon))
    yield tmp_path / "sys"


def first_row(meter: EnergyMeter) -> float:
    """When the stand-in tool's first row was stamped (it starts late on a loaded host)."""
    card = meter.cards[0]
    deadline = time.perf_counter() + 60.0
    while not card.power and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert card.power, "the stand-in tool printed no row"
    return card.power[0][0]


def run_xpu(sysfs: Path, trace: str, monkeypatch: pytest.MonkeyPatch, window: tuple[float, float]) -> EnergyMeter:
    """A meter on the stand-in B70 replaying `trace`; one window, in seconds of the trace. The trace
    starts when the replaying process does (late on a loaded host): its first row is printed one
    interval in, which places the trace's start on the meter's clock."""
    monkeypatch.setenv("FAKE_POWER_TRACE", str(POWER / trace))
    lines: list[str] = []
    meter = energy_meter("xpu", [CardAddress(0, BDF)], lines.append, interval_ms=200, sysfs=sysfs)
    assert isinstance(meter, EnergyMeter), lines
    with meter:
        origin = first_row(meter) - 0.2
        time.sleep(max(origin + window[1] + 0.5 - time.perf_counter(), 0.0))
        meter.result = meter.window(origin + window[0], origin + window[1], 1, Tokens(1000, 2000))  # type: ignore[attr-defined]
    return meter


@pytest.mark.slow
def test_a_loaded_b70_gives_a_valid_window_whose_power_agrees_with_its_counter(
    stand_ins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meter = run_xpu(stand_ins, "b70-loaded.trace", monkeypatch, (1.5, 4.0))
    window = meter.result  # type: ignore[attr-defined]
    assert window.invalid == []
    assert 150.0 < window.figures.avg_w < 230.0  # ramping to about 220 W
    assert window.figures.counter_j == pytest.approx(window.figures.energy_j, rel=0.1)
    assert meter.sources == [sources.XPU_POWER, sources.HWMON_COUNTER]
    assert meter.cards[0].power_window_s == 0.2  # each row the mean over one loop
    card = window.cards[0]
    assert card.power_t_us[0] < 0 < window.duration_us < card.power_t_us[-1]  # the edges are bracketed


@pytest.mark.slow
def test_a_stalled_xpu_smi_leaves_a_gap_that_invalidates(stand_ins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window = run_xpu(stand_ins, "b70-gap.trace", monkeypatch, (2.5, 6.5)).result  # type: ignore[attr-defined]
    assert window.figures is None
    assert [reason.split(":")[0] for reason in window.invalid] == ["gap"]
    assert "without a power sample on device 0" in window.invalid[0]


@pytest.mark.slow
def test_a_counter_that_runs_backwards_is_a_counter_wrap(stand_ins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window = run_xpu(stand_ins, "b70-wrap.trace", monkeypatch, (2.5, 5.5)).result  # type: ignore[attr-defined]
    assert window.invalid == ["counter wrap: the energy counter of device 0 went backwards (a wrap or a reset)"]


@pytest.mark.slow
def test_power_and_counter_that_disagree_invalidate(stand_ins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window = run_xpu(stand_ins, "b70-disagree.trace", monkeypatch, (1.0, 4.0)).result  # type: ignore[attr-defined]
    assert [reason.split(":")[0] for reason in window.invalid] == ["disagreement"]


@pytest.mark.slow
def test_the_idle_baseline_of_an_idle_b70(stand_ins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_POWER_TRACE", str(POWER / "b70-idle.trace"))
    meter = energy_meter("xpu", [CardAddress(0, BDF)], lambda _: None, interval_ms=200, sysfs=stand_ins)
    assert isinstance(meter, EnergyMeter)
    with meter:
        idle = meter.take_idle_baseline(2.0)
    assert idle.valid
    idle_w = meter.setup().idle_w()
    assert idle_w is not None and idle_w[0] == pytest.approx(31.86, abs=0.1)


@pytest.mark.slow
def test_without_a_hwmon_counter_every_window_says_counter_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_POWER_TRACE", str(POWER / "b70-loaded.trace"))
    lines: list[str] = []
    meter = energy_meter("xpu", [CardAddress(0, BDF)], lines.append, interval_ms=200, sysfs=tmp_path)
    assert any("no hwmon energy1_input" in line for line in lines)
    assert isinstance(meter, EnergyMeter)
    with meter:
        started = first_row(meter)
        time.sleep(1.5)
        window = meter.window(started + 0.3, started + 1.0, 1, Tokens(10, 20))
    assert window is not None
    assert window.invalid == ["counter missing: device 0 has no cumulative energy counter to check its power against"]


def test_nvml_gives_power_and_the_energy_counter_of_each_card(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_POWER_TRACE", str(POWER / "h100-loaded.trace"))
    monkeypatch.syspath_prepend(str(POWER / "nvml"))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    nvml = sources.load_nvml()
    assert nvml is not None
    meter = energy_meter("cuda", [CardAddress(0, "00000000:83:00.0")], lambda _: None, interval_ms=100, nvml=nvml)
    assert isinstance(meter, EnergyMeter)
    with meter:
        started = time.perf_counter()
        time.sleep(1.6)
        window = meter.window(started + 0.3, started + 1.3, 1, Tokens(100, 300))
    assert meter.sources == [sources.NVML_POWER, sources.NVML_COUNTER]
    assert meter.cards[0].power_window_s == sources.NVML_POWER_WINDOW_S
    assert window.invalid == [] and window.figures is not None
    assert window.figures.avg_w == pytest.approx(632.0, abs=5.0)
    assert window.figures.counter_j == pytest.approx(window.figures.energy_j, rel=0.05)


@pytest.mark.slow
def test_without_nvidia_ml_py_power_comes_from_nvidia_smi_and_the_counter_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_POWER_TRACE", str(POWER / "h100-loaded.trace"))
    monkeypatch.setattr(sources, "load_nvml", lambda: None)
    lines: list[str] = []
    meter = energy_meter("cuda", [CardAddress(0, "00000000:83:00.0")], lines.append, interval_ms=200)
    assert any("requirements/runner-cuda.txt" in line for line in lines)
    assert isinstance(meter, EnergyMeter)
    with meter:
        started = first_row(meter)
        time.sleep(1.5)
        window = meter.window(started + 0.3, started + 1.0, 1, Tokens(10, 20))
    assert window is not None
    assert meter.sources == [sources.NVIDIA_SMI_POWER]
    assert meter.cards[0].power_window_s == sources.NVML_POWER_WINDOW_S  # power.draw reads NVML
    assert window.invalid == ["counter missing: device 0 has no cumulative energy counter to check its power against"]
