"""Community recipes (`data/models/<slug>.yaml`): strict models of the format as it is really used.

Keys mirror the public community recipe repository; docs/recipe-format.md is the survey they
come from (every key, its type, how often real recipes use it). Unknown keys are errors.
Command composition lives in catalog/compose.py.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from catalog.base import EnvName, FieldError, Slug, StrictModel

Args = list[str]
Env = dict[EnvName, str]
HardwareStatus = Literal["verified", "unsupported"]
Support = Literal["supported", "unsupported"]


class Meta(StrictModel):
    title: str
    slug: Slug
    provider: str
    description: str
    date_added: date | None = None
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


# A missing install route is written `false` or left empty (null) in real recipes.
Install = dict[str, InstallNote | Literal[False] | None]
DockerImages = str | dict[str, str | dict[str, str]]


class DockerSource(StrictModel):
    mount_path: str


class ModelSection(StrictModel):
    model_id: str
    min_vllm_version: str | None = None
    default_frontend: str | None = None
    nightly_required: bool = False
    flashinfer_autotune: bool | None = None
    supports_dcp: bool | None = None
    docker_image: DockerImages | None = None
    docker_source: DockerSource | None = None
    install: Install = {}
    architecture: str
    parameter_count: str
    active_parameters: str | None = None
    context_length: int = Field(ge=0)  # omni (diffusion) recipes write 0
    base_args: Args = []
    base_env: Env = {}
    # This catalog's own key, not upstream's: a locally made model (data/models/demo.yaml), whose
    # packets must say identity.model.synthetic and whose speeds say nothing about real models.
    synthetic: bool = False


class Dependency(StrictModel):
    command: str
    note: str | None = None
    optional: bool = False
    brand: str | list[str] | None = None
    install_modes: list[Literal["pip", "docker"]] = []


class ArgsOverride(StrictModel):
    """Arguments and environment a feature or mode uses on one kind of hardware."""

    args: Args = []
    env: Env = {}


class FeatureMode(StrictModel):
    label: str | None = None
    description: str | None = None
    variants: list[str] = []
    args: Args = []
    env: Env = {}
    hardware: dict[str, Literal["unsupported"]] = {}
    hardware_overrides: dict[str, ArgsOverride] = {}


class Companion(StrictModel):
    label: str
    description: str | None = None
    command: str


class Feature(StrictModel):
    label: str | None = None
    description: str
    args: Args = []
    env: Env = {}
    extra_env: Env = {}
    strategies: list[str] = []
    variants: list[str] = []
    default_mode: str | None = None
    modes: dict[str, FeatureMode] = {}
    hardware_overrides: dict[str, ArgsOverride] = {}
    companion: Companion | None = None

    @model_validator(mode="after")
    def _default_mode_exists(self) -> Feature:
        if self.default_mode is not None and self.default_mode not in self.modes:
            raise ValueError(f"default_mode {self.default_mode!r} is not one of the modes")
        return self


class HardwareOverride(StrictModel):
    extra_args: Args = []
    extra_env: Env = {}


class VariantHardwareOverride(HardwareOverride):
    docker_image: DockerImages | None = None
    install: Install = {}


class Variant(StrictModel):
    model_id: str | None = None
    label: str | None = None
    precision: str
    precision_hardware: dict[str, str] = {}
    vram_minimum_gb: float = Field(gt=0)
    description: str | None = None
    tp: PositiveInt | dict[str, PositiveInt] | None = None
    min_vllm_version: str | None = None
    nightly_required: bool = False
    docker_image: DockerImages | None = None
    supported_hardware: list[str] = []
    default_modes: dict[str, str] = {}
    extra_args: Args = []
    extra_env: Env = {}
    hardware_overrides: dict[str, VariantHardwareOverride] = {}


class RoleConfig(StrictModel):
    """One pool of a disaggregated (prefill/decode) strategy."""

    parallelism: Literal["tp", "tep", "dep"] | None = None
    tp: int | None = Field(default=None, ge=1)
    nodes: int | dict[str, int] | None = None
    vllm_args: Args = []
    extra_args: Args = []
    env: Env = {}
    parallel_flag: str | None = None


class StrategyOverride(StrictModel):
    tp: PositiveInt | dict[str, PositiveInt] | None = None
    extra_args: Args = []
    vllm_args: Args = []
    env: Env = {}
    extra_env: Env = {}
    router: dict[str, int | str | bool] = {}
    pool_modes: list[Literal["tp", "tep", "dep"]] = []
    hardware_overrides: dict[str, HardwareOverride] = {}
    prefill: RoleConfig | None = None
    decode: RoleConfig | None = None


class HardwareNote(StrictModel):
    title: str
    body: str


class OmniTaskOverride(StrictModel):
    vram_minimum_gb: float | None = None
    extra_args: Args = []
    curl: str | None = None
    label: str | None = None
    endpoint: str | None = None
    model_id: str | None = None
    description: str | None = None


class OmniTask(StrictModel):
    id: str
    key: str | None = None
    label: str | None = None
    model_id: str | None = None
    vram_minimum_gb: float | None = None
    endpoint: str | None = None
    description: str | None = None
    extra_args: Args = []
    curl: str | None = None
    hardware_overrides: dict[str, OmniTaskOverride] = {}


class Omni(StrictModel):
    tasks: list[OmniTask | str]
    port: int | None = None
    task_label: str | None = None
    task_hint: str | None = None
    serve_binary: str | None = None


class Configuration(StrictModel):
    """A configuration the catalog measured, which the upstream recipe does not spell out: its
    variant on one card, with its environment switches and speculative config. Written in an
    overlay (data/overlays/<slug>.yaml), never in the upstream recipe file."""

    label: str
    description: str | None = None
    variant: str
    hardware: Slug
    tp: PositiveInt = 1
    features: list[str] | None = None  # None: the recipe's default features
    speculative_config: dict[str, str | int | float | bool] | None = None
    env: Env = {}
    extra_args: Args = []
    draft_head: str | None = None  # as a packet arm names it ("draft INT4 head"), to match arms
    # Packets measured (or imported) with it: linked from the recipe page when this catalog has them
    # (a measuring host's packets folder holds only its own, so an id elsewhere is not an error).
    packets: list[str] = []


class Recipe(StrictModel):
    meta: Meta
    model: ModelSection
    omni: Omni | None = None
    dependencies: list[Dependency] = []
    features: dict[str, Feature] = {}
    opt_in_features: list[str] = []
    hardware_opt_in_features: dict[str, list[str]] = {}
    variants: dict[str, Variant] = Field(min_length=1)
    compatible_strategies: list[str] = []
    default_strategy: str | None = None
    default_hardware: str | None = None  # misplaced upstream in a few recipes; meta's wins
    strategy_min_gpus: dict[str, int] = {}
    strategy_hardware: dict[str, dict[str, Support]] = {}
    kv_offload_support: dict[str, HardwareStatus] = {}
    hardware_overrides: dict[str, HardwareOverride] = {}
    hardware_notes: dict[str, HardwareNote] = {}
    strategy_overrides: dict[str, StrategyOverride] = {}
    guide: str = ""
    # This catalog's own key, set only by merging an overlay (catalog/overlay.py).
    configurations: dict[Slug, Configuration] = {}

    @model_validator(mode="after")
    def _references_resolve(self) -> Recipe:
        if "default" not in self.variants:
            raise FieldError("variants must include 'default'", "variants")
        for index, name in enumerate(self.opt_in_features):
            if name not in self.features:
                raise FieldError(f"opt-in list names unknown feature {name!r}", "opt_in_features", index)
        for hardware, names in self.hardware_opt_in_features.items():
            for index, name in enumerate(names):
                if name not in self.features:
                    raise FieldError(
                        f"opt-in list names unknown feature {name!r}", "hardware_opt_in_features", hardware, index
                    )
        if self.default_strategy and self.default_strategy not in self.compatible_strategies:
            raise FieldError(
                f"default_strategy {self.default_strategy!r} is not a compatible strategy", "default_strategy"
            )
        for name, feature in self.features.items():
            for variant in [*feature.variants, *(v for m in feature.modes.values() for v in m.variants)]:
                if variant not in self.variants:
                    raise FieldError(f"feature {name!r} names unknown variant {variant!r}", "features", name)
        return self

    def default_features(self) -> list[str]:
        """Features on unless asked otherwise: all of them minus the opt-in ones."""
        return [name for name in self.features if name not in self.opt_in_features]

    def variant_model_id(self, variant: str) -> str:
        return self.variants[variant].model_id or self.model.model_id
