"""Accelerators and hosts: `data/hardware.yaml`."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from catalog.model.base import FieldError, Slug, StrictModel

Platform = Literal["xpu", "cuda", "cpu"]
_TRADEMARKS = re.compile(r"\((?:R|TM|C)\)", re.IGNORECASE)


class Figure(StrictModel):
    """A number with the place it comes from."""

    value: float = Field(gt=0, description="The number.")
    source: str = Field(min_length=1, description="Where the number comes from (a datasheet, a page).")


class Interconnect(StrictModel):
    name: str = Field(description="Card-to-card link (e.g. PCIe 5.0 x16).")
    bandwidth_gb_s: Figure = Field(description="Link bandwidth, GB/s.")


class Hardware(StrictModel):
    id: Slug = Field(description="Card id other files refer to.")
    name: str = Field(description="Card name as pages show it.")
    vendor: str = Field(description="Maker of the card (NVIDIA, AMD, Intel).")
    platform: Platform = Field(description="vLLM platform the card runs (xpu, cuda, cpu).")
    generation: str = Field(
        description="Architecture generation (e.g. battlemage, blackwell): a hardware override key."
    )
    docker_image: str | None = Field(default=None, description="vLLM docker image for the card.")
    memory_gb: Figure = Field(description="Accelerator memory, GB.")
    memory_type: str = Field(description="Memory technology (GDDR6, HBM3e).")
    memory_bandwidth_gb_s: Figure = Field(description="Peak memory bandwidth, GB/s: the projection's physical limit.")
    compute_tflops_bf16: Figure | None = Field(default=None, description="Peak dense BF16 compute, TFLOPS.")
    compute_tops_int8: Figure | None = Field(default=None, description="Peak dense INT8 compute, TOPS.")
    interconnect: Interconnect | None = Field(default=None, description="Card-to-card link.")
    board_power_w: Figure | None = Field(
        default=None,
        description="Rated board power of one card, watts: the bound verification holds every measured power to.",
    )
    memory_energy_pj_per_bit: Figure | None = Field(
        default=None,
        description="Energy the card's memory devices spend per bit read, picojoules: the floor verification "
        "holds a window's energy to (every step reads the weights).",
    )
    notes: str | None = Field(default=None, description="Free text about the card.")
    # Words of the name the vendor tool reports for this card (`xpu-smi discovery`, `nvidia-smi`),
    # trademarks dropped: preflight refuses a card none of them names (a B60 is never a B70).
    device_names: list[str] = Field(
        default=[],
        description="Words of the name the vendor tool reports: preflight refuses a card none of them names.",
    )

    def names_device(self, reported: str) -> bool:
        """Whether a name the vendor tool reported holds one of `device_names` as whole words,
        trademarks dropped ("Pro B70" names "Intel(R) Arc(TM) Pro B70 Graphics", never "Pro B700")."""
        plain = " ".join(_TRADEMARKS.sub("", reported).split()).lower()
        return any(re.search(rf"(?<![\w]){re.escape(name.lower())}(?![\w])", plain) for name in self.device_names)

    @model_validator(mode="after")
    def _accelerators_name_their_device(self) -> Hardware:
        if self.platform != "cpu" and not self.device_names:
            raise FieldError("an accelerator needs device_names, the names its vendor tool reports", "device_names")
        return self


class HardwareFile(StrictModel):
    schema_version: Literal[1] = Field(description="Hardware file format version.")
    hardware: list[Hardware] = Field(min_length=1, description="Every card, each id once.")

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
