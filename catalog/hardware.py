"""Accelerators and hosts: `data/hardware.yaml`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from catalog.base import FieldError, Slug, StrictModel

Platform = Literal["xpu", "cuda", "cpu"]


class Figure(StrictModel):
    """A number with the place it comes from."""

    value: float = Field(gt=0)
    source: str = Field(min_length=1)


class Interconnect(StrictModel):
    name: str
    bandwidth_gb_s: Figure


class Hardware(StrictModel):
    id: Slug
    name: str
    vendor: str
    platform: Platform
    generation: str
    docker_image: str | None = None
    memory_gb: Figure
    memory_type: str
    memory_bandwidth_gb_s: Figure
    compute_tflops_bf16: Figure | None = None
    compute_tops_int8: Figure | None = None
    interconnect: Interconnect | None = None
    notes: str | None = None
    # Words of the name the vendor tool reports for this card (`xpu-smi discovery`, `nvidia-smi`),
    # trademarks dropped: preflight refuses a card none of them names (a B60 is never a B70).
    device_names: list[str] = []

    @model_validator(mode="after")
    def _accelerators_name_their_device(self) -> Hardware:
        if self.platform != "cpu" and not self.device_names:
            raise FieldError("an accelerator needs device_names, the names its vendor tool reports", "device_names")
        return self


class HardwareFile(StrictModel):
    schema_version: Literal[1]
    hardware: list[Hardware] = Field(min_length=1)

    @field_validator("hardware")
    @classmethod
    def _unique_ids(cls, hardware: list[Hardware]) -> list[Hardware]:
        seen: set[str] = set()
        for item in hardware:
            if item.id in seen:
                raise ValueError(f"duplicate hardware id {item.id!r}")
            seen.add(item.id)
        return hardware

    def by_id(self) -> dict[str, Hardware]:
        return {item.id: item for item in self.hardware}
