"""The commands the site shows beside a result, in one home: the builder renders them, and the
command check (catalog/checks/commands.py) holds each one's facts to the arm it stands beside.

- An arm that recorded its command shows it: `launch_argv` (the exact command, docker or the
  local module form) and `argv` (the portable `vllm serve` form), with the arm's environment.
- An arm whose source published no command (an imported or screened result) shows the closest
  command this catalog composes: the overlay configuration that lists its packet (its oracle form
  at depth 0), else the recipe's defaults with its speculative feature at the arm's depth; and,
  line by line, every fact in which that command differs from what the source measured.
- `make measure` lines measure what a packet measured afresh: its model, variant, card, card
  count, depths and ladders, and the configuration its arms ran (`arm_configuration`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, Literal, TypeVar

from catalog.model.packet import Arm, Packet
from catalog.recipes.command_facts import CommandFacts, Image, command_facts
from catalog.recipes.compose import (
    SPECULATIVE_CONFIG_FLAG,
    LaunchCommand,
    Selection,
    compose,
    configuration_selection,
    flag_groups,
)
from catalog.recipes.docker_run import DockerRun
from catalog.recipes.hardware import Hardware
from catalog.recipes.recipe import Configuration, Recipe
from catalog.recipes.recorded import Disagreement, disagreements, recorded_facts, unrecorded

_SHELL_SAFE_HOME = "$HOME/"
T = TypeVar("T")


@dataclass(frozen=True)
class ShownCommand:
    """What the site shows as the command of one arm, one flag per line.

    `kind`: `recorded` (the packet's own command) or `closest` (composed here: the source
    published none); `differences`: for a closest command, each fact it states otherwise than the
    source measured (docker form first, then what only the local form says)."""

    kind: Literal["recorded", "closest"]
    local: str
    docker: str | None
    local_argv: tuple[str, ...]
    docker_argv: tuple[str, ...] | None
    env: tuple[tuple[str, str], ...]
    configuration: str | None
    differences: tuple[Disagreement, ...]

    @property
    def exact(self) -> bool:
        return self.kind == "recorded"


def _quote(token: str) -> str:
    if token.startswith(_SHELL_SAFE_HOME) and not any(c in token[6:] for c in '$`"\\!\n'):
        return f'"{token}"'
    return shlex.quote(token)


def _line(tokens: Sequence[str]) -> str:
    return " ".join(_quote(t) for t in tokens)


def multiline(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """A command one flag per line (`\\` continuations), its variables first: the same tokens a
    shell reads from `shlex.join(argv)`, laid out to be read."""
    return _multiline(tuple(argv), tuple(sorted((env or {}).items())))


@lru_cache(maxsize=256)
def _multiline(argv: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> str:
    """Laid out once per command: the packets of a campaign recorded the same commands, and a
    packet page shows four (~10 us each laid out, ~0.04 ms a page)."""
    run = DockerRun.parse(argv)
    if run is not None:
        lines = [_line(run.head), *(f"  {_line(g)}" for g in flag_groups(run.options)), f"  {_line([run.image])}"]
        lines += [f"  {_line([run.model])}"] if run.model is not None else []
        lines += [f"  {_line(g)}" for g in flag_groups(run.args)]
    else:
        head: list[str] = []
        rest = list(argv)
        while rest and not rest[0].startswith("-"):
            head.append(rest.pop(0))
        if rest[:1] == ["-m"] and len(rest) > 1:  # `python -m module`: the module belongs to the program
            head += rest[:2]
            rest = rest[2:]
        lines = [_line(head), *(f"  {_line(g)}" for g in flag_groups(rest))]
    variables = [f"{name}={shlex.quote(value)} \\" for name, value in env]
    return "\n".join([*variables, " \\\n".join(lines)])


def _matches(config: Configuration, packet: Packet, arm: Arm) -> bool:
    model, config_arm = packet.identity.model, arm.config
    if packet.id not in config.packets or config.variant != model.variant:
        return False
    if config.hardware != packet.identity.host.hardware or config.tp != config_arm.tensor_parallel_size:
        return False
    if config_arm.spec_depth == 0:
        return True  # the configuration's oracle: its variant and card, no speculation, no draft switches
    spec = config.speculative_config or {}
    return spec.get("method") == config_arm.spec_method and config.draft_head == config_arm.draft_head


def arm_configuration(recipe: Recipe | None, packet: Packet, arm: Arm) -> str | None:
    """The overlay configuration that says it reproduces this arm: it lists the packet, and has the
    arm's variant, card, card count, speculative method and draft head (at depth 0, its oracle)."""
    if recipe is None:
        return None
    return next((name for name, c in recipe.configurations.items() if _matches(c, packet, arm)), None)


