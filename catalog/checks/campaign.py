"""A packet's fleet campaign cell (`campaign.cell`) is the cell its own contents describe
(catalog/model/campaign.py): a signer cannot claim a cell it did not measure, so a re-run of the
plan never skips that cell as done, and pages never count its packet as one of that cell's repeats."""

from __future__ import annotations

from catalog.model.campaign import measured_cell
from catalog.model.packet import Packet

Problem = tuple[str, str]


def campaign_problems(packet: Packet) -> list[Problem]:
    ref = packet.campaign
    if ref is None:
        return []
    cell = measured_cell(packet)
    if cell is None:
        kind = packet.provenance.kind
        return [("campaign", f"names a fleet campaign cell, but the packet is {kind}: only a measured packet is one")]
    if ref.cell != cell:
        return [
            (
                "campaign.cell",
                f"is {ref.cell}, but what this packet measured (its model, card, runtime, arms, ladders and "
                f"workload) is cell {cell}: a packet may claim only the cell it measured",
            )
        ]
    return []
