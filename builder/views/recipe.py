"""The recipe page `recipes/<slug>/`: the guide, and a command builder whose every command is
composed in Python by catalog.compose; the page script only looks commands up, never composes.
A credential a recipe writes (HF_TOKEN: ..., --api-key ...) is shown as <redacted>.

Commands share most of their lines, so the page carries each distinct line (of the one-flag-per-
line shell form) and flag (of the one-line docker form) once, and every command as the indices of
its pieces: the script joins them back (shell by newlines, docker by spaces). That keeps a recipe
with five features under 100 KB where whole strings took 150 KB. Without JavaScript the page
lists the default command and each single opt-in feature, for every variant on every card."""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product

from markupsafe import Markup

from builder.format import Num, num
from builder.markdown import render_markdown
from builder.views.common import Fact, SiteContext
from catalog.compose import Selection, compose
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
class OptIn:
    feature: str
    shell: str


@dataclass(frozen=True)
class DefaultCommand:
    variant: str
    hardware: str
    hardware_name: str
    shell: str
    docker: str | None
    opt_ins: tuple[OptIn, ...] = ()


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


# How a command splits into shared pieces; joining the pieces with the same separator gives the
# command back byte for byte, whatever it holds (a split and a join on one separator are inverse).
SHELL_SEPARATOR = "\n"
DOCKER_SEPARATOR = " "
_DOCKER_PIECES = re.compile(r" (?=--)")


def _key(variant: str, hardware: str, bits: tuple[bool, ...]) -> str:
    return f"{variant}|{hardware}|" + "".join("1" if b else "0" for b in bits)


def _commands(
    recipe: Recipe, hardware: list[HardwareOption], known: dict[str, Hardware]
) -> tuple[dict[str, object], bool]:
    names = list(recipe.features)
    subsets, every = _subsets(recipe, len(recipe.variants) * len(hardware))
    pieces: list[str] = []
    index: dict[str, int] = {}
    table: dict[str, list[list[int] | None]] = {}

    def intern(parts: list[str]) -> list[int]:
        for part in parts:
            if part not in index:
                index[part] = len(pieces)
                pieces.append(part)
        return [index[part] for part in parts]

    for variant, option, bits in product(recipe.variants, hardware, subsets):
        card = known.get(option.id)
        features = [n for n, on in zip(names, bits, strict=True) if on]
        command = compose(recipe, Selection(variant=variant, hardware=card, features=features)).redacted()
        docker = command.docker_shell()
        table[_key(variant, option.id, bits)] = [
            intern(command.shell_multiline().split(SHELL_SEPARATOR)),
            None if docker is None else intern(_DOCKER_PIECES.split(docker)),
        ]
    return {"features": names, "pieces": pieces, "commands": table}, every


def _with(recipe: Recipe, feature: str) -> list[str]:
    """The default features and `feature`, in the recipe's order (the order the builder composes)."""
    return [n for n in recipe.features if n in recipe.default_features() or n == feature]


def recipe_view(recipe: Recipe, ctx: SiteContext) -> RecipeView:
    known = ctx.catalog.hardware
    hardware, unknown = _hardware_options(recipe, known)
    commands, every = _commands(recipe, hardware, known)
    defaults = []
    default_features = recipe.default_features()
    opt_in = [name for name in recipe.features if name not in default_features]
    for variant, option in product(recipe.variants, hardware):
        card = known.get(option.id)
        command = compose(recipe, Selection(variant=variant, hardware=card)).redacted()
        opt_ins = tuple(
            OptIn(
                recipe.features[name].label or name.replace("_", " "),
                compose(recipe, Selection(variant=variant, hardware=card, features=_with(recipe, name)))
                .redacted()
                .shell_multiline(),
            )
            for name in opt_in
        )
        defaults.append(
            DefaultCommand(variant, option.id, option.name, command.shell_multiline(), command.docker_shell(), opt_ins)
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
    )
