"""The recipe page `recipes/<slug>/`: the guide, and a command builder whose every command is
composed in Python by catalog.recipes.compose; the page script only looks commands up, never composes.
A credential a recipe writes (HF_TOKEN: ..., --api-key ...) is shown as <redacted>.

There is one command per variant x card x feature set x TP size; the speculative depth is not
multiplied in but is a slot (DEPTH_SLOT) the script fills with the chosen depth, the substitution
`with_depth` makes. Commands share most of their lines, so the page carries each distinct line (of
the one-flag-per-line shell and docker forms) once, and every command as the indices of its
pieces: the script joins them back with newlines. That keeps a recipe with five features and two
TP sizes under 100 KB where whole strings took 150 KB for one. Without JavaScript the page lists
the default command and each single opt-in feature, for every variant on every card."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from itertools import pairwise, product

from markupsafe import Markup

from builder import routes
from builder.format import Num, listed, num
from builder.markdown import render_markdown
from builder.views.common import Fact, Link, SiteContext
from builder.views.energy import arm_energy
from catalog.recipes.compose import FRONTEND_NOT_APPLIED, Selection, compose, compose_configuration
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Recipe
from catalog.recipes.shown import arm_command, arm_configuration

# Every feature subset is precomputed when the page stays small; past this many commands only the
# default set and each single toggle away from it are (the script says so for other combinations).
# 1024 per TP size, as before TP was a choice; the depth is a slot, not a multiple.
MAX_COMMANDS = 2048
GENERIC = "generic"
TP_SIZES = (1, 2)
DEPTHS = (1, 2, 3, 4, 5, 6)
# Stands for num_speculative_tokens in a precomputed command; the page replaces it with the chosen depth.
DEPTH_SLOT = 987654321
SPEC_FLAG = "--speculative-config"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


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
class ConfigurationView:
    """A configuration of the catalog's packets (from the recipe's overlay), with its command."""

    name: str
    label: str
    description: str
    hardware_name: str
    shell: str
    docker: str | None
    packets: list[Link]
    differences: list[str]  # what its packets' sources measured otherwise (an image no registry serves)


@dataclass(frozen=True)
class EnergyCost:
    """A measured result's J per output token, for the builder's cost per million tokens (site.js)."""

    label: str
    href: str
    j_per_token: Num


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
    tp_sizes: list[int]
    depths: list[int]
    default_depth: int | None
    configurations: list[ConfigurationView]
    energy_costs: list[EnergyCost]
    # the states of the packets the configurations list, in words (`imported`, `measured and imported`):
    # the section is named by what its packets are, never "measured" for an import
    configuration_states: str = ""


@dataclass(frozen=True)
class RecipeEvidence:
    """What a recipe page shows of its family's packets, made where they are held whole
    (builder/assemble.py), for the recipe page made beside the site's others from listings: each
    arm's energy cost, and how each measured configuration's command differs from what its
    packets' source ran."""

    energy_costs: list[EnergyCost]
    differences: dict[str, list[str]]  # configuration name -> "field: words (packet ids)"


NO_EVIDENCE = RecipeEvidence([], {})


def recipe_evidence(ctx: SiteContext, slug: str) -> RecipeEvidence:
    recipe = ctx.catalog.recipes.get(slug)
    return RecipeEvidence(energy_costs(ctx, slug), _differences(recipe, ctx) if recipe else {})


def _differences(recipe: Recipe, ctx: SiteContext) -> dict[str, list[str]]:
    """For each overlay configuration, how its command differs from what the packets it lists ran."""
    found = {}
    for name, config in recipe.configurations.items():
        card = ctx.catalog.hardware.get(config.hardware)
        if card is None:
            continue
        differing: dict[str, set[str]] = {}
        for packet in (ctx.catalog.packets[p] for p in config.packets if p in ctx.catalog.packets):
            for arm in packet.arms:
                shown = (
                    arm_command(packet, arm, recipe, card) if arm_configuration(recipe, packet, arm) == name else None
                )
                for d in shown.differences if shown else ():
                    differing.setdefault(f"{d.field}: {d.words('this command', 'the source')}", set()).add(packet.id)
        found[name] = [f"{words} ({', '.join(sorted(ids))})" for words, ids in sorted(differing.items())]
    return found


