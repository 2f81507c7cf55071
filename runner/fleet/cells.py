"""A plan's cells: the matrix expanded, each cell checked against data/ before anything is dispatched.

A cell is one runner campaign (one packet per repeat): a model, variant, card and TP, with the
plan's depths as its arms. Its key is a hash of what it measures, so the same cell in an edited
plan keeps its key, and a re-run finds the repeats already in packets/ by it (CampaignRef).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from catalog.errors import UserError
from catalog.model.campaign import cell_id
from catalog.model.packet import CampaignRef, Packet
from catalog.store.repository import Catalog
from runner.fleet.plan_file import CampaignPlan, Exclusion, MatrixEntry, PlanFile
from runner.measure import plan_request
from runner.plan import CampaignRequest, LoadSweepOptions

# Every measuring host advertises one of this resource and every cell needs it: a host measures
# one cell at a time (a second job on the host would share its cards, PCIe and CPU).
HOST_RESOURCE = "measuring_host"


@dataclass(frozen=True)
class Cell:
    key: str  # 12 hex digits of the hash of what it measures (CampaignRef.cell)
    request: CampaignRequest
    runtime: Literal["local", "docker"]
    timeout_s: float
    entry: int  # the matrix block it came from

    @property
    def card(self) -> str:
        return self.request.hardware or ""

    @property
    def label(self) -> str:
        r = self.request
        depths = ",".join(map(str, r.depths))
        config = f" {r.configuration}" if r.configuration else ""
        return f"{r.model} {r.variant} {r.hardware} tp{r.tp} depths {depths}{config}"

    def resources(self) -> dict[str, float]:
        """What a host must advertise to run it: its cards, and the host to itself."""
        return {self.card: float(self.request.tp), HOST_RESOURCE: 1.0}


@dataclass(frozen=True)
class Job:
    """One repeat of one cell: one campaign on one host, one packet."""

    cell: Cell
    ref: CampaignRef

    @property
    def name(self) -> str:
        return f"{self.cell.key} r{self.ref.repeat}"

    @property
    def label(self) -> str:
        return f"{self.cell.label} · repeat {self.ref.repeat}/{self.ref.repeats}"

    def request(self) -> CampaignRequest:
        """The cell's request, salted with its campaign, round and repeat: each repeat is a campaign
        of its own (runner/plan.py campaign_id), never resuming another repeat's attempts."""
        ref = self.ref
        salt = f"fleet {ref.name} round {ref.round or '-'} cell {ref.cell} repeat {ref.repeat}"
        return self.cell.request.model_copy(update={"salt": salt})


@dataclass(frozen=True)
class Impossible:
    """A cell no host could measure, why, and where in the plan (the key of its matrix block at fault)."""

    label: str
    loc: tuple[str | int, ...]
    reason: str


# The option a runner error names -> the matrix key that chose it.
_FIELD_KEYS = {"MODEL": "model", "VARIANT": "variants", "HW": "hardware", "TP": "tp", "CONFIG": "configuration"}


def cell_key(request: CampaignRequest, runtime: str) -> str:
    return cell_id({"request": request.model_dump(mode="json"), "runtime": runtime})


def _excluded(exclusions: Iterable[Exclusion], model: str, variant: str, hardware: str, tp: int) -> bool:
    return any(
        (rule.model in (None, model))
        and (rule.variant in (None, variant))
        and (rule.hardware in (None, hardware))
        and (rule.tp in (None, tp))
        for rule in exclusions
    )


def _requests(plan: CampaignPlan, entry: MatrixEntry) -> list[CampaignRequest]:
    found = []
    for variant, hardware, tp in product(entry.variants, entry.hardware, entry.tp):
        if _excluded(plan.exclude, entry.model, variant, hardware, tp):
            continue
        ladders = entry.ladders if entry.ladders is not None else plan.ladders
        found.append(
            CampaignRequest(
                model=entry.model,
                variant=variant,
                hardware=hardware,
                tp=tp,
                depths=entry.depths,
                ladders=ladders,
                max_tokens=plan.max_tokens,
                seed=plan.seed,
                configuration=entry.configuration,
                load=(plan.load or LoadSweepOptions()) if "load" in ladders else None,
                **({"concurrency_levels": plan.concurrency} if plan.concurrency else {}),
            )
        )
    return found


