"""`make reproduce PACKET=<id>`: re-run the campaign a packet describes, then compare side by side.

The new packet names the one it reproduces; what matches (token arrays, gates) and how far the
numbers moved is printed, so a reader can check any claim with one command.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from catalog.numbers import fmt
from catalog.errors import CatalogError
from catalog.packet import Arm, Packet
from catalog.repository import Catalog
from runner.measure import Places, RuntimeChoice, measure
from runner.plan import CampaignRequest
from runner.progress import console_progress


def request_for(packet: Packet) -> CampaignRequest:
    model = packet.identity.model
    if model.variant is None:
        raise CatalogError("names no recipe variant, so its campaign cannot be re-run", field="identity.model.variant")
    ladders = sorted({ladder.kind for ladder in packet.ladders})
    return CampaignRequest(
        model=model.slug,
        variant=model.variant,
        hardware=packet.identity.host.hardware,
        tp=packet.arms[0].config.tensor_parallel_size,
        depths=sorted({arm.config.spec_depth for arm in packet.arms}),
        ladders=ladders,
        suite=packet.workload.suite_id,
        max_tokens=packet.workload.max_tokens,
        seed=packet.workload.seed if packet.workload.seed is not None else 1234,
    )


def same_tokens(before: Arm, after: Arm) -> tuple[int, int]:
    """Prompts whose token arrays are identical on the first server of each campaign."""
    if not before.servers or not after.servers:
        return 0, 0
    old = {row.prompt_id: row.token_ids for row in before.servers[0].rows}
    new = {row.prompt_id: row.token_ids for row in after.servers[0].rows}
    return sum(old.get(pid) == ids for pid, ids in new.items()), len(old)


def comparison(before: Packet, after: Packet) -> Table:
    table = Table(title=f"{after.id} reproduces {before.id}")
    for column in ("arm", "tokens identical", "gates before", "gates after", "tok/s before", "tok/s after", "moved"):
        table.add_column(column)
    by_depth = {arm.config.spec_depth: arm for arm in after.arms}
    for arm in before.arms:
        new = by_depth.get(arm.config.spec_depth)
        if new is None:
            table.add_row(arm.id, "not re-run", "", "", "", "", "")
            continue
        same, total = same_tokens(arm, new)
        old_rate, new_rate = arm.decode_tok_s, new.decode_tok_s
        moved = f"{(new_rate / old_rate - 1) * 100:+.1f} %" if old_rate and new_rate else "n/a"
        table.add_row(
            arm.id,
            f"{same}/{total}" if total else "no rows before",
            ", ".join(g.summary for g in arm.gates) or "none",
            ", ".join(g.summary for g in new.gates) or "none",
            fmt(old_rate) if old_rate else "n/a",
            fmt(new_rate) if new_rate else "n/a",
            moved,
        )
    return table


def reproduce(catalog: Catalog, packet_id: str, choice: RuntimeChoice, places: Places) -> int:
    original = catalog.packets.get(packet_id)
    if original is None:
        raise CatalogError(f"no packet {packet_id!r} in {places.packets}", field="PACKET")
    try:
        request = request_for(original)
    except CatalogError as error:
        raise CatalogError(error.message, file=catalog.packet_paths.get(packet_id), field=error.field) from None
    with console_progress() as progress:
        fresh = measure(catalog, request, choice, places, progress, reproduces=original.id)
    Console().print(comparison(original, fresh))
    return 0
