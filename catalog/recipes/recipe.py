"""Community recipes (`data/models/<slug>.yaml`): strict models of the format as it is really used.

Keys mirror the public community recipe repository; docs/recipe-format.md is the survey they
come from (every key, its type, how often real recipes use it). Unknown keys are errors.
Command composition lives in catalog/recipes/compose.py.
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from catalog.model.base import EnvName, FieldError, Slug, StrictModel
from catalog.recipes.model_facts import ModelFacts

Args = list[str]
Env = dict[EnvName, str]
HardwareStatus = Literal["verified", "unsupported"]
Support = Literal["supported", "unsupported"]


class Meta(StrictModel):
    title: str = Field(description="Model name as pages show it.")
    slug: Slug = Field(description="Short id; upstream's legacy slug, here the file name (data/models/<slug>.yaml).")
    provider: str = Field(description="Who publishes the model.")
    description: str = Field(description="One-paragraph summary of the model.")
    date_added: date | None = Field(default=None, description="Day the recipe was added.")
    date_updated: date = Field(description="Day the recipe was last changed.")
    difficulty: Literal["beginner", "intermediate", "advanced", "hard"] = Field(
        description="How hard the model is to serve."
    )
    tasks: list[str] = Field(default=[], description="What the model does (text, multimodal, omni).")
    performance_headline: str | None = Field(default=None, description="One-line performance summary from upstream.")
    related_recipes: list[str] = Field(default=[], description="Slugs of related recipes.")
    default_hardware: str | None = Field(default=None, description="Hardware id the command builder selects first.")
    hardware: dict[str, HardwareStatus] = Field(
        default={}, description="Per hardware id: verified (tested upstream) or unsupported."
    )


class InstallNote(StrictModel):
    note: str | None = Field(default=None, description="Text shown with the install route.")
    command: str | None = Field(default=None, description="Install command shown for the route.")


# A missing install route is written `false` or left empty (null) in real recipes.
Install = dict[str, InstallNote | Literal[False] | None]
DockerImages = str | dict[str, str | dict[str, str]]


class DockerSource(StrictModel):
    mount_path: str = Field(description="Source checkout bind-mounted into the container and put on PYTHONPATH.")


class ModelSection(StrictModel):
    model_id: str = Field(description="Hugging Face repository of the default checkpoint.")
    min_vllm_version: str | None = Field(default=None, description="Oldest vLLM version that serves the model.")
    default_frontend: str | None = Field(
        default=None, description="API server frontend the recipe selects by default (e.g. rust)."
    )
    nightly_required: bool = Field(default=False, description="Whether a nightly vLLM build is needed.")
    flashinfer_autotune: bool | None = Field(
        default=None, description="Whether the command builder offers the FlashInfer autotune switch."
    )
    supports_dcp: bool | None = Field(
        default=None, description="Whether the command builder offers decode context parallelism."
    )
    docker_image: DockerImages | None = Field(
        default=None, description="Docker image: one for NVIDIA, or a map by brand (and, for NVIDIA, by CUDA version)."
    )
    docker_source: DockerSource | None = Field(
        default=None, description="A source checkout mounted into the container."
    )
    install: Install = Field(
        default={}, description="Install routes (pip, docker): a note and command, or false to hide the route."
    )
    architecture: str = Field(description="Architecture as upstream describes it (dense, MoE, hybrid).")
    parameter_count: str = Field(description="Total parameters as written (e.g. 9B).")
    active_parameters: str | None = Field(default=None, description="Parameters active per token, for MoE models.")
    context_length: int = Field(
        ge=0, description="Maximum context length in tokens (0 for omni diffusion recipes)."
    )  # omni (diffusion) recipes write 0
    base_args: Args = Field(default=[], description="vllm serve arguments every command starts with.")
    base_env: Env = Field(default={}, description="Environment variables every command sets.")
    # This catalog's own key, not upstream's: a locally made model (data/models/demo.yaml), whose
    # packets must say identity.model.synthetic and whose speeds say nothing about real models.
    synthetic: bool = Field(
        default=False,
        description="This catalog's own key: a locally made model whose packets must say identity.model.synthetic.",
    )


class Dependency(StrictModel):
    command: str = Field(description="Install step shown above vllm serve.")
    note: str | None = Field(default=None, description="Text shown with the step.")
    optional: bool = Field(default=False, description="Whether the step may be skipped.")
    brand: str | list[str] | None = Field(
        default=None, description="Hardware brand(s) the step applies to; absent: all."
    )
    install_modes: list[Literal["pip", "docker"]] = Field(
        default=[], description="Install routes the step applies to; absent: pip."
    )


class ArgsOverride(StrictModel):
    """Arguments and environment a feature or mode uses on one kind of hardware."""

    args: Args = Field(default=[], description="vllm serve arguments added on this hardware.")
    env: Env = Field(default={}, description="Environment variables set on this hardware.")


class FeatureMode(StrictModel):
    label: str | None = Field(default=None, description="Mode name as the command builder shows it.")
    description: str | None = Field(default=None, description="What the mode does.")
    variants: list[str] = Field(default=[], description="Variants the mode applies to; absent: all.")
    args: Args = Field(default=[], description="vllm serve arguments the mode adds.")
    env: Env = Field(default={}, description="Environment variables the mode sets.")
    hardware: dict[str, Literal["unsupported"]] = Field(
        default={}, description="Hardware keys on which the mode is unsupported."
    )
    hardware_overrides: dict[str, ArgsOverride] = Field(
        default={}, description="Arguments and environment the mode uses instead on a hardware key."
    )


class Companion(StrictModel):
    label: str = Field(description="Tab name of the helper process.")
    description: str | None = Field(default=None, description="What the helper process does.")
    command: str = Field(description="Command that starts the helper process.")


class Feature(StrictModel):
    label: str | None = Field(
        default=None, description="Feature name as the command builder shows it (default: the title-cased key)."
    )
    description: str = Field(description="What the feature does.")
    args: Args = Field(default=[], description="vllm serve arguments the feature adds.")
    env: Env = Field(default={}, description="Environment variables the feature sets.")
    extra_env: Env = Field(default={}, description="Upstream drift: never read (a feature's environment is env).")
    strategies: list[str] = Field(default=[], description="Strategy ids the feature applies to; absent: all.")
    variants: list[str] = Field(default=[], description="Variants the feature applies to; absent: all.")
    default_mode: str | None = Field(default=None, description="The mode selected first; a key of modes.")
    modes: dict[str, FeatureMode] = Field(default={}, description="Alternative settings of the feature, by name.")
    hardware_overrides: dict[str, ArgsOverride] = Field(
        default={}, description="Arguments and environment the feature uses instead on a hardware key."
    )
    companion: Companion | None = Field(
        default=None, description="A helper process the feature needs beside the server."
    )

    @model_validator(mode="after")
    def _default_mode_exists(self) -> Feature:
        if self.default_mode is not None and self.default_mode not in self.modes:
            raise ValueError(f"default_mode {self.default_mode!r} is not one of the modes")
        return self


class HardwareOverride(StrictModel):
    extra_args: Args = Field(default=[], description="vllm serve arguments appended on this hardware key.")
    extra_env: Env = Field(default={}, description="Environment variables added on this hardware key.")


class VariantHardwareOverride(HardwareOverride):
    docker_image: DockerImages | None = Field(
        default=None, description="Docker image the variant uses on this hardware."
    )
    install: Install = Field(default={}, description="Install routes on this hardware (false hides a route).")


class Variant(StrictModel):
    model_id: str | None = Field(
        default=None, description="Hugging Face repository of the variant's checkpoint (default: the model's)."
    )
    label: str | None = Field(default=None, description="Variant name as pages show it.")
    precision: str = Field(description="Weight precision (bf16, fp8, nvfp4, w4a16 ...).")
    precision_hardware: dict[str, str] = Field(
        default={}, description="Hardware the precision runs on ({brand?, generation?}), widening its default."
    )
    vram_minimum_gb: float = Field(gt=0, description="Accelerator memory needed to serve the variant, GB.")
    description: str | None = Field(default=None, description="What the variant is.")
    tp: PositiveInt | dict[str, PositiveInt] | None = Field(
        default=None, description="Tensor parallel size: one number, or one per hardware id."
    )
    min_vllm_version: str | None = Field(default=None, description="Oldest vLLM version that serves the variant.")
    nightly_required: bool = Field(default=False, description="Whether a nightly vLLM build is needed.")
    docker_image: DockerImages | None = Field(
        default=None, description="Docker image for the variant (same shapes as model.docker_image)."
    )
    supported_hardware: list[str] = Field(
        default=[], description="Hardware ids the variant is limited to; absent: all."
    )
    default_modes: dict[str, str] = Field(
        default={}, description="Per modal feature, the mode this variant selects (and turns the feature on)."
    )
    extra_args: Args = Field(default=[], description="vllm serve arguments the variant adds.")
    extra_env: Env = Field(default={}, description="Environment variables the variant sets.")
    hardware_overrides: dict[str, VariantHardwareOverride] = Field(
        default={}, description="What the variant adds on a hardware key."
    )


class RoleConfig(StrictModel):
    """One pool of a disaggregated (prefill/decode) strategy."""

    parallelism: Literal["tp", "tep", "dep"] | None = Field(
        default=None, description="Parallelism of the pool: tensor (tp), tensor+expert (tep) or data+expert (dep)."
    )
    tp: int | None = Field(default=None, ge=1, description="Tensor parallel size of one server of the pool.")
    nodes: int | dict[str, int] | None = Field(
        default=None, description="Nodes in the pool: one number, or one per hardware id."
    )
    vllm_args: Args = Field(default=[], description="vllm serve arguments of the pool's servers.")
    extra_args: Args = Field(default=[], description="vllm serve arguments appended for the pool.")
    env: Env = Field(default={}, description="Environment variables of the pool's servers.")
    parallel_flag: str | None = Field(
        default=None, description="Flag that sets the pool's parallel size, overriding the strategy's."
    )


class StrategyOverride(StrictModel):
    tp: PositiveInt | dict[str, PositiveInt] | None = Field(
        default=None, description="Tensor parallel size under the strategy: one number, or one per hardware id."
    )
    extra_args: Args = Field(default=[], description="vllm serve arguments appended under the strategy.")
    vllm_args: Args = Field(default=[], description="vllm serve arguments replacing the strategy's own.")
    env: Env = Field(default={}, description="Environment variables under the strategy.")
    extra_env: Env = Field(default={}, description="Environment variables added under the strategy.")
    router: dict[str, int | str | bool] = Field(
        default={}, description="Settings of the prefill/decode router (pd_cluster only)."
    )
    pool_modes: list[Literal["tp", "tep", "dep"]] = Field(
        default=[], description="Parallelism modes the prefill/decode pools may use (pd_cluster only)."
    )
    hardware_overrides: dict[str, HardwareOverride] = Field(
        default={}, description="What the strategy adds on a hardware key."
    )
    prefill: RoleConfig | None = Field(default=None, description="The prefill pool of a disaggregated strategy.")
    decode: RoleConfig | None = Field(default=None, description="The decode pool of a disaggregated strategy.")


class HardwareNote(StrictModel):
    title: str = Field(description="Heading of the note.")
    body: str = Field(description="Text of the note (Markdown).")


class OmniTaskOverride(StrictModel):
    vram_minimum_gb: float | None = Field(
        default=None, description="Accelerator memory the task needs on this hardware, GB."
    )
    extra_args: Args = Field(default=[], description="vllm serve arguments the task adds on this hardware.")
    curl: str | None = Field(default=None, description="Example request on this hardware.")
    label: str | None = Field(default=None, description="Task name on this hardware.")
    endpoint: str | None = Field(default=None, description="API endpoint of the task on this hardware.")
    model_id: str | None = Field(default=None, description="Checkpoint of the task on this hardware.")
    description: str | None = Field(default=None, description="What the task does on this hardware.")


class OmniTask(StrictModel):
    id: str = Field(description="Task id.")
    key: str | None = Field(default=None, description="Key the command builder selects the task by.")
    label: str | None = Field(default=None, description="Task name as pages show it.")
    model_id: str | None = Field(default=None, description="Checkpoint of the task (default: the model's).")
    vram_minimum_gb: float | None = Field(default=None, description="Accelerator memory the task needs, GB.")
    endpoint: str | None = Field(default=None, description="API endpoint of the task.")
    description: str | None = Field(default=None, description="What the task does.")
    extra_args: Args = Field(default=[], description="vllm serve arguments the task adds.")
    curl: str | None = Field(default=None, description="Example request.")
    hardware_overrides: dict[str, OmniTaskOverride] = Field(
        default={}, description="What the task changes on a hardware key."
    )


class Omni(StrictModel):
    tasks: list[OmniTask | str] = Field(
        description="The tasks an omni (multi-modal generation) model serves: full entries or ids."
    )
    port: int | None = Field(default=None, description="Port the omni server listens on.")
    task_label: str | None = Field(default=None, description="Heading of the task picker.")
    task_hint: str | None = Field(default=None, description="Hint shown under the task picker.")
    serve_binary: str | None = Field(default=None, description="Command that serves the model instead of vllm serve.")


class Configuration(StrictModel):
    """A configuration the catalog measured, which the upstream recipe does not spell out: its
    variant on one card, with its environment switches and speculative config. Written in an
    overlay (data/overlays/<slug>.yaml), never in the upstream recipe file."""

    label: str = Field(description="Configuration name as pages show it.")
    description: str | None = Field(default=None, description="What the configuration is and why it was measured.")
    variant: str = Field(description="The recipe (or overlay) variant it serves.")
    hardware: Slug = Field(description="Card id in data/hardware.yaml it was measured on.")
    tp: PositiveInt = Field(default=1, description="Tensor parallel size.")
    features: list[str] | None = Field(
        default=None, description="Features turned on; null: the recipe's default features."
    )  # None: the recipe's default features
    speculative_config: dict[str, str | int | float | bool] | None = Field(
        default=None, description="vLLM --speculative-config as a mapping; names its method."
    )
    env: Env = Field(default={}, description="Environment switches it sets.")
    extra_args: Args = Field(default=[], description="vllm serve arguments it adds.")
    draft_head: str | None = Field(
        default=None, description="The draft head as a packet arm names it, to match arms."
    )  # as a packet arm names it ("draft INT4 head"), to match arms
    # Packets measured (or imported) with it: linked from the recipe page when this catalog has them
    # (a measuring host's packets folder holds only its own, so an id elsewhere is not an error).
    packets: list[str] = Field(
        default=[], description="Ids of packets measured or imported with it, linked from the recipe page."
    )


class Recipe(StrictModel):
    meta: Meta = Field(description="Names, dates and hardware status of the recipe.")
    model: ModelSection = Field(description="The model and how every command starts.")
    omni: Omni | None = Field(default=None, description="Tasks of an omni (multi-modal generation) model.")
    dependencies: list[Dependency] = Field(default=[], description="Install steps shown above vllm serve.")
    features: dict[str, Feature] = Field(
        default={}, description="Optional features (speculative decoding, tool calling ...), by name."
    )
    opt_in_features: list[str] = Field(
        default=[], description="Features off unless asked for; every other feature is on by default."
    )
    hardware_opt_in_features: dict[str, list[str]] = Field(
        default={}, description="Per hardware id, features off unless asked for there."
    )
    variants: dict[str, Variant] = Field(
        min_length=1, description="Checkpoints and precisions, by name; must include default."
    )
    compatible_strategies: list[str] = Field(default=[], description="Deployment strategy ids the recipe supports.")
    default_strategy: str | None = Field(
        default=None, description="The strategy selected first; one of compatible_strategies."
    )
    default_hardware: str | None = Field(
        default=None, description="Upstream drift: misplaced meta.default_hardware (meta's wins)."
    )  # misplaced upstream in a few recipes; meta's wins
    strategy_min_gpus: dict[str, int] = Field(default={}, description="Minimum GPUs per strategy id or hardware id.")
    strategy_hardware: dict[str, dict[str, Support]] = Field(
        default={}, description="Per strategy, hardware keys on which it is supported or unsupported."
    )
    kv_offload_support: dict[str, HardwareStatus] = Field(
        default={}, description="KV cache offload options and whether each is verified or unsupported."
    )
    hardware_overrides: dict[str, HardwareOverride] = Field(
        default={}, description="What every command adds on a hardware key (card id, generation or brand)."
    )
    hardware_notes: dict[str, HardwareNote] = Field(default={}, description="Notes shown for a hardware key.")
    strategy_overrides: dict[str, StrategyOverride] = Field(
        default={}, description="What the recipe changes under a strategy."
    )
    guide: str = Field(default="", description="Serving guide (Markdown).")
    # This catalog's own key, set only by merging an overlay (catalog/recipes/overlay.py).
    configurations: dict[Slug, Configuration] = Field(
        default={}, description="This catalog's measured configurations, set only by merging an overlay."
    )
    # This catalog's own key, set only by merging an overlay: what a packet of the model is checked against.
    facts: ModelFacts | None = Field(
        default=None, description="The model's sourced facts (catalog/recipes/model_facts.py), set only by an overlay."
    )

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