def energy_costs(ctx: SiteContext, slug: str) -> list[EnergyCost]:
    """Every arm of this model with a valid energy figure: its card, configuration and J/token.
    Reads the family's packets whole: made where they are held (builder/assemble.py), for the recipe
    page made beside the site's others from listings."""
    found = []
    for packet_id in ctx.catalog.family_ids(slug):
        packet = ctx.catalog.packets[packet_id]
        if packet.provenance.kind != "measured":
            continue
        hardware = ctx.catalog.hardware.get(packet.identity.host.hardware)
        for arm in packet.arms:
            figure = arm_energy(packet, arm)
            if arm.state.has_speed and figure.valid and figure.j_per_token is not None:
                card = hardware.name if hardware else packet.identity.host.hardware
                label = f"{packet.identity.model.quantization_label} · {arm.label} · {card}"
                found.append(EnergyCost(label, routes.packet_page(packet.id, arm.id), figure.j_per_token))
    return found


def _hardware_options(recipe: Recipe, known: dict[str, Hardware]) -> tuple[list[HardwareOption], list[Fact]]:
    options = [HardwareOption(GENERIC, "Any GPU (no hardware overrides)", "generic", None)]
    unknown = []
    for hw_id, status in recipe.meta.hardware.items():
        if hw_id in known:
            options.append(HardwareOption(hw_id, known[hw_id].name, status, routes.hardware_page(hw_id)))
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


# How a command splits into shared pieces: both the shell and the docker form are one flag per
# line, so a piece is a line, and joining a command's pieces with newlines gives it back byte for
# byte, whatever it holds (a split and a join on one separator are inverse). Shell and docker
# lines share one list: `  --flag value \\` reads the same in both.
SEPARATOR = "\n"


def _key(variant: str, hardware: str, bits: tuple[bool, ...], tp: int = 1) -> str:
    return f"{variant}|{hardware}|" + "".join("1" if b else "0" for b in bits) + f"|{tp}"


def spec_depth(args: list[str]) -> int | None:
    """num_speculative_tokens in a command's --speculative-config, if it has one."""
    for flag, value in pairwise(args):
        if flag == SPEC_FLAG:
            try:
                config = json.loads(value)
            except ValueError:
                return None
            depth = config.get("num_speculative_tokens") if isinstance(config, dict) else None
            return depth if isinstance(depth, int) else None
    return None


def with_depth(args: list[str], depth: int) -> list[str]:
    """The same --speculative-config with num_speculative_tokens set to `depth` (key order kept)."""
    out = list(args)
    for i, flag in enumerate(out[:-1]):
        if flag == SPEC_FLAG:
            config = json.loads(out[i + 1])
            config["num_speculative_tokens"] = depth
            out[i + 1] = json.dumps(config, separators=(",", ":"))
    return out


def image_digests(ctx: SiteContext, slug: str) -> dict[str, str]:
    """Docker image -> the sha256 digest a packet of this model recorded for it (the newest)."""
    newest: dict[str, tuple[tuple[str, str], str]] = {}  # image -> (created, packet id), digest
    for packet_id in ctx.catalog.family_ids(slug):
        packet = ctx.catalog.listing[packet_id]
        if packet.image and packet.image_digest and DIGEST.match(packet.image_digest):
            order = (packet.created.isoformat() if packet.created else "", packet.id)
            if packet.image not in newest or order > newest[packet.image][0]:
                newest[packet.image] = (order, packet.image_digest)
    return {image: digest for image, (_, digest) in newest.items()}


def _command(
    recipe: Recipe, selection: Selection, depth: int | None, digests: dict[str, str]
) -> tuple[str, str | None, bool]:
    """Shell and docker text of the composed command, its speculative depth set to `depth` when it
    has one (and `depth` is given); the flag says whether it has one."""
    command = compose(recipe, selection).redacted()
    has_depth = spec_depth(command.args) is not None and str(DEPTH_SLOT) not in " ".join(command.args)
    if depth is not None and has_depth:
        command = replace(command, args=with_depth(command.args, depth))
    digest = digests.get(command.docker_image or "")
    return command.shell_multiline(), command.docker_multiline(digest), has_depth


def _commands(
    recipe: Recipe, hardware: list[HardwareOption], known: dict[str, Hardware], digests: dict[str, str]
) -> tuple[dict[str, object], bool, bool]:
    """One composed command per variant x card x feature set x TP size. The speculative depth is not
    multiplied in: a command that has one holds DEPTH_SLOT in its --speculative-config, and the page
    puts the chosen depth there (the same substitution `with_depth` makes here)."""
    names = list(recipe.features)
    combos = len(recipe.variants) * len(hardware) * len(TP_SIZES)
    subsets, every = _subsets(recipe, combos)
    pieces: list[str] = []  # lines, shared by the commands (shell and docker) that hold them
    index: dict[str, int] = {}
    table: dict[str, list[list[int] | int | None]] = {}
    any_depth = False

    def intern(text: str | None) -> list[int] | None:
        if text is None:
            return None
        ids = []
        for piece in text.split(SEPARATOR):
            if piece not in index:
                index[piece] = len(pieces)
                pieces.append(piece)
            ids.append(index[piece])
        return ids

    for variant, option, bits, tp in product(recipe.variants, hardware, subsets, TP_SIZES):
        card = known.get(option.id)
        features = [n for n, on in zip(names, bits, strict=True) if on]
        selection = Selection(variant=variant, hardware=card, features=features, tensor_parallel_size=tp)
        shell, docker, has_depth = _command(recipe, selection, DEPTH_SLOT, digests)
        table[_key(variant, option.id, bits, tp)] = [intern(shell), intern(docker), int(has_depth)]
        any_depth = any_depth or has_depth
    payload: dict[str, object] = {"features": names, "pieces": pieces, "commands": table, "depth_slot": str(DEPTH_SLOT)}
    return payload, every, any_depth


