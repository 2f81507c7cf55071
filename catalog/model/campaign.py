"""What a fleet campaign's cell is, as its packet proves it: the one rule the runner (runner/fleet/
cells.py, before anything is measured) and verification (catalog/checks/campaign.py, on every
packet) share.

A packet's `campaign.cell` (CampaignRef) is the id of its `CellFacts`: what a plan chooses for a
cell, each as the packet records it, so a signer cannot claim a cell its packet does not describe,
and a re-run of the plan cannot be made to skip a cell no packet measured:

- the model, variant and card, and the runtime (docker where identity.runtime names an image);
- each arm's tensor parallel size, depth, speculative method and draft head (how the catalog tells
  an overlay configuration's arms from the recipe's own: catalog/recipes/shown.py);
- the kinds of ladder run, the concurrency ladder's users, and the load sweep's seed, requests per
  level, SLO, lag bound and open-loop rates (None where they were fractions of a measured rate);
- the workload: suite, canary set, max tokens and seed.

What a packet does not record exactly is left out: a configuration's name, and its env switches and
arguments beyond method and draft head (the env and argv a packet records are scrubbed of the
measuring host's paths and pinned to the revision it found, so the head planning the cell cannot
know them), and the load sweep's closed-loop users (a level the server cannot hold is skipped). Two
cells that differ only there are one cell as far as any packet can tell: runner/fleet/cells.py
refuses a plan holding both, and an edit there keeps a cell's id (a new round measures it again).
"""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from catalog.model.base import StrictModel
from catalog.model.load_sweep import Slo
from catalog.model.packet import Packet, PacketParts
from catalog.packets.canonical import canonical_sha256


class CellArm(StrictModel):
    tp: int
    depth: int
    method: str | None
    draft_head: str | None


class LoadFacts(StrictModel):
    seed: int
    requests_per_level: int
    slo: Slo
    lag_bound_ms: float
    rates_rps: list[float] | None


class CellFacts(StrictModel):
    model: str
    variant: str | None
    hardware: str
    runtime: Literal["local", "docker"]
    arms: list[CellArm]
    ladders: list[str]
    suite: str
    canaries: str | None
    max_tokens: int
    seed: int | None
    concurrency: list[int] | None
    load: LoadFacts | None

    # In an order of their own, so the plan's order and the packet's give one id.
    @field_validator("arms")
    @classmethod
    def _arms_in_order(cls, arms: list[CellArm]) -> list[CellArm]:
        return sorted(arms, key=lambda a: (a.tp, a.depth, a.method or "", a.draft_head or ""))

    @field_validator("ladders")
    @classmethod
    def _ladders_in_order(cls, ladders: list[str]) -> list[str]:
        return sorted(set(ladders))


def cell_id(facts: CellFacts) -> str:
    """12 hex digits of the hash of what a cell measures."""
    return canonical_sha256(facts.model_dump(mode="json"))[:12]


def packet_cell(packet: Packet | PacketParts) -> CellFacts:
    """The cell a packet's contents describe."""
    identity, workload = packet.identity, packet.workload
    concurrency = next((ladder.concurrency for ladder in packet.ladders if ladder.kind == "concurrency"), None)
    sweep = next((ladder.load for ladder in packet.ladders if ladder.load is not None), None)
    load = None
    if sweep is not None:
        given = sweep.open_rates_from_users is None
        load = LoadFacts(
            seed=sweep.seed,
            requests_per_level=sweep.requests_per_level,
            slo=sweep.slo,
            lag_bound_ms=sweep.lag_bound_ms,
            rates_rps=[level.rate_rps for level in sweep.levels if level.rate_rps is not None] if given else None,
        )
    return CellFacts(
        model=identity.model.slug,
        variant=identity.model.variant,
        hardware=identity.host.hardware,
        runtime="local" if identity.runtime.image is None else "docker",
        arms=[
            CellArm(tp=c.tensor_parallel_size, depth=c.spec_depth, method=c.spec_method, draft_head=c.draft_head)
            for c in (arm.config for arm in packet.arms)
        ],
        ladders=[ladder.kind for ladder in packet.ladders],
        suite=workload.suite_id,
        canaries=workload.canary_set_id,
        max_tokens=workload.max_tokens,
        seed=workload.seed,
        concurrency=None if concurrency is None else [point.users for point in concurrency],
        load=load,
    )


def measured_cell(packet: Packet | PacketParts) -> str | None:
    """The id of the cell this packet measured, from its own contents; None for an imported or
    screened packet, which no fleet campaign measured."""
    return cell_id(packet_cell(packet)) if packet.provenance.kind == "measured" else None
