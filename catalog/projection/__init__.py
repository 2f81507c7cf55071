"""How much faster could this get: physical ceilings, utilisation and estimates for every result.

Single-stream decode reads every weight once per token, so its ceiling is memory bandwidth ×
cards / bytes read per token; speculative decoding multiplies by the mean accepted length and
pays the draft's bytes; tensor parallelism adds collectives; prefill is bounded by compute.
Every projection lists each input with its value, unit and source, the formula as text and the
formula with numbers substituted. See docs/projections.md for the model and its calibration.

API:
- `project_arm(packet, arm, hardware, recipe) -> Projection | None`
- `project_packet(packet, hardware, recipe) -> list[Projection]`
- `project_catalog(packets, hardware_by_id, recipes_by_slug) -> dict[packet_id, list[Projection]]`
- `estimate_cell(packets, recipe, hardware, quantization=, tensor_parallel_size=, spec_depth=) -> CellEstimate | None`
- `project_load(packet, arm, sweep, hardware, recipe) -> LoadProjection | None` (many users at once)
- `OPTIMISATION_BANDS`, `band_for(utilisation)`, `ESTIMATE_RULE`
"""

from catalog.projection.bands import OPTIMISATION_BANDS, Band, band_for
from catalog.projection.estimate import ESTIMATE_RULE, estimate_cell
from catalog.projection.facts import ArchitectureFacts, Fact, resolve_architecture
from catalog.projection.models import (
    BasisArm,
    ByteTerm,
    CellEstimate,
    OptimisationGrade,
    PrefillBound,
    Projection,
    ProjectionInput,
)
from catalog.projection.multiuser import LoadProjection, project_load
from catalog.projection.project import (
    project_arm,
    project_catalog,
    project_packet,
)

__all__ = [
    "ESTIMATE_RULE",
    "OPTIMISATION_BANDS",
    "ArchitectureFacts",
    "Band",
    "BasisArm",
    "ByteTerm",
    "CellEstimate",
    "Fact",
    "LoadProjection",
    "OptimisationGrade",
    "PrefillBound",
    "Projection",
    "ProjectionInput",
    "band_for",
    "estimate_cell",
    "project_arm",
    "project_catalog",
    "project_load",
    "project_packet",
    "resolve_architecture",
]
