"""catalog/checks/energy.py: a packet's energy windows are judged again from their samples; a figure
the samples do not give, a forged number, looser rules, a card count other than the server's, and
power beyond the card's rated board power are refused, each naming its field."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from catalog.checks.consistency import consistency_problems
from catalog.model.arrays import decode_int64, decode_uint32, encode_int64, encode_uint32
from catalog.model.packet import Packet
from catalog.packets.seal import seal, write_packet
from catalog.packets.verify import read_packet
from catalog.recipes.hardware import HardwareFile
from catalog.store.documents import load_file
from testkit.energy_samples import with_energy
from testkit.samples import make_load_sweep, measured_parts, with_load
from tests.catalog import factories
from tests.catalog.factories import DATA, ORACLE_ARM, seal_draft

NOW = datetime(2026, 12, 1, tzinfo=UTC)
HARDWARE = load_file(HardwareFile, DATA / "hardware.yaml").by_id()
B70 = HARDWARE["arc_pro_b70"]
RECIPE_9B = factories.catalog_recipe("qwen3.5-9b")
SERVER = "arms[0].servers[0].energy"

Draft = dict[str, Any]


def draft(watts: float = 180.0) -> Draft:
    parts = with_load(measured_parts(spec=False), {ORACLE_ARM: make_load_sweep(users=(1, 2), rates=())})
    return with_energy(parts, watts=watts).model_dump(mode="json")


def problems(packet: Packet, hardware: str = "arc_pro_b70") -> dict[str, str]:
    return dict(consistency_problems(packet, RECIPE_9B, HARDWARE[hardware], NOW))


def test_a_packet_with_energy_windows_is_consistent_and_keeps_them() -> None:
    packet = seal(with_energy(measured_parts()), factories.test_key()).packet
    assert problems(packet) == {}
    window = packet.arms[0].servers[0].energy
    assert window is not None and window.figures is not None
    assert window.figures.avg_w == pytest.approx(180.0)
    assert packet.energy is not None
    idle_w = packet.energy.idle_w()
    assert idle_w is not None and idle_w[0] == pytest.approx(31.86)


def test_a_load_level_window_counts_its_requests_tokens() -> None:
    packet = seal_draft(draft())
    assert problems(packet) == {}
    ladder = packet.ladders[0]
    assert ladder.load is not None
    level = ladder.load.levels[0]
    assert level.energy is not None and level.energy.figures is not None
    assert level.energy.figures.j_per_output_token == pytest.approx(level.energy.figures.energy_j / level.output_tokens)


def test_a_forged_figure_is_refused_with_the_value_its_samples_give() -> None:
    changed = draft()
    changed["arms"][0]["servers"][0]["energy"]["figures"]["j_per_output_token"] = 0.001
    found = problems(seal_draft(changed))
    assert list(found) == [f"{SERVER}.figures.j_per_output_token"]
    assert found[f"{SERVER}.figures.j_per_output_token"].startswith("is 0.001; its samples give ")


def test_figures_over_samples_with_a_gap_are_refused() -> None:
    changed = draft()
    card = changed["arms"][0]["servers"][0]["energy"]["cards"][0]
    times, watts = decode_int64(card["power_t_us"]), decode_uint32(card["power_mw"])
    keep = [k for k, t in enumerate(times) if not 2_000_000 <= t <= 7_000_000]  # nothing from 1 s to 8 s
    card["power_t_us"] = encode_int64(type(times)(times.typecode, [times[k] for k in keep]))
    card["power_mw"] = encode_uint32(type(watts)(watts.typecode, [watts[k] for k in keep]))
    found = problems(seal_draft(changed))
    assert found == {
        f"{SERVER}.figures": "an energy figure its samples do not give: "
        "gap: 7.0 s without a power sample on device 0 (bound 3 s)"
    }


def test_a_valid_window_recorded_as_invalid_is_refused() -> None:
    changed = draft()
    window = changed["arms"][0]["servers"][0]["energy"]
    window["figures"], window["invalid"] = None, ["gap: made up"]
    assert problems(seal_draft(changed)) == {f"{SERVER}.invalid": "the samples give a valid window, not 'gap: made up'"}


def test_rules_looser_than_the_catalogs_are_refused() -> None:
    changed = draft()
    changed["energy"]["bounds"]["gap_bound_s"] = 60.0
    assert problems(seal_draft(changed))["energy.bounds.gap_bound_s"] == "60 is looser than the catalog's rule (3)"


def test_a_window_holds_one_trace_per_card_its_server_used() -> None:
    changed = draft()
    window = changed["arms"][0]["servers"][0]["energy"]
    second = {**window["cards"][0], "device": 1}
    window["cards"].append(second)
    window["figures"] = None
    window["invalid"] = ["placeholder"]
    found = problems(seal_draft(changed))
    assert found[f"{SERVER}.cards"] == "holds 2 card(s); its server used 1"


def test_power_above_the_rated_board_power_is_refused() -> None:
    found = problems(seal_draft(draft(watts=260.0)))  # a B70 is rated 230 W: x 1.1 = 253 W
    assert found[f"{SERVER}.cards[0].power_mw"] == (
        "averages 260 W over the window, above Intel Arc Pro B70's rated 230 W board power (x 1.1)"
    )


def test_one_sample_over_twice_the_rated_board_power_is_refused() -> None:
    changed = draft()
    card = changed["arms"][0]["servers"][0]["energy"]["cards"][0]
    watts = decode_uint32(card["power_mw"])
    watts[0] = 470_000  # outside the window (before it): it still may not be read from a B70
    card["power_mw"] = encode_uint32(watts)
    found = problems(seal_draft(changed))
    assert found[f"{SERVER}.cards[0].power_mw"] == (
        "a sample of 470 W is over twice Intel Arc Pro B70's rated 230 W board power"
    )


def test_a_card_without_a_rated_board_power_carries_no_energy() -> None:
    found = problems(seal_draft(draft()), hardware="cpu_generic")
    assert found["energy.idle"] == "cpu_generic has no rated board power in data/hardware.yaml to bound it by"


def test_every_card_in_data_that_can_carry_energy_names_its_rated_board_power_with_a_source() -> None:
    for hardware in HARDWARE.values():
        if hardware.platform != "cpu":
            assert hardware.board_power_w is not None and hardware.board_power_w.source, hardware.id


def test_a_packet_with_energy_reads_back_from_its_bytes(tmp_path: Path) -> None:
    sealed = seal(with_energy(measured_parts()), factories.test_key())
    path = write_packet(sealed, tmp_path)
    again = read_packet(path, None, allow_unsigned=True)
    assert again.arms[0].servers[0].energy == sealed.packet.arms[0].servers[0].energy
    assert b'"energy"' in path.read_bytes()


def test_a_packet_without_energy_writes_no_energy_key(tmp_path: Path) -> None:
    path = write_packet(seal(measured_parts(), factories.test_key()), tmp_path)
    assert b'"energy"' not in path.read_bytes()