def spec_feature(recipe: Recipe) -> str | None:
    for name, feature in recipe.features.items():
        if SPECULATIVE_CONFIG_FLAG in [*feature.args, *(a for m in feature.modes.values() for a in m.args)]:
            return name
    return None


def with_spec_depth(command: LaunchCommand, depth: int) -> LaunchCommand:
    """`num_speculative_tokens` in the command's --speculative-config set to `depth`."""
    args: list[str] = []
    for group in flag_groups(command.args):
        if group[0] == SPECULATIVE_CONFIG_FLAG and len(group) == 2:
            config = json.loads(group[1])
            config["num_speculative_tokens"] = depth
            group = [SPECULATIVE_CONFIG_FLAG, json.dumps(config, separators=(",", ":"), sort_keys=True)]
        args.extend(group)
    return LaunchCommand(command.model_id, args, command.env, command.docker_image, command.platform)


def configuration_command(
    recipe: Recipe, name: str, hardware: Hardware | None, depth: int, *, source: str = "overlay"
) -> LaunchCommand:
    """A configuration's command at `depth`: at 0 its oracle (no speculative config, none of its
    env switches: they tune the draft), as `make measure CONFIG=` runs it."""
    config = recipe.configurations[name]
    if depth == 0:
        config = config.model_copy(update={"speculative_config": None, "env": {}})
    return compose(recipe, configuration_selection(config, hardware, depth or None), source=source)


def default_command(recipe: Recipe, variant: str, hardware: Hardware | None, tp: int, depth: int) -> LaunchCommand:
    """The recipe's default features (its speculative feature only at depth > 0, at that depth),
    as `make measure` without CONFIG= composes them."""
    spec = spec_feature(recipe)
    features = [f for f in recipe.default_features() if f != spec]
    if depth and spec:
        features.append(spec)
    command = compose(recipe, Selection(variant=variant, hardware=hardware, tensor_parallel_size=tp, features=features))
    return with_spec_depth(command, depth) if depth else command


def composed_for_arm(
    recipe: Recipe, packet: Packet, arm: Arm, hardware: Hardware | None
) -> tuple[LaunchCommand, str | None]:
    """The closest command this catalog composes for an arm, and the configuration it comes from."""
    variant = packet.identity.model.variant or ""
    depth = arm.config.spec_depth
    name = arm_configuration(recipe, packet, arm)
    if name is not None:
        return configuration_command(recipe, name, hardware, depth), name
    return default_command(recipe, variant, hardware, arm.config.tensor_parallel_size, depth), None


def arm_command(
    packet: Packet, arm: Arm, recipe: Recipe | None, hardware: Hardware | None, digests: Mapping[str, str] | None = None
) -> ShownCommand | None:
    """The command the site shows for `arm`; None when there is none to show (an imported result
    whose checkpoint is no recipe variant). `digests`: image -> sha256 digest a packet of the model
    recorded, to pin a composed docker command's image."""
    config = arm.config
    env = tuple(sorted(config.env.items()))
    if config.launch_argv or config.argv:
        local = list(config.argv) if config.argv else list(config.launch_argv)
        docker = list(config.launch_argv) if config.launch_argv and config.launch_argv[0] == "docker" else None
        return ShownCommand(
            "recorded",
            multiline(local, dict(env)),
            multiline(docker) if docker else None,
            tuple(local),
            tuple(docker) if docker else None,
            env,
            None,
            (),
        )
    model = packet.identity.model
    if recipe is None or model.variant is None or model.variant not in recipe.variants:
        return None
    composed, name = composed_for_arm(recipe, packet, arm, hardware)
    shown = composed.redacted()
    digest = (digests or {}).get(shown.docker_image or "")
    docker = shown.docker_argv(image=f"{shown.docker_image}@{digest}" if digest and shown.docker_image else None)
    local = shown.argv()
    recorded = recorded_facts(packet, arm)
    local_facts = command_facts(local, shown.env)
    found = disagreements(command_facts(docker), recorded, graph_label=config.graph_capture) if docker else []
    found += [
        d
        for d in [
            *disagreements(local_facts, recorded, graph_label=config.graph_capture),
            *unrecorded(local_facts, recorded),
        ]
        if d not in found
    ]
    return ShownCommand(
        "closest",
        multiline(local, shown.env),
        shown.docker_multiline(digest),
        tuple(local),
        tuple(docker) if docker else None,
        tuple(sorted(shown.env.items())),
        name,
        tuple(found),
    )


def unrunnable_image(packet: Packet) -> Image | None:
    """The image the packet ran when no one can pull it again: not named by a registry digest (a
    lab's patched build such as the source's R276 image). None: pullable, or a local install."""
    runtime = packet.identity.runtime
    if runtime.image is None and runtime.image_pinned is None:
        return None
    image = Image.parse(runtime.image_pinned or runtime.image or "")
    digest = runtime.image_digest or image.digest
    pinned = Image(image.repository, image.tag, digest)
    return None if pinned.pullable else pinned


