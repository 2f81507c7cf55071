"""A plan's cells: the matrix expanded, each cell checked against data/ before anything is dispatched.

A cell is one runner campaign (one packet per repeat): a model, variant, card and TP, with the
plan's depths as its arms. Its key is the id of what its packet will record of it
(catalog/model/campaign.py), so the same cell in an edited plan keeps its key, a re-run finds the
repeats already in packets/ by it (CampaignRef), and a packet counts as a repeat of the cell only
when its own contents are that cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from catalog.errors import UserError
from catalog.model.campaign import CellArm, CellFacts, LoadFacts, cell_id, measured_cell
from catalog.model.packet import CampaignRef, Packet
from catalog.store.repository import Catalog
from runner.campaign import arm_tp
from runner.fleet.plan_file import CampaignPlan, Exclusion, MatrixEntry, PlanFile
from runner.measure import planned_arms
from runner.plan import ArmPlan, CampaignRequest, LoadSweepOptions

# Every measuring host advertises one of this resource and every cell needs it: a host measures
# one cell at a time (a second job on the host would share its cards, PCIe and CPU).
HOST_RESOURCE = "measuring_host"


def request_label(r: CampaignRequest) -> str:
    depths = ",".join(map(str, r.depths))
    config = f" {r.configuration}" if r.configuration else ""
    return f"{r.model} {r.variant} {r.hardware} tp{r.tp} depths {depths}{config}"


@dataclass(frozen=True)
class Cell:
    key: str  # CampaignRef.cell: the id of what its packet will record (catalog/model/campaign.py)
    request: CampaignRequest
    runtime: Literal["local", "docker"]
    timeout_s: float
    entry: int  # the matrix block it came from

    @property
    def card(self) -> str:
        return self.request.hardware or ""

    @property
    def label(self) -> str:
        return request_label(self.request)

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


def cell_key(request: CampaignRequest, runtime: Literal["local", "docker"], arms: list[ArmPlan]) -> str:
    """The id of the cell its packet will prove it measured (catalog/model/campaign.py `packet_cell`):
    each fact as runner/campaign.py and runner/ladders.py will record it."""
    load = (request.load or LoadSweepOptions()) if "load" in request.ladders else None
    facts = CellFacts(
        model=request.model,
        variant=request.variant,
        hardware=request.hardware or "",
        runtime=runtime,
        arms=[CellArm(tp=arm_tp(a), depth=a.spec_depth, method=a.spec_method, draft_head=a.draft_head) for a in arms],
        ladders=list(request.ladders),
        suite=request.suite,
        canaries=request.canaries,
        max_tokens=request.max_tokens,
        seed=request.seed,
        concurrency=request.concurrency_levels if "concurrency" in request.ladders else None,
        # every load option but the closed-loop users; a new option fails here until it is decided on
        load=None if load is None else LoadFacts.model_validate(load.model_dump(exclude={"users"})),
    )
    return cell_id(facts)


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


def plan_cell(catalog: Catalog, request: CampaignRequest, runtime: str, data: Path) -> list[ArmPlan] | tuple[str, str]:
    """The arms a host will measure for this cell; or why no host could, from data/ alone (each
    host's preflight checks its own cards, weights and vLLM when the cell runs there), with the
    matrix key at fault."""
    try:
        arms = planned_arms(catalog, request, runtime == "docker", data)
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
    return arms


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
    asked: set[str] = set()
    by_key: dict[str, Cell] = {}
    for index, entry in enumerate(plan.matrix):
        try:
            requests = _requests(plan, entry)
        except ValidationError as error:  # a request the runner's own model refuses
            impossible.append(Impossible(f"matrix[{index}] {entry.model}", ("matrix", index), error.errors()[0]["msg"]))
            continue
        for request in requests:
            asking = request.model_dump_json()
            if asking in asked:
                continue  # two blocks naming one cell measure it once
            asked.add(asking)
            found = plan_cell(catalog, request, plan.runtime, data)
            if isinstance(found, tuple):
                reason, key = found
                impossible.append(Impossible(request_label(request), _loc(entry, index, key, request), reason))
                continue
            cell = Cell(
                cell_key(request, plan.runtime, found), request, plan.runtime, entry.timeout_s or plan.timeout_s, index
            )
            twin = by_key.setdefault(cell.key, cell)
            if twin is cell:
                cells.append(cell)
                continue
            impossible.append(
                Impossible(
                    cell.label,
                    ("matrix", index, "configuration") if request.configuration else ("matrix", index),
                    f"its packets could not be told from those of {twin.label}: they differ only in what a packet "
                    "does not record (a configuration is told by its speculative method and draft head: "
                    "catalog/model/campaign.py); give the configuration a draft_head of its own, or measure it in "
                    "a plan of its own",
                )
            )
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
    """The jobs of this plan and round already in packets/: (cell, repeat) -> packet id. A packet is
    one only where the cell it claims is the one its contents describe (catalog/model/campaign.py),
    as verification holds every packet to: one that claims another cell never makes a re-run skip it."""
    done: dict[tuple[str, int], str] = {}
    for packet_id, packet in sorted(packets.items()):
        ref = packet.campaign
        if ref is not None and ref.name == plan.name and ref.round == round_name and ref.cell == measured_cell(packet):
            done.setdefault((ref.cell, ref.repeat), packet_id)
    return done