def why_impossible(catalog: Catalog, request: CampaignRequest, runtime: str, data: Path) -> tuple[str, str] | None:
    """Why no host could measure this cell, from data/ alone (each host's preflight checks its
    own cards, weights and vLLM when the cell runs there), with the matrix key at fault; None
    when it is runnable."""
    try:
        plan_request(catalog, request, runtime == "docker", data)  # resolves and composes every arm
    except UserError as error:
        key = _FIELD_KEYS.get(error.field or "", "depths" if error.field == "features" else "model")
        return (f"{error.field}: {error.message}" if error.field else error.message), key
    recipe = catalog.recipes[request.model]
    hardware = catalog.hardware[request.hardware or ""]
    if recipe.meta.hardware.get(hardware.id) == "unsupported":
        return f"data/models/{request.model}.yaml marks {hardware.id} unsupported (meta.hardware)", "hardware"
    variant = recipe.variants[request.variant]
    if variant.supported_hardware and hardware.id not in variant.supported_hardware:
        limited = ", ".join(variant.supported_hardware)
        return f"variant {request.variant!r} is limited to {limited} (variants.supported_hardware)", "hardware"
    have = hardware.memory_gb.value * request.tp
    if variant.vram_minimum_gb > have:
        return (
            f"variant {request.variant!r} needs about {variant.vram_minimum_gb:g} GB; "
            f"{request.tp} x {hardware.name} have {have:g} GB (variants.vram_minimum_gb)"
        ), "tp"
    return None


def _loc(entry: MatrixEntry, index: int, key: str, request: CampaignRequest) -> tuple[str | int, ...]:
    """Where in the plan the value at fault is: the list item when the key is a list."""
    chosen = {"variants": request.variant, "hardware": request.hardware, "tp": request.tp}
    values: list[object] | None = getattr(entry, key, None) if key in chosen else None
    if values is not None and chosen[key] in values:
        return ("matrix", index, key, values.index(chosen[key]))
    return ("matrix", index, key)


def expand(planned: PlanFile, catalog: Catalog, data: Path) -> tuple[list[Cell], list[Impossible]]:
    """Every cell of the matrix, in order, each once; and the impossible ones with their reasons."""
    plan = planned.plan
    cells: list[Cell] = []
    impossible: list[Impossible] = []
    seen: set[str] = set()
    for index, entry in enumerate(plan.matrix):
        try:
            requests = _requests(plan, entry)
        except ValidationError as error:  # a request the runner's own model refuses
            impossible.append(Impossible(f"matrix[{index}] {entry.model}", ("matrix", index), error.errors()[0]["msg"]))
            continue
        for request in requests:
            key = cell_key(request, plan.runtime)
            cell = Cell(key, request, plan.runtime, entry.timeout_s or plan.timeout_s, index)
            if key in seen:
                continue  # two blocks naming one cell measure it once
            seen.add(key)
            found = why_impossible(catalog, request, plan.runtime, data)
            if found is None:
                cells.append(cell)
            else:
                reason, key = found
                impossible.append(Impossible(cell.label, _loc(entry, index, key, request), reason))
    return cells, impossible


def jobs_of(cells: Iterable[Cell], plan: CampaignPlan, round_name: str | None) -> list[Job]:
    """Every repeat of every cell, repeat 1 of every cell first: an interrupted campaign has as
    many cells measured once as it could, rather than a few cells measured many times."""
    cells = list(cells)
    return [
        Job(cell, CampaignRef(name=plan.name, round=round_name, cell=cell.key, repeat=repeat, repeats=plan.repeats))
        for repeat in range(1, plan.repeats + 1)
        for cell in cells
    ]


def finished(packets: Mapping[str, Packet], plan: CampaignPlan, round_name: str | None) -> dict[tuple[str, int], str]:
    """The jobs of this plan and round already in packets/: (cell, repeat) -> packet id."""
    done: dict[tuple[str, int], str] = {}
    for packet_id, packet in sorted(packets.items()):
        ref = packet.campaign
        if ref is not None and ref.name == plan.name and ref.round == round_name:
            done.setdefault((ref.cell, ref.repeat), packet_id)
    return done