def _with(recipe: Recipe, feature: str) -> list[str]:
    """The default features and `feature`, in the recipe's order (the order the builder composes)."""
    return [n for n in recipe.features if n in recipe.default_features() or n == feature]


def recipe_view(recipe: Recipe, ctx: SiteContext, evidence: RecipeEvidence) -> RecipeView:
    known = ctx.catalog.hardware
    hardware, unknown = _hardware_options(recipe, known)
    digests = image_digests(ctx, recipe.meta.slug)
    commands, every, any_depth = _commands(recipe, hardware, known, digests)
    defaults = []
    default_features = recipe.default_features()
    opt_in = [name for name in recipe.features if name not in default_features]
    for variant, option in product(recipe.variants, hardware):
        card = known.get(option.id)
        shell, docker, _ = _command(recipe, Selection(variant=variant, hardware=card), None, digests)
        opt_ins = tuple(
            OptIn(
                recipe.features[name].label or name.replace("_", " "),
                _command(
                    recipe, Selection(variant=variant, hardware=card, features=_with(recipe, name)), None, digests
                )[0],
            )
            for name in opt_in
        )
        defaults.append(DefaultCommand(variant, option.id, option.name, shell, docker, opt_ins))
    recipe_depths = [
        d
        for v in recipe.variants
        if (d := spec_depth(compose(recipe, Selection(variant=v, features=list(recipe.features))).args)) is not None
    ]
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
    if model.default_frontend:
        facts.append(Fact("default frontend", model.default_frontend, FRONTEND_NOT_APPLIED))
    return RecipeView(
        energy_costs=evidence.energy_costs,
        slug=recipe.meta.slug,
        title=recipe.meta.title,
        provider=recipe.meta.provider,
        description=recipe.meta.description,
        facts=facts,
        guide_html=copyable_code(render_markdown(recipe.guide, shift_headings=1)),
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
        family_href=routes.family_page(recipe.meta.slug),
        tp_sizes=list(TP_SIZES),
        depths=list(DEPTHS) if recipe_depths or any_depth else [],
        default_depth=recipe_depths[0] if recipe_depths else None,
        configurations=_configurations(recipe, ctx, digests, evidence),
        configuration_states=_configuration_states(recipe, ctx),
    )


def _configuration_states(recipe: Recipe, ctx: SiteContext) -> str:
    """The states of the packets the overlay's configurations list, best evidence first, in words."""
    states = {
        ctx.catalog.listing[p].state
        for c in recipe.configurations.values()
        for p in c.packets
        if p in ctx.catalog.listing
    }
    words = [s.label.lower() for s in sorted(states, key=lambda s: s.rank)]
    return listed(words)


def copyable_code(html: Markup) -> Markup:
    """Give every code block of a guide a copy button (the page script copies the block's text)."""
    count = 0

    def wrap(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        block = f"guide-code-{count}"
        return (
            f'<div class="copyable"><pre id="{block}">{match.group(1)}</pre>'
            f'<button type="button" class="copy" data-copy="{block}" hidden>Copy</button></div>'
        )

    return Markup(re.sub(r"<pre>(.*?)</pre>", wrap, str(html), flags=re.S))  # noqa: S704 - rendered markdown


def _configurations(
    recipe: Recipe, ctx: SiteContext, digests: dict[str, str], evidence: RecipeEvidence
) -> list[ConfigurationView]:
    """The overlay's configurations, each with its command (docker pinned like the builder's)."""
    views = []
    for name, config in recipe.configurations.items():
        card = ctx.catalog.hardware[config.hardware]
        command = compose_configuration(recipe, name, card).redacted()
        packets = [Link(p, routes.packet_page(p)) for p in config.packets if p in ctx.catalog.listing]
        differences = evidence.differences.get(name, [])
        views.append(
            ConfigurationView(
                name,
                config.label,
                config.description or "",
                card.name,
                command.shell_multiline(),
                command.docker_multiline(digests.get(command.docker_image or "")),
                packets,
                differences,
            )
        )
    return views
