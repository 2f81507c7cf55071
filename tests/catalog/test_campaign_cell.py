"""A packet's fleet campaign cell is the one its own contents describe (catalog/model/campaign.py,
catalog/checks/campaign.py): a packet signed by a listed key that claims a cell it did not measure
is refused by every build, naming the file and `campaign.cell`; an honest one passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from catalog.checks.campaign import campaign_problems
from catalog.errors import CatalogError
from catalog.model.campaign import measured_cell, packet_cell
from catalog.model.packet import CampaignRef, PacketParts
from catalog.packets.seal import write_packet
from catalog.store.repository import load_catalog
from testkit.samples import measured_parts
from tests.catalog.factories import published_arm, published_draft, seal_parts, signed_data
from tests.catalog.test_checks_load_sweep import load_ladder


def ref(cell: str | None) -> CampaignRef:
    assert cell is not None
    return CampaignRef(name="nightly", round="2026-11", cell=cell, repeat=1, repeats=2)


def claiming(parts: PacketParts, cell: str | None) -> PacketParts:
    return parts.model_copy(update={"campaign": ref(cell)})


def edited(change: Any) -> PacketParts:
    document = measured_parts().model_dump(mode="json")
    change(document)
    return PacketParts.model_validate(document)


def test_an_honest_campaign_packet_passes() -> None:
    parts = measured_parts()
    packet = seal_parts(claiming(parts, measured_cell(parts))).packet
    assert campaign_problems(packet) == []


def test_a_cell_measured_elsewhere_is_refused_naming_the_field() -> None:
    other_card = measured_cell(measured_parts(hardware="arc_pro_b60"))
    packet = seal_parts(claiming(measured_parts(), other_card)).packet
    ((field, message),) = campaign_problems(packet)
    assert field == "campaign.cell"
    assert message.startswith(f"is {other_card}, but what this packet measured")
    assert f"is cell {measured_cell(packet)}:" in message


def test_an_imported_packet_names_no_campaign_cell() -> None:
    draft = published_draft([published_arm("tp1-mtp0", [40.0, 40.5], gates=[("G1", 12, 12, True)])])
    parts = PacketParts.model_validate(draft)
    packet = seal_parts(claiming(parts, "0123456789ab")).packet
    assert measured_cell(packet) is None
    assert [field for field, _ in campaign_problems(packet)] == ["campaign"]


def test_every_fact_a_plan_chooses_moves_the_cell() -> None:
    def set_arm(index: int, **config: Any) -> Any:
        return lambda d: d["arms"][index]["config"].update(config)

    honest = measured_cell(measured_parts())
    others = [
        measured_parts(hardware="arc_pro_b60"),
        measured_parts(variant="fp8"),
        measured_parts(spec=False),
        edited(set_arm(1, spec_depth=3)),
        edited(set_arm(1, draft_head="draft INT4 head")),
        edited(set_arm(1, spec_method="eagle3")),
        edited(lambda d: d["workload"].update(max_tokens=256)),
        edited(lambda d: d["workload"].update(seed=1)),
        edited(lambda d: d["identity"]["runtime"].update(image="vllm/vllm-openai-xpu:0.17.1")),
        edited(lambda d: d.update(ladders=[load_ladder()])),
    ]
    cells = [measured_cell(parts) for parts in others]
    assert honest not in cells and len(set(cells)) == len(cells)
    # the order arms and ladders are recorded in is no part of the cell
    assert measured_cell(edited(lambda d: d["arms"].reverse())) == honest


def test_a_load_sweep_s_rates_count_only_where_the_plan_gave_them() -> None:
    def sweep(derived: bool) -> Any:
        def add(document: dict[str, Any]) -> None:
            ladder = load_ladder()
            if derived:
                ladder["load"]["open_rates_from_users"] = 2
            document["ladders"] = [ladder]

        return add

    given, derived = packet_cell(edited(sweep(False))).load, packet_cell(edited(sweep(True))).load
    assert given is not None and given.rates_rps == [2.0]
    assert derived is not None and derived.rates_rps is None


def test_every_build_refuses_it_naming_the_file_and_field(tmp_path: Path) -> None:
    data = signed_data(tmp_path / "data")
    packets = tmp_path / "packets"
    packets.mkdir()
    honest = write_packet(seal_parts(claiming(measured_parts(), measured_cell(measured_parts()))), packets)
    assert load_catalog(data, packets).packets  # signed by a listed test key, published as it is
    forged = seal_parts(claiming(measured_parts(ms_per_token=26.0), measured_cell(measured_parts(variant="fp8"))))
    assert forged.packet.signed
    path = write_packet(forged, packets)
    for allow_unsigned in (False, True):
        with pytest.raises(CatalogError) as caught:
            load_catalog(data, packets, allow_unsigned=allow_unsigned)
        assert caught.value.field == "campaign.cell" and caught.value.file == str(path), caught.value
    assert honest.exists()
