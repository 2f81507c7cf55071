"""Community recipes (`data/models/<slug>.yaml`): strict models of the format as it is really used.

Keys mirror the public community recipe repository; see docs/recipe-format.md for the survey.
Command composition lives in catalog/compose.py.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field, model_validator

from catalog.base import Slug, StrictModel

Args = list[str]
Env = dict[str, str]
HardwareStatus = Literal["verified", "unsupported", "experimental", "untested", "community"]


class Meta(StrictModel):
    title: str
    slug: Slug
    provider: str
    description: str
    date_added: date
    date_updated: date
    difficulty: Literal["beginner", "intermediate", "advanced", "hard"]
    tasks: list[str] = []
    performance_headline: str | None = None
    related_recipes: list[str] = []
    default_hardware: str | None = None
    hardware: dict[str, HardwareStatus] = {}


class InstallNote(StrictModel):
    note: str | None = None
    command: str | None = None


DockerImages = str | dict[str, str | dict[str, str]]


class ModelSection(StrictModel):
    model_id: str
    min_vllm_version: str | None = None
    default_frontend: str | None = None
    nightly_required: bool = False
    docker_image: DockerImages | None = None
    install: dict[str, InstallNote] = {}
    dependencies: list[str] = []
    architecture: str
    parameter_count: str
    active_parameters: str | None = None
    context_length: int = Field(gt=0)
    base_args: Args = []
    base_env: Env = {}


class ArgsOverride(StrictModel):
    """Arguments and environment a feature or mode adds on one kind of hardware."""

    args: Args = []
    env: Env = {}


class FeatureMode(StrictModel):
    label: str | None = None
    description: str | None = None
    variants: list[str] = []
    args: Args = []
    env: Env = {}
    hardware_overrides: dict[str, ArgsOverride] = {}


class Feature(StrictModel):
    label: str | None = None
    description: str
    args: Args = []
    env: Env = {}
    strategies: list[str] = []
    variants: list[str] = []
    default_mode: str | None = None
    modes: dict[str, FeatureMode] = {}
    hardware_overrides: dict[str, ArgsOverride] = {}

    @model_validator(mode="after")
    def _default_mode_exists(self) -> Feature:
        if self.default_mode is not None and self.default_mode not in self.modes:
            raise ValueError(f"default_mode {self.default_mode!r} is not one of the modes")
        return self


class HardwareOverride(StrictModel):
    extra_args: Args = []
    extra_env: Env = {}


class Variant(StrictModel):
    model_id: str | None = None
    label: str | None = None
    precision: str
    precision_hardware: dict[str, str] = {}
    vram_minimum_gb: float = Field(gt=0)
    description: str
    tp: int | None = Field(default=None, ge=1)
    min_vllm_version: str | None = None
    docker_image: DockerImages | None = None
    extra_args: Args = []
    extra_env: Env = {}
    hardware_overrides: dict[str, HardwareOverride] = {}


class Recipe(StrictModel):
    meta: Meta
    model: ModelSection
    features: dict[str, Feature] = {}
    opt_in_features: list[str] = []
    variants: dict[str, Variant] = Field(min_length=1)
    compatible_strategies: list[str] = []
    default_strategy: str | None = None
    strategy_min_gpus: dict[str, int] = {}
    hardware_overrides: dict[str, HardwareOverride] = {}
    strategy_overrides: dict[str, StrategyOverride] = {}
    guide: str = ""

    @model_validator(mode="after")
    def _references_resolve(self) -> Recipe:
        for name in self.opt_in_features:
            if name not in self.features:
                raise ValueError(f"opt_in_features names unknown feature {name!r}")
        if self.default_strategy and self.default_strategy not in self.compatible_strategies:
            raise ValueError(f"default_strategy {self.default_strategy!r} is not a compatible strategy")
        for name, feature in self.features.items():
            for variant in [*feature.variants, *(v for m in feature.modes.values() for v in m.variants)]:
                if variant not in self.variants:
                    raise ValueError(f"feature {name!r} names unknown variant {variant!r}")
        return self

    def default_features(self) -> list[str]:
        """Features on unless asked otherwise: all of them minus the opt-in ones."""
        return [name for name in self.features if name not in self.opt_in_features]

    def variant_model_id(self, variant: str) -> str:
        return self.variants[variant].model_id or self.model.model_id


class RoleConfig(StrictModel):
    """One pool of a disaggregated (prefill/decode) strategy."""

    parallelism: str | None = None
    tp: int | None = Field(default=None, ge=1)
    dp: int | None = Field(default=None, ge=1)
    vllm_args: Args = []
    env: Env = {}


class StrategyOverride(StrictModel):
    extra_args: Args = []
    args: Args = []
    env: Env = {}
    extra_env: Env = {}
    router: dict[str, int | str | bool] = {}
    hardware_overrides: dict[str, HardwareOverride] = {}
    prefill: RoleConfig | None = None
    decode: RoleConfig | None = None


Recipe.model_rebuild()