@dataclass(frozen=True)
class MeasureLine:
    """A `make measure` line of a packet page: the arms it measures again and how."""

    text: str
    tp: int
    depths: tuple[int, ...]
    configuration: str | None
    arms: tuple[str, ...]  # the packet's arms this line measures again


def measure_lines(packet: Packet, recipe: Recipe | None) -> list[MeasureLine]:
    """`make measure` lines that measure what the packet measured: its model, recipe variant, card,
    card count, depths and ladders (and the docker runtime on XPU, as the runner serves it there).
    Arms that ran an overlay configuration are measured with CONFIG=, one line per configuration,
    each with the oracle at depth 0."""
    model = packet.identity.model
    if model.variant is None:
        return []
    kinds = sorted({ladder.kind for ladder in packet.ladders})
    lines = []
    for tp in sorted({a.config.tensor_parallel_size for a in packet.arms}):
        arms = [a for a in packet.arms if a.config.tensor_parallel_size == tp]
        groups: dict[str | None, list[Arm]] = {}
        for arm in arms:
            if arm.config.spec_depth:
                groups.setdefault(arm_configuration(recipe, packet, arm), []).append(arm)
        if not groups:
            groups[arm_configuration(recipe, packet, arms[0]) if arms else None] = []
        oracles = [a for a in arms if a.config.spec_depth == 0]
        for config, members in sorted(groups.items(), key=lambda item: item[0] or ""):
            depths = tuple(sorted({0, *(a.config.spec_depth for a in members)}))
            parts = [
                f"make measure MODEL={model.slug}",
                f"VARIANT={model.variant}",
                f"HW={packet.identity.host.hardware}",
                f"TP={tp}",
                "DEPTHS=" + ",".join(str(d) for d in depths),
            ]
            if kinds:
                parts.append("LADDERS=" + ",".join(kinds))
            if config:
                parts.append(f"CONFIG={config}")
            if packet.identity.runtime.platform == "xpu":
                parts.append("RUNTIME=docker")
            measured = tuple(a.id for a in [*oracles, *members])
            lines.append(MeasureLine(" ".join(parts), tp, depths, config, measured))
    return lines


def _line_command(
    recipe: Recipe, configuration: str | None, hardware: Hardware | None, tp: int, depth: int, variant: str
) -> LaunchCommand:
    """The command a `make measure` line runs at one depth (without the protocol's fixed flags,
    which the runner appends to every arm alike)."""
    if configuration is not None:
        return configuration_command(recipe, configuration, hardware, depth)
    return default_command(recipe, variant, hardware, tp, depth)


def measure_line_facts(
    recipe: Recipe, packet: Packet, line: MeasureLine, arm: Arm, hardware: Hardware | None
) -> CommandFacts:
    variant, docker = packet.identity.model.variant or "", bool(packet.identity.runtime.image)
    depth = arm.config.spec_depth
    return _line_facts(_Same(recipe), line.configuration, _Same(hardware), line.tp, depth, variant, docker)


class _Same(Generic[T]):
    """An object as a cache key by identity (a recipe or a card: models, not hashable by value); the
    key holds it, so its id is not reused while the entry lives."""

    __slots__ = ("held",)

    def __init__(self, held: T) -> None:
        self.held = held

    def __hash__(self) -> int:
        return id(self.held)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.held is self.held


@lru_cache(maxsize=64)
def _line_facts(
    recipe: _Same[Recipe],
    configuration: str | None,
    hardware: _Same[Hardware | None],
    tp: int,
    depth: int,
    variant: str,
    docker: bool,
) -> CommandFacts:
    """The facts of what a `make measure` line runs at one depth: the same for every packet of a
    family that measured that configuration, card and depth. Composed once (a build asks for them
    twice a packet, its check against data/ and its page; ~0.1 ms a packet page, 5 % of it)."""
    command = _line_command(recipe.held, configuration, hardware.held, tp, depth, variant)
    argv = command.docker_argv() if docker else None
    return command_facts(argv, command.env) if argv else command_facts(command.argv(), command.env)


def measure_line_differences(
    recipe: Recipe, packet: Packet, line: MeasureLine, hardware: Hardware | None
) -> list[tuple[Arm, Disagreement]]:
    """Every fact a `make measure` line runs otherwise than the arms it measures again recorded.
    The image is compared by its tag: a fresh measurement pulls the tag again."""
    found = []
    for arm_id in line.arms:
        arm = packet.arm(arm_id)
        facts = measure_line_facts(recipe, packet, line, arm, hardware)
        recorded = recorded_facts(packet, arm)
        for difference in disagreements(facts, recorded, graph_label=arm.config.graph_capture, by_tag=True):
            found.append((arm, difference))
    return found
