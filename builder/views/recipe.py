"""The recipe page `recipes/<slug>/`: the guide, and a command builder whose every command is
composed in Python by catalog.compose; the page script only looks commands up, never composes.
A credential a recipe writes (HF_TOKEN: ..., --api-key ...) is shown as <redacted>."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from markupsafe import Markup

from builder.format import Num, num
from builder.markdown import render_markdown
from builder.views.common import Fact, Link, SiteContext
from catalog.compose import Selection, compose, compose_configuration
from catalog.hardware import Hardware
from catalog.recipe import Recipe

# Every feature subset is precomputed when the page stays small; past this many commands only the
# default set and each single toggle away from it are (the script says so for other combinations).
MAX_COMMANDS = 1024
GENERIC = "generic"


@dataclass(frozen=True)
class VariantView:
    name: str
    label: str
    model_id: str
    precision: str
    vram_minimum_gb: Num
    description: str


@dataclass(frozen=True)
class FeatureView:
    name: str
    label: str
    description: str
    default_on: bool


@dataclass(frozen=True)
class HardwareOption:
    id: str
    name: str
    status: str
    href: str | None


@dataclass(frozen=True)
class DefaultCommand:
    variant: str
    hardware: str
    hardware_name: str
    shell: str
    docker: str | None


@dataclass(frozen=True)
class ConfigurationView:
    """A configuration the catalog measured (from the recipe's overlay), with its command."""

    name: str
    label: str
    description: str
    hardware_name: str
    shell: str
    docker: str | None
    packets: list[Link]


@dataclass(frozen=True)
class RecipeView:
    slug: str
    title: str
    provider: str
    description: str
    facts: list[Fact]
    guide_html: Markup
    variants: list[VariantView]
    features: list[FeatureView]
    hardware: list[HardwareOption]
    unknown_hardware: list[Fact]
    defaults: list[DefaultCommand]
    commands: dict[str, object]
    every_subset: bool
    family_href: str
    configurations: list[ConfigurationView]


def _hardware_options(recipe: Recipe, known: dict[str, Hardware]) -> tuple[list[HardwareOption], list[Fact]]:
    options = [HardwareOption(GENERIC, "Any GPU (no hardware overrides)", "generic", None)]
    unknown = []
    for hw_id, status in recipe.meta.hardware.items():
        if hw_id in known:
            options.append(HardwareOption(hw_id, known[hw_id].name, status, f"hardware/{hw_id}/index.html"))
        else:
            unknown.append(Fact(hw_id, status, "not in data/hardware.yaml: no command is composed for it"))
    return options, unknown


def _subsets(recipe: Recipe, combos: int) -> tuple[list[tuple[bool, ...]], bool]:
    names = list(recipe.features)
    default = tuple(name in recipe.default_features() for name in names)
    if combos * 2 ** len(names) <= MAX_COMMANDS:
        return [tuple(bits) for bits in product((False, True), repeat=len(names))], True
    flipped = [tuple(not b if i == j else b for j, b in enumerate(default)) for i in range(len(names))]
    return [default, *flipped], False


def _key(variant: str, hardware: str, bits: tuple[bool, ...]) -> str:
    return f"{variant}|{hardware}|" + "".join("1" if b else "0" for b in bits)


def _commands(
    recipe: Recipe, hardware: list[HardwareOption], known: dict[str, Hardware]
) -> tuple[dict[str, object], bool]:
    names = list(recipe.features)
    subsets, every = _subsets(recipe, len(recipe.variants) * len(hardware))
    strings: list[str] = []
    index: dict[str, int] = {}
    table: dict[str, list[int]] = {}

    def intern(text: str | None) -> int:
        if text is None:
            return -1
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    for variant, option, bits in product(recipe.variants, hardware, subsets):
        card = known.get(option.id)
        features = [n for n, on in zip(names, bits, strict=True) if on]
        command = compose(recipe, Selection(variant=variant, hardware=card, features=features)).redacted()
        table[_key(variant, option.id, bits)] = [intern(command.shell_multiline()), intern(command.docker_shell())]
    return {"features": names, "strings": strings, "commands": table}, every


def recipe_view(recipe: Recipe, ctx: SiteContext) -> RecipeView:
    known = ctx.catalog.hardware
    hardware, unknown = _hardware_options(recipe, known)
    commands, every = _commands(recipe, hardware, known)
    defaults = []
    for variant, option in product(recipe.variants, hardware):
        command = compose(recipe, Selection(variant=variant, hardware=known.get(option.id))).redacted()
        defaults.append(
            DefaultCommand(variant, option.id, option.name, command.shell_multiline(), command.docker_shell())
        )
    model = recipe.model
    facts = [
        Fact("model", model.model_id),
        Fact("architecture", model.architecture),
        Fact(
            "parameters",
            model.parameter_count + (f" ({model.active_parameters} active)" if model.active_parameters else ""),
        ),
        Fact("context length", num(model.context_length, 0, "tokens")),
        Fact("minimum vLLM", model.min_vllm_version or "not stated"),
        Fact("difficulty", recipe.meta.difficulty),
        Fact("updated", recipe.meta.date_updated.isoformat()),
    ]
    return RecipeView(
        slug=recipe.meta.slug,
        title=recipe.meta.title,
        provider=recipe.meta.provider,
        description=recipe.meta.description,
        facts=facts,
        guide_html=render_markdown(recipe.guide, shift_headings=1),
        variants=[
            VariantView(
                name,
                v.label or name,
                recipe.variant_model_id(name),
                v.precision,
                num(v.vram_minimum_gb, 0, "GB"),
                v.description or "",
            )
            for name, v in recipe.variants.items()
        ],
        features=[
            FeatureView(name, f.label or name.replace("_", " "), f.description, name in recipe.default_features())
            for name, f in recipe.features.items()
        ],
        hardware=hardware,
        unknown_hardware=unknown,
        defaults=defaults,
        commands=commands,
        every_subset=every,
        family_href=f"models/{recipe.meta.slug}/index.html",
        configurations=_configurations(recipe, ctx),
    )


def _configurations(recipe: Recipe, ctx: SiteContext) -> list[ConfigurationView]:
    views = []
    for name, config in recipe.configurations.items():
        card = ctx.catalog.hardware[config.hardware]
        command = compose_configuration(recipe, name, card).redacted()
        packets = [Link(p, f"packets/{p}/index.html") for p in config.packets if p in ctx.catalog.packets]
        views.append(
            ConfigurationView(
                name,
                config.label,
                config.description or "",
                card.name,
                command.shell_multiline(),
                command.docker_shell(),
                packets,
            )
        )
    return views
