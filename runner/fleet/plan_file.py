"""A campaign plan file, `campaigns/<name>.yaml`: the matrix a fleet measures, strict like every data file.

    name: nightly-b70                  # the file's own name, campaigns/<name>.yaml
    repeats: 3                         # independent repeats of every cell (each its own packet)
    attempts: 2                        # tries of a failing cell before it is reported; never more
    host_losses: 2                     # times Ray re-runs a cell whose host died (Ray's max_retries)
    timeout_s: 3600                    # wall-clock limit of one try of one cell
    max_tokens: 512
    ladders: [concurrency]
    concurrency: [1, 2, 4, 8]
    matrix:
      - model: qwen3.5-4b
        variants: [w4a16, fp8-dynamic]
        hardware: [arc_pro_b70, arc_pro_b60]
        tp: [1, 2]
        depths: [0, 3]                 # the arms of each cell: the oracle and MTP depth 3
    exclude:
      - {model: qwen3.5-4b, hardware: arc_pro_b60, tp: 2}

A cell is one `make measure` (one campaign, one packet): a model, variant, card and TP with its
depths as arms. runner/fleet/cells.py expands the matrix and checks every cell against data/.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from catalog.errors import CatalogError
from catalog.model.base import FieldError, Slug, StrictModel
from catalog.store.documents import Loc, line_of, read_document, validate_as
from runner.plan import LadderKind, LoadSweepOptions

DEFAULT_TIMEOUT_S = 4 * 3600


class MatrixEntry(StrictModel):
    """One block of the matrix: every combination of its lists is a cell."""

    model: Slug = Field(description="Recipe slug (data/models/<slug>.yaml).")
    variants: list[Slug] = Field(default=["default"], min_length=1, description="Recipe variants to measure.")
    hardware: list[Slug] = Field(min_length=1, description="Card ids (data/hardware.yaml).")
    tp: list[int] = Field(default=[1], min_length=1, description="Tensor parallel sizes (cards per server).")
    depths: list[int] = Field(
        default=[0], min_length=1, description="Speculative depths measured in each cell (0, the oracle, always is)."
    )
    configuration: Slug | None = Field(
        default=None, description="A measured configuration of the recipe's overlay (data/overlays)."
    )
    ladders: list[LadderKind] | None = Field(default=None, description="Ladders of this block (default: the plan's).")
    timeout_s: float | None = Field(
        default=None, gt=0, description="Per-cell limit of this block (default: the plan's)."
    )

    @field_validator("tp")
    @classmethod
    def _cards(cls, sizes: list[int]) -> list[int]:
        if any(size < 1 or size > 16 for size in sizes):
            raise ValueError("tensor parallel sizes must be between 1 and 16")
        return sizes

    @field_validator("depths")
    @classmethod
    def _depths(cls, depths: list[int]) -> list[int]:
        if any(depth < 0 or depth > 16 for depth in depths):
            raise ValueError("depths must be between 0 and 16")
        return sorted({0, *depths})

    @field_validator("variants", "hardware", "tp")
    @classmethod
    def _no_repeats(cls, values: list[str] | list[int]) -> list[str] | list[int]:
        if len(set(values)) != len(values):
            raise ValueError("lists a value twice")
        return values


class Exclusion(StrictModel):
    """Cells left out of the matrix on purpose: every key given must match, the rest is any."""

    model: Slug | None = None
    variant: Slug | None = None
    hardware: Slug | None = None
    tp: int | None = None

    @model_validator(mode="after")
    def _names_something(self) -> Exclusion:
        if not self.model_fields_set:
            raise ValueError("an exclusion names at least one of model, variant, hardware, tp")
        return self


class CampaignPlan(StrictModel):
    name: Slug = Field(description="The plan's name: its file is campaigns/<name>.yaml.")
    description: str | None = Field(default=None, description="What the campaign is for.")
    repeats: int = Field(default=1, ge=1, le=20, description="Independent repeats of every cell, each its own packet.")
    attempts: int = Field(
        default=2, ge=1, le=5, description="Tries of a cell whose runner failed before it is reported failed."
    )
    host_losses: int = Field(
        default=2, ge=0, le=10, description="Times Ray re-runs a cell whose host died (Ray's max_retries)."
    )
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, description="Wall-clock limit of one try of one cell.")
    runtime: Literal["local", "docker"] = Field(
        default="local", description="How each host runs vLLM: its local install or the recipe's image."
    )
    max_tokens: int = Field(default=512, ge=101, le=8192, description="Completion tokens per prompt.")
    seed: int = Field(default=1234, description="Sampling seed of every request.")
    health_timeout_s: float = Field(default=900.0, gt=0, description="Seconds a fresh server may take to be ready.")
    ladders: list[LadderKind] = Field(default=[], description="Ladders of every cell (concurrency, context, load).")
    concurrency: list[int] | None = Field(default=None, min_length=1, description="Users per concurrency step.")
    load: LoadSweepOptions | None = Field(default=None, description="The load sweep's settings (ladder load).")
    matrix: list[MatrixEntry] = Field(min_length=1, description="Blocks whose every combination is a cell.")
    exclude: list[Exclusion] = Field(default=[], description="Cells left out on purpose.")

    @model_validator(mode="after")
    def _load_needs_its_ladder(self) -> CampaignPlan:
        if self.load is not None and "load" not in self.ladders:
            raise FieldError("is a load sweep setting: add load to ladders", "load")
        return self


@dataclass(frozen=True)
class PlanFile:
    """A plan with the file it came from, so a problem found later names the line it is on."""

    plan: CampaignPlan
    path: Path
    text: str

    def line(self, loc: Loc) -> int | None:
        return line_of(self.text, loc)


def load_plan(path: Path) -> PlanFile:
    """The plan a file holds, or a CatalogError naming the file, line and field."""
    text, data = read_document(path)
    plan = validate_as(CampaignPlan, data, path, text)
    if plan.name != path.stem:
        raise CatalogError(
            f"the plan is named {plan.name!r} but its file is {path.name}: name it {path.stem!r} or rename the file",
            file=path,
            field="name",
            line=line_of(text, ("name",)),
        )
    return PlanFile(plan, path, text)
